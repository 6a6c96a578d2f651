//! The human-origin marker (docs/src/design/loop-guard.md): the element the CLI's send puts on
//! the stanza of every send it makes for a person (the CLI's `send`), so
//! the other agents' bots can tell a person typing through an agent's
//! bridge from that agent's bot. Anyone can put the element on a stanza;
//! a bot trusts it only when the sender's real JID is a configured agent's
//! (the policy's `admit`).
//!
//! On the wire, inside the `<message type='groupchat'>` the room
//! broadcasts: `<human-origin xmlns='urn:agentsmeeting:session-switch:0'/>`,
//! beside the stanza's `id` and an XEP-0359 `<origin-id
//! xmlns='urn:xmpp:sid:0' id='…'/>` with the same value.

/// The marker element's name.
pub const HUMAN_ORIGIN_ELEMENT: &str = "human-origin";

/// The marker element's namespace (versioned with the element's meaning,
/// not with the WIT package).
pub const HUMAN_ORIGIN_NS: &str = "urn:agentsmeeting:session-switch:0";

/// XEP-0359's namespace of `<origin-id/>` (and `<stanza-id/>`).
pub const ORIGIN_ID_NS: &str = "urn:xmpp:sid:0";
