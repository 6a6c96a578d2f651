//! Hermes `state.db`: reads for the policy's host imports and the store half
//! of the atomic send (docs/src/design/hermes-state-db.md, docs/src/design/contracts.md).
//!
//! [`HermesStore`] is one rusqlite connection to a database Hermes itself
//! writes (schema v1 to v31, WAL or DELETE journal). It never changes the
//! journal mode or Hermes's schema, creates its own two tables only inside
//! its first write transaction, and writes only plain INSERTs and updates
//! that Hermes's own `append_message` / `set_meta` also make.
//!
//! Modules: `hermes` (the connection and its reads), `schema` (which
//! Hermes schema a file has, which tables exist), `loader/` (Hermes's history loader, per schema), `send/` (a
//! send's writes: the intent → post → record transactions, what a send
//! writes, the pending sends, the delivered marker, the sent rows), `meta`
//! (our `state_meta` reads and deletes), `snapshot` (read snapshots, the
//! data version), `timeouts` (how long it waits for locks), `write_tx`
//! (brief, retried write transactions; our keys only), `chain` (v31
//! compression chains), `guard_state` (the loop guard's state), `heard`
//! (the lines waiting for a turn, the room cursor), `turn_line` (whether a
//! turn's line reached Hermes), `init` (a new database), `cjk` (Hermes's
//! tokenizer extension), `sqlite_failure` (SQLite errors as failures).

mod chain;
mod cjk;
mod guard_state;
mod heard;
mod hermes;
mod init;
mod loader;
mod meta;
mod schema;
mod send;
mod snapshot;
mod sqlite_failure;
mod timeouts;
mod turn_line;
mod write_tx;

pub use chain::{CHAIN_CAP, Tip, target_problem};
pub use cjk::{CJK_EXTENSION_ENV, cjk_extension_path};
pub use heard::{HeardLine, cursor_key};
pub use hermes::{HermesStore, sqlite_version};
pub use init::HERMES_SCHEMA_VERSION;
pub use loader::{Loader, is_py_space, py_strip, sanitize_context};
pub use send::{PendingSend, PendingState, SENT_ROWS, SendWrite, SentRow, Written};
pub use session_switch_contract::home::hermes_home;
pub use timeouts::{BRIEF_BUSY, BRIEF_DEADLINE, BUSY_TIMEOUT, RETRY_JITTER_MS, WRITE_ATTEMPTS};
