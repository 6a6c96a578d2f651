//! Read snapshots (one lock for the reads of a policy call) and the data
//! version a memo compares: whether anyone committed to `state.db` since.

use super::HermesStore;
use session_switch_contract::failure::Failure;
use session_switch_contract::history::DataVersion;

impl HermesStore {
    /// What this connection reads, as a version compared for equality
    /// (`session_switch_contract::history::DataVersion`): SQLite's `PRAGMA
    /// data_version`, which changes when another connection has committed
    /// (<https://sqlite.org/pragma.html#pragma_data_version>), and
    /// `sqlite3_total_changes`, this connection's own rows changed. Inside
    /// a read snapshot ([`HermesStore::begin_read`]) the pragma reads under
    /// the snapshot's lock, so the version is the snapshot's: the reads
    /// that follow see the state it names. Outside one it takes and drops
    /// the shared lock once (one statement, no table read).
    pub fn data_version(&self) -> Result<DataVersion, Failure> {
        Ok(DataVersion(
            self.pragma_data_version()?,
            self.conn.total_changes(),
        ))
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
    /// (`make bench`, docs/src/performance.md). The runtime opens one around
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

    /// `f` inside a read snapshot: one opened and ended around it, or the
    /// transaction already open. `f`'s failure first, then the end's.
    pub(super) fn in_snapshot<T>(
        &self,
        f: impl FnOnce() -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        let opened = self.begin_read()?;
        let answer = f();
        let ended = if opened { self.end_read() } else { Ok(()) };
        let answer = answer?;
        ended.map(|()| answer)
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
}
