//! The WIT types of `types.wit` exist twice in Rust: generated for the
//! guest by wit-bindgen (`session_switch_policy::*`) and for the host by
//! wasmtime's `bindgen!` (`session_switch::runtime::*`). These functions
//! copy one into the other, field by field, so the differential test can
//! give the native policy the host's inputs and compare its answers with
//! the component's in the host's types. Every enum is matched
//! exhaustively: a variant added to the WIT breaks the build here instead
//! of being compared wrongly.

use session_switch::runtime as host;
/// The WIT `failure`, `failure-kind` and `role` conversions, written once
/// with the fake host that needs them.
pub use session_switch_fake_host::guest::{
    failure_from_guest, failure_to_guest, kind_from_guest, kind_to_guest, role_to_guest,
};
use session_switch_policy as guest;

/// The host's settings as the guest's `settings` record.
pub fn settings_to_guest(s: &host::Settings) -> guest::Settings {
    guest::Settings {
        room: s.room.clone(),
        ttl_seconds: s.ttl_seconds,
        future_skew_seconds: s.future_skew_seconds,
        max_body_chars: s.max_body_chars,
        legacy_agent: s.legacy_agent.clone(),
        agents: s
            .agents
            .iter()
            .map(|a| guest::Agent {
                name: a.name.clone(),
                jid: a.jid.clone(),
                nick: a.nick.clone(),
                sessions: a.sessions.clone(),
                aliases: a.aliases.clone(),
                mention: a.mention.clone(),
                meeting: guest::MeetingOverrides {
                    require_mention: a.meeting.require_mention,
                    free_response_rooms: a.meeting.free_response_rooms.clone(),
                    mention_patterns: a.meeting.mention_patterns.clone(),
                    allow_bots: a.meeting.allow_bots.map(allow_bots_to_guest),
                },
            })
            .collect(),
        loop_guard: guest::LoopGuard {
            max_hops: s.loop_guard.max_hops,
            window_messages: s.loop_guard.window_messages,
            window_seconds: s.loop_guard.window_seconds,
            duplicate_seconds: s.loop_guard.duplicate_seconds,
        },
        meeting: guest::Meeting {
            require_mention: s.meeting.require_mention,
            free_response_rooms: s.meeting.free_response_rooms.clone(),
            mention_patterns: s.meeting.mention_patterns.clone(),
            allow_bots: allow_bots_to_guest(s.meeting.allow_bots),
            stop_words: s.meeting.stop_words.clone(),
        },
    }
}

/// WIT `allow-bots`, host → guest.
pub fn allow_bots_to_guest(value: host::AllowBots) -> guest::AllowBots {
    match value {
        host::AllowBots::None => guest::AllowBots::None,
        host::AllowBots::Mentions => guest::AllowBots::Mentions,
        host::AllowBots::All => guest::AllowBots::All,
    }
}

/// The guest's settings as the host's `settings` record.
pub fn settings_to_host(s: &guest::Settings) -> host::Settings {
    host::Settings {
        room: s.room.clone(),
        ttl_seconds: s.ttl_seconds,
        future_skew_seconds: s.future_skew_seconds,
        max_body_chars: s.max_body_chars,
        legacy_agent: s.legacy_agent.clone(),
        agents: s
            .agents
            .iter()
            .map(|a| host::Agent {
                name: a.name.clone(),
                jid: a.jid.clone(),
                nick: a.nick.clone(),
                sessions: a.sessions.clone(),
                aliases: a.aliases.clone(),
                mention: a.mention.clone(),
                meeting: host::MeetingOverrides {
                    require_mention: a.meeting.require_mention,
                    free_response_rooms: a.meeting.free_response_rooms.clone(),
                    mention_patterns: a.meeting.mention_patterns.clone(),
                    allow_bots: a.meeting.allow_bots.map(allow_bots_to_host),
                },
            })
            .collect(),
        loop_guard: host::LoopGuard {
            max_hops: s.loop_guard.max_hops,
            window_messages: s.loop_guard.window_messages,
            window_seconds: s.loop_guard.window_seconds,
            duplicate_seconds: s.loop_guard.duplicate_seconds,
        },
        meeting: host::Meeting {
            require_mention: s.meeting.require_mention,
            free_response_rooms: s.meeting.free_response_rooms.clone(),
            mention_patterns: s.meeting.mention_patterns.clone(),
            allow_bots: allow_bots_to_host(s.meeting.allow_bots),
            stop_words: s.meeting.stop_words.clone(),
        },
    }
}

/// WIT `allow-bots`, guest → host.
pub fn allow_bots_to_host(value: guest::AllowBots) -> host::AllowBots {
    match value {
        guest::AllowBots::None => host::AllowBots::None,
        guest::AllowBots::Mentions => host::AllowBots::Mentions,
        guest::AllowBots::All => host::AllowBots::All,
    }
}

/// WIT `reason`, guest → host.
pub fn reason_from_guest(reason: guest::Reason) -> host::Reason {
    match reason {
        guest::Reason::Redirected => host::Reason::Redirected,
        guest::Reason::NoRecord => host::Reason::NoRecord,
        guest::Reason::Expired => host::Reason::Expired,
        guest::Reason::FutureTimestamp => host::Reason::FutureTimestamp,
        guest::Reason::MalformedRecord => host::Reason::MalformedRecord,
        guest::Reason::UnknownSession => host::Reason::UnknownSession,
        guest::Reason::NotAgentSession => host::Reason::NotAgentSession,
        guest::Reason::Superseded => host::Reason::Superseded,
        guest::Reason::PolicyError => host::Reason::PolicyError,
    }
}

/// WIT `decision`, guest → host.
pub fn decision_from_guest(d: guest::Decision) -> host::Decision {
    host::Decision {
        session_id: d.session_id,
        redirected: d.redirected,
        reason: reason_from_guest(d.reason),
        detail: d.detail,
        valid_until: d.valid_until,
    }
}

/// WIT `record-status`, guest → host.
pub fn record_status_from_guest(r: guest::RecordStatus) -> host::RecordStatus {
    host::RecordStatus {
        agent: r.agent,
        key: r.key,
        session_id: r.session_id,
        timestamp: r.timestamp,
        age_seconds: r.age_seconds,
        remaining_seconds: r.remaining_seconds,
        valid: r.valid,
        reason: reason_from_guest(r.reason),
        detail: r.detail,
    }
}

/// WIT `receipt`, guest → host.
pub fn receipt_from_guest(r: guest::Receipt) -> host::Receipt {
    host::Receipt {
        message_id: r.message_id,
        room: r.room,
        body: r.body,
        record_key: r.record_key,
        record_replaced: r.record_replaced,
    }
}
