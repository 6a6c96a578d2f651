//! Sends between their intent and their record (docs/src/design/send.md#a-send-never-locks-hermes-out): listed for
//! `active`, completed once when the room took them, forgotten by `clear`.
//! The intents live in `state_meta` under `session_switch:pending:`.

use session_switch_contract::failure::Failure;
use session_switch_contract::keys::pending_key_agent;

use crate::{HermesStore, SendWrite, Written};

/// The pending keys, as a key range (not `LIKE`, which ignores case and
/// treats `_` as a wildcard): `;` is the character after `:`.
const SELECT_PENDING: &str = "SELECT key, CAST(value AS TEXT) FROM state_meta \
     WHERE key >= 'session_switch:pending:' AND key < 'session_switch:pending;' ORDER BY key";

/// Where a send between its intent and its record stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PendingState {
    /// The post is running, or the process died during it: the room may
    /// have the message ([`PendingSend::process_alive`] tells which).
    Posting,
    /// The outcome is unknown: the post timed out after the request went
    /// out, or the sender check that ran beside it failed. The room may
    /// have it.
    Unknown,
    /// The room took it; the history row and the record wait for the
    /// database ([`HermesStore::complete_pending`] writes them).
    Delivered,
    /// A value under our pending prefix that is not an intent of ours.
    Malformed,
}

impl PendingState {
    /// `posting`, `unknown`, `delivered`, `malformed` (the JSON values).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Posting => "posting",
            Self::Unknown => "unknown",
            Self::Delivered => "delivered",
            Self::Malformed => "malformed",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "posting" => Self::Posting,
            "unknown" => Self::Unknown,
            "delivered" => Self::Delivered,
            _ => return None,
        })
    }
}

/// A send that reached the room, or may have, without its history row.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingSend {
    /// Its `state_meta` key, `session_switch:pending:<agent>:<token>`.
    pub key: String,
    pub agent: String,
    pub state: PendingState,
    /// `state` is [`PendingState::Delivered`].
    pub delivered: bool,
    /// For [`PendingState::Posting`]: the process that wrote the intent is
    /// still running (the send is in progress), as far as this machine can
    /// tell; `false` means it died during the post.
    pub process_alive: bool,
    /// Unix seconds of the send (0 when malformed).
    pub created_at: f64,
    /// The history row's content (`[YOU] ` + the body; empty when malformed).
    pub body: String,
    pub cli_session_id: String,
}

impl HermesStore {
    /// Write the sends that reached the room but not the database (intents
    /// in state `delivered`), oldest first; each in one transaction that
    /// writes only if it removes its intent, so this writes each send once
    /// even when two processes run it at the same time. Returns what was
    /// written.
    ///
    /// Errors: as [`HermesStore::send_write`]'s record step (kind `busy`
    /// past the write deadline, kind `store`); what was written before the
    /// error stays written, the rest stays pending.
    pub fn complete_pending(&mut self) -> Result<Vec<Written>, Failure> {
        let mut written = Vec::new();
        for (key, intent) in self.read_intents()? {
            let Some(intent) = intent else { continue };
            if intent.state != PendingState::Delivered {
                continue;
            }
            if let Some(w) = self.write_record(&key, &intent.as_write(), true)? {
                written.push(w);
            }
        }
        Ok(written)
    }

    /// Every pending send (an intent under `session_switch:pending:`), by
    /// key; empty when `state_meta` is missing. A read: changes nothing.
    ///
    /// Errors: kind `busy` past the busy timeout, kind `store`.
    pub fn pending_sends(&self) -> Result<Vec<PendingSend>, Failure> {
        let mut pending: Vec<PendingSend> = self
            .read_intents()?
            .into_iter()
            .map(|(key, intent)| {
                let agent = pending_key_agent(&key).unwrap_or_default().to_owned();
                match intent {
                    Some(i) => PendingSend {
                        agent,
                        state: i.state,
                        delivered: i.state == PendingState::Delivered,
                        process_alive: i.state == PendingState::Posting && process_alive(i.pid),
                        created_at: i.timestamp,
                        body: i.content,
                        cli_session_id: i.cli_session_id,
                        key,
                    },
                    None => PendingSend {
                        agent,
                        state: PendingState::Malformed,
                        delivered: false,
                        process_alive: false,
                        created_at: 0.0,
                        body: String::new(),
                        cli_session_id: String::new(),
                        key,
                    },
                }
            })
            .collect();
        pending.sort_by(|a, b| a.created_at.total_cmp(&b.created_at));
        Ok(pending)
    }

