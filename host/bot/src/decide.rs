//! One decision per live room message, in arrival order, on a thread of
//! its own (`Bridge`'s calls are synchronous: wasmtime and SQLite; a
//! Hermes turn takes seconds). Each message is heard first: `is-own`,
//! then `admit` (the loop guard and the meeting rules, DESIGN §9.3) sees
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

use crate::cursor::Cursor;
use crate::hermes::HermesClient;
use crate::reply::{Progress, Reply, UnderWay, normalise};
use crate::room::Incoming;
use crate::room_line::room_line;
use crate::settings::BotSettings;
use session_switch::runtime::{AdmitReason, ReplyTarget, RoomMessage, unix_now};
use session_switch::{Bridge, HEARD_CAP, Hearing, WaitingLine};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use tokio::sync::mpsc::UnboundedSender;

/// How many room lines are kept for the next turn: lines the bot heard
/// but did not answer, and lines whose turn never reached Hermes (a Hermes
/// that stays down for a long chat would grow the turn past use).
pub const BACKLOG_LINES: usize = HEARD_CAP;

/// A room line Hermes has not seen yet. `session`: `None` for one the bot
/// heard and did not answer (it goes with the next turn, in the session
/// that turn runs in), `Some` for one whose turn never reached Hermes (it
/// goes with the next turn in that session). `order`: when it was heard,
/// so a turn takes only the lines said before its own.
struct Kept {
    order: u64,
    session: Option<String>,
    line: String,
    /// Its row in `session_switch_heard`; `None` when the store refused it
    /// (it then lives in memory only).
    id: Option<i64>,
}

/// A message the bot will answer, waiting for its turn.
struct Turn {
    /// Whom it answers.
    nick: String,
    /// The message as the turn's line.
    line: String,
    reason: AdmitReason,
    order: u64,
    /// The line's row in `session_switch_heard`, kept until Hermes takes it.
    id: Option<i64>,
    /// For a turn decided before a restart: when its message came (Hermes
    /// may have taken it before the bot went).
    restored: Option<f64>,
}

/// The decision thread's state: the façade, the Hermes client, the room
/// lines Hermes has not seen yet (oldest first) and the turns waiting.
pub struct Decider {
    bridge: Arc<Bridge>,
    hermes: HermesClient,
    settings: BotSettings,
    backlog: VecDeque<Kept>,
    queue: VecDeque<Turn>,
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
            hermes,
            settings,
            backlog: VecDeque::new(),
            queue: VecDeque::new(),
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

    /// Take up the lines stored before a restart, in their order.
    fn restore(&mut self, lines: Vec<WaitingLine>) {
        for l in lines {
            let order = u64::try_from(l.ordering).unwrap_or(0);
            self.heard = self.heard.max(order);
            if l.answer {
                // Decided "answer" before the bot went, and not taken by
                // Hermes as far as the bot knew: answered now.
                self.queue.push_back(Turn {
                    nick: l.nick,
                    line: l.line,
                    reason: AdmitReason::Human,
                    order,
                    id: Some(l.id),
                    restored: Some(l.heard_at),
                });
                continue;
            }
            self.backlog.push_back(Kept {
                order,
                session: l.session,
                line: l.line,
                id: Some(l.id),
            });
        }
        if !self.backlog.is_empty() || !self.queue.is_empty() {
            tracing::info!(
                "{} lines from before wait for the next turn; {} messages decided before are \
                 answered now",
                self.backlog.len(),
                self.queue.len()
            );
        }
    }

    /// Whether the bot decided `m` already (a message caught up across
    /// the seam of a restart or a reconnect).
    pub fn decided(&self, m: &Incoming) -> bool {
        self.cursor.decided(m)
    }

    /// Decide every message of `inbox` until it closes; send each reply
    /// to `replies`.
    pub fn run(mut self, inbox: Receiver<Incoming>, replies: UnboundedSender<Reply>) {
        loop {
            if self.queue.is_empty() {
                match inbox.recv() {
                    Ok(m) => self.hear(&m),
                    Err(_) => return,
                }
            }
            while let Ok(m) = inbox.try_recv() {
                self.hear(&m);
            }
            let Some(turn) = self.queue.pop_front() else {
                continue;
            };
            let stops = self.stops;
            let reply = self.turn(turn);
            // What the room said meanwhile is heard before the reply goes
            // out: a person's stop among it keeps the reply from the room.
            while let Ok(m) = inbox.try_recv() {
                self.hear(&m);
            }
            let Some(mut reply) = reply else { continue };
            reply.stops = self.stops;
            if self.stops != stops {
                tracing::info!(
                    "reply to {} not posted: a person said stop while its turn ran \
                     (Hermes keeps it in session {})",
                    reply.to_nick,
                    reply.session
                );
                continue;
            }
            if replies.send(reply).is_err() {
                return;
            }
        }
    }

