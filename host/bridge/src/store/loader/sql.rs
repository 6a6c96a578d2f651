//! What the loader selects for each schema, and each SQLite value as
//! Python's `sqlite3` hands it to the loader (with Python's truthiness and
//! `json.loads`, which the loader's rules test).

use rusqlite::types::ValueRef;
use serde_json::Value;

use super::Loader;

/// The `messages` columns each loader selects besides `id`, `role` and
/// `content` (0.19.0 `_CONVERSATION_ROW_COLUMNS`, v31 `hermes_state.py`
/// `_CONVERSATION_ROW_COLUMNS`); a column the database lacks reads as NULL.
const EARLY_COLUMNS: &[&str] = &["tool_call_id", "tool_calls", "tool_name"];
const V22_COLUMNS: &[&str] = &[
    "tool_call_id",
    "tool_calls",
    "tool_name",
    "effect_disposition",
    "finish_reason",
    "reasoning",
    "reasoning_content",
    "reasoning_details",
    "codex_reasoning_items",
    "codex_message_items",
    "platform_message_id",
    "observed",
    "timestamp",
    "api_content",
];
const V31_EXTRA_COLUMNS: &[&str] = &[
    "display_kind",
    "display_metadata",
    "message_uid",
    "absorbed_message_uids",
    "tool_call_uids",
    "tool_call_uid",
];

/// How the store reads one database's history.
#[derive(Clone, Debug)]
pub struct LoaderSql {
    pub loader: Loader,
    /// Selected column names after `id, role, content`, in select order.
    columns: Vec<&'static str>,
    /// The select list for them (`m.x`, or `NULL` where the column is missing).
    select: String,
    /// `ORDER BY …` of this loader.
    pub order: &'static str,
}

impl LoaderSql {
    pub fn new(loader: Loader, has_column: impl Fn(&str) -> bool) -> Self {
        let mut columns: Vec<&'static str> = match loader {
            Loader::Early => EARLY_COLUMNS.to_vec(),
            _ => V22_COLUMNS.to_vec(),
        };
        if loader == Loader::V31 {
            columns.extend_from_slice(V31_EXTRA_COLUMNS);
        }
        let select = columns
            .iter()
            .map(|c| {
                if has_column(c) {
                    format!("m.{c}")
                } else {
                    "NULL".to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        // v1 to 2026-05-13 ordered by timestamp (research/hermes-state.md
        // §6); 0.19.0 and v31 by id ("clocks can regress").
        let order = match loader {
            Loader::Early => "ORDER BY m.timestamp, m.id",
            _ => "ORDER BY m.id",
        };
        Self {
            loader,
            columns,
            select,
            order,
        }
    }

    /// `m.a, m.b, NULL, …`: the columns after `m.id, m.role, m.content`.
    pub fn select_list(&self) -> &str {
        &self.select
    }

    /// The selected column names after `id, role, content`, in select order.
    pub(super) fn columns(&self) -> &[&'static str] {
        &self.columns
    }

    /// Number of columns [`Self::select_list`] selects.
    pub fn width(&self) -> usize {
        self.columns.len()
    }
}

/// One SQLite value as Python's `sqlite3` hands it to the loader.
#[derive(Clone, Debug, PartialEq)]
pub enum SqlValue {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl SqlValue {
    pub fn read(value: ValueRef<'_>) -> Self {
        match value {
            ValueRef::Null => SqlValue::Null,
            ValueRef::Integer(i) => SqlValue::Int(i),
            ValueRef::Real(f) => SqlValue::Real(f),
            // Python's sqlite3 raises on text that is not UTF-8; we keep the row.
            ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
        }
    }

    /// Python truthiness (`if row[col]:`).
    pub(super) fn truthy(&self) -> bool {
        match self {
            SqlValue::Null => false,
            SqlValue::Int(i) => *i != 0,
            SqlValue::Real(f) => *f != 0.0,
            SqlValue::Text(t) => !t.is_empty(),
            SqlValue::Blob(b) => !b.is_empty(),
        }
    }

    pub(super) fn text(&self) -> Option<&str> {
        match self {
            SqlValue::Text(t) => Some(t),
            _ => None,
        }
    }

    /// The value as JSON (bytes, which Python could not serialise, as
    /// lossy text).
    pub(super) fn json(&self) -> Value {
        match self {
            SqlValue::Null => Value::Null,
            SqlValue::Int(i) => Value::from(*i),
            SqlValue::Real(f) => {
                serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number)
            }
            SqlValue::Text(t) => Value::String(t.clone()),
            SqlValue::Blob(b) => Value::String(String::from_utf8_lossy(b).into_owned()),
        }
    }
}

/// One selected row: id, role, content, the loader's columns, provenance.
#[derive(Clone, Debug)]
pub struct RawRow {
    pub id: i64,
    pub role: String,
    pub content: SqlValue,
    pub cells: Vec<SqlValue>,
    pub bridge_wrote: bool,
}

/// Python's `json.loads`; `None` where it raises. Known differences:
/// `NaN`/`Infinity` and lone surrogate escapes, which Python accepts and
/// serde_json refuses (the row then takes the loader's fallback).
pub(super) fn json_loads(text: &str) -> Option<Value> {
    serde_json::from_str(text).ok()
}

/// `_json_or(raw, fallback)` (v31 `hermes_state_common.py`; the same
/// try/except in 0.19.0): parse a text column, else the fallback.
pub(super) fn json_or(cell: &SqlValue, fallback: Value) -> Value {
    cell.text().and_then(json_loads).unwrap_or(fallback)
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
