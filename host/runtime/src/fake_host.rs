//! The runtime's unit tests over the one fake host
//! (`session-switch-fake-host`): what is under test is the runtime's logic
//! above the imports (the real store and ejabberd are tested in
//! `tests/all`).

use crate::{Agent, LoopGuard, Meeting, MeetingOverrides, Settings};
pub(crate) use session_switch_fake_host::{FakeHost, FakeRow, FakeState, ImportCall, row};

session_switch_fake_host::host_imports!(crate);

/// The host's clock: 2026-06-19 12:00 UTC, Unix seconds.
pub(crate) const NOW: f64 = 1_781_870_400.0;

/// A fake whose clock reads [`NOW`], in the room of [`settings`], where
/// session `xmpp-mohe-v2` holds `rows`.
pub(crate) fn host(rows: Vec<FakeRow>) -> FakeHost {
    let mut state = FakeState::at(NOW, &settings().room);
    state.add_session("xmpp-mohe-v2");
    state.histories.insert("xmpp-mohe-v2".into(), rows);
    FakeHost::new(state)
}

/// How many calls of the import `which` picks out the fake has had.
pub(crate) fn calls(host: &FakeHost, which: fn(&ImportCall) -> bool) -> usize {
    host.state().calls.iter().filter(|c| which(c)).count()
}

/// One agent, mohe, with session `xmpp-mohe-v2`; the default limits.
pub(crate) fn settings() -> Settings {
    Settings {
        room: "coregroup@conference.example.org".into(),
        ttl_seconds: 3600,
        future_skew_seconds: 120,
        max_body_chars: 10_000,
        legacy_agent: None,
        agents: vec![Agent {
            name: "mohe".into(),
            jid: "mohe@example.org".into(),
            nick: "mohe".into(),
            sessions: vec!["xmpp-mohe-v2".into()],
            aliases: vec![],
            mention: None,
            meeting: MeetingOverrides::none(),
        }],
        loop_guard: LoopGuard {
            max_hops: 6,
            window_messages: 20,
            window_seconds: 300,
            duplicate_seconds: 600,
        },
        meeting: Meeting::defaults(),
    }
}
