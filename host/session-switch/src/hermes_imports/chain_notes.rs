//! What following Hermes's compression chains did during a call (
//! docs/src/design/compression.md), noted for the callers that report it.

use std::sync::{Arc, Mutex, MutexGuard};

/// What following compression chains did during calls (docs/src/design/compression.md), for
/// callers that report it
/// ([`HermesImports::reporting`](super::HermesImports::reporting)).
#[derive(Clone, Debug, PartialEq)]
pub enum ChainNote {
    /// Record `key` names `recorded`, which Hermes ended by compression: the
    /// policy was given the record with `session_id` = `tip`.
    RecordFollowed {
        key: String,
        recorded: String,
        tip: String,
    },
    /// `session` (a record's target, a send's CLI session) may not be
    /// redirected to or recorded: `why`, a sentence.
    Refused { session: String, why: String },
    /// A send wrote its `[YOU]` row into `written`; the plan named
    /// `configured` (equal when the session was not compressed).
    Wrote { configured: String, written: String },
    /// The history of `asked`, which Hermes ended by compression, was read
    /// from its live tip `tip`, as Hermes's API server loads it.
    HistoryFollowed { asked: String, tip: String },
}

/// The notes of one [`HermesImports`], shared with its caller.
pub type ChainNotes = Arc<Mutex<Vec<ChainNote>>>;

/// Add `n` to `notes` when a caller keeps them: imports nobody asked for
/// notes (a gateway's pooled instances) keep none, or the list would grow
/// with every call.
pub(super) fn note(notes: &Option<ChainNotes>, n: ChainNote) {
    if let Some(notes) = notes {
        lock_notes(notes).push(n);
    }
}

/// The notes, also after a panic elsewhere held the lock (they are only
/// ever appended to).
pub fn lock_notes(notes: &ChainNotes) -> MutexGuard<'_, Vec<ChainNote>> {
    notes.lock().unwrap_or_else(|e| e.into_inner())
}
