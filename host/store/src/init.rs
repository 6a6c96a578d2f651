//! `init-db`: a new, empty, Hermes-compatible `state.db` (docs/src/design/contracts.md
//! "Files"), with current Hermes's schema v31 DDL taken from the real
//! fixture (`hermes_v31.sql`).

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use super::HermesStore;
use super::sqlite_failure::sqlite_failure;
use super::timeouts::BUSY_TIMEOUT;
use session_switch_contract::failure::Failure;

/// Current Hermes's DDL, schema v31 (see the file's header for its source).
const HERMES_V31_DDL: &str = include_str!("hermes_v31.sql");

/// The `schema_version` row of a new database; Hermes migrates upward from
/// it when it opens the file.
pub const HERMES_SCHEMA_VERSION: i64 = 31;

impl HermesStore {
    /// Create a Hermes-compatible database at `path` and open it.
    ///
    /// The file gets current Hermes's v31 DDL (tables, indexes, views, FTS5
    /// tables and triggers, verbatim), one `schema_version` row (31), an
    /// empty `state_meta`, and SQLite's default journal mode DELETE, as
    /// Hermes leaves a new file (docs/src/design/contracts.md). It is created with mode 0600,
    /// as Hermes does; a missing parent folder is created. Everything is
    /// written in one `BEGIN IMMEDIATE` transaction.
    ///
    /// Errors: kind `bad-input` when `path` is a folder or a file that is
    /// not empty (never overwritten; a 0-byte file is used); kind `store`
    /// when the folder or file cannot be created or the DDL fails — then a
    /// file this call created is removed again, and a 0-byte file it found
    /// is left empty (the transaction rolled back).
    pub fn init(path: &Path) -> Result<Self, Failure> {
        let created = create_empty(path)?;
        if let Err(failure) = write_schema(path) {
            if created {
                // Nothing of value is in a file we created a moment ago.
                let _ = std::fs::remove_file(path);
            }
            return Err(failure);
        }
        Self::open(path)
    }
}

/// Make sure `path` is an empty file: create it (`true`), or accept an
/// existing 0-byte file (`false`).
fn create_empty(path: &Path) -> Result<bool, Failure> {
    let at = path.display();
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Err(Failure::bad_input(format!(
                "refusing to create a database at {at}: that is a folder; name a file, e.g. \
                 {}",
                path.join("state.db").display()
            )));
        }
        Ok(meta) if meta.len() > 0 => {
            return Err(Failure::bad_input(format!(
                "refusing to create a database at {at}: the file exists and is not empty ({} \
                 bytes); it is used as it is, or move it away first to start over",
                meta.len()
            )));
        }
        Ok(_) => return Ok(false),
        // Not found, or a path component is a file: creating the folder
        // below says which.
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) => {}
        Err(e) => {
            return Err(Failure::store(format!(
                "cannot create a database at {at}: {e}"
            )));
        }
    }
    if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(folder).map_err(|e| {
            Failure::store(format!(
                "cannot create a database at {at}: cannot create the folder {}: {e}",
                folder.display()
            ))
        })?;
    }
    // `create_new`: if another process made the file since the check
    // above, refuse rather than write into it.
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Failure::store(format!("cannot create a database at {at}: {e}")))?;
    Ok(true)
}

/// The DDL and the `schema_version` row, in one transaction.
fn write_schema(path: &Path) -> Result<(), Failure> {
    let fail = |doing: &str, e| sqlite_failure(path, BUSY_TIMEOUT, doing, e);
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn =
        Connection::open_with_flags(path, flags).map_err(|e| fail("open the new database", e))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| fail("set the busy timeout", e))?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| fail("start writing the schema", e))?;
    tx.execute_batch(HERMES_V31_DDL)
        .map_err(|e| fail("create Hermes's v31 schema", e))?;
    tx.execute(
        "INSERT INTO schema_version (version) VALUES (?1)",
        [HERMES_SCHEMA_VERSION],
    )
    .map_err(|e| fail("write schema_version", e))?;
    tx.commit().map_err(|e| fail("commit the new schema", e))
}
