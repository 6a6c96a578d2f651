//! The store half of the send (DESIGN §8 "Send", §9.5): no lock is held
//! across the room post, so neither Hermes's readers (1 s busy timeout in
//! 0.19.0) nor its writers ever fail because of a send, whatever the
//! transport's latency.
//!
//! A send is three short write transactions around the post:
//! 1. **intent**: a row in `session_switch_pending` (state `posting`) with
//!    the whole plan; busy → kind `busy`, nothing posted;
//! 2. the post, with no transaction open;
//! 3. **record**: the history row, its provenance and the agent's record,
//!    and the intent deleted, in one transaction.
//! A post that failed deletes the intent. When the record cannot be written
//! (the database stayed busy), the intent is marked `delivered`: the next
//! `send`, `active` or `clear` writes it ([`HermesStore::complete_pending`],
//! idempotent: the intent's deletion commits with the rows). A process
//! killed during the post leaves a `posting` intent: the room may have the
//! message and the history has not; `active` reports it.
//!
//! Each transaction runs with a short busy timeout ([`BRIEF_BUSY`]) and is
//! retried whole after a random pause: in DELETE mode a `COMMIT` that waits
//! for readers holds a PENDING lock that blocks new readers, so we never
//! wait long while holding it.
use rusqlite::{TransactionBehavior, params};

use super::hermes::check_our_key;
use super::{HermesStore, SendWrite, Written};
use session_switch_runtime::{Failure, FailureKind};
use std::time::Duration;

