//! Our `state_meta` keys (docs/src/design/contracts.md#records). Hermes's own keys (`fts_*`,
//! `last_auto_prune`, `db_file_generation`, …) are never ours.

use alloc::string::String;

/// Prefix of every `state_meta` key of ours.
pub const OUR_KEY_PREFIX: &str = "session_switch:";

/// Prefix of the agents' active records: `session_switch:active:<agent>`.
pub const RECORD_KEY_PREFIX: &str = "session_switch:active:";

/// The legacy `xmpp_session_bridge.py`'s fixed key (one record for all
/// agents): read and cleared only for the config's `legacy_agent`, never
/// written.
pub const LEGACY_KEY: &str = "active_xmpp_sender_session";

/// The `state_meta` key of `agent`'s record: `session_switch:active:<agent>`.
pub fn record_key(agent: &str) -> String {
    let mut key = String::with_capacity(RECORD_KEY_PREFIX.len() + agent.len());
    key.push_str(RECORD_KEY_PREFIX);
    key.push_str(agent);
    key
}

/// Prefix of the pending sends' intents (docs/src/design/send.md#the-atomic-send, docs/src/design/send.md#a-send-never-locks-hermes-out):
/// `session_switch:pending:<agent>:<token>`, one key per send between its
/// intent and its record. They live in `state_meta` rather than a table of
/// ours so that a send that failed after its intent leaves no new table
/// behind (only, on an early database without it, Hermes's own
/// `state_meta`).
pub const PENDING_KEY_PREFIX: &str = "session_switch:pending:";

/// The `state_meta` key of one pending send of `agent`:
/// `session_switch:pending:<agent>:<token>`. `token` tells the agent's
/// sends apart and must not contain `:` (the agent name may), so
/// [`pending_key_agent`] splits at the last `:`.
pub fn pending_key(agent: &str, token: &str) -> String {
    debug_assert!(!token.contains(':'), "a pending key's token has no ':'");
    let mut key = String::with_capacity(PENDING_KEY_PREFIX.len() + agent.len() + 1 + token.len());
    key.push_str(PENDING_KEY_PREFIX);
    key.push_str(agent);
    key.push(':');
    key.push_str(token);
    key
}

/// The agent of a pending send's key ([`pending_key`]); `None` for any
/// other key, or one with an empty agent or token.
pub fn pending_key_agent(key: &str) -> Option<&str> {
    let rest = key.strip_prefix(PENDING_KEY_PREFIX)?;
    let (agent, token) = rest.rsplit_once(':')?;
    (!agent.is_empty() && !token.is_empty()).then_some(agent)
}

/// Prefix of the loop guard's state: `session_switch:loop:<agent>:<room>`.
pub const GUARD_KEY_PREFIX: &str = "session_switch:loop:";

/// The `state_meta` key of `agent`'s loop-guard state in `room` (
/// docs/src/design/loop-guard.md: per receiving agent and room).
pub fn guard_key(agent: &str, room: &str) -> String {
    let mut key = String::with_capacity(GUARD_KEY_PREFIX.len() + agent.len() + 1 + room.len());
    key.push_str(GUARD_KEY_PREFIX);
    key.push_str(agent);
    key.push(':');
    key.push_str(room);
    key
}

/// Whether `key` is one we may write: [`OUR_KEY_PREFIX`] and at least one
/// character after it (the legacy tool's key is never written).
pub fn is_prefixed_key(key: &str) -> bool {
    key.len() > OUR_KEY_PREFIX.len() && key.starts_with(OUR_KEY_PREFIX)
}

/// Whether `key` holds a record: `session_switch:active:<agent>`, or the
/// legacy tool's [`LEGACY_KEY`].
pub fn is_record_key(key: &str) -> bool {
    key == LEGACY_KEY || key.starts_with(RECORD_KEY_PREFIX)
}

/// Whether `key` is a `state_meta` key session-switch may delete: one we write
/// ([`is_prefixed_key`]) or the legacy tool's [`LEGACY_KEY`].
pub fn is_our_meta_key(key: &str) -> bool {
    key == LEGACY_KEY || is_prefixed_key(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_ours_by_prefix_or_the_legacy_key() {
        assert_eq!(record_key("mohe"), "session_switch:active:mohe");
        assert!(is_our_meta_key("session_switch:active:mohe"));
        assert!(is_our_meta_key(LEGACY_KEY));
        assert!(!is_our_meta_key("session_switch:"));
        assert!(is_record_key("session_switch:active:mohe"));
        assert!(is_record_key(LEGACY_KEY));
        assert!(!is_record_key("session_switch:pending:mohe:1"));
        assert!(!is_our_meta_key("fts_version"));
        assert!(!is_our_meta_key("Session_switch:active:mohe"));
    }

    #[test]
    fn pending_keys_name_their_agent_even_with_a_colon_in_it() {
        let key = pending_key("mohe", "0001a2b3");
        assert_eq!(key, "session_switch:pending:mohe:0001a2b3");
        assert!(is_prefixed_key(&key));
        assert_eq!(pending_key_agent(&key), Some("mohe"));
        assert_eq!(pending_key_agent(&pending_key("a:b", "9")), Some("a:b"));
        assert_eq!(pending_key_agent("session_switch:pending:mohe"), None);
        assert_eq!(pending_key_agent("session_switch:pending::x"), None);
        assert_eq!(pending_key_agent("session_switch:pending:mohe:"), None);
        assert_eq!(pending_key_agent("session_switch:active:mohe"), None);
    }
}
