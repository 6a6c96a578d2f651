//! The store half of the send (docs/src/design/send.md#the-atomic-send, docs/src/design/send.md#a-send-never-locks-hermes-out): no lock is held
//! across the room post, so neither Hermes's readers (1 s busy timeout in
//! 0.19.0) nor its writers ever fail because of a send, whatever the
//! transport's latency.
//!
//! A send is three brief write transactions around the post:
//! 1. **intent**: a `state_meta` row `session_switch:pending:<agent>:<token>`
//!    (state `posting`) holding the whole plan; busy → kind `busy`, nothing
//!    posted;
//! 2. the post, with no transaction open;
//! 3. **record**: the history row, its provenance and the agent's record,
//!    and the intent deleted, in one transaction.
//!
//! A post that definitely failed deletes the intent (so does a post that
//! panics); one whose outcome is unknown (a time-out after the request went
//! out) leaves it in state `unknown`, and a process killed during the post
//! leaves it `posting`: in both the room may have the message and the
//! history has not, and `active` reports it until `clear`. ejabberd 23.01
//! cannot be asked afterwards whether the room got a message (no
//! `get_room_history`), so these are reported, never guessed. When the
//! record cannot be written (the database stayed busy, a failing commit),
//! the intent is marked `delivered`: the next `send`, `active` or `clear`
//! writes it ([`HermesStore::complete_pending`]), exactly once: the record
//! transaction deletes the intent and writes only if that deletion removed
//! it.
//!
//! The intents live in `state_meta`, not in a table of ours: a send that
//! failed after its intent leaves no trace but, on an early database that
//! lacked it, an empty `state_meta` (Hermes's own DDL, which Hermes creates
//! the same way; dropping it again could break a Hermes that created it
//! meanwhile).
//!
//! Each transaction runs with a short busy timeout ([`BRIEF_BUSY`]) and is
//! retried whole after a random, growing pause, until the store's write
//! deadline ([`BRIEF_DEADLINE`]): in DELETE mode a `COMMIT` that waits for
//! readers holds a PENDING lock that blocks new readers, so we never wait
//! long while holding it; and the pauses (which hold nothing) leave the lock
//! to Hermes's own writers, whose busy handler polls every few milliseconds.
mod delivered;
mod pending;
mod sent_rows;
mod write;

pub use pending::{PendingSend, PendingState};
pub use sent_rows::{SENT_ROWS, SentRow};
pub use write::{SendWrite, Written};

use rusqlite::params;

use crate::HermesStore;
use pending::intent_json;
use session_switch_contract::clock::unix_now;
use session_switch_contract::failure::{Failure, FailureKind};
use session_switch_contract::keys::pending_key;

/// Our provenance table, docs/src/design/contracts.md's exact DDL, created inside the record
/// transaction (never on open, so reads leave the file untouched), with no
/// foreign key to `messages`: with foreign keys ON one would make Hermes's
/// own deletes and prunes fail.
const CREATE_SENT: &str = "CREATE TABLE IF NOT EXISTS session_switch_sent (message_id INTEGER \
     PRIMARY KEY, agent TEXT NOT NULL, cli_session_id TEXT NOT NULL, sent_at REAL NOT NULL);";

/// The record upsert: replaces the stored record unless it is one the
/// policy would take that is newer than the new record (docs/src/design/contracts.md: "a later
/// send wins over an earlier one by timestamp, not by arrival"; equal
/// timestamps replace). Kept only when the stored value is valid JSON with
/// a non-empty text `session_id` and a numeric `timestamp` later than the
/// new one's, yet at most `?3` seconds (the future skew) after the later of
/// the new one's and the system clock `?4` (a completed intent's timestamp
/// can be hours old). A record dated beyond that, `1e400` included, which
/// SQLite reads as infinity, is refused by the policy as `future-dated`,
/// so keeping it would leave the agent with no record that counts. Nested
/// `CASE` because SQLite does not promise to short-circuit `AND`, and
/// `json_type` of invalid JSON is an error.
const UPSERT_RECORD: &str = "\
    INSERT INTO state_meta (key, value) VALUES (?1, ?2)
    ON CONFLICT(key) DO UPDATE SET value = excluded.value
    WHERE CASE WHEN json_valid(state_meta.value) THEN
              CASE WHEN json_type(state_meta.value, '$.timestamp') IN ('integer', 'real')
                        AND json_type(state_meta.value, '$.session_id') = 'text'
                   THEN json_extract(state_meta.value, '$.session_id') = ''
                        OR json_extract(state_meta.value, '$.timestamp')
                           <= json_extract(excluded.value, '$.timestamp')
                        OR json_extract(state_meta.value, '$.timestamp')
                           > max(json_extract(excluded.value, '$.timestamp'), ?4) + ?3
                   ELSE 1 END
          ELSE 1 END";

