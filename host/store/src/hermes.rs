//! The connection to Hermes's `state.db` and its reads of `sessions` and
//! of the history Hermes's loader gives the model (`state_meta`:
//! `meta.rs`; read snapshots and the data version: `snapshot.rs`).
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

use rusqlite::{Connection, OpenFlags};

use super::loader::{self, Loader, LoaderSql};
use super::schema::{self, check_exists, not_hermes};
use super::send::{SENT_ROWS, SentRow};
use super::sqlite_failure::sqlite_failure;
use super::timeouts::{BRIEF_DEADLINE, BUSY_TIMEOUT};
use session_switch_contract::failure::Failure;
use session_switch_contract::history::HistoryRow;

/// One open connection to a Hermes `state.db` (rusqlite: the CLI bundles
/// SQLite, the Python extension links the system's). `Send`, not `Sync`: one thread at a time, as rusqlite's
/// [`Connection`].
///
/// Connection settings: busy timeout [`BUSY_TIMEOUT`] (changeable with
/// [`HermesStore::set_busy_timeout`]); `foreign_keys = ON` as Hermes runs;
/// `journal_mode` never touched (WAL and DELETE both occur, docs/src/design/hermes-state-db.md).
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
    /// columns it reads (see `loader/`). Read once per connection at open.
    loader: LoaderSql,
    /// Hermes's CJK tokenizer extension is loaded into this connection
    /// (set inside a write transaction, which only has `&self`).
    pub(super) cjk_loaded: Cell<bool>,
    /// How many rows the last history read selected: room reserved for the
    /// next one (a gateway reads the same session again and again; growing
    /// the list by doubling copied each message about twice).
    rows_last_read: Cell<usize>,
    /// This connection among the process's ([`HermesStore::serial`]).
    pub(super) serial: u64,
}

