//! The memo of `resolve` (docs/src/design/where-the-time-goes.md, `host/runtime/src/memo.rs`) over the
//! real store: a decision is served again only while `state.db` says the
//! same, every change another connection commits is seen by the very next
//! call, and a lock is waited out once, not once for the memo's check and
//! again for the call (twice would make a 5 s busy timeout a 10 s wait).

use rusqlite::Connection;
use session_switch::hermes_imports::HermesImports;
use session_switch::runtime::{FailureKind, Policy, PolicyInstance, PolicyOptions, Reason};
use session_switch_contract::keys::record_key;
use session_switch_store::HermesStore;
use session_switch_tests::fixture_copy;
use session_switch_tests::sample::{ROOM, record, sample_settings, unix_now};
use std::path::Path;
use std::time::{Duration, Instant};

const CLI: &str = "20260619_190821_7c0afe";
const TOOLS: &str = "20260619_193000_a1b2c3";
const BUSY: Duration = Duration::from_millis(400);

fn instance(db: &Path) -> PolicyInstance {
    let policy = Policy::embedded(PolicyOptions {
        ..PolicyOptions::default()
    })
    .unwrap();
    let mut store = HermesStore::open(db).unwrap();
    store.set_busy_timeout(BUSY).unwrap();
    policy.instance(HermesImports::new(store, None, ROOM), sample_settings())
}

fn set_record(db: &Path, session: &str) {
    Connection::open(db)
        .unwrap()
        .execute(
            "INSERT OR REPLACE INTO state_meta (key, value) VALUES (?1, ?2)",
            [
                record_key("mohe"),
                record(session, unix_now() - 10.0, Some("mohe")),
            ],
        )
        .unwrap();
}

#[test]
fn every_commit_of_another_connection_is_seen_by_the_next_resolve() {
    for fixture in ["hermes-0.19.0.db", "hermes-latest.db"] {
        let Some((_dir, db)) = fixture_copy(fixture) else {
            return;
        };
        set_record(&db, CLI);
        let mut i = instance(&db);
        let first = i.resolve("mohe", "xmpp-mohe-v2").unwrap();
        assert_eq!((first.session_id.as_str(), first.redirected), (CLI, true));
        assert_eq!(i.resolve("mohe", "xmpp-mohe-v2").unwrap(), first);
        assert_eq!(i.last_call_fuel(), 0, "{fixture}: served from the memo");

        // Hermes stores a turn: the reads answer the same, still served.
        Connection::open(&db)
            .unwrap()
            .execute(
                "UPDATE sessions SET title = 'a turn later' WHERE id = 'xmpp-mohe-v2'",
                [],
            )
            .unwrap();
        assert_eq!(i.resolve("mohe", "xmpp-mohe-v2").unwrap(), first);
        assert_eq!(
            i.last_call_fuel(),
            0,
            "{fixture}: the reads answered the same"
        );

        // A new record, then none: the next call sees each at once.
        set_record(&db, TOOLS);
        let moved = i.resolve("mohe", "xmpp-mohe-v2").unwrap();
        assert_eq!(moved.session_id, TOOLS, "{fixture}");
        assert!(
            i.last_call_fuel() > 0,
            "{fixture}: the policy decided again"
        );
        Connection::open(&db)
            .unwrap()
            .execute(
                "DELETE FROM state_meta WHERE key = ?1",
                [record_key("mohe")],
            )
            .unwrap();
        // Left: the fixture's legacy key (mohe is the legacy agent), expired.
        let gone = i.resolve("mohe", "xmpp-mohe-v2").unwrap();
        assert_eq!(gone.reason, Reason::Expired, "{fixture}: {}", gone.detail);
        assert_eq!(gone.session_id, "xmpp-mohe-v2");
    }
}

