//! What a person's post puts in the room: the stanza with the human-origin
//! marker and its ids, and the bodies that must never reach it.

use session_switch_contract::failure::Failure;

/// A new stanza id: `ssw-` and 32 random hex digits (the `id` and the
/// `origin-id` of one post; unique enough that a bot can drop a stanza it
/// saw twice, XEP-0359).
pub fn new_stanza_id() -> String {
    format!("ssw-{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

/// The stanza of a person's post of `body` (docs/src/design/loop-guard.md):
/// `<message type='groupchat' id='ID'><body>BODY</body><origin-id
/// xmlns='urn:xmpp:sid:0' id='ID'/><human-origin
/// xmlns='urn:agentsmeeting:session-switch:0'/></message>`, with no `from`
/// or `to` (`send_stanza` sets them). The body is escaped so the room gets
/// it byte for byte: `&`, `<`, `>` as entities, and CR as `&#13;` (an XML
/// parser would turn a literal CR into LF); tabs, line feeds and any other
/// character stay as they are. `id` must be [`new_stanza_id`]'s (no
/// character that needs escaping in an attribute).
pub fn human_stanza(body: &str, id: &str) -> String {
    use session_switch_contract::origin::{HUMAN_ORIGIN_ELEMENT, HUMAN_ORIGIN_NS, ORIGIN_ID_NS};
    debug_assert!(id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    let mut stanza = String::with_capacity(body.len() + 200);
    stanza.push_str("<message type='groupchat' id='");
    stanza.push_str(id);
    stanza.push_str("'><body>");
    for c in body.chars() {
        match c {
            '&' => stanza.push_str("&amp;"),
            '<' => stanza.push_str("&lt;"),
            '>' => stanza.push_str("&gt;"),
            '\r' => stanza.push_str("&#13;"),
            c => stanza.push(c),
        }
    }
    stanza.push_str("</body><origin-id xmlns='");
    stanza.push_str(ORIGIN_ID_NS);
    stanza.push_str("' id='");
    stanza.push_str(id);
    stanza.push_str("'/><");
    stanza.push_str(HUMAN_ORIGIN_ELEMENT);
    stanza.push_str(" xmlns='");
    stanza.push_str(HUMAN_ORIGIN_NS);
    stanza.push_str("'/></message>");
    stanza
}

/// Refuse what must never reach the room (`bad-input`): an empty `from`, an
/// empty body, or a body with a character XML 1.0 forbids (§2.2 `Char`:
/// U+0000–U+001F except TAB, LF, CR, and U+FFFE, U+FFFF; a Rust `str` holds
/// no lone surrogates). ejabberd accepts such a body, archives it and
/// broadcasts it raw, and every receiving client then drops its stream
/// (docs/src/design/ejabberd-facts.md). The policy already removes them; this is the last guard.
pub(super) fn refuse_unpostable(from: &str, body: &str) -> Result<(), Failure> {
    if from.trim().is_empty() {
        return Err(Failure::bad_input(
            "the sender JID is empty; set the agent's jid in the config",
        ));
    }
    if body.is_empty() {
        return Err(Failure::bad_input(
            "the message body is empty; nothing to post",
        ));
    }
    if let Some((index, c)) = body.chars().enumerate().find(|&(_, c)| is_xml_illegal(c)) {
        return Err(Failure::bad_input(format!(
            "the message body holds U+{:04X} at character {index}, which XML 1.0 forbids and \
             which would break every client in the room; nothing was posted (remove control \
             characters)",
            c as u32
        )));
    }
    Ok(())
}

/// XML 1.0 `Char` excludes these (a `char` is never a surrogate).
pub(super) fn is_xml_illegal(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{8}' | '\u{B}' | '\u{C}' | '\u{E}'..='\u{1F}' | '\u{FFFE}' | '\u{FFFF}')
}