/// The serial of the next connection opened ([`HermesStore::serial`]).
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(0);

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
            write_deadline: BRIEF_DEADLINE,
            future_skew_seconds: session_switch_contract::limits::DEFAULT_FUTURE_SKEW_SECONDS,
            has_active: false,
            loader: LoaderSql::new(Loader::Early, |_| false, false),
            cjk_loaded: Cell::new(false),
            rows_last_read: Cell::new(0),
            serial: NEXT_SERIAL.fetch_add(1, Ordering::Relaxed),
        };
        store.set_busy_timeout(BUSY_TIMEOUT)?;
        // Bundled SQLite defaults to ON; say it anyway so a build against a
        // system SQLite behaves the same (Hermes runs with foreign keys ON).
        store
            .conn
            .execute_batch("PRAGMA foreign_keys = ON")
            .map_err(|e| store.fail("turn on foreign keys", e))?;
        if !schema::has_hermes_tables(&store.conn).map_err(|e| store.fail("read the schema", e))? {
            return Err(not_hermes(path));
        }
        let columns = schema::messages_columns(&store.conn)
            .map_err(|e| store.fail("read the columns of messages", e))?;
        store.has_active = columns.iter().any(|c| c == "active");
        let version = schema::schema_version(&store.conn)
            .map_err(|e| store.fail("read the schema version", e))?;
        let id_ordered = schema::messages_indexed_by_session_then_id(&store.conn)
            .map_err(|e| store.fail("read the indexes of messages", e))?;
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

    /// Hermes's `schema_version` of this database (the largest, should
    /// there be several); `None` for a database without that table (an
    /// early Hermes).
    ///
    /// SQL: `SELECT max(version) FROM schema_version`, one read transaction.
    pub fn schema_version(&self) -> Result<Option<i64>, Failure> {
        schema::schema_version(&self.conn).map_err(|e| self.fail("read the schema version", e))
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
    /// plain call the API server makes; rules per schema in `loader/`,
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
    /// SQL (two statements, autocommit or inside the caller's snapshot): the
    /// sent rows ([`SENT_ROWS`], their ids mark `bridge_wrote`), then `SELECT
    /// id, role, content, <the loader's columns> FROM messages WHERE
    /// session_id = ?1 [AND active = 1] ORDER BY …`, or, where no index has a
    /// session's rows in id order, `WHERE id IN (SELECT id … WHERE session_id
    /// = ?1 …) ORDER BY id` ([`LoaderSql::history_select`]). The list of sent
    /// rows is read once rather than probed for every row (a correlated
    /// `EXISTS` per row was a large share of the select on a long history).
    /// `SQLITE_BUSY`: kind `busy`.
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
        // In id order (`SENT_ROWS`), for the loader's binary search; in the
        // history's snapshot.
        let ours: Vec<i64> = self
            .query_sent_rows(session_id, agent)?
            .into_iter()
            .map(|row| row.message_id)
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

    /// The sent rows of `session_id` for `agent` (listed in
    /// `session_switch_sent`): `(messages.id, role, timestamp)` in id order,
    /// empty when that table is missing. What a caller needs to recognise
    /// those rows in Hermes's own loader output, which carries no ids: a row
    /// is known by its role and its stored timestamp. The select is
    /// [`SENT_ROWS`], which walks the list of sent rows; it and the look for
    /// the table run in one read snapshot (one lock cycle) unless one is
    /// open already.
    pub fn sent_rows(&self, session_id: &str, agent: &str) -> Result<Vec<SentRow>, Failure> {
        self.in_snapshot(|| self.query_sent_rows(session_id, agent))
    }

    /// [`Self::sent_rows`] in the open transaction, if any.
    fn query_sent_rows(&self, session_id: &str, agent: &str) -> Result<Vec<SentRow>, Failure> {
        if !self.table_exists("session_switch_sent")? {
            return Ok(Vec::new());
        }
        let doing = format!("read the sent rows of session {session_id:?}");
        let mut stmt = self
            .conn
            .prepare_cached(SENT_ROWS)
            .map_err(|e| self.fail(&doing, e))?;
        stmt.query_map(rusqlite::params![session_id, agent], |row| {
            Ok(SentRow {
                message_id: row.get(0)?,
                role: row.get(1)?,
                timestamp: row.get(2)?,
            })
        })
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(|e| self.fail(&doing, e))
    }

    /// Whether table `name` exists ([`schema::table_exists`]).
    pub(super) fn table_exists(&self, name: &str) -> Result<bool, Failure> {
        schema::table_exists(&self.conn, name).map_err(|e| self.fail("read the schema", e))
    }

    /// `sql`, a statement without parameters or rows, run through the
    /// statement cache: for the statements of every decision's transaction
    /// (`BEGIN IMMEDIATE`, `CREATE TABLE IF NOT EXISTS` of a table of ours),
    /// which a batch would parse again each time.
    pub(super) fn run_cached(&self, sql: &str) -> rusqlite::Result<()> {
        self.conn.prepare_cached(sql)?.execute([]).map(|_| ())
    }

    /// `sql`, a statement that reads `table`, from the statement cache;
    /// `None` when `table` does not exist. The table is looked for only
    /// when the statement cannot be prepared: a statement of the cache is
    /// checked against the schema by SQLite itself, while a look of our own
    /// (`pragma_table_info`) prepares a statement on every read.
    ///
    /// Errors: kind `store` (`busy`), `doing` naming what was read.
    pub(super) fn prepare_reading(
        &self,
        table: &str,
        sql: &str,
        doing: &str,
    ) -> Result<Option<rusqlite::CachedStatement<'_>>, Failure> {
        match self.conn.prepare_cached(sql) {
            Ok(statement) => Ok(Some(statement)),
            Err(_) if !self.table_exists(table)? => Ok(None),
            Err(e) => Err(self.fail(doing, e)),
        }
    }

    /// Map a SQLite error raised while `doing` to a [`Failure`].
    pub(super) fn fail(&self, doing: &str, error: rusqlite::Error) -> Failure {
        sqlite_failure(&self.path, self.busy_timeout, doing, error)
    }
}

/// The version of the SQLite library in use (`sqlite3_libversion`): the
/// bundled copy when built with `bundled-sqlite`, else the process's.
pub fn sqlite_version() -> String {
    rusqlite::version().to_string()
}
