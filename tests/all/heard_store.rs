//! The lines waiting for an agent's next turn and the room cursor in
//! `state.db`, on every real Hermes fixture: written with the
//! decision in `admit`'s one transaction (or not at all), capped, forgotten
//! and reassigned in one brief transaction, refused outside one, and
//! nothing written while another connection holds the write lock.

use rusqlite::Connection;
use session_switch::runtime::RoomMessage;
use session_switch::{FailureKind, HEARD_CAP, Hearing};
use session_switch_store::{HeardLine, HermesStore};
use session_switch_tests::fixture_copy;
use session_switch_tests::sample::{ROOM, room_message, sample_bridge};
use std::path::Path;
use std::time::Duration;

const FIXTURES: [&str; 3] = ["hermes-early.db", "hermes-0.19.0.db", "hermes-latest.db"];

fn person(body: &str) -> RoomMessage {
    room_message("anna", Some("anna@example.org"), body)
}

fn hearing<'a>(line: &'a str, ordering: i64, cursor: Option<&'a str>) -> Hearing<'a> {
    Hearing {
        nick: "anna",
        line,
        ordering,
        at: 1_800_000_000.0 + ordering as f64,
        cursor,
        forget: &[],
    }
}

fn count(db: &Path, sql: &str) -> i64 {
    Connection::open(db)
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

fn table_exists(db: &Path, name: &str) -> bool {
    count(
        db,
        &format!("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '{name}'"),
    ) == 1
}

#[test]
fn a_decided_line_and_the_cursor_are_written_with_the_decision() {
    for name in FIXTURES {
        let Some((_dir, db)) = fixture_copy(name) else {
            return;
        };
        assert!(!table_exists(&db, "session_switch_heard"), "{name}");
        let b = sample_bridge(&db, None);
        // Not addressed: heard, kept, and the cursor moved.
        let heard = b
            .admit_hearing(
                "mohe",
                &person("@zhiwei hi"),
                &hearing("anna: @zhiwei hi", 1, Some("{\"c\":1}")),
            )
            .unwrap();
        assert!(heard.admission.heard && !heard.admission.reply, "{name}");
        let first = heard.kept.unwrap();
        // Addressed: kept too, until Hermes takes its turn.
        let heard = b
            .admit_hearing(
                "mohe",
                &person("@mohe hi"),
                &hearing("anna: @mohe hi", 2, Some("{\"c\":2}")),
            )
            .unwrap();
        assert!(heard.admission.reply, "{name}");
        let second = heard.kept.unwrap();
        // A repeat is neither answered nor heard: nothing kept.
        let heard = b
            .admit_hearing(
                "mohe",
                &person("@mohe hi"),
                &hearing("anna: @mohe hi", 3, None),
            )
            .unwrap();
        assert_eq!(heard.kept, None, "{name}");
        let lines: Vec<(i64, String, bool)> = b
            .heard_lines("mohe")
            .unwrap()
            .into_iter()
            .map(|l| (l.id, l.line, l.answer))
            .collect();
        // The addressed one is still to answer: a restarted bot answers it.
        assert_eq!(
            lines,
            vec![
                (first, "anna: @zhiwei hi".to_owned(), false),
                (second, "anna: @mohe hi".to_owned(), true)
            ],
            "{name}"
        );
        assert!(b.heard_lines("zhiwei").unwrap().is_empty(), "{name}");
        assert_eq!(
            b.room_cursor("mohe").unwrap().as_deref(),
            Some("{\"c\":2}"),
            "{name}"
        );
        // Hermes took the turn: forgotten; a line whose turn never reached
        // Hermes gets its session.
        let (ids, dropped) = b
            .heard_change(
                "mohe",
                &[first],
                &[(second, Some("xmpp-mohe-v2".into()))],
                &[(4, None, "zhiwei: ok".into(), 1.0)],
            )
            .unwrap();
        assert_eq!((ids.len(), dropped.len()), (1, 0), "{name}");
        let lines = b.heard_lines("mohe").unwrap();
        assert_eq!(
            lines
                .iter()
                .map(|l| (l.line.as_str(), l.session.as_deref(), l.answer))
                .collect::<Vec<_>>(),
            vec![
                ("anna: @mohe hi", Some("xmpp-mohe-v2"), false),
                ("zhiwei: ok", None, false)
            ],
            "{name}"
        );
        let check: String = Connection::open(&db)
            .unwrap()
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok", "{name}");
    }
}

#[test]
fn the_cap_drops_the_oldest_and_says_which() {
    let Some((_dir, db)) = fixture_copy("hermes-0.19.0.db") else {
        return;
    };
    let b = sample_bridge(&db, None);
    let mut dropped = Vec::new();
    for i in 1..=(HEARD_CAP as i64 + 3) {
        let body = format!("@zhiwei line {i}");
        let line = format!("anna: {body}");
        let heard = b
            .admit_hearing("mohe", &person(&body), &hearing(&line, i, None))
            .unwrap();
        dropped.extend(heard.dropped.into_iter().map(|l: HeardLine| l.line));
    }
    assert_eq!(
        dropped,
        vec![
            "anna: @zhiwei line 1",
            "anna: @zhiwei line 2",
            "anna: @zhiwei line 3"
        ]
    );
    let lines = b.heard_lines("mohe").unwrap();
    assert_eq!(lines.len(), HEARD_CAP);
    assert_eq!(lines[0].line, "anna: @zhiwei line 4");
}

#[test]
fn nothing_is_written_outside_a_transaction_or_while_the_file_is_locked() {
    let Some((_dir, db)) = fixture_copy("hermes-early.db") else {
        return;
    };
    let mut store = HermesStore::open(&db).unwrap();
    let line = HeardLine {
        id: 0,
        agent: "mohe".into(),
        room: ROOM.into(),
        ordering: 1,
        session: None,
        line: "anna: hi".into(),
        heard_at: 1.0,
        nick: "anna".into(),
        answer: false,
    };
    let outside = store.heard_insert_in_tx(&line).unwrap_err();
    assert_eq!(outside.kind, FailureKind::BadInput, "{outside:?}");
    assert!(outside.message.contains("outside a write transaction"));
    let cursor = store.cursor_set_in_tx("mohe", ROOM, "{}").unwrap_err();
    assert_eq!(cursor.kind, FailureKind::BadInput, "{cursor:?}");
    assert!(!table_exists(&db, "session_switch_heard"));
    assert!(
        !table_exists(&db, "state_meta"),
        "the early schema has none"
    );

    // Another writer holds the lock: busy, and nothing changed.
    let other = Connection::open(&db).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    store.set_write_deadline(Duration::from_millis(300));
    let busy = store
        .heard_change(&[], &[], std::slice::from_ref(&line))
        .unwrap_err();
    assert_eq!(busy.kind, FailureKind::Busy, "{busy:?}");
    other.execute_batch("ROLLBACK").unwrap();
    assert!(!table_exists(&db, "session_switch_heard"));
    // Once free, the same change goes through.
    let (ids, _) = store.heard_change(&[], &[], &[line]).unwrap();
    assert_eq!(ids.len(), 1);
    assert_eq!(store.heard_rows("mohe", ROOM).unwrap().len(), 1);
}

#[test]
fn a_decision_the_store_refuses_writes_neither_the_state_nor_the_line() {
    let Some((_dir, db)) = fixture_copy("hermes-0.19.0.db") else {
        return;
    };
    let b = sample_bridge(&db, None);
    // The table exists but cannot take the line (a column it lacks): the
    // admission's write fails after the policy decided, and is rolled back.
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch("CREATE TABLE session_switch_heard (id INTEGER PRIMARY KEY)")
        .unwrap();
    let before = count(
        &db,
        "SELECT COUNT(*) FROM state_meta WHERE key LIKE 'session_switch:%'",
    );
    let failed = b
        .admit_hearing(
            "mohe",
            &person("@zhiwei hi"),
            &hearing("anna: @zhiwei hi", 1, Some("{}")),
        )
        .unwrap_err();
    assert_eq!(failed.kind, FailureKind::Store, "{failed:?}");
    assert!(failed.message.contains("store a heard line"), "{failed:?}");
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM state_meta WHERE key LIKE 'session_switch:%'"
        ),
        before,
        "neither the guard's state nor the cursor was written"
    );
}
