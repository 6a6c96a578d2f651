//! session-switch over the real parts: Hermes's `state.db` ([`store`]), the
//! ejabberd transports ([`transport`]), the config ([`config`]), and the
//! façade [`Bridge`] that wires them to the policy runtime. The CLI and the
//! Python binding both build on [`Bridge`]; a Rust gateway can too.
//!
//! Data flows one way: caller → [`Bridge`] → [`runtime`] (wasmtime, the
//! policy component) → host imports ([`HermesImports`]) → [`store`]
//! (SQLite) and [`transport`] (ejabberd).

pub mod bridge;
pub mod config;
pub mod hermes_imports;
pub mod json;
pub mod store;
pub mod transport;
pub mod wiring;

pub use bridge::{Bridge, BridgeOptions, refuse_unusable};
pub use hermes_imports::HermesImports;
pub use session_switch_runtime as runtime;
pub use session_switch_runtime::{Failure, FailureKind, HistoryRow};
