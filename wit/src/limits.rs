//! Bounds of the contract: what the config, the policy and the host refuse
//! past them.

/// Longest session id the policy accepts or records, in characters (Hermes's
/// API server takes ids up to this length).
pub const MAX_SESSION_ID_CHARS: usize = 256;

/// Default longest room message, in characters (Hermes's XMPP adapter).
pub const DEFAULT_MAX_BODY_CHARS: u32 = 10_000;

/// Default clock skew tolerated between the sender's and the gateway's
/// clocks, in seconds: a record dated further in the future does not count
/// (the policy refuses it, reason `future-dated`), and a send replaces it.
pub const DEFAULT_FUTURE_SKEW_SECONDS: u32 = 120;

/// How many heard room lines wait per agent and room for the next turn: a
/// Hermes that stays down for a long chat would otherwise grow the next
/// turn past use.
pub const HEARD_CAP: usize = 20;

/// Longest `state_meta` value, in bytes, the host hands the policy
/// (`meta-get`; a longer one arrives empty) and the loop guard writes: far
/// below the guest's memory cap, which a copy, a parse and a rewrite of a
/// longer one could pass.
pub const MAX_META_VALUE_BYTES: usize = 1 << 20;

/// Largest `max_body_chars` a config may set, in characters: the host's
/// text cap ([`max_text_bytes`]) then stays far below the guest's memory cap.
pub const MAX_BODY_CHARS_LIMIT: u32 = 1_000_000;

/// Longest text, in bytes, the host hands the policy for a body of at most
/// `max_body_chars` characters: 4 bytes a character (UTF-8's widest) plus
/// 64 KiB for what normalisation removes (control characters, a leading
/// `[YOU]`). Longer text is refused before the guest sees it.
pub fn max_text_bytes(max_body_chars: u32) -> usize {
    4 * max_body_chars as usize + (64 << 10)
}
