//! One decision per live room message, in arrival order, on a thread of
//! its own (`Bridge`'s calls are synchronous: wasmtime and SQLite; a
//! Hermes turn takes seconds). Each message is heard first: `is-own`,
//! then `admit` (the loop guard and the meeting rules, docs/src/design/loop-guard.md) sees
//! every live message; a refusal → silence, the reason logged, the line
//! kept for the next turn when the policy says it was heard; an answer →
//! a turn queued. Each turn: `resolve` → the session it runs in; the turn
//! in the agent's Hermes API server, with the room lines Hermes has not
//! seen yet; the reply handed back to the XMPP task.
//!
//! Messages that arrive while a turn runs are heard before its reply is
//! posted, so a person's stop among them keeps that reply out of the room
//! and drops the turns still queued.
//!
//! The lines waiting for a turn live in `state.db` (`session_switch_heard`,
//! written with the decision, forgotten once Hermes took them) and the
//! in-memory backlog mirrors them, so a restarted bot passes on what it
//! heard before; the room cursor moves with each decision.
//!
//! Here: hearing and deciding. The messages that waited while the thread
//! was busy are decided together in `decide/batch.rs`, a turn is in
//! `decide/turn.rs`, the lines waiting for one in `decide/waiting.rs`.

mod batch;
mod turn;
mod waiting;

use batch::{Prepared, waiting};
use turn::Turn;
use waiting::Kept;

use crate::cursor::Cursor;
use crate::hermes::HermesClient;
use crate::reply::{Progress, Reply, UnderWay};
use crate::room::Incoming;
use crate::room_line::room_line;
use crate::settings::BotSettings;
use session_switch::runtime::{AdmitReason, ReplyTarget, RoomMessage};
use session_switch::{Bridge, Heard, KeptInstance};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;

/// How long the lines Hermes took wait for the next decision to be
/// forgotten with, before a write of their own.
const FORGET_AFTER: Duration = Duration::from_millis(200);

/// The decision thread's state: the façade, the Hermes client, the room
/// lines Hermes has not seen yet (oldest first) and the turns waiting.
pub struct Decider {
    bridge: Arc<Bridge>,
    /// The policy instance and connection every call of this thread uses.
    kept: KeptInstance,
    hermes: HermesClient,
    settings: BotSettings,
    backlog: VecDeque<Kept>,
    queue: VecDeque<Turn>,
    /// Stored lines Hermes took in the last turns, forgotten with the next
    /// decision, or on their own once the room is quiet for a moment.
    taken: Vec<i64>,
    /// Counts heard messages, to order lines and turns.
    heard: u64,
    /// Counts the stops heard.
    stops: u64,
    under_way: UnderWay,
    progress: Arc<Progress>,
    cursor: Cursor,
}

impl Decider {
    /// A decider; `under_way` shows its current turn to the XMPP task,
    /// `progress` how far it has heard.
    pub fn new(
        bridge: Arc<Bridge>,
        hermes: HermesClient,
        settings: BotSettings,
        under_way: UnderWay,
        progress: Arc<Progress>,
    ) -> Self {
        let agent = settings.agent.clone();
        let mut decider = Self {
            bridge,
            kept: KeptInstance::default(),
            hermes,
            settings,
            backlog: VecDeque::new(),
            queue: VecDeque::new(),
            taken: Vec::new(),
            heard: 0,
            stops: 0,
            under_way,
            progress,
            cursor: Cursor::default(),
        };
        match decider.bridge.heard_lines(&agent) {
            Ok(lines) => decider.restore(lines),
            Err(e) => tracing::warn!(
                "could not read the lines waiting from before: {}; the next turn lacks them",
                e.message
            ),
        }
        decider.cursor = cursor_of(&decider.bridge, &agent).unwrap_or_default();
        decider
    }

    /// Whether the bot decided `m` already (a message caught up across
    /// the rejoin after a restart or a reconnect).
    pub fn decided(&self, m: &Incoming) -> bool {
        self.cursor.decided(m)
    }

