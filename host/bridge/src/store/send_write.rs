//! The store half of the send (DESIGN §8 "Send", §9.5): no lock is held
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
use rusqlite::{Transaction, TransactionBehavior, params};

use super::hermes::check_our_key;
use super::{HermesStore, SendWrite, Written};
use session_switch_contract::keys::{pending_key, pending_key_agent};
use session_switch_runtime::{Failure, FailureKind};
use std::time::{Duration, Instant};

/// Hermes's DDL for `state_meta` (missing in early databases; Hermes
/// creates it the same way). The intent step creates nothing else.
const CREATE_STATE_META: &str =
    "CREATE TABLE IF NOT EXISTS state_meta (key TEXT PRIMARY KEY, value TEXT);";

/// Our provenance table, DESIGN §8's exact DDL, created inside the record
/// transaction (never on open, so reads leave the file untouched), with no
/// foreign key to `messages`: with foreign keys ON one would make Hermes's
/// own deletes and prunes fail.
const CREATE_SENT: &str = "CREATE TABLE IF NOT EXISTS session_switch_sent (message_id INTEGER \
     PRIMARY KEY, agent TEXT NOT NULL, cli_session_id TEXT NOT NULL, sent_at REAL NOT NULL);";

/// The record upsert: replaces the stored record unless it is valid JSON
/// whose numeric `timestamp` is newer than the new record's (DESIGN §8: "a
/// later send wins over an earlier one by timestamp, not by arrival"; equal
/// timestamps replace). Nested `CASE` because SQLite does not promise to
/// short-circuit `AND`, and `json_type` of invalid JSON is an error.
const UPSERT_RECORD: &str = "\
    INSERT INTO state_meta (key, value) VALUES (?1, ?2)
    ON CONFLICT(key) DO UPDATE SET value = excluded.value
    WHERE CASE WHEN json_valid(state_meta.value) THEN
              CASE WHEN json_type(state_meta.value, '$.timestamp') IN ('integer', 'real')
                   THEN json_extract(state_meta.value, '$.timestamp')
                        <= json_extract(excluded.value, '$.timestamp')
                   ELSE 1 END
          ELSE 1 END";

/// The pending keys, as a key range (not `LIKE`, which ignores case and
/// treats `_` as a wildcard): `;` is the character after `:`.
const SELECT_PENDING: &str = "SELECT key, CAST(value AS TEXT) FROM state_meta \
     WHERE key >= 'session_switch:pending:' AND key < 'session_switch:pending;' ORDER BY key";

/// Busy timeout of the send's brief transactions: a Hermes reader that
/// finds us holding a lock waits at most about this long.
pub const BRIEF_BUSY: Duration = Duration::from_millis(100);

/// How long a send's brief transactions are retried, in all, before kind
/// `busy` (the default of [`HermesStore::set_write_deadline`]).
pub const BRIEF_DEADLINE: Duration = Duration::from_secs(10);

/// Longest random pause between two attempts of a brief transaction; the
/// pauses grow from ~10 ms towards this, each drawn at random (full jitter),
/// so concurrent sends spread out and Hermes's writers get the lock between.
const MAX_PAUSE: Duration = Duration::from_millis(250);

/// Where a send between its intent and its record stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PendingState {
    /// The post is running, or the process died during it: the room may
    /// have the message ([`PendingSend::process_alive`] tells which).
    Posting,
    /// The post timed out after the request went out: the room may have it.
    Unknown,
    /// The room took it; the history row and the record wait for the
    /// database ([`HermesStore::complete_pending`] writes them).
    Delivered,
    /// A value under our pending prefix that is not an intent of ours.
    Malformed,
}

impl PendingState {
    /// `posting`, `unknown`, `delivered`, `malformed` (the JSON values).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Posting => "posting",
            Self::Unknown => "unknown",
            Self::Delivered => "delivered",
            Self::Malformed => "malformed",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "posting" => Self::Posting,
            "unknown" => Self::Unknown,
            "delivered" => Self::Delivered,
            _ => return None,
        })
    }
}

