//! `json.md`: the shapes of the CLI's `--json` answers, from their types
//! (`session_switch_contract::answers`).

use super::markdown::{banner, cell};
use schemars::{JsonSchema, schema_for};
use serde_json::Value;
use session_switch_contract::answers::{
    Admitted, Agent, BotCheck, Cleared, Context, Created, Doctor, DoctorLink, IsOwn, LegacyScript,
    PendingSend, RecordState, Resolved, Sent,
};

/// One command's answer: the command, what its document is, the shapes in
/// it (a heading and the type's schema each).
struct Answer {
    command: &'static str,
    document: &'static str,
    shapes: Vec<(&'static str, Value)>,
}

fn shape<T: JsonSchema>(heading: &'static str) -> (&'static str, Value) {
    (heading, schema_for!(T).to_value())
}

fn answers() -> Vec<Answer> {
    vec![
        Answer {
            command: "send",
            document: "an object",
            shapes: vec![shape::<Sent>("")],
        },
        Answer {
            command: "active",
            document: "an array: each agent's record, then each send not (yet) in the \
                       history, an object with `\"pending_send\": true`",
            shapes: vec![
                shape::<RecordState>("A record"),
                shape::<PendingSend>("A pending send"),
            ],
        },
        Answer {
            command: "clear",
            document: "an object",
            shapes: vec![shape::<Cleared>("")],
        },
        Answer {
            command: "resolve",
            document: "an object",
            shapes: vec![shape::<Resolved>("")],
        },
        Answer {
            command: "context",
            document: "an object: `resolve`'s keys and `messages`",
            shapes: vec![shape::<Context>("")],
        },
        Answer {
            command: "is-own",
            document: "an object",
            shapes: vec![shape::<IsOwn>("")],
        },
        Answer {
            command: "admit",
            document: "an object",
            shapes: vec![shape::<Admitted>("")],
        },
        Answer {
            command: "agents",
            document: "an array, one object per configured agent in the config's order",
            shapes: vec![shape::<Agent>("")],
        },
        Answer {
            command: "init-db",
            document: "an object",
            shapes: vec![shape::<Created>("")],
        },
        Answer {
            command: "install-legacy-script",
            document: "an object",
            shapes: vec![shape::<LegacyScript>("")],
        },
        Answer {
            command: "bot --once",
            document: "an object, on one line (the other answers are indented)",
            shapes: vec![shape::<BotCheck>("")],
        },
        Answer {
            command: "doctor",
            document: "an object: `ok` and the links checked, in order (printed also when a \
                       link failed: the exit status is then 1)",
            shapes: vec![shape::<Doctor>("The report"), shape::<DoctorLink>("A link")],
        },
    ]
}

pub fn markdown() -> String {
    let mut out = banner("the answers' types (wit/src/answers.rs)");
    out.push_str(
        "# JSON answers\n\n\
         With `--json`, each command prints one JSON document on stdout (and nothing \
         else); a failure prints one line on stderr and no document. The Python binding \
         (`session_switch.Bridge`) returns the same shapes as dicts and lists.\n\n\
         An object's keys come in alphabetical order. A key is never left out: a value \
         that is absent is `null`. Times are Unix seconds (a number with a fraction), \
         durations seconds.\n",
    );
    for answer in answers() {
        out.push_str(&format!(
            "\n## `{}`\n\n{}.\n",
            answer.command,
            capitalised(answer.document)
        ));
        for (heading, schema) in &answer.shapes {
            if !heading.is_empty() {
                out.push_str(&format!("\n### {heading}\n"));
            }
            if let Some(about) = schema.get("description").and_then(Value::as_str) {
                out.push_str(&format!("\n{about}\n"));
            }
            out.push_str("\n| key | type | meaning |\n| --- | --- | --- |\n");
            let properties = schema["properties"].as_object().expect("an object shape");
            for (key, property) in properties {
                let meaning = property
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                out.push_str(&format!(
                    "| `{key}` | {} | {} |\n",
                    type_name(property),
                    cell(meaning)
                ));
            }
        }
    }
    out
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// `string`, `number or null`, `array of strings`.
fn type_name(schema: &Value) -> String {
    match schema.get("type") {
        Some(Value::String(kind)) if kind == "array" => {
            let item = schema.get("items").map(type_name);
            format!("array of {}s", item.as_deref().unwrap_or("value"))
        }
        Some(Value::String(kind)) => kind.clone(),
        // A type of its own (schemars' `$ref`), whose shape has its own heading.
        None if schema.get("$ref").is_some() => "object".into(),
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any".into(),
    }
}
