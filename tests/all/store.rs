//! The Hermes store (`session_switch_store`) on copies of the real Hermes
//! databases (`shared/fixtures/hermes/`): history as Hermes's loader reads
//! it, the atomic send write, `init-db`, and every failure path, each
//! checked against the full contents of the file.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::json;
use session_switch::{Failure, FailureKind};
use session_switch_contract::keys::record_key;
use session_switch_store::{HermesStore, PendingState, SENT_ROWS, SendWrite, Written};
use session_switch_tests::sample::{self, SAMPLE_CLI, unix_now};
use session_switch_tests::{
    FIXTURES, expected_conversations, fixture_copy, journal_mode, journal_mode_of, table_snapshot,
};

const WORKER: &str = env!("CARGO_BIN_EXE_store_worker");
const TOKEN: &str = "plumcrate4821";

fn fts_tables(conn: &Connection) -> Vec<String> {
    conn.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' \
         AND sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%'",
    )
    .unwrap()
    .query_map([], |r| r.get(0))
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

/// `PRAGMA integrity_check` is `ok` and FTS5 `integrity-check` (rank 1:
/// against the external content too) passes on every FTS table.
fn assert_integrity(path: &Path) {
    let conn = Connection::open(path).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok", "{}", path.display());
    let tables = fts_tables(&conn);
    assert!(!tables.is_empty(), "every fixture has an FTS index");
    for t in tables {
        conn.execute(
            &format!("INSERT INTO \"{t}\" (\"{t}\", rank) VALUES ('integrity-check', 1)"),
            [],
        )
        .unwrap_or_else(|e| panic!("FTS integrity-check of {t}: {e}"));
    }
}

/// `after` is `before` but, where `before` had no `state_meta` (an early
/// Hermes database), for an empty `state_meta` with Hermes's DDL: the one
/// trace a send that failed after its intent may leave (docs/src/design/send.md#the-atomic-send).
fn assert_unchanged_but_an_empty_state_meta(
    before: &std::collections::BTreeMap<String, Vec<String>>,
    after: &std::collections::BTreeMap<String, Vec<String>>,
    name: &str,
) {
    if before.contains_key("state_meta") {
        assert_eq!(after, before, "{name}");
        return;
    }
    assert_eq!(after.get("state_meta"), Some(&Vec::new()), "{name}");
    let mut after = after.clone();
    after.remove("state_meta");
    let master = after.get_mut("sqlite_master").unwrap();
    let created: Vec<String> = master
        .iter()
        .filter(|r| r.contains("state_meta"))
        .cloned()
        .collect();
    assert_eq!(
        created.len(),
        2,
        "{name}: the table and its key index: {created:?}"
    );
    assert!(
        created
            .iter()
            .any(|r| r.contains("CREATE TABLE state_meta (key TEXT PRIMARY KEY, value TEXT)")),
        "{name}: {created:?}"
    );
    master.retain(|r| !r.contains("state_meta"));
    assert_eq!(&after, before, "{name}");
}

/// The pending sends' keys in `state_meta` (none when it is missing).
fn pending_keys(path: &Path) -> Vec<String> {
    let conn = Connection::open(path).unwrap();
    let Ok(mut stmt) = conn.prepare(
        "SELECT key FROM state_meta WHERE key LIKE 'session_switch:pending:%' ORDER BY key",
    ) else {
        return Vec::new();
    };
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn query_i64(path: &Path, sql: &str) -> i64 {
    let conn = Connection::open(path).unwrap();
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

fn record(timestamp: f64) -> String {
    sample::record(SAMPLE_CLI, timestamp, Some("mohe"))
}

/// mohe's record key.
static MOHE_KEY: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| record_key("mohe"));

/// A send of mohe into `xmpp-mohe-v2` with `content` at `timestamp`.
fn write<'a>(content: &'a str, record_value: &'a str, timestamp: f64) -> SendWrite<'a> {
    SendWrite {
        agent: "mohe",
        history_session_id: "xmpp-mohe-v2",
        history_content: content,
        cli_session_id: SAMPLE_CLI,
        record_key: &MOHE_KEY,
        record_value,
        timestamp,
    }
}

fn send(store: &mut HermesStore, content: &str, timestamp: f64) -> Result<Written, Failure> {
    let value = record(timestamp);
    store
        .send_write(&write(content, &value, timestamp), || Ok(()))
        .map(|(written, ())| written)
}

macro_rules! fixture {
    ($name:expr) => {
        match fixture_copy($name) {
            Some(copy) => copy,
            None => return,
        }
    };
}

// ---------------------------------------------------------------- history

#[test]
fn a_store_can_move_to_another_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<HermesStore>();
    let (_dir, db) = fixture!("hermes-latest.db");
    let store = HermesStore::open(&db).unwrap();
    let rows = std::thread::spawn(move || store.history("xmpp-zhiwei", "mohe", None))
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(rows.len(), 2);
}

#[test]
fn history_is_what_hermes_loader_returns_on_every_fixture() {
    let Some(expected) = expected_conversations() else {
        return;
    };
    for name in FIXTURES {
        let (_dir, db) = fixture!(name);
        let store = HermesStore::open(&db).unwrap();
        let sessions = expected[name]["get_messages_as_conversation"]
            .as_object()
            .unwrap();
        assert_eq!(sessions.len(), 5, "{name}");
        for (session, want) in sessions {
            let rows = store.history(session, "mohe", None).unwrap();
            // Early Hermes's loader orders by (timestamp, id), and so does
            // the store on that schema; later ones by id.
            if name != "hermes-early.db" {
                assert!(
                    rows.windows(2).all(|w| w[0].id < w[1].id),
                    "{name} {session}: not in id order"
                );
            }
            let want = want.as_array().unwrap();
            assert_eq!(rows.len(), want.len(), "{name} {session}");
            for (row, want) in rows.iter().zip(want) {
                let at = format!("{name} {session} row {}", row.id);
                assert_eq!(row.role, want["role"].as_str().unwrap(), "{at}");
                assert_eq!(row.content, want["content"].as_str().unwrap(), "{at}");
                let tool_calls = row
                    .tool_calls
                    .as_deref()
                    .map(|t| serde_json::from_str::<serde_json::Value>(t).unwrap());
                assert_eq!(tool_calls.as_ref(), want.get("tool_calls"), "{at}");
                assert_eq!(
                    row.tool_call_id.as_deref(),
                    want.get("tool_call_id").and_then(|v| v.as_str()),
                    "{at}"
                );
                assert_eq!(
                    row.tool_name.as_deref(),
                    want.get("tool_name").and_then(|v| v.as_str()),
                    "{at}"
                );
                assert!(!row.bridge_wrote, "{at}");
            }
        }
    }
}

#[test]
fn history_limit_keeps_the_last_rows_in_id_order() {
    for name in FIXTURES {
        let (_dir, db) = fixture!(name);
        let store = HermesStore::open(&db).unwrap();
        let all = store.history("xmpp-mohe-v2", "mohe", None).unwrap();
        assert_eq!(all.len(), 8, "{name}");
        let last3 = store.history("xmpp-mohe-v2", "mohe", Some(3)).unwrap();
        assert_eq!(last3, all[5..].to_vec(), "{name}");
        assert!(
            store
                .history("xmpp-mohe-v2", "mohe", Some(0))
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            store.history("xmpp-mohe-v2", "mohe", Some(100)).unwrap(),
            all
        );
        // The rewound rows 19–20 (active = 0) of ≥0.19.0 never count
        // towards the limit: the last two rows are the tool row and the
        // final answer.
        let tail = store
            .history("20260619_193000_a1b2c3", "mohe", Some(2))
            .unwrap();
        let roles: Vec<&str> = tail.iter().map(|r| &*r.role).collect();
        assert_eq!(roles, ["tool", "assistant"], "{name}");
        assert_eq!(tail[1].content, "It is 19:30 in Shanghai right now.");
    }
}

#[test]
fn unknown_session_reads_empty_and_does_not_exist() {
    for name in FIXTURES {
        let (_dir, db) = fixture!(name);
        let store = HermesStore::open(&db).unwrap();
        assert!(
            store
                .history("no-such-session", "mohe", None)
                .unwrap()
                .is_empty()
        );
        assert!(!store.session_exists("no-such-session").unwrap());
        for id in ["xmpp-mohe-v2", "xmpp-zhiwei", "20260619_190821_7c0afe"] {
            assert!(store.session_exists(id).unwrap(), "{name} {id}");
        }
    }
}

/// Hermes's loader decodes `"\0json:"` content (the row's text is the
/// list's first text part, the list is kept) and returns NULL as null.
#[test]
fn multimodal_and_null_content_read_as_hermes_decodes_them() {
    let (_dir, db) = fixture!("hermes-latest.db");
    let multimodal = "\u{0}json:[{\"type\": \"text\", \"text\": \"hi\"}]";
    {
        let conn = Connection::open(&db).unwrap();
        conn.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES \
             ('xmpp-zhiwei', 'user', ?1, 1781874010.0), \
             ('xmpp-zhiwei', 'assistant', NULL, 1781874011.0)",
            [multimodal],
        )
        .unwrap();
    }
    let store = HermesStore::open(&db).unwrap();
    let rows = store.history("xmpp-zhiwei", "mohe", Some(2)).unwrap();
    assert_eq!(rows[0].content, "hi");
    assert_eq!(
        rows[0].message_json()["content"],
        serde_json::json!([{"type": "text", "text": "hi"}])
    );
    assert_eq!(rows[1].content, "");
    assert_eq!(rows[1].message_json()["content"], serde_json::Value::Null);
}

