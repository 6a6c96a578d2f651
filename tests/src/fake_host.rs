//! The one fake of the WIT `host` interface: an in-memory `state.db` and
//! room behind the runtime's [`HostImports`] (what the compiled component
//! calls through wasmtime) and the guest's [`session_switch_policy::Host`]
//! (what the native rules call). Both traits are the WIT `host` interface;
//! one implementation answers both, so the differential test gives the two
//! sides identical inputs by construction: start each side on a clone of
//! the same [`FakeState`], then compare the states, import calls included.
//!
//! The knobs the tests turn, all fields of [`FakeState`]: the clock
//! (`now`), scripted failures per import (`fail`), a delay inside every
//! import but `now` (`import_delay`, spent busy: time spent in the host must not count
//! against the policy's fuel), the log of calls (`calls`) and the rows the
//! last `history` call returned (`last_history`). [`FakeHost::from_fixture`]
//! seeds it from a real Hermes database; [`FakeHost::refusing`] fails every
//! import (for calls that must not reach the host).
//!
//! No SQLite, no ejabberd: the real store and transports are tested on real
//! files and a real ejabberd elsewhere; what is under test here is the
//! policy and the runtime above them.

use crate::wit_convert::{failure_to_guest, plan_from_guest, role_to_guest, sent_to_guest};
use session_switch::Failure;
use session_switch::HistoryRow;
use session_switch::runtime::{DataVersion, HostImports, SendPlan, Sent};
use session_switch_policy as guest;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// A fallible import of the WIT `host` interface (`now` and `log` cannot
/// fail), for scripted failures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Import {
    MetaGet,
    MetaDelete,
    /// Only `admit` sets state (not in [`Import::ALL`]: the fault tests
    /// cover the imports of the other exports).
    MetaSet,
    SessionExists,
    History,
    Send,
}

impl Import {
    /// Every fallible import.
    pub const ALL: [Import; 5] = [
        Import::MetaGet,
        Import::MetaDelete,
        Import::SessionExists,
        Import::History,
        Import::Send,
    ];
}

/// One call of an import, with its arguments, in call order.
#[derive(Clone, Debug, PartialEq)]
pub enum ImportCall {
    MetaGet(String),
    MetaDelete(String),
    MetaSet(String, String),
    SessionExists(String),
    /// `prefix-chars` is not kept: the runtime's `HostImports` never sees it
    /// (the runtime cuts the prefixes itself).
    History {
        session_id: String,
        agent: String,
        limit: Option<u32>,
    },
    Now,
    Send(SendPlan),
}

/// A stored `messages` row, with the agent the bridge wrote it for (the
/// `session_switch_sent` table, DESIGN §8 "Provenance of our rows").
#[derive(Clone, Debug, PartialEq)]
pub struct FakeRow {
    /// `messages.id`; unique across sessions, ascending within one.
    pub id: i64,
    /// `messages.role` as Hermes stores it (free text).
    pub role: String,
    pub content: String,
    pub tool_calls: Option<String>,
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
    /// `session_switch_sent.agent`, when the bridge wrote the row.
    pub bridge_agent: Option<String>,
}

impl FakeRow {
    /// A row as Hermes stores it (not the bridge's).
    pub fn stored(id: i64, role: &str, content: &str) -> FakeRow {
        FakeRow {
            id,
            role: role.into(),
            content: content.into(),
            tool_calls: None,
            tool_call_id: None,
            tool_name: None,
            bridge_agent: None,
        }
    }

    /// The row as Hermes's loader returns it to a host reading the history
    /// for `agent` (`bridge_wrote` is about that agent).
    pub fn for_agent(&self, agent: &str) -> HistoryRow {
        HistoryRow {
            id: self.id,
            role: self.role.clone().into(),
            content: self.content.clone(),
            tool_calls: self.tool_calls.clone(),
            tool_call_id: self.tool_call_id.clone(),
            tool_name: self.tool_name.clone(),
            bridge_wrote: self.bridge_agent.as_deref() == Some(agent),
            loaded: None,
        }
    }
}

