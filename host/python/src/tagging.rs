//! The `[YOU] ` edits on Hermes's own loader output
//! (`SessionDB.get_messages_as_conversation`), for the plugin: the policy
//! decides on the text Hermes sends, the edits land in the list Hermes then
//! uses, in place.
//!
//! Rows are known by identity, never by position: the loader drops rows
//! (background-review harness turns, on v31 stale tool-call markers) and
//! 0.19.0's output carries no row ids, so a sent row is recognised
//! by its role and stored timestamp (the list of sent rows,
//! `session_switch_sent`).

use crate::error::error;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PySlice, PyString};
use pyo3::{ffi, intern};
use session_switch::runtime::{
    EditAction, RowEdit, RowSummaries, YOU_TAG, could_hide_marker, prefix, push_summary, role_of,
    sent_text, untag,
};
use session_switch::{Failure, SentRow};
use std::mem::MaybeUninit;

/// Where a message's text is: what the policy sees and where an edit lands.
enum Text {
    /// `content` is a string.
    Content,
    /// `content` is a list (multimodal); the text is part `index`'s `text`,
    /// its first part `{"type": "text", "text": <str>}` (Hermes's own rule
    /// for where a list's text is; the CLI's `context` tags the same part).
    Part(usize),
    /// No text (`None`, a list without a text part): the policy sees an
    /// empty text, and an edit has nowhere to go.
    Absent,
}

/// The text of `messages[i]` at `where_`, if it is a string.
fn text_at<'py>(msg: &Bound<'py, PyDict>, where_: &Text) -> PyResult<Option<Bound<'py, PyString>>> {
    let py = msg.py();
    let value = match where_ {
        Text::Absent => return Ok(None),
        Text::Content => msg.get_item(intern!(py, "content"))?,
        Text::Part(i) => match msg.get_item(intern!(py, "content"))? {
            Some(list) => Some(list.get_item(*i)?.get_item(intern!(py, "text"))?),
            None => None,
        },
    };
    Ok(value.and_then(|v| v.cast_into::<PyString>().ok()))
}

/// Put `text` where [`locate`] found `msg`'s text.
fn set_text(msg: &Bound<'_, PyDict>, place: &Text, text: Bound<'_, PyString>) -> PyResult<()> {
    let py = msg.py();
    match place {
        Text::Content => msg.set_item(intern!(py, "content"), text),
        Text::Part(i) => match msg.get_item(intern!(py, "content"))? {
            Some(list) => list.get_item(*i)?.set_item(intern!(py, "text"), text),
            None => Ok(()),
        },
        Text::Absent => Ok(()),
    }
}

/// Where the text of `msg`'s content is, and that text (as [`text_at`]
/// would read it: one lookup of `content` instead of two).
fn locate<'py>(msg: &Bound<'py, PyDict>) -> PyResult<(Text, Option<Bound<'py, PyString>>)> {
    let py = msg.py();
    let Some(content) = msg.get_item(intern!(py, "content"))? else {
        return Ok((Text::Absent, None));
    };
    let content = match content.cast_into::<PyString>() {
        Ok(text) => return Ok((Text::Content, Some(text))),
        Err(e) => e.into_inner(),
    };
    let Ok(parts) = content.cast::<PyList>() else {
        return Ok((Text::Absent, None));
    };
    for (i, part) in parts.iter().enumerate() {
        let Ok(part) = part.cast::<PyDict>() else {
            continue;
        };
        let is_text = match part.get_item(intern!(py, "type"))? {
            Some(t) => t
                .cast::<PyString>()
                .is_ok_and(|t| t.to_str().is_ok_and(|t| t == "text")),
            None => false,
        };
        let text = part
            .get_item(intern!(py, "text"))?
            .and_then(|t| t.cast_into::<PyString>().ok());
        if is_text && text.is_some() {
            return Ok((Text::Part(i), text));
        }
    }
    Ok((Text::Absent, None))
}

/// The sent rows of one session for one agent, as `(timestamp bits, role)`
/// sorted: a message is looked up by its stored timestamp without copying its
/// role (a hash set of owned pairs cost an allocation per message of every
/// request).
struct Ours(Vec<(u64, String)>);