#[test]
fn reads_leave_a_delete_mode_file_untouched() {
    let (dir, db) = fixture!("hermes-latest.db");
    assert_eq!(journal_mode(&db), "delete");
    let files = |dir: &Path| -> Vec<PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    };
    let before_files = files(dir.path());
    let before = std::fs::read(&db).unwrap();
    let before_mtime = std::fs::metadata(&db).unwrap().modified().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    {
        let store = HermesStore::open(&db).unwrap();
        assert!(
            store
                .meta_get("active_xmpp_sender_session")
                .unwrap()
                .is_some()
        );
        assert_eq!(store.meta_get("session_switch:active:mohe").unwrap(), None);
        assert!(store.meta_list_ours().unwrap().is_empty());
        assert!(store.session_exists("xmpp-mohe-v2").unwrap());
        assert_eq!(
            store.history("xmpp-mohe-v2", "mohe", None).unwrap().len(),
            8
        );
        assert_eq!(
            store
                .history("xmpp-mohe-v2", "mohe", Some(2))
                .unwrap()
                .len(),
            2
        );
        // Deleting a key that is not there is not a read, but must not
        // write either when there is nothing to delete.
        assert!(!store.meta_delete("session_switch:active:nobody").unwrap());
    }
    assert_eq!(std::fs::read(&db).unwrap(), before, "bytes changed");
    assert_eq!(
        std::fs::metadata(&db).unwrap().modified().unwrap(),
        before_mtime,
        "mtime changed"
    );
    assert_eq!(files(dir.path()), before_files, "files appeared");
}

/// `data_version` (the memo of `resolve`, docs/src/design/where-the-time-goes.md) stays while only
/// reads happen, here and elsewhere, and changes when another connection
/// commits (as Hermes does) and when this one writes; inside a read
/// snapshot it is the snapshot's. The 0.19.0 fixture is in WAL mode, the
/// v31 one in DELETE mode: both journal modes.
#[test]
fn the_data_version_changes_exactly_when_someone_wrote() {
    for name in ["hermes-0.19.0.db", "hermes-latest.db"] {
        let (_dir, db) = fixture!(name);
        let wal = journal_mode(&db) == "wal";
        let store = HermesStore::open(&db).unwrap();
        let v0 = store.data_version().unwrap();
        assert!(
            store
                .meta_get("session_switch:active:mohe")
                .unwrap()
                .is_none()
        );
        let other = Connection::open(&db).unwrap();
        let _: i64 = other
            .query_row("SELECT count(*) FROM messages", [], |r| r.get(0))
            .unwrap();
        assert_eq!(
            store.data_version().unwrap(),
            v0,
            "{name}: reads change nothing"
        );

        set_meta(&db, "session_switch:probe", "1");
        let v1 = store.data_version().unwrap();
        assert_ne!(v1, v0, "{name}: another connection committed");
        assert_eq!(store.data_version().unwrap(), v1, "{name}: and stays");

        assert!(store.meta_delete("session_switch:probe").unwrap());
        let v2 = store.data_version().unwrap();
        assert_ne!(v2, v1, "{name}: this connection wrote");

        assert!(store.begin_read().unwrap());
        assert_eq!(store.data_version().unwrap(), v2);
        // In DELETE mode a writer cannot commit while the snapshot holds
        // its shared lock; in WAL mode it can, and the snapshot does not see it.
        other.busy_timeout(Duration::from_millis(10)).unwrap();
        let wrote = other.execute(
            "INSERT INTO state_meta (key, value) VALUES ('session_switch:p2', '1')",
            [],
        );
        assert_eq!(wrote.is_ok(), wal, "{name}: {wrote:?}");
        assert_eq!(store.data_version().unwrap(), v2, "{name}: the snapshot's");
        store.end_read().unwrap();
        if !wal {
            set_meta(&db, "session_switch:p2", "1");
        }
        assert_ne!(
            store.data_version().unwrap(),
            v2,
            "{name}: after the snapshot"
        );
    }
}

/// Closing any descriptor of a file drops every POSIX lock this process
/// holds on it (SQLite's "How To Corrupt" §2.2.1): a store dropped while
/// another holds its read snapshot must not let a writer commit under that
/// snapshot. Another process's writer must stay locked out.
#[test]
fn dropping_a_store_keeps_the_locks_of_the_others() {
    let (_dir, db) = fixture!("hermes-latest.db");
    assert_eq!(journal_mode(&db), "delete");
    let reader = HermesStore::open(&db).unwrap();
    let version = reader.data_version().unwrap();
    assert!(reader.begin_read().unwrap());
    assert!(reader.session_exists("xmpp-mohe-v2").is_ok());
    for _ in 0..3 {
        let other = HermesStore::open(&db).unwrap();
        assert_eq!(other.data_version().unwrap(), version);
        drop(other);
    }
    let writer = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import sqlite3, sys\n\
             c = sqlite3.connect(sys.argv[1], timeout=0.2, isolation_level=None)\n\
             try:\n    c.execute('BEGIN EXCLUSIVE'); print('locked out: no')\n\
             except sqlite3.OperationalError as e:\n    print('locked out:', e)\n",
        )
        .arg(&db)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&writer.stdout);
    assert_eq!(said.trim(), "locked out: database is locked", "{writer:?}");
    reader.end_read().unwrap();
    assert_eq!(reader.data_version().unwrap(), version);
}

#[test]
fn reads_of_an_early_database_create_no_table() {
    let (_dir, db) = fixture!("hermes-early.db");
    let before = table_snapshot(&db);
    let store = HermesStore::open(&db).unwrap();
    assert_eq!(store.meta_get("active_xmpp_sender_session").unwrap(), None);
    assert!(store.meta_list_ours().unwrap().is_empty());
    assert!(!store.meta_delete("session_switch:active:mohe").unwrap());
    assert_eq!(store.history("xmpp-zhiwei", "mohe", None).unwrap().len(), 2);
    drop(store);
    assert_eq!(table_snapshot(&db), before);
}

#[test]
fn meta_get_reads_the_legacy_record_of_the_fixtures() {
    for name in ["hermes-0.19.0.db", "hermes-latest.db"] {
        let (_dir, db) = fixture!(name);
        let store = HermesStore::open(&db).unwrap();
        let value = store
            .meta_get("active_xmpp_sender_session")
            .unwrap()
            .unwrap();
        let value: serde_json::Value = serde_json::from_str(&value).unwrap();
        assert_eq!(
            value,
            json!({"session_id": "20260619_190821_7c0afe", "timestamp": 1781867301,
                   "source": "cli"})
        );
        assert_eq!(store.meta_get("no-such-key").unwrap(), None);
    }
}

/// Anyone can write bytes that are not UTF-8 into `state_meta`: they read
/// as U+FFFD, so the policy calls the record malformed (and `active` shows
/// it, `clear` removes it) instead of every call failing.
#[test]
fn a_record_that_is_not_utf8_is_malformed_not_a_read_error() {
    use session_switch::hermes_imports::HermesImports;
    use session_switch::runtime::{Policy, PolicyOptions, Reason};
    use session_switch_tests::sample::sample_settings;

    let (_dir, db) = fixture!("hermes-latest.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "INSERT OR REPLACE INTO state_meta VALUES ('session_switch:active:mohe', X'FFFE41');
         INSERT OR REPLACE INTO state_meta VALUES ('session_switch:active:zhiwei', \
             CAST(X'7B22ff7D' AS TEXT));",
    )
    .unwrap();
    drop(conn);
    let store = HermesStore::open(&db).unwrap();
    assert_eq!(
        store
            .meta_get("session_switch:active:mohe")
            .unwrap()
            .as_deref(),
        Some("\u{fffd}\u{fffd}A")
    );
    assert_eq!(
        store.meta_list_ours().unwrap(),
        [
            (
                "session_switch:active:mohe".to_string(),
                "\u{fffd}\u{fffd}A".to_string()
            ),
            (
                "session_switch:active:zhiwei".to_string(),
                "{\"\u{fffd}}".to_string()
            ),
        ]
    );

    let options = PolicyOptions {
        ..PolicyOptions::default()
    };
    let policy = Policy::embedded(options).unwrap();
    let backend = HermesImports::new(store, None, sample::ROOM);
    let mut session = policy.instance(backend, sample_settings());
    let d = session.resolve("mohe", "xmpp-mohe-v2").unwrap();
    assert_eq!(
        (d.redirected, d.reason),
        (false, Reason::MalformedRecord),
        "{d:?}"
    );
    let statuses = session.active(None).unwrap();
    let shown: Vec<_> = statuses
        .iter()
        .map(|s| (s.key.as_str(), s.valid, s.reason))
        .collect();
    assert!(
        shown.contains(&("session_switch:active:mohe", false, Reason::MalformedRecord)),
        "{shown:?}"
    );
    assert!(
        session
            .clear(Some("mohe"))
            .unwrap()
            .contains(&"session_switch:active:mohe".to_string())
    );
    drop(session);
    let store = HermesStore::open(&db).unwrap();
    assert_eq!(store.meta_get("session_switch:active:mohe").unwrap(), None);
}

// ------------------------------------------------------------- send_write

