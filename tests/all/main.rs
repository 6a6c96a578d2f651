//! The integration tests: one binary with a module per area (wasmtime's
//! `tests/all` pattern), so wasmtime and our crates link once. Run one area
//! with a filter, e.g. `cargo test -p session-switch-tests --test all store::`;
//! the long soak is `make soak` (`--test all soak:: -- --nocapture`).
//!
//! Every test runs in one process beside the others (libtest's parallel
//! threads): none sets environment variables, changes the working folder
//! or installs a process-wide subscriber; each uses its own temp folders,
//! its own ports (picked free) and unique bodies in the shared room. The
//! tests that load the whole machine for seconds take
//! [`session_switch_tests::heavy`], so no two of them overlap, and those
//! with a Hermes world of their own [`session_switch_tests::hermes_world`],
//! so few run at once.

mod admit_together;
mod bot;
mod bot_rejoin;
mod bot_service;
mod chain;
mod component;
mod config;
mod doctor;
mod e2e_cli;
mod fidelity;
mod heard_store;
mod hostile_input;
mod hot_swap;
mod idle_bridge;
mod isolation;
mod kept_instance;
mod layout;
mod loop_guard;
mod loop_guard_e2e;
mod meeting;
mod memo;
mod oversized_state;
mod policy_differential;
mod policy_props;
mod reference_pages;
mod room_soak;
mod runtime;
mod sandbox;
mod send_lock;
mod soak;
mod store;
mod store_concurrency;
mod tag_memo;
mod transport;
