//! Messages admitted together (`Bridge::admit_hearings_on`, the room bot's
//! batch when it fell behind), on real Hermes fixtures: each is decided as
//! if admitted alone, in order, in one transaction; a failure of any
//! leaves nothing written.

use rusqlite::Connection;
use session_switch::runtime::RoomMessage;
use session_switch::{Bridge, FailureKind, Heard, Hearing, KeptInstance};
use session_switch_tests::fixture_copy;
use session_switch_tests::sample::{room_message, sample_bridge};
use std::path::Path;

const FIXTURES: [&str; 3] = ["hermes-early.db", "hermes-0.19.0.db", "hermes-latest.db"];

/// anna asks mohe, zhiwei (an agent) answers naming mohe, anna says stop.
fn messages() -> Vec<(RoomMessage, String)> {
    [
        ("anna", Some("anna@example.org"), "@mohe what next?"),
        (
            "zhiwei",
            Some("zhiwei@example.org"),
            "mohe, I think we ship",
        ),
        ("anna", Some("anna@example.org"), "stop"),
    ]
    .into_iter()
    .map(|(nick, jid, body)| (room_message(nick, jid, body), format!("{nick}: {body}")))
    .collect()
}

fn hearings(lines: &[(RoomMessage, String)]) -> Vec<Hearing<'_>> {
    lines
        .iter()
        .enumerate()
        .map(|(i, (m, line))| Hearing {
            nick: m.occupant.rsplit('/').next().unwrap(),
            line,
            ordering: i as i64 + 1,
            at: 1_800_000_000.0 + i as f64,
            cursor: Some("{\"n\":1}"),
            forget: &[],
        })
        .collect()
}

/// What a decision kept, comparable across databases.
fn summary(heard: &[Heard]) -> Vec<(bool, bool, bool, u32, String, bool)> {
    heard
        .iter()
        .map(|h| {
            let a = &h.admission;
            (
                a.reply,
                a.heard,
                a.stop,
                a.hops,
                a.reason.as_str().to_owned(),
                h.kept.is_some(),
            )
        })
        .collect()
}

fn stored(db: &Path) -> (Vec<(i64, String, bool)>, i64) {
    let conn = Connection::open(db).unwrap();
    let lines = conn
        .prepare("SELECT ordering, line, answer FROM session_switch_heard ORDER BY id")
        .and_then(|mut s| {
            s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect::<Result<Vec<_>, _>>()
        })
        .unwrap_or_default();
    let guard_keys = conn
        .query_row(
            "SELECT COUNT(*) FROM state_meta WHERE key LIKE 'session_switch:loop:%'",
            [],
            |r| r.get(0),
        )
        .unwrap_or(0);
    (lines, guard_keys)
}

fn admit_all(b: &Bridge, kept: &mut KeptInstance, lines: &[(RoomMessage, String)]) -> Vec<Heard> {
    let asked: Vec<RoomMessage> = lines.iter().map(|(m, _)| m.clone()).collect();
    let hearings = hearings(lines);
    b.with_kept(kept, |i, _| {
        b.admit_hearings_on(i, "mohe", &asked, &hearings)
    })
    .unwrap()
}

#[test]
fn messages_admitted_together_are_decided_and_kept_as_one_by_one() {
    for name in FIXTURES {
        let (Some((_a, alone)), Some((_b, together))) = (fixture_copy(name), fixture_copy(name))
        else {
            return;
        };
        let lines = messages();
        let b = sample_bridge(&alone, None);
        let kept = &mut KeptInstance::default();
        let one_by_one: Vec<Heard> = lines
            .iter()
            .zip(hearings(&lines))
            .map(|((m, _), h)| {
                b.with_kept(kept, |i, _| b.admit_hearing_on(i, "mohe", m, &h))
                    .unwrap()
            })
            .collect();
        let b = sample_bridge(&together, None);
        let all = admit_all(&b, &mut KeptInstance::default(), &lines);
        assert_eq!(summary(&all), summary(&one_by_one), "{name}");
        // The person's question is answered, the agent's line heard with a
        // hop counted, the stop seen: each call saw the one before.
        let s = summary(&all);
        assert!(s[0].0 && s[0].5, "{name}: {s:?}");
        assert_eq!(s[1].3, 1, "{name}: {s:?}");
        assert!(s[2].2, "{name}: {s:?}");
        assert_eq!(stored(&together), stored(&alone), "{name}");
        assert!(!stored(&together).0.is_empty(), "{name}");
    }
}

#[test]
fn a_failure_of_one_message_writes_none_of_them() {
    for name in FIXTURES {
        let Some((_dir, db)) = fixture_copy(name) else {
            return;
        };
        let mut lines = messages();
        // An occupant of another room: the policy refuses it (bad-input).
        lines[1].0.occupant = "elsewhere@conference.example.org/zhiwei".into();
        let asked: Vec<RoomMessage> = lines.iter().map(|(m, _)| m.clone()).collect();
        let hearings = hearings(&lines);
        let b = sample_bridge(&db, None);
        let kept = &mut KeptInstance::default();
        let failed = b
            .with_kept(kept, |i, _| {
                b.admit_hearings_on(i, "mohe", &asked, &hearings)
            })
            .unwrap_err();
        assert_eq!(
            failed.kind,
            FailureKind::BadInput,
            "{name}: {}",
            failed.message
        );
        assert_eq!(stored(&db), (Vec::new(), 0), "{name}: nothing written");
        // The kept instance decides the next message as usual.
        let next = admit_all(&b, kept, &messages()[..1]);
        assert!(next[0].admission.reply, "{name}");
        let mismatched = b
            .with_kept(kept, |i, _| {
                b.admit_hearings_on(i, "mohe", &asked, &hearings[..1])
            })
            .unwrap_err();
        assert_eq!(mismatched.kind, FailureKind::BadInput, "{name}");
    }
}
