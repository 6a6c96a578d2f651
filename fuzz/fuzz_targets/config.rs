//! Config files through `Config::parse`, checked by
//! `session_switch_tests::hostile::check_config`: refused as `bad-input`
//! naming the file, or accepted only with unique agents, bare JIDs and a
//! configured legacy agent; an accepted config the policy refuses (known
//! gap G3 of SECURITY.md) is refused with one clear `invalid settings` line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use session_switch_policy::{Agent, FailureKind, Settings, ValidSettings};
use session_switch_tests::hostile::check_config;

fuzz_target!(|text: &str| {
    if let Some(config) = check_config(text) {
        let s = session_switch::bridge::settings(&config);
        let settings = Settings {
            room: s.room,
            ttl_seconds: s.ttl_seconds,
            future_skew_seconds: s.future_skew_seconds,
            max_body_chars: s.max_body_chars,
            legacy_agent: s.legacy_agent,
            agents: s
                .agents
                .into_iter()
                .map(|a| Agent {
                    name: a.name,
                    jid: a.jid,
                    nick: a.nick,
                    sessions: a.sessions,
                    aliases: a.aliases,
                })
                .collect(),
        };
        if let Err(e) = ValidSettings::new(settings) {
            assert_eq!(e.kind, FailureKind::BadInput, "{}", e.message);
            assert!(e.message.starts_with("invalid settings: "), "{}", e.message);
        }
    }
});
