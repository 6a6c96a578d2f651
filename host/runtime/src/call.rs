//! The one path every call of the policy takes, in a store of its own:
//! fresh per-call state, a full fuel budget and the guest-time deadline,
//! one read snapshot around the calls that only read, the export, the
//! host's check of its answer inside that snapshot, and every way the call
//! can break — a trap, a budget spent, a step outside the call's rights —
//! turned into the sentence of a `policy` failure.
//!
//! A store whose call broke is never used again (a trap can leave the
//! guest's memory half-updated); the callers here drop it:
//! [`PolicyInstance`](crate::PolicyInstance) parks its host data for a
//! fresh store, the check of a new component gives up.

use super::bindings::exports::agentsmeeting::session_switch::policy::Guest;
use super::bindings::{SessionSwitch, SessionSwitchPre, Settings};
use super::imports::{Call, CallState, SendArgs, StoreData};
use super::limits::Limits;
use crate::Failure;
use std::time::Duration;
use wasmtime::{Engine, Store, Trap};

/// A store with an instance of the policy in it.
pub(crate) struct Live {
    store: Store<StoreData>,
    guest: SessionSwitch,
}

/// Why a store could not be made ready for calls.
pub(crate) enum NotReady {
    /// Instantiating the component or its `configure` broke: the sentence
    /// of a `policy` failure of `configure`.
    Broke(String),
    /// `configure` refused the settings: the policy's own failure, kind
    /// kept (e.g. `bad-input`).
    Refused(Failure),
}

/// A check of an answer that accepts every answer.
pub(crate) fn no_check<R>(_: &R, _: &mut StoreData) -> Result<(), String> {
    Ok(())
}

impl Live {
    /// A new store holding `data`, under `limits`, with `pre` instantiated in
    /// it. `Err` holds the sentence of the failure and `data` back.
    pub(crate) fn start(
        engine: &Engine,
        pre: &SessionSwitchPre<StoreData>,
        data: StoreData,
        limits: &Limits,
    ) -> Result<Self, (String, Box<StoreData>)> {
        let mut store = Store::new(engine, data);
        store.limiter(|data| &mut data.limiter);
        store.epoch_deadline_callback(|mut ctx| Ok(ctx.data_mut().clock.on_deadline()));
        // Instantiation may run guest code: the budgets and rights of
        // `configure`, the call that always follows.
        store.data_mut().begin(Call::Configure, None);
        store
            .set_fuel(limits.fuel_per_call)
            .expect("fuel is enabled on the engine");
        store.set_epoch_deadline(1);
        match pre.instantiate(&mut store) {
            Ok(guest) => Ok(Self { store, guest }),
            Err(error) => {
                let done = store.data_mut().finish();
                let what = format!(
                    "cannot instantiate it: {}",
                    describe_trap(limits, &error, store.data(), &done)
                );
                Err((what, Box::new(store.into_data())))
            }
        }
    }

    /// [`Live::start`], then `configure` with `settings`: a store ready for
    /// the exports. `Err` holds why not and `data` back.
    pub(crate) fn configured(
        engine: &Engine,
        pre: &SessionSwitchPre<StoreData>,
        data: StoreData,
        limits: &Limits,
        settings: &Settings,
    ) -> Result<Self, (NotReady, Box<StoreData>)> {
        let mut live = Self::start(engine, pre, data, limits)
            .map_err(|(what, data)| (NotReady::Broke(what), data))?;
        let answer = live.run(
            Call::Configure,
            None,
            limits,
            |guest, store| guest.call_configure(store, settings),
            no_check,
        );
        match answer {
            Ok((Ok(()), _)) => Ok(live),
            Ok((Err(refused), _)) => Err((
                NotReady::Refused(refused.into()),
                Box::new(live.into_data()),
            )),
            Err(what) => Err((NotReady::Broke(what), Box::new(live.into_data()))),
        }
    }

