//! The file change counter of a rollback-journal database, read without
//! SQLite's lock: how a served `resolve` learns that nobody committed
//! (docs/src/design/where-the-time-goes.md) with one `pread` instead of a lock cycle.
//!
//! In DELETE (rollback-journal) mode, SQLite's cheapest "did anyone commit?"
//! (`PRAGMA data_version`) takes and drops the shared lock: three `fcntl`
//! locks, a look for a hot journal and a WAL file, a header read, a size
//! check, the unlock: eight system calls, most of a served `resolve`
//! (docs/src/performance.md). The database header
//! says the same in four bytes: the file change counter (offset 24,
//! big-endian), which every transaction that modifies the file increments
//! (<https://sqlite.org/fileformat.html#file_change_counter>).
//!
//! Why an unlocked read is enough for "unchanged": a commit writes the new
//! counter into the file before it releases its lock, so once a commit has
//! returned, any later read sees the new value; a read that races a commit
//! in progress sees the old value (the commit has not happened yet, which
//! is a moment the answer may describe) or the new one (the memo then asks
//! its reads again, under SQLite's lock). A crashed writer's half-written
//! file is only ever read as "changed" or as the state its hot journal
//! restores. Not covered: a writer in `PRAGMA locking_mode = EXCLUSIVE`,
//! which may skip increments (Hermes never uses it; such a writer also
//! locks every reader out), and network file systems whose caches may
//! serve old bytes. In WAL mode (header bytes 18–19 = 2) the counter does
//! not move: the caller asks SQLite instead, whose WAL check needs no
//! system call.
//!
//! The descriptor is not closed while the file exists: POSIX locks belong
//! to the process and the file, so closing any descriptor of `state.db`
//! drops every lock SQLite holds on it in this process (SQLite's "How To
//! Corrupt" §2.2.1), ours and those of any other connection (Hermes's own,
//! inside its gateway). One descriptor per file (device and inode) lives
//! as long as the process, or, once the file is deleted and no store uses
//! it, until the next store opens (a process that goes through many
//! temporary databases, a test run, does not keep one for each).

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::sync::{Arc, LazyLock, Mutex};

/// A file's device and inode.
type FileId = (u64, u64);

/// Every descriptor opened so far, by file; closed only once its file is
/// deleted and no store uses it. (While a descriptor is open its inode
/// cannot be reused, so a key never names two files.)
static OPEN: LazyLock<Mutex<HashMap<FileId, Arc<File>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// A read-only descriptor of one database file, shared by the stores of
/// this process.
#[derive(Clone, Debug)]
pub(super) struct ChangeCounter {
    file: Arc<File>,
}

impl ChangeCounter {
    /// The descriptor of the file at `path`, opened read-only the first
    /// time this process asks for that file.
    pub(super) fn open(path: &Path) -> io::Result<Self> {
        let key = |meta: &std::fs::Metadata| -> FileId { (meta.dev(), meta.ino()) };
        let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
        // A deleted file nobody here reads any more: no process can open
        // it again, so no lock on it protects anything.
        open.retain(|_, file| {
            Arc::strong_count(file) > 1 || file.metadata().map_or(true, |m| m.nlink() > 0)
        });
        if let Some(file) = open.get(&key(&std::fs::metadata(path)?)) {
            return Ok(Self { file: file.clone() });
        }
        let file = File::open(path)?;
        let opened = key(&file.metadata()?);
        let file = match open.get(&opened) {
            // The path moved to a file already open between the two looks:
            // keep the one in the map, and never close this one either.
            Some(known) => {
                let known = known.clone();
                std::mem::forget(file);
                known
            }
            None => open.entry(opened).or_insert(Arc::new(file)).clone(),
        };
        Ok(Self { file })
    }

    /// The change counter, or `None` when the file is in WAL mode (or its
    /// header is shorter than SQLite's: a new, empty file).
    pub(super) fn read(&self) -> io::Result<Option<u32>> {
        let mut header = [0u8; 28];
        let n = self.file.read_at(&mut header, 0)?;
        if n < header.len() || header[18] == 2 || header[19] == 2 {
            return Ok(None);
        }
        Ok(Some(u32::from_be_bytes([
            header[24], header[25], header[26], header[27],
        ])))
    }
}
