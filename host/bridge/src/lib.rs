//! session-switch over the real parts: Hermes's `state.db` ([`store`]), the
//! ejabberd transports ([`transport`]), the config ([`config`]), and the
//! façade [`Bridge`] that wires them to the policy runtime. The CLI and the
//! Python binding both build on [`Bridge`] and use only the façade's API
//! ([`Bridge`], [`Reads`], the functions and types re-exported here, the
//! runtime's decision types), never the store's or the transports' own
//! types; a Rust gateway can do the same.
//!
//! Data flows one way: caller → [`Bridge`] → [`runtime`] (wasmtime, the
//! policy component) → host imports ([`HermesImports`]) → [`store`]
//! (SQLite) and [`transport`] (ejabberd).

pub mod bridge;
pub mod config;
mod explain;
pub mod hermes_imports;
pub mod json;
pub mod reads;
pub mod store;
pub mod transport;
pub mod wiring;

pub use bridge::{Bridge, BridgeOptions, default_db_path, init_db, refuse_unusable};
pub use hermes_imports::HermesImports;
pub use reads::Reads;
pub use session_switch_runtime as runtime;
pub use session_switch_runtime::{Failure, FailureKind, HistoryRow};
pub use store::{BridgeRow, PendingSend, PendingState, hermes_home, sqlite_version};
