//! What ejabberd's answers mean: whether a sender is among a room's
//! subscribers, whether the room exists; the failures that say how to fix
//! either, and a server's text quoted on one line.

use session_switch_contract::failure::Failure;

/// The bare part of `jid` (before any `/resource`), lower-cased for
/// comparison: ejabberd stores JIDs nodeprep'd/nameprep'd, and for the
/// ASCII names agents use that is lower case.
pub(super) fn comparable_bare_jid(jid: &str) -> String {
    jid.split_once('/')
        .map_or(jid, |(bare, _)| bare)
        .trim()
        .to_lowercase()
}

/// Whether `from` is among `subscribers` (bare JIDs as ejabberd lists them).
pub(super) fn is_subscriber<'s>(
    from: &str,
    subscribers: impl IntoIterator<Item = &'s str>,
) -> bool {
    let wanted = comparable_bare_jid(from);
    subscribers
        .into_iter()
        .any(|s| comparable_bare_jid(s) == wanted)
}

/// The `not-accepted` failure for a sender that is not a subscriber, with the
/// command that fixes it (nick = the JID's local part, as the legacy
/// `xmpp_session_bridge.py`'s agents use their names as nicks; the transport
/// does not know the configured nick, so the message says to use that one if
/// it differs).
pub(super) fn not_subscriber(from: &str, room: &str) -> Failure {
    let bare = comparable_bare_jid(from);
    let nick = bare
        .split_once('@')
        .map_or(bare.as_str(), |(local, _)| local);
    Failure::new(
        session_switch_contract::failure::FailureKind::NotAccepted,
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
pub(super) const NO_SUCH_ROOM: &str = " does not exist on the server (";

/// The `not-accepted` failure for a room the server does not have.
pub(super) fn no_such_room(room: &str, server_text: &str) -> Failure {
    Failure::new(
        session_switch_contract::failure::FailureKind::NotAccepted,
        format!(
            "room {room}{NO_SUCH_ROOM}{server_text}); check [xmpp] room in \
             the config, or create the room with allow_subscription=true"
        ),
    )
}

/// Whether `failure` is [`Transport::check_sender`](super::Transport::check_sender)'s answer for a room the
/// server does not have. A post to such a room reaches nobody (a MUC room
/// is made by a join, never by a message), so a send whose post went out
/// beside this answer was certainly not delivered.
pub fn is_no_such_room(failure: &Failure) -> bool {
    failure.kind == session_switch_contract::failure::FailureKind::NotAccepted
        && failure.message.starts_with("room ")
        && failure.message.contains(NO_SUCH_ROOM)
}

/// Whether ejabberd's answer says the room is missing (`mod_muc_admin`
/// answers `The room does not exist` on ejabberdctl and over HTTP alike,
/// also for an unknown MUC service).
pub(super) fn says_no_such_room(server_text: &str) -> bool {
    server_text
        .to_ascii_lowercase()
        .contains("room does not exist")
}

/// At most `max` characters of `text` on one line (newlines and runs of
/// spaces collapsed), for quoting a server's answer in a one-line message.
pub(super) fn one_line(text: &str, max: usize) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() <= max {
        joined
    } else {
        let mut cut: String = joined.chars().take(max).collect();
        cut.push('…');
        cut
    }
}
