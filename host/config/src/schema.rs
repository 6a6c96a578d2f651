//! The config's JSON Schema, for editors (taplo, Even Better TOML) and for
//! the reference page: made from the raw types (`raw.rs`, `bot.rs`), their
//! doc comments and their defaults.

use serde_json::{Map, Value};

/// The JSON Schema (draft 2020-12) of a config file. TOML has no null, so
/// an optional key's schema is its value's alone: the `null` schemars
/// allows for a Rust `Option` is taken out.
pub fn schema() -> Value {
    let mut schema = schemars::schema_for!(super::raw::RawConfig).to_value();
    drop_null(&mut schema);
    schema
}

fn drop_null(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Array(types)) = map.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let only = types.remove(0);
                    map.insert("type".into(), only);
                }
            }
            if let Some(Value::Array(options)) = map.get("anyOf") {
                let kept: Vec<Value> = options
                    .iter()
                    .filter(|o| o.get("type").and_then(Value::as_str) != Some("null"))
                    .cloned()
                    .collect();
                if kept.len() == 1
                    && let Value::Object(only) = &kept[0]
                {
                    map.remove("anyOf");
                    merge(map, only);
                } else {
                    map.insert("anyOf".into(), Value::Array(kept));
                }
            }
            map.values_mut().for_each(drop_null);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_null),
        _ => {}
    }
}

/// `from`'s keys into `into`, keeping `into`'s own (a property's
/// description and default over its type's).
fn merge(into: &mut Map<String, Value>, from: &Map<String, Value>) {
    for (key, value) in from {
        into.entry(key.clone()).or_insert_with(|| value.clone());
    }
}
