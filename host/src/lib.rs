//! session-switch host: embed the policy component and give it Hermes's
//! `state.db` and ejabberd.
//!
//! Data flows one way: CLI → [`runtime`] (wasmtime, the policy component) →
//! host imports → [`store`] (SQLite) and [`transport`] (ejabberd).

pub mod bridge;
pub mod cli;
pub mod config;
pub mod failure;
pub mod runtime;
pub mod store;
pub mod transport;

pub use failure::{Failure, FailureKind};
