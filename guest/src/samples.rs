//! A sample configuration: the legacy `xmpp_session_bridge.py`'s three agents
//! in their room. Used by the component's `self-check` (no host involved) and
//! by tests; never by the rules themselves.

use crate::{Agent, AllowBots, LoopGuard, Meeting, MeetingOverrides, Settings};
use session_switch_contract::meeting::{DEFAULT_REQUIRE_MENTION, DEFAULT_STOP_WORDS};

/// Unix time the samples' clocks read: 2027-01-15 08:00:00 UTC.
pub const SAMPLE_NOW: f64 = 1_800_000_000.0;

/// A CLI session of the samples (as in the Hermes fixtures).
pub const SAMPLE_CLI: &str = "20260619_190821_7c0afe";

/// The legacy tool's agents `mohe` (legacy agent; sessions `xmpp-mohe-v2`,
/// `xmpp-mohe`; alias `墨河`), `zhiwei` and `xiaoguo` in
/// `coregroup@conference.example.org`; TTL 3600 s, skew 120 s, bodies up to
/// 10000 characters.
pub fn sample_settings() -> Settings {
    let agent = |name: &str, sessions: &[&str], aliases: &[&str]| Agent {
        name: name.into(),
        jid: format!("{name}@example.org"),
        nick: name.into(),
        sessions: sessions.iter().map(|s| s.to_string()).collect(),
        aliases: aliases.iter().map(|s| s.to_string()).collect(),
        mention: None,
        meeting: no_overrides(),
    };
    Settings {
        room: "coregroup@conference.example.org".into(),
        ttl_seconds: 3600,
        future_skew_seconds: 120,
        max_body_chars: 10_000,
        legacy_agent: Some("mohe".into()),
        agents: vec![
            agent("mohe", &["xmpp-mohe-v2", "xmpp-mohe"], &["墨河"]),
            agent("zhiwei", &["xmpp-zhiwei"], &[]),
            agent("xiaoguo", &["xmpp-xiaoguo"], &[]),
        ],
        loop_guard: default_loop_guard(),
        meeting: default_meeting(),
    }
}

/// The meeting's defaults: `require_mention` on, no free-response rooms or
/// patterns, `allow_bots` `mentions`, the default stop words.
pub fn default_meeting() -> Meeting {
    Meeting {
        require_mention: DEFAULT_REQUIRE_MENTION,
        free_response_rooms: Vec::new(),
        mention_patterns: Vec::new(),
        allow_bots: AllowBots::Mentions,
        stop_words: DEFAULT_STOP_WORDS.iter().map(|w| w.to_string()).collect(),
    }
}

/// An agent with none of its own meeting settings.
pub fn no_overrides() -> MeetingOverrides {
    MeetingOverrides {
        require_mention: None,
        free_response_rooms: None,
        mention_patterns: None,
        allow_bots: None,
    }
}

/// The loop guard's defaults (docs/src/design/loop-guard.md): 6 hops, 20 agent messages per
/// 300 s, duplicates within 600 s.
pub fn default_loop_guard() -> LoopGuard {
    LoopGuard {
        max_hops: 6,
        window_messages: 20,
        window_seconds: 300,
        duplicate_seconds: 600,
    }
}

/// A record value as a send writes it (docs/src/design/contracts.md#records).
pub fn sample_record(session_id: &str, timestamp: f64, agent: &str) -> String {
    serde_json::json!({
        "session_id": session_id,
        "timestamp": timestamp,
        "source": "cli",
        "agent": agent,
    })
    .to_string()
}