impl Ours {
    fn new(rows: &[SentRow]) -> Self {
        let mut ours: Vec<_> = rows
            .iter()
            .map(|row| (row.timestamp.to_bits(), row.role.clone()))
            .collect();
        ours.sort_unstable();
        Self(ours)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether a send of ours wrote a row with this role and stored timestamp.
    fn contains(&self, role: &str, timestamp: f64) -> bool {
        let bits = timestamp.to_bits();
        let from = self.0.partition_point(|(b, _)| *b < bits);
        self.0[from..]
            .iter()
            .take_while(|(b, _)| *b == bits)
            .any(|(_, r)| r == role)
    }
}

/// `Bridge.tag_messages`: the policy's edits on `messages` in place; how
/// many messages changed. `ours`: the sent rows into the
/// session for the agent ([`session_switch::Reads::sent_rows`]); `chars`:
/// the prefix the policy sees of each text; `edit`: the policy's
/// `tag-summaries` for the agent.
///
/// The policy sees, per message, a prefix of the text Hermes would send
/// (`api_content` when it is a non-empty string on a user or assistant
/// message, else the content's text: the rule of
/// [`sent_text`]) and whether a send of ours wrote the row; only the prefixes
/// are copied (into one string, WIT `row-summaries`), so a long history
/// costs little. An edit
/// (tag or untag) is then applied to the full texts, `content`'s text and
/// `api_content` alike, so it holds whichever of the two Hermes sends.
pub fn tag_messages(
    py: Python<'_>,
    ours: &[SentRow],
    chars: u32,
    messages: &Bound<'_, PyList>,
    edit: impl FnOnce(&RowSummaries) -> Result<Vec<RowEdit>, Failure>,
) -> PyResult<usize> {
    let ours = Ours::new(ours);
    let mut summaries = RowSummaries {
        rows: Vec::with_capacity(messages.len()),
        prefixes: String::new(),
    };
    let mut places = Vec::with_capacity(messages.len());
    for (index, item) in messages.iter().enumerate() {
        // Not a message (Hermes's are dicts with a string role): no text,
        // role `other`, never edited.
        let Ok(msg) = item.cast::<PyDict>() else {
            push_summary(&mut summaries, index as i64, role_of(""), "", false);
            places.push(Text::Absent);
            continue;
        };
        // Borrowed from the Python strings; a copy only for a text Python
        // cannot encode as UTF-8 (see [`edited`]).
        let role = string_at(msg, intern!(py, "role"))?;
        let role = role.as_ref().map(|r| r.to_string_lossy());
        let role = role.as_deref().unwrap_or_default();
        let (place, text) = locate(msg)?;
        let text = text.as_ref().map(|t| head(t, chars)).transpose()?;
        let api = string_at(msg, intern!(py, "api_content"))?;
        let api = api.as_ref().map(|a| head(a, chars)).transpose()?;
        let seen = prefix(
            sent_text(role, text.as_deref().unwrap_or_default(), api.as_deref()),
            chars,
        );
        let bridge_wrote = !ours.is_empty()
            && match msg.get_item(intern!(py, "timestamp"))? {
                Some(ts) => ts.extract::<f64>().is_ok_and(|ts| ours.contains(role, ts)),
                None => false,
            };
        push_summary(
            &mut summaries,
            index as i64,
            role_of(role),
            seen,
            bridge_wrote,
        );
        places.push(place);
    }
    let edits = edit(&summaries).map_err(error)?;
    let mut changed = 0;
    for RowEdit { index, action } in edits {
        let index = index as usize;
        let Ok(msg) = messages.get_item(index)?.cast_into::<PyDict>() else {
            continue;
        };
        // Only a text the edit changes is written (an untag of a text with
        // no tag is no change), so the count is of messages changed.
        let mut wrote = false;
        if let Some(text) = text_at(&msg, &places[index])?
            && let Some(new) = edited(&text, action)?
        {
            set_text(&msg, &places[index], new)?;
            wrote = true;
        }
        // An empty `api_content` stays empty: Hermes sends it only when it
        // is not, and a bare `[YOU] ` there would replace the whole text.
        if let Some(api) = msg
            .get_item(intern!(py, "api_content"))?
            .and_then(|v| v.cast_into::<PyString>().ok())
            .filter(|a| !a.to_string_lossy().is_empty())
            && let Some(new) = edited(&api, action)?
        {
            msg.set_item(intern!(py, "api_content"), new)?;
            wrote = true;
        }
        changed += usize::from(wrote);
    }
    Ok(changed)
}

/// `text` as UTF-8, at least its first `chars` characters (all that [`prefix`]
/// keeps of it). Read as code points ([`code_point_head`]), not through
/// Python's UTF-8 form, which for a non-ASCII string is an encoding of the
/// whole text kept with the string: a history Hermes loaded is new strings
/// each time, and encoding them would be a large share of `tag_messages`
/// (`make bench`). A text over four times the head is sliced in Python first,
/// so a long reply in Chinese is not copied whole (`make bench`
/// `tag_messages_long`). A character the slice keeps is one the whole text's
/// prefix keeps: Python counts code points, and each becomes at least one
/// character here (a lone surrogate three U+FFFD, see [`edited`]).
fn head(text: &Bound<'_, PyString>, chars: u32) -> PyResult<String> {
    let chars = chars as usize;
    let len = text.len()?;
    if len <= chars.saturating_mul(4).min(HEAD_BUFFER) {
        return code_point_head(text, len, chars);
    }
    let head = slice(text, 0, chars)?;
    if chars <= HEAD_BUFFER {
        return code_point_head(&head, chars.min(len), chars);
    }
    Ok(head.to_string_lossy().into_owned())
}

/// The most code points [`code_point_head`] copies out of one string (on
/// the stack: 4 KiB).
const HEAD_BUFFER: usize = 1024;

/// The first `chars` of the `len` (≤ [`HEAD_BUFFER`]) code points of
/// `text` as UTF-8, each as PyO3's `to_string_lossy` reads it: a surrogate
/// (which UTF-8 cannot hold) as three U+FFFD, every other code point as
/// itself. `PyUnicode_AsUCS4` is in the stable ABI (the wheel is `abi3`)
/// and copies into our buffer, allocating nothing.
fn code_point_head(text: &Bound<'_, PyString>, len: usize, chars: usize) -> PyResult<String> {
    debug_assert!(len <= HEAD_BUFFER);
    let mut points = [MaybeUninit::<u32>::uninit(); HEAD_BUFFER];
    // SAFETY: `text` is a live `str`; the buffer holds `HEAD_BUFFER` code
    // points and Python writes at most that many (it raises `SystemError`
    // for a longer string, checked below), the null not asked for.
    let copied = unsafe {
        ffi::PyUnicode_AsUCS4(
            text.as_ptr(),
            points.as_mut_ptr().cast(),
            HEAD_BUFFER as ffi::Py_ssize_t,
            0,
        )
    };
    if copied.is_null() {
        return Err(PyErr::fetch(text.py()));
    }
    let n = len.min(chars);
    let mut out = String::with_capacity(n * 3);
    for point in &points[..n] {
        // SAFETY: Python wrote the string's `len` ≥ `n` code points.
        match char::from_u32(unsafe { point.assume_init() }) {
            Some(c) => out.push(c),
            None => out.push_str("\u{FFFD}\u{FFFD}\u{FFFD}"),
        }
    }
    Ok(out)
}

/// `text[from:to]` (Python code points).
fn slice<'py>(
    text: &Bound<'py, PyString>,
    from: usize,
    to: usize,
) -> PyResult<Bound<'py, PyString>> {
    let py = text.py();
    let to = isize::try_from(to).unwrap_or(isize::MAX);
    let from = isize::try_from(from).unwrap_or(isize::MAX);
    Ok(text
        .as_any()
        .get_item(PySlice::new(py, from, to, 1))?
        .cast_into::<PyString>()?)
}

