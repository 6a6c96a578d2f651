//! The connection to Hermes's `state.db` and its reads: `state_meta`,
//! `sessions`, and the history Hermes's loader gives the model.
//!
//! Hermes (or its gateway) holds the same file while we use it, so every
//! function here takes the locks SQLite's journal mode asks for and nothing
//! more: reads run in autocommit mode (one implicit read transaction per
//! statement), or inside one read snapshot a caller opens around several
//! ([`HermesStore::begin_read`]), and never write; writes run inside
//! `BEGIN IMMEDIATE` (`write_tx`); a send's are three brief ones around
//! the room post, none held across it (`send_write`, `pending`).

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::change_counter::ChangeCounter;
use super::loader::{self, Loader, LoaderSql};
use super::read_memo::ReadMemo;
use super::schema::{TableSeen, check_exists};
use super::sqlite_failure::sqlite_failure;
use super::write_tx::{check_our_key, commit_with_retry};
use session_switch_runtime::HistoryRow;
use session_switch_runtime::{DataVersion, Failure};

/// Busy timeout set on every connection: how long one statement waits for
/// another connection's lock before SQLite reports `SQLITE_BUSY`. Hermes's
/// readers use 5 s (v31, research/hermes-state.md §5); its writers wait 1 s
/// per attempt and retry for up to 20 s.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// One open connection to a Hermes `state.db` (rusqlite: the CLI bundles
/// SQLite, the Python extension links the system's). `Send`, not `Sync`: one thread at a time, as rusqlite's
/// [`Connection`].
///
/// Connection settings: busy timeout [`BUSY_TIMEOUT`] (changeable with
/// [`HermesStore::set_busy_timeout`]); `foreign_keys = ON` as Hermes runs;
/// `journal_mode` never touched (WAL and DELETE both occur, DESIGN §4).
pub struct HermesStore {
    pub(super) conn: Connection,
    pub(super) path: PathBuf,
    pub(super) busy_timeout: Duration,
    /// How long a send's brief transactions are retried before kind `busy`
    /// ([`super::BRIEF_DEADLINE`] unless changed with
    /// [`HermesStore::set_write_deadline`]).
    pub(super) write_deadline: Duration,
    /// How far in the future a stored record may be dated and still be
    /// kept by a send that is older (seconds; the config's
    /// `future_skew_seconds`, set with [`HermesStore::set_future_skew`]).
    pub(super) future_skew_seconds: u32,
    /// `messages.active` exists (Hermes ≥ 2026-05-10, schema v22+): history
    /// keeps only `active = 1` rows. Read once per connection at open.
    has_active: bool,
    /// Which of Hermes's loaders this database's schema goes with, and the
    /// columns it reads (see `loader.rs`). Read once per connection at open.
    loader: LoaderSql,
    /// Hermes's CJK tokenizer extension is loaded into this connection
    /// (set inside a write transaction, which only has `&self`).
    pub(super) cjk_loaded: Cell<bool>,
    /// What this connection saw of `state_meta` (see
    /// [`HermesStore::table_exists`]).
    pub(super) seen_state_meta: TableSeen,
    /// As `seen_state_meta`, for `session_switch_sent`.
    pub(super) seen_sent: TableSeen,
    /// The file's change counter, read without SQLite's lock
    /// ([`HermesStore::data_version`]); `None` when the file could not be
    /// opened a second time (SQLite's own reads still work).
    counter: Option<ChangeCounter>,
    /// How many rows the last history read selected: room reserved for the
    /// next one (a gateway reads the same session again and again; growing
    /// the list by doubling copied each message about twice).
    rows_last_read: Cell<usize>,
    /// Answers of [`HermesStore::has_child_sessions`] and
    /// [`HermesStore::bridge_rows`] at the current data version.
    pub(super) reads: ReadMemo,
    /// This connection among the process's ([`HermesStore::serial`]).
    serial: u64,
}

/// The serial of the next connection opened ([`HermesStore::serial`]).
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(0);

/// A row the bridge wrote: `(messages.id, role, timestamp)`
/// ([`HermesStore::bridge_rows`]).
pub type BridgeRow = (i64, String, f64);