/// A send on every fixture adds exactly one history row, one provenance row
/// and one record, bumps `message_count` by one, and changes no other
/// table but the FTS indexes Hermes's triggers keep.
#[test]
fn send_write_adds_exactly_one_row_of_each_on_every_fixture() {
    for name in FIXTURES {
        let (_dir, db) = fixture!(name);
        let mode = journal_mode(&db);
        let before = table_snapshot(&db);
        let count_before = query_i64(
            &db,
            "SELECT message_count FROM sessions WHERE id = 'xmpp-mohe-v2'",
        );
        let messages_before = query_i64(&db, "SELECT count(*) FROM messages");
        let mut store = HermesStore::open(&db).unwrap();
        let content = format!("[YOU] hello room, {TOKEN} from the CLI");
        let timestamp = 1_781_880_000.5;
        let value = record(timestamp);
        let mut posted = false;
        let (written, answer) = store
            .send_write(&write(&content, &value, timestamp), || {
                posted = true;
                Ok(42)
            })
            .unwrap();
        assert!(posted);
        assert_eq!(answer, 42);
        assert!(written.record_replaced, "{name}: no record was stored");
        drop(store);

        let conn = Connection::open(&db).unwrap();
        let max: i64 = conn
            .query_row("SELECT max(id) FROM messages", [], |r| r.get(0))
            .unwrap();
        assert_eq!(written.message_id, max, "{name}");
        assert_eq!(
            query_i64(&db, "SELECT count(*) FROM messages"),
            messages_before + 1
        );
        let row: (String, String, String, f64) = conn
            .query_row(
                "SELECT session_id, role, content, timestamp FROM messages WHERE id = ?1",
                [written.message_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .unwrap();
        assert_eq!(
            row,
            (
                "xmpp-mohe-v2".into(),
                "user".into(),
                content.clone(),
                timestamp
            )
        );
        let sent: Vec<(i64, String, String, f64)> = conn
            .prepare("SELECT * FROM session_switch_sent")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            sent,
            [(
                written.message_id,
                "mohe".into(),
                "20260619_190821_7c0afe".into(),
                timestamp
            )]
        );
        let stored: String = conn
            .query_row(
                "SELECT value FROM state_meta WHERE key = 'session_switch:active:mohe'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(stored, value);
        assert_eq!(
            query_i64(
                &db,
                "SELECT message_count FROM sessions WHERE id = 'xmpp-mohe-v2'"
            ),
            count_before + 1
        );
        // A full-text query finds the new row in every FTS index.
        for t in fts_tables(&conn) {
            let hits: Vec<i64> = conn
                .prepare(&format!(
                    "SELECT rowid FROM \"{t}\" WHERE \"{t}\" MATCH '\"{TOKEN}\"'"
                ))
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(hits, [written.message_id], "{name} {t}");
        }
        drop(conn);
        assert_integrity(&db);
        assert_eq!(journal_mode(&db), mode, "{name}: journal mode changed");

        // Nothing else moved: only these tables differ, `messages` by
        // exactly the new row, `state_meta` by exactly the record.
        let after = table_snapshot(&db);
        let changed: Vec<&str> = after
            .iter()
            .filter(|(t, rows)| before.get(*t) != Some(rows))
            .map(|(t, _)| t.as_str())
            .collect();
        for t in &changed {
            let allowed = ["messages", "sessions", "state_meta", "session_switch_sent"].contains(t)
                || t.starts_with("messages_fts")
                || *t == "sqlite_sequence"
                || *t == "sqlite_master";
            assert!(allowed, "{name}: table {t} changed");
        }
        let added = |t: &str| -> Vec<String> {
            let old = before.get(t).cloned().unwrap_or_default();
            after[t]
                .iter()
                .filter(|r| !old.contains(r))
                .cloned()
                .collect()
        };
        assert_eq!(added("messages").len(), 1, "{name}");
        assert_eq!(
            before["messages"].len() + 1,
            after["messages"].len(),
            "{name}"
        );
        assert_eq!(added("state_meta").len(), 1, "{name}");
        // The intent went with the record: nothing is left pending.
        assert_eq!(pending_keys(&db), Vec::<String>::new(), "{name}");
        if name == "hermes-early.db" {
            assert!(!before.contains_key("state_meta"));
            assert!(!before.contains_key("session_switch_sent"));
        }

        // The row reads back as a sent row, for mohe only.
        let store = HermesStore::open(&db).unwrap();
        let last = store.history("xmpp-mohe-v2", "mohe", Some(1)).unwrap();
        assert_eq!(
            (last[0].id, last[0].bridge_wrote),
            (written.message_id, true)
        );
        assert_eq!(last[0].content, content);
        let other = store.history("xmpp-mohe-v2", "zhiwei", None).unwrap();
        assert!(other.iter().all(|r| !r.bridge_wrote));
        assert_eq!(
            store.meta_list_ours().unwrap(),
            [("session_switch:active:mohe".to_string(), value)]
        );
    }
}

#[test]
fn send_write_creates_a_missing_xmpp_session_row() {
    for name in FIXTURES {
        let (_dir, db) = fixture!(name);
        let mut store = HermesStore::open(&db).unwrap();
        assert!(!store.session_exists("xmpp-xiaoguo").unwrap());
        let value = record(1_781_880_000.0);
        let w = SendWrite {
            history_session_id: "xmpp-xiaoguo",
            ..write("[YOU] first words", &value, 1_781_880_000.0)
        };
        let (written, ()) = store.send_write(&w, || Ok(())).unwrap();
        assert!(store.session_exists("xmpp-xiaoguo").unwrap());
        let rows = store.history("xmpp-xiaoguo", "mohe", None).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].id, written.message_id);
        drop(store);
        let conn = Connection::open(&db).unwrap();
        let session: (String, f64, i64) = conn
            .query_row(
                "SELECT source, started_at, message_count FROM sessions WHERE id = 'xmpp-xiaoguo'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!(session, ("xmpp".into(), 1_781_880_000.0, 1), "{name}");
        drop(conn);
        assert_integrity(&db);
    }
}

#[test]
fn an_older_record_does_not_replace_a_newer_one() {
    for name in FIXTURES {
        let (_dir, db) = fixture!(name);
        let mut store = HermesStore::open(&db).unwrap();
        let newer = send(&mut store, "[YOU] sent second, stamped later", 2_000.0).unwrap();
        assert!(newer.record_replaced);
        let older = send(&mut store, "[YOU] sent first, arrives late", 1_000.0).unwrap();
        assert!(!older.record_replaced, "{name}");
        assert_eq!(
            store.meta_get("session_switch:active:mohe").unwrap(),
            Some(record(2_000.0))
        );
        // Both rows are history all the same, in the loader's order: by id,
        // or by timestamp on the early schema.
        let sent = [newer.message_id, older.message_id];
        let rows = store.history("xmpp-mohe-v2", "mohe", None).unwrap();
        let order: Vec<i64> = rows
            .iter()
            .map(|r| r.id)
            .filter(|id| sent.contains(id))
            .collect();
        let want = if name == "hermes-early.db" {
            [older.message_id, newer.message_id]
        } else {
            sent
        };
        assert_eq!(order, want, "{name}");
        // An equal timestamp replaces (the later call wins a tie).
        let tie = send(&mut store, "[YOU] same second", 2_000.0).unwrap();
        assert!(tie.record_replaced);
        let newest = send(&mut store, "[YOU] newest", 2_000.25).unwrap();
        assert!(newest.record_replaced);
        assert_eq!(
            store.meta_get("session_switch:active:mohe").unwrap(),
            Some(record(2_000.25))
        );
    }
}

#[test]
fn a_stored_record_that_is_not_a_valid_record_is_replaced() {
    let (_dir, db) = fixture!("hermes-latest.db");
    let key = "session_switch:active:mohe";
    let cases = [
        Some("not json at all"),
        Some("{\"session_id\": \"x\"}"),
        Some("{\"timestamp\": \"9999999999\"}"),
        Some("[1, 2]"),
        None,
    ];
    let mut store = HermesStore::open(&db).unwrap();
    for stored in cases {
        Connection::open(&db)
            .unwrap()
            .execute(
                "INSERT OR REPLACE INTO state_meta (key, value) VALUES (?1, ?2)",
                rusqlite::params![key, stored],
            )
            .unwrap();
        let written = send(&mut store, "[YOU] replaces junk", 1_000.0).unwrap();
        assert!(written.record_replaced, "{stored:?}");
        assert_eq!(store.meta_get(key).unwrap(), Some(record(1_000.0)));
    }
    // A record the policy would refuse is replaced however new it claims
    // to be: no text session id, or dated beyond the future skew (120 s by
    // default) after both the send and the clock; `1e400` is infinity to
    // SQLite.
    let soon = |seconds: f64| {
        format!(
            "{{\"session_id\": \"x\", \"timestamp\": {}}}",
            unix_now() + seconds
        )
    };
    for stored in [
        "{\"timestamp\": 3000}".to_string(),
        "{\"session_id\": \"\", \"timestamp\": 3000}".into(),
        "{\"session_id\": 7, \"timestamp\": 3000}".into(),
        "{\"session_id\": \"x\", \"timestamp\": 9999999999}".into(),
        "{\"session_id\": \"x\", \"timestamp\": 1e400}".into(),
        soon(125.0),
    ] {
        set_meta(&db, key, &stored);
        let written = send(&mut store, "[YOU] replaces a refused record", 1_000.0).unwrap();
        assert!(written.record_replaced, "{stored}");
        assert_eq!(
            store.meta_get(key).unwrap(),
            Some(record(1_000.0)),
            "{stored}"
        );
    }
    // A newer record the policy takes is kept: an integer timestamp (as the
    // the legacy tool wrote them), one within the skew ahead of the clock.
    for stored in [
        "{\"session_id\": \"x\", \"timestamp\": 3000}".to_string(),
        soon(60.0),
    ] {
        set_meta(&db, key, &stored);
        let older = send(&mut store, "[YOU] older", 2_999.5).unwrap();
        assert!(!older.record_replaced, "{stored}");
        assert_eq!(store.meta_get(key).unwrap(), Some(stored));
    }
    // The skew is the config's: with none, a record ahead of the clock is
    // replaced.
    store.set_future_skew(0);
    let written = send(&mut store, "[YOU] no skew allowed", 2_999.5).unwrap();
    assert!(written.record_replaced);
}

fn set_meta(db: &std::path::Path, key: &str, value: &str) {
    Connection::open(db)
        .unwrap()
        .execute(
            "INSERT OR REPLACE INTO state_meta (key, value) VALUES (?1, ?2)",
            [key, value],
        )
        .unwrap();
}

/// A post that fails leaves every row of every table as it was (the intent
/// written before the post is deleted again; on the early database, which
/// had no `state_meta`, an empty one stays), and its error comes back
/// unchanged; so does a post that panics. A post whose outcome is unknown
/// (a time-out after the request went out) keeps its intent, reported as
/// `unknown` with nothing recorded, until `clear_pending` forgets it.
#[test]
fn a_failed_post_changes_nothing() {
    for name in FIXTURES {
        let (_dir, db) = fixture!(name);
        let before = table_snapshot(&db);
        let mut store = HermesStore::open(&db).unwrap();
        let value = record(1_781_880_000.0);
        let w = SendWrite {
            history_session_id: "xmpp-new-session",
            ..write("[YOU] never recorded", &value, 1_781_880_000.0)
        };
        let refused = Failure::transport("ejabberd answered 500: the node is down");
        let err = store
            .send_write(&w, || Err::<(), _>(refused.clone()))
            .unwrap_err();
        assert_eq!(err, refused);
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            store.send_write(&w, || -> Result<(), Failure> { panic!("post blew up") })
        }));
        assert!(panicked.is_err());
        assert_eq!(store.pending_sends().unwrap(), vec![], "{name}");
        let after = table_snapshot(&db);
        assert_unchanged_but_an_empty_state_meta(&before, &after, name);

        let timed_out = Failure::new(
            FailureKind::UnknownOutcome,
            "no answer from ejabberd within 5 s after the request went out: the room may have \
             the message",
        );
        let err = store
            .send_write(&w, || Err::<(), _>(timed_out.clone()))
            .unwrap_err();
        assert_eq!(err.kind, FailureKind::UnknownOutcome);
        assert!(
            err.message.starts_with(&timed_out.message)
                && err.message.ends_with("`active` lists it until `clear`"),
            "{}",
            err.message
        );
        let pending = store.pending_sends().unwrap();
        assert_eq!(pending.len(), 1, "{name}: {pending:?}");
        assert_eq!(pending[0].state, PendingState::Unknown);
        assert_eq!(pending[0].agent, "mohe");
        assert_eq!(pending[0].body, "[YOU] never recorded");
        assert_eq!(pending[0].cli_session_id, SAMPLE_CLI);
        assert!(pending[0].key.starts_with("session_switch:pending:mohe:"));
        assert_eq!(store.complete_pending().unwrap(), vec![], "not delivered");
        assert_eq!(
            query_i64(
                &db,
                "SELECT count(*) FROM messages WHERE content = '[YOU] never recorded'"
            ),
            0
        );
        assert_eq!(store.clear_pending(Some("zhiwei")).unwrap(), 0);
        assert_eq!(store.clear_pending(Some("mohe")).unwrap(), 1);
        drop(store);
        assert_unchanged_but_an_empty_state_meta(&before, &table_snapshot(&db), name);
        assert_integrity(&db);
    }
}