    /// Hear `m`: the policy's decision on it, logged; an answer queued, a
    /// heard line kept, a stop acted on. An own echo logs at debug only.
    pub fn hear(&mut self, m: &Incoming) {
        if m.caught_up && self.cursor.decided(m) {
            tracing::info!(
                "{}'s message from while the bot was away was decided before it went: skipped",
                m.nick
            );
        } else {
            self.decide(m);
        }
        self.progress.heard_one(self.stops);
    }

    fn decide(&mut self, m: &Incoming) {
        let agent = self.settings.agent.clone();
        let agent = agent.as_str();
        let own = match self.bridge.is_own(agent, &m.occupant) {
            Ok(own) => own,
            Err(e) => {
                tracing::warn!("not answering {}: is-own failed: {}", m.nick, e.message);
                return;
            }
        };
        let line = room_line(&self.bridge, agent, &m.nick, &m.body);
        let order = self.heard + 1;
        let cursor = self.cursor.after(m);
        let cursor_json = cursor.to_json();
        // The guard sees every live message, the bot's own included: its
        // own lines count as hops, and a send made for a person
        // (the human-origin marker) resets the counter (DESIGN §9.3). The
        // line is stored with the decision, so a restart does not lose it.
        let hearing = Hearing {
            nick: &m.nick,
            line: &line,
            ordering: i64::try_from(order).unwrap_or(i64::MAX),
            at: m.at,
            cursor: Some(&cursor_json),
        };
        let heard = match self.bridge.admit_hearing(agent, &room_message(m), &hearing) {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!("not answering {}: admit failed: {}", m.nick, e.message);
                return;
            }
        };
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

