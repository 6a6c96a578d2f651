//! Hermes's loader over the rows of one select, fed one row at a time:
//! each row becomes its [`HistoryRow`] where it will stay, then the rows the
//! loader drops are removed and the ones it blanks are blanked.

use std::collections::HashMap;

use session_switch_contract::history::{HistoryRow, LoadedFields, LoadedMessage};

use super::content::{Content, first_text_part, loaded_content};
use super::drops;
use super::message::Keys;
use super::message_keys;
use super::sql::{Col, LoaderSql, role_cell, truthy};
use super::tool_call_uids;
use super::version::Loader;

/// The loader's messages as they are read (cells read where SQLite keeps
/// them; only what a message keeps is copied), then
/// [`Conversation::finish`]ed.
pub struct Conversation<'s> {
    sql: &'s LoaderSql,
    /// The ids of the sent rows, ascending.
    ours: &'s [i64],
    rows: Vec<HistoryRow>,
    /// v31's tool-call uid pairing (see `pair_tool_call_uid`).
    uid_index: HashMap<String, String>,
    unindexed_owners: Vec<usize>,
}

impl<'s> Conversation<'s> {
    /// A loader over `sql`'s rows, with room for `rows` of them; `ours`:
    /// the ids of the sent rows, ascending.
    pub fn with_capacity(sql: &'s LoaderSql, ours: &'s [i64], rows: usize) -> Self {
        Self {
            sql,
            ours,
            rows: Vec::with_capacity(rows),
            uid_index: HashMap::new(),
            unindexed_owners: Vec::new(),
        }
    }

    /// Rows pushed so far.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Add `row`, selected as `id, role, content, <the select list>` in
    /// the loader's order.
    pub fn push(&mut self, row: &rusqlite::Row<'_>) -> rusqlite::Result<()> {
        let sql = self.sql;
        let role = role_cell(row.get_ref(1)?);
        let cells = sql.cells(row, 3, role == "assistant")?;
        let owned = |col| cells.text(col).map(|t| t.into_owned());
        let id = row.get(0)?;
        let content = loaded_content(sql.loader, &role, row.get_ref(2)?);
        let (content, structured, text_part) = match content {
            Content::Text(text) => (text, None, None),
            Content::Other(value) => {
                let part = first_text_part(&value);
                let text = part
                    .and_then(|i| value[i]["text"].as_str())
                    .unwrap_or("")
                    .to_owned();
                (text, Some(value), part)
            }
        };
        self.rows.push(HistoryRow {
            id,
            role,
            content,
            tool_calls: owned(Col::ToolCalls),
            tool_call_id: owned(Col::ToolCallId),
            tool_name: owned(Col::ToolName),
            bridge_wrote: self.ours.binary_search(&id).is_ok(),
            loaded: Some(LoadedMessage {
                fields: LoadedFields::new(),
                structured,
                text_part,
                api_content: None,
            }),
        });
        let Some((msg, earlier)) = self.rows.split_last_mut() else {
            return Ok(());
        };
        match sql.loader {
            Loader::Early => message_keys::early_fields(msg, &cells),
            Loader::V22 => message_keys::v22_fields(msg, &cells),
            Loader::V31 => {
                message_keys::v31_fields(msg, &cells);
                tool_call_uids::pair_tool_call_uid(
                    msg,
                    &cells,
                    earlier,
                    &mut self.uid_index,
                    &mut self.unindexed_owners,
                );
                if msg.role == "assistant" && msg.key("tool_calls").is_some_and(truthy) {
                    self.unindexed_owners.push(earlier.len());
                }
            }
        }
        Ok(())
    }

    /// The loader's messages: the rows it drops (background-review harness
    /// turns) dropped, the ones it blanks (v31 stale tool-call markers)
    /// blanked.
    pub fn finish(self) -> Vec<HistoryRow> {
        let loader = self.sql.loader;
        let mut rows = self.rows;
        // Early Hermes drops nothing.
        if loader != Loader::Early {
            let keep = drops::background_review_harness_kept(loader, &rows);
            if keep.contains(&false) {
                let mut kept = keep.iter();
                rows.retain(|_| kept.next().is_some_and(|k| *k));
            }
        }
        if loader == Loader::V31 {
            rows.iter_mut()
                .for_each(drops::strip_stale_tool_call_marker);
        }
        rows
    }
}
