//! ejabberd transports: post a body to the MUC room, and ask the server
//! beforehand whether the room accepts the sender.
//!
//! Two ways to reach the same ejabberd command (`send_stanza`, from
//! `mod_admin_extra`): [`EjabberdCtl`] runs the `ejabberdctl` command line
//! (as the seed does, possibly through `docker exec`), [`HttpApi`] calls
//! `mod_http_api`. Every post is a person's (the CLI's `send`), so the
//! stanza carries the human-origin marker, a stanza `id` and an XEP-0359
//! `origin-id` ([`human_stanza`]); `send_stanza` routes it exactly as
//! `send_message` routed the seed's bare body (same senders accepted, same
//! silent drop of the others: verified on ejabberd 23.01). Both implement [`Transport`], the post-to-room half of the
//! send (DESIGN §8): the host calls [`Transport::check_sender`] before it
//! writes anything (for an agent that posted before, on another thread
//! beside the post) and [`Transport::post`] with no transaction open.
//!
//! Why the check exists (DESIGN §5, verified on ejabberd 23.01): the room
//! silently drops a groupchat message whose FROM is not a MUC/Sub subscriber,
//! a MUC service admin or an online occupant, and `send_message` still
//! answers success (exit 0, HTTP 200). Only the server can say whether a
//! sender is accepted, and only before the post.

mod ejabberdctl;
mod http_api;

use std::time::Duration;

use session_switch_runtime::Failure;

pub use ejabberdctl::EjabberdCtl;
pub use http_api::HttpApi;

/// Default time limit of one `ejabberdctl` call: 15 s. Each call boots an
/// Erlang VM (0.35–0.6 s measured, DESIGN §5) and `docker exec` adds the
/// container runtime's start-up, so the limit is generous; it only has to
/// end a hung call.
pub const EJABBERDCTL_TIMEOUT: Duration = Duration::from_secs(15);

/// Default time limit of one HTTP API request: 5 s, connection included.
/// A post over `mod_http_api` takes 10–20 ms (DESIGN §5).
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(5);

/// The post-to-room half of the send (DESIGN §8). Implementations hold no
/// connection state that a failed call could poison: every call stands
/// alone, so one value may serve many sends and threads, and a check may
/// run on one thread while another posts.
pub trait Transport: Send + Sync {
    /// Ask the server whether `from` (a bare JID; a resource is ignored, as
    /// ejabberd does for subscribers) may post to `room` (a bare room JID,
    /// `name@service`). `Ok(())` when
    /// the JID is a MUC/Sub subscriber of the room (ejabberd's
    /// `get_subscribers`, compared case-insensitively).
    ///
    /// Errors: not a subscriber → `not-accepted`, saying how to fix it (the
    /// `subscribe_room` command); the room does not exist → `not-accepted`
    /// saying so; a room JID that is not `name@service` → `bad-input`; server
    /// unreachable, node down, time-out → `transport`.
    ///
    /// A MUC service admin could also post, but the API cannot tell who is
    /// one, so the deployment subscribes the agents explicitly (the seed's
    /// agents are room members, not admins).
    fn check_sender(&self, from: &str, room: &str) -> Result<(), Failure>;

    /// `send_stanza FROM ROOM STANZA` with the [`human_stanza`] of `body`
    /// (a groupchat message with the human-origin marker, a fresh stanza
    /// `id` and the same XEP-0359 `origin-id`). `Ok(())` when the server
    /// answered success; that alone does not prove delivery, hence
    /// [`Transport::check_sender`].
    ///
    /// Errors: an empty body, or one holding a character XML 1.0 forbids
    /// (it would break the stream of every client in the room) →
    /// `bad-input`, and nothing is posted; no answer within the time limit
    /// after the request went out → `unknown-outcome` ("the room may have
    /// the message"); any other failure → `transport` with the server's text.
    fn post(&self, from: &str, room: &str, body: &str) -> Result<(), Failure>;

    /// Short name for messages and logs: `ejabberdctl` or `http`.
    fn name(&self) -> &'static str;
}

/// A bare room JID split at the `@` into the room's name (its local part)
/// and its MUC service (e.g. `conference.example.org`): the two arguments
/// of ejabberd's room commands (`get_subscribers NAME SERVICE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoomJid<'a> {
    /// The room's local part, e.g. `coregroup`.
    pub name: &'a str,
    /// The MUC service's domain, e.g. `conference.meeting.localhost`.
    pub service: &'a str,
}