    /// Run one turn in Hermes; `Some` when a reply is to be posted.
    fn turn(&mut self, turn: Turn) -> Option<Reply> {
        let agent = self.settings.agent.clone();
        let agent = agent.as_str();
        let m = &turn;
        let default_session = self.settings.sessions[0].clone();
        let decision = match self.bridge.resolve(agent, &default_session) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!("not answering {}: resolve failed: {}", m.nick, e.message);
                return None;
            }
        };
        let session = decision.session_id.clone();
        let why = if turn.restored.is_some() {
            "decided before the restart"
        } else {
            turn.reason.as_str()
        };
        tracing::info!(
            "answering {} ({why}) in session {session} ({}: {})",
            m.nick,
            decision.reason.as_str(),
            decision.detail
        );
        if let Some(at) = turn.restored
            && self.stored_meanwhile(&session, &turn.line, at)
        {
            // Hermes took it before the bot went (its reply may have been
            // posted): answering again could double it.
            tracing::warn!(
                "not answering {} again: Hermes had the line in session {session} before the \
                 bot restarted",
                m.nick
            );
            self.forget(&turn.id.into_iter().collect::<Vec<_>>());
            return None;
        }
        let line = turn.line.clone();
        let order = turn.order;
        let taken = |k: &Kept| k.order < order && k.session.as_ref().is_none_or(|s| *s == session);
        let mut text: Vec<&str> = self
            .backlog
            .iter()
            .filter(|k| taken(k))
            .map(|k| k.line.as_str())
            .collect();
        text.push(&line);
        let text = text.join("\n");
        let started = unix_now();
        self.under_way
            .set(Some(format!("the reply to {} (session {session})", m.nick)));
        let answer = self.hermes.turn(&session, &text);
        self.under_way.set(None);
        let passed: Vec<i64> = self
            .backlog
            .iter()
            .filter(|k| taken(k))
            .filter_map(|k| k.id)
            .chain(turn.id)
            .collect();
        match answer {
            Ok(reply) => {
                self.backlog.retain(|k| !taken(k));
                self.forget(&passed);
                let body = normalise(&reply, self.settings.max_body_chars);
                if body.is_empty() {
                    tracing::warn!(
                        "no reply to {}: Hermes's reply is empty once normalised",
                        m.nick
                    );
                    return None;
                }
                Some(Reply {
                    body,
                    to_nick: m.nick.clone(),
                    session,
                    stops: self.stops,
                })
            }
            Err(e) if e.line_stored() => {
                // Hermes has the line (and the lines passed with it).
                self.backlog.retain(|k| !taken(k));
                self.forget(&passed);
                tracing::warn!(
                    "no reply to {}: {e}; the line is in session {session}",
                    m.nick
                );
                None
            }
            Err(e) if self.stored_meanwhile(&session, &line, started) => {
                // The connection broke after Hermes took the line (killed
                // mid-turn): it is in the session already.
                self.backlog.retain(|k| !taken(k));
                self.forget(&passed);
                tracing::warn!(
                    "no reply to {}: {e}; Hermes had stored the line in session {session} \
                     before that",
                    m.nick
                );
                None
            }
            Err(e) => {
                if let Some(id) = turn.id {
                    self.store_session(id, Some(session.clone()));
                }
                self.keep_in_memory(order, Some(session.clone()), line, turn.id);
                tracing::warn!(
                    "no reply to {}: {e}; the line goes to session {session} with the next turn \
                     there (lines waiting: {})",
                    m.nick,
                    self.backlog.len()
                );
                None
            }
        }
    }

    /// Whether Hermes stored `line` in `session` (or the tip it continued
    /// it in) since `started`, although the turn failed: a broken
    /// connection leaves that open. A read that fails says no (the line is
    /// kept: seen twice rather than lost).
    fn stored_meanwhile(&self, session: &str, line: &str, started: f64) -> bool {
        // Hermes stamps the row with its own clock: a second's leeway.
        let since = started - 1.0;
        let found = self.bridge.instance(false).and_then(|mut instance| {
            self.bridge.reads(&mut instance, |reads| {
                reads.holds_user_line(session, line, since)
            })
        });
        found.unwrap_or_else(|e| {
            tracing::warn!(
                "could not look for the line in session {session}: {}",
                e.message
            );
            false
        })
    }

    /// Forget the stored lines Hermes took (`ids`), in one brief
    /// transaction. A failure is logged: a restart would pass them again
    /// (seen twice rather than lost).
    fn forget(&self, ids: &[i64]) {
        if let Err(e) = self
            .bridge
            .heard_change(&self.settings.agent, ids, &[], &[])
        {
            tracing::warn!(
                "could not forget the {} lines Hermes took: {}; a restart passes them again",
                ids.len(),
                e.message
            );
        }
    }

    /// Keep row `id` as a line for a later turn (in `session`, or any):
    /// no longer a turn to answer after a restart. A failure is logged.
    fn store_session(&self, id: i64, session: Option<String>) {
        if let Err(e) = self
            .bridge
            .heard_change(&self.settings.agent, &[], &[(id, session)], &[])
        {
            tracing::warn!(
                "could not keep the line for a later turn: {}; after a restart it is answered",
                e.message
            );
        }
    }

    /// Drop from memory the lines the store's cap dropped, and log them.
    fn forget_dropped(&mut self, dropped: &[WaitingLine]) {
        for old in dropped {
            tracing::warn!(
                "more than {BACKLOG_LINES} lines wait for the next turn: the oldest is dropped \
                 ({:?})",
                old.line
            );
            self.backlog.retain(|k| k.id != Some(old.id));
        }
    }

    /// Keep a line (stored as row `id`) for a later turn, in the order it
    /// was heard; past [`BACKLOG_LINES`] the oldest is dropped, and logged.
    fn keep_in_memory(
        &mut self,
        order: u64,
        session: Option<String>,
        line: String,
        id: Option<i64>,
    ) {
        self.backlog.retain(|k| id.is_none() || k.id != id);
        let at = self.backlog.partition_point(|k| k.order <= order);
        self.backlog.insert(
            at,
            Kept {
                order,
                session,
                line,
                id,
            },
        );
        while self.backlog.len() > BACKLOG_LINES {
            if let Some(old) = self.backlog.pop_front() {
                tracing::warn!(
                    "more than {BACKLOG_LINES} lines wait for the next turn: the oldest is \
                     dropped ({:?})",
                    old.line
                );
                if let Some(id) = old.id {
                    self.forget(&[id]);
                }
            }
        }
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
