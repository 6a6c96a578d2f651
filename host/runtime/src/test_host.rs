//! The in-memory host of the runtime's unit tests: what is under test is
//! the runtime's logic above the imports (the real store and ejabberd are
//! tested in `tests/all`).

use crate::{
    Agent, DataVersion, Failure, HistoryRow, HostImports, LoopGuard, Meeting, MeetingOverrides,
    SendPlan, Sent, Settings,
};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The host's clock: 2026-06-19 12:00 UTC, Unix seconds.
pub(crate) const NOW: f64 = 1_781_870_400.0;

/// What reached the imports.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    pub(crate) sends: Vec<SendPlan>,
    pub(crate) deletes: Vec<String>,
    pub(crate) histories: u32,
    pub(crate) meta_gets: u32,
}

/// What the imports read, shared so a test can change it between calls:
/// `state_meta`, the clock (Unix seconds) and what
/// [`HostImports::data_version`] answers.
#[derive(Debug)]
pub(crate) struct World {
    pub(crate) meta: BTreeMap<String, String>,
    pub(crate) now: f64,
    pub(crate) version: Option<DataVersion>,
}

/// The records and clock of its [`World`] (none and [`NOW`] at first, no
/// data version); every session exists and holds `rows`; sends are taken
/// (`messages.id` 23) and, like deletes and reads, noted in
/// [`TestHost::seen`].
pub(crate) struct TestHost {
    rows: Vec<HistoryRow>,
    seen: Arc<Mutex<Seen>>,
    world: Arc<Mutex<World>>,
}

impl TestHost {
    pub(crate) fn new(rows: Vec<HistoryRow>) -> Self {
        Self {
            rows,
            seen: Arc::default(),
            world: Arc::new(Mutex::new(World {
                meta: BTreeMap::new(),
                now: NOW,
                version: None,
            })),
        }
    }

    /// What the imports read, shared with the host once it is boxed.
    pub(crate) fn world(&self) -> Arc<Mutex<World>> {
        Arc::clone(&self.world)
    }

    /// What reached the imports, shared with the host once it is boxed.
    pub(crate) fn seen(&self) -> Arc<Mutex<Seen>> {
        Arc::clone(&self.seen)
    }
}

impl HostImports for TestHost {
    fn meta_get(&mut self, key: &str) -> Result<Option<String>, Failure> {
        self.seen.lock().unwrap().meta_gets += 1;
        Ok(self.world.lock().unwrap().meta.get(key).cloned())
    }
    fn meta_set(&mut self, _: &str, _: &str) -> Result<(), Failure> {
        Ok(())
    }
    fn meta_delete(&mut self, key: &str) -> Result<bool, Failure> {
        self.seen.lock().unwrap().deletes.push(key.into());
        Ok(true)
    }
    fn session_exists(&mut self, _: &str) -> Result<bool, Failure> {
        Ok(true)
    }
    fn history(&mut self, _: &str, _: &str, _: Option<u32>) -> Result<Vec<HistoryRow>, Failure> {
        self.seen.lock().unwrap().histories += 1;
        Ok(self.rows.clone())
    }
    fn now(&mut self) -> f64 {
        self.world.lock().unwrap().now
    }
    fn send(&mut self, plan: &SendPlan) -> Result<Sent, Failure> {
        self.seen.lock().unwrap().sends.push(plan.clone());
        Ok(Sent {
            message_id: 23,
            room: settings().room,
            record_replaced: true,
        })
    }
    fn data_version(&mut self) -> Result<Option<DataVersion>, Failure> {
        Ok(self.world.lock().unwrap().version)
    }
}

/// A row of `role` and `content` with `messages.id` `id`, not written by
/// the bridge, without the loader's extra fields.
pub(crate) fn row(id: i64, role: &str, content: &str) -> HistoryRow {
    HistoryRow {
        id,
        role: role.to_owned().into(),
        content: content.into(),
        tool_calls: None,
        tool_call_id: None,
        tool_name: None,
        bridge_wrote: false,
        loaded: None,
    }
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
