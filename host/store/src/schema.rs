//! What a database is: a Hermes `state.db` (its core tables), which
//! schema (`schema_version`, `messages` columns, indexes), which tables
//! exist. Reads of SQLite's schema over a connection; the caller names
//! what it was doing in a failure.

use std::path::Path;

use rusqlite::Connection;
use session_switch_contract::failure::Failure;

/// Whether table `name` exists in the main database, from SQLite's parsed
/// schema (`pragma_table_info`, SQLite ≥ 3.16: a lookup in the connection's
/// schema, which SQLite re-reads only when another connection changed it)
/// instead of a scan of `sqlite_master`, whose pages another connection's
/// commit sends back to the file, costly after every Hermes store of a turn
/// (in the plugin's `tag_messages`).
pub(super) fn table_exists(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT EXISTS(SELECT 1 FROM pragma_table_info(?1, 'main'))")
        .and_then(|mut stmt| stmt.query_row([name], |row| row.get(0)))
}

/// The first read of the file: whether it has Hermes's two core tables
/// (an error `SQLITE_NOTADB` when it is not SQLite). See [`not_hermes`].
pub(super) fn has_hermes_tables(conn: &Connection) -> rusqlite::Result<bool> {
    let found: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' \
         AND name IN ('sessions', 'messages')",
        [],
        |row| row.get(0),
    )?;
    Ok(found == 2)
}

/// The failure of a SQLite file at `path` without Hermes's core tables.
pub(super) fn not_hermes(path: &Path) -> Failure {
    Failure::store(format!(
        "{} is a SQLite database but not Hermes's: it has no `sessions` and `messages` \
         tables; point at Hermes's state.db ($HERMES_HOME/state.db), or create one with \
         `init-db` on a new path",
        path.display()
    ))
}

/// The columns of `messages`.
pub(super) fn messages_columns(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    conn.prepare("SELECT name FROM pragma_table_info('messages')")
        .and_then(|mut stmt| {
            stmt.query_map([], |row| row.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()
        })
}

/// `schema_version.version` (the largest, should there be several);
/// `None` without the table.
pub(super) fn schema_version(conn: &Connection) -> rusqlite::Result<Option<i64>> {
    if !table_exists(conn, "schema_version")? {
        return Ok(None);
    }
    conn.query_row("SELECT max(version) FROM schema_version", [], |row| {
        row.get::<_, Option<i64>>(0)
    })
}

/// Whether `messages` has an index on `(session_id, id, …)` (v31's
/// `idx_messages_session_id`), in which a session's rows come in id
/// order, so the history's `ORDER BY id` needs no sort.
///
/// SQL: `pragma_index_list('messages')` and `pragma_index_info`
/// (a read of the schema).
pub(super) fn messages_indexed_by_session_then_id(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT EXISTS(SELECT 1 FROM pragma_index_list('messages') AS l \
         WHERE l.partial = 0 \
         AND (SELECT name FROM pragma_index_info(l.name) WHERE seqno = 0) = 'session_id' \
         AND (SELECT name FROM pragma_index_info(l.name) WHERE seqno = 1) = 'id')",
        [],
        |row| row.get(0),
    )
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
