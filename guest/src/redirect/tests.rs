//! Table tests of `resolve`, `active` and `clear`, one case per rule line.

use super::*;
use crate::fake_host::{self, FakeHost, Import, fail};
use crate::samples::{SAMPLE_CLI, SAMPLE_NOW, sample_record, sample_settings};
use crate::{FailureKind, failure};

const NOW: f64 = SAMPLE_NOW;
const CLI: &str = SAMPLE_CLI;
const MOHE: &str = "session_switch:active:mohe";
const ZHIWEI: &str = "session_switch:active:zhiwei";

fn settings() -> ValidSettings {
    ValidSettings::new(sample_settings()).unwrap()
}

fn host(meta: &[(&str, String)]) -> FakeHost {
    let h = fake_host::at(NOW, "coregroup@conference.example.org");
    for s in [
        "xmpp-mohe-v2",
        "xmpp-mohe",
        "xmpp-zhiwei",
        "xmpp-xiaoguo",
        CLI,
        "cli-b",
    ] {
        h.state().add_session(s);
    }
    for (k, v) in meta {
        h.state().meta.insert(k.to_string(), v.clone());
    }
    h
}

fn rec(ts: f64) -> String {
    sample_record(CLI, ts, "mohe")
}

fn legacy(session: &str, ts: f64) -> String {
    serde_json::json!({"session_id": session, "timestamp": ts, "source": "cli"}).to_string()
}

fn mohe(meta: &[(&str, String)]) -> Decision {
    resolve(&settings(), &mut host(meta), "mohe", "xmpp-mohe-v2").unwrap()
}

#[track_caller]
fn expect(d: &Decision, reason: Reason, session: &str, detail: &str) {
    assert_eq!(d.reason, reason, "{d:?}");
    assert_eq!(d.session_id, session, "{d:?}");
    assert_eq!(d.redirected, reason == Reason::Redirected, "{d:?}");
    assert!(d.detail.contains(detail), "{:?} lacks {detail:?}", d.detail);
    assert!(
        !d.detail.contains('\n'),
        "detail is one line: {:?}",
        d.detail
    );
}

#[test]
fn rule_1_unknown_agent() {
    let e = resolve(&settings(), &mut host(&[]), "nobody", "xmpp-mohe-v2").unwrap_err();
    assert_eq!(e.kind, FailureKind::UnknownAgent);
    assert_eq!(
        e.message,
        "unknown agent 'nobody' (configured: mohe, zhiwei, xiaoguo)"
    );
}

#[test]
fn rule_2_only_the_agents_own_xmpp_sessions_are_redirected() {
    let meta = [(MOHE, rec(NOW - 10.0))];
    let s = settings();
    let cases = [
        (
            CLI,
            "is not an XMPP session, not one of mohe's (xmpp-mohe-v2, xmpp-mohe)",
        ),
        ("xmpp-zhiwei", "is an XMPP session of zhiwei"),
        ("unknown-session", "is not an XMPP session"),
        ("", "is not an XMPP session"),
    ];
    for (asked, detail) in cases {
        let d = resolve(&s, &mut host(&meta), "mohe", asked).unwrap();
        expect(&d, Reason::NotAgentSession, asked, detail);
    }
    // Both of mohe's sessions are redirected.
    for asked in ["xmpp-mohe-v2", "xmpp-mohe"] {
        let d = resolve(&s, &mut host(&meta), "mohe", asked).unwrap();
        expect(&d, Reason::Redirected, CLI, "instead of xmpp-mohe");
    }
}

#[test]
fn rule_3_no_record() {
    expect(
        &mohe(&[]),
        Reason::NoRecord,
        "xmpp-mohe-v2",
        "mohe has no record (session_switch:active:mohe, active_xmpp_sender_session): loading xmpp-mohe-v2",
    );
    let d = resolve(&settings(), &mut host(&[]), "zhiwei", "xmpp-zhiwei").unwrap();
    expect(
        &d,
        Reason::NoRecord,
        "xmpp-zhiwei",
        "zhiwei has no record (session_switch:active:zhiwei)",
    );
}

#[test]
fn rule_3_legacy_key_is_read_for_the_legacy_agent_only() {
    let meta = [(LEGACY_KEY, legacy(CLI, NOW - 5.0))];
    expect(
        &mohe(&meta),
        Reason::Redirected,
        CLI,
        &format!(
            "record active_xmpp_sender_session, written {}",
            utc(NOW - 5.0)
        ),
    );
    let d = resolve(&settings(), &mut host(&meta), "zhiwei", "xmpp-zhiwei").unwrap();
    expect(
        &d,
        Reason::NoRecord,
        "xmpp-zhiwei",
        "zhiwei has no record (session_switch:active:zhiwei)",
    );
    // Without a legacy agent nobody reads it.
    let mut plain = sample_settings();
    plain.legacy_agent = None;
    let plain = ValidSettings::new(plain).unwrap();
    let d = resolve(&plain, &mut host(&meta), "mohe", "xmpp-mohe-v2").unwrap();
    expect(
        &d,
        Reason::NoRecord,
        "xmpp-mohe-v2",
        "(session_switch:active:mohe)",
    );
}

