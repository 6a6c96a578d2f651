//! The failure kinds of the contract (WIT `failure-kind`) and what each
//! means for the CLI's exit status (docs/src/design/send.md#the-atomic-send), and the host's one
//! error type, [`Failure`], which mirrors the WIT `failure` record so a
//! failure crosses the component boundary unchanged.

use alloc::string::String;

/// Classes of failure (WIT `failure-kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// Bad input: empty or oversized body, bad session id, bad key.
    BadInput,
    /// No agent of that name in the config.
    UnknownAgent,
    /// The room would not accept the agent's JID as a sender.
    NotAccepted,
    /// `state.db` stayed locked past the busy timeout; nothing was written.
    Busy,
    /// The post was made but no answer came: nothing recorded, the room may
    /// have the message.
    UnknownOutcome,
    /// `state.db` failed: missing, not a database, read-only, schema.
    Store,
    /// ejabberd failed or could not be reached.
    Transport,
    /// The policy component failed: trap, fuel, memory, invalid answer.
    Policy,
}

impl FailureKind {
    /// Every kind, in WIT order.
    pub const ALL: [Self; 8] = [
        Self::BadInput,
        Self::UnknownAgent,
        Self::NotAccepted,
        Self::Busy,
        Self::UnknownOutcome,
        Self::Store,
        Self::Transport,
        Self::Policy,
    ];

    /// The CLI's exit status (docs/src/design/contracts.md): 2 refused before posting, 3 the
    /// room's answer is unknown, 1 any other error.
    pub fn exit_status(self) -> u8 {
        match self {
            Self::BadInput | Self::UnknownAgent | Self::NotAccepted | Self::Busy => 2,
            Self::UnknownOutcome => 3,
            Self::Store | Self::Transport | Self::Policy => 1,
        }
    }

    /// Kebab-case name, as in the WIT enum and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BadInput => "bad-input",
            Self::UnknownAgent => "unknown-agent",
            Self::NotAccepted => "not-accepted",
            Self::Busy => "busy",
            Self::UnknownOutcome => "unknown-outcome",
            Self::Store => "store",
            Self::Transport => "transport",
            Self::Policy => "policy",
        }
    }
}

/// A failure: its kind and one line saying what failed, where, and what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

impl Failure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
    pub fn bad_input(message: impl Into<String>) -> Self {
        Self::new(FailureKind::BadInput, message)
    }
    pub fn store(message: impl Into<String>) -> Self {
        Self::new(FailureKind::Store, message)
    }
    pub fn transport(message: impl Into<String>) -> Self {
        Self::new(FailureKind::Transport, message)
    }
    pub fn policy(message: impl Into<String>) -> Self {
        Self::new(FailureKind::Policy, message)
    }
    pub fn exit_status(&self) -> u8 {
        self.kind.exit_status()
    }
}

impl core::fmt::Display for Failure {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.message)
    }
}

impl core::error::Error for Failure {}
