//! Unit tests of the imports' gates: `send`, `meta-delete` and `history`
//! only in their calls, and the guest's error lines kept bounded.

use super::gates::{KEPT_LINE_CHARS, KEPT_LINES};
use super::*;
use crate::bindings::agentsmeeting::session_switch::host::Host as _;
use crate::fake_host::{self, FakeHost, FakeRow, ImportCall, NOW};

/// A store's data over the fake host, and the fake (what reaches its
/// imports). Its one row's id is 22, so a send's row is 23; both keys the
/// tests delete are stored.
fn state() -> (StoreData, FakeHost) {
    let host = fake_host::host(vec![FakeRow::stored(
        22,
        "user",
        "mohe: 大家好，今天的会议改到下午三点。",
    )]);
    for key in ["session_switch:active:mohe", "active_xmpp_sender_session"] {
        host.state().meta.insert(key.into(), "{}".into());
    }
    let state = StoreData::new(Box::new(host.clone()), &Limits::default(), "test".into());
    (state, host)
}

/// The keys the fake was asked to delete, in order.
fn deletes(host: &FakeHost) -> Vec<String> {
    let state = host.state();
    let keys = state.calls.iter().filter_map(|c| match c {
        ImportCall::MetaDelete(key) => Some(key.clone()),
        _ => None,
    });
    keys.collect()
}

/// How many `history` calls reached the fake.
fn histories(host: &FakeHost) -> usize {
    fake_host::calls(host, |c| matches!(c, ImportCall::History { .. }))
}

fn plan() -> SendPlan {
    SendPlan {
        agent: "mohe".into(),
        from_jid: "mohe@example.org".into(),
        room_body: "hello".into(),
        history_session_id: "xmpp-mohe-v2".into(),
        history_content: "[YOU] hello".into(),
        cli_session_id: "20260619_190821_7c0afe".into(),
        record_key: "session_switch:active:mohe".into(),
        record_value: "{}".into(),
        timestamp: NOW,
    }
}

fn send_args() -> Option<SendArgs> {
    Some(SendArgs {
        agent: "mohe".into(),
        cli_session_id: "20260619_190821_7c0afe".into(),
    })
}

fn policy_message(result: Result<impl std::fmt::Debug, WitFailure>) -> String {
    let failure: Failure = result.unwrap_err().into();
    assert_eq!(
        failure.kind,
        crate::FailureKind::Policy,
        "{}",
        failure.message
    );
    failure.message
}

#[test]
fn send_is_refused_outside_policy_send_and_nothing_is_sent() {
    let (mut state, seen) = state();
    state.begin(Call::Resolve, None);
    let message = policy_message(state.send(plan()));
    assert!(
        message.contains("called host.send during resolve"),
        "{message}"
    );
    assert!(state.call.violation.is_some());
    assert!(seen.state().sent.is_empty());
}

#[test]
fn one_send_per_call_with_a_plan_that_matches_the_call() {
    let (mut state, seen) = state();
    state.begin(Call::Send, send_args());
    assert_eq!(state.send(plan()).unwrap().message_id, 23);
    assert_eq!(state.call.sent.as_ref().unwrap().message_id, 23);
    let message = policy_message(state.send(plan()));
    assert!(message.contains("twice"), "{message}");
    assert_eq!(seen.state().sent.len(), 1);

    type Spoil = fn(&mut SendPlan);
    let wrong: [(Spoil, &str); 4] = [
        (|p| p.agent = "zhiwei".into(), "for agent 'zhiwei'"),
        (
            |p| p.cli_session_id = "other".into(),
            "from CLI session 'other'",
        ),
        (|p| p.record_key = "fts_x".into(), "record key 'fts_x'"),
        (
            |p| p.history_content = "[YOU] hello!".into(),
            "not `[YOU] ` + the room's body",
        ),
    ];
    for (spoil, expected) in wrong {
        state.begin(Call::Send, send_args());
        let mut bad = plan();
        spoil(&mut bad);
        let message = policy_message(state.send(bad));
        assert!(message.contains(expected), "{message}");
        assert!(state.call.violation.is_some());
    }
    assert_eq!(seen.state().sent.len(), 1, "no bad plan was sent");
}

#[test]
fn meta_delete_only_in_clear_and_only_our_keys() {
    let (mut state, seen) = state();
    state.begin(Call::Resolve, None);
    let message = policy_message(state.meta_delete("session_switch:active:mohe".into()));
    assert!(
        message.contains("only policy.clear may delete"),
        "{message}"
    );

    state.begin(Call::Clear, None);
    let refused: Failure = state
        .meta_delete("fts_storage_version".into())
        .unwrap_err()
        .into();
    assert_eq!(refused.kind, crate::FailureKind::BadInput);
    assert!(refused.message.contains("not ours"), "{}", refused.message);
    assert!(
        state.call.violation.is_none(),
        "a refused key is the policy's to handle"
    );

    assert!(
        state
            .meta_delete("session_switch:active:mohe".into())
            .unwrap()
    );
    assert!(
        state
            .meta_delete("active_xmpp_sender_session".into())
            .unwrap()
    );
    assert_eq!(
        deletes(&seen),
        ["session_switch:active:mohe", "active_xmpp_sender_session"]
    );
    assert_eq!(state.call.deleted, deletes(&seen));
}

#[test]
fn history_only_in_context_keeps_the_rows_and_gives_summaries() {
    let (mut state, seen) = state();
    state.begin(Call::Tag, None);
    let message = policy_message(state.history("xmpp-mohe-v2".into(), "mohe".into(), None, 8));
    assert!(
        message.contains("only policy.context reads history"),
        "{message}"
    );
    assert_eq!(histories(&seen), 0);

    state.begin(Call::Context, None);
    let summaries = state
        .history("xmpp-mohe-v2".into(), "mohe".into(), Some(10), 6)
        .unwrap();
    assert_eq!(summaries.rows.len(), 1);
    assert_eq!(summaries.prefixes, "mohe: ");
    assert_eq!(
        state.call.rows[0].content,
        "mohe: 大家好，今天的会议改到下午三点。"
    );
    assert_eq!(
        state.call.history,
        Some(HistoryQuery {
            session_id: "xmpp-mohe-v2".into(),
            agent: "mohe".into(),
            limit: Some(10),
        })
    );
    // The next call starts clean.
    state.begin(Call::Resolve, None);
    assert!(state.call.rows.is_empty() && state.call.history.is_none());
}

#[test]
fn error_lines_of_the_guest_are_kept_on_one_line_and_bounded() {
    let (mut state, _) = state();
    state.begin(Call::Resolve, None);
    state.log(LogLevel::Info, "not kept".into());
    state.log(
        LogLevel::Error,
        "session-switch policy panicked at a.rs:1:2:\nboom".into(),
    );
    assert_eq!(
        state.call.said,
        ["session-switch policy panicked at a.rs:1:2: boom"]
    );
    for _ in 0..20 {
        state.log(LogLevel::Warn, "x".repeat(5000));
    }
    assert_eq!(state.call.said.len(), KEPT_LINES);
    assert!(
        state
            .call
            .said
            .iter()
            .all(|l| l.chars().count() <= KEPT_LINE_CHARS)
    );
}