#[test]
fn bad_send_input_is_refused_before_anything_is_written() {
    let (_dir, db) = fixture!("hermes-latest.db");
    let before = table_snapshot(&db);
    let mut store = HermesStore::open(&db).unwrap();
    let good = record(1_000.0);
    let multimodal = "\u{0}json:[{\"type\": \"text\", \"text\": \"x\"}]";
    let cases: Vec<(SendWrite<'_>, &str)> = vec![
        (write(multimodal, &good, 1_000.0), "NUL"),
        (write("[YOU] a\u{0}b", &good, 1_000.0), "NUL"),
        (write("", &good, 1_000.0), "empty history content"),
        (
            SendWrite {
                agent: "",
                ..write("[YOU] x", &good, 1_000.0)
            },
            "empty agent",
        ),
        (
            SendWrite {
                cli_session_id: "",
                ..write("[YOU] x", &good, 1_000.0)
            },
            "empty CLI session id",
        ),
        (
            SendWrite {
                record_key: "fts_stale",
                ..write("[YOU] x", &good, 1_000.0)
            },
            "\"fts_stale\"",
        ),
        (
            SendWrite {
                record_key: "active_xmpp_sender_session",
                ..write("[YOU] x", &good, 1_000.0)
            },
            "not session-switch's",
        ),
        (
            SendWrite {
                record_key: "session_switch:",
                ..write("[YOU] x", &good, 1_000.0)
            },
            "not session-switch's",
        ),
        (write("[YOU] x", "{\"session_id\": 1", 1_000.0), "numeric"),
        (
            write("[YOU] x", "{\"timestamp\": \"soon\"}", 1_000.0),
            "numeric",
        ),
        (write("[YOU] x", &good, f64::NAN), "Unix seconds"),
        (write("[YOU] x", &good, -5.0), "Unix seconds"),
    ];
    for (w, says) in cases {
        let mut posted = false;
        let err = store
            .send_write(&w, || {
                posted = true;
                Ok(())
            })
            .unwrap_err();
        assert_eq!(err.kind, FailureKind::BadInput, "{}", err.message);
        assert!(
            err.message.contains(says),
            "{:?} lacks {says:?}",
            err.message
        );
        assert!(!posted);
    }
    drop(store);
    assert_eq!(table_snapshot(&db), before);
}

/// A reader in a long transaction (a gateway loading history) holds its
/// shared lock past the send's write deadline. DELETE mode: the intent's
/// `COMMIT` needs it gone, so the send is refused as `busy` before anything
/// is posted, and nothing changes. WAL mode: readers never block a commit,
/// so the send goes through beside the open snapshot.
#[test]
fn a_reader_holding_its_snapshot_never_leaves_a_post_unrecorded() {
    for name in ["hermes-latest.db", "hermes-0.19.0.db"] {
        let (_dir, db) = fixture!(name);
        let before = table_snapshot(&db);
        let mut store = HermesStore::open(&db).unwrap();
        store.set_write_deadline(Duration::from_millis(500));
        let reader = Connection::open(&db).unwrap();
        reader
            .execute_batch("BEGIN; SELECT count(*) FROM messages;")
            .unwrap();
        let value = record(1_000.0);
        let mut posted = false;
        let result = store.send_write(&write("[YOU] beside a reader", &value, 1_000.0), || {
            posted = true;
            Ok(())
        });
        if journal_mode_of(&reader) == "delete" {
            let err = result.unwrap_err();
            assert_eq!(err.kind, FailureKind::Busy, "{name}: {}", err.message);
            assert!(
                err.message
                    .starts_with("could not record the intent to send")
                    && err.message.contains("nothing was written"),
                "{}",
                err.message
            );
            assert!(!posted, "{name}: posted although nothing could be recorded");
            // The reader was never locked out while the send retried.
            let n: i64 = reader
                .query_row("SELECT count(*) FROM sessions", [], |r| r.get(0))
                .unwrap();
            assert!(n > 0);
            reader.execute_batch("COMMIT").unwrap();
            drop(reader);
            drop(store);
            assert_eq!(table_snapshot(&db), before, "{name}");
        } else {
            let written = result.unwrap().0;
            assert!(posted);
            // The reader still sees its snapshot, without the new row.
            let n: i64 = reader
                .query_row(
                    "SELECT count(*) FROM messages WHERE id = ?1",
                    [written.message_id],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(n, 0, "{name}");
            reader.execute_batch("COMMIT").unwrap();
            assert_eq!(
                query_i64(
                    &db,
                    &format!(
                        "SELECT count(*) FROM messages WHERE id = {}",
                        written.message_id
                    )
                ),
                1,
                "{name}"
            );
            assert_eq!(pending_keys(&db), Vec::<String>::new());
        }
    }
}

/// DELETE mode, a reader whose long transaction begins *during* the post
/// and outlasts the record step's deadline: the room has the message, the
/// record cannot be written yet. The send says so (kind `store`, "do not
/// send it again"), the intent is marked `delivered` once the reader is
/// gone, and the next call writes it exactly once: the accepted post is
/// never left unrecorded and unreported.
#[test]
fn a_reader_that_starts_during_the_post_leaves_it_pending_then_completed_once() {
    let (_dir, db) = fixture!("hermes-latest.db");
    assert_eq!(journal_mode(&db), "delete");
    let mut store = HermesStore::open(&db).unwrap();
    let deadline = Duration::from_millis(800);
    store.set_write_deadline(deadline);
    let value = record(1_000.0);
    let content = "[YOU] posted while a reader read";
    let path = db.clone();
    let mut reader_thread = None;
    let err = store
        .send_write(&write(content, &value, 1_000.0), || {
            let (started, has_started) = std::sync::mpsc::channel();
            reader_thread = Some(std::thread::spawn(move || {
                let reader = Connection::open(&path).unwrap();
                reader
                    .execute_batch("BEGIN; SELECT count(*) FROM messages;")
                    .unwrap();
                started.send(()).unwrap();
                // Past the record step's deadline, within the marking's.
                std::thread::sleep(deadline + Duration::from_millis(400));
                reader.execute_batch("COMMIT").unwrap();
            }));
            has_started.recv().unwrap();
            Ok(())
        })
        .unwrap_err();
    reader_thread.unwrap().join().unwrap();
    assert_eq!(err.kind, FailureKind::Store, "{}", err.message);
    assert!(
        err.message
            .starts_with("the message was posted to the room")
            && err
                .message
                .contains("the next send, active or clear writes them")
            && err.message.ends_with("do not send it again"),
        "{}",
        err.message
    );
    let pending = store.pending_sends().unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].state, PendingState::Delivered);
    assert_eq!(pending[0].body, content);
    let count = |db: &Path| {
        Connection::open(db)
            .unwrap()
            .query_row(
                "SELECT count(*) FROM messages WHERE content = ?1",
                [content],
                |r| r.get::<_, i64>(0),
            )
            .unwrap()
    };
    assert_eq!(count(&db), 0);
    // Two callers completing at once still write it once.
    let mut other = HermesStore::open(&db).unwrap();
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| store.complete_pending().unwrap());
        let b = s.spawn(|| other.complete_pending().unwrap());
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(a.len() + b.len(), 1, "{a:?} {b:?}");
    let mut store = HermesStore::open(&db).unwrap();
    assert_eq!(store.complete_pending().unwrap(), vec![]);
    assert_eq!(count(&db), 1);
    assert_eq!(pending_keys(&db), Vec::<String>::new());
    assert_eq!(store.meta_get(&MOHE_KEY).unwrap(), Some(value));
    assert_integrity(&db);
}

