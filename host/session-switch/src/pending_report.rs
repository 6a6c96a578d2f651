//! What the faces read of the store, as the façade's own types: a send not
//! yet in the history, a sent row. Converted here from the
//! store's types, so a change to those stays inside this crate.

use session_switch_store::{PendingSend, PendingState};

/// Where a send between its intent and its record stands (docs/src/design/send.md#a-send-never-locks-hermes-out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PendingStatus {
    /// The post is running, or the process died during it: the room may
    /// have the message ([`PendingReport::process_alive`] tells which).
    Posting,
    /// The outcome is unknown: the post timed out after the request went
    /// out, or the sender check that ran beside it failed. The room may
    /// have it.
    Unknown,
    /// The room took it; the history row and the record wait for the
    /// database (the next send, `active` or `clear` writes them).
    Delivered,
    /// A value under our pending prefix that is not an intent of ours.
    Malformed,
}

/// A send that reached the room, or may have, without its history row
/// ([`Bridge::pending_sends`](crate::Bridge::pending_sends)).
#[derive(Clone, Debug, PartialEq)]
pub struct PendingReport {
    /// Its `state_meta` key, `session_switch:pending:<agent>:<token>`.
    pub key: String,
    pub agent: String,
    pub state: PendingStatus,
    /// `state` is [`PendingStatus::Delivered`].
    pub delivered: bool,
    /// For [`PendingStatus::Posting`]: the process that wrote the intent is
    /// still running (the send is in progress), as far as this machine can
    /// tell; `false` means it died during the post.
    pub process_alive: bool,
    /// Unix seconds of the send (0 when malformed).
    pub created_at: f64,
    /// The history row's content (`[YOU] ` + the body; empty when malformed).
    pub body: String,
    pub cli_session_id: String,
    /// `state` as the store names it, the JSON value.
    state_name: &'static str,
}

impl PendingReport {
    /// `posting`, `unknown`, `delivered`, `malformed` (the JSON values).
    pub fn state_name(&self) -> &'static str {
        self.state_name
    }
}

impl From<PendingSend> for PendingReport {
    fn from(p: PendingSend) -> Self {
        Self {
            key: p.key,
            agent: p.agent,
            state: match p.state {
                PendingState::Posting => PendingStatus::Posting,
                PendingState::Unknown => PendingStatus::Unknown,
                PendingState::Delivered => PendingStatus::Delivered,
                PendingState::Malformed => PendingStatus::Malformed,
            },
            delivered: p.delivered,
            process_alive: p.process_alive,
            created_at: p.created_at,
            body: p.body,
            cli_session_id: p.cli_session_id,
            state_name: p.state.as_str(),
        }
    }
}
