//! Session ids the way Hermes's API server takes them in
//! `X-Hermes-Session-Id` (0.19.0 `gateway/platforms/api_server.py`
//! `APIServerAdapter._handle_chat_completions`, with
//! `gateway/session.py` `_is_path_unsafe`): the header is `.strip()`ped,
//! then refused when it holds CR, LF or NUL, is path-unsafe (`..`, `/`,
//! `\`, or a leading drive letter `X:`), or is longer than 256
//! characters (`_MAX_SESSION_HEADER_LEN`). A session id we record or
//! redirect to must pass, or the gateway could not continue it.

use crate::limits::MAX_SESSION_ID_CHARS;

/// Why Hermes's API server would refuse `id`, or `None` when it takes it
/// unchanged. Blanks around the id count as a refusal: the server strips
/// them and would continue another session.
pub fn api_session_id_problem(id: &str) -> Option<&'static str> {
    if id.is_empty() {
        return Some("is empty");
    }
    // Python's str.strip(): Unicode White_Space and U+001C–U+001F.
    let py_space = |c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c);
    if id.starts_with(py_space) || id.ends_with(py_space) {
        return Some("has blanks around it (Hermes strips them)");
    }
    if id.contains(['\r', '\n', '\0']) {
        return Some("holds a CR, LF or NUL");
    }
    if id.contains("..") || id.contains(['/', '\\']) {
        return Some("is path-unsafe (`..`, `/` or `\\`)");
    }
    let mut chars = id.chars();
    // `s[0].isalpha() and s[1] == ":"`. Python's isalpha is the letter
    // categories (L*); Rust's Alphabetic adds letter numbers (`Ⅻ`) and some
    // combining marks, so a few ids Hermes takes are refused here: the safe
    // side, and no table of general categories in a crate without
    // dependencies.
    if chars.next().is_some_and(char::is_alphabetic) && chars.next() == Some(':') {
        return Some("starts like a drive path (`X:`)");
    }
    if id.chars().count() > MAX_SESSION_ID_CHARS {
        return Some("is longer than 256 characters");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    #[test]
    fn hermes_ids_pass_and_unsafe_ones_do_not() {
        for ok in [
            "xmpp-mohe-v2",
            "20260619_190821_7c0afe",
            "api_1781870400_0a1b2c3d",
            "会话:1",
            "1:x",
        ] {
            assert_eq!(api_session_id_problem(ok), None, "{ok}");
        }
        let long: String = core::iter::repeat_n('a', 257).collect();
        assert_eq!(api_session_id_problem(&long[..256]), None);
        for bad in [
            "", " x", "x\t", "a\rb", "a\nb", "a\0b", "../x", "a/b", "a\\b", "a..b", "C:x", "é:x",
            &long,
        ] {
            assert!(api_session_id_problem(bad).is_some(), "{bad:?}");
        }
    }
}