/// Where the store leaves the markers of delivered sends it could not mark
/// (`store/delivered.rs`): `<db>.session-switch-delivered/`.
fn marker_folder(db: &Path) -> PathBuf {
    db.with_file_name(format!(
        "{}.session-switch-delivered",
        db.file_name().unwrap().to_string_lossy()
    ))
}

/// The room took the message, then another connection locks `state.db` past
/// the write deadline for both the record step and the intent's
/// `delivered` mark (every fixture): the send fails with the promise that
/// the next call writes it, and keeps it: a marker beside the database says
/// the room has it (the intent still reads `posting`). Once the lock is
/// gone the next call (`active`) writes it exactly once, removes the marker
/// and lists the record it wrote.
#[test]
fn a_send_the_room_took_while_the_database_stays_locked_is_still_written_once() {
    for name in FIXTURES {
        let (_dir, db) = fixture!(name);
        let markers = marker_folder(&db);
        let mut store = HermesStore::open(&db).unwrap();
        store.set_write_deadline(Duration::from_millis(300));
        let (go, started) = std::sync::mpsc::channel::<()>();
        let (locked, is_locked) = std::sync::mpsc::channel::<()>();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let holder_db = db.clone();
        let holder = std::thread::spawn(move || {
            started.recv().unwrap();
            let conn = Connection::open(&holder_db).unwrap();
            conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
            locked.send(()).unwrap();
            released.recv().unwrap();
            conn.execute_batch("ROLLBACK").unwrap();
        });
        let value = record(1_000.0);
        let err = store
            .send_write(&write("[YOU] taken while locked", &value, 1_000.0), || {
                go.send(()).unwrap();
                is_locked.recv().unwrap();
                Ok(())
            })
            .unwrap_err();
        assert_eq!(err.kind, FailureKind::Store, "{name}: {}", err.message);
        assert!(
            err.message.contains("posted to the room")
                && err
                    .message
                    .contains("the next send, active or clear writes them"),
            "{name}: {}",
            err.message
        );
        assert_eq!(std::fs::read_dir(&markers).unwrap().count(), 1, "{name}");
        release.send(()).unwrap();
        holder.join().unwrap();

        let keys = pending_keys(&db);
        assert_eq!(keys.len(), 1, "{name}: {keys:?}");
        let stored: String = Connection::open(&db)
            .unwrap()
            .query_row(
                "SELECT value FROM state_meta WHERE key = ?1",
                [&keys[0]],
                |r| r.get(0),
            )
            .unwrap();
        assert!(stored.contains("\"state\":\"posting\""), "{name}: {stored}");
        let pending = store.pending_sends().unwrap();
        assert_eq!(
            (pending[0].state, pending[0].delivered),
            (PendingState::Delivered, true),
            "{name}"
        );
        // `active` writes it, and then lists the record it wrote.
        let config = db.with_file_name("session-switch.toml");
        let text = sample::sample_config_text(
            "coregroup@conference.example.org",
            &|n| format!("{n}@example.org"),
            "",
            "",
        );
        std::fs::write(&config, text).unwrap();
        let bridge = session_switch::Bridge::open(session_switch::BridgeOptions {
            config: Some(config),
            db: Some(db.clone()),
            policy: None,
        })
        .unwrap();
        let (statuses, pending) = bridge.active_and_pending(Some("mohe")).unwrap();
        assert!(pending.is_empty(), "{name}: {pending:?}");
        assert!(
            statuses.iter().any(|s| s.key == *MOHE_KEY),
            "{name}: {statuses:?}"
        );
        assert_eq!(store.complete_pending().unwrap(), vec![], "{name}");
        assert!(pending_keys(&db).is_empty(), "{name}");
        assert!(!markers.exists(), "{name}: the marker stays");
        let rows = store.history("xmpp-mohe-v2", "mohe", None).unwrap();
        let ours: Vec<_> = rows
            .iter()
            .filter(|r| r.content == "[YOU] taken while locked")
            .collect();
        assert_eq!(ours.len(), 1, "{name}");
        assert_eq!(store.meta_get(&MOHE_KEY).unwrap(), Some(value.clone()));
        assert_integrity(&db);
    }
}

/// `clear` forgets a send kept by its marker, and the marker with it.
#[test]
fn clearing_a_send_kept_by_its_marker_removes_the_marker() {
    let (_dir, db) = fixture!("hermes-latest.db");
    let markers = marker_folder(&db);
    let mut store = HermesStore::open(&db).unwrap();
    store.set_write_deadline(Duration::from_millis(300));
    let value = record(1_000.0);
    let holder_db = db.clone();
    let err = store
        .send_write(&write("[YOU] forgotten", &value, 1_000.0), || {
            let conn = Connection::open(&holder_db).unwrap();
            conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
            // Held until the send gave up on both writes.
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(1500));
                conn.execute_batch("ROLLBACK").unwrap();
            });
            Ok(())
        })
        .unwrap_err();
    assert!(
        err.message
            .contains("the next send, active or clear writes them"),
        "{}",
        err.message
    );
    std::thread::sleep(Duration::from_millis(1600));
    assert!(markers.exists());
    assert_eq!(store.clear_pending(None).unwrap(), 1);
    assert!(!markers.exists());
    assert!(store.pending_sends().unwrap().is_empty());
}

/// `COMMIT` of the record step fails after the post succeeded (here: a
/// deferred foreign key that a trigger of the test breaks; on a real
/// database, an I/O error): a `store` failure that says the room has the
/// message and must not be sent again; nothing recorded, the send pending
/// as `delivered` (the only change: its intent in `state_meta`). While the
/// cause stays, completing it fails the same way and keeps it; once the
/// cause is gone the next call writes it, exactly once.
#[test]
fn a_failed_commit_after_the_post_is_reported_and_nothing_is_recorded() {
    let (_dir, db) = fixture!("hermes-latest.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE session_switch_sent (message_id INTEGER PRIMARY KEY, \
             agent TEXT NOT NULL, cli_session_id TEXT NOT NULL, sent_at REAL NOT NULL);
         CREATE TABLE test_parent (id INTEGER PRIMARY KEY);
         CREATE TABLE test_child (parent INTEGER \
             REFERENCES test_parent(id) DEFERRABLE INITIALLY DEFERRED);
         CREATE TRIGGER test_break_commit AFTER INSERT ON session_switch_sent \
             BEGIN INSERT INTO test_child VALUES (-1); END;",
    )
    .unwrap();
    drop(conn);
    let before = table_snapshot(&db);
    let mut store = HermesStore::open(&db).unwrap();
    let value = record(1_000.0);
    let mut posted = false;
    let err = store
        .send_write(&write("[YOU] posted", &value, 1_000.0), || {
            posted = true;
            Ok(())
        })
        .unwrap_err();
    assert!(posted);
    assert_eq!(err.kind, FailureKind::Store, "{}", err.message);
    assert!(
        err.message.contains("posted to the room")
            && err.message.contains("FOREIGN KEY constraint failed")
            && err
                .message
                .contains("the next send, active or clear writes them")
            && err.message.ends_with("do not send it again"),
        "{}",
        err.message
    );
    assert!(!err.message.contains("try again"), "{}", err.message);
    let after = table_snapshot(&db);
    let mut expected = before.clone();
    let keys = pending_keys(&db);
    assert_eq!(keys.len(), 1, "{keys:?}");
    // Only state_meta changed, by the intent's row.
    expected.remove("state_meta");
    let mut rest = after.clone();
    let meta = rest.remove("state_meta").unwrap();
    assert_eq!(rest, expected);
    assert_eq!(meta.len(), before["state_meta"].len() + 1);
    let pending = store.pending_sends().unwrap();
    assert_eq!(
        (pending[0].state, pending[0].body.as_str()),
        (PendingState::Delivered, "[YOU] posted")
    );

    let again = store.complete_pending().unwrap_err();
    assert!(
        again.message.contains("FOREIGN KEY constraint failed"),
        "{again}"
    );
    assert_eq!(
        table_snapshot(&db),
        after,
        "a failed completion changes nothing"
    );
    Connection::open(&db)
        .unwrap()
        .execute_batch("DROP TRIGGER test_break_commit")
        .unwrap();
    let written = store.complete_pending().unwrap();
    assert_eq!(written.len(), 1);
    assert_eq!(store.complete_pending().unwrap(), vec![]);
    assert_eq!(
        query_i64(
            &db,
            "SELECT count(*) FROM messages WHERE content = '[YOU] posted'"
        ),
        1
    );
    assert_eq!(
        query_i64(&db, "SELECT count(*) FROM session_switch_sent"),
        1
    );
    assert_eq!(pending_keys(&db), Vec::<String>::new());
    assert_eq!(store.meta_get(&MOHE_KEY).unwrap(), Some(value));
}