impl HermesStore {
    /// `$HERMES_HOME/state.db`, `HERMES_HOME` defaulting to `~/.hermes`
    /// (Hermes's own rule; see [`super::hermes_home`]).
    pub fn default_path() -> PathBuf {
        super::hermes_home().join("state.db")
    }

    /// Open an existing Hermes database read-write without changing
    /// anything: not `journal_mode`, not the schema, no table created.
    ///
    /// SQL: `PRAGMA foreign_keys = ON` (connection setting),
    /// `SELECT … FROM sqlite_master` and `PRAGMA table_info(messages)`, each
    /// in its own read transaction.
    ///
    /// Errors (kind `store` unless said otherwise):
    /// - `no Hermes database at <path>: …` when the file or its folder is
    ///   missing (SQLite is opened without `SQLITE_OPEN_CREATE`);
    /// - the path is a folder, not a SQLite file, cannot be opened, or is a
    ///   SQLite file without Hermes's `sessions` and `messages` tables;
    /// - kind `busy` if another connection holds an exclusive lock (DELETE
    ///   mode, mid-commit) for longer than the busy timeout.
    ///
    /// A file the process may only read opens fine (SQLite falls back to
    /// read-only); reads work and writes fail with a `store` failure.
    pub fn open(path: &Path) -> Result<Self, Failure> {
        check_exists(path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)
            .map_err(|e| sqlite_failure(path, BUSY_TIMEOUT, "open the database", e))?;
        let mut store = Self {
            conn,
            path: path.to_path_buf(),
            busy_timeout: BUSY_TIMEOUT,
            write_deadline: super::BRIEF_DEADLINE,
            future_skew_seconds: session_switch_contract::limits::DEFAULT_FUTURE_SKEW_SECONDS,
            has_active: false,
            loader: LoaderSql::new(Loader::Early, |_| false, false),
            cjk_loaded: Cell::new(false),
            seen_state_meta: TableSeen::default(),
            seen_sent: TableSeen::default(),
            rows_last_read: Cell::new(0),
            counter: None,
            reads: ReadMemo::default(),
            serial: NEXT_SERIAL.fetch_add(1, Ordering::Relaxed),
        };
        store.set_busy_timeout(BUSY_TIMEOUT)?;
        // Bundled SQLite defaults to ON; say it anyway so a build against a
        // system SQLite behaves the same (Hermes runs with foreign keys ON).
        store
            .conn
            .execute_batch("PRAGMA foreign_keys = ON")
            .map_err(|e| store.fail("turn on foreign keys", e))?;
        store.check_hermes_tables()?;
        store.has_active = store.messages_has_column("active")?;
        let columns = store.messages_columns()?;
        let version = store.schema_version()?;
        store.counter = ChangeCounter::open(path)
            .inspect_err(|e| {
                tracing::debug!(
                    target: "session_switch::store",
                    "{}: no second descriptor for the change counter ({e}); PRAGMA data_version instead",
                    path.display()
                )
            })
            .ok();
        let id_ordered = store.messages_indexed_by_session_then_id()?;
        store.loader = LoaderSql::new(
            Loader::of_version(version),
            |c| columns.iter().any(|have| have == c),
            id_ordered,
        );
        Ok(store)
    }

    /// The database file this store was opened on.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The connection's busy timeout (see [`BUSY_TIMEOUT`]).
    pub fn busy_timeout(&self) -> Duration {
        self.busy_timeout
    }

    /// Change the busy timeout (`sqlite3_busy_timeout`, millisecond
    /// resolution). A gateway that must not stall may lower it; a `busy`
    /// failure then comes sooner.
    pub fn set_busy_timeout(&mut self, timeout: Duration) -> Result<(), Failure> {
        self.conn
            .busy_timeout(timeout)
            .map_err(|e| self.fail("set the busy timeout", e))?;
        self.busy_timeout = timeout;
        Ok(())
    }

