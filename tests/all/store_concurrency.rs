//! The store under a running Hermes gateway, with separate processes
//! (`store_worker`): a gateway writer keeps the database open and writes
//! every 10 ms (its own `BEGIN IMMEDIATE`, plain INSERT, commit,
//! Hermes's retry), while 50 send_writes and 50 reads run in 100 other
//! processes. All succeed, nothing is lost, the journal mode stays.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use session_switch_tests::sample::unix_now;
use session_switch_tests::{fixture_copy, journal_mode_of};

const WORKER: &str = env!("CARGO_BIN_EXE_store_worker");
const SENDS: u32 = 50;
const READS: u32 = 50;
/// Timestamps of the sends: `BASE + index`, so the last index is newest.
const BASE: f64 = 1_781_900_000.0;
/// Rows the gateway must write while the workers run (in one of two
/// bursts). With the sends' `BEGIN` polling through SQLite's busy handler
/// the gateway starved (a handful of rows); with our own jittered pauses
/// it gets several times this floor.
const MIN_GATEWAY_ROWS: i64 = 10;

fn query<T: rusqlite::types::FromSql>(conn: &Connection, sql: &str) -> T {
    conn.query_row(sql, [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn wait_ok(name: &str, child: Child) -> String {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// [`run_once`] on a fresh copy; a second time when the gateway was
/// descheduled for the whole burst. On a loaded machine (other tests spawn
/// Erlang VMs beside this one) the gateway process can get no CPU while 50
/// sends finish in under a second; the interleaving must show in one of two
/// bursts.
fn run(fixture: &str, mode: &str) {
    // The runs share two cores: one heavy test at a time keeps them honest.
    let _heavy = session_switch_tests::heavy();
    let mut during = Vec::new();
    for _ in 0..2 {
        let Some(rows) = run_once(fixture, mode) else {
            return;
        };
        if rows >= MIN_GATEWAY_ROWS {
            return;
        }
        during.push(rows);
    }
    panic!("the gateway wrote only {during:?} rows while the workers ran, in two bursts");
}

/// One burst of sends and reads beside a Hermes-like gateway writer; every
/// check but the interleaving, whose count it returns (rows the gateway
/// wrote while the workers ran). `None` without the fixtures.
fn run_once(fixture: &str, mode: &str) -> Option<i64> {
    let (dir, db) = fixture_copy(fixture)?;
    let conn = Connection::open(&db).unwrap();
    assert_eq!(journal_mode_of(&conn), mode);
    let messages_before: i64 = query(&conn, "SELECT count(*) FROM messages");
    let mohe_before: i64 = query(
        &conn,
        "SELECT message_count FROM sessions WHERE id = 'xmpp-mohe-v2'",
    );
    let zhiwei_before: i64 = query(
        &conn,
        "SELECT message_count FROM sessions WHERE id = 'xmpp-zhiwei'",
    );
    drop(conn);

    let stop = dir.path().join("stop");
    let mut gateway = Command::new(WORKER)
        .args(["gateway".as_ref(), db.as_os_str(), stop.as_os_str()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut gateway_out = BufReader::new(gateway.stdout.take().unwrap());
    let mut ready = String::new();
    gateway_out.read_line(&mut ready).unwrap();
    assert_eq!(ready, "ready\n");

    let started = Instant::now();
    let window_start = unix_now();
    let spawn = |args: &[&str]| {
        Command::new(WORKER)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let db_arg = db.to_str().unwrap();
    let base = BASE.to_string();
    let mut children = Vec::new();
    for i in 0..SENDS.max(READS) {
        // Interleaved, and the sends in reverse index order half the time,
        // so arrival order and timestamp order disagree.
        if i < SENDS {
            let index = if i % 2 == 0 { i } else { SENDS - i };
            let index = index.to_string();
            children.push((
                format!("send {index}"),
                spawn(&["send", db_arg, &index, &base]),
            ));
        }
        if i < READS {
            children.push((format!("read {i}"), spawn(&["read", db_arg])));
        }
    }
    let mut sent_ids = Vec::new();
    for (name, child) in children {
        let out = wait_ok(&name, child);
        if name.starts_with("send") {
            sent_ids.push(out.trim().parse::<i64>().unwrap());
        }
    }
    let elapsed = started.elapsed();
    let window_end = unix_now();

    std::fs::write(&stop, b"").unwrap();
    let mut rest = String::new();
    gateway_out.read_to_string(&mut rest).unwrap();
    let status = gateway.wait().unwrap();
    let mut gateway_err = String::new();
    gateway
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut gateway_err)
        .unwrap();
    assert!(status.success(), "the gateway writer failed: {gateway_err}");
    let gateway_rows: i64 = rest.trim().parse().unwrap();
    eprintln!(
        "{fixture} ({mode}): {SENDS} sends + {READS} reads in {:.2} s while the gateway wrote \
         {gateway_rows} rows",
        elapsed.as_secs_f64()
    );

    // The point: the gateway kept writing *while* the workers ran (its rows
    // carry their write time), however fast the workers were.
    let conn = Connection::open(&db).unwrap();
    let during: i64 = conn
        .query_row(
            "SELECT count(*) FROM messages WHERE content LIKE 'gateway write %' \
             AND timestamp BETWEEN ?1 AND ?2",
            [window_start, window_end],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(journal_mode_of(&conn), mode);
    let total: i64 = query(&conn, "SELECT count(*) FROM messages");
    assert_eq!(total, messages_before + i64::from(SENDS) + gateway_rows);
    // Every gateway row is there once, numbered 0..n.
    let gateway_numbers: Vec<i64> = conn
        .prepare(
            "SELECT CAST(substr(content, 15) AS INTEGER) FROM messages \
             WHERE content LIKE 'gateway write %' ORDER BY id",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(gateway_numbers, (0..gateway_rows).collect::<Vec<_>>());
    // Every send is there once, with its provenance row.
    let mut sends: Vec<(i64, String)> = conn
        .prepare(
            "SELECT m.id, m.content FROM messages m JOIN session_switch_sent s \
             ON s.message_id = m.id WHERE s.agent = 'mohe' ORDER BY m.content",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(sends.len(), SENDS as usize);
    let mut contents: Vec<String> = sends.iter().map(|(_, c)| c.clone()).collect();
    contents.dedup();
    assert_eq!(contents.len(), SENDS as usize);
    sends.sort();
    sent_ids.sort();
    assert_eq!(
        sends.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        sent_ids
    );
    assert_eq!(
        query::<i64>(&conn, "SELECT count(*) FROM session_switch_sent"),
        i64::from(SENDS)
    );
    assert_eq!(
        query::<i64>(
            &conn,
            "SELECT message_count FROM sessions WHERE id = 'xmpp-mohe-v2'"
        ),
        mohe_before + i64::from(SENDS)
    );
    assert_eq!(
        query::<i64>(
            &conn,
            "SELECT message_count FROM sessions WHERE id = 'xmpp-zhiwei'"
        ),
        zhiwei_before + gateway_rows
    );
    // The newest timestamp won, whatever the arrival order.
    let record: String = query(
        &conn,
        "SELECT value FROM state_meta WHERE key = 'session_switch:active:mohe'",
    );
    let record: serde_json::Value = serde_json::from_str(&record).unwrap();
    assert_eq!(record["timestamp"], BASE + f64::from(SENDS - 1));
    assert_eq!(query::<String>(&conn, "PRAGMA integrity_check"), "ok");
    for t in ["messages_fts", "messages_fts_trigram"] {
        conn.execute(
            &format!("INSERT INTO {t} ({t}, rank) VALUES ('integrity-check', 1)"),
            [],
        )
        .unwrap_or_else(|e| panic!("{t}: {e}"));
    }
    assert!(
        elapsed < Duration::from_secs(30),
        "took {elapsed:?}: something waited on a lock far too long"
    );
    drop(conn);
    assert!(Path::new(&db).exists());
    Some(during)
}

#[test]
fn sends_and_reads_beside_a_gateway_writer_wal() {
    run("hermes-0.19.0.db", "wal");
}

#[test]
fn sends_and_reads_beside_a_gateway_writer_delete() {
    run("hermes-latest.db", "delete");
}