    /// Decide every message of `inbox` until it closes; send each reply
    /// to `replies`.
    pub fn run(mut self, inbox: Receiver<Incoming>, replies: UnboundedSender<Reply>) {
        loop {
            if self.queue.is_empty() {
                // The lines Hermes took go with the next decision's
                // transaction (the room's echo of the reply is usually it);
                // in a quiet room, in one of their own a moment later.
                let next = match inbox.recv_timeout(FORGET_AFTER) {
                    Err(RecvTimeoutError::Timeout) => {
                        self.forget_taken();
                        inbox.recv().map_err(|_| RecvTimeoutError::Disconnected)
                    }
                    next => next,
                };
                match next {
                    Ok(m) => self.hear_all(waiting(m, &inbox)),
                    Err(_) => return self.forget_taken(),
                }
            }
            if let Ok(m) = inbox.try_recv() {
                self.hear_all(waiting(m, &inbox));
            }
            let Some(turn) = self.queue.pop_front() else {
                continue;
            };
            let stops = self.stops;
            let reply = self.turn(turn);
            // What the room said meanwhile is heard before the reply goes
            // out: a person's stop among it keeps the reply from the room.
            if let Ok(m) = inbox.try_recv() {
                self.hear_all(waiting(m, &inbox));
            }
            // Forgetting the lines is kept off the reply's way: a restart
            // before it finds Hermes holding the line (`stored_meanwhile`).
            if !self.hand_on(reply, stops, &replies) {
                return self.forget_taken();
            }
        }
    }

    /// Hand `reply` to the XMPP task unless a stop was heard since the
    /// turn began (`stops`); `false` when that task has gone.
    fn hand_on(&self, reply: Option<Reply>, stops: u64, replies: &UnboundedSender<Reply>) -> bool {
        let Some(mut reply) = reply else { return true };
        reply.stops = self.stops;
        if self.stops != stops {
            tracing::info!(
                "reply to {} not posted: a person said stop while its turn ran \
                 (Hermes keeps it in session {})",
                reply.to_nick,
                reply.session
            );
            return true;
        }
        replies.send(reply).is_ok()
    }

    /// Forget the lines of [`Self::taken`] in a transaction of their own.
    fn forget_taken(&mut self) {
        if self.taken.is_empty() {
            return;
        }
        let forgetting = Instant::now();
        let taken = std::mem::take(&mut self.taken);
        self.forget(&taken);
        // The bench leaves this write out of the bot's share per message.
        tracing::debug!(
            "lines Hermes took forgotten on their own in {} µs",
            forgetting.elapsed().as_micros()
        );
    }

    /// Hear `m`: the policy's decision on it, logged; an answer queued, a
    /// heard line kept, a stop acted on. An own echo logs at debug only.
    pub fn hear(&mut self, m: &Incoming) {
        if m.caught_up && self.cursor.decided(m) {
            skipped(m);
        } else {
            let started = Instant::now();
            self.decide(m);
            // The policy's share of the bot's time per message, for the bench.
            tracing::debug!(
                "{}'s message decided in {} µs",
                m.nick,
                started.elapsed().as_micros()
            );
        }
        self.progress.heard_one(self.stops);
    }