/// `msg[key]` when it is a string; `None` when absent or not a string.
fn string_at<'py>(
    msg: &Bound<'py, PyDict>,
    key: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyString>>> {
    Ok(msg
        .get_item(key)?
        .and_then(|v| v.cast_into::<PyString>().ok()))
}

/// The first head [`edited`] reads a cut from, in characters: blanks and
/// a few markers; a text that starts with more is read further.
const CUT_HEAD_CHARS: usize = 64;

/// `text` after `action` (WIT `edit-action`: tag = `[YOU] ` + untag, untag
/// = without the leading blanks and markers), or `None` when that changes
/// nothing. The edit is made on the Python string's characters, so a text
/// Python cannot encode as UTF-8 is edited too and keeps every other
/// character exactly: a lone surrogate, which Hermes's loader returns for a
/// multimodal row whose JSON holds `"\ud83d"` (the rules then see U+FFFD
/// in its place; the cut, leading blanks and markers, ends before it).
fn edited<'py>(
    text: &Bound<'py, PyString>,
    action: EditAction,
) -> PyResult<Option<Bound<'py, PyString>>> {
    let py = text.py();
    let len = text.len()?;
    // The cut (leading blanks and markers) read from a head of the text,
    // longer until it ends inside it: as in [`head`], a long text is not
    // encoded whole for the few characters an edit changes.
    let mut read = CUT_HEAD_CHARS;
    let cut_chars = loop {
        let sliced;
        let head = if read >= len {
            text.to_string_lossy()
        } else {
            sliced = slice(text, 0, read)?;
            sliced.to_string_lossy()
        };
        let rest = untag(&head);
        // Decided when what follows the cut is in the head and cannot be
        // the start of one more marker.
        if read >= len || (!rest.is_empty() && !could_hide_marker(rest)) {
            let cut = &head[..head.len() - rest.len()];
            let unchanged = match action {
                EditAction::Tag => cut == YOU_TAG,
                EditAction::Untag => cut.is_empty(),
            };
            if unchanged {
                return Ok(None);
            }
            break cut.chars().count();
        }
        read = read.saturating_mul(16);
    };
    let kept = slice(text, cut_chars, usize::MAX)?;
    let new = match action {
        EditAction::Tag => PyString::new(py, YOU_TAG).add(kept)?,
        EditAction::Untag => kept.into_any(),
    };
    Ok(Some(new.cast_into::<PyString>()?))
}
