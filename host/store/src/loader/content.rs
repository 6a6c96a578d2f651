//! A row's content as the loader hands it on: `_decode_content`, then
//! `sanitize_context` and Python's `str.strip()` on user and assistant text.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;
use rusqlite::types::ValueRef;
use serde_json::Value;

use super::sql::{json_cell, json_loads, lossy};
use super::version::Loader;

/// `_CONTENT_JSON_PREFIX` (0.19.0 `hermes_state.py`, v31
/// `hermes_state_messages.py`).
pub const CONTENT_JSON_PREFIX: &str = "\0json:";

/// Python's `str.isspace()`, which `str.strip()` and a `str` regex's `\s`
/// use: Unicode `White_Space` plus U+001C–U+001F.
pub fn is_py_space(c: char) -> bool {
    matches!(c,
        '\t'..='\r' | '\u{1c}'..='\u{20}' | '\u{85}' | '\u{a0}' | '\u{1680}'
        | '\u{2000}'..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}')
}

/// Python's `str.strip()`.
pub fn py_strip(text: &str) -> &str {
    // Most texts start and end with an ASCII character that is no space:
    // nothing to strip, and no character decoded (an edge byte that is not
    // ASCII may belong to a space such as U+3000).
    let bytes = text.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last))
            if first.is_ascii()
                && last.is_ascii()
                && !is_py_space(char::from(first))
                && !is_py_space(char::from(last)) =>
        {
            text
        }
        _ => text.trim_matches(is_py_space),
    }
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
    sanitized(text).into_owned()
}

/// [`sanitize_context`], borrowing `text` when nothing is removed.
fn sanitized(text: &str) -> Cow<'_, str> {
    // Every pattern starts with `<` or `[`: most chat lines have neither,
    // and three regex searches cost more than the rest of a row's loading.
    if memchr::memchr2(b'<', b'[', text.as_bytes()).is_none() {
        return Cow::Borrowed(text);
    }
    let text = INTERNAL_CONTEXT_RE.replace_all(text, "");
    let text = match INTERNAL_NOTE_RE.replace_all(&text, "") {
        Cow::Borrowed(_) => text,
        Cow::Owned(changed) => Cow::Owned(changed),
    };
    match FENCE_TAG_RE.replace_all(&text, "") {
        Cow::Borrowed(_) => text,
        Cow::Owned(changed) => Cow::Owned(changed),
    }
}

/// A row's content as the loader hands it on.
pub(super) enum Content {
    /// A string (the common case), cleaned as the loader cleans it.
    Text(String),
    /// Anything else: what `"\x00json:"` decoded to (a multimodal list of
    /// parts, or any other JSON value), or a value that is not text.
    Other(Value),
}

/// The loader's content: `_decode_content`, then, on user and assistant
/// strings, `sanitize_context(content).strip()` (0.19.0
/// `_rows_to_conversation`, v31 `_loaded_view_content`). Early Hermes: as
/// stored.
pub(super) fn loaded_content(loader: Loader, role: &str, cell: ValueRef<'_>) -> Content {
    let cleaned = |text: &str| {
        if matches!(role, "user" | "assistant") {
            Content::Text(py_strip(&sanitized(text)).to_owned())
        } else {
            Content::Text(text.to_owned())
        }
    };
    let other = |value: Value| match value {
        Value::String(text) => Content::Text(text),
        value => Content::Other(value),
    };
    match cell {
        _ if loader == Loader::Early => other(json_cell(cell)),
        ValueRef::Text(bytes) => {
            let text = lossy(bytes);
            // A reserved-prefix string that is not JSON stays the raw string.
            match text.strip_prefix(CONTENT_JSON_PREFIX).and_then(json_loads) {
                Some(Value::String(decoded)) => cleaned(&decoded),
                Some(decoded) => Content::Other(decoded),
                None => cleaned(&text),
            }
        }
        // Bytes read as (lossy) text, as `json_cell` gives them.
        ValueRef::Blob(bytes) => cleaned(&lossy(bytes)),
        cell => other(json_cell(cell)),
    }
}

/// Index of the first `{"type": "text", "text": <string>}` part of a list.
pub(super) fn first_text_part(value: &Value) -> Option<usize> {
    value.as_array()?.iter().position(|part| {
        part.get("type").and_then(Value::as_str) == Some("text")
            && part.get("text").is_some_and(Value::is_string)
    })
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
        for (text, stripped) in [
            ("", ""),
            (" ", ""),
            ("a", "a"),
            ("a b", "a b"),
            ("\u{3000}a", "a"),
            ("a\u{3000}", "a"),
            ("\u{1f}a\u{1c}", "a"),
            ("é", "é"),
            (" é ", "é"),
            ("a\n", "a"),
        ] {
            assert_eq!(py_strip(text), stripped, "{text:?}");
        }
    }
}