#[test]
fn a_locked_database_is_waited_for_once() {
    // DELETE mode (the v31 fixture): an exclusive lock blocks readers.
    let Some((_dir, db)) = fixture_copy("hermes-latest.db") else {
        return;
    };
    set_record(&db, CLI);
    let mut i = instance(&db);
    let first = i.resolve("mohe", "xmpp-mohe-v2").unwrap();
    assert!(first.redirected);

    // Whether anyone committed is SQLite's answer, under its lock: a
    // writer's lock, even one that commits nothing, is waited for, once.
    let locker = Connection::open(&db).unwrap();
    locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let started = Instant::now();
    let failure = i.resolve("mohe", "xmpp-mohe-v2").unwrap_err();
    let waited = started.elapsed();
    assert_eq!(failure.kind, FailureKind::Busy, "{}", failure.message);
    assert!(
        waited >= BUSY && waited < BUSY * 3 / 2,
        "waited {waited:?} for a busy timeout of {BUSY:?}"
    );
    locker.execute_batch("ROLLBACK").unwrap();
    assert_eq!(i.resolve("mohe", "xmpp-mohe-v2").unwrap(), first);
    assert!(i.last_call_fuel() > 0, "the failed check emptied the entry");
    assert_eq!(i.resolve("mohe", "xmpp-mohe-v2").unwrap(), first);
    assert_eq!(i.last_call_fuel(), 0, "served from the memo");

    // After a commit the reads are asked again, under SQLite's lock: the
    // call waits for it once.
    Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE sessions SET title = 'a turn later' WHERE id = 'xmpp-mohe-v2'",
            [],
        )
        .unwrap();
    locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let started = Instant::now();
    let failure = i.resolve("mohe", "xmpp-mohe-v2").unwrap_err();
    let waited = started.elapsed();
    assert_eq!(failure.kind, FailureKind::Busy, "{}", failure.message);
    assert!(
        waited >= BUSY && waited < BUSY * 3 / 2,
        "waited {waited:?} for a busy timeout of {BUSY:?}"
    );
    locker.execute_batch("ROLLBACK").unwrap();

    let again = i.resolve("mohe", "xmpp-mohe-v2").unwrap();
    assert_eq!(again, first);
    assert!(i.last_call_fuel() > 0, "the failed check emptied the entry");
}

/// A gateway's instance (`Bridge::instance`, what the Python binding pools)
/// serves a decision that still holds from the memo, on both journal
/// modes, and keeps no chain notes: imports that keep notes make every
/// call its reads (a replay every call, several times a served one's
/// cost).
#[test]
fn a_gateways_instance_serves_from_the_memo() {
    for fixture in ["hermes-0.19.0.db", "hermes-latest.db"] {
        let Some((_dir, db)) = fixture_copy(fixture) else {
            return;
        };
        set_record(&db, CLI);
        let config = db.with_file_name("session-switch.toml");
        std::fs::write(
            &config,
            session_switch_tests::sample::sample_config_text(
                ROOM,
                &|name| format!("{name}@example.org"),
                "",
                "",
            ),
        )
        .unwrap();
        let bridge = session_switch::Bridge::open(session_switch::BridgeOptions {
            config: Some(config),
            db: Some(db.clone()),
            ..session_switch::BridgeOptions::default()
        })
        .unwrap();
        let mut gateway = bridge.instance(false).unwrap();
        let first = gateway.resolve("mohe", "xmpp-mohe-v2").unwrap();
        assert_eq!((first.session_id.as_str(), first.redirected), (CLI, true));
        for _ in 0..3 {
            assert_eq!(gateway.resolve("mohe", "xmpp-mohe-v2").unwrap(), first);
            assert_eq!(gateway.last_call_fuel(), 0, "{fixture}: served");
        }
        set_record(&db, TOOLS);
        let moved = gateway.resolve("mohe", "xmpp-mohe-v2").unwrap();
        assert_eq!(moved.session_id, TOOLS, "{fixture}: the new record at once");
    }
}
