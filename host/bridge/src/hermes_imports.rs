//! The host imports over the real parts: Hermes's `state.db` ([`HermesStore`])
//! and an ejabberd [`Transport`], joined in the one place that needs both,
//! the atomic send of DESIGN §8.

use crate::store::{HermesStore, SendWrite};
use crate::transport::Transport;
use session_switch_runtime::{Failure, HistoryRow, HostImports, SendPlan, Sent};
use std::time::{SystemTime, UNIX_EPOCH};

/// For tests only: when set (and not empty), the host's clock (WIT
/// `host.now`) reads the Unix time in seconds (e.g. `1800000000.5`) from
/// the file this variable names, at every call, instead of the system
/// clock: a test moves time for every process at once (the bots' `admit`
/// calls, `send`, `active`) by rewriting the file. A file that cannot be
/// read or holds no finite number reads as NaN, which the policy refuses
/// (kind `policy`, "not a Unix time"): never a silent fall-back to the real
/// clock.
pub const TEST_CLOCK_ENV: &str = "SESSION_SWITCH_TEST_CLOCK_FILE";

/// The time in the test clock's file ([`TEST_CLOCK_ENV`]), NaN when unreadable.
fn test_clock(path: &std::path::Path) -> f64 {
    let read = std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|text| text.trim().parse::<f64>().map_err(|e| e.to_string()))
        .and_then(|t| {
            if t.is_finite() {
                Ok(t)
            } else {
                Err(format!("{t} is not a finite number"))
            }
        });
    read.unwrap_or_else(|e| {
        tracing::warn!(
            target: "session_switch::hermes_imports",
            "test clock {} ({TEST_CLOCK_ENV}) is unreadable: {e}",
            path.display()
        );
        f64::NAN
    })
}

/// [`HostImports`] over a Hermes database and, for sends, an ejabberd transport.
pub struct HermesImports {
    store: HermesStore,
    /// `None` for callers that never send (resolve, context, active, clear).
    transport: Option<Box<dyn Transport>>,
    /// Bare JID of the room sends go to.
    room: String,
    /// A read snapshot of ours is open ([`HostImports::begin_read`]).
    reading: bool,
}

impl HermesImports {
    /// A backend that reads and writes `store` and posts through `transport`
    /// (`None`: a send fails with kind `transport`).
    pub fn new(
        store: HermesStore,
        transport: Option<Box<dyn Transport>>,
        room: impl Into<String>,
    ) -> Self {
        Self {
            store,
            transport,
            room: room.into(),
            reading: false,
        }
    }

    pub fn store(&self) -> &HermesStore {
        &self.store
    }
}

impl HostImports for HermesImports {
    fn meta_get(&mut self, key: &str) -> Result<Option<String>, Failure> {
        self.store.meta_get(key)
    }

    fn meta_delete(&mut self, key: &str) -> Result<bool, Failure> {
        self.store.meta_delete(key)
    }

    fn meta_set(&mut self, key: &str, value: &str) -> Result<(), Failure> {
        self.store.meta_set(key, value)
    }

    fn begin_write(&mut self) -> Result<(), Failure> {
        self.store.begin_state_write()
    }

    fn end_write(&mut self, commit: bool) -> Result<(), Failure> {
        self.store.end_state_write(commit)
    }

    fn session_exists(&mut self, id: &str) -> Result<bool, Failure> {
        self.store.session_exists(id)
    }

    fn history(
        &mut self,
        session_id: &str,
        agent: &str,
        limit: Option<u32>,
    ) -> Result<Vec<HistoryRow>, Failure> {
        self.store.history(session_id, agent, limit)
    }

    /// One `BEGIN` … `COMMIT` read transaction around the call
    /// ([`HermesStore::begin_read`]); if it cannot be opened, each read runs
    /// on its own (logged), as without a snapshot.
    fn begin_read(&mut self) {
        match self.store.begin_read() {
            Ok(opened) => self.reading = opened,
            Err(failure) => tracing::warn!(
                target: "session_switch::hermes_imports",
                "reading without a snapshot: {}",
                failure.message
            ),
        }
    }

    fn end_read(&mut self) {
        if std::mem::take(&mut self.reading)
            && let Err(failure) = self.store.end_read()
        {
            tracing::warn!(target: "session_switch::hermes_imports", "{}", failure.message);
        }
    }

    /// The system clock in Unix seconds, or the test clock of
    /// [`TEST_CLOCK_ENV`] when that variable is set.
    fn now(&mut self) -> f64 {
        match std::env::var_os(TEST_CLOCK_ENV) {
            Some(path) if !path.is_empty() => test_clock(std::path::Path::new(&path)),
            _ => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        }
    }

    /// DESIGN §8 "Send", §9.5: complete any send that reached the room
    /// but not the database; ask ejabberd whether the agent's JID may post
    /// (before anything is written: a refused sender changes nothing); then
    /// intent → post → record ([`HermesStore::send_write`]: no lock is held
    /// across the post).
    fn send(&mut self, plan: &SendPlan) -> Result<Sent, Failure> {
        let transport = self.transport.as_deref().ok_or_else(|| {
            Failure::transport("no ejabberd transport is configured for this caller")
        })?;
        self.store.complete_pending()?;
        transport.check_sender(&plan.from_jid, &self.room)?;
        let write = SendWrite {
            agent: &plan.agent,
            history_session_id: &plan.history_session_id,
            history_content: &plan.history_content,
            cli_session_id: &plan.cli_session_id,
            record_key: &plan.record_key,
            record_value: &plan.record_value,
            timestamp: plan.timestamp,
        };
        let room = &self.room;
        let (written, ()) = self.store.send_write(&write, || {
            transport.post(&plan.from_jid, room, &plan.room_body)
        })?;
        Ok(Sent {
            message_id: written.message_id,
            room: self.room.clone(),
            record_replaced: written.record_replaced,
        })
    }
}
