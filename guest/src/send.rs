//! Send planning (docs/src/design/rules.md#send, docs/src/design/contracts.md "Send is one host import"): check
//! the CLI session, normalise the body once, and hand the host one plan —
//! the room's body, the `[YOU] ` history row and the record — which the host
//! carries out atomically.

use crate::body::normalise;
use crate::failure::{bad_input, policy};
use crate::host::Host;
use crate::redirect::record_key;
use crate::settings::{AgentEntry, TAG, ValidSettings, check_session_id};
use crate::{Failure, Receipt, SendPlan};

/// The plan for `agent` sending `body` (already normalised) from CLI session
/// `cli_session_id` at `now` (Unix seconds): the room gets `body` from the
/// agent's JID; the agent's first XMPP session gets `[YOU] ` + `body`; the
/// record `session_switch:active:<agent>` becomes
/// `{"session_id", "timestamp" (a float), "source": "cli", "agent"}`.
pub fn plan(agent: &AgentEntry, cli_session_id: &str, body: String, now: f64) -> SendPlan {
    let name = &agent.agent.name;
    let record = serde_json::json!({
        "session_id": cli_session_id,
        "timestamp": now,
        "source": "cli",
        "agent": name,
    });
    SendPlan {
        agent: name.clone(),
        from_jid: agent.agent.jid.clone(),
        history_session_id: agent.history_session().to_string(),
        history_content: format!("{TAG}{body}"),
        room_body: body,
        cli_session_id: cli_session_id.to_string(),
        record_key: record_key(name),
        record_value: record.to_string(),
        timestamp: now,
    }
}

