//! Hermes `state.db`: reads for the policy's host imports and the store half
//! of the atomic send (DESIGN §4, §8).
//!
//! [`HermesStore`] is one rusqlite connection to a database Hermes itself
//! writes (schema v1 to v31, WAL or DELETE journal). It never changes the
//! journal mode or Hermes's schema, creates its own two tables only inside
//! its first write transaction, and writes only plain INSERTs and updates
//! that Hermes's own `append_message` / `set_meta` also make.

mod cjk;
mod guard_state;
mod hermes;
mod init;
mod loader;
mod send_write;
mod sqlite_failure;

use std::path::PathBuf;

pub use cjk::{CJK_EXTENSION_ENV, cjk_extension_path};
pub use hermes::{BUSY_TIMEOUT, HermesStore, RETRY_JITTER_MS, WRITE_ATTEMPTS};
pub use init::HERMES_SCHEMA_VERSION;
pub use loader::{Loader, is_py_space, py_strip, sanitize_context};
pub use send_write::{BRIEF_BUSY, BRIEF_DEADLINE, PendingSend, PendingState};

/// Hermes's home folder: `$HERMES_HOME` when set and not empty, else
/// `~/.hermes` (Hermes's own rule), else `.hermes` in the current folder
/// when the home folder is unknown.
pub fn hermes_home() -> PathBuf {
    match std::env::var_os("HERMES_HOME") {
        Some(home) if !home.is_empty() => PathBuf::from(home),
        _ => dirs::home_dir()
            .map(|home| home.join(".hermes"))
            .unwrap_or_else(|| PathBuf::from(".hermes")),
    }
}

/// What one send writes (DESIGN §8 "Send"); all in one transaction.
#[derive(Clone, Copy, Debug)]
pub struct SendWrite<'a> {
    /// Agent name (provenance and record).
    pub agent: &'a str,
    /// The agent's XMPP session that receives the row.
    pub history_session_id: &'a str,
    /// `[YOU] ` + the body; role `user`.
    pub history_content: &'a str,
    /// The CLI session that sent.
    pub cli_session_id: &'a str,
    /// `session_switch:active:<agent>`.
    pub record_key: &'a str,
    /// JSON `{"session_id", "timestamp", "source": "cli", "agent"}`.
    pub record_value: &'a str,
    /// Unix seconds: row timestamp, record timestamp, `sent_at`.
    pub timestamp: f64,
}

/// What a committed send wrote.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Written {
    /// `messages.id` of the new row.
    pub message_id: i64,
    /// False when a newer record was already stored and was kept.
    pub record_replaced: bool,
}

/// The version of the SQLite library in use (`sqlite3_libversion`): the
/// bundled copy when built with `bundled-sqlite`, else the process's.
pub fn sqlite_version() -> String {
    rusqlite::version().to_string()
}
