//! The keys each schema's `_rows_to_conversation` adds to a message, in
//! its order.

use serde_json::{Map, Value};

use super::Message;
use super::sql::{SqlValue, json_loads, json_or};

/// v1: the tool fields when set (research/hermes-state.md §6).
pub(super) fn early_fields<'a>(msg: &mut Message, cell: &impl Fn(&str) -> &'a SqlValue) {
    for key in ["tool_call_id", "tool_name"] {
        if cell(key).truthy() {
            msg.push(key, cell(key).json());
        }
    }
    tool_calls_field(msg, cell);
}

/// `tool_calls` when set, parsed (`[]` when not JSON), as every schema's
/// loader adds it.
fn tool_calls_field<'a>(msg: &mut Message, cell: &impl Fn(&str) -> &'a SqlValue) {
    if cell("tool_calls").truthy() {
        msg.push(
            "tool_calls",
            json_or(cell("tool_calls"), Value::Array(vec![])),
        );
    }
}

/// 0.19.0 `hermes_state.py` `_rows_to_conversation`, key for key.
pub(super) fn v22_fields<'a>(msg: &mut Message, cell: &impl Fn(&str) -> &'a SqlValue) {
    api_content_field(msg, cell("api_content"));
    common_tail(msg, cell);
}

/// The keys both versions add last, in order: `timestamp`,
/// `tool_call_id`, `tool_name`, `effect_disposition` (each when truthy),
/// `tool_calls` (parsed, `[]` when not JSON), `message_id`
/// (`platform_message_id`), `observed`, and on assistant rows
/// `finish_reason`, `reasoning`, `reasoning_content` (also when empty),
/// `reasoning_details` / `codex_reasoning_items` / `codex_message_items`
/// (parsed, null when not JSON).
fn common_tail<'a>(msg: &mut Message, cell: &impl Fn(&str) -> &'a SqlValue) {
    for key in [
        "timestamp",
        "tool_call_id",
        "tool_name",
        "effect_disposition",
    ] {
        if cell(key).truthy() {
            msg.push(key, cell(key).json());
        }
    }
    tool_calls_field(msg, cell);
    if cell("platform_message_id").truthy() {
        msg.push("message_id", cell("platform_message_id").json());
    }
    if cell("observed").truthy() {
        msg.push("observed", Value::Bool(true));
    }
    if msg.role == "assistant" {
        for key in ["finish_reason", "reasoning"] {
            if cell(key).truthy() {
                msg.push(key, cell(key).json());
            }
        }
        if cell("reasoning_content") != &SqlValue::Null {
            msg.push("reasoning_content", cell("reasoning_content").json());
        }
        for key in [
            "reasoning_details",
            "codex_reasoning_items",
            "codex_message_items",
        ] {
            if cell(key).truthy() {
                msg.push(key, json_or(cell(key), Value::Null));
            }
        }
    }
}

/// `api_content` when truthy, verbatim.
fn api_content_field(msg: &mut Message, cell: &SqlValue) {
    if cell.truthy() {
        msg.api_content = cell.text().map(str::to_owned);
        msg.push("api_content", cell.json());
    }
}

/// v31 `hermes_state_messages.py` `_rows_to_conversation`, key for key
/// (plain call: no `_db_row_snapshot`, `_row_id` or `_compressed_summary`).
pub(super) fn v31_fields<'a>(msg: &mut Message, cell: &impl Fn(&str) -> &'a SqlValue) {
    // `_DB_PERSISTED_MARKER` (`agent/context_compressor.py`).
    msg.push("_db_persisted", Value::Bool(true));
    // `hermes_state_identity.py` `_restore_identity_columns`.
    if cell("message_uid").truthy() {
        msg.push("message_uid", cell("message_uid").json());
    }
    if cell("tool_call_uids").truthy() {
        let map = uid_map(cell("tool_call_uids"));
        if !map.is_empty() {
            msg.push("_tool_call_uids", Value::Object(map));
        }
    }
    if cell("tool_call_uid").truthy() {
        msg.push("_tool_call_uid", cell("tool_call_uid").json());
    }
    if cell("absorbed_message_uids").truthy() {
        let uids = uid_list(&json_or(cell("absorbed_message_uids"), Value::Null));
        if !uids.is_empty() {
            msg.push("_absorbed_message_uids", Value::Array(uids));
        }
    }
    api_content_field(msg, cell("api_content"));
    if cell("display_kind").truthy() {
        msg.push("display_kind", cell("display_kind").json());
    }
    if cell("display_metadata").truthy()
        && let Some(meta) = display_metadata(cell("display_metadata"))
    {
        msg.push("display_metadata", meta);
    }
    common_tail(msg, cell);
}

/// `hermes_state_identity.py` `_uid_map`: a JSON object whose keys are
/// non-empty strings and whose values are a non-empty string or a
/// non-empty list of non-empty strings; anything else dropped.
fn uid_map(cell: &SqlValue) -> Map<String, Value> {
    let Value::Object(map) = json_or(cell, Value::Object(Map::new())) else {
        return Map::new();
    };
    let uid = |v: &Value| v.as_str().is_some_and(|s| !s.is_empty());
    map.into_iter()
        .filter(|(k, v)| {
            !k.is_empty()
                && (uid(v)
                    || v.as_array()
                        .is_some_and(|a| !a.is_empty() && a.iter().all(uid)))
        })
        .collect()
}

/// `agent/message_metadata.py` `uid_list`: the unique non-empty strings of
/// a list, in order.
fn uid_list(value: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for u in value.as_array().into_iter().flatten() {
        if u.as_str().is_some_and(|s| !s.is_empty()) && !out.contains(u) {
            out.push(u.clone());
        }
    }
    out
}

/// `_decode_display_metadata`: up to two string layers unwrapped; only an
/// object counts.
fn display_metadata(cell: &SqlValue) -> Option<Value> {
    let mut meta = cell.json();
    for _ in 0..2 {
        if let Value::String(s) = &meta {
            meta = json_loads(s)?;
        }
    }
    meta.is_object().then_some(meta)
}
