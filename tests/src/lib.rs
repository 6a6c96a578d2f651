//! Shared helpers of the integration tests: where the real Hermes fixtures,
//! the built components and the CLI binary are, and private copies of
//! fixtures in temp dirs (CI's `../shared` is read-only, and SQLite writes
//! `-wal`/`-shm` files beside a WAL database even to read it).

use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard};

pub mod archive;
pub mod fake_host;
pub mod fake_llm;
pub mod fault_proxy;
pub mod hermes_gateway;
pub mod hostile;
pub mod instance;
pub mod own_room;
pub mod room_bot;
pub mod room_observer;
pub mod sample;
pub mod tcp_relay;
pub mod wit_convert;
pub mod xmpp;

/// How many tests with a Hermes world of their own (an API server, bots,
/// a fake LLM; [`hermes_world`]) run at once: each mostly waits on its
/// turns and its bots' timeouts, so more at once keep two cores busy; a
/// Hermes start-up takes a core for a second or three.
const HERMES_WORLDS_AT_ONCE: usize = 3;

/// Which tests run now: one that loads the whole machine, or up to
/// [`HERMES_WORLDS_AT_ONCE`] Hermes worlds; `machine_waiting` keeps new
/// worlds from starting while a machine-loading test waits its turn.
struct Slots {
    machine: bool,
    machine_waiting: usize,
    worlds: usize,
}

static SLOTS: Mutex<Slots> = Mutex::new(Slots {
    machine: false,
    machine_waiting: 0,
    worlds: 0,
});
static FREED: Condvar = Condvar::new();

fn slots() -> MutexGuard<'static, Slots> {
    SLOTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// A test's slot, given back when dropped.
pub struct Slot {
    machine: bool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut s = slots();
        if self.machine {
            s.machine = false;
        } else {
            s.worlds -= 1;
        }
        FREED.notify_all();
    }
}

/// Held by the tests that load the whole machine for seconds (the soak, the
/// store's hundred-process runs, the slow-room sends): no other such test
/// and no Hermes world runs beside them. The other tests run beside them
/// on libtest's threads.
pub fn heavy() -> Slot {
    let mut s = slots();
    s.machine_waiting += 1;
    while s.machine || s.worlds > 0 {
        s = FREED.wait(s).unwrap_or_else(|e| e.into_inner());
    }
    s.machine_waiting -= 1;
    s.machine = true;
    Slot { machine: true }
}

/// Held by the tests that start a Hermes API server and bots of their own:
/// at most [`HERMES_WORLDS_AT_ONCE`] at once, never beside a [`heavy`] one.
pub fn hermes_world() -> Slot {
    let mut s = slots();
    while s.machine || s.machine_waiting > 0 || s.worlds >= HERMES_WORLDS_AT_ONCE {
        s = FREED.wait(s).unwrap_or_else(|e| e.into_inner());
    }
    s.worlds += 1;
    Slot { machine: false }
}

/// The workspace root (parent of `tests/`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The Python of the test venv (`target/venv`, made by `make venv` with
/// slixmpp and wasmtime pinned in `tests/requirements.txt`).
///
/// # Panics
/// When the venv is missing, with the command that makes it.
pub fn venv_python() -> PathBuf {
    let python = workspace_root().join("target/venv/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run `make venv`",
        python.display()
    );
    python
}

/// The folder of Hermes's real databases: `$HERMES_FIXTURES`, else
/// `../shared/fixtures/hermes` beside the workspace. `None` (and a note on
/// stderr) when missing: the caller skips; `.ci/run` fails before that.
pub fn fixtures_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("HERMES_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared/fixtures/hermes"));
    if dir.join("hermes-latest.db").is_file() {
        Some(dir)
    } else {
        eprintln!(
            "SKIPPED: Hermes fixtures not found at {} (set HERMES_FIXTURES)",
            dir.display()
        );
        None
    }
}

/// The three fixture files, oldest schema first.
pub const FIXTURES: [&str; 3] = ["hermes-early.db", "hermes-0.19.0.db", "hermes-latest.db"];

/// A private copy of fixture `name` in a new temp dir; the dir lives as long
/// as the returned guard. `None` when the fixtures are missing.
pub fn fixture_copy(name: &str) -> Option<(tempfile::TempDir, PathBuf)> {
    let src = fixtures_dir()?.join(name);
    let dir = tempfile::tempdir().expect("temp dir");
    let dst = dir.path().join("state.db");
    std::fs::copy(&src, &dst).unwrap_or_else(|e| panic!("copy {}: {e}", src.display()));
    Some((dir, dst))
}

/// `expected-conversations.json` of the fixtures.
pub fn expected_conversations() -> Option<serde_json::Value> {
    let path = fixtures_dir()?.join("expected-conversations.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Some(serde_json::from_str(&text).expect("expected-conversations.json is JSON"))
}

/// The policy component `make component` writes.
pub fn component_path() -> PathBuf {
    let path = workspace_root().join("target/policy/session_switch.wasm");
    assert!(
        path.is_file(),
        "{} is missing: run `make component`",
        path.display()
    );
    path
}

/// A test variant of the policy built by `make variants` (e.g. `panic`).
pub fn variant_path(name: &str) -> PathBuf {
    let path = workspace_root().join(format!("target/policy/variants/{name}.wasm"));
    assert!(
        path.is_file(),
        "{} is missing: run `make variants`",
        path.display()
    );
    path
}

/// The `xmpp-session-bridge` binary: `$XSB_BIN`, else the workspace's
/// `target/debug` build (`make build` makes it).
pub fn bin_path() -> PathBuf {
    let path = std::env::var_os("XSB_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/debug/xmpp-session-bridge"));
    assert!(
        path.is_file(),
        "{} is missing: run `make build`",
        path.display()
    );
    path
}

/// The CLI on `config` and `db`.
pub fn cli(config: &Path, db: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(bin_path());
    cmd.arg("--config").arg(config).arg("--db").arg(db);
    cmd
}

/// The journal mode of the SQLite database `db` (`delete`, `wal`, ...).
pub fn journal_mode(db: &Path) -> String {
    journal_mode_of(&Connection::open(db).unwrap())
}

/// The journal mode of the database `conn` is open on.
pub fn journal_mode_of(conn: &Connection) -> String {
    conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap()
}

/// The sends `active --json` lists as not (yet) in the history (entries
/// with `"pending_send": true`).
pub fn pending_sends(active: &serde_json::Value) -> Vec<&serde_json::Value> {
    active
        .as_array()
        .expect("active --json is a list")
        .iter()
        .filter(|e| e["pending_send"] == true)
        .collect()
}

/// Every row of every table of the database at `path` (FTS shadow tables
/// and `sqlite_master` included, FTS virtual tables excluded: their shadow
/// tables hold them), each table's rows sorted, read through a separate
/// read-only connection. Two snapshots are equal exactly when no row changed.
pub fn table_snapshot(path: &Path) -> BTreeMap<String, Vec<String>> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut names: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' \
             AND sql NOT LIKE 'CREATE VIRTUAL TABLE%'",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    names.push("sqlite_master".into());
    names
        .into_iter()
        .map(|name| {
            let mut stmt = conn.prepare(&format!("SELECT * FROM \"{name}\"")).unwrap();
            let width = stmt.column_count();
            let mut rows: Vec<String> = stmt
                .query_map([], |r| {
                    let row: Vec<Value> = (0..width).map(|i| r.get(i)).collect::<Result<_, _>>()?;
                    Ok(format!("{row:?}"))
                })
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            rows.sort();
            (name, rows)
        })
        .collect()
}
