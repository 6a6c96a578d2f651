//! The façade of the lines waiting for an agent's next turn and of the bot's
//! cursor in the room (`host/store/src/heard.rs`): the bot hands a decided
//! message's line to [`Bridge::admit_hearing`], which stores it with the loop
//! guard's state in the decision's one brief transaction.

use crate::Bridge;
use crate::hermes_imports::HermesImports;
use session_switch_runtime::{Admission, Failure, PolicyInstance, RoomMessage};
use session_switch_store::{HeardLine, HermesStore, cursor_key};
use std::any::Any;
use std::time::Instant;

/// What the bot keeps of a message, should the policy say it is heard or
/// answered.
#[derive(Clone, Debug)]
pub struct Hearing<'a> {
    /// The sender's nick.
    pub nick: &'a str,
    /// The line as the agent's turn gets it (`nick: body`).
    pub line: &'a str,
    /// The bot's count of decisions: the line's place among the others.
    pub ordering: i64,
    /// Unix seconds.
    pub at: f64,
    /// The room cursor to store with the decision (JSON, see
    /// `host/store/src/heard.rs`), if the bot moves it.
    pub cursor: Option<&'a str>,
    /// Stored lines Hermes has taken since, forgotten in the decision's
    /// transaction.
    pub forget: &'a [i64],
}

/// A decision and what it kept.
#[derive(Clone, Debug)]
pub struct Heard {
    pub admission: Admission,
    /// The id of the stored line: the message was heard or is to be
    /// answered (an answered line waits until Hermes takes its turn).
    pub kept: Option<i64>,
    /// Lines the cap dropped to make room (oldest first).
    pub dropped: Vec<HeardLine>,
}

impl Bridge {
    /// [`Bridge::admit`], and in the same brief write transaction: the
    /// lines `hearing.forget` deleted, the line of `hearing` stored when
    /// the policy says the message is heard or answered (not for the
    /// agent's own line, a repeat or history), and the cursor moved. Either
    /// the guard's state, the lines and the cursor are all written, or
    /// none.
    ///
    /// Errors: those of [`Bridge::admit`]; the store's (`busy`, `store`).
    pub fn admit_hearing(
        &self,
        agent: &str,
        message: &RoomMessage,
        hearing: &Hearing<'_>,
    ) -> Result<Heard, Failure> {
        self.admit_hearing_on(&mut self.instance(false)?, agent, message, hearing)
    }

    /// [`Bridge::admit_hearing`] on `instance` (one [`Bridge::instance`]
    /// or [`Bridge::with_kept`] made).
    pub fn admit_hearing_on(
        &self,
        instance: &mut PolicyInstance,
        agent: &str,
        message: &RoomMessage,
        hearing: &Hearing<'_>,
    ) -> Result<Heard, Failure> {
        let mut heard = self.admit_hearings_on(
            instance,
            agent,
            std::slice::from_ref(message),
            std::slice::from_ref(hearing),
        )?;
        Ok(heard.remove(0))
    }

