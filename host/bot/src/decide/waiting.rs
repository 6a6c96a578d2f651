//! The room lines waiting for a turn: heard and not answered, or whose
//! turn never reached Hermes. Kept in memory in the order heard, mirrored
//! by the store's `session_switch_heard` rows so a restarted bot passes
//! them on.

use super::Decider;
use super::turn::Turn;
use session_switch::runtime::AdmitReason;
use session_switch::{HEARD_CAP, HeardLine};

/// How many room lines are kept for the next turn: lines the bot heard
/// but did not answer, and lines whose turn never reached Hermes (a Hermes
/// that stays down for a long chat would grow the turn past use).
pub const BACKLOG_LINES: usize = HEARD_CAP;

/// A room line Hermes has not seen yet. `session`: `None` for one the bot
/// heard and did not answer (it goes with the next turn, in the session
/// that turn runs in), `Some` for one whose turn never reached Hermes (it
/// goes with the next turn in that session). `order`: when it was heard,
/// so a turn takes only the lines said before its own.
pub(super) struct Kept {
    pub(super) order: u64,
    pub(super) session: Option<String>,
    pub(super) line: String,
    /// Its row in `session_switch_heard`; `None` when the store refused it
    /// (it then lives in memory only).
    pub(super) id: Option<i64>,
}

impl Decider {
    /// Take up the lines stored before a restart, in their order.
    pub(super) fn restore(&mut self, lines: Vec<HeardLine>) {
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

    /// Forget the stored lines Hermes took (`ids`), in one brief
    /// transaction. A failure is logged: a restart would pass them again
    /// (seen twice rather than lost).
    pub(super) fn forget(&mut self, ids: &[i64]) {
        let (bridge, agent) = (&self.bridge, &self.settings.agent);
        if let Err(e) = bridge.with_kept(&mut self.kept, |i, _| {
            bridge.heard_change_on(i, agent, ids, &[], &[])
        }) {
            tracing::warn!(
                "could not forget the {} lines Hermes took: {}; a restart passes them again",
                ids.len(),
                e.message
            );
        }
    }

    /// Keep row `id` as a line for a later turn (in `session`, or any):
    /// no longer a turn to answer after a restart. A failure is logged.
    pub(super) fn store_session(&mut self, id: i64, session: Option<String>) {
        let (bridge, agent) = (&self.bridge, &self.settings.agent);
        if let Err(e) = bridge.with_kept(&mut self.kept, |i, _| {
            bridge.heard_change_on(i, agent, &[], &[(id, session)], &[])
        }) {
            tracing::warn!(
                "could not keep the line for a later turn: {}; after a restart it is answered",
                e.message
            );
        }
    }

    /// Drop from memory the lines the store's cap dropped, and log them.
    pub(super) fn forget_dropped(&mut self, dropped: &[HeardLine]) {
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
    pub(super) fn keep_in_memory(
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
