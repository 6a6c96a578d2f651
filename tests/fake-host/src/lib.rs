//! The one fake of the WIT `host` interface: an in-memory `state.db` and
//! room. The guest's unit tests, the runtime's unit tests and the
//! integration tests (`tests/`) all run over it.
//!
//! The state ([`FakeState`]) and what each import does to it live here, in
//! the contract's types; the two traits that are the WIT `host` interface
//! in Rust (the guest's `Host`, what the native rules call, and the
//! runtime's `HostImports`, what the compiled component calls through
//! wasmtime) are implemented by [`guest_host!`] and [`host_imports!`].
//! They are macros because a crate's unit tests are a crate of their own
//! to rustc: the guest's and the runtime's tests expand the impl for their
//! own trait, and features `policy` and `runtime` expand it here for the
//! integration tests. One handle answers both traits, so the differential
//! test gives the two sides identical inputs by construction: start each
//! side on a clone of the same [`FakeState`], then compare the states,
//! import calls included.
//!
//! The knobs the tests turn, all fields of [`FakeState`]: the clock
//! (`now`), scripted failures per import (`fail`), a delay inside every
//! import but `now` (`import_delay`, spent busy: time spent in the host must
//! not count against the policy's fuel), the data version (`version`,
//! `versioned`), the log of calls (`calls`) and the rows the last `history`
//! call returned (`last_history`). [`FakeHost::refusing`] fails every
//! import (for calls that must not reach the host).
//!
//! No SQLite, no ejabberd: the real store and transports are tested on real
//! files and a real ejabberd elsewhere; what is under test here is the
//! policy and the runtime above them.

pub use session_switch_contract as contract;
use session_switch_contract::failure::Failure;
use session_switch_contract::history::{DataVersion, HistoryRow};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub mod guest;
pub mod runtime;

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

/// WIT `send-plan`, as the fake keeps it (the guest's and the runtime's
/// generated records have the same fields).
#[derive(Clone, Debug, PartialEq)]
pub struct SendPlan {
    pub agent: String,
    pub from_jid: String,
    pub room_body: String,
    pub history_session_id: String,
    pub history_content: String,
    pub cli_session_id: String,
    pub record_key: String,
    pub record_value: String,
    pub timestamp: f64,
}

/// WIT `sent`, as the fake answers it.
#[derive(Clone, Debug, PartialEq)]
pub struct Sent {
    pub message_id: i64,
    pub room: String,
    pub record_replaced: bool,
}

/// One call of an import, with its arguments, in call order.
#[derive(Clone, Debug, PartialEq)]
pub enum ImportCall {
    MetaGet(String),
    MetaDelete(String),
    MetaSet(String, String),
    SessionExists(String),
    /// `prefix-chars` is not kept: the runtime's `HostImports` never sees it
    /// (the runtime cuts the prefixes itself); the guest's side keeps it in
    /// [`GuestSeen`].
    History {
        session_id: String,
        agent: String,
        limit: Option<u32>,
    },
    Now,
    Send(SendPlan),
}

/// A stored `messages` row, with the agent the bridge wrote it for (the
/// `session_switch_sent` table, docs/src/design/contracts.md#provenance-of-our-rows).
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

/// A row of `role` and `content` with `messages.id` `id`, not written by
/// the bridge, as Hermes's loader returns it (no loader's extra fields).
pub fn row(id: i64, role: &str, content: &str) -> HistoryRow {
    FakeRow::stored(id, role, content).for_agent("")
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
    /// What `data_version` answers when set (a test moving the version by
    /// hand, e.g. another connection's commit that changed nothing read).
    pub version: Option<DataVersion>,
    /// Unless `version` is set: `data_version` answers a hash of `meta` and
    /// `sessions` (a version that changes with what the imports read,
    /// however it was changed); `false`: `None`, as imports that cannot
    /// tell.
    pub versioned: bool,
}

impl FakeState {
    /// An empty state whose clock reads `now` and whose room is `room`.
    pub fn at(now: f64, room: &str) -> FakeState {
        FakeState {
            now,
            room: room.into(),
            ..FakeState::default()
        }
    }

    /// Add a session row (without history).
    pub fn add_session(&mut self, id: &str) -> &mut FakeState {
        self.sessions.insert(id.to_owned());
        self
    }

    /// Append a row of `role` and `content` to `session`'s history (the
    /// session is created too), written by the bridge for `bridge_agent`
    /// when `Some`; its id, the next after every row's.
    pub fn push_row(
        &mut self,
        session: &str,
        role: &str,
        content: &str,
        bridge_agent: Option<&str>,
    ) -> i64 {
        let id = self.next_id();
        self.sessions.insert(session.to_owned());
        self.histories
            .entry(session.to_owned())
            .or_default()
            .push(FakeRow {
                bridge_agent: bridge_agent.map(str::to_owned),
                ..FakeRow::stored(id, role, content)
            });
        id
    }

    fn next_id(&self) -> i64 {
        self.histories
            .values()
            .flatten()
            .map(|r| r.id)
            .max()
            .unwrap_or(0)
            + 1
    }

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

    /// WIT `host.meta-get`.
    pub fn meta_get(&mut self, key: &str) -> Result<Option<String>, Failure> {
        self.enter(Import::MetaGet, ImportCall::MetaGet(key.to_owned()))?;
        Ok(self.meta.get(key).cloned())
    }

