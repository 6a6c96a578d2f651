//! What a database is: a Hermes `state.db` (its core tables), which
//! schema (`schema_version`, `messages` columns), which tables exist.

use std::cell::Cell;
use std::path::Path;

use session_switch_contract::failure::Failure;
use session_switch_contract::history::DataVersion;

use super::HermesStore;

/// What one connection knows of a table that is created once and never
/// dropped (`state_meta`: Hermes's; `session_switch_sent`: ours).
#[derive(Debug, Default)]
pub(super) struct TableSeen {
    /// Seen to exist: taken as present from then on.
    present: Cell<bool>,
    /// Seen missing while the database was at this version.
    absent_at: Cell<Option<DataVersion>>,
}

impl HermesStore {
    /// Whether table `name` exists ([`Self::query_table_exists`], a read).
    ///
    /// Asked on every call, that read measured as the largest part of a
    /// `resolve` when it scanned `sqlite_master` (`make bench`), and 9 % of
    /// the plugin's `tag_messages` on a database the bridge never wrote
    /// (callgrind). So
    /// for `state_meta` and `session_switch_sent`, once seen a table is
    /// taken as present from then on (Hermes creates `state_meta` and never
    /// drops it, `session_switch_sent` is ours and never dropped), and a
    /// table seen missing is taken as missing while the database's
    /// [`data_version`](Self::data_version) stays the same. That version
    /// moves on any other connection's commit (a `CREATE TABLE` included)
    /// and on this connection's changed rows: each of its own `CREATE`s
    /// comes with an `INSERT` into the new table in the same transaction
    /// (`send_write.rs`, `guard_state.rs`). The version is read before the
    /// schema, so a table created in between is found by the query.
    pub(super) fn table_exists(&self, name: &str) -> Result<bool, Failure> {
        let seen = match name {
            "state_meta" => &self.seen_state_meta,
            "session_switch_sent" => &self.seen_sent,
            _ => return self.query_table_exists(name),
        };
        if seen.present.get() {
            return Ok(true);
        }
        let version = self.data_version()?;
        if seen.absent_at.get() == Some(version) {
            return Ok(false);
        }
        let exists = self.query_table_exists(name)?;
        seen.present.set(exists);
        seen.absent_at.set((!exists).then_some(version));
        Ok(exists)
    }

    /// Whether table `name` exists in the main database, from SQLite's
    /// parsed schema (`pragma_table_info`, SQLite ≥ 3.16: a lookup in the
    /// connection's schema, which SQLite re-reads only when another
    /// connection changed it) instead of a scan of `sqlite_master`, whose
    /// pages another connection's commit sends back to the file: 40k
    /// instructions a call after Hermes's store of a turn (callgrind of the
    /// plugin's `tag_messages`, v22, no `session_switch_sent` yet).
    pub(super) fn query_table_exists(&self, name: &str) -> Result<bool, Failure> {
        self.conn
            .prepare_cached("SELECT EXISTS(SELECT 1 FROM pragma_table_info(?1, 'main'))")
            .and_then(|mut stmt| stmt.query_row([name], |row| row.get(0)))
            .map_err(|e| self.fail("read the schema", e))
    }

    /// The first read of the file: it is SQLite (else `SQLITE_NOTADB`) and
    /// has Hermes's two core tables.
    pub(super) fn check_hermes_tables(&self) -> Result<(), Failure> {
        let found: i64 = self
            .conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' \
                 AND name IN ('sessions', 'messages')",
                [],
                |row| row.get(0),
            )
            .map_err(|e| self.fail("read the schema", e))?;
        if found == 2 {
            return Ok(());
        }
        Err(Failure::store(format!(
            "{} is a SQLite database but not Hermes's: it has no `sessions` and `messages` \
             tables; point at Hermes's state.db ($HERMES_HOME/state.db), or create one with \
             `init-db` on a new path",
            self.path.display()
        )))
    }

    pub(super) fn messages_columns(&self) -> Result<Vec<String>, Failure> {
        self.conn
            .prepare("SELECT name FROM pragma_table_info('messages')")
            .and_then(|mut stmt| {
                stmt.query_map([], |row| row.get::<_, String>(0))?
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|e| self.fail("read the columns of messages", e))
    }

    /// `schema_version.version` (the largest, should there be several);
    /// `None` without the table.
    pub(super) fn schema_version(&self) -> Result<Option<i64>, Failure> {
        if !self.query_table_exists("schema_version")? {
            return Ok(None);
        }
        self.conn
            .query_row("SELECT max(version) FROM schema_version", [], |row| {
                row.get::<_, Option<i64>>(0)
            })
            .map_err(|e| self.fail("read the schema version", e))
    }

    /// Whether `messages` has an index on `(session_id, id, …)` (v31's
    /// `idx_messages_session_id`), in which a session's rows come in id
    /// order, so the history's `ORDER BY id` needs no sort.
    ///
    /// SQL: `pragma_index_list('messages')` and `pragma_index_info`
    /// (a read of the schema).
    pub(super) fn messages_indexed_by_session_then_id(&self) -> Result<bool, Failure> {
        self.conn
            .query_row(
                "SELECT EXISTS(SELECT 1 FROM pragma_index_list('messages') AS l \
                 WHERE l.partial = 0 \
                 AND (SELECT name FROM pragma_index_info(l.name) WHERE seqno = 0) = 'session_id' \
                 AND (SELECT name FROM pragma_index_info(l.name) WHERE seqno = 1) = 'id')",
                [],
                |row| row.get(0),
            )
            .map_err(|e| self.fail("read the indexes of messages", e))
    }

    pub(super) fn messages_has_column(&self, column: &str) -> Result<bool, Failure> {
        self.conn
            .query_row(
                "SELECT EXISTS(SELECT 1 FROM pragma_table_info('messages') WHERE name = ?1)",
                [column],
                |row| row.get(0),
            )
            .map_err(|e| self.fail("read the columns of messages", e))
    }
}

/// A clear `no Hermes database at …` before SQLite's generic "unable to
/// open database file".
pub(super) fn check_exists(path: &Path) -> Result<(), Failure> {
    let at = path.display();
    let hint = "set HERMES_HOME or pass the database path, or create one with `init-db`";
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(Failure::store(format!(
            "no Hermes database at {at}: that is a folder; {hint}"
        ))),
        Ok(_) => Ok(()),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            let folder = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let problem = if folder.is_dir() {
                "no such file".to_string()
            } else if folder.exists() {
                format!("{} is not a folder", folder.display())
            } else {
                format!("the folder {} does not exist", folder.display())
            };
            Err(Failure::store(format!(
                "no Hermes database at {at}: {problem}; {hint}"
            )))
        }
        Err(e) => Err(Failure::store(format!(
            "no Hermes database at {at}: cannot read it ({e}); check the permissions of the \
             file and its folders"
        ))),
    }
}