    fn decide(&mut self, m: &Incoming) {
        let Some(prepared) = self.prepare(m, self.heard + 1, &self.cursor.clone()) else {
            return;
        };
        let agent = self.settings.agent.clone();
        // The guard sees every live message, the bot's own included: its
        // own lines count as hops, and a send made for a person
        // (the human-origin marker) resets the counter (docs/src/design/loop-guard.md). The
        // line is stored with the decision, so a restart does not lose it.
        let hearing = prepared.hearing(&self.taken);
        let bridge = &self.bridge;
        let message = room_message(m);
        let heard = match bridge.with_kept(&mut self.kept, |i, _| {
            bridge.admit_hearing_on(i, &agent, &message, &hearing)
        }) {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!("not answering {}: admit failed: {}", m.nick, e.message);
                return;
            }
        };
        self.taken.clear();
        self.settle(m, prepared, heard);
    }

    /// What the policy is asked about `m` besides the message: whether it
    /// is the agent's own, its line, its place `order` and the cursor
    /// after it; `None` (logged) when `is-own` failed.
    fn prepare(&mut self, m: &Incoming, order: u64, cursor: &Cursor) -> Option<Prepared> {
        let agent = self.settings.agent.clone();
        let agent = agent.as_str();
        let own = match self
            .bridge
            .with_kept(&mut self.kept, |i, _| i.is_own_message(agent, &m.occupant))
        {
            Ok(own) => own,
            Err(e) => {
                tracing::warn!("not answering {}: is-own failed: {}", m.nick, e.message);
                return None;
            }
        };
        // An own line is not kept (the policy hears it only to count it).
        let line = if own {
            format!("{}: {}", m.nick, m.body)
        } else {
            room_line(&self.bridge, &mut self.kept, agent, &m.nick, &m.body)
        };
        let cursor = cursor.after(m);
        Some(Prepared {
            own,
            line,
            order,
            cursor_json: cursor.to_json(),
            cursor,
            nick: m.nick.clone(),
            at: m.at,
        })
    }

    /// Act on the decision `heard` on `m`, stored with the cursor and
    /// order of `prepared`.
    fn settle(&mut self, m: &Incoming, prepared: Prepared, heard: Heard) {
        let Prepared {
            own,
            line,
            order,
            cursor,
            ..
        } = prepared;
        self.cursor = cursor;
        self.heard = order;
        self.forget_dropped(&heard.dropped);
        let admission = heard.admission;
        if admission.stop {
            self.stops += 1;
            for turn in std::mem::take(&mut self.queue) {
                tracing::info!(
                    "turn for {}'s message dropped: {} said stop",
                    turn.nick,
                    m.nick
                );
                if let Some(id) = turn.id {
                    self.store_session(id, None);
                }
                self.keep_in_memory(turn.order, None, turn.line, turn.id);
            }
        }
        if own {
            tracing::debug!(
                "own echo from {} ignored (hops {})",
                m.occupant,
                admission.hops
            );
            return;
        }
        if !admission.reply {
            tracing::info!(
                "not answering {}: {} (hops {}; {})",
                m.nick,
                admission.reason.as_str(),
                admission.hops,
                admission.detail
            );
            // The agent still learns what was said to others.
            if admission.heard {
                self.keep_in_memory(order, None, line, heard.kept);
            }
            return;
        }
        let turn = Turn {
            nick: m.nick.clone(),
            line,
            reason: admission.reason,
            order,
            id: heard.kept,
            restored: None,
        };
        // A person who addressed the agent goes before the agents' turns
        // still waiting: a question is not buried behind their chatter.
        let at = if turn.reason == AdmitReason::Human {
            self.queue
                .iter()
                .position(|t| t.reason != AdmitReason::Human)
                .unwrap_or(self.queue.len())
        } else {
            self.queue.len()
        };
        self.queue.insert(at, turn);
    }
}

/// `agent`'s stored room cursor; `None` (logged) when it cannot be read
/// or is not one of ours.
pub fn cursor_of(bridge: &Bridge, agent: &str) -> Option<Cursor> {
    match bridge.room_cursor(agent) {
        Ok(None) => None,
        Ok(Some(text)) => {
            let cursor = Cursor::from_json(&text);
            if cursor.is_none() {
                tracing::warn!("the stored room cursor is not one of ours: no catch-up");
            }
            cursor
        }
        Err(e) => {
            tracing::warn!("could not read the room cursor: {}; no catch-up", e.message);
            None
        }
    }
}

/// Log that `m`, caught up across a rejoin, was decided before.
fn skipped(m: &Incoming) {
    tracing::info!(
        "{}'s message from while the bot was away was decided before it went: skipped",
        m.nick
    );
}

/// The policy's view of `m`.
fn room_message(m: &Incoming) -> RoomMessage {
    RoomMessage {
        occupant: m.occupant.clone(),
        jid: m.jid.clone(),
        body: m.body.clone(),
        delayed: m.delayed,
        human_origin: m.human_origin,
        stanza_id: m.stanza_id.clone(),
        reply_to: m.reply_to.clone().map(|(to, id)| ReplyTarget { to, id }),
        caught_up: m.caught_up,
    }
}
