//! Hermes `state.db`: reads for the policy's host imports and the store half
//! of the atomic send (DESIGN §4, §8).
//!
//! [`HermesStore`] is one rusqlite connection to a database Hermes itself
//! writes (schema v1 to v31, WAL or DELETE journal). It never changes the
//! journal mode or Hermes's schema, creates its own two tables only inside
//! its first write transaction, and writes only plain INSERTs and updates
//! that Hermes's own `append_message` / `set_meta` also make.
//!
//! Files: `hermes` (the connection and its reads), `schema` (which Hermes
//! schema a file has), `loader/` (Hermes's history loader, per schema),
//! `write_tx` (brief, retried write transactions; our keys only),
//! `send_write` (a send's intent → post → record), `pending` (sends between
//! intent and record), `init` (a new database), `cjk` (Hermes's tokenizer
//! extension), `sqlite_failure` (SQLite errors as failures),
//! `change_counter` (whether anyone committed, without SQLite's lock),
//! `read_memo` (two plain reads' answers while nobody committed).

mod chain;
mod change_counter;
mod cjk;
mod delivered;
mod guard_state;
mod hermes;
mod init;
mod loader;
mod meta;
mod pending;
mod read_memo;
mod schema;
mod send_write;
mod snapshot;
mod sqlite_failure;
mod write_tx;

use std::path::PathBuf;

use session_switch_contract::failure::Failure;
use write_tx::check_our_key;

pub use chain::{CHAIN_CAP, Tip, target_problem};
pub use cjk::{CJK_EXTENSION_ENV, cjk_extension_path};
pub use hermes::{BRIDGE_ROWS, BUSY_TIMEOUT, HermesStore};
pub use init::HERMES_SCHEMA_VERSION;
pub use loader::{Loader, is_py_space, py_strip, sanitize_context};
pub use pending::{PendingSend, PendingState};
pub use write_tx::{BRIEF_BUSY, BRIEF_DEADLINE, RETRY_JITTER_MS, WRITE_ATTEMPTS};

/// A row the bridge wrote: `(messages.id, role, timestamp)`
/// ([`HermesStore::bridge_rows`]).
pub type BridgeRow = (i64, String, f64);

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

impl SendWrite<'_> {
    /// Refuse (kind `bad-input`) what must never be written, before
    /// anything is touched: empty ids or content, content with a NUL, a
    /// record key that is not ours, a timestamp that is not Unix seconds,
    /// a record value that is not a JSON object with a numeric `timestamp`
    /// (see [`HermesStore::send_write`]). A stored intent is checked the
    /// same way before it is completed.
    fn check(&self) -> Result<(), Failure> {
        for (name, value) in [
            ("agent", self.agent),
            ("history session id", self.history_session_id),
            ("CLI session id", self.cli_session_id),
            ("history content", self.history_content),
        ] {
            if value.is_empty() {
                return Err(Failure::bad_input(format!(
                    "refusing to write a send with an empty {name}"
                )));
            }
        }
        if self.history_content.contains('\0') {
            return Err(Failure::bad_input(
                "refusing to write history content with a NUL character (Hermes reads content \
             starting with NUL + `json:` as multimodal parts); normalise the body first",
            ));
        }
        check_our_key(self.record_key, false)?;
        if !(self.timestamp.is_finite() && self.timestamp > 0.0) {
            return Err(Failure::bad_input(format!(
                "refusing to write a send with timestamp {}: it must be Unix seconds > 0",
                self.timestamp
            )));
        }
        let record: Option<serde_json::Value> = serde_json::from_str(self.record_value).ok();
        let timestamp = record
            .as_ref()
            .and_then(|r| r.as_object())
            .and_then(|r| r.get("timestamp"))
            .filter(|t| t.is_number());
        if timestamp.is_none() {
            return Err(Failure::bad_input(format!(
                "refusing to write record {:?}: its value is not a JSON object with a numeric \
             \"timestamp\" (DESIGN §8): {}",
                self.record_key, self.record_value
            )));
        }
        Ok(())
    }
}

/// What a committed send wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct Written {
    /// `messages.id` of the new row.
    pub message_id: i64,
    /// The session the row went into: the agent's XMPP session, or on v31
    /// its live compression tip (DESIGN §9.4, `chain.rs`).
    pub history_session_id: String,
    /// False when a newer record was already stored and was kept.
    pub record_replaced: bool,
}

/// The version of the SQLite library in use (`sqlite3_libversion`): the
/// bundled copy when built with `bundled-sqlite`, else the process's.
pub fn sqlite_version() -> String {
    rusqlite::version().to_string()
}