/// Send `text` as `agent` from CLI session `cli_session_id` (WIT
/// `policy.send`). Checks, in order, all before anything is written:
/// - unknown agent → `unknown-agent`;
/// - the CLI session id: empty (the legacy `xmpp_session_bridge.py`: a send
///   without a session id is
///   useless), control characters, over 256 characters, surrounding
///   whitespace (a record naming it would be malformed), or any agent's
///   XMPP session → `bad-input`;
/// - the body ([`normalise`]) → `bad-input` when empty or too long;
/// - the session must exist (`host.session-exists`) → `bad-input`
///   `session X is not in state.db`.
///
/// Then `host.send(plan)`; its failure is returned unchanged, its success
/// becomes the receipt.
pub fn send<H: Host>(
    settings: &ValidSettings,
    host: &mut H,
    agent: &str,
    cli_session_id: &str,
    text: &str,
) -> Result<Receipt, Failure> {
    let entry = settings.agent(agent)?;
    check_session_id(cli_session_id).map_err(|e| {
        bad_input(format!(
            "bad CLI session: {e}; pass the id of the CLI session you are sending from"
        ))
    })?;
    if let Some(owner) = settings.session_owner(cli_session_id) {
        return Err(bad_input(format!(
            "{cli_session_id} is an XMPP session of {}, not a CLI session; \
             pass the id of the CLI session you are sending from",
            owner.agent.name
        )));
    }
    let body = normalise(text, settings.max_body_chars())?;
    if !host.session_exists(cli_session_id)? {
        return Err(bad_input(format!(
            "session {cli_session_id} is not in state.db; check the id (hermes sessions list)"
        )));
    }
    let now = host.now();
    if !now.is_finite() {
        return Err(policy(format!(
            "the host's clock returned {}, not a Unix time in seconds",
            crate::redirect::non_finite(now)
        )));
    }
    let plan = plan(entry, cli_session_id, body, now);
    let sent = host.send(&plan)?;
    Ok(Receipt {
        message_id: sent.message_id,
        room: sent.room,
        body: plan.room_body,
        record_key: plan.record_key,
        record_replaced: sent.record_replaced,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FailureKind;
    use crate::fake_host::{self, FakeHost, Import, fail};
    use crate::samples::{SAMPLE_CLI, SAMPLE_NOW, sample_settings};

    fn settings() -> ValidSettings {
        ValidSettings::new(sample_settings()).unwrap()
    }

    fn host() -> FakeHost {
        let h = fake_host::at(SAMPLE_NOW + 0.25, "coregroup@conference.example.org");
        h.state()
            .add_session(SAMPLE_CLI)
            .add_session("xmpp-mohe-v2");
        h
    }

    #[test]
    fn plans_and_sends() {
        let mut h = host();
        let r = send(
            &settings(),
            &mut h,
            "mohe",
            SAMPLE_CLI,
            "[YOU] 大家好\r\n  three o'clock ",
        )
        .unwrap();
        assert_eq!(r.body, "大家好\n  three o'clock ");
        assert_eq!(r.room, "coregroup@conference.example.org");
        assert_eq!(r.record_key, "session_switch:active:mohe");
        assert!(r.record_replaced);
        assert_eq!(h.snapshot().sent.len(), 1);
        let p = h.snapshot().sent[0].clone();
        assert_eq!(p.agent, "mohe");
        assert_eq!(p.from_jid, "mohe@example.org");
        assert_eq!(p.room_body, r.body);
        assert_eq!(p.history_session_id, "xmpp-mohe-v2");
        assert_eq!(p.history_content, format!("[YOU] {}", r.body));
        assert_eq!(p.cli_session_id, SAMPLE_CLI);
        assert_eq!(p.timestamp, SAMPLE_NOW + 0.25);
        let record: serde_json::Value = serde_json::from_str(&p.record_value).unwrap();
        assert_eq!(
            record,
            serde_json::json!({"session_id": SAMPLE_CLI, "timestamp": 1_800_000_000.25, "source": "cli", "agent": "mohe"})
        );
        let row = h.snapshot().histories["xmpp-mohe-v2"][0].clone();
        assert_eq!(
            (row.id, row.role.as_str(), row.content.as_str()),
            (r.message_id, "user", p.history_content.as_str())
        );
        // What it wrote resolves back to the CLI session.
        let d = crate::redirect::resolve(&settings(), &mut h, "mohe", "xmpp-mohe-v2").unwrap();
        assert_eq!(d.session_id, SAMPLE_CLI);
    }

    #[test]
    fn timestamp_is_a_float_in_json() {
        let p = plan(
            settings().agent("zhiwei").unwrap(),
            "c",
            "hi".into(),
            1_800_000_000.0,
        );
        assert!(
            p.record_value.contains("\"timestamp\":1800000000.0"),
            "{}",
            p.record_value
        );
        assert_eq!(p.history_session_id, "xmpp-zhiwei");
    }

    #[test]
    fn refuses_bad_input_before_writing() {
        let long = "x".repeat(257);
        let cases: Vec<(&str, &str, &str, FailureKind, &str)> = vec![
            (
                "nobody",
                SAMPLE_CLI,
                "hi",
                FailureKind::UnknownAgent,
                "unknown agent 'nobody' (configured: mohe, zhiwei, xiaoguo)",
            ),
            (
                "mohe",
                "",
                "hi",
                FailureKind::BadInput,
                "bad CLI session: session id is empty; pass the id of the CLI session you are sending from",
            ),
            (
                "mohe",
                "a\nb",
                "hi",
                FailureKind::BadInput,
                "contains a control character",
            ),
            (
                "mohe",
                &long,
                "hi",
                FailureKind::BadInput,
                "session id is 257 characters long, the maximum is 256",
            ),
            (
                "mohe",
                " x",
                "hi",
                FailureKind::BadInput,
                "has leading or trailing whitespace",
            ),
            (
                "mohe",
                "xmpp-mohe-v2",
                "hi",
                FailureKind::BadInput,
                "xmpp-mohe-v2 is an XMPP session of mohe, not a CLI session",
            ),
            (
                "mohe",
                "xmpp-zhiwei",
                "hi",
                FailureKind::BadInput,
                "xmpp-zhiwei is an XMPP session of zhiwei",
            ),
            (
                "mohe",
                SAMPLE_CLI,
                " \r\n ",
                FailureKind::BadInput,
                "empty message",
            ),
            (
                "mohe",
                SAMPLE_CLI,
                "[YOU]",
                FailureKind::BadInput,
                "empty message",
            ),
            (
                "mohe",
                "missing",
                "hi",
                FailureKind::BadInput,
                "session missing is not in state.db",
            ),
        ];
        for (agent, cli, text, kind, msg) in cases {
            let mut h = host();
            let e = send(&settings(), &mut h, agent, cli, text).unwrap_err();
            assert_eq!(e.kind, kind, "{agent} {cli:?} {text:?}: {}", e.message);
            assert!(e.message.contains(msg), "{:?} lacks {msg:?}", e.message);
            let s = h.snapshot();
            assert!(s.sent.is_empty() && s.histories.is_empty() && s.meta.is_empty());
        }
        let mut small = sample_settings();
        small.max_body_chars = 5;
        let small = ValidSettings::new(small).unwrap();
        let e = send(&small, &mut host(), "mohe", SAMPLE_CLI, "123456").unwrap_err();
        assert_eq!(
            (e.kind, e.message.as_str()),
            (
                FailureKind::BadInput,
                "message is 6 characters, the maximum is 5"
            )
        );
        assert_eq!(
            send(&small, &mut host(), "mohe", SAMPLE_CLI, "12345")
                .unwrap()
                .body,
            "12345"
        );
    }

    #[test]
    fn host_failures_pass_through() {
        let cases = [
            (Import::SessionExists, FailureKind::Store),
            (Import::Send, FailureKind::NotAccepted),
            (Import::Send, FailureKind::UnknownOutcome),
            (Import::Send, FailureKind::Busy),
            (Import::Send, FailureKind::Transport),
        ];
        for (op, kind) in cases {
            let f = Failure {
                kind,
                message: format!("{kind:?} from the host"),
            };
            let mut h = host();
            fail(&h, op, &f);
            assert_eq!(send(&settings(), &mut h, "mohe", SAMPLE_CLI, "hi"), Err(f));
            assert!(h.snapshot().sent.is_empty());
        }
    }

    #[test]
    fn an_older_send_keeps_the_newer_record() {
        let mut h = host();
        h.state().meta.insert(
            "session_switch:active:mohe".into(),
            crate::samples::sample_record("newer", SAMPLE_NOW + 100.0, "mohe"),
        );
        let r = send(&settings(), &mut h, "mohe", SAMPLE_CLI, "late").unwrap();
        assert!(!r.record_replaced);
        assert!(h.snapshot().meta["session_switch:active:mohe"].contains("newer"));
    }

    #[test]
    fn a_broken_clock_writes_nothing() {
        let mut h = host();
        h.state().now = f64::NAN;
        let e = send(&settings(), &mut h, "mohe", SAMPLE_CLI, "hi").unwrap_err();
        assert_eq!(e.kind, FailureKind::Policy);
        assert!(h.snapshot().sent.is_empty());
    }
}