    /// Change how long a send's brief write transactions are retried while
    /// the database is locked before the send fails with kind `busy`
    /// (default [`super::BRIEF_DEADLINE`], 10 s). Each attempt waits at most
    /// [`super::BRIEF_BUSY`] on a lock; the deadline bounds them all.
    pub fn set_write_deadline(&mut self, deadline: Duration) {
        self.write_deadline = deadline;
    }

    /// Change the clock skew a send allows a stored record (default
    /// [`DEFAULT_FUTURE_SKEW_SECONDS`](session_switch_contract::limits::DEFAULT_FUTURE_SKEW_SECONDS),
    /// 120 s; the config's `future_skew_seconds`): a stored record dated
    /// more than this after both the send and the system clock is one the
    /// policy refuses (`future-dated`), so the send replaces it instead of
    /// keeping it as the newer one.
    pub fn set_future_skew(&mut self, seconds: u32) {
        self.future_skew_seconds = seconds;
    }

    /// The value of `state_meta` key `key`; `None` when the key, or the
    /// whole `state_meta` table (early Hermes databases), is absent, or the
    /// stored value is NULL. Non-text values are returned as SQLite's text
    /// form (`CAST(value AS TEXT)`); bytes that are not UTF-8 (anyone can
    /// write a blob there) become U+FFFD, so the policy sees a malformed
    /// record it can report and `clear` can remove, not a read error.
    ///
    /// SQL (autocommit, read only): `SELECT CAST(value AS TEXT) FROM
    /// state_meta WHERE key = ?1`. On `SQLITE_BUSY` past the busy timeout
    /// (a DELETE-mode writer mid-commit): kind `busy`.
    pub fn meta_get(&self, key: &str) -> Result<Option<String>, Failure> {
        if !self.table_exists("state_meta")? {
            return Ok(None);
        }
        self.conn
            .prepare_cached("SELECT CAST(value AS TEXT) FROM state_meta WHERE key = ?1")
            .and_then(|mut stmt| stmt.query_row([key], |row| lossy_text(row, 0)))
            .optional()
            .map(Option::flatten)
            .map_err(|e| self.fail(&format!("read state_meta key {key:?}"), e))
    }

    /// Delete `state_meta` key `key`; `true` when a row was removed.
    ///
    /// Only our keys may be deleted: those starting with
    /// [`OUR_KEY_PREFIX`] (`session_switch:`) and the seed's
    /// [`LEGACY_KEY`]; any other key is refused with kind `bad-input`
    /// before the database is touched (Hermes's own keys, e.g. `fts_*` that
    /// its triggers read, are not ours: DESIGN §4).
    ///
    /// SQL: `BEGIN IMMEDIATE` (retried as in [`HermesStore::send_write`]),
    /// `DELETE FROM state_meta WHERE key = ?1`, `COMMIT`. When the table is
    /// missing, nothing runs and the answer is `false` (the file stays
    /// untouched). `SQLITE_BUSY` past the retries: kind `busy`, nothing
    /// deleted.
    pub fn meta_delete(&self, key: &str) -> Result<bool, Failure> {
        check_our_key(key, true)?;
        if !self.table_exists("state_meta")? {
            return Ok(false);
        }
        let doing = format!("delete state_meta key {key:?}");
        let tx = self.begin_write(&doing)?;
        let removed = tx
            .execute("DELETE FROM state_meta WHERE key = ?1", [key])
            .map_err(|e| sqlite_failure(&self.path, self.busy_timeout, &doing, e))?;
        commit_with_retry(tx, &self.path, self.busy_timeout, &doing)?;
        Ok(removed > 0)
    }

