//! How the store writes: transactions that hold SQLite's write lock
//! briefly and retry with random pauses, so that Hermes's own readers (1 s
//! busy timeout in 0.19.0) and writers never fail because of us (
//! docs/src/design/contracts.md, docs/src/design/send.md#a-send-never-locks-hermes-out); and only keys of ours are ever written or deleted.

use std::time::{Duration, Instant};

use rusqlite::{Transaction, TransactionBehavior};
use session_switch_contract::failure::{Failure, FailureKind};
use session_switch_contract::keys::{LEGACY_KEY, OUR_KEY_PREFIX, is_our_meta_key, is_prefixed_key};
use std::path::Path;

use super::HermesStore;
use super::sqlite_failure::sqlite_failure;
use super::timeouts::{BRIEF_BUSY, RETRY_JITTER_MS, WRITE_ATTEMPTS};

/// Longest random pause between two attempts of a brief transaction; the
/// pauses grow from ~10 ms towards this, each drawn at random (full jitter),
/// so concurrent sends spread out and Hermes's writers get the lock between.
const MAX_PAUSE: Duration = Duration::from_millis(250);

impl HermesStore {
    /// Start a `BEGIN IMMEDIATE` write transaction: the busy timeout
    /// applies to it, and if SQLite still reports `SQLITE_BUSY` it is tried
    /// again after a random pause, [`WRITE_ATTEMPTS`] times in all; then
    /// kind `busy`.
    pub(super) fn begin_write(&self, doing: &str) -> Result<Transaction<'_>, Failure> {
        let begin = "BEGIN IMMEDIATE";
        self.check_writable(doing)?;
        let started = Instant::now();
        let mut attempt = 1;
        loop {
            // `new_unchecked` takes `&Connection`, so the store's other
            // fields stay readable while the transaction is open.
            match Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate) {
                Ok(tx) => return Ok(tx),
                Err(e) if is_busy(&e) && attempt < WRITE_ATTEMPTS => {
                    attempt += 1;
                    std::thread::sleep(jitter());
                }
                Err(e) if is_busy(&e) => {
                    return Err(Failure::new(
                        FailureKind::Busy,
                        format!(
                            "could not {doing}: {} stayed locked by another connection (e.g. a \
                             Hermes gateway) for {:.1} s ({WRITE_ATTEMPTS} attempts of \
                             {begin}); nothing was written, try again",
                            self.path.display(),
                            started.elapsed().as_secs_f64()
                        ),
                    ));
                }
                Err(e) => return Err(self.fail(doing, e)),
            }
        }
    }

    /// SQLite falls back to read-only when the file is not writable; say so
    /// before a write transaction rather than with the first statement that
    /// writes (kind `store`).
    pub(super) fn check_writable(&self, doing: &str) -> Result<(), Failure> {
        if self
            .conn
            .is_readonly(rusqlite::MAIN_DB)
            .map_err(|e| self.fail(doing, e))?
        {
            return Err(Failure::store(format!(
                "could not {doing}: {} is read-only for this process (SQLite could open it only \
                 for reading); run as the user that owns Hermes's database, and make the file \
                 and its folder writable",
                self.path.display()
            )));
        }
        Ok(())
    }

    /// Run `f` in a `BEGIN IMMEDIATE` transaction and commit; `BEGIN` does
    /// not wait for a lock, what follows waits at most [`BRIEF_BUSY`]; on
    /// `SQLITE_BUSY` anywhere the
    /// transaction is rolled back whole (releasing every lock, also the
    /// PENDING lock of a DELETE-mode `COMMIT` that waited for readers) and
    /// tried again after a random, growing pause (full jitter, up to
    /// [`MAX_PAUSE`]) while the store's write deadline allows; then kind
    /// `busy`, nothing written. A read-only file: kind `store` at once.
    /// Other SQL errors: kind `store`, rolled back.
    pub(super) fn write_briefly<T>(
        &self,
        doing: &str,
        mut f: impl FnMut(&Transaction<'_>) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        self.check_writable(doing)?;
        let started = Instant::now();
        let _restore = BusyGuard::lower(self);
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let attempt: Result<T, Failure> = (|| {
                // `new_unchecked` takes `&Connection`, so `f` may use the
                // store's other fields while the transaction is open.
                // `BEGIN IMMEDIATE` does not wait at all: SQLite's busy
                // handler polls every few milliseconds, and fifty of ours
                // polling would crowd out Hermes's one writer, whose handler
                // polls the same way; our own jittered pauses poll less.
                let _ = self.conn.busy_timeout(Duration::ZERO);
                let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
                    .map_err(|e| self.fail(doing, e))?;
                // Once the write lock is ours, statements and the `COMMIT`
                // (DELETE mode: it waits for readers to finish) wait briefly.
                let _ = self.conn.busy_timeout(BRIEF_BUSY);
                let value = f(&tx)?;
                // A failed COMMIT drops `tx`, which rolls back.
                tx.commit().map_err(|e| self.fail(doing, e))?;
                Ok(value)
            })();
            match attempt {
                Err(failure) if failure.kind == FailureKind::Busy => {
                    let elapsed = started.elapsed();
                    if elapsed >= self.write_deadline {
                        return Err(Failure::new(
                            FailureKind::Busy,
                            format!(
                                "could not {doing}: {} stayed locked by other connections (e.g. \
                                 a Hermes gateway, or a reader in a long transaction) for {:.1} \
                                 s ({attempts} brief attempts); nothing was written, try again",
                                self.path.display(),
                                started.elapsed().as_secs_f64()
                            ),
                        ));
                    }
                    // The last pause ends at the deadline: one more try then.
                    std::thread::sleep(backoff(attempts).min(self.write_deadline - elapsed));
                }
                other => return other,
            }
        }
    }
}