// --------------------------------------------------------------- failures

#[test]
fn a_missing_file_or_folder_is_a_clear_store_failure_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("state.db");
    let err = HermesStore::open(&missing).err().unwrap();
    assert_eq!(err.kind, FailureKind::Store);
    assert!(
        err.message.starts_with(&format!(
            "no Hermes database at {}: no such file",
            missing.display()
        )),
        "{}",
        err.message
    );
    assert!(!missing.exists());

    let in_missing = dir.path().join("nope/state.db");
    let err = HermesStore::open(&in_missing).err().unwrap();
    assert_eq!(err.kind, FailureKind::Store);
    assert!(
        err.message.contains(&format!(
            "no Hermes database at {}: the folder {} does not exist",
            in_missing.display(),
            dir.path().join("nope").display()
        )),
        "{}",
        err.message
    );
    assert!(!dir.path().join("nope").exists());

    let err = HermesStore::open(dir.path()).err().unwrap();
    assert_eq!(err.kind, FailureKind::Store);
    assert!(err.message.contains("that is a folder"), "{}", err.message);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let err = HermesStore::open(&file.join("state.db")).err().unwrap();
    assert_eq!(err.kind, FailureKind::Store);
    assert!(
        err.message
            .contains(&format!("{} is not a folder", file.display())),
        "{}",
        err.message
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}

#[test]
fn a_file_that_is_not_a_hermes_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.db");
    let bytes = b"these are notes, not SQLite\n".repeat(200);
    std::fs::write(&text, &bytes).unwrap();
    let err = HermesStore::open(&text).err().unwrap();
    assert_eq!(err.kind, FailureKind::Store);
    assert!(
        err.message.contains(&text.display().to_string())
            && err.message.contains("is not a SQLite database"),
        "{}",
        err.message
    );
    assert_eq!(std::fs::read(&text).unwrap(), bytes);

    let other = dir.path().join("other.db");
    Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('x');")
        .unwrap();
    let before = table_snapshot(&other);
    let err = HermesStore::open(&other).err().unwrap();
    assert_eq!(err.kind, FailureKind::Store);
    assert!(err.message.contains("not Hermes's"), "{}", err.message);
    assert_eq!(table_snapshot(&other), before);
}

/// The effective user id of this process (`/proc/self` belongs to it).
fn euid() -> u32 {
    std::fs::metadata("/proc/self").unwrap().uid()
}

/// `store_worker ARGS…` as the unprivileged user 65534 when we are root
/// (root ignores file modes), else as ourselves.
fn worker_as_other_user(args: &[&std::ffi::OsStr]) -> std::process::Output {
    let mut cmd = if euid() == 0 {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", WORKER]);
        c
    } else {
        Command::new(WORKER)
    };
    cmd.args(args).output().expect("run store_worker")
}

