//! What one connection knows of a table that is created once and never
//! dropped, so that asking whether it exists seldom reads the schema.

use std::cell::Cell;

use session_switch_contract::failure::Failure;
use session_switch_contract::history::DataVersion;

/// What one connection knows of a table that is created once and never
/// dropped (`state_meta`: Hermes's; `session_switch_sent`: ours).
#[derive(Debug, Default)]
pub(super) struct TableSeen {
    /// Seen to exist: taken as present from then on.
    present: Cell<bool>,
    /// Seen missing while the database was at this version.
    absent_at: Cell<Option<DataVersion>>,
}

impl TableSeen {
    /// Whether the table exists: present once seen present; seen missing,
    /// missing while `version()` (the database's data version) stays the
    /// same; else `query()`.
    ///
    /// Asked on every call, that query (a scan of `sqlite_master`) would be
    /// the largest part of a `resolve` and weigh on the plugin's
    /// `tag_messages` on a database with no sent rows
    /// (docs/src/performance.md). The tables it is kept for are never dropped (Hermes
    /// creates `state_meta` and never drops it, `session_switch_sent` is
    /// ours), and the data version moves on any other connection's commit (a
    /// `CREATE TABLE` included) and on this connection's changed rows: each of
    /// its own `CREATE`s comes with an `INSERT` into the new table in the same
    /// transaction (`send/mod.rs`, `guard_state.rs`). The version is read
    /// before the schema, so a table created in between is found by the query.
    pub(super) fn exists(
        &self,
        version: impl FnOnce() -> Result<DataVersion, Failure>,
        query: impl FnOnce() -> Result<bool, Failure>,
    ) -> Result<bool, Failure> {
        if self.present.get() {
            return Ok(true);
        }
        let version = version()?;
        if self.absent_at.get() == Some(version) {
            return Ok(false);
        }
        let exists = query()?;
        self.present.set(exists);
        self.absent_at.set((!exists).then_some(version));
        Ok(exists)
    }
}
