//! The host side of the WIT `host` interface: the data of a policy `Store`
//! and the imports the policy calls, over a [`HostImports`].
//!
//! Besides forwarding, the imports enforce what a call may do: `send` only
//! inside `policy.send` (once, with a plan that matches the call),
//! `meta-delete` only inside `policy.clear` and only on our keys, `history`
//! only inside `policy.context`, `meta-set` only inside `policy.admit`, once,
//! on that agent's loop-guard key. A policy that steps outside gets a
//! `policy` failure and its answer is refused.
//!
//! Every import is timed: its time is not the guest's, so a slow `state.db`
//! or ejabberd never counts against the call's guest time limit.
//!
//! This file is the store's data and the `host::Host` methods (timing,
//! reads kept for the host's checks); what one call may do and did is
//! `call_state.rs`, each import's gate and work `gates.rs`.

mod call_state;
mod gates;

use super::bindings::agentsmeeting::session_switch::{host, types};
use super::bindings::{LogLevel, RowSummaries, SendPlan, Sent, WitFailure};
use super::host_imports::HostImports;
use super::limits::{GuestClock, Limiter, Limits};
use crate::Failure;
use std::time::Instant;

pub(crate) use call_state::{Call, CallState, HistoryQuery, SendArgs};

/// The data of a policy `Store`.
pub(crate) struct StoreData {
    pub(crate) imports: Box<dyn HostImports>,
    pub(crate) limiter: Limiter,
    /// The current call's guest time (imports not counted).
    pub(crate) clock: GuestClock,
    /// The component's version (what its `version` export answered), naming
    /// it in log lines and failure messages.
    pub(crate) policy_version: String,
    /// The running call.
    pub(crate) call: CallState,
    /// The key the next `admit` call may set ([`CallState::admit_key`]),
    /// handed over when that call begins.
    pub(crate) next_admit_key: Option<String>,
}

impl StoreData {
    /// The data of a new store: `imports` behind the imports, a memory
    /// limiter and a guest clock for `limits`, `policy_version` naming the
    /// component.
    pub(crate) fn new(
        imports: Box<dyn HostImports>,
        limits: &Limits,
        policy_version: String,
    ) -> Self {
        Self {
            imports,
            limiter: Limiter::new(limits),
            clock: GuestClock::new(limits),
            policy_version,
            call: CallState::default(),
            next_admit_key: None,
        }
    }

    /// Forget the previous call and start `export`.
    pub(crate) fn begin(&mut self, export: Call, send_args: Option<SendArgs>) {
        // Only `admit` takes the key: a `configure` that runs first (a new
        // store) must not.
        let admit_key = if export == Call::Admit {
            self.next_admit_key.take()
        } else {
            None
        };
        self.call = CallState {
            export,
            send_args,
            admit_key,
            ..CallState::default()
        };
        self.limiter.hit = false;
        self.clock.begin();
    }

    /// End the call: what it did, leaving an empty state behind.
    pub(crate) fn finish(&mut self) -> CallState {
        std::mem::take(&mut self.call)
    }

    /// The value of `state_meta` key `key` as this call sees it: what
    /// `meta-get` already answered the policy, else a read through the
    /// imports (inside the call's read snapshot either way).
    pub(crate) fn record(&mut self, key: &str) -> Result<Option<String>, Failure> {
        match self.call.reads.meta.iter().rev().find(|(k, _)| k == key) {
            Some((_, value)) => Ok(value.clone()),
            None => self.imports.meta_get(key),
        }
    }

    /// Run one import's work, its time counted as the host's, not the guest's.
    /// Wall-clock time: the thread's CPU clock is a system call (see
    /// [`Limits::guest_time_per_call`]).
    fn timed<R>(&mut self, work: impl FnOnce(&mut Self) -> R) -> R {
        let started = Instant::now();
        let answer = work(self);
        self.clock.add_import(started.elapsed());
        answer
    }
}

impl types::Host for StoreData {}

impl host::Host for StoreData {
    fn meta_get(&mut self, key: String) -> Result<Option<String>, WitFailure> {
        self.timed(|s| {
            let value = s.imports.meta_get(&key)?;
            if s.call.export.keeps_reads() {
                s.call.reads.meta.push((key, value.clone()));
            }
            Ok(value)
        })
    }

    fn meta_delete(&mut self, key: String) -> Result<bool, WitFailure> {
        self.timed(|s| s.meta_delete_untimed(key))
    }

    fn meta_set(&mut self, key: String, value: String) -> Result<(), WitFailure> {
        self.timed(|s| s.meta_set_untimed(key, value))
    }

    fn session_exists(&mut self, session_id: String) -> Result<bool, WitFailure> {
        self.timed(|s| {
            let exists = s.imports.session_exists(&session_id)?;
            if s.call.export.keeps_reads() {
                s.call.reads.exists.push((session_id, exists));
            }
            Ok(exists)
        })
    }

    fn history(
        &mut self,
        session_id: String,
        agent: String,
        limit: Option<u32>,
        prefix_chars: u32,
    ) -> Result<RowSummaries, WitFailure> {
        self.timed(|s| s.history_untimed(session_id, agent, limit, prefix_chars))
    }

    fn now(&mut self) -> f64 {
        self.timed(|s| {
            let now = s.imports.now();
            if s.call.export.keeps_reads() && s.call.reads.now.is_none() {
                s.call.reads.now = Some(now);
            }
            now
        })
    }

    fn send(&mut self, plan: SendPlan) -> Result<Sent, WitFailure> {
        self.timed(|s| s.send_untimed(plan))
    }

    fn log(&mut self, level: LogLevel, message: String) {
        self.timed(|s| s.log_untimed(level, message))
    }
}

#[cfg(test)]
mod tests;
