//! The room lines waiting for an agent's next turn, and the bot's cursor
//! in the room, kept in `state.db` so that a restarted bot still passes
//! them on and catches up from where it stopped.
//!
//! Lines live in our own table `session_switch_heard` (created inside the
//! first write transaction, never on open, like `session_switch_sent`):
//! one row per line, `session` NULL for a line heard and not answered (it
//! goes with the next turn, whatever its session), a session id for a line
//! whose turn never reached Hermes (it goes with the next turn there);
//! `answer` 1 for a message the bot decided to answer whose turn has not
//! yet taken it (a restarted bot answers it).
//! `ordering` is the bot's count of decisions, so a turn takes only the
//! lines said before its own. At most [`HEARD_CAP`] rows per agent and
//! room: the oldest beyond are deleted and handed back for the log.
//!
//! The cursor is `state_meta` key `session_switch:cursor:<agent>:<room>`,
//! JSON `{"stanza_id": str|null, "at": float, "recent": [key, …]}`: the
//! last message decided, and the dedupe keys of the latest decided, so a
//! line the room replays across the seam is not decided twice.
//!
//! Writes run either inside the loop guard's transaction
//! ([`HermesStore::begin_state_write`]) or in one brief transaction of
//! their own, with the same rules.

use super::HermesStore;
use rusqlite::params;
use session_switch_contract::failure::Failure;
use session_switch_contract::keys::OUR_KEY_PREFIX;
use session_switch_contract::limits::HEARD_CAP;

/// The table and its index, each one statement for the statement cache
/// ([`HermesStore::run_cached`]): run before every write, a no-op once
/// they exist.
const CREATE_HEARD: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS session_switch_heard (\
     id INTEGER PRIMARY KEY AUTOINCREMENT, agent TEXT NOT NULL, room TEXT NOT NULL, \
     ordering INTEGER NOT NULL, session TEXT, line TEXT NOT NULL, heard_at REAL NOT NULL, \
     nick TEXT NOT NULL, answer INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS session_switch_heard_agent \
     ON session_switch_heard (agent, room, ordering)",
];

/// One line waiting for a turn.
#[derive(Clone, Debug, PartialEq)]
pub struct HeardLine {
    /// The row's id (0 before it is stored).
    pub id: i64,
    pub agent: String,
    pub room: String,
    /// When it was decided, in the bot's count of decisions.
    pub ordering: i64,
    /// `None`: heard, for the next turn; `Some`: for the next turn in
    /// that session.
    pub session: Option<String>,
    pub line: String,
    /// Unix seconds.
    pub heard_at: f64,
    /// The sender's nick.
    pub nick: String,
    /// The bot decided to answer it and no turn took it yet.
    pub answer: bool,
}

/// The `state_meta` key of `agent`'s cursor in `room`.
pub fn cursor_key(agent: &str, room: &str) -> String {
    format!(
        "{OUR_KEY_PREFIX}cursor:{agent}:{}",
        room.to_ascii_lowercase()
    )
}