/// A 0444 copy in a 0555 folder, used by another user: the send is refused
/// with a `store` failure that says the file is read-only, and the file
/// keeps every row. A DELETE-mode file can still be read; a WAL-mode one
/// cannot (SQLite must create its -shm file), and the message says why.
#[test]
fn a_read_only_file_cannot_be_written_and_stays_as_it_was() {
    for (name, readable) in [("hermes-latest.db", true), ("hermes-0.19.0.db", false)] {
        let (dir, db) = fixture!(name);
        // The reference dump comes from a second copy: reading this one as
        // root first would leave root's -shm file beside a WAL database.
        let (_twin_dir, twin) = fixture!(name);
        let before = table_snapshot(&twin);
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
        let out = worker_as_other_user(&["try-send".as_ref(), db.as_os_str()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let outcome: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(outcome["ok"], false, "{name}: {outcome}");
        assert_eq!(outcome["kind"], "store", "{name}: {outcome}");
        let message = outcome["message"].as_str().unwrap();
        let expected = format!("{} is read-only for this process", db.display());
        assert!(message.contains(&expected), "{name}: {message}");
        let read = worker_as_other_user(&["read".as_ref(), db.as_os_str()]);
        if readable {
            assert!(
                read.status.success(),
                "{}",
                String::from_utf8_lossy(&read.stderr)
            );
            assert_eq!(String::from_utf8_lossy(&read.stdout), "8\n");
            // Refused at the first of the send's transactions, the intent.
            assert!(
                message.starts_with("could not record the intent to send"),
                "{message}"
            );
        } else {
            assert!(!read.status.success());
            let err = String::from_utf8_lossy(&read.stderr);
            assert!(
                err.contains(&expected) && err.contains("-wal and -shm"),
                "{err}"
            );
        }
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(table_snapshot(&db), before, "{name}");
    }
}

/// Another connection holds `BEGIN EXCLUSIVE` past the send's write
/// deadline: kind `busy` after the deadline (the brief attempts retried
/// whole until then, not longer), the post is never made, nothing is
/// written.
#[test]
fn a_lock_held_past_the_timeout_is_busy_and_writes_nothing() {
    for name in ["hermes-latest.db", "hermes-0.19.0.db"] {
        let (_dir, db) = fixture!(name);
        let before = table_snapshot(&db);
        let mut store = HermesStore::open(&db).unwrap();
        store.set_busy_timeout(Duration::from_millis(150)).unwrap();
        let deadline = Duration::from_millis(700);
        store.set_write_deadline(deadline);
        let holder = Connection::open(&db).unwrap();
        holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
        let value = record(1_000.0);
        let mut posted = false;
        let started = Instant::now();
        let err = store
            .send_write(&write("[YOU] blocked", &value, 1_000.0), || {
                posted = true;
                Ok(())
            })
            .unwrap_err();
        let waited = started.elapsed();
        assert_eq!(err.kind, FailureKind::Busy, "{name}: {}", err.message);
        assert!(
            err.message
                .starts_with("could not record the intent to send")
                && err.message.contains("stayed locked by other connections")
                && err
                    .message
                    .contains("brief attempts); nothing was written, try again"),
            "{}",
            err.message
        );
        assert!(!posted);
        assert!(waited >= deadline, "{name}: {waited:?}");
        // At most one brief attempt (100 ms busy timeout) past the deadline.
        assert!(
            waited < deadline + Duration::from_millis(600),
            "{name}: {waited:?}"
        );
        let err = store.meta_delete("session_switch:active:mohe").unwrap_err();
        assert_eq!(err.kind, FailureKind::Busy);
        if journal_mode_of(&holder) == "delete" {
            // DELETE mode: an exclusive lock keeps readers out too.
            let err = store.history("xmpp-mohe-v2", "mohe", None).unwrap_err();
            assert_eq!(err.kind, FailureKind::Busy, "{}", err.message);
        } else {
            // WAL mode: readers see the last commit while a writer works.
            assert_eq!(
                store.history("xmpp-mohe-v2", "mohe", None).unwrap().len(),
                8
            );
        }
        holder.execute_batch("ROLLBACK").unwrap();
        drop(holder);
        drop(store);
        assert_eq!(table_snapshot(&db), before, "{name}");
    }
}

#[test]
fn meta_delete_refuses_keys_that_are_not_ours() {
    let (_dir, db) = fixture!("hermes-latest.db");
    let before = table_snapshot(&db);
    let store = HermesStore::open(&db).unwrap();
    for key in [
        "store_instance_id",
        "db_file_generation",
        "fts_stale",
        "last_auto_prune",
        "session_switch:",
        "Session_Switch:active:mohe",
        "sessionXswitch:active:mohe",
        "",
    ] {
        let err = store.meta_delete(key).unwrap_err();
        assert_eq!(err.kind, FailureKind::BadInput, "{key:?}");
        assert!(err.message.contains(&format!("{key:?}")), "{}", err.message);
    }
    drop(store);
    assert_eq!(table_snapshot(&db), before);
}

#[test]
fn meta_delete_removes_our_keys_and_the_legacy_key() {
    let (_dir, db) = fixture!("hermes-latest.db");
    let mut store = HermesStore::open(&db).unwrap();
    send(&mut store, "[YOU] x", 1_000.0).unwrap();
    assert!(store.meta_delete("session_switch:active:mohe").unwrap());
    assert!(!store.meta_delete("session_switch:active:mohe").unwrap());
    assert_eq!(store.meta_get("session_switch:active:mohe").unwrap(), None);
    assert!(store.meta_delete("active_xmpp_sender_session").unwrap());
    assert_eq!(store.meta_get("active_xmpp_sender_session").unwrap(), None);
    // Hermes's own keys are still there.
    assert!(store.meta_get("store_instance_id").unwrap().is_some());
    assert!(store.meta_get("db_file_generation").unwrap().is_some());
}

// -------------------------------------------------------------------- CJK

/// Adds a trigger named like Hermes's CJK ones; SQLite resolves its body
/// (and the missing `messages_fts_cjk`) only when it fires.
fn add_cjk_trigger(db: &Path) {
    Connection::open(db)
        .unwrap()
        .execute_batch(
            "CREATE TRIGGER messages_fts_cjk_insert AFTER INSERT ON messages BEGIN \
             INSERT INTO messages_fts_cjk (rowid, content) VALUES (new.id, new.content); END;",
        )
        .unwrap();
}

fn try_send_with_env(db: &Path, env: &[(&str, &Path)]) -> serde_json::Value {
    let mut cmd = Command::new(WORKER);
    cmd.env_remove("HERMES_FTS5_CJK_SO")
        .env_remove("HERMES_HOME");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.arg("try-send").arg(db).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn cjk_triggers_without_the_tokenizer_refuse_the_write_and_stay() {
    let (dir, db) = fixture!("hermes-latest.db");
    add_cjk_trigger(&db);
    let before = table_snapshot(&db);

    let home = dir.path().join("hermes-home");
    let outcome = try_send_with_env(&db, &[("HERMES_HOME", &home)]);
    assert_eq!(outcome["ok"], false);
    assert_eq!(outcome["kind"], "store");
    let message = outcome["message"].as_str().unwrap();
    let default_so = home.join("lib/libfts5_cjk.so");
    for part in [
        "messages_fts_cjk",
        &default_so.display().to_string(),
        "does not exist",
        "HERMES_FTS5_CJK_SO",
        "nothing was written",
    ] {
        assert!(message.contains(part), "{message:?} lacks {part:?}");
    }

    let not_a_library = dir.path().join("libfts5_cjk.so");
    std::fs::write(&not_a_library, "not an ELF file").unwrap();
    let outcome = try_send_with_env(
        &db,
        &[
            ("HERMES_FTS5_CJK_SO", &not_a_library),
            ("HERMES_HOME", &home),
        ],
    );
    assert_eq!(outcome["kind"], "store");
    let message = outcome["message"].as_str().unwrap();
    assert!(
        message.contains("failed to load")
            && message.contains(&not_a_library.display().to_string()),
        "{message}"
    );
    assert_eq!(
        table_snapshot(&db),
        before,
        "the triggers and the rows stay as they were"
    );
}

/// A stand-in for Hermes's `libfts5_cjk.so`: registers the tokenizer
/// name `cjk_unicode61` as FTS5's own `unicode61` (Hermes's segments CJK
/// text; the name and the loading are what the store depends on).
const CJK_STAND_IN_C: &str = r#"
#include "sqlite3ext.h"
SQLITE_EXTENSION_INIT1

int sqlite3_extension_init(sqlite3 *db, char **err, const sqlite3_api_routines *api) {
    SQLITE_EXTENSION_INIT2(api);
    fts5_api *fts5 = 0;
    sqlite3_stmt *stmt = 0;
    if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &stmt, 0) != SQLITE_OK) return SQLITE_ERROR;
    sqlite3_bind_pointer(stmt, 1, (void *)&fts5, "fts5_api_ptr", 0);
    sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    if (!fts5 || fts5->iVersion < 3) return SQLITE_ERROR;
    void *user = 0;
    fts5_tokenizer_v2 *tok = 0;
    int rc = fts5->xFindTokenizer_v2(fts5, "unicode61", &user, &tok);
    if (rc != SQLITE_OK) return rc;
    return fts5->xCreateTokenizer_v2(fts5, "cjk_unicode61", user, tok, 0);
}
"#;

/// `sqlite3ext.h` of the SQLite that rusqlite bundles (the registry copy of
/// `libsqlite3-sys` whose `sqlite3.h` has this SQLite version).
fn sqlite_ext_header_dir() -> PathBuf {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cargo"));
    let version = format!("\"{}\"", rusqlite::version());
    let registry = cargo_home.join("registry/src");
    for index in std::fs::read_dir(&registry).unwrap().flatten() {
        for krate in std::fs::read_dir(index.path()).unwrap().flatten() {
            let dir = krate.path().join("sqlite3");
            let is_sys = krate
                .file_name()
                .to_string_lossy()
                .starts_with("libsqlite3-sys-");
            if is_sys
                && dir.join("sqlite3ext.h").is_file()
                && std::fs::read_to_string(dir.join("sqlite3.h")).is_ok_and(|h| {
                    h.lines()
                        .any(|l| l.starts_with("#define SQLITE_VERSION ") && l.contains(&version))
                })
            {
                return dir;
            }
        }
    }
    panic!(
        "no libsqlite3-sys source with SQLite {version} under {}: set CARGO_HOME",
        registry.display()
    );
}

/// Build the stand-in tokenizer extension at `so` with the system C
/// compiler (`cc`, which Rust needs as its linker anyway).
fn build_cjk_stand_in(so: &Path) {
    let src = so.with_extension("c");
    std::fs::write(&src, CJK_STAND_IN_C).unwrap();
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-I"])
        .arg(sqlite_ext_header_dir())
        .arg("-o")
        .arg(so)
        .arg(&src)
        .output()
        .expect("run cc");
    assert!(
        out.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Hermes's CJK index as Hermes adds it when the extension loads: an
/// external-content FTS5 table with tokenizer `cjk_unicode61` and its
/// triggers, built from the rows already there.
fn add_cjk_index(db: &Path, so: &Path) {
    let conn = Connection::open(db).unwrap();
    // SAFETY: the stand-in built above, loaded into a test connection.
    unsafe {
        let _guard = rusqlite::LoadExtensionGuard::new(&conn).unwrap();
        conn.load_extension(so, None::<&str>).unwrap();
    }
    conn.execute_batch(
        "CREATE VIRTUAL TABLE messages_fts_cjk USING fts5(content, content='messages', \
             content_rowid='id', tokenize='cjk_unicode61');
         CREATE TRIGGER messages_fts_cjk_insert AFTER INSERT ON messages BEGIN
             INSERT INTO messages_fts_cjk (rowid, content) VALUES (new.id, new.content); END;
         CREATE TRIGGER messages_fts_cjk_delete AFTER DELETE ON messages BEGIN
             INSERT INTO messages_fts_cjk (messages_fts_cjk, rowid, content)
             VALUES ('delete', old.id, old.content); END;
         INSERT INTO messages_fts_cjk (messages_fts_cjk) VALUES ('rebuild');",
    )
    .unwrap();
}

/// With the tokenizer extension found (through `HERMES_FTS5_CJK_SO`, then
/// through `$HERMES_HOME/lib/`), the send goes through and Hermes's CJK
/// index holds the new row.
#[test]
fn cjk_triggers_with_the_tokenizer_extension_are_kept_up_to_date() {
    let (dir, db) = fixture!("hermes-latest.db");
    let home = dir.path().join("hermes-home");
    std::fs::create_dir_all(home.join("lib")).unwrap();
    let so = home.join("lib/libfts5_cjk.so");
    build_cjk_stand_in(&so);
    add_cjk_index(&db, &so);
    // Without the extension, Hermes's own kind of INSERT fails: the reason
    // the store loads it.
    let plain = Connection::open(&db).unwrap();
    let err = plain
        .execute(
            "INSERT INTO messages (session_id, role, content, timestamp) \
             VALUES ('xmpp-zhiwei', 'user', 'x', 1.0)",
            [],
        )
        .unwrap_err();
    assert!(err.to_string().contains("cjk_unicode61"), "{err}");
    drop(plain);

    let elsewhere = dir.path().join("elsewhere");
    let first = try_send_with_env(
        &db,
        &[("HERMES_FTS5_CJK_SO", &so), ("HERMES_HOME", &elsewhere)],
    );
    assert_eq!(first["ok"], true, "{first}");
    let second = try_send_with_env(&db, &[("HERMES_HOME", &home)]);
    assert_eq!(second["ok"], true, "{second}");

    let conn = Connection::open(&db).unwrap();
    // SAFETY: as in add_cjk_index.
    unsafe {
        let _guard = rusqlite::LoadExtensionGuard::new(&conn).unwrap();
        conn.load_extension(&so, None::<&str>).unwrap();
    }
    let hits: Vec<i64> = conn
        .prepare("SELECT rowid FROM messages_fts_cjk WHERE messages_fts_cjk MATCH 'another' ORDER BY rowid")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        hits,
        [
            first["message_id"].as_i64().unwrap(),
            second["message_id"].as_i64().unwrap()
        ]
    );
    for t in ["messages_fts", "messages_fts_trigram", "messages_fts_cjk"] {
        conn.execute(
            &format!("INSERT INTO {t} ({t}, rank) VALUES ('integrity-check', 1)"),
            [],
        )
        .unwrap_or_else(|e| panic!("{t}: {e}"));
    }
    let triggers: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name GLOB 'messages_fts_cjk*'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(triggers, 2);
}

#[test]
fn default_paths_follow_hermes_home() {
    let home = Path::new("/srv/agents/mohe/.hermes");
    let out = Command::new(WORKER)
        .arg("paths")
        .env_remove("HERMES_FTS5_CJK_SO")
        .env("HERMES_HOME", home)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "/srv/agents/mohe/.hermes/state.db\n/srv/agents/mohe/.hermes/lib/libfts5_cjk.so\n"
    );
    let out = Command::new(WORKER)
        .arg("paths")
        .env_remove("HERMES_HOME")
        .env("HOME", "/home/someone")
        .env("HERMES_FTS5_CJK_SO", "/opt/cjk.so")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "/home/someone/.hermes/state.db\n/opt/cjk.so\n"
    );
}

