//! `config.md` and `session-switch.schema.json`, from the config's JSON
//! Schema ([`session_switch_config::schema`]): the raw types' keys, doc
//! comments and defaults.

use super::markdown::{banner, cell};
use serde_json::{Map, Value};

/// The schema as editors read it (pretty JSON, one trailing newline).
pub fn schema_json() -> String {
    let mut text = serde_json::to_string_pretty(&session_switch_config::schema())
        .expect("a schema serialises");
    text.push('\n');
    text
}

/// The sections in the order a config file has them; every section of the
/// schema must be here (checked), so a new one cannot go unlisted.
const SECTIONS: [&str; 6] = ["xmpp", "redirect", "agents", "policy", "loop_guard", "bot"];

/// Every section and key: name, type, default, meaning.
pub fn markdown() -> String {
    let schema = session_switch_config::schema();
    let root = Doc { schema: &schema };
    let mut out = banner("the config's types (host/config/src/raw.rs, bot.rs)");
    out.push_str("# Config reference: `session-switch.toml`\n\n");
    out.push_str(&format!("{}\n\n", root.description(&schema)));
    out.push_str(
        "Default location: `$HERMES_HOME/session-switch.toml` (`HERMES_HOME` defaults to \
         `~/.hermes`); `--config PATH` names another file. Every error names the file and \
         the line. `examples/session-switch.toml` sets or shows every key below.\n\n\
         Editors that read JSON Schema (taplo, Even Better TOML) can check a config \
         against [`session-switch.schema.json`](session-switch.schema.json): put \
         `#:schema ./session-switch.schema.json` on the file's first line, or map the \
         file name to the schema in the editor's settings.\n",
    );
    let properties = root.properties(&schema);
    let required = required(&schema);
    for name in properties.keys() {
        assert!(
            SECTIONS.contains(&name.as_str()),
            "config section [{name}] is not in xtask's SECTIONS"
        );
    }
    for name in SECTIONS {
        let property = properties
            .get(name)
            .unwrap_or_else(|| panic!("no section [{name}] in the config schema"));
        root.section(&mut out, name, property, required.contains(&name));
    }
    out
}

/// The schema, to resolve `$ref`s against.
struct Doc<'a> {
    schema: &'a Value,
}

impl Doc<'_> {
    /// `schema` itself, or the definition its `$ref` names.
    fn resolve<'s>(&'s self, schema: &'s Value) -> &'s Value {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(reference) => {
                let name = reference.trim_start_matches("#/$defs/");
                &self.schema["$defs"][name]
            }
            None => schema,
        }
    }

    fn description(&self, schema: &Value) -> String {
        schema
            .get("description")
            .or_else(|| self.resolve(schema).get("description"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    }

    fn properties<'s>(&'s self, schema: &'s Value) -> Map<String, Value> {
        self.resolve(schema)
            .get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    }

    /// A table (`[name]`), an array of tables (`[[name]]`) or tables by
    /// name (`[name.NAME]`), when `schema` is one.
    fn table_of<'s>(&'s self, name: &str, schema: &'s Value) -> Option<(String, &'s Value)> {
        let own = self.resolve(schema);
        if own.get("properties").is_some() {
            return Some((format!("[{name}]"), own));
        }
        if let Some(items) = own.get("items")
            && self.resolve(items).get("properties").is_some()
        {
            return Some((format!("[[{name}]]"), self.resolve(items)));
        }
        if let Some(values) = own.get("additionalProperties")
            && self.resolve(values).get("properties").is_some()
        {
            return Some((format!("[{name}.NAME]"), self.resolve(values)));
        }
        None
    }

    /// `## [name]`, its description, a table of its keys, then its tables.
    fn section(&self, out: &mut String, name: &str, property: &Value, required: bool) {
        let (heading, table) = self
            .table_of(name, property)
            .unwrap_or_else(|| panic!("config section {name} is not a table"));
        let level = "#".repeat(1 + name.split('.').count());
        out.push_str(&format!("\n{level} `{heading}`\n\n"));
        // The key's own doc says what the section is for; its type's doc
        // is the Rust API's.
        out.push_str(&self.description(property));
        let at_least_one = self
            .resolve(property)
            .get("minItems")
            .and_then(Value::as_u64);
        out.push_str(match (required, at_least_one) {
            (true, _) => " Required.\n\n",
            (false, Some(n)) if n > 0 => " Required: at least one.\n\n",
            _ => " Optional.\n\n",
        });
        let keys = self.properties(table);
        let required_keys = required_of(table);
        let mut nested = Vec::new();
        out.push_str("| key | type | default | meaning |\n| --- | --- | --- | --- |\n");
        // Required keys first, then the rest in the schema's (alphabetical)
        // order.
        let mut keys: Vec<(&String, &Value)> = keys.iter().collect();
        keys.sort_by_key(|(key, _)| !required_keys.contains(&key.as_str()));
        for (key, schema) in keys {
            if self.table_of(key, schema).is_some() {
                nested.push((key, schema));
                continue;
            }
            let default = match schema.get("default") {
                Some(value) => format!("`{}`", toml_value(value)),
                None if required_keys.contains(&key.as_str()) => "required".into(),
                None => "unset".into(),
            };
            out.push_str(&format!(
                "| `{key}` | {} | {default} | {} |\n",
                self.type_name(schema),
                cell(&self.description(schema))
            ));
        }
        for (key, schema) in nested {
            self.section(out, &format!("{name}.{key}"), schema, false);
        }
    }

    /// A key's type as a person reads it: `integer ≥ 1`, `array of
    /// strings`, `"none" | "mentions" | "all"`.
    fn type_name(&self, schema: &Value) -> String {
        let own = self.resolve(schema);
        if let Some(options) = own
            .get("oneOf")
            .or(own.get("enum"))
            .and_then(Value::as_array)
        {
            return options
                .iter()
                .map(|o| {
                    let value = o.get("const").unwrap_or(o);
                    format!("`{value}`")
                })
                .collect::<Vec<_>>()
                .join(" \\| ");
        }
        let kind = own.get("type").and_then(Value::as_str).unwrap_or("any");
        let mut text = match kind {
            "array" => {
                let item = own.get("items").map(|i| self.type_name(i));
                format!("array of {}s", item.as_deref().unwrap_or("value"))
            }
            other => other.to_string(),
        };
        let bound = |key: &str| own.get(key).and_then(Value::as_u64);
        match (bound("minimum"), bound("maximum")) {
            (Some(min), Some(max)) if min > 0 || max < u64::from(u32::MAX) => {
                text.push_str(&format!(" {min}–{max}"))
            }
            (Some(min), None) if min > 0 => text.push_str(&format!(" ≥ {min}")),
            _ => {}
        }
        if let Some(min) = bound("minItems").filter(|&m| m > 0) {
            text.push_str(&format!(", at least {min}"));
        }
        text
    }
}

fn required(schema: &Value) -> Vec<&str> {
    required_of(schema)
}

fn required_of(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// A default as TOML writes it.
pub fn toml_value(value: &Value) -> String {
    match value {
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(toml_value).collect::<Vec<_>>().join(", ")
        ),
        // JSON's string escapes are TOML's basic string's.
        other => other.to_string(),
    }
}
