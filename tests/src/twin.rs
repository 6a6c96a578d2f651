//! One in-memory `state.db` + room that serves both sides of the
//! differential test: the native policy (as its
//! [`session_switch_policy::Host`]) and the compiled component (as the
//! runtime's [`session_switch::runtime::HostImports`]). Both traits are the WIT
//! `host` interface; here one implementation answers both, so the two sides
//! get identical inputs by construction. Start each side on a clone of the
//! same [`TwinState`]; afterwards compare the two states, the import calls
//! included.
//!
//! A test double (no SQLite, no ejabberd): the real store and transports
//! are tested on real files and a real ejabberd elsewhere; what is under
//! test here is the policy above them, native against compiled.

use crate::wit_convert::{failure_to_guest, plan_from_guest, role_to_guest, sent_to_guest};
use session_switch::Failure;
use session_switch::HistoryRow;
use session_switch::runtime::{HostImports, SendPlan, Sent};
use session_switch_policy as guest;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

/// A fallible import of the WIT `host` interface (`now` and `log` cannot
/// fail), for scripted failures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Import {
    MetaGet,
    MetaDelete,
    SessionExists,
    History,
    Send,
}

/// One call of an import, with its arguments, in call order.
#[derive(Clone, Debug, PartialEq)]
pub enum ImportCall {
    MetaGet(String),
    MetaDelete(String),
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
pub struct TwinRow {
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

impl TwinRow {
    /// The row as Hermes's loader returns it to a host reading the history
    /// for `agent` (`bridge_wrote` is about that agent).
    pub fn for_agent(&self, agent: &str) -> HistoryRow {
        HistoryRow {
            id: self.id,
            role: self.role.clone(),
            content: self.content.clone(),
            tool_calls: self.tool_calls.clone(),
            tool_call_id: self.tool_call_id.clone(),
            tool_name: self.tool_name.clone(),
            bridge_wrote: self.bridge_agent.as_deref() == Some(agent),
            loaded: None,
        }
    }
}

/// The state both sides start from, and what each side leaves behind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TwinState {
    /// `state_meta`: key → value.
    pub meta: BTreeMap<String, String>,
    /// `sessions.id`.
    pub sessions: BTreeSet<String>,
    /// Active rows per session, in id order.
    pub histories: BTreeMap<String, Vec<TwinRow>>,
    /// What `now` answers (Unix seconds).
    pub now: f64,
    /// The room's bare JID, reported by `send`.
    pub room: String,
    /// Scripted failures: the import returns this and does nothing.
    pub fail: BTreeMap<Import, Failure>,
    /// Every import call, in order (both sides must make the same calls).
    pub calls: Vec<ImportCall>,
    /// The full rows the last `history` call returned (what the host keeps
    /// to apply the policy's edits to).
    pub last_history: Vec<HistoryRow>,
}

impl TwinState {
    /// Call `import` (logged as `call`): the scripted failure, or `Ok`.
    fn enter(&mut self, import: Import, call: ImportCall) -> Result<(), Failure> {
        self.calls.push(call);
        match self.fail.get(&import) {
            Some(failure) => Err(failure.clone()),
            None => Ok(()),
        }
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
            .push(TwinRow {
                id,
                role: "user".into(),
                content: plan.history_content.clone(),
                tool_calls: None,
                tool_call_id: None,
                tool_name: None,
                bridge_agent: Some(plan.agent.clone()),
            });
        let stored = self
            .meta
            .get(&plan.record_key)
            .and_then(|v| serde_json::from_str::<serde_json::Value>(v).ok())
            .and_then(|v| v.get("timestamp").and_then(serde_json::Value::as_f64));
        let record_replaced = stored.is_none_or(|ts| ts <= plan.timestamp);
        if record_replaced {
            self.meta.insert(plan.record_key, plan.record_value);
        }
        Ok(Sent {
            message_id: id,
            room: self.room.clone(),
            record_replaced,
        })
    }
}

/// A handle on one side's [`TwinState`]; clones share it.
#[derive(Clone, Debug, Default)]
pub struct Twin(Arc<Mutex<TwinState>>);

impl Twin {
    /// A side starting from `state` (pass each side its own clone).
    pub fn new(state: TwinState) -> Self {
        Self(Arc::new(Mutex::new(state)))
    }