impl HermesStore {
    /// Send `w` around `post` (the room post): intent, post, record (see
    /// the module docs for the order and why).
    ///
    /// Errors: kind `bad-input` (before anything is touched) for empty ids,
    /// content with a NUL character (Hermes reads `"\0json:"` content as
    /// multimodal, so none is ever written), a `record_key` that is not ours
    /// (`session_switch:…`; Hermes's keys and the legacy
    /// `xmpp_session_bridge.py`'s key are never written), a `record_value`
    /// that is not a JSON object with a numeric `timestamp`, or a `timestamp`
    /// that is not a positive finite number of Unix seconds; kind `store` for
    /// a read-only file; kind `busy` when the intent could not be written
    /// within the write deadline (nothing posted, nothing written); `post`'s
    /// own failure unchanged (the intent removed), except kind
    /// `unknown-outcome`, whose message then says that `active` reports the
    /// send (the intent kept, state `unknown`); kind `store` when the room
    /// took the message but the record could not be written: the message says
    /// it is pending and must not be sent again.
    pub fn send_write<T>(
        &mut self,
        w: &SendWrite<'_>,
        post: impl FnOnce() -> Result<T, Failure>,
    ) -> Result<(Written, T), Failure> {
        w.check()?;
        let key = pending_key(w.agent, &token(w.timestamp));
        let doing = "record the intent to send";
        self.write_briefly(doing, |tx| {
            // Before the post: a tokenizer that cannot load would fail the
            // record step after the room took the message.
            self.ensure_cjk_tokenizer()?;
            tx.execute_batch(crate::meta::CREATE_STATE_META)
                .and_then(|()| {
                    tx.execute(
                        "INSERT INTO state_meta (key, value) VALUES (?1, ?2)",
                        params![key, intent_json(w, PendingState::Posting)],
                    )
                })
                .map_err(|e| self.fail(doing, e))
        })?;
        // Removes the intent if `post` panics: nothing was recorded.
        let mut guard = IntentGuard {
            store: self,
            key: &key,
            armed: true,
        };
        let posted = post();
        guard.armed = false;
        drop(guard);
        let value = match posted {
            Ok(value) => value,
            Err(failure) if failure.kind == FailureKind::UnknownOutcome => {
                let marked = self.set_intent_state(&key, w, PendingState::Unknown);
                let shown = match marked {
                    Ok(()) => "`active` lists it until `clear`",
                    Err(_) => "`active` lists it as interrupted until `clear`",
                };
                return Err(Failure::new(
                    failure.kind,
                    format!("{}; {shown}", failure.message),
                ));
            }
            Err(failure) => {
                self.drop_intent(&key);
                return Err(failure);
            }
        };
        match self.write_record(&key, w, false) {
            Ok(written) => Ok((
                written.expect("a send's own record is always written"),
                value,
            )),
            Err(e) => {
                // The room has it: say so in state.db, else beside it.
                let marked = self
                    .set_intent_state(&key, w, PendingState::Delivered)
                    .is_ok()
                    || delivered::mark(&self.path, &key)
                        .inspect_err(|io| {
                            tracing::warn!(
                                target: "session_switch::store",
                                "cannot leave the delivered marker of {key} beside {}: {io}",
                                self.path.display()
                            );
                        })
                        .is_ok();
                let how = if marked {
                    "the next send, active or clear writes them"
                } else {
                    "`active` shows the send as interrupted"
                };
                Err(Failure::store(format!(
                    "the message was posted to the room, but state.db could not record it yet \
                     ({}); the history row and the record are pending ({how}): do not send it \
                     again",
                    e.message.trim_end_matches(", try again")
                )))
            }
        }
    }

