//! A test double of the policy's host: `state_meta`, sessions and
//! histories in memory, seeded from a real Hermes fixture, with a fixed
//! clock, a recorded send, and an optional delay inside every import (to
//! show that time spent in the host does not count against the policy's
//! fuel). For tests of the runtime, which is logic above the store; the
//! store itself is tested against the real files in `tests/store.rs`.

use session_switch::Failure;
use session_switch::HistoryRow;
use session_switch::runtime::{Agent, HostImports, SendPlan, Sent, Settings};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// What the backend holds; tests read and change it through
/// [`MemoryBackend::state`].
#[derive(Clone, Debug, Default)]
pub struct MemoryState {
    /// `state_meta`.
    pub meta: BTreeMap<String, String>,
    /// `sessions.id`.
    pub sessions: BTreeSet<String>,
    /// Rows per session, in id order (the `active = 1` ones only).
    pub histories: BTreeMap<String, Vec<HistoryRow>>,
    /// The clock, Unix seconds.
    pub now: f64,
    /// The room's bare JID, reported in `Sent`.
    pub room: String,
    /// Every plan `send` received and performed, in order.
    pub sent: Vec<SendPlan>,
    /// When `Some`, `send` fails with it and performs nothing.
    pub send_failure: Option<Failure>,
    /// Sleep this long inside every import but `now`.
    pub import_delay: Duration,
    /// How many imports were called (all kinds).
    pub import_calls: u64,
}

/// A [`HostImports`] over a [`MemoryState`] shared with the test.
#[derive(Clone, Debug, Default)]
pub struct MemoryBackend {
    state: Arc<Mutex<MemoryState>>,
}

impl MemoryBackend {
    pub fn new(state: MemoryState) -> Self {
        Self {
            state: Arc::new(Mutex::new(state)),
        }
    }

    /// The sessions, active history rows and `state_meta` of a real Hermes
    /// database (read with plain SQL as Hermes's loader does: ORDER BY id,
    /// `active = 1` where the column exists; `state_meta` may be missing).
    /// The clock is set to the fixture's last message + 60 s.
    pub fn from_fixture(path: &Path) -> Self {
        let db = rusqlite::Connection::open(path).expect("open fixture copy");
        let mut state = MemoryState {
            room: "coregroup@conference.example.org".into(),
            ..MemoryState::default()
        };
        let mut ids = db.prepare("SELECT id FROM sessions").unwrap();
        for id in ids.query_map([], |r| r.get::<_, String>(0)).unwrap() {
            state.sessions.insert(id.unwrap());
        }
        let has_active: bool = db
            .query_row(
                "SELECT count(*) FROM pragma_table_info('messages') WHERE name = 'active'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .unwrap()
            > 0;
        let sql = format!(
            "SELECT id, session_id, role, content, tool_calls, tool_call_id, tool_name, timestamp \
             FROM messages {} ORDER BY id",
            if has_active { "WHERE active = 1" } else { "" }
        );
        let mut rows = db.prepare(&sql).unwrap();
        let mut last = 0.0f64;
        let mapped = rows
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(1)?,
                    r.get::<_, f64>(7)?,
                    HistoryRow {
                        id: r.get(0)?,
                        role: r.get(2)?,
                        content: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
                        tool_calls: r.get(4)?,
                        tool_call_id: r.get(5)?,
                        tool_name: r.get(6)?,
                        bridge_wrote: false,
                        loaded: None,
                    },
                ))
            })
            .unwrap();
        for row in mapped {
            let (session, timestamp, row) = row.unwrap();
            last = last.max(timestamp);
            state.histories.entry(session).or_default().push(row);
        }
        let has_meta: bool = db
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'state_meta'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .unwrap()
            > 0;
        if has_meta {
            let mut meta = db.prepare("SELECT key, value FROM state_meta").unwrap();
            for kv in meta
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
                .unwrap()
            {
                let (k, v) = kv.unwrap();
                state.meta.insert(k, v);
            }
        }
        state.now = last + 60.0;
        Self::new(state)
    }

    /// The shared state (lock it briefly; the policy's calls lock it too).
    pub fn state(&self) -> MutexGuard<'_, MemoryState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn enter(&self) -> MutexGuard<'_, MemoryState> {
        let delay = {
            let mut state = self.state();
            state.import_calls += 1;
            state.import_delay
        };
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        self.state()
    }
}

impl HostImports for MemoryBackend {
    fn meta_get(&mut self, key: &str) -> Result<Option<String>, Failure> {
        Ok(self.enter().meta.get(key).cloned())
    }

    fn meta_delete(&mut self, key: &str) -> Result<bool, Failure> {
        Ok(self.enter().meta.remove(key).is_some())
    }

    fn session_exists(&mut self, id: &str) -> Result<bool, Failure> {
        Ok(self.enter().sessions.contains(id))
    }

    fn history(
        &mut self,
        session_id: &str,
        _agent: &str,
        limit: Option<u32>,
    ) -> Result<Vec<HistoryRow>, Failure> {
        let state = self.enter();
        let rows = state.histories.get(session_id).cloned().unwrap_or_default();
        Ok(match limit {
            Some(n) if (n as usize) < rows.len() => rows[rows.len() - n as usize..].to_vec(),
            _ => rows,
        })
    }

    fn now(&mut self) -> f64 {
        self.state().now
    }

    fn send(&mut self, plan: &SendPlan) -> Result<Sent, Failure> {
        let mut state = self.enter();
        if let Some(failure) = state.send_failure.clone() {
            return Err(failure);
        }
        let id = state
            .histories
            .values()
            .flatten()
            .map(|row| row.id)
            .max()
            .unwrap_or(0)
            + 1;
        state
            .histories
            .entry(plan.history_session_id.clone())
            .or_default()
            .push(HistoryRow {
                id,
                role: "user".into(),
                content: plan.history_content.clone(),
                tool_calls: None,
                tool_call_id: None,
                tool_name: None,
                bridge_wrote: true,
                loaded: None,
            });
        state
            .meta
            .insert(plan.record_key.clone(), plan.record_value.clone());
        state.sent.push(plan.clone());
        Ok(Sent {
            message_id: id,
            room: state.room.clone(),
            record_replaced: true,
        })
    }
}

/// The room of DESIGN §8's config: mohe, zhiwei and xiaoguo in
/// `coregroup`, TTL 3600 s, skew 120 s, 10,000 characters, legacy agent
/// mohe.
pub fn room_settings() -> Settings {
    let agent = |name: &str, sessions: &[&str]| Agent {
        name: name.into(),
        jid: format!("{name}@example.org"),
        nick: name.into(),
        sessions: sessions.iter().map(|s| s.to_string()).collect(),
        aliases: vec![],
    };
    Settings {
        room: "coregroup@conference.example.org".into(),
        ttl_seconds: 3600,
        future_skew_seconds: 120,
        max_body_chars: 10_000,
        legacy_agent: Some("mohe".into()),
        agents: vec![
            agent("mohe", &["xmpp-mohe-v2", "xmpp-mohe"]),
            agent("zhiwei", &["xmpp-zhiwei"]),
            agent("xiaoguo", &["xmpp-xiaoguo"]),
        ],
    }
}
