//! The transports' shared checks and stanza, tested without a server.

use super::server_answers::*;
use super::stanza::*;
use super::*;
use session_switch_contract::failure::FailureKind;

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