impl HermesStore {
    /// Store `line` inside the open write transaction and drop the oldest
    /// lines of its agent and room beyond [`HEARD_CAP`]; the id given,
    /// and the dropped lines (for the log).
    ///
    /// SQL: `CREATE TABLE IF NOT EXISTS session_switch_heard …`, `INSERT`,
    /// `DELETE … WHERE id IN (the oldest beyond the cap)`. A call outside a
    /// transaction is kind `bad-input`; SQLite errors kind `store` (`busy`).
    pub fn heard_insert_in_tx(&self, line: &HeardLine) -> Result<(i64, Vec<HeardLine>), Failure> {
        let doing = "store a heard line";
        let fail = |e| self.fail(doing, e);
        self.heard_write(doing)?;
        self.conn
            .prepare_cached(
                "INSERT INTO session_switch_heard \
                 (agent, room, ordering, session, line, heard_at, nick, answer) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .and_then(|mut insert| {
                insert.execute(params![
                    line.agent,
                    line.room,
                    line.ordering,
                    line.session,
                    line.line,
                    line.heard_at,
                    line.nick,
                    line.answer
                ])
            })
            .map_err(fail)?;
        let id = self.conn.last_insert_rowid();
        // Counted first: the lines themselves are read only past the cap.
        let count: i64 = self
            .conn
            .prepare_cached(
                "SELECT count(*) FROM session_switch_heard WHERE agent = ?1 AND room = ?2",
            )
            .and_then(|mut count| count.query_row([&line.agent, &line.room], |row| row.get(0)))
            .map_err(fail)?;
        let mut dropped = Vec::new();
        if usize::try_from(count).unwrap_or(0) > HEARD_CAP {
            let all = self.heard_rows(&line.agent, &line.room)?;
            let over = &all[..all.len().saturating_sub(HEARD_CAP)];
            self.heard_forget_in_tx(&over.iter().map(|old| old.id).collect::<Vec<_>>())?;
            dropped.extend_from_slice(over);
        }
        Ok((id, dropped))
    }

    /// Delete the lines `ids` inside the open write
    /// transaction. SQL: `CREATE TABLE IF NOT EXISTS session_switch_heard
    /// …`, a `DELETE` per id. Errors as [`HermesStore::heard_insert_in_tx`].
    pub fn heard_forget_in_tx(&self, ids: &[i64]) -> Result<(), Failure> {
        let doing = "forget heard lines";
        let fail = |e| self.fail(doing, e);
        self.heard_write(doing)?;
        let mut delete = self
            .conn
            .prepare_cached("DELETE FROM session_switch_heard WHERE id = ?1")
            .map_err(fail)?;
        for id in ids {
            delete.execute([id]).map_err(fail)?;
        }
        Ok(())
    }

    /// Set the cursor of `agent` in `room` inside the open write
    /// transaction (`CREATE TABLE IF NOT EXISTS state_meta`, then an
    /// upsert of [`cursor_key`]). Errors as [`HermesStore::heard_insert_in_tx`].
    pub fn cursor_set_in_tx(&self, agent: &str, room: &str, value: &str) -> Result<(), Failure> {
        if self.conn.is_autocommit() {
            return Err(Failure::bad_input(
                "refusing to set the room cursor outside a write transaction",
            ));
        }
        let key = cursor_key(agent, room);
        self.meta_upsert_in_tx(&key, value)
    }

    /// The lines waiting for `agent` in `room`, oldest first (by
    /// `ordering`, then id); empty when the table does not exist.
    ///
    /// SQL (read only): `SELECT … FROM session_switch_heard WHERE agent =
    /// ?1 AND room = ?2 ORDER BY ordering, id`. `SQLITE_BUSY`: kind `busy`.
    pub fn heard_rows(&self, agent: &str, room: &str) -> Result<Vec<HeardLine>, Failure> {
        let doing = "read the heard lines";
        let Some(mut stmt) = self.prepare_reading(
            "session_switch_heard",
            "SELECT id, ordering, session, line, heard_at, nick, answer \
             FROM session_switch_heard \
             WHERE agent = ?1 AND room = ?2 ORDER BY ordering, id",
            doing,
        )?
        else {
            return Ok(Vec::new());
        };
        stmt.query_map([agent, room], |row| {
            Ok(HeardLine {
                id: row.get(0)?,
                agent: agent.to_owned(),
                room: room.to_owned(),
                ordering: row.get(1)?,
                session: row.get(2)?,
                line: row.get(3)?,
                heard_at: row.get(4)?,
                nick: row.get(5)?,
                answer: row.get(6)?,
            })
        })
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(|e| self.fail(doing, e))
    }

    /// In one brief write transaction ([`HermesStore::begin_state_write`]'s
    /// rules): delete the rows `forget`, keep the rows `assign` as lines
    /// for a later turn (in their session, or any; no longer to answer),
    /// then store `add` (each capped as
    /// [`HermesStore::heard_insert_in_tx`]). Returns the ids given to
    /// `add`, in order, and the lines the cap dropped. Nothing is written
    /// on any failure (rolled back).
    pub fn heard_change(
        &mut self,
        forget: &[i64],
        assign: &[(i64, Option<String>)],
        add: &[HeardLine],
    ) -> Result<(Vec<i64>, Vec<HeardLine>), Failure> {
        if forget.is_empty() && assign.is_empty() && add.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        self.begin_state_write()?;
        let result = self.heard_change_in_tx(forget, assign, add);
        let ended = self.end_state_write(result.is_ok());
        let result = result?;
        ended?;
        Ok(result)
    }

    fn heard_change_in_tx(
        &self,
        forget: &[i64],
        assign: &[(i64, Option<String>)],
        add: &[HeardLine],
    ) -> Result<(Vec<i64>, Vec<HeardLine>), Failure> {
        let doing = "change the heard lines";
        self.heard_forget_in_tx(forget)?;
        for (id, session) in assign {
            self.conn
                .prepare_cached(
                    "UPDATE session_switch_heard SET session = ?2, answer = 0 WHERE id = ?1",
                )
                .and_then(|mut update| update.execute(params![id, session]))
                .map_err(|e| self.fail(doing, e))?;
        }
        let mut ids = Vec::new();
        let mut dropped = Vec::new();
        for line in add {
            let (id, gone) = self.heard_insert_in_tx(line)?;
            ids.push(id);
            dropped.extend(gone);
        }
        Ok((ids, dropped))
    }

    /// Refuse to `doing` outside a write transaction (kind `bad-input`);
    /// else create `session_switch_heard` and its index where missing.
    fn heard_write(&self, doing: &str) -> Result<(), Failure> {
        if self.conn.is_autocommit() {
            return Err(Failure::bad_input(format!(
                "refusing to {doing} outside a write transaction"
            )));
        }
        CREATE_HEARD
            .iter()
            .try_for_each(|sql| self.run_cached(sql))
            .map_err(|e| self.fail(doing, e))
    }
}
