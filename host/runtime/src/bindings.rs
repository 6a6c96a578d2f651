//! The one `bindgen!` of the host over `wit/` (world `session-switch`), and
//! the conversions between the WIT `failure` record and [`crate::Failure`].
//!
//! Every other module uses the generated types through this one, as Spin's
//! `crates/world` does: one place decides how the contract maps to Rust.

wasmtime::component::bindgen!({
    world: "session-switch",
    path: "../../wit",
    // Callers and tests compare answers; f64 fields rule out `Eq`.
    additional_derives: [PartialEq],
});

pub use agentsmeeting::session_switch::types::{
    Admission, AdmitReason, Agent, AllowBots, ContextResult, Decision, EditAction, LogLevel,
    LoopGuard, Meeting, MeetingOverrides, Reason, Receipt, RecordStatus, ReplyTarget, Role,
    RoomMessage, RowEdit, RowSummaries, RowSummary, SendPlan, Sent, Settings,
};

/// The WIT `failure` record and its kind, under names that do not clash with
/// the host's own [`crate::Failure`].
pub use agentsmeeting::session_switch::types::{
    Failure as WitFailure, FailureKind as WitFailureKind,
};

use crate::{Failure, FailureKind};

impl AdmitReason {
    /// The kebab-case name of the WIT enum case, as the CLI's JSON prints
    /// it, e.g. `"loop-guard"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Human => "human",
            Self::Addressed => "addressed",
            Self::FreeResponse => "free-response",
            Self::OwnMessage => "own-message",
            Self::NotAddressed => "not-addressed",
            Self::AddressedElsewhere => "addressed-elsewhere",
            Self::BotsNotAllowed => "bots-not-allowed",
            Self::Stopped => "stopped",
            Self::Duplicate => "duplicate",
            Self::LoopGuard => "loop-guard",
            Self::Delayed => "delayed",
            Self::CaughtUp => "caught-up",
        }
    }
}

impl Meeting {
    /// The meeting's defaults: `require_mention` on, no free-response rooms
    /// or patterns, `allow_bots` `mentions`, the default stop words.
    pub fn defaults() -> Self {
        use session_switch_contract::meeting::{DEFAULT_REQUIRE_MENTION, DEFAULT_STOP_WORDS};
        Self {
            require_mention: DEFAULT_REQUIRE_MENTION,
            free_response_rooms: Vec::new(),
            mention_patterns: Vec::new(),
            allow_bots: AllowBots::Mentions,
            stop_words: DEFAULT_STOP_WORDS.iter().map(|w| w.to_string()).collect(),
        }
    }
}

impl MeetingOverrides {
    /// No value of the agent's own: every setting is the room's.
    pub fn none() -> Self {
        Self {
            require_mention: None,
            free_response_rooms: None,
            mention_patterns: None,
            allow_bots: None,
        }
    }
}

impl AllowBots {
    /// The config's spelling of the value, e.g. `"mentions"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Mentions => "mentions",
            Self::All => "all",
        }
    }
}

impl Reason {
    /// The kebab-case name of the WIT enum case, as the CLI's JSON prints
    /// it (docs/src/design/contracts.md), e.g. `"not-agent-session"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Redirected => "redirected",
            Self::NoRecord => "no-record",
            Self::Expired => "expired",
            Self::FutureTimestamp => "future-timestamp",
            Self::MalformedRecord => "malformed-record",
            Self::UnknownSession => "unknown-session",
            Self::NotAgentSession => "not-agent-session",
            Self::Superseded => "superseded",
            Self::PolicyError => "policy-error",
        }
    }
}

impl From<WitFailureKind> for FailureKind {
    fn from(kind: WitFailureKind) -> Self {
        match kind {
            WitFailureKind::BadInput => Self::BadInput,
            WitFailureKind::UnknownAgent => Self::UnknownAgent,
            WitFailureKind::NotAccepted => Self::NotAccepted,
            WitFailureKind::Busy => Self::Busy,
            WitFailureKind::UnknownOutcome => Self::UnknownOutcome,
            WitFailureKind::Store => Self::Store,
            WitFailureKind::Transport => Self::Transport,
            WitFailureKind::Policy => Self::Policy,
        }
    }
}

impl From<FailureKind> for WitFailureKind {
    fn from(kind: FailureKind) -> Self {
        match kind {
            FailureKind::BadInput => Self::BadInput,
            FailureKind::UnknownAgent => Self::UnknownAgent,
            FailureKind::NotAccepted => Self::NotAccepted,
            FailureKind::Busy => Self::Busy,
            FailureKind::UnknownOutcome => Self::UnknownOutcome,
            FailureKind::Store => Self::Store,
            FailureKind::Transport => Self::Transport,
            FailureKind::Policy => Self::Policy,
        }
    }
}

impl From<WitFailure> for Failure {
    fn from(failure: WitFailure) -> Self {
        Failure::new(failure.kind.into(), failure.message)
    }
}

impl From<Failure> for WitFailure {
    fn from(failure: Failure) -> Self {
        WitFailure {
            kind: failure.kind.into(),
            message: failure.message,
        }
    }
}

impl From<session_switch_contract::role::Role> for Role {
    fn from(role: session_switch_contract::role::Role) -> Self {
        use session_switch_contract::role::Role as R;
        match role {
            R::User => Self::User,
            R::Assistant => Self::Assistant,
            R::Tool => Self::Tool,
            R::System => Self::System,
            R::Other => Self::Other,
        }
    }
}