// ---------------------------------------------------------------- init-db

fn schema(path: &Path) -> Vec<(String, String, String, Option<String>)> {
    let conn = Connection::open(path).unwrap();
    let mut rows: Vec<_> = conn
        .prepare("SELECT type, name, tbl_name, sql FROM sqlite_master")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    rows.sort();
    rows
}

#[test]
fn init_creates_hermes_v31_schema_in_delete_mode() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("new/.hermes/state.db");
    let mut store = HermesStore::init(&db).unwrap();
    assert_eq!(store.path(), db);
    assert_eq!(
        std::fs::metadata(&db).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // The same schema, statement for statement, as the file current Hermes
    // made (read from a copy: fixtures are never opened in place).
    let (_fdir, latest) = fixture!("hermes-latest.db");
    assert_eq!(schema(&db), schema(&latest));
    assert_eq!(journal_mode(&db), "delete");
    assert_eq!(query_i64(&db, "SELECT version FROM schema_version"), 31);
    assert_eq!(query_i64(&db, "SELECT count(*) FROM schema_version"), 1);
    assert_eq!(query_i64(&db, "SELECT count(*) FROM state_meta"), 0);
    assert_eq!(query_i64(&db, "PRAGMA foreign_keys"), 1);
    assert!(store.meta_list_ours().unwrap().is_empty());

    let value = record(1_781_880_000.0);
    let (written, ()) = store
        .send_write(
            &write(&format!("[YOU] {TOKEN}"), &value, 1_781_880_000.0),
            || Ok(()),
        )
        .unwrap();
    assert_eq!(written.message_id, 1);
    drop(store);
    assert_integrity(&db);
    let conn = Connection::open(&db).unwrap();
    let uid: Option<String> = conn
        .query_row("SELECT message_uid FROM messages WHERE id = 1", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(uid.map(|u| u.len()), Some(32), "Hermes's v31 trigger ran");
}

#[test]
fn init_never_overwrites_a_file_and_accepts_an_empty_one() {
    let (dir, db) = fixture!("hermes-0.19.0.db");
    let before = std::fs::read(&db).unwrap();
    let err = HermesStore::init(&db).err().unwrap();
    assert_eq!(err.kind, FailureKind::BadInput);
    assert!(
        err.message.contains("exists and is not empty") && err.message.contains("move it away"),
        "{}",
        err.message
    );
    assert_eq!(std::fs::read(&db).unwrap(), before);

    let err = HermesStore::init(dir.path()).err().unwrap();
    assert_eq!(err.kind, FailureKind::BadInput);
    assert!(err.message.contains("that is a folder"), "{}", err.message);

    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let store = HermesStore::init(&empty).unwrap();
    assert!(store.session_exists("anything").is_ok_and(|e| !e));
    drop(store);
    assert_eq!(query_i64(&empty, "SELECT version FROM schema_version"), 31);
}

#[test]
fn init_where_no_folder_can_be_made_fails_and_changes_nothing() {
    // A "folder" that is a plain file cannot be created, for root too.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let err = HermesStore::init(&file.join("state.db")).err().unwrap();
    assert_eq!(err.kind, FailureKind::Store);
    assert!(
        err.message.contains("cannot create the folder"),
        "{}",
        err.message
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

/// `begin_read` … `end_read`: every read in between sees one state of the
/// file, even while another connection commits (WAL: the writer goes on);
/// after `end_read` the new state shows, and the connection is back in
/// autocommit (a write transaction can start).
#[test]
fn a_read_snapshot_sees_one_state_and_ends_cleanly() {
    let Some((_dir, db)) = fixture_copy("hermes-0.19.0.db") else {
        return;
    };
    assert_eq!(journal_mode(&db), "wal");
    let key = "session_switch:active:mohe";
    let store = HermesStore::open(&db).unwrap();
    let other = Connection::open(&db).unwrap();
    other
        .execute(
            "INSERT INTO state_meta (key, value) VALUES (?1, 'before')",
            [key],
        )
        .unwrap();

    assert!(store.begin_read().unwrap(), "a snapshot opens");
    assert!(!store.begin_read().unwrap(), "none inside another");
    assert_eq!(store.meta_get(key).unwrap().as_deref(), Some("before"));
    other
        .execute(
            "UPDATE state_meta SET value = 'after' WHERE key = ?1",
            [key],
        )
        .unwrap();
    other
        .execute("DELETE FROM sessions WHERE id = 'xmpp-zhiwei' AND 0", [])
        .unwrap();
    assert_eq!(store.meta_get(key).unwrap().as_deref(), Some("before"));
    store.end_read().unwrap();
    assert_eq!(store.meta_get(key).unwrap().as_deref(), Some("after"));
    store.end_read().unwrap(); // outside a transaction: nothing to do
    assert!(
        store.meta_delete(key).unwrap(),
        "a write transaction starts"
    );
    assert_eq!(store.meta_get(key).unwrap(), None);
}

/// Put the test's own copy `db` in WAL or DELETE mode.
fn set_journal_mode(db: &Path, wal: bool) {
    let mode = if wal { "wal" } else { "delete" };
    let conn = Connection::open(db).unwrap();
    conn.pragma_update(None, "journal_mode", mode).unwrap();
    assert_eq!(journal_mode_of(&conn), mode);
}

/// A `state_meta` another connection creates later is seen by the next
/// read, in both journal modes.
#[test]
fn a_state_meta_created_later_is_seen() {
    for wal in [false, true] {
        let Some((_dir, db)) = fixture_copy("hermes-early.db") else {
            return;
        };
        set_journal_mode(&db, wal);
        let key = "session_switch:active:mohe";
        let store = HermesStore::open(&db).unwrap();
        assert_eq!(store.meta_get(key).unwrap(), None, "wal: {wal}");
        // Asked twice with nothing written: missing both times.
        assert_eq!(store.meta_get(key).unwrap(), None, "wal: {wal}");
        assert_eq!(store.meta_list_ours().unwrap(), vec![]);
        let other = Connection::open(&db).unwrap();
        other
            .execute_batch(
                "CREATE TABLE state_meta (key TEXT PRIMARY KEY, value TEXT);
                 INSERT INTO state_meta VALUES ('session_switch:active:mohe', 'v1');",
            )
            .unwrap();
        assert_eq!(
            store.meta_get(key).unwrap().as_deref(),
            Some("v1"),
            "wal: {wal}"
        );
        other
            .execute("UPDATE state_meta SET value = 'v2' WHERE key = ?1", [key])
            .unwrap();
        assert_eq!(
            store.meta_get(key).unwrap().as_deref(),
            Some("v2"),
            "wal: {wal}"
        );
    }
}

/// The list of sent rows (`session_switch_sent`) missing, then made
/// by another connection's send, then by this connection's own: each time
/// the rows are read, never a stale "no such table".
#[test]
fn the_sent_rows_table_created_later_is_seen_by_a_store_that_saw_it_missing() {
    for wal in [false, true] {
        let (_dir, db) = fixture!("hermes-latest.db");
        set_journal_mode(&db, wal);
        let mut reader = HermesStore::open(&db).unwrap();
        assert_eq!(reader.sent_rows("xmpp-mohe-v2", "mohe").unwrap(), vec![]);
        assert_eq!(reader.sent_rows("xmpp-mohe-v2", "mohe").unwrap(), vec![]);
        let mut writer = HermesStore::open(&db).unwrap();
        let first = send(&mut writer, "[YOU] from the writer", 1_800_000_000.0).unwrap();
        let session = first.history_session_id.as_str();
        let rows = reader.sent_rows(session, "mohe").unwrap();
        assert_eq!(rows.len(), 1, "wal: {wal}: {rows:?}");
        assert_eq!(rows[0].message_id, first.message_id);
        let second = send(&mut reader, "[YOU] from the reader", 1_800_000_001.0).unwrap();
        let ids: Vec<i64> = reader
            .sent_rows(session, "mohe")
            .unwrap()
            .into_iter()
            .map(|row| row.message_id)
            .collect();
        assert_eq!(ids, vec![first.message_id, second.message_id], "wal: {wal}");
    }
}

/// The sent rows are read by walking their own list, on both schemas:
/// SQLite's own choice walked every row of the session
/// (`HermesStore::sent_rows`; the figures are on docs/src/performance.md).
#[test]
fn the_sent_rows_are_read_from_their_own_list_not_the_sessions_rows() {
    for name in ["hermes-0.19.0.db", "hermes-latest.db"] {
        let (_dir, db) = fixture!(name);
        let mut store = HermesStore::open(&db).unwrap();
        let sent = send(&mut store, "[YOU] planned", 1_800_000_000.0).unwrap();
        let conn = Connection::open(&db).unwrap();
        let plan: Vec<String> = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {SENT_ROWS}"))
            .unwrap()
            .query_map([sent.history_session_id.as_str(), "mohe"], |row| row.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let outer = plan[0].split_whitespace().nth(1);
        assert_eq!(outer, Some("s"), "{name}: the outer loop of {plan:?}");
        assert!(
            plan.iter().all(|step| !step.contains("TEMP B-TREE")),
            "{name}: {plan:?}"
        );
        let rows = store.sent_rows(&sent.history_session_id, "mohe").unwrap();
        assert_eq!(rows.len(), 1, "{name}: {rows:?}");
        assert_eq!(rows[0].message_id, sent.message_id);
    }
}
