//! A gateway's plain reads of `state.db` beside the policy's calls, on the
//! connection those calls use (`Bridge::reads`): after another connection's
//! commit SQLite drops a connection's page cache and the next read goes back
//! to the file (docs/src/design/hermes-plugin.md#as-built), so a request whose reads share
//! one connection pays that once. The faces (the Python binding, a Rust
//! gateway) read through this view, never through the store's own type.

use session_switch_contract::failure::Failure;
use session_switch_store::HermesStore;
use session_switch_store::SentRow;

/// Read-only access to one connection of a Hermes `state.db`.
pub struct Reads<'a>(pub(crate) &'a HermesStore);

impl Reads<'_> {
    /// Whether any session names `session_id` as its parent (Hermes's
    /// compression and branches). Without one, Hermes's own walks from it
    /// to a continuation end at `session_id` itself. Errors: kind `busy`
    /// or `store`.
    pub fn has_child_sessions(&self, session_id: &str) -> Result<bool, Failure> {
        self.0.has_child_sessions(session_id)
    }

    /// The sent rows: the rows our sends wrote into `session_id` for `agent`
    /// (`session_switch_sent`), in id order, empty when that table is
    /// missing. Errors: kind `busy` or `store`.
    pub fn sent_rows(&self, session_id: &str, agent: &str) -> Result<Vec<SentRow>, Failure> {
        self.0.sent_rows(session_id, agent)
    }

    /// Whether `session_id` (or its live tip) holds a `user` row stored at
    /// or after `since` (Unix seconds) whose text contains `line`: a
    /// turn's line that reached Hermes although its answer did not. Errors:
    /// kind `busy` or `store`.
    pub fn holds_user_line(
        &self,
        session_id: &str,
        line: &str,
        since: f64,
    ) -> Result<bool, Failure> {
        self.0.holds_user_line(session_id, line, since)
    }

    /// The session `session_id` continues through Hermes's compression
    /// chain (v31) for which `is_root` holds; `None` when there is none.
    /// Errors: kind `busy` or `store`.
    pub(crate) fn continued_root(
        &self,
        session_id: &str,
        is_root: impl Fn(&str) -> bool,
    ) -> Result<Option<String>, Failure> {
        self.0.continued_root(session_id, is_root)
    }
}