/// What the fake holds; tests read and change it through
/// [`FakeHost::state`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FakeState {
    /// `state_meta`: key → value.
    pub meta: BTreeMap<String, String>,
    /// `sessions.id`.
    pub sessions: BTreeSet<String>,
    /// Active rows per session, in id order.
    pub histories: BTreeMap<String, Vec<FakeRow>>,
    /// What `now` answers (Unix seconds).
    pub now: f64,
    /// The room's bare JID, reported by `send`.
    pub room: String,
    /// Scripted failures: the import returns this and does nothing.
    pub fail: BTreeMap<Import, Failure>,
    /// Stay busy this long inside every import but `now` (outside the lock).
    pub import_delay: Duration,
    /// Every import call, in order (both sides must make the same calls).
    pub calls: Vec<ImportCall>,
    /// Every plan `send` performed (not the ones scripted to fail), in order.
    pub sent: Vec<SendPlan>,
    /// The full rows the last `history` call returned (what the host keeps
    /// to apply the policy's edits to).
    pub last_history: Vec<HistoryRow>,
    /// `data_version` answers a hash of `meta` and `sessions` (a version
    /// that changes with what the imports read, however it was changed);
    /// `false`: `None`, as imports that cannot tell.
    pub versioned: bool,
}

impl FakeState {
    /// The rows of `session` as a host reading them for `agent` gets them
    /// (empty for an unknown session).
    pub fn rows(&self, session: &str, agent: &str) -> Vec<HistoryRow> {
        self.histories
            .get(session)
            .map(|rows| rows.iter().map(|r| r.for_agent(agent)).collect())
            .unwrap_or_default()
    }

    /// How many imports were called, `now` not counted (the ones that
    /// spend `import_delay`).
    pub fn import_calls(&self) -> usize {
        self.calls
            .iter()
            .filter(|c| !matches!(c, ImportCall::Now))
            .count()
    }

    /// Call `import` (logged as `call`): the scripted failure, or `Ok`.
    fn enter(&mut self, import: Import, call: ImportCall) -> Result<(), Failure> {
        self.calls.push(call);
        match self.fail.get(&import) {
            Some(failure) => Err(failure.clone()),
            None => Ok(()),
        }
    }

    fn meta_get(&mut self, key: &str) -> Result<Option<String>, Failure> {
        self.enter(Import::MetaGet, ImportCall::MetaGet(key.to_owned()))?;
        Ok(self.meta.get(key).cloned())
    }

    fn meta_delete(&mut self, key: &str) -> Result<bool, Failure> {
        self.enter(Import::MetaDelete, ImportCall::MetaDelete(key.to_owned()))?;
        Ok(self.meta.remove(key).is_some())
    }

    fn meta_set(&mut self, key: &str, value: &str) -> Result<(), Failure> {
        self.enter(
            Import::MetaSet,
            ImportCall::MetaSet(key.to_owned(), value.to_owned()),
        )?;
        self.meta.insert(key.to_owned(), value.to_owned());
        Ok(())
    }

    fn session_exists(&mut self, id: &str) -> Result<bool, Failure> {
        self.enter(
            Import::SessionExists,
            ImportCall::SessionExists(id.to_owned()),
        )?;
        Ok(self.sessions.contains(id))
    }

    fn history(
        &mut self,
        session_id: &str,
        agent: &str,
        limit: Option<u32>,
    ) -> Result<Vec<HistoryRow>, Failure> {
        self.enter(
            Import::History,
            ImportCall::History {
                session_id: session_id.to_owned(),
                agent: agent.to_owned(),
                limit,
            },
        )?;
        let rows = self
            .histories
            .get(session_id)
            .map_or(&[][..], Vec::as_slice);
        let skip = limit.map_or(0, |l| rows.len().saturating_sub(l as usize));
        self.last_history = rows[skip..].iter().map(|r| r.for_agent(agent)).collect();
        Ok(self.last_history.clone())
    }

    fn now(&mut self) -> f64 {
        self.calls.push(ImportCall::Now);
        self.now
    }

