//! The rows the loader drops or blanks after reading: background-review
//! harness turns (0.19.0 and v31) and, on v31, stale tool-call markers.

use super::content::{is_py_space, py_strip};
use super::message::{Keys, Message};
use super::sql::truthy;
use super::version::Loader;

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
    matches!(&*msg.role, "user" | "system")
        && msg.text().is_some_and(|c| {
            let head = c.trim_start_matches(is_py_space);
            REVIEW_HARNESS_PREFIXES.iter().any(|p| head.starts_with(p))
        })
}

/// `_strip_background_review_harness`: which messages stay when each
/// harness message and the assistant message right after it are dropped.
/// v31 (`hermes_state.py`): a harness prompt right after another does not
/// arm a second skip; 0.19.0 re-arms.
pub(super) fn background_review_harness_kept(loader: Loader, messages: &[Message]) -> Vec<bool> {
    let mut keep = Vec::with_capacity(messages.len());
    let mut skip_next_assistant = false;
    let mut previous_was_harness = false;
    for msg in messages {
        if is_harness(msg) {
            skip_next_assistant = loader != Loader::V31 || !previous_was_harness;
            previous_was_harness = true;
            keep.push(false);
            continue;
        }
        if skip_next_assistant {
            skip_next_assistant = false;
            if msg.role == "assistant" {
                previous_was_harness = false;
                keep.push(false);
                continue;
            }
        }
        previous_was_harness = false;
        keep.push(true);
    }
    keep
}

/// v31 `hermes_state.py` `_strip_stale_tool_call_markers`, for one message:
/// an assistant message with tool calls whose stripped string content is a
/// bare marker (`^\[[A-Za-z_][A-Za-z0-9_.-]*\]$`, e.g. `[memory]`) gets
/// empty content.
pub(super) fn strip_stale_tool_call_marker(msg: &mut Message) {
    if msg.role != "assistant" || !msg.key("tool_calls").is_some_and(truthy) {
        return;
    }
    if msg
        .text()
        .is_some_and(|content| is_stale_marker(py_strip(content)))
    {
        msg.clear_text();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_markers() {
        assert!(is_stale_marker("[memory]"));
        assert!(is_stale_marker("[skill_manage.v-2]"));
        assert!(!is_stale_marker("[2x]"));
        assert!(!is_stale_marker("[]"));
        assert!(!is_stale_marker("[a b]"));
        assert!(!is_stale_marker("x[a]"));
    }
}