#[test]
fn rule_3_newer_valid_record_wins() {
    let other = "cli-b";
    // Per-agent newer.
    let d = mohe(&[
        (MOHE, rec(NOW - 5.0)),
        (LEGACY_KEY, legacy(other, NOW - 50.0)),
    ]);
    expect(
        &d,
        Reason::Redirected,
        CLI,
        &format!(
            "record session_switch:active:mohe, written {}",
            utc(NOW - 5.0)
        ),
    );
    // Legacy newer.
    let d = mohe(&[
        (MOHE, rec(NOW - 50.0)),
        (LEGACY_KEY, legacy(other, NOW - 5.0)),
    ]);
    expect(
        &d,
        Reason::Redirected,
        other,
        &format!(
            "record active_xmpp_sender_session, written {}",
            utc(NOW - 5.0)
        ),
    );
    // A tie goes to the per-agent record.
    let d = mohe(&[
        (MOHE, rec(NOW - 5.0)),
        (LEGACY_KEY, legacy(other, NOW - 5.0)),
    ]);
    expect(
        &d,
        Reason::Redirected,
        CLI,
        "record session_switch:active:mohe",
    );
    // An invalid per-agent record does not hide a valid legacy one.
    let d = mohe(&[
        (MOHE, rec(NOW - 4000.0)),
        (LEGACY_KEY, legacy(other, NOW - 5.0)),
    ]);
    expect(&d, Reason::Redirected, other, "active_xmpp_sender_session");
    let d = mohe(&[
        (MOHE, "junk".into()),
        (LEGACY_KEY, legacy(other, NOW - 5.0)),
    ]);
    expect(&d, Reason::Redirected, other, "active_xmpp_sender_session");
}

#[test]
fn rule_3_neither_valid_reports_the_per_agent_reason_first() {
    let d = mohe(&[(MOHE, rec(NOW - 4000.0)), (LEGACY_KEY, "junk".into())]);
    expect(
        &d,
        Reason::Expired,
        "xmpp-mohe-v2",
        &format!(
            "record session_switch:active:mohe, written {}, expired at {} (TTL 3600 s): \
             loading xmpp-mohe-v2",
            utc(NOW - 4000.0),
            utc(NOW - 400.0)
        ),
    );
    let d = mohe(&[
        (MOHE, "junk".into()),
        (LEGACY_KEY, legacy(CLI, NOW - 4000.0)),
    ]);
    expect(
        &d,
        Reason::MalformedRecord,
        "xmpp-mohe-v2",
        "record session_switch:active:mohe is malformed (not JSON)",
    );
    let d = mohe(&[(LEGACY_KEY, legacy(CLI, NOW - 4000.0))]);
    expect(
        &d,
        Reason::Expired,
        "xmpp-mohe-v2",
        &format!(
            "record active_xmpp_sender_session, written {}, expired",
            utc(NOW - 4000.0)
        ),
    );
}