    /// The host's send (DESIGN §8 "Send"), all or nothing: the history
    /// session's row if missing, the `[YOU] ` row with its provenance, and
    /// the record unless the stored one has a newer timestamp.
    fn send(&mut self, plan: SendPlan) -> Result<Sent, Failure> {
        self.enter(Import::Send, ImportCall::Send(plan.clone()))?;
        let id = self
            .histories
            .values()
            .flatten()
            .map(|r| r.id)
            .max()
            .unwrap_or(0)
            + 1;
        self.sessions.insert(plan.history_session_id.clone());
        self.histories
            .entry(plan.history_session_id.clone())
            .or_default()
            .push(FakeRow {
                bridge_agent: Some(plan.agent.clone()),
                ..FakeRow::stored(id, "user", &plan.history_content)
            });
        let stored = self
            .meta
            .get(&plan.record_key)
            .and_then(|v| serde_json::from_str::<serde_json::Value>(v).ok())
            .and_then(|v| v.get("timestamp").and_then(serde_json::Value::as_f64));
        let record_replaced = stored.is_none_or(|ts| ts <= plan.timestamp);
        if record_replaced {
            self.meta
                .insert(plan.record_key.clone(), plan.record_value.clone());
        }
        self.sent.push(plan);
        Ok(Sent {
            message_id: id,
            room: self.room.clone(),
            record_replaced,
        })
    }
}

/// A handle on a [`FakeState`]; clones share it.
#[derive(Clone, Debug, Default)]
pub struct FakeHost(Arc<Mutex<FakeState>>);

impl FakeHost {
    /// A fake starting from `state` (two sides of a comparison: pass each
    /// its own clone).
    pub fn new(state: FakeState) -> Self {
        Self(Arc::new(Mutex::new(state)))
    }

    /// A fake whose every fallible import fails (kind `store`, naming
    /// `what` and the import): for calls that must not reach the host, so a
    /// policy that calls one shows up.
    pub fn refusing(what: &str) -> Self {
        let fail = Import::ALL
            .into_iter()
            .map(|i| {
                let failure = Failure::store(format!("{what} must not call host import {i:?}"));
                (i, failure)
            })
            .collect();
        Self::new(FakeState {
            fail,
            ..FakeState::default()
        })
    }

    /// The sessions, active history rows and `state_meta` of a real Hermes
    /// database (read with plain SQL as Hermes's loader does: ORDER BY id,
    /// `active = 1` where the column exists; `state_meta` may be missing),
    /// in the samples' room. The clock is set to the fixture's last message
    /// + 60 s.
    pub fn from_fixture(path: &Path) -> Self {
        let db = rusqlite::Connection::open(path).expect("open fixture copy");
        let mut state = FakeState {
            room: crate::sample::ROOM.into(),
            ..FakeState::default()
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
                    FakeRow {
                        id: r.get(0)?,
                        role: r.get(2)?,
                        content: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
                        tool_calls: r.get(4)?,
                        tool_call_id: r.get(5)?,
                        tool_name: r.get(6)?,
                        bridge_agent: None,
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
                .query_map([], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?))
                })
                .unwrap()
            {
                if let (k, Some(v)) = kv.unwrap() {
                    state.meta.insert(k, v);
                }
            }
        }
        state.now = last + 60.0;
        Self::new(state)
    }

    /// The state (lock briefly: the policy's imports lock it too).
    pub fn state(&self) -> MutexGuard<'_, FakeState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A copy of the state now.
    pub fn snapshot(&self) -> FakeState {
        self.state().clone()
    }

    /// An import but `now`: busy for `import_delay` (not holding the lock),
    /// then run `f` on the state. Busy, not asleep: the thread's CPU time
    /// grows as it does while SQLite reads, so the guest clock (CPU time)
    /// must subtract it, not just ignore a sleep.
    fn import<T>(&self, f: impl FnOnce(&mut FakeState) -> T) -> T {
        let delay = self.state().import_delay;
        let started = std::time::Instant::now();
        while started.elapsed() < delay {
            std::hint::spin_loop();
        }
        f(&mut self.state())
    }
}

/// The native side: the guest's `Host` trait, answering in the guest's types.
impl guest::Host for FakeHost {
    fn meta_get(&mut self, key: &str) -> Result<Option<String>, guest::Failure> {
        self.import(|s| s.meta_get(key))
            .map_err(|f| failure_to_guest(&f))
    }