    /// Our keys (prefix `session_switch:`) with their values, sorted by key
    /// (byte order). NULL values read as `""`. Empty when `state_meta` is
    /// missing.
    ///
    /// SQL (autocommit, read only): `SELECT key, COALESCE(CAST(value AS
    /// TEXT), '') FROM state_meta WHERE key >= 'session_switch:' AND key <
    /// 'session_switch;' ORDER BY key` (a range, not `LIKE`, which ignores
    /// ASCII case and treats `_` as a wildcard). `SQLITE_BUSY`: kind `busy`.
    pub fn meta_list_ours(&self) -> Result<Vec<(String, String)>, Failure> {
        if !self.table_exists("state_meta")? {
            return Ok(Vec::new());
        }
        let doing = "list our state_meta keys";
        let mut stmt = self
            .conn
            .prepare(
                "SELECT key, COALESCE(CAST(value AS TEXT), '') FROM state_meta \
                 WHERE key >= 'session_switch:' AND key < 'session_switch;' ORDER BY key",
            )
            .map_err(|e| self.fail(doing, e))?;
        stmt.query_map([], |row| {
            Ok((row.get(0)?, lossy_text(row, 1)?.unwrap_or_default()))
        })
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(|e| self.fail(doing, e))
    }

    /// Whether `sessions` has a row with id `id`.
    ///
    /// SQL (autocommit, read only): `SELECT EXISTS(SELECT 1 FROM sessions
    /// WHERE id = ?1)`. `SQLITE_BUSY`: kind `busy`.
    pub fn session_exists(&self, id: &str) -> Result<bool, Failure> {
        self.conn
            .prepare_cached("SELECT EXISTS(SELECT 1 FROM sessions WHERE id = ?1)")
            .and_then(|mut stmt| stmt.query_row([id], |row| row.get(0)))
            .map_err(|e| self.fail(&format!("look up session {id:?}"), e))
    }

    /// The history of `session_id` as the database's own Hermes loader
    /// gives it to the model (`SessionDB.get_messages_as_conversation`, the
    /// plain call the API server makes; rules per schema in `loader.rs`,
    /// each naming its Hermes source): the loader's order (`id`; early
    /// Hermes `timestamp, id`), only `active = 1` rows where that column
    /// exists, `"\0json:"` content decoded (a multimodal list: the row's
    /// text is its first text part), `sanitize_context(…).strip()` on user
    /// and assistant text, the loader's extra keys
    /// ([`HistoryRow::loaded`]), the rows it drops (background-review
    /// harness turns) and blanks (v31 stale tool-call markers).
    ///
    /// `limit`: `Some(n)` keeps the last `n` messages (still in order);
    /// `None` all. `bridge_wrote` is true for rows listed in
    /// `session_switch_sent` for `agent` (false when that table is
    /// missing). An unknown session reads as empty.
    ///
    /// SQL (two statements, autocommit or inside the caller's snapshot):
    /// the bridge's rows ([`BRIDGE_ROWS`], their ids mark `bridge_wrote`),
    /// then `SELECT id, role, content, <the loader's columns> FROM messages
    /// WHERE session_id = ?1 [AND active = 1] ORDER BY …`, or, where no
    /// index has a session's rows in id order, `WHERE id IN (SELECT id …
    /// WHERE session_id = ?1 …) ORDER BY id`
    /// ([`LoaderSql::history_select`]). The bridge's list is read once
    /// rather than probed for every row (a correlated `EXISTS` per row was
    /// ~40 % of the select at 10,000 rows with five sends). `SQLITE_BUSY`:
    /// kind `busy`.
    pub fn history(
        &self,
        session_id: &str,
        agent: &str,
        limit: Option<u32>,
    ) -> Result<Vec<HistoryRow>, Failure> {
        // Both reads in one snapshot (the caller's, else one of its own):
        // a send committed between them would leave its row unmarked.
        let opened = self.begin_read()?;
        let read = self.read_history(session_id, agent);
        let ended = if opened { self.end_read() } else { Ok(()) };
        // A failed read is the cause, whatever the end of its snapshot did.
        let mut rows = read?;
        ended?;
        if let Some(n) = limit {
            rows.drain(..rows.len().saturating_sub(n as usize));
        }
        Ok(rows)
    }