    /// The record step: the history row, its provenance and the record,
    /// and intent `key` deleted, in one brief transaction. With `only_once`
    /// nothing is written unless that deletion removed the intent (another
    /// call completed or cleared it first): `Ok(None)`.
    pub(super) fn write_record(
        &self,
        key: &str,
        w: &SendWrite<'_>,
        only_once: bool,
    ) -> Result<Option<Written>, Failure> {
        let doing = format!("record the send in session {:?}", w.history_session_id);
        self.write_briefly(&doing, |tx| {
            let sql = |e| self.fail(&doing, e);
            let removed = tx
                .execute("DELETE FROM state_meta WHERE key = ?1", [key])
                .map_err(sql)?;
            if only_once && removed == 0 {
                return Ok(None);
            }
            // Inside the transaction: the schema read is the one we write to.
            self.ensure_cjk_tokenizer()?;
            // v31: the live tip of the XMPP session, read in this transaction
            // (docs/src/design/compression.md, chain.rs); refused before anything is written.
            let target = crate::chain::write_target(tx, self.loader(), w.history_session_id)?;
            tx.execute_batch(CREATE_SENT).map_err(sql)?;
            tx.execute(
                "INSERT INTO sessions (id, source, started_at) VALUES (?1, 'xmpp', ?2) \
                 ON CONFLICT(id) DO NOTHING",
                params![target, w.timestamp],
            )
            .map_err(sql)?;
            let message_id: i64 = tx
                .query_row(
                    "INSERT INTO messages (session_id, role, content, timestamp) \
                     VALUES (?1, 'user', ?2, ?3) RETURNING id",
                    params![target, w.history_content, w.timestamp],
                    |row| row.get(0),
                )
                .map_err(sql)?;
            tx.execute(
                "UPDATE sessions SET message_count = COALESCE(message_count, 0) + 1 WHERE id = ?1",
                [&target],
            )
            .map_err(sql)?;
            // A stale row can only exist if Hermes reset `sqlite_sequence`
            // (ids are AUTOINCREMENT); ours describes the row now.
            tx.execute(
                "INSERT INTO session_switch_sent (message_id, agent, cli_session_id, sent_at) \
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT(message_id) DO UPDATE SET \
                 agent = excluded.agent, cli_session_id = excluded.cli_session_id, \
                 sent_at = excluded.sent_at",
                params![message_id, w.agent, w.cli_session_id, w.timestamp],
            )
            .map_err(sql)?;
            let changed = tx
                .execute(
                    UPSERT_RECORD,
                    params![
                        w.record_key,
                        w.record_value,
                        self.future_skew_seconds,
                        unix_now()
                    ],
                )
                .map_err(sql)?;
            Ok(Some(Written {
                message_id,
                history_session_id: target,
                record_replaced: changed > 0,
            }))
        })
        .inspect(|written| {
            if written.is_some() {
                delivered::unmark(&self.path, key);
            }
        })
    }

    /// Rewrite intent `key` with `state` (it must still exist: a `clear`
    /// in between wins). Errors as [`HermesStore::write_briefly`].
    fn set_intent_state(
        &self,
        key: &str,
        w: &SendWrite<'_>,
        state: PendingState,
    ) -> Result<(), Failure> {
        let doing = format!("mark the send {}", state.as_str());
        let result = self.write_briefly(&doing, |tx| {
            tx.execute(
                "UPDATE state_meta SET value = ?2 WHERE key = ?1",
                params![key, intent_json(w, state)],
            )
            .map_err(|e| self.fail(&doing, e))
        });
        result.map(drop).inspect_err(|e| {
            tracing::warn!(target: "session_switch::store", "{}", e.message);
        })
    }

    /// Delete intent `key` after a post that definitely failed; a failure
    /// here is logged (the intent then shows in `active` as interrupted).
    fn drop_intent(&self, key: &str) {
        let doing = "remove the intent of a failed send";
        let dropped = self.write_briefly(doing, |tx| {
            tx.execute("DELETE FROM state_meta WHERE key = ?1", [key])
                .map_err(|e| self.fail(doing, e))
        });
        if let Err(e) = dropped {
            tracing::warn!(target: "session_switch::store", "{}", e.message);
        }
    }
}

/// Tells this send's intent apart from the agent's others: the send's
/// microseconds and 32 random bits, in hex (no `:`).
fn token(timestamp: f64) -> String {
    format!("{:x}-{:08x}", (timestamp * 1e6) as u64, fastrand::u32(..))
}

/// Deletes the intent when the post unwinds (a panic): nothing was posted
/// that we know of, and nothing recorded.
struct IntentGuard<'a> {
    store: &'a HermesStore,
    key: &'a str,
    armed: bool,
}

impl Drop for IntentGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.store.drop_intent(self.key);
        }
    }
}