    /// Forget the pending sends of `agent` (or of every agent): their
    /// intents are deleted, in one brief transaction. Returns how many.
    /// Completing the delivered ones first is the caller's choice
    /// ([`HermesStore::complete_pending`]).
    ///
    /// Errors: kind `busy` past the write deadline (nothing deleted), kind
    /// `store`.
    pub fn clear_pending(&mut self, agent: Option<&str>) -> Result<usize, Failure> {
        let keys: Vec<String> = self
            .read_intents()?
            .into_iter()
            .map(|(key, _)| key)
            .filter(|key| agent.is_none_or(|a| pending_key_agent(key) == Some(a)))
            .collect();
        if keys.is_empty() {
            return Ok(0);
        }
        let doing = "forget the pending sends";
        let removed = self.write_briefly(doing, |tx| {
            let mut removed = 0;
            for key in &keys {
                removed += tx
                    .execute("DELETE FROM state_meta WHERE key = ?1", [key])
                    .map_err(|e| self.fail(doing, e))?;
            }
            Ok(removed)
        })?;
        for key in &keys {
            super::delivered::unmark(&self.path, key);
        }
        Ok(removed)
    }

    /// The pending keys with their intents (`None`: not one of ours).
    fn read_intents(&self) -> Result<Vec<(String, Option<Intent>)>, Failure> {
        if !self.table_exists("state_meta")? {
            return Ok(Vec::new());
        }
        let doing = "read the pending sends";
        let mut stmt = self
            .conn
            .prepare_cached(SELECT_PENDING)
            .map_err(|e| self.fail(doing, e))?;
        let rows = stmt
            .query_map([], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?))
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.fail(doing, e))?;
        Ok(rows
            .into_iter()
            .map(|(key, value)| {
                let mut intent = value
                    .as_deref()
                    .and_then(Intent::parse)
                    .filter(|i| pending_key_agent(&key) == Some(i.agent.as_str()));
                // The room took it while state.db refused the `delivered`
                // mark: the marker beside the database says so.
                if let Some(i) = intent.as_mut()
                    && i.state == PendingState::Posting
                    && super::delivered::is_marked(&self.path, &key)
                {
                    i.state = PendingState::Delivered;
                }
                (key, intent)
            })
            .collect())
    }
}

/// Whether process `pid` runs on this machine (signal 0; `EPERM` means it
/// exists under another user).
fn process_alive(pid: Option<u32>) -> bool {
    let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) else {
        return false;
    };
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(e) => e == nix::errno::Errno::EPERM,
    }
}

/// A send's intent as stored: its state, the writer's process id, and the
/// [`SendWrite`] the record step needs.
struct Intent {
    state: PendingState,
    pid: Option<u32>,
    agent: String,
    history_session_id: String,
    content: String,
    cli_session_id: String,
    record_key: String,
    record_value: String,
    timestamp: f64,
}

/// The intent's JSON value: `state`, `pid`, and the plan's fields.
pub(super) fn intent_json(w: &SendWrite<'_>, state: PendingState) -> String {
    serde_json::json!({
        "state": state.as_str(),
        "pid": std::process::id(),
        "agent": w.agent,
        "history_session_id": w.history_session_id,
        "history_content": w.history_content,
        "cli_session_id": w.cli_session_id,
        "record_key": w.record_key,
        "record_value": w.record_value,
        "timestamp": w.timestamp,
    })
    .to_string()
}

impl Intent {
    /// `None` unless `text` is an intent this host wrote: every field, a
    /// known state, and a plan that passes [`validate`] (so completing it
    /// can never write what a send could not).
    fn parse(text: &str) -> Option<Self> {
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        let s = |k: &str| v.get(k)?.as_str().map(str::to_owned);
        let intent = Self {
            state: PendingState::parse(v.get("state")?.as_str()?)?,
            pid: v
                .get("pid")
                .and_then(serde_json::Value::as_u64)
                .and_then(|p| u32::try_from(p).ok()),
            agent: s("agent")?,
            history_session_id: s("history_session_id")?,
            content: s("history_content")?,
            cli_session_id: s("cli_session_id")?,
            record_key: s("record_key")?,
            record_value: s("record_value")?,
            timestamp: v.get("timestamp")?.as_f64()?,
        };
        intent.as_write().check().ok()?;
        Some(intent)
    }

    fn as_write(&self) -> SendWrite<'_> {
        SendWrite {
            agent: &self.agent,
            history_session_id: &self.history_session_id,
            history_content: &self.content,
            cli_session_id: &self.cli_session_id,
            record_key: &self.record_key,
            record_value: &self.record_value,
            timestamp: self.timestamp,
        }
    }
}