    /// [`Self::history`]'s two reads, every row (a limit is applied after
    /// the loader's rules: the row it drops after a harness prompt depends
    /// on the row before).
    fn read_history(&self, session_id: &str, agent: &str) -> Result<Vec<HistoryRow>, Failure> {
        let doing = format!("read the history of session {session_id:?}");
        // In id order (`BRIDGE_ROWS`), for the loader's binary search. Read
        // in the history's snapshot, not through the read memo: the rows
        // are read from the file anyway, and the memo's version would cost
        // a statement inside the snapshot.
        let ours: Vec<i64> = self
            .query_bridge_rows(session_id, agent)?
            .into_iter()
            .map(|(id, _, _)| id)
            .collect();
        let mut stmt = self
            .conn
            .prepare_cached(&self.history_select())
            .map_err(|e| self.fail(&doing, e))?;
        let mut conversation =
            loader::Conversation::with_capacity(&self.loader, &ours, self.rows_last_read.get());
        stmt.query([session_id])
            .and_then(|mut rows| {
                while let Some(row) = rows.next()? {
                    conversation.push(row)?;
                }
                Ok(())
            })
            .map_err(|e| self.fail(&doing, e))?;
        self.rows_last_read.set(conversation.len());
        Ok(conversation.finish())
    }

    /// The select of the rows [`Self::history`] runs (`?1`: the session).
    /// Public for `make bench`'s "SQLite alone" row: SQLite's own share of
    /// a history read, stepped without building messages.
    pub fn history_select(&self) -> String {
        self.loader.history_select(self.has_active)
    }

    /// Which loader this database is read with (by its `schema_version`).
    pub fn loader(&self) -> Loader {
        self.loader.loader
    }

    /// The rows of `session_id` the bridge wrote for `agent` (listed in
    /// `session_switch_sent`): `(messages.id, role, timestamp)` in id order,
    /// empty when that table is missing. What a caller needs to recognise
    /// those rows in Hermes's own loader output, which carries no ids: a
    /// row is known by its role and its stored timestamp.
    /// The select is [`BRIDGE_ROWS`], which walks the bridge's list; its
    /// answer is kept while the data version stays the same (`read_memo.rs`).
    pub fn bridge_rows(&self, session_id: &str, agent: &str) -> Result<Vec<BridgeRow>, Failure> {
        let version = self.data_version()?;
        if let Some(rows) = self.reads.bridge_rows(version, session_id, agent) {
            return Ok(rows);
        }
        let rows = self.query_bridge_rows(session_id, agent)?;
        self.reads
            .keep_bridge_rows(version, session_id, agent, &rows);
        Ok(rows)
    }

