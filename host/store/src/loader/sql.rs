//! What the loader selects for each schema, and each SQLite value as
//! Python's `sqlite3` hands it to the loader (with Python's truthiness and
//! `json.loads`, which the loader's rules test).
//!
//! A row's cells are read where SQLite keeps them ([`Cells`] borrows the
//! statement's current row): only what a message keeps is copied.

use std::borrow::Cow;

use rusqlite::types::ValueRef;
use serde_json::Value;

use super::version::Loader;

/// The `messages` columns a loader reads besides `id`, `role` and `content`
/// (`ToolCallUid` stays last: [`COLS`] counts from it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Col {
    ToolCallId,
    ToolCalls,
    ToolName,
    EffectDisposition,
    FinishReason,
    Reasoning,
    ReasoningContent,
    ReasoningDetails,
    CodexReasoningItems,
    CodexMessageItems,
    PlatformMessageId,
    Observed,
    Timestamp,
    ApiContent,
    DisplayKind,
    DisplayMetadata,
    MessageUid,
    AbsorbedMessageUids,
    ToolCallUids,
    ToolCallUid,
}

impl Col {
    /// Read by the loader on assistant rows only (`common_tail`'s
    /// `if role == "assistant"` keys).
    pub(super) fn assistant_only(self) -> bool {
        matches!(
            self,
            Col::FinishReason
                | Col::Reasoning
                | Col::ReasoningContent
                | Col::ReasoningDetails
                | Col::CodexReasoningItems
                | Col::CodexMessageItems
        )
    }
}

/// Number of [`Col`] variants (the last one's index, plus one).
const COLS: usize = Col::ToolCallUid as usize + 1;

impl Col {
    /// The column's name in `messages` (and the loader's key for its
    /// value, where the loader keeps the name).
    pub(super) fn name(self) -> &'static str {
        match self {
            Col::ToolCallId => "tool_call_id",
            Col::ToolCalls => "tool_calls",
            Col::ToolName => "tool_name",
            Col::EffectDisposition => "effect_disposition",
            Col::FinishReason => "finish_reason",
            Col::Reasoning => "reasoning",
            Col::ReasoningContent => "reasoning_content",
            Col::ReasoningDetails => "reasoning_details",
            Col::CodexReasoningItems => "codex_reasoning_items",
            Col::CodexMessageItems => "codex_message_items",
            Col::PlatformMessageId => "platform_message_id",
            Col::Observed => "observed",
            Col::Timestamp => "timestamp",
            Col::ApiContent => "api_content",
            Col::DisplayKind => "display_kind",
            Col::DisplayMetadata => "display_metadata",
            Col::MessageUid => "message_uid",
            Col::AbsorbedMessageUids => "absorbed_message_uids",
            Col::ToolCallUids => "tool_call_uids",
            Col::ToolCallUid => "tool_call_uid",
        }
    }
}

/// The columns each loader selects besides `id`, `role` and `content`
/// (0.19.0 `_CONVERSATION_ROW_COLUMNS`, v31 `hermes_state.py`
/// `_CONVERSATION_ROW_COLUMNS`); a column the database lacks reads as NULL.
const EARLY_COLUMNS: &[Col] = &[Col::ToolCallId, Col::ToolCalls, Col::ToolName];
const V22_COLUMNS: &[Col] = &[
    Col::ToolCallId,
    Col::ToolCalls,
    Col::ToolName,
    Col::EffectDisposition,
    Col::FinishReason,
    Col::Reasoning,
    Col::ReasoningContent,
    Col::ReasoningDetails,
    Col::CodexReasoningItems,
    Col::CodexMessageItems,
    Col::PlatformMessageId,
    Col::Observed,
    Col::Timestamp,
    Col::ApiContent,
];
const V31_EXTRA_COLUMNS: &[Col] = &[
    Col::DisplayKind,
    Col::DisplayMetadata,
    Col::MessageUid,
    Col::AbsorbedMessageUids,
    Col::ToolCallUids,
    Col::ToolCallUid,
];

/// How the store reads one database's history.
#[derive(Clone, Debug)]
pub struct LoaderSql {
    pub loader: Loader,
    /// The loader's columns the database has, in select order.
    selected: Vec<Col>,
    /// The select list for them (`m.x, m.y, …`).
    select: String,
    /// `messages` has an index in which a session's rows come in id order.
    id_ordered: bool,
}

impl LoaderSql {
    /// The reads of `loader` on a `messages` table that has the columns
    /// `has_column` says, with (`id_ordered`) or without an index in which
    /// a session's rows come in id order (`(session_id, id)`).
    pub fn new(loader: Loader, has_column: impl Fn(&str) -> bool, id_ordered: bool) -> Self {
        let mut columns: Vec<Col> = match loader {
            Loader::Early => EARLY_COLUMNS.to_vec(),
            _ => V22_COLUMNS.to_vec(),
        };
        if loader == Loader::V31 {
            columns.extend_from_slice(V31_EXTRA_COLUMNS);
        }
        // A missing column is not selected: its cell stays NULL.
        columns.retain(|c| has_column(c.name()));
        let select = columns
            .iter()
            .map(|c| format!(", m.{}", c.name()))
            .collect::<String>();
        Self {
            loader,
            selected: columns,
            select,
            id_ordered,
        }
    }

