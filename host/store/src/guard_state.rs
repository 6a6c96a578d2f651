//! The loop guard's state in `state_meta` (docs/src/design/loop-guard.md): one brief write
//! transaction around a policy `admit`, so that reading and writing an
//! agent's guard state is atomic against the other bots and CLI calls on
//! the same database (two bots of one agent, or a bot and `admit` by hand,
//! must not both count from the same old counter).
//!
//! The transaction follows the send's rules for brief transactions
//! (`send/mod.rs`, docs/src/design/send.md#a-send-never-locks-hermes-out): `BEGIN IMMEDIATE` does not wait on a lock
//! (busy timeout 0: SQLite's busy handler polling from many bots would crowd
//! out Hermes's writer), the statements and the `COMMIT` wait at most
//! [`BRIEF_BUSY`], and a locked `BEGIN` is retried after a random, growing
//! pause until the store's write deadline. The policy call inside is pure
//! computation over one small JSON value (well under a millisecond), so the
//! write lock is held only that long.

use super::HermesStore;
use super::timeouts::BRIEF_BUSY;
use super::write_tx::check_our_key;
use session_switch_contract::failure::{Failure, FailureKind};
use session_switch_contract::keys::GUARD_KEY_PREFIX;
use std::time::{Duration, Instant};

/// Longest random pause between two `BEGIN IMMEDIATE` attempts.
const MAX_PAUSE: Duration = Duration::from_millis(250);

impl HermesStore {
    /// Open the loop guard's write transaction: `BEGIN IMMEDIATE`, retried
    /// while the database is locked until the write deadline
    /// ([`HermesStore::set_write_deadline`], default 10 s); afterwards the
    /// busy timeout is [`BRIEF_BUSY`] until [`HermesStore::end_state_write`].
    ///
    /// Errors: kind `busy` past the deadline (nothing written), kind `store`
    /// for a read-only file or any other SQLite error, kind `bad-input` when
    /// a transaction is already open on this connection.
    pub fn begin_state_write(&mut self) -> Result<(), Failure> {
        let doing = "begin the loop guard's write";
        if !self.conn.is_autocommit() {
            return Err(Failure::bad_input(format!(
                "could not {doing}: a transaction is already open on this connection"
            )));
        }
        self.check_writable(doing)?;
        let started = Instant::now();
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let _ = self.conn.busy_timeout(Duration::ZERO);
            match self.run_cached("BEGIN IMMEDIATE") {
                Ok(()) => {
                    let _ = self.conn.busy_timeout(BRIEF_BUSY);
                    return Ok(());
                }
                Err(e) => {
                    let failure = self.fail(doing, e);
                    let elapsed = started.elapsed();
                    if failure.kind != FailureKind::Busy || elapsed >= self.write_deadline {
                        self.restore_busy_timeout();
                        if failure.kind == FailureKind::Busy {
                            return Err(Failure::new(
                                FailureKind::Busy,
                                format!(
                                    "could not {doing}: {} stayed locked by other connections \
                                     for {:.1} s ({attempts} attempts); nothing was decided, \
                                     try again",
                                    self.path.display(),
                                    elapsed.as_secs_f64()
                                ),
                            ));
                        }
                        return Err(failure);
                    }
                    std::thread::sleep(pause(attempts).min(self.write_deadline - elapsed));
                }
            }
        }
    }

    /// Set `key` to `value` inside [`HermesStore::begin_state_write`]'s
    /// transaction: `CREATE TABLE IF NOT EXISTS state_meta` (Hermes's DDL),
    /// then an upsert. Only loop-guard keys (`session_switch:loop:…`):
    /// anything else, and a call outside that transaction, is kind
    /// `bad-input` before the database is touched. SQLite errors: kind
    /// `store` (`busy` when locked past [`BRIEF_BUSY`]).
    pub fn meta_set(&self, key: &str, value: &str) -> Result<(), Failure> {
        check_our_key(key, false)?;
        if !key.starts_with(GUARD_KEY_PREFIX) {
            return Err(Failure::bad_input(format!(
                "refusing to set state_meta key {key:?}: only the loop guard's keys \
                 (`{GUARD_KEY_PREFIX}…`) are set this way"
            )));
        }
        if self.conn.is_autocommit() {
            return Err(Failure::bad_input(format!(
                "refusing to set state_meta key {key:?} outside the loop guard's transaction"
            )));
        }
        self.meta_upsert_in_tx(key, value)
    }

    /// End the transaction of [`HermesStore::begin_state_write`]: `COMMIT`
    /// when `commit`, else `ROLLBACK`. A failed commit (kind `busy` when
    /// readers held the file past [`BRIEF_BUSY`]) is rolled back, never left
    /// waiting: the state is as before the call. Restores the busy timeout.
    /// Does nothing when no transaction is open.
    pub fn end_state_write(&mut self, commit: bool) -> Result<(), Failure> {
        if self.conn.is_autocommit() {
            self.restore_busy_timeout();
            return Ok(());
        }
        let ended = if commit {
            self.run_cached("COMMIT").map_err(|e| {
                let failure = self.fail("commit the loop guard's state", e);
                let _ = self.run_cached("ROLLBACK");
                failure
            })
        } else {
            self.run_cached("ROLLBACK")
                .map_err(|e| self.fail("roll back the loop guard's write", e))
        };
        self.restore_busy_timeout();
        ended
    }

    fn restore_busy_timeout(&self) {
        let _ = self.conn.busy_timeout(self.busy_timeout);
    }
}

/// The pause before attempt `attempts + 1`: random in 1 ms ..= min(10 ms ×
/// 2^(attempts−1), [`MAX_PAUSE`]) (full jitter, as the send's).
fn pause(attempts: u32) -> Duration {
    let cap = 10u64.saturating_mul(1 << attempts.saturating_sub(1).min(16));
    let cap = cap.min(MAX_PAUSE.as_millis() as u64);
    Duration::from_millis(fastrand::u64(1..=cap))
}
