//! An in-memory [`Host`]: a **test double** for native tests of the rules,
//! for the component's `self-check`, and for differential tests (the same
//! inputs given to the native rules and to the compiled component). It
//! mimics the contract of the WIT `host` interface closely enough for the
//! rules, but it is not the real host: no SQLite, no room, no atomicity.

use std::collections::{BTreeMap, BTreeSet};

use crate::host::Host;
use crate::{Failure, LogLevel, Role, RowSummaries, SendPlan, Sent};

/// Which import a scripted failure replaces (see [`MemoryHost::fail`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum HostOp {
    MetaGet,
    MetaDelete,
    MetaSet,
    SessionExists,
    History,
    Send,
}

/// One stored history row of [`MemoryHost`].
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryRow {
    /// `messages.id`.
    pub id: i64,
    pub role: Role,
    /// The whole content (the host gives the policy only a prefix).
    pub content: String,
    /// The agent the bridge wrote this row for (`session_switch_sent`).
    pub bridge_agent: Option<String>,
}

/// The arguments of one `history` call, kept so tests can check what the
/// policy asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct HistoryCall {
    pub session_id: String,
    pub agent: String,
    pub limit: Option<u32>,
    pub prefix_chars: u32,
}

/// The in-memory host. All fields are public: tests arrange the state, call
/// the rules, then inspect it.
#[derive(Clone, Debug, Default)]
pub struct MemoryHost {
    /// `state_meta`: key → value.
    pub meta: BTreeMap<String, String>,
    /// Ids of `sessions` rows.
    pub sessions: BTreeSet<String>,
    /// Rows per session, in id order.
    pub histories: BTreeMap<String, Vec<MemoryRow>>,
    /// What `now` returns (Unix seconds).
    pub clock: f64,
    /// The room `send` reports.
    pub room: String,
    /// Every plan `send` accepted, in order.
    pub sent: Vec<SendPlan>,
    /// Every `log` line.
    pub logs: Vec<(LogLevel, String)>,
    /// Every `history` call.
    pub history_calls: Vec<HistoryCall>,
    /// Scripted failures: the import returns this instead of acting.
    pub fail: BTreeMap<HostOp, Failure>,
}

impl MemoryHost {
    /// An empty host whose clock reads `clock` and whose room is `room`.
    pub fn new(clock: f64, room: &str) -> Self {
        Self {
            clock,
            room: room.to_string(),
            ..Self::default()
        }
    }

    /// Add a session row (without history).
    pub fn add_session(&mut self, id: &str) -> &mut Self {
        self.sessions.insert(id.to_string());
        self
    }