    /// The select of one session's history (`?1`), in the loader's order:
    /// `id, role, content`, then the loader's columns. `active`: only rows
    /// with `active = 1` (the column exists).
    ///
    /// Hermes from v1 to 2026-05-13 ordered by timestamp; 0.19.0 and v31 by id
    /// ("clocks can regress"). Without an index in id order (0.19.0 has
    /// `(session_id, active, timestamp)`), SQLite would sort whole rows,
    /// decoding every column twice; the ids from the index instead, as an `IN`
    /// list it walks in order, seeking each row once. Never a bound `LIMIT`: that made SQLite sort through a
    /// b-tree.
    pub fn history_select(&self, active: bool) -> String {
        let active = if active { " AND active = 1" } else { "" };
        let head = format!(
            "SELECT m.id, m.role, m.content{} FROM messages m",
            self.select
        );
        match self.loader {
            Loader::Early => {
                format!("{head} WHERE m.session_id = ?1{active} ORDER BY m.timestamp, m.id")
            }
            _ if self.id_ordered => format!("{head} WHERE m.session_id = ?1{active} ORDER BY m.id"),
            _ => format!(
                "{head} WHERE m.id IN (SELECT id FROM messages WHERE session_id = ?1{active}) \
                 ORDER BY m.id"
            ),
        }
    }

    /// The cells of `row`, whose columns `first..` are the select list's.
    /// The columns the loader reads on assistant rows only are read when
    /// `assistant`, else left NULL.
    pub(super) fn cells<'r>(
        &self,
        row: &'r rusqlite::Row<'_>,
        first: usize,
        assistant: bool,
    ) -> rusqlite::Result<Cells<'r>> {
        let mut values = [ValueRef::Null; COLS];
        for (i, col) in self.selected.iter().enumerate() {
            if assistant || !col.assistant_only() {
                values[*col as usize] = row.get_ref(first + i)?;
            }
        }
        Ok(Cells { values })
    }
}

/// One row's loader columns, borrowed from the statement's current row.
#[derive(Clone, Copy)]
pub(super) struct Cells<'r> {
    values: [ValueRef<'r>; COLS],
}

impl<'r> Cells<'r> {
    pub(super) fn get(&self, col: Col) -> ValueRef<'r> {
        self.values[col as usize]
    }
    /// Python truthiness of the cell (`if row[col]:`).
    pub(super) fn truthy(&self, col: Col) -> bool {
        truthy_cell(self.get(col))
    }
    /// The cell's text (lossy), `None` unless it is text.
    pub(super) fn text(&self, col: Col) -> Option<Cow<'r, str>> {
        text_cell(self.get(col))
    }
    /// The cell as JSON.
    pub(super) fn json(&self, col: Col) -> Value {
        json_cell(self.get(col))
    }
}

/// `messages.role` as the loader keeps it: Hermes's own roles without an
/// allocation, any other text as it is (lossy), NULL or a number as empty.
pub(super) fn role_cell(value: ValueRef<'_>) -> Cow<'static, str> {
    match value {
        ValueRef::Text(bytes) | ValueRef::Blob(bytes) => match bytes {
            b"user" => Cow::Borrowed("user"),
            b"assistant" => Cow::Borrowed("assistant"),
            b"tool" => Cow::Borrowed("tool"),
            b"system" => Cow::Borrowed("system"),
            _ => Cow::Owned(lossy(bytes).into_owned()),
        },
        _ => Cow::Borrowed(""),
    }
}

/// Python truthiness of a SQLite value.
pub(super) fn truthy_cell(value: ValueRef<'_>) -> bool {
    match value {
        ValueRef::Null => false,
        ValueRef::Integer(i) => i != 0,
        ValueRef::Real(f) => f != 0.0,
        ValueRef::Text(t) => !t.is_empty(),
        ValueRef::Blob(b) => !b.is_empty(),
    }
}

/// A text value as a string (bytes that are not UTF-8 replaced by U+FFFD:
/// Python's `sqlite3` raises on them, we keep the row); `None` for other
/// types.
pub(super) fn text_cell(value: ValueRef<'_>) -> Option<Cow<'_, str>> {
    match value {
        ValueRef::Text(t) => Some(lossy(t)),
        _ => None,
    }
}

/// A SQLite value as JSON (bytes, which Python could not serialise, as
/// lossy text).
pub(super) fn json_cell(value: ValueRef<'_>) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::from(i),
        ValueRef::Real(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        ValueRef::Text(t) | ValueRef::Blob(t) => Value::String(lossy(t).into_owned()),
    }
}

/// `bytes` as text, bytes that are not UTF-8 replaced by U+FFFD. Valid text
/// (every row Hermes writes) is borrowed after a SIMD check (`simdutf8`: fewer
/// instructions a row than std's `from_utf8` on the bench's Chinese and
/// English lines, and than the lossy decoder's chunk walk).
pub fn lossy(bytes: &[u8]) -> Cow<'_, str> {
    match simdutf8::basic::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// Python's `json.loads`; `None` where it raises. Known differences:
/// `NaN`/`Infinity` and lone surrogate escapes, which Python accepts and
/// serde_json refuses (the row then takes the loader's fallback).
pub(super) fn json_loads(text: &str) -> Option<Value> {
    serde_json::from_str(text).ok()
}

/// `_json_or(raw, fallback)` (v31 `hermes_state_common.py`; the same
/// try/except in 0.19.0): parse a text column, else the fallback.
pub(super) fn json_or(cell: ValueRef<'_>, fallback: Value) -> Value {
    text_cell(cell)
        .and_then(|t| json_loads(&t))
        .unwrap_or(fallback)
}

/// Python truthiness of a JSON value.
pub(super) fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}
