//! Checks of one field's value, shared by the sections: non-empty, nick or
//! alias, bare JID, unique.

use session_switch_contract::failure::Failure;
use std::collections::HashMap;
use std::str::FromStr;
use toml::Spanned;

use super::source::{Source, Span};

pub(super) fn non_empty<'s>(
    value: &'s Spanned<String>,
    what: &str,
    src: &Source<'_>,
) -> Result<&'s str, Failure> {
    let v = value.get_ref();
    if v.trim().is_empty() {
        return Err(src.at(value.span(), format!("{what} must not be empty")));
    }
    Ok(v)
}

/// A nick or alias (the policy's `configure` rules): non-empty, no control
/// characters (a nick travels in stanzas and log lines), no surrounding
/// whitespace (a signature is matched from the line's first character).
pub(super) fn name_like<'s>(
    value: &'s Spanned<String>,
    what: &str,
    src: &Source<'_>,
) -> Result<&'s str, Failure> {
    let v = non_empty(value, what, src)?;
    if v.chars().any(char::is_control) {
        return Err(src.at(
            value.span(),
            format!("{what} {v:?} contains a control character"),
        ));
    }
    if v.trim() != v {
        return Err(src.at(
            value.span(),
            format!("{what} {v:?} has leading or trailing whitespace"),
        ));
    }
    Ok(v)
}

/// A bare JID per RFC 7622 (the `jid` crate of xmpp-rs): local part, domain,
/// no resource. Returned prepared as the server compares it (nodeprep and
/// nameprep fold case: `CoreGroup@Conference.example.org` is
/// `coregroup@conference.example.org`): ejabberd routes a post to the room
/// written in any case, but its commands look the room up by the prepared
/// name only, so a check written as the config spells it refused a room
/// that had the post. Its nodeprep and IDNA checks also refuse what the
/// policy's `configure` refuses in a JID (whitespace, control characters,
/// a second `@`; `tests/all/config.rs`).
pub(super) fn bare_jid(
    value: &Spanned<String>,
    what: &str,
    src: &Source<'_>,
) -> Result<String, Failure> {
    let v = value.get_ref();
    let parsed = jid::Jid::from_str(v).map_err(|e| {
        src.at(
            value.span(),
            format!("{what} '{v}' is not a valid JID: {e}"),
        )
    })?;
    if parsed.resource().is_some() {
        return Err(src.at(
            value.span(),
            format!("{what} '{v}' must be a bare JID (no /resource)"),
        ));
    }
    if parsed.node().is_none() {
        return Err(src.at(
            value.span(),
            format!("{what} '{v}' needs a local part (name@domain; '{v}' alone reads as a domain)"),
        ));
    }
    Ok(parsed.to_string())
}

/// Record `key` (`shown` as written, folded to `key`) as seen at `span`; a
/// second sighting is an error naming both lines.
pub(super) fn unique(
    seen: &mut HashMap<String, usize>,
    key: String,
    shown: &str,
    span: Span,
    what: &str,
    src: &Source<'_>,
) -> Result<(), Failure> {
    if let Some(&first) = seen.get(&key) {
        let folded = if shown == key {
            ""
        } else {
            ", compared ignoring case"
        };
        let msg = format!(
            "duplicate {what} '{shown}' (first at line {}{folded})",
            src.line(first)
        );
        return Err(src.at(span, msg));
    }
    seen.insert(key, span.start);
    Ok(())
}