    /// Append a row to `session`'s history (the session is created too) and
    /// return its id. `bridge_agent`: the agent the bridge wrote it for.
    pub fn push_row(
        &mut self,
        session: &str,
        role: Role,
        content: &str,
        bridge_agent: Option<&str>,
    ) -> i64 {
        let id = self.next_id();
        self.sessions.insert(session.to_string());
        self.histories
            .entry(session.to_string())
            .or_default()
            .push(MemoryRow {
                id,
                role,
                content: content.to_string(),
                bridge_agent: bridge_agent.map(str::to_string),
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

    fn scripted(&self, op: HostOp) -> Result<(), Failure> {
        match self.fail.get(&op) {
            Some(f) => Err(f.clone()),
            None => Ok(()),
        }
    }
}

/// The first `n` characters of `s` (a character boundary, like the host).
pub fn prefix(s: &str, n: u32) -> &str {
    match s.char_indices().nth(n as usize) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

impl Host for MemoryHost {
    fn meta_get(&mut self, key: &str) -> Result<Option<String>, Failure> {
        self.scripted(HostOp::MetaGet)?;
        Ok(self.meta.get(key).cloned())
    }

    fn meta_delete(&mut self, key: &str) -> Result<bool, Failure> {
        self.scripted(HostOp::MetaDelete)?;
        Ok(self.meta.remove(key).is_some())
    }

    fn meta_set(&mut self, key: &str, value: &str) -> Result<(), Failure> {
        self.scripted(HostOp::MetaSet)?;
        self.meta.insert(key.to_owned(), value.to_owned());
        Ok(())
    }

    fn session_exists(&mut self, session_id: &str) -> Result<bool, Failure> {
        self.scripted(HostOp::SessionExists)?;
        Ok(self.sessions.contains(session_id))
    }

    fn history(
        &mut self,
        session_id: &str,
        agent: &str,
        limit: Option<u32>,
        prefix_chars: u32,
    ) -> Result<RowSummaries, Failure> {
        self.history_calls.push(HistoryCall {
            session_id: session_id.to_string(),
            agent: agent.to_string(),
            limit,
            prefix_chars,
        });
        self.scripted(HostOp::History)?;
        let rows = self
            .histories
            .get(session_id)
            .map_or(&[][..], Vec::as_slice);
        let skip = limit.map_or(0, |l| rows.len().saturating_sub(l as usize));
        let mut out = RowSummaries::with_capacity(rows.len() - skip, 0);
        for r in &rows[skip..] {
            out.push(
                r.id,
                r.role,
                prefix(&r.content, prefix_chars),
                r.bridge_agent.as_deref() == Some(agent),
            );
        }
        Ok(out)
    }

    fn now(&mut self) -> f64 {
        self.clock
    }

    /// Appends the history row, then writes the record unless the stored
    /// one has a newer timestamp (DESIGN §8 "Records"), like the real host.
    fn send(&mut self, plan: &SendPlan) -> Result<Sent, Failure> {
        self.scripted(HostOp::Send)?;
        let message_id = self.push_row(
            &plan.history_session_id,
            Role::User,
            &plan.history_content,
            Some(&plan.agent),
        );
        let stored_ts = self
            .meta
            .get(&plan.record_key)
            .and_then(|v| serde_json::from_str::<serde_json::Value>(v).ok())
            .and_then(|v| v.get("timestamp").and_then(serde_json::Value::as_f64));
        let record_replaced = stored_ts.is_none_or(|ts| ts <= plan.timestamp);
        if record_replaced {
            self.meta
                .insert(plan.record_key.clone(), plan.record_value.clone());
        }
        self.sent.push(plan.clone());
        Ok(Sent {
            message_id,
            room: self.room.clone(),
            record_replaced,
        })
    }

    fn log(&mut self, level: LogLevel, message: &str) {
        self.logs.push((level, message.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_applies_limit_prefix_and_provenance() {
        let mut h = MemoryHost::new(100.0, "room@conference.example.org");
        h.push_row("s", Role::User, "héllo world", Some("mohe"));
        h.push_row("s", Role::Assistant, "ok", None);
        h.push_row("s", Role::User, "third", Some("zhiwei"));
        let packed = h.history("s", "mohe", Some(2), 3).unwrap();
        let rows = packed.split().unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!((packed.rows[0].id, rows[0].prefix), (2, "ok"));
        assert_eq!(rows[1].prefix, "thi");
        assert!(
            !rows[1].bridge_wrote,
            "written for zhiwei, asked about mohe"
        );
        let all = h.history("s", "mohe", None, 2).unwrap();
        let all = all.split().unwrap();
        assert_eq!(all[0].prefix, "hé");
        assert!(all[0].bridge_wrote);
        assert!(h.history("unknown", "mohe", None, 5).unwrap().is_empty());
        assert_eq!(h.history_calls.len(), 3);
    }

    #[test]
    fn scripted_failures_replace_the_import() {
        let mut h = MemoryHost::default();
        let f = crate::failure::policy("boom");
        h.fail.insert(HostOp::MetaGet, f.clone());
        assert_eq!(h.meta_get("k"), Err(f));
        assert_eq!(h.meta_delete("k"), Ok(false));
    }
}