/// A send that reached the room, or may have, without its history row.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingSend {
    /// Its `state_meta` key, `session_switch:pending:<agent>:<token>`.
    pub key: String,
    pub agent: String,
    pub state: PendingState,
    /// `state` is [`PendingState::Delivered`].
    pub delivered: bool,
    /// For [`PendingState::Posting`]: the process that wrote the intent is
    /// still running (the send is in progress), as far as this machine can
    /// tell; `false` means it died during the post.
    pub process_alive: bool,
    /// Unix seconds of the send (0 when malformed).
    pub created_at: f64,
    /// The history row's content (`[YOU] ` + the body; empty when malformed).
    pub body: String,
    pub cli_session_id: String,
}

impl HermesStore {
    /// Send `w` around `post` (the room post): intent, post, record (see
    /// the module docs for the order and why).
    ///
    /// Errors: kind `bad-input` (before anything is touched) for empty ids,
    /// content with a NUL character (Hermes reads `"\0json:"` content as
    /// multimodal, so none is ever written), a `record_key` that is not
    /// ours (`session_switch:…`; Hermes's keys and the seed's key are never
    /// written), a `record_value` that is not a JSON object with a numeric
    /// `timestamp`, or a `timestamp` that is not a positive finite number of
    /// Unix seconds; kind `store` for a read-only file; kind `busy` when the
    /// intent could not be written within the write deadline (nothing
    /// posted, nothing written); `post`'s own failure unchanged (the intent
    /// removed), except kind `unknown-outcome`, whose message then says that
    /// `active` reports the send (the intent kept, state `unknown`); kind
    /// `store` when the room took the message but the record could not be
    /// written: the message says it is pending and must not be sent again.
    pub fn send_write<T>(
        &mut self,
        w: &SendWrite<'_>,
        post: impl FnOnce() -> Result<T, Failure>,
    ) -> Result<(Written, T), Failure> {
        validate(w)?;
        let key = pending_key(w.agent, &token(w.timestamp));
        let doing = "record the intent to send";
        self.write_briefly(doing, |tx| {
            // Before the post: a tokenizer that cannot load would fail the
            // record step after the room took the message.
            self.ensure_cjk_tokenizer()?;
            tx.execute_batch(CREATE_STATE_META)
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
                let how = match self.set_intent_state(&key, w, PendingState::Delivered) {
                    Ok(()) => "the next send, active or clear writes them",
                    Err(_) => "`active` shows the send as interrupted",
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

    /// Write the sends that reached the room but not the database (intents
    /// in state `delivered`), oldest first; each in one transaction that
    /// writes only if it removes its intent, so this writes each send once
    /// even when two processes run it at the same time. Returns what was
    /// written.
    ///
    /// Errors: as [`HermesStore::send_write`]'s record step (kind `busy`
    /// past the write deadline, kind `store`); what was written before the
    /// error stays written, the rest stays pending.
    pub fn complete_pending(&mut self) -> Result<Vec<Written>, Failure> {
        let mut written = Vec::new();
        for (key, intent) in self.read_intents()? {
            let Some(intent) = intent else { continue };
            if intent.state != PendingState::Delivered {
                continue;
            }
            if let Some(w) = self.write_record(&key, &intent.as_write(), true)? {
                written.push(w);
            }
        }
        Ok(written)
    }

    /// Every pending send (an intent under `session_switch:pending:`), by
    /// key; empty when `state_meta` is missing. A read: changes nothing.
    ///
    /// Errors: kind `busy` past the busy timeout, kind `store`.
    pub fn pending_sends(&self) -> Result<Vec<PendingSend>, Failure> {
        let mut pending: Vec<PendingSend> = self
            .read_intents()?
            .into_iter()
            .map(|(key, intent)| {
                let agent = pending_key_agent(&key).unwrap_or_default().to_owned();
                match intent {
                    Some(i) => PendingSend {
                        agent,
                        state: i.state,
                        delivered: i.state == PendingState::Delivered,
                        process_alive: i.state == PendingState::Posting && process_alive(i.pid),
                        created_at: i.timestamp,
                        body: i.content,
                        cli_session_id: i.cli_session_id,
                        key,
                    },
                    None => PendingSend {
                        agent,
                        state: PendingState::Malformed,
                        delivered: false,
                        process_alive: false,
                        created_at: 0.0,
                        body: String::new(),
                        cli_session_id: String::new(),
                        key,
                    },
                }
            })
            .collect();
        pending.sort_by(|a, b| a.created_at.total_cmp(&b.created_at));
        Ok(pending)
    }

    /// Forget the pending sends of `agent` (or of every agent): their
    /// intents are deleted, in one brief transaction. Returns how many.
    /// Completing the delivered ones first is the caller's choice
    /// ([`HermesStore::complete_pending`]).
    ///
    /// Errors: kind `busy` past the write deadline (nothing deleted), kind
    /// `store`.
    pub fn clear_pending(&mut self, agent: Option<&str>) -> Result<usize, Failure> {
        let keys: Vec<String> = self
            .read_intents()?
            .into_iter()
            .map(|(key, _)| key)
            .filter(|key| agent.is_none_or(|a| pending_key_agent(key) == Some(a)))
            .collect();
        if keys.is_empty() {
            return Ok(0);
        }
        let doing = "forget the pending sends";
        self.write_briefly(doing, |tx| {
            let mut removed = 0;
            for key in &keys {
                removed += tx
                    .execute("DELETE FROM state_meta WHERE key = ?1", [key])
                    .map_err(|e| self.fail(doing, e))?;
            }
            Ok(removed)
        })
    }

    /// The pending keys with their intents (`None`: not one of ours).
    fn read_intents(&self) -> Result<Vec<(String, Option<Intent>)>, Failure> {
        if !self.table_exists("state_meta")? {
            return Ok(Vec::new());
        }
        let doing = "read the pending sends";
        let mut stmt = self
            .conn
            .prepare_cached(SELECT_PENDING)
            .map_err(|e| self.fail(doing, e))?;
        let rows = stmt
            .query_map([], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?))
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.fail(doing, e))?;
        Ok(rows
            .into_iter()
            .map(|(key, value)| {
                let intent = value
                    .as_deref()
                    .and_then(Intent::parse)
                    .filter(|i| pending_key_agent(&key) == Some(i.agent.as_str()));
                (key, intent)
            })
            .collect())
    }

    /// The record step: the history row, its provenance and the record,
    /// and intent `key` deleted, in one brief transaction. With `only_once`
    /// nothing is written unless that deletion removed the intent (another
    /// call completed or cleared it first): `Ok(None)`.
    fn write_record(
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
            // (DESIGN §9.4, chain.rs); refused before anything is written.
            let target = super::chain::write_target(tx, self.loader(), w.history_session_id)?;
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
                .execute(UPSERT_RECORD, params![w.record_key, w.record_value])
                .map_err(sql)?;
            Ok(Some(Written {
                message_id,
                history_session_id: target,
                record_replaced: changed > 0,
            }))
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

    /// Run `f` in a `BEGIN IMMEDIATE` transaction and commit; `BEGIN` does
    /// not wait for a lock, what follows waits at most [`BRIEF_BUSY`]; on
    /// `SQLITE_BUSY` anywhere the
    /// transaction is rolled back whole (releasing every lock, also the
    /// PENDING lock of a DELETE-mode `COMMIT` that waited for readers) and
    /// tried again after a random, growing pause (full jitter, up to
    /// [`MAX_PAUSE`]) while the store's write deadline allows; then kind
    /// `busy`, nothing written. A read-only file: kind `store` at once.
    /// Other SQL errors: kind `store`, rolled back.
    fn write_briefly<T>(
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

/// The pause before attempt `attempts + 1`: random in 1 ms ..= min(10 ms ×
/// 2^(attempts−1), [`MAX_PAUSE`]).
fn backoff(attempts: u32) -> Duration {
    let cap = 10u64.saturating_mul(1 << attempts.saturating_sub(1).min(16));
    let cap = cap.min(MAX_PAUSE.as_millis() as u64);
    Duration::from_millis(fastrand::u64(1..=cap))
}

/// Tells this send's intent apart from the agent's others: the send's
/// microseconds and 32 random bits, in hex (no `:`).
fn token(timestamp: f64) -> String {
    format!("{:x}-{:08x}", (timestamp * 1e6) as u64, fastrand::u32(..))
}

/// Whether process `pid` runs on this machine (signal 0; `EPERM` means it
/// exists under another user).
fn process_alive(pid: Option<u32>) -> bool {
    let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) else {
        return false;
    };
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(e) => e == nix::errno::Errno::EPERM,
    }
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

/// A send's intent as stored: its state, the writer's process id, and the
/// [`SendWrite`] the record step needs.
struct Intent {
    state: PendingState,
    pid: Option<u32>,
    agent: String,
    history_session_id: String,
    content: String,
    cli_session_id: String,
    record_key: String,
    record_value: String,
    timestamp: f64,
}

/// The intent's JSON value: `state`, `pid`, and the plan's fields.
fn intent_json(w: &SendWrite<'_>, state: PendingState) -> String {
    serde_json::json!({
        "state": state.as_str(),
        "pid": std::process::id(),
        "agent": w.agent,
        "history_session_id": w.history_session_id,
        "history_content": w.history_content,
        "cli_session_id": w.cli_session_id,
        "record_key": w.record_key,
        "record_value": w.record_value,
        "timestamp": w.timestamp,
    })
    .to_string()
}

impl Intent {
    /// `None` unless `text` is an intent this host wrote: every field, a
    /// known state, and a plan that passes [`validate`] (so completing it
    /// can never write what a send could not).
    fn parse(text: &str) -> Option<Self> {
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        let s = |k: &str| v.get(k)?.as_str().map(str::to_owned);
        let intent = Self {
            state: PendingState::parse(v.get("state")?.as_str()?)?,
            pid: v
                .get("pid")
                .and_then(serde_json::Value::as_u64)
                .and_then(|p| u32::try_from(p).ok()),
            agent: s("agent")?,
            history_session_id: s("history_session_id")?,
            content: s("history_content")?,
            cli_session_id: s("cli_session_id")?,
            record_key: s("record_key")?,
            record_value: s("record_value")?,
            timestamp: v.get("timestamp")?.as_f64()?,
        };
        validate(&intent.as_write()).ok()?;
        Some(intent)
    }

    fn as_write(&self) -> SendWrite<'_> {
        SendWrite {
            agent: &self.agent,
            history_session_id: &self.history_session_id,
            history_content: &self.content,
            cli_session_id: &self.cli_session_id,
            record_key: &self.record_key,
            record_value: &self.record_value,
            timestamp: self.timestamp,
        }
    }
}

/// Refuse (kind `bad-input`) what must never be written; see
/// [`HermesStore::send_write`].
fn validate(w: &SendWrite<'_>) -> Result<(), Failure> {
    for (name, value) in [
        ("agent", w.agent),
        ("history session id", w.history_session_id),
        ("CLI session id", w.cli_session_id),
        ("history content", w.history_content),
    ] {
        if value.is_empty() {
            return Err(Failure::bad_input(format!(
                "refusing to write a send with an empty {name}"
            )));
        }
    }
    if w.history_content.contains('\0') {
        return Err(Failure::bad_input(
            "refusing to write history content with a NUL character (Hermes reads content \
             starting with NUL + `json:` as multimodal parts); normalise the body first",
        ));
    }
    check_our_key(w.record_key, false)?;
    if !(w.timestamp.is_finite() && w.timestamp > 0.0) {
        return Err(Failure::bad_input(format!(
            "refusing to write a send with timestamp {}: it must be Unix seconds > 0",
            w.timestamp
        )));
    }
    let record: Option<serde_json::Value> = serde_json::from_str(w.record_value).ok();
    let timestamp = record
        .as_ref()
        .and_then(|r| r.as_object())
        .and_then(|r| r.get("timestamp"))
        .filter(|t| t.is_number());
    if timestamp.is_none() {
        return Err(Failure::bad_input(format!(
            "refusing to write record {:?}: its value is not a JSON object with a numeric \
             \"timestamp\" (DESIGN §8): {}",
            w.record_key, w.record_value
        )));
    }
    Ok(())
}
