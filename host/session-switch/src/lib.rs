//! session-switch over the real parts: Hermes's `state.db` ([`store`]), the
//! ejabberd transports ([`transport`]), the config ([`config`]), and the
//! façade [`Bridge`] that wires them to the policy runtime. The faces (the
//! CLI, the Python binding, the room bot) build on [`Bridge`] and use only
//! the façade's API: [`Bridge`], [`Reads`], the functions and types
//! re-exported here (the façade's own views of the store's answers,
//! [`PendingReport`] and [`SentRow`], among them), [`config`], [`json`]
//! and the runtime's decision types. [`store`], [`transport`],
//! [`hermes_imports`] and [`from_config`] are public for the integration tests;
//! a face never names them, so a change to their types stays here.
//!
//! Data flows one way: caller → [`Bridge`] → [`runtime`] (wasmtime, the
//! policy component) → host imports ([`hermes_imports`]) → [`store`]
//! (SQLite) and [`transport`] (ejabberd).

pub mod bridge;
mod explain;
pub mod from_config;
mod heard;
pub mod hermes_imports;
mod hot_swap;
pub mod json;
mod kept;
mod pending_report;
pub mod reads;
pub mod server_checks;

pub use bridge::{Bridge, BridgeOptions, db_schema, default_db_path, init_db, refuse_unusable};
pub use heard::{Heard, Hearing};
pub use kept::KeptInstance;
pub use pending_report::{PendingReport, PendingStatus};
pub use reads::Reads;
/// The config's types: a face reads the config and hands it to [`Bridge`].
pub use session_switch_config as config;
pub use session_switch_contract::home::hermes_home;
pub use session_switch_contract::limits::HEARD_CAP;
/// The human-origin marker the CLI's sends carry (the room bot reads it).
pub use session_switch_contract::origin;
pub use session_switch_runtime as runtime;
pub use session_switch_runtime::{Failure, FailureKind, HistoryRow};
pub use session_switch_store::HeardLine;
pub use session_switch_store::SentRow;
pub use session_switch_store::sqlite_version;
