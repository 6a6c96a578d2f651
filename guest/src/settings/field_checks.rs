//! The checks of single settings fields: a session id, a name-like field,
//! a bare JID. Each answers what is wrong in words; the caller says where.

use super::MAX_SESSION_ID_CHARS;

/// A session id a record may name and a send may come from: non-empty, at
/// most 256 characters, no control characters (Hermes's API server rejects
/// CR/LF/NUL and longer ids), no surrounding whitespace. Errors describe the
/// fault, e.g. `session id is empty`.
pub fn check_session_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("session id is empty".into());
    }
    let chars = id.chars().count();
    if chars > MAX_SESSION_ID_CHARS {
        return Err(format!(
            "session id is {chars} characters long, the maximum is {MAX_SESSION_ID_CHARS}"
        ));
    }
    if id.chars().any(char::is_control) {
        return Err(format!("session id {id:?} contains a control character"));
    }
    if id.trim() != id {
        return Err(format!(
            "session id {id:?} has leading or trailing whitespace"
        ));
    }
    Ok(())
}

/// A name-like field: non-empty, no control characters, no surrounding
/// whitespace.
pub(super) fn check_text(what: &str, value: &str) -> Result<(), String> {
    if value.is_empty() {
        Err(format!("{what} is empty"))
    } else if value.chars().any(char::is_control) {
        Err(format!("{what} {value:?} contains a control character"))
    } else if value.trim() != value {
        Err(format!(
            "{what} {value:?} has leading or trailing whitespace"
        ))
    } else {
        Ok(())
    }
}

/// A bare JID (RFC 7622): exactly one `@` with a non-empty local part and
/// domain, no resource (`/`), no whitespace or control characters.
pub(super) fn check_bare_jid(what: &str, jid: &str) -> Result<(), String> {
    check_text(what, jid)?;
    if jid.contains('/') {
        return Err(format!(
            "{what} '{jid}' has a resource; give the bare JID (local@domain)"
        ));
    }
    if jid.chars().any(char::is_whitespace) {
        return Err(format!("{what} '{jid}' contains whitespace"));
    }
    match jid.split_once('@') {
        Some((local, domain))
            if !local.is_empty() && !domain.is_empty() && !domain.contains('@') =>
        {
            Ok(())
        }
        _ => Err(format!(
            "{what} '{jid}' is not a bare JID (expected local@domain)"
        )),
    }
}
