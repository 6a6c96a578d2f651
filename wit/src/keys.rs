//! Our `state_meta` keys (DESIGN §8 "Records"). Hermes's own keys (`fts_*`,
//! `last_auto_prune`, `db_file_generation`, …) are never ours.

use alloc::string::String;

/// Prefix of every `state_meta` key of ours.
pub const OUR_KEY_PREFIX: &str = "session_switch:";

/// Prefix of the agents' active records: `session_switch:active:<agent>`.
pub const RECORD_KEY_PREFIX: &str = "session_switch:active:";

/// The seed's fixed key (one record for all agents): read and cleared only
/// for the config's `legacy_agent`, never written.
pub const LEGACY_KEY: &str = "active_xmpp_sender_session";

/// The `state_meta` key of `agent`'s record: `session_switch:active:<agent>`.
pub fn record_key(agent: &str) -> String {
    let mut key = String::with_capacity(RECORD_KEY_PREFIX.len() + agent.len());
    key.push_str(RECORD_KEY_PREFIX);
    key.push_str(agent);
    key
}

/// Whether `key` is one we may write: [`OUR_KEY_PREFIX`] and at least one
/// character after it (the seed's key is never written).
pub fn is_prefixed_key(key: &str) -> bool {
    key.len() > OUR_KEY_PREFIX.len() && key.starts_with(OUR_KEY_PREFIX)
}

/// Whether `key` is a `state_meta` key the bridge may delete: one we write
/// ([`is_prefixed_key`]) or the seed's [`LEGACY_KEY`].
pub fn is_our_meta_key(key: &str) -> bool {
    key == LEGACY_KEY || is_prefixed_key(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_ours_by_prefix_or_the_seed_key() {
        assert_eq!(record_key("mohe"), "session_switch:active:mohe");
        assert!(is_our_meta_key("session_switch:active:mohe"));
        assert!(is_our_meta_key(LEGACY_KEY));
        assert!(!is_our_meta_key("session_switch:"));
        assert!(!is_our_meta_key("fts_version"));
        assert!(!is_our_meta_key("Session_switch:active:mohe"));
    }
}