    /// Run one export `f` as `call` (`send_args`: what its `host.send` must
    /// match), with fresh per-call state, `limits`' fuel and guest time,
    /// and one read snapshot of the imports when the call only reads.
    ///
    /// `check` looks at an answer before that snapshot closes, so it sees
    /// the state the policy saw; its `Err` refuses the answer. `Ok` holds
    /// the answer and what the call did; `Err` the sentence of a `policy`
    /// failure (a trap, a budget spent, a step outside the call's rights, a
    /// refused answer): drop this store then.
    pub(crate) fn run<R>(
        &mut self,
        call: Call,
        send_args: Option<SendArgs>,
        limits: &Limits,
        f: impl FnOnce(&Guest, &mut Store<StoreData>) -> wasmtime::Result<R>,
        check: impl FnOnce(&R, &mut StoreData) -> Result<(), String>,
    ) -> Result<(R, CallState), String> {
        self.store.data_mut().begin(call, send_args);
        self.store
            .set_fuel(limits.fuel_per_call)
            .expect("fuel is enabled on the engine");
        // The guest clock is looked at every tick (GuestClock::on_deadline).
        self.store.set_epoch_deadline(1);
        let snapshot = call.only_reads();
        if snapshot {
            self.store.data_mut().imports.begin_read();
        }
        let result = f(
            self.guest.agentsmeeting_session_switch_policy(),
            &mut self.store,
        );
        let checked = match &result {
            Ok(answer) => check(answer, self.store.data_mut()),
            Err(_) => Ok(()),
        };
        let data = self.store.data_mut();
        if snapshot {
            data.imports.end_read();
        }
        let done = data.finish();
        let answer = result.map_err(|error| describe_trap(limits, &error, data, &done))?;
        if let Some(violation) = &done.violation {
            let mut what = format!("it {violation}");
            if let Some(sent) = &done.sent {
                what.push_str(&format!(
                    "; the message was delivered and recorded (messages.id {})",
                    sent.message_id
                ));
            }
            return Err(what);
        }
        checked?;
        Ok((answer, done))
    }

    /// What the last call spent: fuel units (of `limits`' budget) and its
    /// own running time (host imports not counted).
    pub(crate) fn spent(&self, limits: &Limits) -> (u64, Duration) {
        let left = self.store.get_fuel().unwrap_or(0);
        (
            limits.fuel_per_call.saturating_sub(left),
            self.store.data().clock.guest_time(),
        )
    }

    pub(crate) fn data(&self) -> &StoreData {
        self.store.data()
    }

    pub(crate) fn data_mut(&mut self) -> &mut StoreData {
        self.store.data_mut()
    }

    /// Drop the store and instance, keeping the host data.
    pub(crate) fn into_data(self) -> StoreData {
        self.store.into_data()
    }
}

/// The `policy` failure of `call` on the component named `version`, with
/// `what` it did; logged with `tracing` (error) as well.
pub(crate) fn policy_failure(version: &str, call: Call, what: &str) -> Failure {
    let message = format!(
        "policy `{version}` failed in `{}`: {what}. Fix or replace the policy component",
        call.name()
    );
    tracing::error!(target: "session_switch::runtime", call = call.name(), "{message}");
    Failure::policy(message)
}

/// Describe a trap (or other wasmtime error) of a call: which budget it
/// went past if any, what the policy said (its panic message), and whether
/// a send had happened (`done`: what the call did).
fn describe_trap(
    limits: &Limits,
    error: &wasmtime::Error,
    data: &StoreData,
    done: &CallState,
) -> String {
    let mut what = if data.limiter.hit {
        format!(
            "it went past its memory cap of {} MiB",
            data.limiter.cap() >> 20
        )
    } else if data.clock.hit {
        format!(
            "it ran for more than {} ms of its own time in one call (time in host imports \
             not counted): it loops or works far too long",
            data.clock.limit().as_millis()
        )
    } else {
        match error.downcast_ref::<Trap>() {
            Some(Trap::OutOfFuel) => format!(
                "it ran out of fuel ({} units per call): it loops or works far too long",
                limits.fuel_per_call
            ),
            // "wasm trap: wasm `unreachable` instruction executed" (a panic).
            Some(trap) => trap.to_string(),
            None => format!("it failed: {}", one_line(error)),
        }
    };
    if !done.said.is_empty() {
        what.push_str("; it said: ");
        what.push_str(&done.said.join(" | "));
    }
    if let Some(sent) = &done.sent {
        what.push_str(&format!(
            "; NOTE: the room had already accepted the message and it was recorded \
                 (messages.id {}) before the policy failed",
            sent.message_id
        ));
    }
    what
}

/// An error and its causes on one line.
pub(crate) fn one_line(e: &wasmtime::Error) -> String {
    format!("{e:#}")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}