impl<'a> RoomJid<'a> {
    /// Split `room` (`name@service`). Errors (`bad-input`): no `@`, an empty
    /// part, a resource (`/nick`: that addresses an occupant, and the room
    /// drops such a groupchat message), whitespace or control characters.
    pub fn parse(room: &'a str) -> Result<Self, Failure> {
        let bad = |why: &str| {
            Failure::bad_input(format!(
                "room JID {room:?} {why}; set [xmpp] room to the bare room JID, \
                 e.g. coregroup@conference.example.org"
            ))
        };
        if room.contains('/') {
            return Err(bad(
                "has a resource (/…); a groupchat goes to the bare room JID",
            ));
        }
        if room.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("contains whitespace or control characters"));
        }
        match room.split_once('@') {
            Some((name, service))
                if !name.is_empty() && !service.is_empty() && !service.contains('@') =>
            {
                Ok(Self { name, service })
            }
            _ => Err(bad("is not of the form name@service")),
        }
    }
}

/// A new stanza id: `ssw-` and 32 random hex digits (the `id` and the
/// `origin-id` of one post; unique enough that a bot can drop a stanza it
/// saw twice, XEP-0359).
pub fn new_stanza_id() -> String {
    format!("ssw-{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

/// The stanza of a person's post of `body` (DESIGN §9.3):
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

/// The bare part of `jid` (before any `/resource`), lower-cased for
/// comparison: ejabberd stores JIDs nodeprep'd/nameprep'd, and for the
/// ASCII names agents use that is lower case.
fn comparable_bare_jid(jid: &str) -> String {
    jid.split_once('/')
        .map_or(jid, |(bare, _)| bare)
        .trim()
        .to_lowercase()
}

/// Whether `from` is among `subscribers` (bare JIDs as ejabberd lists them).
fn is_subscriber<'s>(from: &str, subscribers: impl IntoIterator<Item = &'s str>) -> bool {
    let wanted = comparable_bare_jid(from);
    subscribers
        .into_iter()
        .any(|s| comparable_bare_jid(s) == wanted)
}

/// The `not-accepted` failure for a sender that is not a subscriber, with
/// the command that fixes it (nick = the JID's local part, as the seed's
/// agents use their names as nicks; the transport does not know the
/// configured nick, so the message says to use that one if it differs).
fn not_subscriber(from: &str, room: &str) -> Failure {
    let bare = comparable_bare_jid(from);
    let nick = bare
        .split_once('@')
        .map_or(bare.as_str(), |(local, _)| local);
    Failure::new(
        session_switch_runtime::FailureKind::NotAccepted,
        format!(
            "{bare} is not a MUC/Sub subscriber of room {room}, so the room would drop its \
             messages while ejabberd still reports success; subscribe it once: \
             ejabberdctl subscribe_room {bare} {nick} {room} urn:xmpp:mucsub:nodes:messages \
             (with the agent's `nick` from the config in place of {nick} if it differs: \
             is-own knows the room's echo of its posts by that nick)"
        ),
    )
}

/// What [`no_such_room`] says after the room's JID, and
/// [`is_no_such_room`] looks for.
const NO_SUCH_ROOM: &str = " does not exist on the server (";

/// The `not-accepted` failure for a room the server does not have.
fn no_such_room(room: &str, server_text: &str) -> Failure {
    Failure::new(
        session_switch_runtime::FailureKind::NotAccepted,
        format!(
            "room {room}{NO_SUCH_ROOM}{server_text}); check [xmpp] room in \
             the config, or create the room with allow_subscription=true"
        ),
    )
}

/// Whether `failure` is [`Transport::check_sender`]'s answer for a room the
/// server does not have. A post to such a room reaches nobody (a MUC room
/// is made by a join, never by a message), so a send whose post went out
/// beside this answer was certainly not delivered.
pub fn is_no_such_room(failure: &Failure) -> bool {
    failure.kind == session_switch_runtime::FailureKind::NotAccepted
        && failure.message.starts_with("room ")
        && failure.message.contains(NO_SUCH_ROOM)
}

/// Whether ejabberd's answer says the room is missing (`mod_muc_admin`
/// answers `The room does not exist` on ejabberdctl and over HTTP alike,
/// also for an unknown MUC service).
fn says_no_such_room(server_text: &str) -> bool {
    server_text
        .to_ascii_lowercase()
        .contains("room does not exist")
}

/// Refuse what must never reach the room (`bad-input`): an empty `from`, an
/// empty body, or a body with a character XML 1.0 forbids (§2.2 `Char`:
/// U+0000–U+001F except TAB, LF, CR, and U+FFFE, U+FFFF; a Rust `str` holds
/// no lone surrogates). ejabberd accepts such a body, archives it and
/// broadcasts it raw, and every receiving client then drops its stream
/// (DESIGN §5). The policy already removes them; this is the last guard.
fn refuse_unpostable(from: &str, body: &str) -> Result<(), Failure> {
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
fn is_xml_illegal(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{8}' | '\u{B}' | '\u{C}' | '\u{E}'..='\u{1F}' | '\u{FFFE}' | '\u{FFFF}')
}

/// At most `max` characters of `text` on one line (newlines and runs of
/// spaces collapsed), for quoting a server's answer in a one-line message.
fn one_line(text: &str, max: usize) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() <= max {
        joined
    } else {
        let mut cut: String = joined.chars().take(max).collect();
        cut.push('…');
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use session_switch_runtime::FailureKind;

    #[test]
    fn room_jid_splits_at_the_at_sign() {
        let room = RoomJid::parse("coregroup@conference.example.org").unwrap();
        assert_eq!(room.name, "coregroup");
        assert_eq!(room.service, "conference.example.org");
    }

    #[test]
    fn room_jid_refuses_what_is_not_a_bare_room_jid() {
        for (bad, part) in [
            ("coregroup", "not of the form"),
            ("@conference.example.org", "not of the form"),
            ("coregroup@", "not of the form"),
            ("a@b@c", "not of the form"),
            ("coregroup@conference.example.org/mohe", "has a resource"),
            ("core group@conference.example.org", "whitespace"),
        ] {
            let err = RoomJid::parse(bad).unwrap_err();
            assert_eq!(err.kind, FailureKind::BadInput, "{bad}");
            assert!(err.message.contains(part), "{bad}: {}", err.message);
            assert!(err.message.contains(&format!("{bad:?}")), "{}", err.message);
        }
    }

    #[test]
    fn subscriber_match_ignores_resource_and_case() {
        let subs = ["zhiwei@meeting.localhost", "mohe@meeting.localhost"];
        assert!(is_subscriber("mohe@meeting.localhost", subs));
        assert!(is_subscriber("Mohe@Meeting.Localhost/cli", subs));
        assert!(!is_subscriber("mohe2@meeting.localhost", subs));
        assert!(!is_subscriber("mohe@meeting.localhost.evil", subs));
        assert!(!is_subscriber("mohe@meeting.localhost", []));
    }

    #[test]
    fn not_subscriber_names_the_fix() {
        let f = not_subscriber("outsider@meeting.localhost/x", "coregroup@conference.m");
        assert_eq!(f.kind, FailureKind::NotAccepted);
        assert!(f.message.contains(
            "ejabberdctl subscribe_room outsider@meeting.localhost outsider coregroup@conference.m"
        ));
        assert!(
            f.message
                .contains("with the agent's `nick` from the config in place of outsider")
        );
    }

    #[test]
    fn xml_illegal_characters_are_refused_with_their_position() {
        for (body, code, index) in [
            ("a\u{1}b", "U+0001", 1),
            ("\u{0}", "U+0000", 0),
            ("ok\u{1b}[31m", "U+001B", 2),
            ("x\u{FFFE}", "U+FFFE", 1),
            ("中文\u{FFFF}", "U+FFFF", 2),
            ("\u{B}", "U+000B", 0),
        ] {
            let err = refuse_unpostable("mohe@m", body).unwrap_err();
            assert_eq!(err.kind, FailureKind::BadInput);
            assert!(err.message.contains(code), "{body:?}: {}", err.message);
            assert!(
                err.message.contains(&format!("character {index},")),
                "{body:?}: {}",
                err.message
            );
        }
    }

    #[test]
    fn tab_newline_cr_and_any_unicode_pass() {
        refuse_unpostable("mohe@m", "a\tb\nc\r\nd 中文 🚀 \u{FFFD} \u{10FFFF}").unwrap();
    }

    #[test]
    fn empty_body_or_sender_is_refused() {
        let err = refuse_unpostable("mohe@m", "").unwrap_err();
        assert_eq!(err.kind, FailureKind::BadInput);
        assert!(err.message.contains("body is empty"));
        let err = refuse_unpostable(" ", "hi").unwrap_err();
        assert!(err.message.contains("sender JID is empty"));
    }

    #[test]
    fn the_human_stanza_escapes_the_body_and_carries_the_marker() {
        let id = new_stanza_id();
        assert!(id.starts_with("ssw-") && id.len() == 36, "{id}");
        assert_ne!(id, new_stanza_id());
        assert_eq!(
            human_stanza("a<b> & ]]> \"q\" 's\r\n\t中文", "ssw-1"),
            "<message type='groupchat' id='ssw-1'><body>a&lt;b&gt; &amp; ]]&gt; \"q\" 's&#13;\n\t中文\
             </body><origin-id xmlns='urn:xmpp:sid:0' id='ssw-1'/><human-origin \
             xmlns='urn:agentsmeeting:session-switch:0'/></message>"
        );
    }

    #[test]
    fn one_line_collapses_and_cuts() {
        assert_eq!(one_line("  a\n\n b  c ", 10), "a b c");
        assert_eq!(one_line("abcdef", 3), "abc…");
    }

    #[test]
    fn room_missing_text_is_recognised() {
        assert!(says_no_such_room("{error,\"The room does not exist\"}"));
        assert!(says_no_such_room("\"The room does not exist\""));
        assert!(!says_no_such_room("nodedown"));
    }
}
