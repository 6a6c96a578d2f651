//! What the host gives the policy: the trait behind the WIT `host`
//! interface. The Hermes store and the ejabberd transports implement it
//! (glue outside this module); tests implement it over memory.

use super::bindings::{SendPlan, Sent};
use crate::Failure;

/// One history row as Hermes's loader returns it for the model
/// (`get_messages_as_conversation`, research/hermes-state.md §6).
#[derive(Clone, Debug, PartialEq)]
pub struct HistoryRow {
    /// `messages.id`; history order.
    pub id: i64,
    /// `messages.role`: `user`, `assistant`, `tool`, `system`, … as stored.
    pub role: String,
    /// `messages.content`, NULL read as empty.
    pub content: String,
    /// `messages.tool_calls`: JSON text of the OpenAI list, as stored.
    pub tool_calls: Option<String>,
    /// `messages.tool_call_id`: on a `tool` row, the call it answers.
    pub tool_call_id: Option<String>,
    /// `messages.tool_name`: on a `tool` row, the tool that ran.
    pub tool_name: Option<String>,
    /// Listed in `session_switch_sent` for the agent the history was read for.
    pub bridge_wrote: bool,
}

/// The host imports of the policy (WIT `agentsmeeting:session-switch/host`),
/// minus `log`, which the runtime itself routes to `tracing`.
///
/// One `HostImports` belongs to one [`PolicyInstance`](super::PolicyInstance) and is only
/// called from inside that instance's calls, on the caller's thread; it is
/// `Send` so an instance may move between threads. A `Failure` returned here
/// reaches the policy unchanged as a WIT `failure`, and the policy passes it
/// back to the caller with the same kind.
pub trait HostImports: Send + 'static {
    /// The value of `state_meta` key `key`; `None` when the key or the whole
    /// table is absent (early Hermes databases have none). Must not write.
    fn meta_get(&mut self, key: &str) -> Result<Option<String>, Failure>;

    /// Delete `state_meta` key `key`; `true` when a row was removed. The
    /// runtime already refuses any key but ours (see
    /// [`is_our_meta_key`](super::is_our_meta_key)) before calling this.
    fn meta_delete(&mut self, key: &str) -> Result<bool, Failure>;

    /// Whether Hermes's `sessions` table has a row with this id.
    fn session_exists(&mut self, id: &str) -> Result<bool, Failure>;

    /// The history of `session_id` as Hermes's loader returns it (ORDER BY
    /// `messages.id`, `active = 1` rows only where that column exists, the
    /// last `limit` rows when `Some`); `bridge_wrote` is about `agent`. An
    /// unknown session has an empty history (DESIGN §8).
    fn history(
        &mut self,
        session_id: &str,
        agent: &str,
        limit: Option<u32>,
    ) -> Result<Vec<HistoryRow>, Failure>;

    /// The current time in Unix seconds (UTC), with fractions.
    fn now(&mut self) -> f64;

    /// Do one send atomically (DESIGN §8 "Send"): the history row, its
    /// provenance and the record are committed only if the room accepted
    /// `plan.room_body`; on any failure nothing is written.
    fn send(&mut self, plan: &SendPlan) -> Result<Sent, Failure>;

    /// A policy call that only reads (`resolve`, `context`, `active`) is
    /// about to run: the imports may serve all its imports from one read
    /// snapshot (one lock instead of one per read, and one consistent
    /// state). Imports that cannot simply serve each read on their own.
    /// Default: nothing.
    fn begin_read(&mut self) {}

    /// The call [`HostImports::begin_read`] announced has ended, also when the
    /// policy trapped: close the snapshot. Default: nothing.
    fn end_read(&mut self) {}
}

/// Imports with nothing behind them: every fallible import fails with kind
/// `store`. The check of a new component runs `version`, `self-check` and
/// `configure` with them, none of which may call the host.
pub(crate) struct NoImports;

impl NoImports {
    fn refuse(what: &str) -> Failure {
        Failure::store(format!(
            "the policy called host.{what} while being checked, where no state.db is attached; \
             self-check and configure must not call the host"
        ))
    }
}

impl HostImports for NoImports {
    fn meta_get(&mut self, _key: &str) -> Result<Option<String>, Failure> {
        Err(Self::refuse("meta-get"))
    }
    fn meta_delete(&mut self, _key: &str) -> Result<bool, Failure> {
        Err(Self::refuse("meta-delete"))
    }
    fn session_exists(&mut self, _id: &str) -> Result<bool, Failure> {
        Err(Self::refuse("session-exists"))
    }
    fn history(&mut self, _: &str, _: &str, _: Option<u32>) -> Result<Vec<HistoryRow>, Failure> {
        Err(Self::refuse("history"))
    }
    fn now(&mut self) -> f64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    }
    fn send(&mut self, _plan: &SendPlan) -> Result<Sent, Failure> {
        Err(Self::refuse("send"))
    }
}