    fn meta_delete(&mut self, key: &str) -> Result<bool, guest::Failure> {
        self.import(|s| s.meta_delete(key))
            .map_err(|f| failure_to_guest(&f))
    }

    fn meta_set(&mut self, key: &str, value: &str) -> Result<(), guest::Failure> {
        self.import(|s| s.meta_set(key, value))
            .map_err(|f| failure_to_guest(&f))
    }

    fn session_exists(&mut self, session_id: &str) -> Result<bool, guest::Failure> {
        self.import(|s| s.session_exists(session_id))
            .map_err(|f| failure_to_guest(&f))
    }

    /// The rows as summaries cut to `prefix_chars` characters, the way the
    /// WIT `host.history` describes them (the runtime builds its own).
    fn history(
        &mut self,
        session_id: &str,
        agent: &str,
        limit: Option<u32>,
        prefix_chars: u32,
    ) -> Result<guest::RowSummaries, guest::Failure> {
        let rows = self
            .import(|s| s.history(session_id, agent, limit))
            .map_err(|f| failure_to_guest(&f))?;
        Ok(summaries(&rows, prefix_chars))
    }

    fn now(&mut self) -> f64 {
        self.state().now()
    }

    fn send(&mut self, plan: &guest::SendPlan) -> Result<guest::Sent, guest::Failure> {
        self.import(|s| s.send(plan_from_guest(plan)))
            .map(sent_to_guest)
            .map_err(|f| failure_to_guest(&f))
    }

    fn log(&mut self, _level: guest::LogLevel, _message: &str) {}
}

/// What the guest sees of `rows` (WIT `row-summaries`), built as the
/// runtime's host builds it (`apply::summaries`): each row's id, its role,
/// the first `prefix_chars` characters of the text Hermes sends for it
/// ([`HistoryRow::sent_text`], cut by the host's own
/// [`session_switch_runtime::prefix`]), the provenance flag; the string
/// sized once. The native side of the benches and the differential tests
/// then does what the component's host does, minus the boundary.
pub fn summaries(rows: &[HistoryRow], prefix_chars: u32) -> guest::RowSummaries {
    let heads: Vec<&str> = rows
        .iter()
        .map(|row| session_switch_runtime::prefix(row.sent_text(), prefix_chars))
        .collect();
    let bytes = heads.iter().map(|h| h.len()).sum();
    let mut out = guest::RowSummaries::with_capacity(rows.len(), bytes);
    for (row, head) in rows.iter().zip(heads) {
        out.push(row.id, role_to_guest(&row.role), head, row.bridge_wrote);
    }
    out
}

/// The component's side: the runtime's `HostImports`, in the host's types.
impl HostImports for FakeHost {
    fn meta_get(&mut self, key: &str) -> Result<Option<String>, Failure> {
        self.import(|s| s.meta_get(key))
    }

    fn meta_delete(&mut self, key: &str) -> Result<bool, Failure> {
        self.import(|s| s.meta_delete(key))
    }

    fn meta_set(&mut self, key: &str, value: &str) -> Result<(), Failure> {
        self.import(|s| s.meta_set(key, value))
    }

    fn session_exists(&mut self, id: &str) -> Result<bool, Failure> {
        self.import(|s| s.session_exists(id))
    }

    fn history(
        &mut self,
        session_id: &str,
        agent: &str,
        limit: Option<u32>,
    ) -> Result<Vec<HistoryRow>, Failure> {
        self.import(|s| s.history(session_id, agent, limit))
    }

    fn now(&mut self) -> f64 {
        self.state().now()
    }

    fn send(&mut self, plan: &SendPlan) -> Result<Sent, Failure> {
        self.import(|s| s.send(plan.clone()))
    }

    fn data_version(&mut self) -> Result<Option<DataVersion>, Failure> {
        use std::hash::{Hash, Hasher};
        let s = self.state();
        Ok(s.versioned.then(|| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (&s.meta, &s.sessions).hash(&mut h);
            DataVersion(0, h.finish())
        }))
    }
}