/// Our tables, created inside the first write transaction, never on
/// open (so reads leave the file untouched). `state_meta` is exactly
/// Hermes's DDL (missing in early databases; Hermes creates it the same
/// way). `session_switch_sent` is DESIGN §8's exact DDL, with no foreign key
/// to `messages`: with foreign keys ON one would make Hermes's own deletes
/// and prunes fail.
const CREATE_OUR_TABLES: &str = "\
    CREATE TABLE IF NOT EXISTS state_meta (key TEXT PRIMARY KEY, value TEXT);
    CREATE TABLE IF NOT EXISTS session_switch_sent (message_id INTEGER PRIMARY KEY, \
        agent TEXT NOT NULL, cli_session_id TEXT NOT NULL, sent_at REAL NOT NULL);
    CREATE TABLE IF NOT EXISTS session_switch_pending (id INTEGER PRIMARY KEY, \
        agent TEXT NOT NULL, state TEXT NOT NULL, created_at REAL NOT NULL, plan TEXT NOT NULL);";

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
    /// Unix seconds; kind `busy` when the intent could not be written
    /// (nothing posted); `post`'s own failure unchanged (the intent removed);
    /// kind `store` when the room took the message but the record could not
    /// be written: the message says it is pending and must not be sent again.
    pub fn send_write<T>(
        &mut self,
        w: &SendWrite<'_>,
        post: impl FnOnce() -> Result<T, Failure>,
    ) -> Result<(Written, T), Failure> {
        validate(w)?;
        let plan = plan_json(w);
        let doing = "record the intent to send";
        let intent = self.write_briefly(doing, |tx| {
            self.ensure_cjk_tokenizer()?;
            tx.execute_batch(CREATE_OUR_TABLES)
                .and_then(|()| {
                    tx.query_row(
                        "INSERT INTO session_switch_pending (agent, state, created_at, plan) \
                         VALUES (?1, 'posting', ?2, ?3) RETURNING id",
                        params![w.agent, w.timestamp, plan],
                        |row| row.get::<_, i64>(0),
                    )
                })
                .map_err(|e| self.fail(doing, e))
        })?;
        let value = match post() {
            Ok(value) => value,
            Err(failure) => {
                let doing = "remove the intent of a failed send";
                let dropped = self.write_briefly(doing, |tx| {
                    tx.execute("DELETE FROM session_switch_pending WHERE id = ?1", [intent])
                        .map_err(|e| self.fail(doing, e))
                });
                if let Err(e) = dropped {
                    tracing::warn!(target: "session_switch::store", "{}", e.message);
                }
                return Err(failure);
            }
        };
        match self.write_record(intent, w) {
            Ok(written) => Ok((written, value)),
            Err(e) => {
                let doing = "mark the send delivered";
                let marked = self.write_briefly(doing, |tx| {
                    tx.execute(
                        "UPDATE session_switch_pending SET state = 'delivered' WHERE id = ?1",
                        [intent],
                    )
                    .map_err(|e| self.fail(doing, e))
                });
                let how = if marked.is_ok() {
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

    /// Write the sends that reached the room but not the database (intents
    /// in state `delivered`), oldest first; each in one transaction that
    /// also deletes its intent, so running this twice writes nothing twice.
    /// Returns what was written.
    ///
    /// Errors: as [`HermesStore::send_write`]'s record step (kind `busy` or
    /// `store`); what was written before the error stays written.
    pub fn complete_pending(&mut self) -> Result<Vec<Written>, Failure> {
        if !self.table_exists("session_switch_pending")? {
            return Ok(Vec::new());
        }
        let pending: Vec<(i64, String)> = {
            let mut stmt = self
                .conn
                .prepare(
                    "SELECT id, plan FROM session_switch_pending WHERE state = 'delivered' \
                     ORDER BY id",
                )
                .map_err(|e| self.fail("read the pending sends", e))?;
            let rows = stmt
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
                .and_then(|rows| rows.collect::<Result<_, _>>());
            rows.map_err(|e| self.fail("read the pending sends", e))?
        };
        let mut written = Vec::new();
        for (intent, plan) in pending {
            let Some(plan) = OwnedPlan::parse(&plan) else {
                tracing::warn!(
                    target: "session_switch::store",
                    "pending send {intent} has a plan that is not ours; left for `clear`"
                );
                continue;
            };
            written.push(self.write_record(intent, &plan.as_write())?);
        }
        Ok(written)
    }

    /// The sends not (yet) recorded: intents `posting` (the process died
    /// during the post: the room may have the message) and `delivered` (the
    /// room has it; [`HermesStore::complete_pending`] writes it).
    pub fn pending_sends(&self) -> Result<Vec<PendingSend>, Failure> {
        if !self.table_exists("session_switch_pending")? {
            return Ok(Vec::new());
        }
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, agent, state, created_at, plan FROM session_switch_pending ORDER BY id",
            )
            .map_err(|e| self.fail("read the pending sends", e))?;
        let rows = stmt
            .query_map([], |row| {
                let plan: String = row.get(4)?;
                let parsed = OwnedPlan::parse(&plan);
                Ok(PendingSend {
                    id: row.get(0)?,
                    agent: row.get(1)?,
                    delivered: row.get::<_, String>(2)? == "delivered",
                    created_at: row.get(3)?,
                    body: parsed
                        .as_ref()
                        .map(|p| p.content.clone())
                        .unwrap_or_default(),
                    cli_session_id: parsed.map(|p| p.cli_session_id).unwrap_or_default(),
                })
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>());
        rows.map_err(|e| self.fail("read the pending sends", e))
    }

    /// Forget the pending sends of `agent` (or all); the number removed.
    pub fn clear_pending(&mut self, agent: Option<&str>) -> Result<usize, Failure> {
        if !self.table_exists("session_switch_pending")? {
            return Ok(0);
        }
        let doing = "forget the pending sends";
        self.write_briefly(doing, |tx| {
            tx.execute(
                "DELETE FROM session_switch_pending WHERE ?1 IS NULL OR agent = ?1",
                [agent],
            )
            .map_err(|e| self.fail(doing, e))
        })
    }

    /// The record step: the history row, its provenance and the record, and
    /// intent `intent` deleted, in one brief transaction.
    fn write_record(&self, intent: i64, w: &SendWrite<'_>) -> Result<Written, Failure> {
        let doing = format!("record the send in session {:?}", w.history_session_id);
        self.write_briefly(&doing, |tx| {
            // Inside the transaction: the schema read is the one we write to.
            self.ensure_cjk_tokenizer()?;
            let sql = |e| self.fail(&doing, e);
            tx.execute_batch(CREATE_OUR_TABLES).map_err(sql)?;
            tx.execute(
                "INSERT INTO sessions (id, source, started_at) VALUES (?1, 'xmpp', ?2) \
                 ON CONFLICT(id) DO NOTHING",
                params![w.history_session_id, w.timestamp],
            )
            .map_err(sql)?;
            let message_id: i64 = tx
                .query_row(
                    "INSERT INTO messages (session_id, role, content, timestamp) \
                 VALUES (?1, 'user', ?2, ?3) RETURNING id",
                    params![w.history_session_id, w.history_content, w.timestamp],
                    |row| row.get(0),
                )
                .map_err(sql)?;
            tx.execute(
                "UPDATE sessions SET message_count = COALESCE(message_count, 0) + 1 WHERE id = ?1",
                [w.history_session_id],
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
            tx.execute("DELETE FROM session_switch_pending WHERE id = ?1", [intent])
                .map_err(sql)?;
            Ok(Written {
                message_id,
                record_replaced: changed > 0,
            })
        })
    }

    /// Run `f` in a `BEGIN IMMEDIATE` transaction and commit, with the busy
    /// timeout lowered to [`BRIEF_BUSY`]; on `SQLITE_BUSY` anywhere the
    /// transaction is rolled back whole (releasing every lock) and tried
    /// again after a random pause, until [`BRIEF_DEADLINE`]; then kind
    /// `busy`, nothing written. Other SQL errors: kind `store`, rolled back.
    fn write_briefly<T>(
        &self,
        doing: &str,
        mut f: impl FnMut(&rusqlite::Transaction<'_>) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        let started = std::time::Instant::now();
        let _restore = BusyGuard::lower(self);
        loop {
            let attempt: Result<T, Failure> = (|| {
                let tx = self.begin_write(doing, TransactionBehavior::Immediate)?;
                let value = f(&tx)?;
                tx.commit().map_err(|e| self.fail(doing, e))?;
                Ok(value)
            })();
            match attempt {
                Err(failure)
                    if failure.kind == FailureKind::Busy && started.elapsed() < BRIEF_DEADLINE =>
                {
                    std::thread::sleep(super::hermes::jitter());
                }
                other => return other,
            }
        }
    }
}

/// Busy timeout of the send's brief transactions: a Hermes reader that
/// finds us holding a lock waits at most about this long.
pub const BRIEF_BUSY: Duration = Duration::from_millis(100);

/// How long a brief transaction is retried before kind `busy`.
pub const BRIEF_DEADLINE: Duration = Duration::from_secs(10);

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

/// A send that reached the room, or may have, without its history row.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingSend {
    pub id: i64,
    pub agent: String,
    /// `true`: the room took it and the row is only waiting for the
    /// database; `false`: the process died during the post.
    pub delivered: bool,
    /// Unix seconds of the send.
    pub created_at: f64,
    /// The history row's content (`[YOU] ` + the body).
    pub body: String,
    pub cli_session_id: String,
}

/// A [`SendWrite`] as stored in an intent.
struct OwnedPlan {
    agent: String,
    history_session_id: String,
    content: String,
    cli_session_id: String,
    record_key: String,
    record_value: String,
    timestamp: f64,
}

fn plan_json(w: &SendWrite<'_>) -> String {
    serde_json::json!({
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

impl OwnedPlan {
    fn parse(text: &str) -> Option<Self> {
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        let s = |k: &str| v.get(k)?.as_str().map(str::to_owned);
        let plan = Self {
            agent: s("agent")?,
            history_session_id: s("history_session_id")?,
            content: s("history_content")?,
            cli_session_id: s("cli_session_id")?,
            record_key: s("record_key")?,
            record_value: s("record_value")?,
            timestamp: v.get("timestamp")?.as_f64()?,
        };
        validate(&plan.as_write()).ok()?;
        Some(plan)
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