/// Commit `tx`; a `SQLITE_BUSY` `COMMIT` (DELETE mode: readers still hold
/// their shared locks past the busy timeout) leaves the transaction open,
/// so it is tried again like `BEGIN`. Any final error rolls back (the
/// transaction's drop) and is returned.
pub(super) fn commit_with_retry(
    tx: Transaction<'_>,
    path: &Path,
    busy_timeout: Duration,
    doing: &str,
) -> Result<(), Failure> {
    let mut attempt = 1;
    loop {
        match tx.execute_batch("COMMIT") {
            Ok(()) => return Ok(()),
            Err(e) if is_busy(&e) && attempt < WRITE_ATTEMPTS => {
                attempt += 1;
                std::thread::sleep(jitter());
            }
            Err(e) => {
                let failure = sqlite_failure(path, busy_timeout, doing, e);
                return match tx.rollback() {
                    Ok(()) => Err(failure),
                    Err(r) => Err(Failure::new(
                        failure.kind,
                        format!("{failure}; the rollback failed too: {r}"),
                    )),
                };
            }
        }
    }
}

/// Whether a `state_meta` key is ours to delete (`legacy_ok`) or write:
/// `session_switch:` + at least one character, or the legacy
/// `xmpp_session_bridge.py`'s key when `legacy_ok`. Else kind `bad-input`.
pub(super) fn check_our_key(key: &str, legacy_ok: bool) -> Result<(), Failure> {
    if is_prefixed_key(key) || (legacy_ok && is_our_meta_key(key)) {
        return Ok(());
    }
    let allowed = if legacy_ok {
        format!(
            "keys starting with `{OUR_KEY_PREFIX}` and the legacy xmpp_session_bridge.py's `{LEGACY_KEY}`"
        )
    } else {
        format!("keys starting with `{OUR_KEY_PREFIX}`")
    };
    Err(Failure::bad_input(format!(
        "refusing to change state_meta key {key:?}: it is not session-switch's (only {allowed}); \
         Hermes's own keys are left alone"
    )))
}

fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

pub(super) fn jitter() -> Duration {
    Duration::from_millis(fastrand::u64(RETRY_JITTER_MS))
}

/// The pause before attempt `attempts + 1`: random in 1 ms ..= min(10 ms ×
/// 2^(attempts−1), [`MAX_PAUSE`]).
fn backoff(attempts: u32) -> Duration {
    let cap = 10u64.saturating_mul(1 << attempts.saturating_sub(1).min(16));
    let cap = cap.min(MAX_PAUSE.as_millis() as u64);
    Duration::from_millis(fastrand::u64(1..=cap))
}

/// Lowers the store's busy timeout to [`BRIEF_BUSY`] and restores it on drop.
struct BusyGuard<'a> {
    store: &'a HermesStore,
}

impl<'a> BusyGuard<'a> {
    fn lower(store: &'a HermesStore) -> Self {
        let _ = store.conn.busy_timeout(BRIEF_BUSY);
        Self { store }
    }
}

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        let _ = self.store.conn.busy_timeout(self.store.busy_timeout);
    }
}
