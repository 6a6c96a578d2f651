//! Hearing the messages that waited while the decision thread was busy (a
//! turn at Hermes, the decision before): their `admit`s run in one write
//! transaction (`Bridge::admit_hearings_on`), so a bot that fell behind a
//! busy room pays one commit, and its fsyncs, for all of them instead of
//! one each. Each message is still decided on its own and in order: the
//! policy's call on one sees the guard's state the one before wrote, and
//! the lines, cursor and turns follow as for a message heard alone.

use super::{Decider, room_message, skipped};
use crate::cursor::Cursor;
use crate::room::Incoming;
use session_switch::Hearing;
use std::sync::mpsc::Receiver;
use std::time::Instant;

/// At most this many messages are decided in one transaction: the write
/// lock is held for their policy calls, and Hermes's readers wait at most
/// a second for it.
const MAX_BATCH: usize = 32;

/// `first` and the messages already waiting in `inbox` behind it, at most
/// [`MAX_BATCH`].
pub(super) fn waiting(first: Incoming, inbox: &Receiver<Incoming>) -> Vec<Incoming> {
    let mut all = vec![first];
    while all.len() < MAX_BATCH {
        match inbox.try_recv() {
            Ok(m) => all.push(m),
            Err(_) => break,
        }
    }
    all
}

/// What the bot asks the policy about a message besides the message
/// itself, made before the write transaction.
pub(super) struct Prepared {
    pub(super) own: bool,
    pub(super) line: String,
    /// Its place in the bot's count of decisions.
    pub(super) order: u64,
    /// The room cursor after it, and as stored.
    pub(super) cursor: Cursor,
    pub(super) cursor_json: String,
    pub(super) nick: String,
    pub(super) at: f64,
}

impl Prepared {
    /// The hearing stored with the decision; `forget`: the lines Hermes
    /// took, deleted in the same transaction.
    pub(super) fn hearing<'a>(&'a self, forget: &'a [i64]) -> Hearing<'a> {
        Hearing {
            nick: &self.nick,
            line: &self.line,
            ordering: i64::try_from(self.order).unwrap_or(i64::MAX),
            at: self.at,
            cursor: Some(&self.cursor_json),
            forget,
        }
    }
}

impl Decider {
    /// Hear `messages` in order ([`Decider::hear`] each): one alone is
    /// heard as such; several are decided in one transaction, and should
    /// that fail, each again alone (its failure then logged for it).
    pub fn hear_all(&mut self, messages: Vec<Incoming>) {
        if messages.len() < 2 {
            return self.hear_each(&messages);
        }
        let started = Instant::now();
        let mut cursor = self.cursor.clone();
        let mut order = self.heard;
        let mut prepared = Vec::with_capacity(messages.len());
        for m in &messages {
            if m.caught_up && cursor.decided(m) {
                skipped(m);
                continue;
            }
            match self.prepare(m, order + 1, &cursor) {
                Some(p) => {
                    order = p.order;
                    cursor = p.cursor.clone();
                    prepared.push((m, p));
                }
                // is-own failed: the message by itself says so.
                None => return self.hear_each(&messages),
            }
        }
        if !prepared.is_empty() && !self.decide_together(prepared, started, messages.len()) {
            return self.hear_each(&messages);
        }
        for _ in &messages {
            self.progress.heard_one(self.stops);
        }
    }

    /// Decide `prepared` in one transaction and act on each decision;
    /// `false` (logged, nothing written) when the transaction failed.
    /// `heard`: how many messages were heard, for each one's share of the
    /// time since `started`.
    fn decide_together(
        &mut self,
        prepared: Vec<(&Incoming, Prepared)>,
        started: Instant,
        heard: usize,
    ) -> bool {
        let forget = std::mem::take(&mut self.taken);
        let hearings: Vec<Hearing<'_>> = prepared
            .iter()
            .enumerate()
            .map(|(i, (_, p))| p.hearing(if i == 0 { &forget } else { &[] }))
            .collect();
        let asked: Vec<_> = prepared.iter().map(|(m, _)| room_message(m)).collect();
        let agent = self.settings.agent.clone();
        let bridge = &self.bridge;
        let decided = bridge.with_kept(&mut self.kept, |i, _| {
            bridge.admit_hearings_on(i, &agent, &asked, &hearings)
        });
        drop(hearings);
        let decided = match decided {
            Ok(decided) => decided,
            Err(e) => {
                tracing::warn!(
                    "{} messages not decided together ({}): deciding each alone",
                    prepared.len(),
                    e.message
                );
                self.taken = forget;
                return false;
            }
        };
        // The bench reads each message's share of the decision.
        let each = started.elapsed().as_micros() / heard as u128;
        for ((m, p), decision) in prepared.into_iter().zip(decided) {
            self.settle(m, p, decision);
            tracing::debug!("{}'s message decided in {each} µs", m.nick);
        }
        true
    }

    fn hear_each(&mut self, messages: &[Incoming]) {
        for m in messages {
            self.hear(m);
        }
    }
}