    /// The state (lock briefly: the policy's imports lock it too).
    pub fn state(&self) -> MutexGuard<'_, TwinState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A copy of the state now.
    pub fn snapshot(&self) -> TwinState {
        self.state().clone()
    }
}

/// The native side: the guest's `Host` trait, answering in the guest's types.
impl guest::Host for Twin {
    fn meta_get(&mut self, key: &str) -> Result<Option<String>, guest::Failure> {
        let mut s = self.state();
        s.enter(Import::MetaGet, ImportCall::MetaGet(key.to_owned()))
            .map_err(|f| failure_to_guest(&f))?;
        Ok(s.meta.get(key).cloned())
    }

    fn meta_delete(&mut self, key: &str) -> Result<bool, guest::Failure> {
        let mut s = self.state();
        s.enter(Import::MetaDelete, ImportCall::MetaDelete(key.to_owned()))
            .map_err(|f| failure_to_guest(&f))?;
        Ok(s.meta.remove(key).is_some())
    }

    fn session_exists(&mut self, session_id: &str) -> Result<bool, guest::Failure> {
        let mut s = self.state();
        s.enter(
            Import::SessionExists,
            ImportCall::SessionExists(session_id.to_owned()),
        )
        .map_err(|f| failure_to_guest(&f))?;
        Ok(s.sessions.contains(session_id))
    }

    /// The rows as summaries cut to `prefix_chars` characters, the way the
    /// WIT `host.history` describes them (the runtime builds its own).
    fn history(
        &mut self,
        session_id: &str,
        agent: &str,
        limit: Option<u32>,
        prefix_chars: u32,
    ) -> Result<Vec<guest::RowSummary>, guest::Failure> {
        let rows = self
            .state()
            .history(session_id, agent, limit)
            .map_err(|f| failure_to_guest(&f))?;
        Ok(rows.iter().map(|r| summary(r, prefix_chars)).collect())
    }

    fn now(&mut self) -> f64 {
        let mut s = self.state();
        s.calls.push(ImportCall::Now);
        s.now
    }

    fn send(&mut self, plan: &guest::SendPlan) -> Result<guest::Sent, guest::Failure> {
        self.state()
            .send(plan_from_guest(plan))
            .map(sent_to_guest)
            .map_err(|f| failure_to_guest(&f))
    }

    fn log(&mut self, _level: guest::LogLevel, _message: &str) {}
}

/// What the guest sees of `row` (WIT `row-summary`): its id, its role, the
/// first `prefix_chars` characters, the provenance flag.
pub fn summary(row: &HistoryRow, prefix_chars: u32) -> guest::RowSummary {
    guest::RowSummary {
        id: row.id,
        role: role_to_guest(&row.role),
        prefix: guest::memory::prefix(&row.content, prefix_chars).to_owned(),
        bridge_wrote: row.bridge_wrote,
    }
}

/// The component's side: the runtime's `HostImports`, in the host's types.
impl HostImports for Twin {
    fn meta_get(&mut self, key: &str) -> Result<Option<String>, Failure> {
        let mut s = self.state();
        s.enter(Import::MetaGet, ImportCall::MetaGet(key.to_owned()))?;
        Ok(s.meta.get(key).cloned())
    }

    fn meta_delete(&mut self, key: &str) -> Result<bool, Failure> {
        let mut s = self.state();
        s.enter(Import::MetaDelete, ImportCall::MetaDelete(key.to_owned()))?;
        Ok(s.meta.remove(key).is_some())
    }

    fn session_exists(&mut self, id: &str) -> Result<bool, Failure> {
        let mut s = self.state();
        s.enter(
            Import::SessionExists,
            ImportCall::SessionExists(id.to_owned()),
        )?;
        Ok(s.sessions.contains(id))
    }

    fn history(
        &mut self,
        session_id: &str,
        agent: &str,
        limit: Option<u32>,
    ) -> Result<Vec<HistoryRow>, Failure> {
        self.state().history(session_id, agent, limit)
    }

    fn now(&mut self) -> f64 {
        let mut s = self.state();
        s.calls.push(ImportCall::Now);
        s.now
    }

    fn send(&mut self, plan: &SendPlan) -> Result<Sent, Failure> {
        self.state().send(plan.clone())
    }
}
