//! The host imports over the real parts: Hermes's `state.db` ([`HermesStore`])
//! and an ejabberd [`Transport`], joined in the one place that needs both,
//! the atomic send of docs/src/design/contracts.md.
//!
//! Hermes's compression chains (v31, docs/src/design/compression.md) are followed here, so the
//! policy decides on what the imports tell it and the WIT stays as it is:
//! a record naming a compressed session reads as naming its live tip
//! ([`HostImports::meta_get`]); a session we would redirect to or record
//! that has no unique tip, or an id Hermes's API server refuses, is refused
//! where the policy asks whether it exists ([`HostImports::session_exists`],
//! which it asks last, just before redirecting or sending); the `[YOU]` row
//! goes to the live tip of the agent's XMPP session ([`HostImports::send`]).

mod chain_notes;
mod host_imports;
mod record;
mod send;
mod test_clock;

pub use chain_notes::{ChainNote, ChainNotes, lock_notes};
pub use host_imports::HermesImports;
pub use test_clock::TEST_CLOCK_ENV;
