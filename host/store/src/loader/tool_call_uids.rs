//! v31's pairing of tool rows with the uid their assistant row minted
//! (`agent/message_metadata.py`).

use std::collections::HashMap;

use serde_json::Value;

use super::content::py_strip;
use super::message::{Keys, Message};
use super::sql::{Cells, Col};

/// `agent/message_sanitization.py` `_expand_tool_id_variants`: the stripped
/// value and each stripped `|`-separated part.
fn id_variants(values: &[&Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for raw in values {
        let value = raw.as_str().map(py_strip).unwrap_or("");
        if value.is_empty() {
            continue;
        }
        let mut add = |s: &str| {
            if !out.iter().any(|o| o == s) {
                out.push(s.to_owned());
            }
        };
        add(value);
        for part in value.split('|').map(py_strip).filter(|p| !p.is_empty()) {
            add(part);
        }
    }
    out
}

/// `coalesce_tool_call_id`: `call_id`, else `id`, stripped, up to the first `|`.
fn coalesce_tool_call_id(tc: &Value) -> String {
    for key in ["call_id", "id"] {
        let value = tc
            .get(key)
            .and_then(Value::as_str)
            .map(py_strip)
            .unwrap_or("");
        if !value.is_empty() {
            let head = py_strip(value.split('|').next().unwrap_or(""));
            return if head.is_empty() { value } else { head }.to_owned();
        }
    }
    String::new()
}

/// v31 `_rows_to_conversation`: a tool row without a stored
/// `tool_call_uid` but with a `tool_call_id` gets the uid its assistant row
/// minted for that call (`index_tool_call_uids`, `resolve_tool_call_uid`),
/// as `_tool_call_uid` after every other key. A user row clears the index.
/// Python tries the id's variants in `frozenset` order; here the whole id
/// first, then its parts (they differ only when two variants map to two
/// different uids).
pub(super) fn pair_tool_call_uid(
    msg: &mut Message,
    cells: &Cells<'_>,
    messages: &[Message],
    index: &mut HashMap<String, String>,
    owners: &mut Vec<usize>,
) {
    match &*msg.role {
        "user" => {
            index.clear();
            owners.clear();
        }
        "tool" if !cells.truthy(Col::ToolCallUid) && cells.truthy(Col::ToolCallId) => {
            for owner in owners.drain(..) {
                index_tool_call_uids(index, &messages[owner]);
            }
            let Some(id) = cells.text(Col::ToolCallId) else {
                return;
            };
            if index.is_empty() {
                return;
            }
            let uid = id_variants(&[&Value::String(id.into_owned())])
                .iter()
                .find_map(|v| index.get(v).filter(|u| !u.is_empty()).cloned());
            if let Some(uid) = uid {
                msg.add_key("_tool_call_uid", Value::String(uid));
            }
        }
        _ => {}
    }
}

/// `agent/message_metadata.py` `index_tool_call_uids`.
fn index_tool_call_uids(index: &mut HashMap<String, String>, assistant: &Message) {
    let calls: Vec<&Value> = match assistant.key("tool_calls") {
        Some(Value::Array(calls)) => calls.iter().collect(),
        _ => Vec::new(),
    };
    let variants: Vec<Vec<String>> = calls
        .iter()
        .map(|tc| {
            let field = |k: &str| tc.get(k).unwrap_or(&Value::Null);
            id_variants(&[field("call_id"), field("id"), field("response_item_id")])
        })
        .collect();
    for v in variants.iter().flatten() {
        index.remove(v);
    }
    let Some(Value::Object(uids)) = assistant.key("_tool_call_uids") else {
        return;
    };
    let mut occurrence: HashMap<String, usize> = HashMap::new();
    for (tc, variants) in calls.iter().zip(&variants) {
        let call_id = coalesce_tool_call_id(tc);
        let uid = match uids.get(&call_id) {
            Some(Value::Array(list)) => {
                let nth = occurrence
                    .entry(call_id.clone())
                    .and_modify(|n| *n += 1)
                    .or_insert(0);
                list.get(*nth)
            }
            other => other,
        };
        if let Some(uid) = uid.and_then(Value::as_str).filter(|u| !u.is_empty()) {
            for v in variants {
                index.insert(v.clone(), uid.to_owned());
            }
        }
    }
}