    /// [`Self::bridge_rows`] read from the file, no memo.
    fn query_bridge_rows(&self, session_id: &str, agent: &str) -> Result<Vec<BridgeRow>, Failure> {
        if !self.table_exists("session_switch_sent")? {
            return Ok(Vec::new());
        }
        let doing = format!("read the bridge's rows of session {session_id:?}");
        let mut stmt = self
            .conn
            .prepare_cached(BRIDGE_ROWS)
            .map_err(|e| self.fail(&doing, e))?;
        stmt.query_map(rusqlite::params![session_id, agent], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(|e| self.fail(&doing, e))
    }

    /// What this connection reads, as a version compared for equality
    /// (`session_switch_runtime::DataVersion`): the file change counter of
    /// a rollback-journal database, read without SQLite's lock (one
    /// `pread`; why that suffices: `change_counter.rs`), in WAL mode
    /// SQLite's `PRAGMA data_version`, which changes when another
    /// connection has committed
    /// (<https://sqlite.org/pragma.html#pragma_data_version>); and
    /// `sqlite3_total_changes`, this connection's own rows changed. The
    /// counter is kept negative, so the two never compare equal. Inside a
    /// read snapshot, the snapshot's version (the pragma runs first, so the
    /// snapshot holds its lock when the counter is read); outside, the
    /// pragma takes and drops the shared lock once (one statement, no table
    /// read), the counter takes none: a lock held without a commit changes
    /// nothing.
    pub fn data_version(&self) -> Result<DataVersion, Failure> {
        let pragma = match (&self.counter, self.conn.is_autocommit()) {
            (Some(_), true) => None,
            _ => Some(self.pragma_data_version()?),
        };
        if let Some(counter) = self.counter.as_ref().and_then(|c| c.read().ok().flatten()) {
            return Ok(DataVersion(
                -1 - i64::from(counter),
                self.conn.total_changes(),
            ));
        }
        let version = match pragma {
            Some(version) => version,
            None => self.pragma_data_version()?,
        };
        Ok(DataVersion(version, self.conn.total_changes()))
    }

    /// This connection's number, unique in the process: a
    /// [`HermesStore::data_version`] is only compared with another of the
    /// same connection (`PRAGMA data_version` counts per connection).
    pub fn serial(&self) -> u64 {
        self.serial
    }

    /// `PRAGMA data_version`.
    fn pragma_data_version(&self) -> Result<i64, Failure> {
        self.conn
            .prepare_cached("PRAGMA data_version")
            .and_then(|mut stmt| stmt.query_row([], |row| row.get::<_, i64>(0)))
            .map_err(|e| self.fail("read PRAGMA data_version", e))
    }

    /// Start a read snapshot: the reads that follow, until
    /// [`HermesStore::end_read`], see one consistent state of the file and
    /// take SQLite's lock once instead of once per statement. A lock cycle
    /// is several system calls (in DELETE mode a shared `fcntl` lock, a
    /// look for a hot journal, a read of the change counter, the unlock):
    /// measured on this machine kind it is most of a short read's cost
    /// (`make bench`, README "Performance"). The runtime opens one around
    /// each read-only policy call, so the record, the target's existence and
    /// the history a decision rests on come from the same snapshot.
    ///
    /// SQL: `BEGIN` (deferred: no lock until the first read). Returns
    /// `false` and does nothing when a transaction is already open. While
    /// the snapshot holds its shared lock a DELETE-mode writer waits (up to
    /// its busy timeout); in WAL mode writers go on. Keep it to one call.
    pub fn begin_read(&self) -> Result<bool, Failure> {
        if !self.conn.is_autocommit() {
            return Ok(false);
        }
        self.conn
            .prepare_cached("BEGIN")
            .and_then(|mut stmt| stmt.execute([]))
            .map(|_| true)
            .map_err(|e| self.fail("begin a read transaction", e))
    }

    /// End the snapshot [`HermesStore::begin_read`] opened: `COMMIT` (the
    /// transaction wrote nothing; this releases the shared lock), or
    /// `ROLLBACK` when that fails, so the connection is never left inside a
    /// transaction. Does nothing when no transaction is open.
    pub fn end_read(&self) -> Result<(), Failure> {
        if self.conn.is_autocommit() {
            return Ok(());
        }
        let commit = self
            .conn
            .prepare_cached("COMMIT")
            .and_then(|mut stmt| stmt.execute([]));
        match commit {
            Ok(_) => Ok(()),
            Err(e) => {
                let failure = self.fail("end a read transaction", e);
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(failure)
            }
        }
    }

    /// Map a SQLite error raised while `doing` to a [`Failure`].
    pub(super) fn fail(&self, doing: &str, error: rusqlite::Error) -> Failure {
        sqlite_failure(&self.path, self.busy_timeout, doing, error)
    }
}

/// [`HermesStore::bridge_rows`]' select (`?1` the session, `?2` the agent).
/// `CROSS JOIN` keeps `session_switch_sent` the outer loop (SQLite never
/// reorders a `CROSS JOIN`), so the cost follows the agent's sends (each a
/// row of its XMPP history), not the session's length. A plain join let
/// SQLite, without statistics (Hermes's database has no `ANALYZE`), walk
/// every row of the session and probe the list for each: 740–760 µs a call
/// at 10,000 rows where the list's walk takes 5–8 µs (`bench/make_dbs.py`'s
/// databases, five sends).
pub const BRIDGE_ROWS: &str = "SELECT m.id, m.role, m.timestamp \
     FROM session_switch_sent s CROSS JOIN messages m ON m.id = s.message_id \
     WHERE s.agent = ?2 AND m.session_id = ?1 ORDER BY s.message_id";

/// Column `i` as text, bytes that are not UTF-8 replaced by U+FFFD; `None`
/// for NULL.
fn lossy_text(row: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<String>> {
    Ok(row
        .get_ref(i)?
        .as_bytes_or_null()?
        .map(|b| loader::lossy(b).into_owned()))
}