#[test]
fn rule_4_malformed_records() {
    let long = "x".repeat(257);
    let cases: Vec<(String, &str)> = vec![
        ("not json".into(), "(not JSON)"),
        (
            format!(r#"{{"session_id": "{CLI}", "timestamp": 1e400}}"#),
            "(a number in it is out of range (beyond ±1.8e308))",
        ),
        ("".into(), "(not JSON)"),
        ("[1, 2]".into(), "(not a JSON object but an array)"),
        ("\"20260619\"".into(), "(not a JSON object but a string)"),
        ("null".into(), "(not a JSON object but null)"),
        (
            format!(r#"{{"timestamp": {NOW}}}"#),
            "(session_id is missing)",
        ),
        (
            format!(r#"{{"session_id": 5, "timestamp": {NOW}}}"#),
            "(session_id is a number)",
        ),
        (
            format!(r#"{{"session_id": null, "timestamp": {NOW}}}"#),
            "(session_id is null)",
        ),
        (
            format!(r#"{{"session_id": "", "timestamp": {NOW}}}"#),
            "(session_id is empty)",
        ),
        (
            format!(r#"{{"session_id": "{long}", "timestamp": {NOW}}}"#),
            "(session_id is 257 characters long, the maximum is 256)",
        ),
        (
            format!(r#"{{"session_id": "a\r\nb", "timestamp": {NOW}}}"#),
            "contains a control character",
        ),
        (
            format!(r#"{{"session_id": "a\u0000", "timestamp": {NOW}}}"#),
            "contains a control character",
        ),
        (
            format!(r#"{{"session_id": " {CLI}", "timestamp": {NOW}}}"#),
            "has leading or trailing whitespace",
        ),
        (
            format!(r#"{{"session_id": "../etc", "timestamp": {NOW}}}"#),
            "(session_id \"../etc\" is path-unsafe (`..`, `/` or `\\`), which Hermes's API server refuses)",
        ),
        (
            format!(r#"{{"session_id": "C:x", "timestamp": {NOW}}}"#),
            "starts like a drive path",
        ),
        (
            format!(r#"{{"session_id": "{CLI}"}}"#),
            "(timestamp is missing)",
        ),
        (
            format!(r#"{{"session_id": "{CLI}", "timestamp": "{NOW}"}}"#),
            "(timestamp is a string)",
        ),
        (
            format!(r#"{{"session_id": "{CLI}", "timestamp": null}}"#),
            "(timestamp is null)",
        ),
        (
            format!(r#"{{"session_id": "{CLI}", "timestamp": true}}"#),
            "(timestamp is a boolean)",
        ),
        (
            format!(r#"{{"session_id": "{CLI}", "timestamp": [1]}}"#),
            "(timestamp is an array)",
        ),
        (
            format!(r#"{{"session_id": "{CLI}", "timestamp": {NOW}, "agent": "zhiwei"}}"#),
            "(agent is 'zhiwei', not 'mohe')",
        ),
        (
            format!(r#"{{"session_id": "{CLI}", "timestamp": {NOW}, "agent": null}}"#),
            "(agent is null)",
        ),
        (
            format!(r#"{{"session_id": "{CLI}", "timestamp": {NOW}, "agent": ["mohe"]}}"#),
            "(agent is an array)",
        ),
    ];
    for (value, detail) in cases {
        let d = mohe(&[(MOHE, value.clone())]);
        assert_eq!(d.reason, Reason::MalformedRecord, "{value:?}: {d:?}");
        assert!(!d.redirected);
        assert_eq!(d.session_id, "xmpp-mohe-v2");
        assert!(
            d.detail
                .starts_with("record session_switch:active:mohe is malformed "),
            "{value:?}: {}",
            d.detail
        );
        assert!(
            d.detail.contains(detail),
            "{value:?}: {:?} lacks {detail:?}",
            d.detail
        );
        assert!(d.detail.ends_with(": loading xmpp-mohe-v2"), "{}", d.detail);
    }
}

#[test]
fn rule_4_accepted_shapes() {
    let cases = [
        // The legacy `xmpp_session_bridge.py`'s shape (no agent field), an
        // integer timestamp, extra fields.
        format!(
            r#"{{"session_id": "{CLI}", "timestamp": {}, "source": "cli"}}"#,
            NOW as i64 - 60
        ),
        format!(
            r#"{{"session_id": "{CLI}", "timestamp": {}.5, "agent": "mohe", "x": [1]}}"#,
            NOW as i64 - 60
        ),
        format!(r#"{{"session_id": "{CLI}", "timestamp": 1.8e9}}"#),
        rec(NOW),
    ];
    for value in cases {
        expect(
            &mohe(&[(MOHE, value)]),
            Reason::Redirected,
            CLI,
            "loading CLI session",
        );
    }
    // The legacy key's `agent` field is not checked (the legacy tool writes none).
    let value = format!(r#"{{"session_id": "{CLI}", "timestamp": {NOW}, "agent": "zhiwei"}}"#);
    expect(
        &mohe(&[(LEGACY_KEY, value)]),
        Reason::Redirected,
        CLI,
        "active_xmpp_sender_session",
    );
}

#[test]
fn rule_5_ttl_boundary() {
    // A record exactly TTL old is expired (the legacy tool keeps it only while
    // age < 3600).
    let cases = [
        (NOW - 3600.0 + 0.001, Reason::Redirected),
        (NOW - 3599.0, Reason::Redirected),
        (NOW, Reason::Redirected),
        (NOW - 3600.0, Reason::Expired),
        (NOW - 3600.001, Reason::Expired),
        (NOW - 86_400.0, Reason::Expired),
        (0.0, Reason::Expired),
        (-5.0, Reason::Expired),
    ];
    for (ts, reason) in cases {
        let d = mohe(&[(MOHE, rec(ts))]);
        let (written, ends) = (utc(ts), utc(ts + 3600.0));
        if reason == Reason::Redirected {
            let holds = format!("written {written}, holds until {ends} (TTL 3600 s)");
            expect(&d, reason, CLI, &holds);
            assert_eq!(d.valid_until, Some(ts + 3600.0 - 0.001), "{ts}");
        } else {
            let expired = format!("written {written}, expired at {ends} (TTL 3600 s)");
            expect(&d, reason, "xmpp-mohe-v2", &expired);
            assert_eq!(d.valid_until, None, "expired is for good: {ts}");
        }
    }
    let d = mohe(&[(MOHE, rec(0.0))]);
    expect(
        &d,
        Reason::Expired,
        "xmpp-mohe-v2",
        "written 1970-01-01T00:00:00Z, expired at 1970-01-01T01:00:00Z",
    );
    let d = mohe(&[(MOHE, rec(-5.0))]);
    expect(
        &d,
        Reason::Expired,
        "xmpp-mohe-v2",
        "written 1969-12-31T23:59:55Z",
    );
}

#[test]
fn rule_5_future_skew_boundary() {
    // Within the skew a record is valid from now on: its TTL's end is next.
    for ts in [NOW + 10.0, NOW + 120.0] {
        let d = mohe(&[(MOHE, rec(ts))]);
        let holds = format!("written {}, holds until {}", utc(ts), utc(ts + 3600.0));
        expect(&d, Reason::Redirected, CLI, &holds);
        assert_eq!(d.valid_until, Some(ts + 3600.0 - 0.001));
    }
    // Beyond it, the record becomes valid once the skew reaches it.
    for ts in [NOW + 120.001, NOW + 86_400.0] {
        let d = mohe(&[(MOHE, rec(ts))]);
        let dated = format!(
            "is dated {}, beyond the allowed skew (120 s) ahead of the clock",
            utc(ts)
        );
        expect(&d, Reason::FutureTimestamp, "xmpp-mohe-v2", &dated);
        assert_eq!(d.valid_until, Some(ts - 120.0 - 0.001));
    }
    // Skew 0: any future timestamp is refused.
    let mut strict = sample_settings();
    strict.future_skew_seconds = 0;
    let strict = ValidSettings::new(strict).unwrap();
    let mut h = host(&[(MOHE, rec(NOW + 0.5))]);
    let d = resolve(&strict, &mut h, "mohe", "xmpp-mohe-v2").unwrap();
    expect(
        &d,
        Reason::FutureTimestamp,
        "xmpp-mohe-v2",
        &format!("is dated {}, beyond the allowed skew (0 s)", utc(NOW + 0.5)),
    );
}

#[test]
fn rule_6_target_rules() {
    let to = |s: &str| [(MOHE, sample_record(s, NOW - 1.0, "mohe"))];
    expect(
        &mohe(&to("xmpp-mohe")),
        Reason::MalformedRecord,
        "xmpp-mohe-v2",
        "record session_switch:active:mohe names xmpp-mohe, an XMPP session of mohe, which is never a target: loading xmpp-mohe-v2",
    );
    expect(
        &mohe(&to("xmpp-zhiwei")),
        Reason::MalformedRecord,
        "xmpp-mohe-v2",
        "an XMPP session of zhiwei",
    );
    expect(
        &mohe(&to("gone")),
        Reason::UnknownSession,
        "xmpp-mohe-v2",
        "record session_switch:active:mohe names session gone, which is not in state.db: loading xmpp-mohe-v2",
    );
    // Age is judged before the target: an expired record naming an XMPP session is expired.
    let d = mohe(&[(MOHE, sample_record("xmpp-zhiwei", NOW - 4000.0, "mohe"))]);
    expect(&d, Reason::Expired, "xmpp-mohe-v2", "expired at");
}

#[test]
fn rule_6_existence_is_checked_last_and_only_when_needed() {
    let broken = failure::policy("session-exists must not be called");
    for value in [rec(NOW - 4000.0), "junk".into(), rec(NOW + 999.0)] {
        let mut h = host(&[(MOHE, value)]);
        fail(&h, Import::SessionExists, &broken);
        let d = resolve(&settings(), &mut h, "mohe", "xmpp-mohe-v2").unwrap();
        assert!(!d.redirected);
    }
    let mut h = host(&[]);
    fail(&h, Import::SessionExists, &broken);
    fail(&h, Import::MetaGet, &broken);
    let d = resolve(&settings(), &mut h, "mohe", CLI).unwrap();
    assert_eq!(
        d.reason,
        Reason::NotAgentSession,
        "no host call for other sessions"
    );
}

#[test]
fn rule_7_redirect_detail() {
    let d = mohe(&[(MOHE, rec(NOW - 12.0))]);
    assert_eq!(
        d,
        Decision {
            session_id: CLI.into(),
            redirected: true,
            reason: Reason::Redirected,
            detail: format!(
                "record session_switch:active:mohe, written {}, holds until {} (TTL 3600 s): \
                 loading CLI session {CLI} instead of xmpp-mohe-v2",
                utc(NOW - 12.0),
                utc(NOW - 12.0 + 3600.0)
            ),
            valid_until: Some(NOW - 12.0 + 3600.0 - 0.001),
        }
    );
}

#[test]
fn one_agents_record_never_moves_another() {
    let meta = [(ZHIWEI, sample_record(CLI, NOW - 1.0, "zhiwei"))];
    expect(
        &mohe(&meta),
        Reason::NoRecord,
        "xmpp-mohe-v2",
        "mohe has no record",
    );
    let d = resolve(&settings(), &mut host(&meta), "zhiwei", "xmpp-zhiwei").unwrap();
    expect(&d, Reason::Redirected, CLI, "session_switch:active:zhiwei");
    // zhiwei's record copied under mohe's key is refused by its agent field.
    let d = mohe(&[(MOHE, sample_record(CLI, NOW - 1.0, "zhiwei"))]);
    expect(
        &d,
        Reason::MalformedRecord,
        "xmpp-mohe-v2",
        "agent is 'zhiwei', not 'mohe'",
    );
}

#[test]
fn host_failures_pass_through_unchanged() {
    let store = Failure {
        kind: FailureKind::Store,
        message: "state.db at /x is not a database".into(),
    };
    let mut h = host(&[(MOHE, rec(NOW - 1.0))]);
    fail(&h, Import::MetaGet, &store);
    assert_eq!(
        resolve(&settings(), &mut h, "mohe", "xmpp-mohe-v2"),
        Err(store.clone())
    );
    let mut h = host(&[(MOHE, rec(NOW - 1.0))]);
    fail(&h, Import::SessionExists, &store);
    assert_eq!(
        resolve(&settings(), &mut h, "mohe", "xmpp-mohe-v2"),
        Err(store)
    );
}

#[test]
fn a_target_the_host_refuses_is_an_answer_not_a_failure() {
    let why = "not redirecting to or recording session cli-x: it has 2 live continuations";
    let refused = Failure {
        kind: FailureKind::BadInput,
        message: why.into(),
    };
    let mut h = host(&[(MOHE, rec(NOW - 1.0))]);
    fail(&h, Import::SessionExists, &refused);
    let d = resolve(&settings(), &mut h, "mohe", "xmpp-mohe-v2").unwrap();
    expect(
        &d,
        Reason::MalformedRecord,
        "xmpp-mohe-v2",
        &format!("record session_switch:active:mohe: {why}: loading xmpp-mohe-v2"),
    );
    assert_eq!(d.valid_until, Some(NOW - 1.0 + 3600.0 - 0.001));
    let mut h = host(&[(MOHE, rec(NOW - 1.0))]);
    fail(&h, Import::SessionExists, &refused);
    let status = active(&settings(), &mut h, Some("mohe")).unwrap();
    assert_eq!(status.len(), 1);
    assert!(!status[0].valid);
    assert_eq!(status[0].reason, Reason::MalformedRecord);
    assert_eq!(
        status[0].detail,
        format!("record session_switch:active:mohe: {why}; resolve does not redirect")
    );
}

#[test]
fn a_broken_clock_is_a_policy_failure() {
    for clock in [f64::NAN, f64::INFINITY] {
        let mut h = host(&[(MOHE, rec(NOW - 1.0))]);
        h.state().now = clock;
        let e = resolve(&settings(), &mut h, "mohe", "xmpp-mohe-v2").unwrap_err();
        assert_eq!(e.kind, FailureKind::Policy);
        assert!(
            e.message.starts_with("the host's clock returned "),
            "{}",
            e.message
        );
        assert!(
            e.message.contains(crate::redirect::non_finite(clock)),
            "{}",
            e.message
        );
    }
}

#[test]
fn parse_record_keeps_readable_fields() {
    let (r, res) = parse_record(r#"{"session_id": "a", "timestamp": "1"}"#, None);
    assert_eq!(
        r,
        Readable {
            session_id: Some("a".into()),
            timestamp: None
        }
    );
    assert_eq!(res, Err("timestamp is a string".into()));
    let (r, res) = parse_record(r#"{"session_id": "", "timestamp": 7}"#, None);
    assert_eq!(
        r,
        Readable {
            session_id: Some(String::new()),
            timestamp: Some(7.0)
        }
    );
    assert_eq!(res, Err("session_id is empty".into()));
    let (_, res) = parse_record(r#"{"session_id": "a", "timestamp": 7, "agent": "x"}"#, None);
    assert_eq!(
        res,
        Ok(("a".into(), 7.0)),
        "agent unchecked without an expected agent"
    );
    let (_, res) = parse_record(r#"{"session_id": "a", "timestamp": 1e999}"#, None);
    assert_eq!(
        res,
        Err("a number in it is out of range (beyond ±1.8e308)".into()),
        "serde_json refuses out-of-range numbers"
    );
}

#[test]
fn seconds_for_people() {
    let cases = [
        (12.0, "12"),
        (3599.999, "3599.999"),
        (0.5, "0.5"),
        (-0.0, "0"),
        (120.0001, "120"),
        (-3.25, "-3.25"),
    ];
    for (s, want) in cases {
        assert_eq!(seconds(s), want, "{s}");
    }
}

/// `seconds` builds its digits by hand (no `core::fmt` on the hot path):
/// it must print exactly what the `format!` version printed.
#[test]
fn seconds_matches_the_format_version() {
    fn by_format(s: f64) -> String {
        let ms = (s * 1000.0).round() as i64;
        let sign = if ms < 0 { "-" } else { "" };
        let (whole, frac) = (ms.unsigned_abs() / 1000, ms.unsigned_abs() % 1000);
        if frac == 0 {
            format!("{sign}{whole}")
        } else {
            let frac = format!("{frac:03}");
            format!("{sign}{whole}.{}", frac.trim_end_matches('0'))
        }
    }
    let mut x: f64 = -5000.0;
    while x < 5000.0 {
        assert_eq!(seconds(x), by_format(x), "{x}");
        x += 0.0137;
    }
    for x in [
        0.001,
        0.01,
        0.1,
        0.011,
        0.101,
        0.11,
        -0.001,
        1e15,
        -1e15,
        f64::MAX,
        f64::MIN,
    ] {
        assert_eq!(seconds(x), by_format(x), "{x}");
    }
}

#[test]
fn active_shows_every_record_with_its_state() {
    let meta = [
        (MOHE, rec(NOW - 12.0)),
        (
            LEGACY_KEY,
            r#"{"session_id": "gone", "timestamp": 1}"#.to_string(),
        ),
        (ZHIWEI, sample_record(CLI, NOW - 4000.0, "zhiwei")),
    ];
    let all = active(&settings(), &mut host(&meta), None).unwrap();
    assert_eq!(
        all.len(),
        3,
        "xiaoguo has no record and is omitted: {all:?}"
    );
    assert_eq!(
        all[0],
        RecordStatus {
            agent: "mohe".into(),
            key: MOHE.into(),
            session_id: Some(CLI.into()),
            timestamp: Some(NOW - 12.0),
            age_seconds: Some(12.0),
            remaining_seconds: Some(3588.0),
            valid: true,
            reason: Reason::Redirected,
            detail: format!(
                "record {MOHE}, written {}, holds until {} (TTL 3600 s): would redirect to CLI \
                 session {CLI}",
                utc(NOW - 12.0),
                utc(NOW + 3588.0)
            ),
        }
    );
    assert_eq!(all[1].key, LEGACY_KEY);
    assert_eq!(all[1].reason, Reason::Expired);
    assert!(!all[1].valid);
    assert_eq!(all[1].timestamp, Some(1.0));
    assert_eq!(all[1].session_id.as_deref(), Some("gone"));
    assert_eq!(all[2].agent, "zhiwei");
    assert_eq!(all[2].reason, Reason::Expired);
    assert_eq!(all[2].remaining_seconds, Some(-400.0));

    let only = active(&settings(), &mut host(&meta), Some("zhiwei")).unwrap();
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].key, ZHIWEI);
    assert_eq!(
        active(&settings(), &mut host(&meta), Some("xiaoguo")).unwrap(),
        vec![]
    );
    let e = active(&settings(), &mut host(&meta), Some("nobody")).unwrap_err();
    assert_eq!(e.kind, FailureKind::UnknownAgent);
}

#[test]
fn active_applies_every_rule_of_resolve() {
    let cases = [
        (rec(NOW - 1.0), true, Reason::Redirected),
        (
            sample_record("gone", NOW - 1.0, "mohe"),
            false,
            Reason::UnknownSession,
        ),
        (
            sample_record("xmpp-zhiwei", NOW - 1.0, "mohe"),
            false,
            Reason::MalformedRecord,
        ),
        (rec(NOW + 500.0), false, Reason::FutureTimestamp),
        (rec(NOW - 3600.0), false, Reason::Expired),
        ("{}".into(), false, Reason::MalformedRecord),
    ];
    for (value, valid, reason) in cases {
        let status = active(
            &settings(),
            &mut host(&[(MOHE, value.clone())]),
            Some("mohe"),
        )
        .unwrap();
        assert_eq!(status.len(), 1);
        assert_eq!(
            (status[0].valid, status[0].reason),
            (valid, reason),
            "{value}"
        );
        let d = mohe(&[(MOHE, value.clone())]);
        assert_eq!(d.redirected, valid, "resolve and active agree on {value}");
        assert_eq!(d.reason, reason, "{value}");
    }
    let status = active(&settings(), &mut host(&[(MOHE, "{}".into())]), None).unwrap();
    assert_eq!(
        (status[0].session_id.clone(), status[0].age_seconds),
        (None, None)
    );
}

#[test]
fn active_calls_only_the_record_resolve_uses_valid() {
    // Both of mohe's records are valid alone; the newer one wins.
    let meta = [
        (MOHE, rec(NOW - 50.0)),
        (LEGACY_KEY, legacy(CLI, NOW - 10.0)),
    ];
    let all = active(&settings(), &mut host(&meta), Some("mohe")).unwrap();
    let shown: Vec<_> = all.iter().map(|s| (s.valid, s.reason)).collect();
    assert_eq!(
        shown,
        [(false, Reason::Superseded), (true, Reason::Redirected)]
    );
    assert_eq!(
        all[0].detail,
        format!(
            "record {MOHE}, written {}, holds until {} (TTL 3600 s), but the newer record \
             {LEGACY_KEY} is the one resolve uses",
            utc(NOW - 50.0),
            utc(NOW + 3550.0)
        )
    );
    assert!(mohe(&meta).redirected);

    // The newer one names a missing session: resolve stays, nothing valid.
    let meta = [
        (MOHE, rec(NOW - 50.0)),
        (LEGACY_KEY, legacy("gone", NOW - 10.0)),
    ];
    let all = active(&settings(), &mut host(&meta), Some("mohe")).unwrap();
    let shown: Vec<_> = all.iter().map(|s| (s.valid, s.reason)).collect();
    assert_eq!(
        shown,
        [(false, Reason::Superseded), (false, Reason::UnknownSession)]
    );
    assert_eq!(mohe(&meta).reason, Reason::UnknownSession);

    // An expired or malformed older record keeps its own reason.
    let meta = [
        (MOHE, rec(NOW - 4000.0)),
        (LEGACY_KEY, legacy(CLI, NOW - 10.0)),
    ];
    let all = active(&settings(), &mut host(&meta), Some("mohe")).unwrap();
    assert_eq!(all[0].reason, Reason::Expired);
}

#[test]
fn active_passes_host_failures() {
    let busy = Failure {
        kind: FailureKind::Busy,
        message: "locked".into(),
    };
    let mut h = host(&[(MOHE, rec(NOW))]);
    fail(&h, Import::SessionExists, &busy);
    assert_eq!(active(&settings(), &mut h, None), Err(busy));
}

#[test]
fn clear_deletes_the_agents_keys_only() {
    let meta = || {
        [
            (MOHE, rec(NOW)),
            (LEGACY_KEY, legacy(CLI, NOW)),
            (ZHIWEI, sample_record(CLI, NOW, "zhiwei")),
            ("fts_last_optimize", "1".to_string()),
        ]
    };
    let mut h = host(&meta());
    assert_eq!(
        clear(&settings(), &mut h, Some("zhiwei")).unwrap(),
        vec![ZHIWEI.to_string()]
    );
    assert!(
        h.snapshot().meta.contains_key(LEGACY_KEY),
        "zhiwei never touches the legacy tool's key"
    );
    assert_eq!(
        clear(&settings(), &mut h, Some("zhiwei")).unwrap(),
        Vec::<String>::new()
    );

    let mut h = host(&meta());
    assert_eq!(
        clear(&settings(), &mut h, Some("mohe")).unwrap(),
        vec![MOHE.to_string(), LEGACY_KEY.to_string()]
    );
    assert!(h.snapshot().meta.contains_key(ZHIWEI));

    let mut h = host(&meta());
    assert_eq!(
        clear(&settings(), &mut h, None).unwrap(),
        vec![MOHE.to_string(), LEGACY_KEY.to_string(), ZHIWEI.to_string()]
    );
    assert_eq!(
        h.snapshot().meta.keys().collect::<Vec<_>>(),
        vec!["fts_last_optimize"],
        "Hermes's keys stay"
    );

    let e = clear(&settings(), &mut host(&meta()), Some("nobody")).unwrap_err();
    assert_eq!(e.kind, FailureKind::UnknownAgent);
    let ro = Failure {
        kind: FailureKind::Store,
        message: "read-only".into(),
    };
    let mut h = host(&meta());
    fail(&h, Import::MetaDelete, &ro);
    assert_eq!(clear(&settings(), &mut h, None), Err(ro));
}

#[test]
fn record_key_shape() {
    assert_eq!(record_key("mohe"), MOHE);
    assert_eq!(
        record_keys(&settings(), "mohe"),
        vec![MOHE.to_string(), LEGACY_KEY.to_string()]
    );
    assert_eq!(record_keys(&settings(), "zhiwei"), vec![ZHIWEI.to_string()]);
}

/// `parse_record` reads the JSON text without a `serde_json::Value` tree:
/// it must answer exactly what the `Value` version answered.
#[test]
fn parse_record_matches_the_value_version() {
    use serde_json::Value;
    fn kind_of(v: &Value) -> &'static str {
        match v {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        }
    }
    fn by_value(value: &str, agent: Option<&str>) -> (Readable, Result<(String, f64), String>) {
        let json: Value = match serde_json::from_str(value) {
            Ok(v) => v,
            Err(e) if e.to_string().starts_with("number out of range") => {
                return (
                    Readable::default(),
                    Err("a number in it is out of range (beyond ±1.8e308)".into()),
                );
            }
            Err(_) => return (Readable::default(), Err("not JSON".into())),
        };
        let Some(object) = json.as_object() else {
            return (
                Readable::default(),
                Err(format!("not a JSON object but {}", kind_of(&json))),
            );
        };
        let readable = Readable {
            session_id: object
                .get("session_id")
                .and_then(Value::as_str)
                .map(str::to_string),
            timestamp: object
                .get("timestamp")
                .and_then(Value::as_f64)
                .filter(|t| t.is_finite()),
        };
        let session_id = match object.get("session_id") {
            None => Err("session_id is missing".to_string()),
            Some(Value::String(s)) => crate::settings::check_session_id(s)
                .map_err(|e| e.replacen("session id", "session_id", 1))
                .and_then(
                    |()| match session_switch_contract::ids::api_session_id_problem(s) {
                        Some(p) => Err(format!(
                            "session_id {s:?} {p}, which Hermes's API server refuses"
                        )),
                        None => Ok(s.clone()),
                    },
                ),
            Some(other) => Err(format!("session_id is {}", kind_of(other))),
        };
        let timestamp = match object.get("timestamp") {
            None => Err("timestamp is missing".to_string()),
            Some(v @ Value::Number(_)) => match readable.timestamp {
                Some(t) => Ok(t),
                None => Err(format!("timestamp {v} is not a finite number")),
            },
            Some(other) => Err(format!("timestamp is {}", kind_of(other))),
        };
        let owner = match (agent, object.get("agent")) {
            (Some(want), Some(Value::String(got))) if got != want => {
                Err(format!("agent is '{got}', not '{want}'"))
            }
            (None, _) | (_, None) | (_, Some(Value::String(_))) => Ok(()),
            (Some(_), Some(other)) => Err(format!("agent is {}", kind_of(other))),
        };
        let result = session_id.and_then(|s| timestamp.and_then(|t| owner.map(|()| (s, t))));
        (readable, result)
    }
    let values = [
        "",
        " ",
        r#"{"session_id": "../etc", "timestamp": 1}"#,
        r#"{"session_id": "a/b", "timestamp": 1e400}"#,
        "{",
        "}",
        "[]",
        "null",
        "true",
        "1",
        "-1",
        "1.5",
        "\"x\"",
        "{}",
        "[1,{}]",
        r#"{"session_id": "20260619_190821_7c0afe", "timestamp": 1781867301, "source": "cli"}"#,
        r#"{"session_id": "s", "timestamp": 1781867301.25, "agent": "mohe"}"#,
        r#"{"session_id": "s", "timestamp": 1781867301.25, "agent": "zhiwei"}"#,
        r#"{"session_id": "s", "timestamp": -5, "agent": null}"#,
        r#"{"session_id": "s", "timestamp": 18446744073709551615, "agent": 3}"#,
        r#"{"session_id": "s", "timestamp": 1e400}"#,
        r#"{"session_id": "s", "timestamp": 1e308, "agent": ["mohe"]}"#,
        r#"{"session_id": "", "timestamp": 1}"#,
        r#"{"session_id": " s", "timestamp": 1}"#,
        r#"{"session_id": "a\u0000b", "timestamp": 1}"#,
        r#"{"session\u005fid": "esc", "timestamp": 1}"#,
        r#"{"session_id": "first", "session_id": "second", "timestamp": 1}"#,
        r#"{"session_id": "s", "timestamp": "1781867301"}"#,
        r#"{"session_id": 7, "timestamp": true}"#,
        r#"{"session_id": {"a": [1, 2, {"b": null}]}, "timestamp": [1]}"#,
        r#"{"session_id": "s", "timestamp": 1, "extra": {"deep": [[[]]]}} "#,
        r#"{"session_id": "s", "timestamp": 1} trailing"#,
        r#"{"session_id": "s", "timestamp": 1, "bad": tru}"#,
        r#"{"session_id": "s", "timestamp": 1,}"#,
        r#"{"timestamp": 1}"#,
        r#"{"session_id": "s"}"#,
        r#"{"session_id": "大家好", "timestamp": 0.0001, "agent": "mohe", "agent": 1}"#,
    ];
    for value in values {
        for agent in [None, Some("mohe")] {
            assert_eq!(
                parse_record(value, agent),
                by_value(value, agent),
                "{value} / {agent:?}"
            );
        }
    }
}

#[test]
fn utc_dates_read_as_iso_8601() {
    for (t, want) in [
        (0.0, "1970-01-01T00:00:00Z"),
        (951_782_400.25, "2000-02-29T00:00:00.250Z"),
        (1_709_164_800.0, "2024-02-29T00:00:00Z"),
        (NOW, "2027-01-15T08:00:00Z"),
        (NOW + 0.0004, "2027-01-15T08:00:00Z"),
        (NOW - 0.001, "2027-01-15T07:59:59.999Z"),
        (-5.0, "1969-12-31T23:59:55Z"),
        (-62_135_596_800.0, "0001-01-01T00:00:00Z"),
        (253_402_300_799.0, "9999-12-31T23:59:59Z"),
    ] {
        assert_eq!(utc(t), want, "{t}");
    }
    // Outside the four-digit years the sentence says what the number is.
    assert_eq!(utc(253_402_300_800.0), "Unix time 253402300800");
    assert_eq!(utc(1e300), format!("Unix time {}", seconds(1e300)));
    assert_eq!(utc(-1e12), "Unix time -1000000000000");
}
