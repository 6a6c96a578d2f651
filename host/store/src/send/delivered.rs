//! The last word on a send the room took while `state.db` refused both the
//! record step and the intent's `delivered` mark (locked past the write
//! deadline each time): an empty marker file beside the database says the
//! room has it, so the next `send`, `active` or `clear` still writes the
//! history row and the record, once (docs/src/design/send.md#a-send-never-locks-hermes-out: a message the room
//! accepted is recorded). A file, because the database is exactly what
//! could not be written; it is looked at only for intents still marked
//! `posting`, and removed when its intent is written or forgotten.

use std::fs::{self, DirBuilder, File};
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// `<db>.session-switch-delivered/` (mode 0700) beside the database.
fn folder(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".session-switch-delivered");
    db.with_file_name(name)
}

/// The marker of intent `key`: its key in hex (keys hold `:`).
fn marker(db: &Path, key: &str) -> PathBuf {
    let name: String = key.bytes().map(|b| format!("{b:02x}")).collect();
    folder(db).join(name)
}

/// Leave the marker of intent `key`, synced to disk with its folder so it
/// outlives a crash. Errors: the folder or file cannot be made (then the
/// send shows as interrupted, since nothing says the room took it).
pub(super) fn mark(db: &Path, key: &str) -> io::Result<()> {
    let dir = folder(db);
    DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
    File::create(marker(db, key))?.sync_all()?;
    File::open(&dir)?.sync_all()
}

/// Whether intent `key` has a marker.
pub(super) fn is_marked(db: &Path, key: &str) -> bool {
    marker(db, key).exists()
}

/// Remove the marker of intent `key`, and the folder once it is empty; a
/// marker that is not there is no error.
pub(super) fn unmark(db: &Path, key: &str) {
    if fs::remove_file(marker(db, key)).is_ok() {
        let _ = fs::remove_dir(folder(db));
    }
}
