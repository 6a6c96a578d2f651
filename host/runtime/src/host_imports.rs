//! What the host gives the policy: the trait behind the WIT `host`
//! interface. The Hermes store and the ejabberd transports implement it
//! (glue outside this module); tests implement it over memory.

use std::any::Any;

use super::bindings::{SendPlan, Sent};
use crate::Failure;
pub use session_switch_contract::clock::unix_now;
pub use session_switch_contract::history::{DataVersion, HistoryRow, LoadedMessage, sent_text};

/// The host imports of the policy (WIT `agentsmeeting:session-switch/host`),
/// minus `log`, which the runtime itself routes to `tracing`.
///
/// One `HostImports` belongs to one [`PolicyInstance`](super::PolicyInstance) and is only
/// called from inside that instance's calls, on the caller's thread; it is
/// `Send` so an instance may move between threads. A `Failure` returned here
/// reaches the policy unchanged as a WIT `failure`, and the policy passes it
/// back to the caller with the same kind. `Any`, so that a host can reach
/// its own type behind [`PolicyInstance::imports_mut`](super::PolicyInstance::imports_mut)
/// (e.g. for plain reads on the connection the policy's calls use).
pub trait HostImports: Any + Send {
    /// The value of `state_meta` key `key`; `None` when the key or the whole
    /// table is absent (early Hermes databases have none). Must not write.
    fn meta_get(&mut self, key: &str) -> Result<Option<String>, Failure>;

    /// Delete `state_meta` key `key`; `true` when a row was removed. The
    /// runtime already refuses any key but ours (see
    /// [`is_our_meta_key`](super::is_our_meta_key)) before calling this.
    fn meta_delete(&mut self, key: &str) -> Result<bool, Failure>;

    /// Set `state_meta` key `key` to `value` (insert or replace; creates
    /// the table where it is missing). The runtime calls it only inside
    /// `admit` and only for a loop-guard key, between
    /// [`HostImports::begin_write`] and [`HostImports::end_write`].
    fn meta_set(&mut self, key: &str, value: &str) -> Result<(), Failure>;

    /// Whether Hermes's `sessions` table has a row with this id.
    fn session_exists(&mut self, id: &str) -> Result<bool, Failure>;

    /// The history of `session_id` as Hermes's loader returns it (ORDER BY
    /// `messages.id`, `active = 1` rows only where that column exists, the
    /// last `limit` rows when `Some`); `bridge_wrote` is about `agent`. An
    /// unknown session has an empty history (docs/src/design/contracts.md).
    fn history(
        &mut self,
        session_id: &str,
        agent: &str,
        limit: Option<u32>,
    ) -> Result<Vec<HistoryRow>, Failure>;

    /// The current time in Unix seconds (UTC), with fractions.
    fn now(&mut self) -> f64;

    /// Do one send atomically (docs/src/design/send.md#the-atomic-send): the history row, its
    /// provenance and the record are committed only if the room accepted
    /// `plan.room_body`; on any failure nothing is written.
    fn send(&mut self, plan: &SendPlan) -> Result<Sent, Failure>;

    /// A policy call that only reads (`resolve`, `context`, `active`) is
    /// about to run: the imports may serve all its imports from one read
    /// snapshot (one lock instead of one per read, and one consistent
    /// state). Imports that cannot simply serve each read on their own.
    /// Default: nothing.
    fn begin_read(&mut self) {}

    /// A policy call that reads and writes its state (`admit`) is about to
    /// run: open one brief write transaction so the read and the write are
    /// atomic against other bots and CLI calls. Errors (e.g. kind `busy`)
    /// fail the call before the policy runs. Default: nothing.
    fn begin_write(&mut self) -> Result<(), Failure> {
        Ok(())
    }

    /// End the call [`HostImports::begin_write`] announced: commit when
    /// `commit`, else roll back. Default: nothing.
    fn end_write(&mut self, commit: bool) -> Result<(), Failure> {
        let _ = commit;
        Ok(())
    }

    /// The call [`HostImports::begin_read`] announced has ended, also when the
    /// policy trapped: close the snapshot. Default: nothing.
    fn end_read(&mut self) {}

    /// A value that changes whenever what these imports read may have
    /// changed: another connection committed to `state.db`, or these
    /// imports wrote. Inside a read snapshot, the snapshot's version. The
    /// memo of `resolve` (`memo.rs`) serves a decision without reading when
    /// it is equal to the one the decision was made at. `Ok(None)` (the
    /// default): the imports cannot tell, and every memoised decision is
    /// checked by asking its reads again. `Err` as a read's (e.g. kind
    /// `busy`): that `resolve` fails with it.
    fn data_version(&mut self) -> Result<Option<DataVersion>, Failure> {
        Ok(None)
    }
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
    fn meta_set(&mut self, _key: &str, _value: &str) -> Result<(), Failure> {
        Err(Self::refuse("meta-set"))
    }
    fn session_exists(&mut self, _id: &str) -> Result<bool, Failure> {
        Err(Self::refuse("session-exists"))
    }
    fn history(&mut self, _: &str, _: &str, _: Option<u32>) -> Result<Vec<HistoryRow>, Failure> {
        Err(Self::refuse("history"))
    }
    fn now(&mut self) -> f64 {
        unix_now()
    }
    fn send(&mut self, _plan: &SendPlan) -> Result<Sent, Failure> {
        Err(Self::refuse("send"))
    }
}
