//! Unit tests of `configure`'s validation: the sample settings, each
//! refused field, the edges, session ids and the prefix formula.

use super::*;
use crate::FailureKind;
use crate::samples::sample_settings;

fn err(settings: Settings) -> String {
    let e = ValidSettings::new(settings).expect_err("settings should be refused");
    assert_eq!(e.kind, FailureKind::BadInput, "{}", e.message);
    e.message
}

#[test]
fn sample_settings_are_valid_and_precompute_names() {
    let v = ValidSettings::new(sample_settings()).unwrap();
    let mohe = v.agent("mohe").unwrap();
    assert_eq!(mohe.names, vec!["mohe".to_string(), "墨河".to_string()]);
    assert_eq!(mohe.history_session(), "xmpp-mohe-v2");
    assert_eq!(v.session_owner("xmpp-zhiwei").unwrap().agent.name, "zhiwei");
    assert!(v.session_owner("20260619_190821_7c0afe").is_none());
    assert!(v.is_legacy("mohe"));
    assert!(!v.is_legacy("zhiwei"));
    // 8 × 6 + len("xiaoguo") + 2
    assert_eq!(v.prefix_chars(), 57);
    assert_eq!(v.ttl_seconds(), 3600.0);
}

/// Names sign exactly: an agent that also writes as `Mohe` lists it,
/// and both forms are kept.
#[test]
fn one_agent_may_sign_in_several_cases() {
    let mut s = sample_settings();
    s.agents[0].aliases.push("Mohe".into());
    let v = ValidSettings::new(s).unwrap();
    let names = &v.agent("mohe").unwrap().names;
    assert!(
        names.contains(&"mohe".to_string()) && names.contains(&"Mohe".to_string()),
        "{names:?}"
    );
    assert!(!names.contains(&"MOHE".to_string()), "{names:?}");
}

#[test]
fn unknown_agent_lists_the_configured_ones() {
    let v = ValidSettings::new(sample_settings()).unwrap();
    let e = v.agent("nobody").unwrap_err();
    assert_eq!(e.kind, FailureKind::UnknownAgent);
    assert_eq!(
        e.message,
        "unknown agent 'nobody' (configured: mohe, zhiwei, xiaoguo)"
    );
    // Lookup is exact: names are identifiers on the command line.
    assert_eq!(v.agent("MOHE").unwrap_err().kind, FailureKind::UnknownAgent);
    assert_eq!(v.select(None).unwrap().len(), 3);
    assert_eq!(v.select(Some("zhiwei")).unwrap()[0].agent.name, "zhiwei");
}

