//! The instance the room bot keeps from message to message
//! (`Bridge::with_kept`), on real Hermes fixtures: its connection holds no
//! lock between calls, a locked database is `busy` and the instance stays
//! usable, a database file replaced under the same path is the one written
//! next, and a hot swap reaches it.

use rusqlite::Connection;
use session_switch::runtime::RoomMessage;
use session_switch::{Bridge, FailureKind, Hearing, KeptInstance};
use session_switch_tests::sample::{ROOM, room_message, sample_bridge};
use session_switch_tests::{component_path, fixture_copy, variant_path};
use std::path::Path;
use std::time::Duration;

const FIXTURES: [&str; 3] = ["hermes-early.db", "hermes-0.19.0.db", "hermes-latest.db"];

fn person(body: &str) -> RoomMessage {
    room_message("anna", Some("anna@example.org"), body)
}

/// Admit `body` from anna on `kept`, its line stored: the id it got.
fn hear(b: &Bridge, kept: &mut KeptInstance, body: &str, ordering: i64) -> Option<i64> {
    let line = format!("anna: {body}");
    let hearing = Hearing {
        nick: "anna",
        line: &line,
        ordering,
        at: 1_800_000_000.0 + ordering as f64,
        cursor: Some("{}"),
        forget: &[],
    };
    let message = person(body);
    b.with_kept(kept, |i, _| {
        b.admit_hearing_on(i, "mohe", &message, &hearing)
    })
    .unwrap()
    .kept
}

fn heard_rows(db: &Path) -> i64 {
    Connection::open(db)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM session_switch_heard", [], |r| {
            r.get(0)
        })
        .unwrap_or(0)
}

#[test]
fn a_kept_connection_holds_no_lock_between_calls() {
    for name in FIXTURES {
        let Some((_dir, db)) = fixture_copy(name) else {
            return;
        };
        let b = sample_bridge(&db, None);
        let kept = &mut KeptInstance::default();
        let id = hear(&b, kept, "@mohe hi", 1).unwrap();
        b.resolve_kept(kept, "mohe", "xmpp-mohe-v2").unwrap();
        b.with_kept(kept, |i, _| {
            i.is_own_message("mohe", &format!("{ROOM}/mohe"))
        })
        .unwrap();
        b.with_kept(kept, |i, _| b.heard_change_on(i, "mohe", &[id], &[], &[]))
            .unwrap();
        assert!(kept.is_open());
        // Another connection takes every lock at once, without waiting:
        // the kept one sits on none.
        let other = Connection::open(&db).unwrap();
        other.busy_timeout(Duration::ZERO).unwrap();
        other.execute_batch("BEGIN EXCLUSIVE; COMMIT").unwrap();
        assert_eq!(heard_rows(&db), 0, "{name}");
    }
}

#[test]
fn a_locked_database_is_busy_and_the_kept_instance_serves_after() {
    let Some((_dir, db)) = fixture_copy("hermes-latest.db") else {
        return;
    };
    let b = sample_bridge(&db, None);
    let kept = &mut KeptInstance::default();
    hear(&b, kept, "@mohe one", 1).unwrap();
    let other = Connection::open(&db).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let busy = b
        .with_kept(kept, |i, _| {
            b.heard_change_on(i, "mohe", &[], &[], &[(2, None, "anna: two".into(), 2.0)])
        })
        .unwrap_err();
    assert_eq!(busy.kind, FailureKind::Busy, "{busy:?}");
    assert!(kept.is_open(), "busy is no reason to drop the connection");
    other.execute_batch("ROLLBACK").unwrap();
    assert_eq!(heard_rows(&db), 1, "nothing written while locked");
    hear(&b, kept, "@mohe three", 3).unwrap();
    assert_eq!(heard_rows(&db), 2);
}

#[test]
fn a_replaced_database_file_is_the_one_written_next() {
    for name in FIXTURES {
        let Some((dir, db)) = fixture_copy(name) else {
            return;
        };
        let b = sample_bridge(&db, None);
        let kept = &mut KeptInstance::default();
        hear(&b, kept, "@mohe before", 1).unwrap();
        assert_eq!(heard_rows(&db), 1, "{name}");
        // A restore: the file moved away with its write-ahead log, a fresh
        // copy moved in, and a Hermes process writing to it at once.
        let old = dir.path().join("old.db");
        for tail in ["", "-wal", "-shm"] {
            let from = format!("{}{tail}", db.display());
            if Path::new(&from).exists() {
                std::fs::rename(&from, format!("{}{tail}", old.display())).unwrap();
            }
        }
        let fresh = dir.path().join("fresh.db");
        std::fs::copy(
            session_switch_tests::fixtures_dir().unwrap().join(name),
            &fresh,
        )
        .unwrap();
        std::fs::rename(&fresh, &db).unwrap();
        let hermes = Connection::open(&db).unwrap();
        hermes
            .execute_batch("CREATE TABLE hermes_wrote (x); INSERT INTO hermes_wrote VALUES (1)")
            .unwrap();
        let wal = format!("{}-wal", db.display());
        let wal_mode = Path::new(&wal).exists();
        hear(&b, kept, "@mohe after", 2).unwrap();
        assert_eq!(
            Path::new(&wal).exists(),
            wal_mode,
            "{name}: the new file's log stays"
        );
        assert_eq!(heard_rows(&db), 1, "{name}: written into the new file");
        assert_eq!(heard_rows(&old), 1, "{name}: the old file untouched");
        // Closing the old connection left the new file's log alone.
        let wrote: i64 = Connection::open(&db)
            .unwrap()
            .query_row("SELECT COUNT(*) FROM hermes_wrote", [], |r| r.get(0))
            .unwrap();
        assert_eq!(wrote, 1, "{name}: Hermes's write is still there");
        drop(hermes);
        // The file gone: a clear error naming it, and nothing kept.
        std::fs::remove_file(&db).unwrap();
        let gone = b
            .with_kept(kept, |i, _| i.is_own_message("mohe", "x"))
            .unwrap_err();
        assert_eq!(gone.kind, FailureKind::Store, "{gone:?}");
        assert!(gone.message.contains("state.db"), "{gone:?}");
        assert!(!kept.is_open());
    }
}

#[test]
fn a_hot_swap_reaches_the_kept_instance() {
    let Some((dir, db)) = fixture_copy("hermes-latest.db") else {
        return;
    };
    let live = dir.path().join("live.wasm");
    std::fs::copy(component_path(), &live).unwrap();
    let b = sample_bridge(&db, Some(&live));
    let kept = &mut KeptInstance::default();
    let before = b.with_kept(kept, |i, _| i.version()).unwrap();
    let tmp = dir.path().join("live.wasm.tmp");
    std::fs::copy(variant_path("v3"), &tmp).unwrap();
    std::fs::rename(&tmp, &live).unwrap();
    let swapped = b.reload_policy(None).unwrap().unwrap();
    assert_ne!(swapped, before);
    let after = b.with_kept(kept, |i, _| i.version()).unwrap();
    assert_eq!(after, swapped, "the next call runs on the swapped policy");
    hear(&b, kept, "@mohe after the swap", 1).unwrap();
}