    /// WIT `host.meta-delete`.
    pub fn meta_delete(&mut self, key: &str) -> Result<bool, Failure> {
        self.enter(Import::MetaDelete, ImportCall::MetaDelete(key.to_owned()))?;
        Ok(self.meta.remove(key).is_some())
    }

    /// WIT `host.meta-set`.
    pub fn meta_set(&mut self, key: &str, value: &str) -> Result<(), Failure> {
        self.enter(
            Import::MetaSet,
            ImportCall::MetaSet(key.to_owned(), value.to_owned()),
        )?;
        self.meta.insert(key.to_owned(), value.to_owned());
        Ok(())
    }

    /// WIT `host.session-exists`.
    pub fn session_exists(&mut self, id: &str) -> Result<bool, Failure> {
        self.enter(
            Import::SessionExists,
            ImportCall::SessionExists(id.to_owned()),
        )?;
        Ok(self.sessions.contains(id))
    }

    /// The runtime's `HostImports::history`: the full rows (the guest's
    /// side cuts them to summaries).
    pub fn history(
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

    /// WIT `host.now`.
    pub fn now(&mut self) -> f64 {
        self.calls.push(ImportCall::Now);
        self.now
    }

    /// The host's send (docs/src/design/send.md#the-atomic-send), all or nothing: the history
    /// session's row if missing, the `[YOU] ` row with its provenance, and
    /// the record unless the stored one has a newer timestamp.
    pub fn send(&mut self, plan: SendPlan) -> Result<Sent, Failure> {
        self.enter(Import::Send, ImportCall::Send(plan.clone()))?;
        let id = self.push_row(
            &plan.history_session_id,
            "user",
            &plan.history_content,
            Some(&plan.agent),
        );
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

    /// The runtime's `HostImports::data_version`: `version`, else a hash of
    /// what the imports read when `versioned`, else `None`.
    pub fn data_version(&self) -> Option<DataVersion> {
        use std::hash::{Hash, Hasher};
        self.version.or_else(|| {
            self.versioned.then(|| {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                (&self.meta, &self.sessions).hash(&mut h);
                DataVersion(0, h.finish())
            })
        })
    }
}

/// What only the guest's side of the interface carries: `log` lines and
/// the `prefix-chars` of each `history` call. Kept beside the state, not in
/// it: the runtime's side has neither, and the differential test compares
/// the two sides' states.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GuestSeen {
    /// Every `log` line: the level's name and the message.
    pub logs: Vec<(String, String)>,
    /// The `prefix-chars` of each `history` call, in order.
    pub prefix_chars: Vec<u32>,
}

/// A handle on a [`FakeState`]; clones share it.
#[derive(Clone, Debug, Default)]
pub struct FakeHost {
    state: Arc<Mutex<FakeState>>,
    guest: Arc<Mutex<GuestSeen>>,
}

impl FakeHost {
    /// A fake starting from `state` (two sides of a comparison: pass each
    /// its own clone).
    pub fn new(state: FakeState) -> Self {
        Self {
            state: Arc::new(Mutex::new(state)),
            guest: Arc::default(),
        }
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

    /// The state (lock briefly: the policy's imports lock it too).
    pub fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A copy of the state now.
    pub fn snapshot(&self) -> FakeState {
        self.state().clone()
    }

    /// What the guest's side alone carries (its `log` lines, its
    /// `prefix-chars`).
    pub fn guest(&self) -> MutexGuard<'_, GuestSeen> {
        self.guest.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An import but `now`: busy for `import_delay` (not holding the lock),
    /// then run `f` on the state. Busy, not asleep: the thread's CPU time
    /// grows as it does while SQLite reads, so the guest clock (CPU time)
    /// must subtract it, not just ignore a sleep.
    pub fn import<T>(&self, f: impl FnOnce(&mut FakeState) -> T) -> T {
        let delay = self.state().import_delay;
        let started = std::time::Instant::now();
        while started.elapsed() < delay {
            std::hint::spin_loop();
        }
        f(&mut self.state())
    }
}

/// The first `n` characters of `s` (a character boundary), as the host cuts
/// the prefixes of `host.history`.
pub fn prefix(s: &str, n: u32) -> &str {
    match s.char_indices().nth(n as usize) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// A WIT `send-plan` record of another crate (the guest's or the
/// runtime's generated one: the same fields) as the fake keeps it.
#[doc(hidden)]
#[macro_export]
macro_rules! plan_of {
    ($plan:expr) => {{
        let p = $plan;
        $crate::SendPlan {
            agent: p.agent.clone(),
            from_jid: p.from_jid.clone(),
            room_body: p.room_body.clone(),
            history_session_id: p.history_session_id.clone(),
            history_content: p.history_content.clone(),
            cli_session_id: p.cli_session_id.clone(),
            record_key: p.record_key.clone(),
            record_value: p.record_value.clone(),
            timestamp: p.timestamp,
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_cuts_at_a_character_boundary() {
        assert_eq!(prefix("héllo", 2), "hé");
        assert_eq!(prefix("thi", 3), "thi");
        assert_eq!(prefix("ab", 5), "ab");
    }
}