#[test]
fn refuses_each_invalid_field() {
    type Edit = fn(&mut Settings);
    let cases: &[(&str, Edit, &str)] = &[
        ("no agents", |s| s.agents.clear(), "no agents configured"),
        ("ttl 0", |s| s.ttl_seconds = 0, "ttl-seconds is 0"),
        (
            "max body 0",
            |s| s.max_body_chars = 0,
            "max-body-chars is 0",
        ),
        (
            "room resource",
            |s| s.room.push_str("/x"),
            "room 'coregroup@conference.example.org/x' has a resource",
        ),
        (
            "room no @",
            |s| s.room = "coregroup".into(),
            "room 'coregroup' is not a bare JID",
        ),
        (
            "empty name",
            |s| s.agents[1].name.clear(),
            "name of agent #2 is empty",
        ),
        (
            "padded name",
            |s| s.agents[0].name = " mohe".into(),
            "has leading or trailing whitespace",
        ),
        (
            "control in nick",
            |s| s.agents[0].nick = "mo\nhe".into(),
            "nick of agent 'mohe' \"mo\\nhe\" contains a control character",
        ),
        (
            "empty nick",
            |s| s.agents[0].nick.clear(),
            "nick of agent 'mohe' is empty",
        ),
        (
            "duplicate name",
            |s| s.agents[1].name = "mohe".into(),
            "name 'mohe' is used by both 'mohe' and 'mohe'",
        ),
        (
            "duplicate nick",
            |s| s.agents[1].nick = "MOHE".into(),
            "nick 'MOHE' is used by both 'mohe' and 'zhiwei'",
        ),
        (
            "duplicate jid",
            |s| s.agents[1].jid = "Mohe@example.org".into(),
            "JID 'Mohe@example.org' is used by both 'mohe' and 'zhiwei'",
        ),
        (
            "jid resource",
            |s| s.agents[0].jid = "mohe@example.org/laptop".into(),
            "JID of agent 'mohe' 'mohe@example.org/laptop' has a resource",
        ),
        (
            "jid no local",
            |s| s.agents[0].jid = "@example.org".into(),
            "is not a bare JID",
        ),
        (
            "jid no domain",
            |s| s.agents[0].jid = "mohe@".into(),
            "is not a bare JID",
        ),
        (
            "jid two @",
            |s| s.agents[0].jid = "mo@he@example.org".into(),
            "is not a bare JID",
        ),
        (
            "empty jid",
            |s| s.agents[0].jid.clear(),
            "JID of agent 'mohe' is empty",
        ),
        (
            "no sessions",
            |s| s.agents[2].sessions.clear(),
            "agent 'xiaoguo' has no XMPP sessions",
        ),
        (
            "empty session",
            |s| s.agents[0].sessions.push(String::new()),
            "XMPP session of agent 'mohe': session id is empty",
        ),
        (
            "long session",
            |s| s.agents[0].sessions.push("x".repeat(257)),
            "session id is 257 characters long, the maximum is 256",
        ),
        (
            "session twice",
            |s| s.agents[1].sessions.push("xmpp-mohe".into()),
            "session 'xmpp-mohe' is listed for both 'mohe' and 'zhiwei'",
        ),
        (
            "session twice same agent",
            |s| s.agents[0].sessions.push("xmpp-mohe".into()),
            "session 'xmpp-mohe' is listed for both 'mohe' and 'mohe'",
        ),
        (
            "empty alias",
            |s| s.agents[0].aliases.push(String::new()),
            "alias of agent 'mohe' is empty",
        ),
        (
            "shared alias",
            |s| s.agents[1].aliases.push("Mohe".into()),
            "'Mohe' is a name of both 'mohe' and 'zhiwei'",
        ),
        (
            "alias YOU",
            |s| s.agents[1].aliases.push("you".into()),
            "agent 'zhiwei' signs as 'you', which is the [YOU] tag itself",
        ),
        (
            "legacy unknown",
            |s| s.legacy_agent = Some("nobody".into()),
            "legacy-agent 'nobody' is not a configured agent (configured: mohe, zhiwei, xiaoguo)",
        ),
    ];
    for (name, edit, want) in cases {
        let mut s = sample_settings();
        edit(&mut s);
        let msg = err(s);
        assert!(msg.starts_with("invalid settings: "), "{name}: {msg}");
        assert!(msg.contains(want), "{name}: {msg:?} lacks {want:?}");
    }
}

#[test]
fn accepts_the_edges() {
    let mut s = sample_settings();
    s.ttl_seconds = 1;
    s.max_body_chars = 1;
    s.future_skew_seconds = 0;
    s.legacy_agent = None;
    s.agents[0].sessions.push("x".repeat(256));
    let v = ValidSettings::new(s).unwrap();
    assert!(!v.is_legacy("mohe"));
}

#[test]
fn session_id_rules() {
    assert_eq!(check_session_id("20260619_190821_7c0afe"), Ok(()));
    assert_eq!(check_session_id(&"é".repeat(256)), Ok(()));
    assert_eq!(check_session_id(""), Err("session id is empty".into()));
    assert_eq!(
        check_session_id(&"é".repeat(257)),
        Err("session id is 257 characters long, the maximum is 256".into())
    );
    assert_eq!(
        check_session_id("a\r\nb"),
        Err("session id \"a\\r\\nb\" contains a control character".into())
    );
    assert_eq!(
        check_session_id("a\0"),
        Err("session id \"a\\0\" contains a control character".into())
    );
    assert_eq!(
        check_session_id(" a"),
        Err("session id \" a\" has leading or trailing whitespace".into())
    );
}

#[test]
fn prefix_formula() {
    assert_eq!(prefix_chars_for(0), 50);
    assert_eq!(prefix_chars_for(7), 57);
}
