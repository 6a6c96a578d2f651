//! The keys each schema's `_rows_to_conversation` adds to a message, in
//! its order.

use rusqlite::types::ValueRef;
use serde_json::{Map, Value};

use super::message::{Keys, Message};
use super::sql::{Cells, Col, json_cell, json_loads, json_or, lossy, truthy_cell};

/// v1: the tool fields when set (v1's loader added `tool_call_id` and
/// `tool_name` only when the column was set).
pub(super) fn early_fields(msg: &mut Message, cells: &Cells<'_>) {
    for col in [Col::ToolCallId, Col::ToolName] {
        copy_if_truthy(msg, cells, col);
    }
    tool_calls_field(msg, cells);
}

/// The cell of `col` under the column's name, when it is truthy (the
/// loader's `if row[col]: msg[col] = row[col]`).
fn copy_if_truthy(msg: &mut Message, cells: &Cells<'_>, col: Col) {
    if cells.truthy(col) {
        msg.add_key(col.name(), cells.json(col));
    }
}

/// `tool_calls` when set, parsed (`[]` when not JSON), as every schema's
/// loader adds it.
fn tool_calls_field(msg: &mut Message, cells: &Cells<'_>) {
    if cells.truthy(Col::ToolCalls) {
        msg.add_key(
            "tool_calls",
            json_or(cells.get(Col::ToolCalls), Value::Array(vec![])),
        );
    }
}

/// 0.19.0 `hermes_state.py` `_rows_to_conversation`, key for key.
pub(super) fn v22_fields(msg: &mut Message, cells: &Cells<'_>) {
    api_content_field(msg, cells.get(Col::ApiContent));
    common_tail(msg, cells);
}

/// The keys both versions add last, in order: `timestamp`,
/// `tool_call_id`, `tool_name`, `effect_disposition` (each when truthy),
/// `tool_calls` (parsed, `[]` when not JSON), `message_id`
/// (`platform_message_id`), `observed`, and on assistant rows
/// `finish_reason`, `reasoning`, `reasoning_content` (also when empty),
/// `reasoning_details` / `codex_reasoning_items` / `codex_message_items`
/// (parsed, null when not JSON).
fn common_tail(msg: &mut Message, cells: &Cells<'_>) {
    for col in [
        Col::Timestamp,
        Col::ToolCallId,
        Col::ToolName,
        Col::EffectDisposition,
    ] {
        copy_if_truthy(msg, cells, col);
    }
    tool_calls_field(msg, cells);
    if cells.truthy(Col::PlatformMessageId) {
        msg.add_key("message_id", cells.json(Col::PlatformMessageId));
    }
    if cells.truthy(Col::Observed) {
        msg.add_key("observed", Value::Bool(true));
    }
    if msg.role == "assistant" {
        for col in [Col::FinishReason, Col::Reasoning] {
            copy_if_truthy(msg, cells, col);
        }
        if !matches!(cells.get(Col::ReasoningContent), ValueRef::Null) {
            msg.add_key(
                Col::ReasoningContent.name(),
                cells.json(Col::ReasoningContent),
            );
        }
        for col in [
            Col::ReasoningDetails,
            Col::CodexReasoningItems,
            Col::CodexMessageItems,
        ] {
            if cells.truthy(col) {
                msg.add_key(col.name(), json_or(cells.get(col), Value::Null));
            }
        }
    }
}

/// `api_content` when truthy, verbatim: text is kept for the tag edits
/// ([`Message::api_content`]), any other value as a field.
fn api_content_field(msg: &mut Message, cell: ValueRef<'_>) {
    match cell {
        ValueRef::Text(bytes) if !bytes.is_empty() => {
            msg.set_api_content(lossy(bytes).into_owned());
        }
        // Not text (Python would pass it on as it is): the value itself.
        other if truthy_cell(other) => msg.add_key("api_content", json_cell(other)),
        _ => {}
    }
}

/// v31 `hermes_state_messages.py` `_rows_to_conversation`, key for key
/// (plain call: no `_db_row_snapshot`, `_row_id` or `_compressed_summary`).
pub(super) fn v31_fields(msg: &mut Message, cells: &Cells<'_>) {
    // `_DB_PERSISTED_MARKER` (`agent/context_compressor.py`).
    msg.add_key("_db_persisted", Value::Bool(true));
    // `hermes_state_identity.py` `_restore_identity_columns`.
    copy_if_truthy(msg, cells, Col::MessageUid);
    if cells.truthy(Col::ToolCallUids) {
        let map = uid_map(cells.get(Col::ToolCallUids));
        if !map.is_empty() {
            msg.add_key("_tool_call_uids", Value::Object(map));
        }
    }
    if cells.truthy(Col::ToolCallUid) {
        msg.add_key("_tool_call_uid", cells.json(Col::ToolCallUid));
    }
    if cells.truthy(Col::AbsorbedMessageUids) {
        let uids = uid_list(&json_or(cells.get(Col::AbsorbedMessageUids), Value::Null));
        if !uids.is_empty() {
            msg.add_key("_absorbed_message_uids", Value::Array(uids));
        }
    }
    api_content_field(msg, cells.get(Col::ApiContent));
    copy_if_truthy(msg, cells, Col::DisplayKind);
    if cells.truthy(Col::DisplayMetadata)
        && let Some(meta) = display_metadata(cells.get(Col::DisplayMetadata))
    {
        msg.add_key("display_metadata", meta);
    }
    common_tail(msg, cells);
}

/// `hermes_state_identity.py` `_uid_map`: a JSON object whose keys are
/// non-empty strings and whose values are a non-empty string or a
/// non-empty list of non-empty strings; anything else dropped.
fn uid_map(cell: ValueRef<'_>) -> Map<String, Value> {
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
fn display_metadata(cell: ValueRef<'_>) -> Option<Value> {
    let mut meta = json_cell(cell);
    for _ in 0..2 {
        if let Value::String(s) = &meta {
            meta = json_loads(s)?;
        }
    }
    meta.is_object().then_some(meta)
}
