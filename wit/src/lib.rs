//! The rules of the session-switch contract that both sides must apply the
//! same way, written once: the guest (the policy component) and the host
//! (runtime, store, config) depend on this crate; it depends on nothing.
//!
//! The WIT package beside this folder (`wit/*.wit`) says what crosses the
//! component boundary; this crate says what both halves compute from it:
//! - [`keys`]: our `state_meta` keys and the legacy
//!   `xmpp_session_bridge.py`'s (docs/src/design/contracts.md#records);
//! - [`fold`]: full-width forms read as ASCII, the one rule of every
//!   text match (the marker, the loop guard's mentions);
//! - [`meeting`]: the meeting settings' defaults (who answers, the stop words);
//! - [`marker`]: the `[YOU] ` tag, its look-alikes and the blanks around it
//!   (docs/src/design/contracts.md#provenance-of-our-rows, WIT `edit-action`);
//! - [`origin`]: the human-origin marker on a person's sends (docs/src/design/loop-guard.md);
//! - [`limits`]: the bounds on session ids, bodies and texts;
//! - [`ids`]: session ids Hermes's API server takes (`X-Hermes-Session-Id`);
//! - [`role`]: Hermes's free-text `messages.role` as the contract's roles;
//! - [`failure`]: the failure kinds and the CLI's exit statuses;
//! - with feature `host` (std and serde_json, never in the guest):
//!   [`history`], the rows a host reads as Hermes's loader returns them and
//!   the version of what it read, [`clock`], the host's Unix clock,
//!   [`home`], Hermes's home folder, and [`answers`], the JSON answers of
//!   the CLI and the Python binding.

#![cfg_attr(not(feature = "host"), no_std)]
extern crate alloc;

#[cfg(feature = "host")]
pub mod answers;
#[cfg(feature = "host")]
pub mod clock;
pub mod failure;
pub mod fold;
#[cfg(feature = "host")]
pub mod history;
#[cfg(feature = "host")]
pub mod home;
pub mod ids;
pub mod keys;
pub mod limits;
pub mod marker;
pub mod meeting;
pub mod origin;
pub mod role;
