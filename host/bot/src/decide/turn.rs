//! A turn: the session it runs in, the lines passed with it, Hermes's
//! answer, and what is kept when Hermes did not take the line.

use super::Decider;
use super::waiting::Kept;
use crate::reply::{Reply, normalise};
use session_switch::runtime::{AdmitReason, unix_now};
use std::time::Instant;

/// A message the bot will answer, waiting for its turn.
pub(super) struct Turn {
    /// Whom it answers.
    pub(super) nick: String,
    /// The message as the turn's line.
    pub(super) line: String,
    pub(super) reason: AdmitReason,
    pub(super) order: u64,
    /// The line's row in `session_switch_heard`, kept until Hermes takes it.
    pub(super) id: Option<i64>,
    /// For a turn decided before a restart: when its message came (Hermes
    /// may have taken it before the bot went).
    pub(super) restored: Option<f64>,
}

impl Decider {
    /// Run one turn in Hermes; `Some` when a reply is to be posted.
    pub(super) fn turn(&mut self, turn: Turn) -> Option<Reply> {
        let agent = self.settings.agent.clone();
        let agent = agent.as_str();
        let m = &turn;
        let default_session = self.settings.sessions[0].clone();
        let resolving = Instant::now();
        let decision = match self
            .bridge
            .resolve_kept(&mut self.kept, agent, &default_session)
        {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!("not answering {}: resolve failed: {}", m.nick, e.message);
                return None;
            }
        };
        tracing::debug!(
            "resolve for {}'s turn: {} µs",
            m.nick,
            resolving.elapsed().as_micros()
        );
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
        let asked = Instant::now();
        let answer = self.hermes.turn(&session, &text);
        // The bench takes the turn request's departure from this line's
        // time less the round trip.
        tracing::debug!(
            "Hermes answered {}'s turn in {} µs",
            m.nick,
            asked.elapsed().as_micros()
        );
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
                self.taken.extend(passed);
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
    pub(super) fn stored_meanwhile(&mut self, session: &str, line: &str, started: f64) -> bool {
        // Hermes stamps the row with its own clock: a second's leeway.
        let since = started - 1.0;
        let bridge = &self.bridge;
        let found = bridge.with_kept(&mut self.kept, |instance, _| {
            bridge.reads(instance, |reads| {
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
}