    /// [`Bridge::admit_hearing_on`] for `messages` in order (each with the
    /// hearing of the same index), in one write transaction
    /// ([`PolicyInstance::admit_all_then`]): a bot that fell behind the room
    /// decides the messages waiting with one commit. All are written or
    /// none. Errors as [`Bridge::admit_hearing`]; kind `bad-input` when
    /// the two lists differ in length.
    pub fn admit_hearings_on(
        &self,
        instance: &mut PolicyInstance,
        agent: &str,
        messages: &[RoomMessage],
        hearings: &[Hearing<'_>],
    ) -> Result<Vec<Heard>, Failure> {
        if messages.len() != hearings.len() {
            return Err(Failure::bad_input(format!(
                "{} messages but {} hearings to admit",
                messages.len(),
                hearings.len()
            )));
        }
        let room = self.config().xmpp.room.clone();
        let mut kept = vec![None; messages.len()];
        let mut dropped = vec![Vec::new(); messages.len()];
        // When each call began and its write began, for the log's split.
        let mut marks: Vec<(Instant, Instant)> = Vec::with_capacity(messages.len());
        let mut started = Instant::now();
        let admissions =
            instance.admit_all_then(agent, messages, &mut |i, admission, imports| {
                if i == 0 {
                    // A retried transaction begins again from the first message.
                    marks.clear();
                }
                marks.push((started, Instant::now()));
                let hearing = &hearings[i];
                kept[i] = None;
                dropped[i].clear();
                let imports: &mut dyn Any = imports;
                let Some(imports) = imports.downcast_mut::<HermesImports>() else {
                    return Err(Failure::policy(
                        "this Bridge has no Hermes store to keep the line in",
                    ));
                };
                let store = imports.store();
                // Before the insert: the cap counts only the lines still waiting.
                if !hearing.forget.is_empty() {
                    store.heard_forget_in_tx(hearing.forget)?;
                }
                if admission.heard || admission.reply {
                    let (id, gone) = store.heard_insert_in_tx(&HeardLine {
                        id: 0,
                        agent: agent.to_owned(),
                        room: room.clone(),
                        ordering: hearing.ordering,
                        session: None,
                        line: hearing.line.to_owned(),
                        heard_at: hearing.at,
                        nick: hearing.nick.to_owned(),
                        answer: admission.reply,
                    })?;
                    kept[i] = Some(id);
                    dropped[i] = gone;
                }
                if let Some(cursor) = hearing.cursor {
                    store.cursor_set_in_tx(agent, &room, cursor)?;
                }
                started = Instant::now();
                Ok(())
            })?;
        let committed = Instant::now();
        // The bench splits a decision's time into the policy's and the
        // durable write's (the line, the cursor and the commit) from this;
        // the commit is the last message's.
        for (i, (began, written)) in marks.iter().enumerate() {
            let ended = marks.get(i + 1).map_or(committed, |(next, _)| *next);
            tracing::debug!(
                "admit of {}'s message: policy {} µs, write and commit {} µs",
                hearings[i].nick,
                (*written - *began).as_micros(),
                ended.saturating_duration_since(*written).as_micros()
            );
        }
        Ok(admissions
            .into_iter()
            .zip(kept)
            .zip(dropped)
            .map(|((admission, kept), dropped)| Heard {
                admission,
                kept,
                dropped,
            })
            .collect())
    }

    /// The lines waiting for `agent`'s next turn in the configured room,
    /// oldest first. Errors: the store's (`busy`, `store`).
    pub fn heard_lines(&self, agent: &str) -> Result<Vec<HeardLine>, Failure> {
        let rows = self.store()?.heard_rows(agent, &self.config().xmpp.room)?;
        Ok(rows)
    }

    /// In one brief write transaction: forget the lines `forget` (Hermes
    /// took them), keep the lines `assign` for a later turn in a session
    /// (their turn never reached Hermes) or any (a stop dropped their
    /// turn), store `add` (`agent`'s, in the configured room).
    /// The ids given to `add` and the lines the cap dropped.
    ///
    /// Errors: the store's (`busy`, `store`); nothing is written then.
    pub fn heard_change(
        &self,
        agent: &str,
        forget: &[i64],
        assign: &[(i64, Option<String>)],
        add: &[(i64, Option<String>, String, f64)],
    ) -> Result<(Vec<i64>, Vec<HeardLine>), Failure> {
        self.heard_change_in(&mut self.store()?, agent, forget, assign, add)
    }

    /// [`Bridge::heard_change`] on `instance`'s connection (one
    /// [`Bridge::instance`] or [`Bridge::with_kept`] made).
    ///
    /// Errors: those of [`Bridge::heard_change`]; kind `policy` for an
    /// instance without a Hermes store.
    pub fn heard_change_on(
        &self,
        instance: &mut PolicyInstance,
        agent: &str,
        forget: &[i64],
        assign: &[(i64, Option<String>)],
        add: &[(i64, Option<String>, String, f64)],
    ) -> Result<(Vec<i64>, Vec<HeardLine>), Failure> {
        let Some(store) = HermesImports::store_mut_of(instance) else {
            return Err(Failure::policy(
                "this instance has no Hermes store to keep the lines in",
            ));
        };
        self.heard_change_in(store, agent, forget, assign, add)
    }

    fn heard_change_in(
        &self,
        store: &mut HermesStore,
        agent: &str,
        forget: &[i64],
        assign: &[(i64, Option<String>)],
        add: &[(i64, Option<String>, String, f64)],
    ) -> Result<(Vec<i64>, Vec<HeardLine>), Failure> {
        let room = &self.config().xmpp.room;
        let add: Vec<HeardLine> = add
            .iter()
            .map(|(ordering, session, line, at)| HeardLine {
                id: 0,
                agent: agent.to_owned(),
                room: room.clone(),
                ordering: *ordering,
                session: session.clone(),
                line: line.clone(),
                heard_at: *at,
                nick: String::new(),
                answer: false,
            })
            .collect();
        let (ids, dropped) = store.heard_change(forget, assign, &add)?;
        Ok((ids, dropped))
    }

    /// `agent`'s stored room cursor (JSON), if any. Errors: the store's.
    pub fn room_cursor(&self, agent: &str) -> Result<Option<String>, Failure> {
        self.store()?
            .meta_get(&cursor_key(agent, &self.config().xmpp.room))
    }
}
