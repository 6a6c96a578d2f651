//! A separate process on a Hermes `state.db`, for `tests/all/store.rs` and
//! `tests/all/store_concurrency.rs`: what another user, another CLI call or a
//! running Hermes gateway does to the same file.
//!
//! ```text
//! store_worker try-send DB            one send_write; prints the outcome as JSON, exit 0
//! store_worker send DB INDEX BASE_TS  one send_write at BASE_TS + INDEX; exit 1 on failure
//! store_worker read DB                every read of HermesStore once; exit 1 on failure
//! store_worker gateway DB STOP_FILE   Hermes-like writer until STOP_FILE exists
//! store_worker paths                  HermesStore::default_path() and the CJK extension path
//! ```
//!
//! The arguments are fixed positions chosen by the tests, not a user CLI.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::Connection;
use serde_json::json;
use session_switch_contract::keys::record_key;
use session_switch_store::{HermesStore, SendWrite, cjk_extension_path};
use session_switch_tests::sample::unix_now;

/// The agent, sessions and content every worker send uses.
const AGENT: &str = "mohe";
const XMPP_SESSION: &str = "xmpp-mohe-v2";
const CLI_SESSION: &str = "20260619_190821_7c0afe";
/// The session the gateway writer appends to (an existing fixture session).
const GATEWAY_SESSION: &str = "xmpp-zhiwei";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        ["try-send", db] => {
            try_send(Path::new(db));
            Ok(())
        }
        ["send", db, index, base] => send(Path::new(db), index, base),
        ["read", db] => read(Path::new(db)),
        ["gateway", db, stop] => gateway(Path::new(db), Path::new(stop)),
        ["paths"] => {
            println!("{}", HermesStore::default_path().display());
            println!("{}", cjk_extension_path().display());
            Ok(())
        }
        _ => Err(format!(
            "store_worker: bad arguments {args:?} (see the file's doc)"
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

fn record(timestamp: f64) -> String {
    session_switch_tests::sample::record(CLI_SESSION, timestamp, Some(AGENT))
}

/// One send with a post that succeeds; prints `{"ok": true, "message_id"}`
/// or `{"ok": false, "kind", "message"}` (open failures included).
fn try_send(db: &Path) {
    let timestamp = unix_now();
    let value = record(timestamp);
    let outcome = HermesStore::open(db).and_then(|mut store| {
        let write = SendWrite {
            agent: AGENT,
            history_session_id: XMPP_SESSION,
            history_content: "[YOU] a send from another process",
            cli_session_id: CLI_SESSION,
            record_key: &record_key(AGENT),
            record_value: &value,
            timestamp,
        };
        store.send_write(&write, || Ok(()))
    });
    let line = match outcome {
        Ok((written, ())) => json!({"ok": true, "message_id": written.message_id}),
        Err(f) => json!({"ok": false, "kind": f.kind.as_str(), "message": f.message}),
    };
    println!("{line}");
}

/// Send number `index` at `base + index` seconds, content
/// `[YOU] concurrent send <index>`.
fn send(db: &Path, index: &str, base: &str) -> Result<(), String> {
    let index: u32 = index.parse().map_err(|e| format!("index {index}: {e}"))?;
    let base: f64 = base.parse().map_err(|e| format!("base {base}: {e}"))?;
    let timestamp = base + f64::from(index);
    let value = record(timestamp);
    let content = format!("[YOU] concurrent send {index}");
    let mut store = HermesStore::open(db).map_err(|f| f.message)?;
    let write = SendWrite {
        agent: AGENT,
        history_session_id: XMPP_SESSION,
        history_content: &content,
        cli_session_id: CLI_SESSION,
        record_key: &record_key(AGENT),
        record_value: &value,
        timestamp,
    };
    let (written, ()) = store
        .send_write(&write, || Ok(()))
        .map_err(|f| format!("send {index}: {} ({})", f.message, f.kind.as_str()))?;
    println!("{}", written.message_id);
    Ok(())
}

/// Every read a gateway or the CLI makes, once.
fn read(db: &Path) -> Result<(), String> {
    let store = HermesStore::open(db).map_err(|f| f.message)?;
    let rows = store
        .history(XMPP_SESSION, AGENT, None)
        .map_err(|f| f.message)?;
    if rows.len() < 8 {
        return Err(format!("history of {XMPP_SESSION} has {} rows", rows.len()));
    }
    store
        .history(GATEWAY_SESSION, AGENT, Some(5))
        .map_err(|f| f.message)?;
    store.meta_get(&record_key(AGENT)).map_err(|f| f.message)?;
    store.meta_list_ours().map_err(|f| f.message)?;
    if !store.session_exists(CLI_SESSION).map_err(|f| f.message)? {
        return Err(format!("session {CLI_SESSION} is missing"));
    }
    println!("{}", rows.len());
    Ok(())
}

/// A Hermes 0.19.0 gateway's writes: its own
/// connection held open, busy timeout 1 s, and per write `BEGIN IMMEDIATE`,
/// a plain INSERT, the `message_count` bump and `COMMIT`, the whole write
/// retried up to 15 times with a 20–150 ms pause on `SQLITE_BUSY`; a
/// PASSIVE checkpoint every 50 writes in WAL mode. It pauses 10 ms after
/// each write (a busy gateway; in DELETE mode each commit also takes ~20 ms
/// of fsyncs) until `stop` exists. Prints `ready` once open, and the number
/// of rows written at the end; any error ends it with exit 1.
fn gateway(db: &Path, stop: &Path) -> Result<(), String> {
    let conn = Connection::open(db).map_err(|e| format!("gateway: open: {e}"))?;
    conn.busy_timeout(Duration::from_secs(1))
        .map_err(|e| e.to_string())?;
    let wal: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .map_err(|e| e.to_string())?;
    println!("ready");
    let mut written = 0u64;
    while !stop.exists() {
        let mut attempt = 1;
        loop {
            match gateway_write(&conn, written) {
                Ok(()) => break,
                Err(e) if is_busy(&e) && attempt < 15 => {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(20 + nanos() % 131));
                }
                Err(e) => return Err(format!("gateway: write {written}, attempt {attempt}: {e}")),
            }
        }
        written += 1;
        if wal == "wal" && written.is_multiple_of(50) {
            conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
                .map_err(|e| format!("gateway: checkpoint: {e}"))?;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    println!("{written}");
    Ok(())
}

fn gateway_write(conn: &Connection, n: u64) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let body = || -> rusqlite::Result<()> {
        conn.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) \
             VALUES (?1, 'assistant', ?2, ?3)",
            rusqlite::params![GATEWAY_SESSION, format!("gateway write {n}"), unix_now()],
        )?;
        conn.execute(
            "UPDATE sessions SET message_count = message_count + 1 WHERE id = ?1",
            [GATEWAY_SESSION],
        )?;
        conn.execute_batch("COMMIT")
    };
    body().inspect_err(|_| {
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
    })
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Cheap randomness for the retry pause (Python's `random.uniform` in
/// Hermes); the sub-second clock is random enough to spread retries.
fn nanos() -> u64 {
    u64::from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock after 1970")
            .subsec_nanos(),
    )
}
