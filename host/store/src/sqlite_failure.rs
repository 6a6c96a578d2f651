//! How a SQLite error on Hermes's `state.db` becomes a [`Failure`]: the kind
//! decides the CLI's exit status (docs/src/design/contracts.md), the line says what failed,
//! where, and what to do.

use std::path::Path;
use std::time::Duration;

use rusqlite::ErrorCode;

use session_switch_contract::failure::{Failure, FailureKind};

/// Turn `error`, raised while `doing` (e.g. `"read the history"`) on the
/// database at `path`, into a [`Failure`].
///
/// `SQLITE_BUSY` / `SQLITE_LOCKED` (the busy timeout `busy_timeout` ran out)
/// become kind `busy`; everything else becomes kind `store`, with a hint for
/// the cases a person can fix (read-only file, not a database, cannot open).
pub(crate) fn sqlite_failure(
    path: &Path,
    busy_timeout: Duration,
    doing: &str,
    error: rusqlite::Error,
) -> Failure {
    let at = path.display();
    let Some(code) = error.sqlite_error_code() else {
        return Failure::store(format!("could not {doing} in {at}: {error}"));
    };
    match code {
        ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => Failure::new(
            FailureKind::Busy,
            format!(
                "could not {doing}: {at} stayed locked by another connection (e.g. a Hermes \
                 gateway) for more than {:.1} s; nothing was written, try again",
                busy_timeout.as_secs_f64()
            ),
        ),
        ErrorCode::ReadOnly => Failure::store(format!(
            "could not {doing}: {at} is read-only for this process ({error}); run as the user \
             that owns Hermes's database, and make the file and its folder writable (a WAL-mode \
             database needs its folder writable even to be read, for its -wal and -shm files)"
        )),
        ErrorCode::NotADatabase => Failure::store(format!(
            "could not {doing}: {at} is not a SQLite database ({error}); point at Hermes's \
             state.db, or create a new one with `init-db`"
        )),
        ErrorCode::CannotOpen | ErrorCode::PermissionDenied => Failure::store(format!(
            "could not {doing}: cannot open {at} ({error}); check that this user may read and \
             write the file and its folder (a WAL-mode database needs its -wal and -shm files \
             beside it)"
        )),
        ErrorCode::DatabaseCorrupt => Failure::store(format!(
            "could not {doing}: {at} is damaged ({error}); run `sqlite3 {at} 'PRAGMA \
             integrity_check'` and restore it from a backup"
        )),
        ErrorCode::DiskFull => Failure::store(format!(
            "could not {doing} in {at}: the disk is full ({error}); free some space"
        )),
        _ if error.to_string().contains("no such tokenizer") => Failure::store(format!(
            "could not {doing} in {at}: {error}; the database's full-text triggers need a \
             tokenizer extension this connection has not loaded (for Hermes's CJK index set \
             HERMES_FTS5_CJK_SO)"
        )),
        _ => Failure::store(format!("could not {doing} in {at}: {error}")),
    }
}
