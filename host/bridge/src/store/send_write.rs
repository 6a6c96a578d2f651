//! The store half of the atomic send (DESIGN §8 "Send is one host import,
//! atomic in the host"): one `BEGIN EXCLUSIVE` transaction holds the history
//! row, its provenance and the agent's record while the caller posts to the
//! room; the post's answer decides `COMMIT` or `ROLLBACK`.
//!
//! EXCLUSIVE, not IMMEDIATE: in a rollback-journal database (DELETE mode,
//! as `init-db` makes) `COMMIT` needs every reader gone, so after an
//! IMMEDIATE begin a gateway's long read could make the commit fail *after*
//! the room took the message. EXCLUSIVE waits for the readers before
//! anything is posted (or refuses as `busy`, nothing posted); in WAL mode
//! SQLite treats it as IMMEDIATE and readers never block the commit.

use rusqlite::{TransactionBehavior, params};

use super::hermes::{check_our_key, commit_with_retry};
use super::sqlite_failure::sqlite_failure;
use super::{HermesStore, SendWrite, Written};
use session_switch_runtime::Failure;

/// Our two tables, created inside the first write transaction, never on
/// open (so reads leave the file untouched). `state_meta` is exactly
/// Hermes's DDL (missing in early databases; Hermes creates it the same
/// way). `session_switch_sent` is DESIGN §8's exact DDL, with no foreign key
/// to `messages`: with foreign keys ON one would make Hermes's own deletes
/// and prunes fail.
const CREATE_OUR_TABLES: &str = "\
    CREATE TABLE IF NOT EXISTS state_meta (key TEXT PRIMARY KEY, value TEXT);
    CREATE TABLE IF NOT EXISTS session_switch_sent (message_id INTEGER PRIMARY KEY, \
        agent TEXT NOT NULL, cli_session_id TEXT NOT NULL, sent_at REAL NOT NULL);";

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
    /// Write one send atomically around `post` (the room post).
    ///
    /// In one transaction, in this order:
    /// 1. `BEGIN EXCLUSIVE` — the busy timeout applies; if SQLite still
    ///    reports `SQLITE_BUSY`, it is retried after a random 20–150 ms
    ///    pause, [`super::WRITE_ATTEMPTS`] attempts in all, then kind
    ///    `busy` with nothing written and `post` not called;
    /// 2. `CREATE TABLE IF NOT EXISTS` `state_meta` and
    ///    `session_switch_sent`;
    /// 3. `INSERT INTO sessions (id, source, started_at) VALUES (?, 'xmpp',
    ///    timestamp) ON CONFLICT(id) DO NOTHING` (foreign keys are ON);
    /// 4. `INSERT INTO messages (session_id, role, content, timestamp)`
    ///    with role `user` — a plain insert, so Hermes's own triggers keep
    ///    its FTS indexes (and v31's `message_uid`, `display_order`);
    /// 5. `UPDATE sessions SET message_count = message_count + 1`, as
    ///    Hermes's `append_message` does;
    /// 6. the provenance row in `session_switch_sent`;
    /// 7. the record upsert on `record_key`, which keeps a stored record
    ///    whose `timestamp` is newer (`record_replaced` tells);
    /// 8. `post()`; its `Ok` commits (`COMMIT`, retried like `BEGIN` on
    ///    `SQLITE_BUSY`), its `Err` rolls back and is returned unchanged.
    ///
    /// Between steps 1 and 2, a database with Hermes's CJK triggers gets
    /// its tokenizer extension loaded, or the send is refused (kind `store`,
    /// rolled back).
    ///
    /// Errors: kind `bad-input` (before anything is touched) for empty ids,
    /// content with a NUL character (Hermes reads `"\0json:"` content as
    /// multimodal, so none is ever written), a `record_key` that is not
    /// ours (`session_switch:…`; Hermes's keys and the seed's key are never
    /// written), a `record_value` that is not a JSON object with a numeric
    /// `timestamp`, or a `timestamp` that is not a positive finite number of
    /// Unix seconds; kind `busy` as above; kind `store` for any SQL error
    /// (rolled back) and for a `COMMIT` that fails after `post` succeeded —
    /// then the room has the message but nothing is recorded, and the
    /// message says so.
    ///
    /// A panic in `post` rolls back too (the transaction's drop).
    pub fn send_write<T>(
        &mut self,
        w: &SendWrite<'_>,
        post: impl FnOnce() -> Result<T, Failure>,
    ) -> Result<(Written, T), Failure> {
        validate(w)?;
        let doing = format!("record the send in session {:?}", w.history_session_id);
        let tx = self.begin_write(&doing, TransactionBehavior::Exclusive)?;
        let fail = |step: &str, e| sqlite_failure(&self.path, self.busy_timeout, step, e);
        let written = (|| {
            // Inside the transaction: the schema read is the one we write to.
            self.ensure_cjk_tokenizer()?;
            tx.execute_batch(CREATE_OUR_TABLES)
                .map_err(|e| fail("create session-switch's tables", e))?;
            tx.execute(
                "INSERT INTO sessions (id, source, started_at) VALUES (?1, 'xmpp', ?2) \
                 ON CONFLICT(id) DO NOTHING",
                params![w.history_session_id, w.timestamp],
            )
            .map_err(|e| fail("create the XMPP session's row", e))?;
            let message_id: i64 = tx
                .query_row(
                    "INSERT INTO messages (session_id, role, content, timestamp) \
                     VALUES (?1, 'user', ?2, ?3) RETURNING id",
                    params![w.history_session_id, w.history_content, w.timestamp],
                    |row| row.get(0),
                )
                .map_err(|e| fail("insert the history row", e))?;
            tx.execute(
                "UPDATE sessions SET message_count = COALESCE(message_count, 0) + 1 WHERE id = ?1",
                [w.history_session_id],
            )
            .map_err(|e| fail("bump sessions.message_count", e))?;
            // A stale row can only exist if Hermes reset `sqlite_sequence`
            // (ids are AUTOINCREMENT); ours describes the row now.
            tx.execute(
                "INSERT INTO session_switch_sent (message_id, agent, cli_session_id, sent_at) \
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT(message_id) DO UPDATE SET \
                 agent = excluded.agent, cli_session_id = excluded.cli_session_id, \
                 sent_at = excluded.sent_at",
                params![message_id, w.agent, w.cli_session_id, w.timestamp],
            )
            .map_err(|e| fail("insert the provenance row", e))?;
            let changed = tx
                .execute(UPSERT_RECORD, params![w.record_key, w.record_value])
                .map_err(|e| fail(&format!("write the record {:?}", w.record_key), e))?;
            Ok(Written {
                message_id,
                record_replaced: changed > 0,
            })
        })();
        let outcome = written.and_then(|written| post().map(|value| (written, value)));
        match outcome {
            Ok((written, value)) => {
                commit_with_retry(tx, &self.path, self.busy_timeout, &doing).map_err(|e| {
                    // `e` may end in "try again": not after the room took it.
                    let cause = e.message.trim_end_matches(", try again");
                    Failure::store(format!(
                        "the message was posted to the room, but state.db could not record it \
                         ({cause}); the room has the message, the history row and the record \
                         were not written: do not send it again"
                    ))
                })?;
                Ok((written, value))
            }
            Err(failure) => match tx.rollback() {
                Ok(()) => Err(failure),
                Err(e) => Err(Failure::new(
                    failure.kind,
                    format!(
                        "{failure}; rolling back {} failed too: {e}",
                        self.path.display()
                    ),
                )),
            },
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
