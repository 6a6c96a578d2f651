//! What one policy call may do and what it did: which export runs, the
//! arguments its `host.send` must match, and what its imports read, sent,
//! deleted, refused and logged.

use crate::HistoryRow;
use crate::bindings::Sent;
use crate::memo::ImportAnswers;

/// Which export of the policy is running (what its imports may do).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Call {
    #[default]
    Configure,
    Version,
    SelfCheck,
    Resolve,
    Tag,
    Context,
    Send,
    Active,
    Clear,
    IsOwnMessage,
    Admit,
}

impl Call {
    /// Whether the export only reads (`resolve`, `context`, `active`): the
    /// imports serve it from one read snapshot
    /// ([`HostImports::begin_read`](crate::HostImports::begin_read)).
    pub(crate) fn only_reads(self) -> bool {
        matches!(self, Self::Resolve | Self::Context | Self::Active)
    }

    /// Whether the call's reads are kept ([`CallState::reads`]).
    pub(super) fn keeps_reads(self) -> bool {
        matches!(self, Self::Resolve | Self::Context)
    }

    /// The export's WIT name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Configure => "configure",
            Self::Version => "version",
            Self::SelfCheck => "self-check",
            Self::Resolve => "resolve",
            Self::Tag => "tag",
            Self::Context => "context",
            Self::Send => "send",
            Self::Active => "active",
            Self::Clear => "clear",
            Self::IsOwnMessage => "is-own-message",
            Self::Admit => "admit",
        }
    }
}

/// The arguments of the last `host.history` call of a `context`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HistoryQuery {
    pub(crate) session_id: String,
    pub(crate) agent: String,
    pub(crate) limit: Option<u32>,
}

/// The agent and CLI session of the running `policy.send`: the plan must
/// name the same ones.
#[derive(Clone, Debug)]
pub(crate) struct SendArgs {
    pub(crate) agent: String,
    pub(crate) cli_session_id: String,
}

/// What one call may do and what it did: the export that runs, the
/// arguments its `host.send` must match, and what its imports read, sent,
/// deleted, refused and logged. Replaced whole when a call begins
/// ([`StoreData::begin`](super::StoreData::begin)) and taken whole when it
/// ends ([`StoreData::finish`](super::StoreData::finish)), so nothing of one
/// call reaches the next.
#[derive(Debug, Default)]
pub(crate) struct CallState {
    /// Which export runs (what its imports may do).
    pub(crate) export: Call,
    pub(crate) send_args: Option<SendArgs>,
    /// The full rows `host.history` read, for the host to apply edits to.
    pub(crate) rows: Vec<HistoryRow>,
    pub(crate) history: Option<HistoryQuery>,
    pub(crate) sent: Option<Sent>,
    /// The `state_meta` keys `host.meta-delete` removed.
    pub(crate) deleted: Vec<String>,
    /// The first thing the policy did that it may not do in this call.
    pub(crate) violation: Option<String>,
    /// Error and warn lines the guest logged in this call (its panic hook
    /// writes the panic message here).
    pub(crate) said: Vec<String>,
    /// What `meta-get`, `session-exists` and `now` answered a `resolve` or
    /// `context`: the host's own check of a redirect reuses the values
    /// (same read snapshot) instead of reading `state_meta` again, and the
    /// memo of `resolve` keeps them with its decision.
    pub(crate) reads: ImportAnswers,
    /// The one key `admit` may set: the receiving agent's guard key in the
    /// configured room (`None` in every other call).
    pub(crate) admit_key: Option<String>,
    /// `admit` has set its loop-guard state.
    pub(crate) guard_written: bool,
}
