//! How long the store waits for SQLite's locks: the busy timeout of every
//! connection, and the bounds of the brief, retried write transactions
//! (`write_tx.rs`).

use std::time::Duration;

/// Busy timeout set on every connection: how long one statement waits for
/// another connection's lock before SQLite reports `SQLITE_BUSY`. Hermes's
/// readers use 5 s (v31); its writers wait 1 s per attempt and retry for up to
/// 20 s.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How often `BEGIN` (and `COMMIT`) is tried when SQLite still
/// reports `SQLITE_BUSY` after the busy timeout; between attempts the store
/// sleeps a random [`RETRY_JITTER_MS`]. Worst case before a `busy` failure:
/// `WRITE_ATTEMPTS × (busy timeout + 150 ms)`.
pub const WRITE_ATTEMPTS: u32 = 3;

/// Range of the random pause between write attempts, in milliseconds; the same
/// range as Hermes 0.19.0's write retry, so that competing writers spread out
/// instead of retrying in lock step.
pub const RETRY_JITTER_MS: std::ops::RangeInclusive<u64> = 20..=150;

/// Busy timeout of the send's brief transactions: a Hermes reader that
/// finds us holding a lock waits at most about this long.
pub const BRIEF_BUSY: Duration = Duration::from_millis(100);

/// How long a send's brief transactions are retried, in all, before kind
/// `busy` (the default of
/// [`HermesStore::set_write_deadline`](super::HermesStore::set_write_deadline)).
pub const BRIEF_DEADLINE: Duration = Duration::from_secs(10);
