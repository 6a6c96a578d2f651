//! [`PolicyInstance`]: one caller's store of the policy — made on the first
//! call, kept between calls that ended well, thrown away after any failure and
//! whenever a swap or new settings ask for a fresh one — and the path each
//! export takes through it. The exports themselves are in `exports.rs`, the
//! checks of their answers in `answer_checks.rs`.

use super::bindings::exports::agentsmeeting::session_switch::policy::Guest;
use super::bindings::{Decision, Settings, WitFailure};
use super::call::{Live, NotReady, policy_failure};
use super::component::{LoadInfo, Loaded};
use super::engine::{PolicyOptions, Runtime};
use super::host_imports::HostImports;
use super::imports::{Call, CallState, SendArgs, StoreData};
use super::limits::{GuestClock, Limiter};
use super::memo::Memo;
use super::served::Served;
use super::tag_memo::TagMemo;
use crate::Failure;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::Store;

/// Where the instance's host data is: inside a live store, or parked
/// (holding the imports) until the next call makes a store.
enum Slot {
    Live(Box<Live>),
    Parked(Box<StoreData>),
    /// Only while moving between the two.
    Moving,
}

/// A caller of the policy, for one thread at a time (it is `Send`, not
/// `Sync`): its own `Store` and instance, its [`HostImports`] behind the
/// host imports, and the [`Settings`] given to the policy's `configure`.
///
/// Every call runs under the fuel, memory and guest-time budgets of
/// [`Limits`](super::Limits). When the policy traps, runs out of fuel,
/// memory or time, or answers something invalid, the call returns a
/// failure of kind `policy` whose message names the call and includes what
/// the policy logged (its panic message), the reason is logged with
/// `tracing`, and the store is thrown away: the next call gets a fresh one.
/// Failures the policy returns itself (unknown agent, bad input, a store
/// error passed on) keep their kind.
///
/// An instance follows hot swaps of its [`Policy`](super::Policy): a call
/// that starts after a swap runs on the new component.
pub struct PolicyInstance {
    runtime: Arc<Runtime>,
    current: Arc<Served>,
    /// The component of the last (or next) call, and its generation in
    /// `current`.
    loaded: Arc<Loaded>,
    generation: u64,
    settings: Settings,
    slot: Slot,
    /// Fuel the last call burned (for measuring budgets).
    last_fuel: u64,
    /// Guest time of the last call (for measuring budgets).
    last_guest_time: Duration,
    /// Decisions `resolve` may serve again (`memo.rs`): read through
    /// [`PolicyInstance::memoised`], filled by `exports.rs`'s `resolve`.
    pub(crate) memo: Memo,
    /// Edits `tag` answered, per row (`tag_memo.rs`): reached through
    /// [`PolicyInstance::tag_memo`].
    tag_memo: TagMemo,
}

impl PolicyInstance {
    /// An instance of the component `current` serves, now and after swaps.
    pub(crate) fn new(
        runtime: Arc<Runtime>,
        current: Arc<Served>,
        imports: Box<dyn HostImports>,
        settings: Settings,
    ) -> Self {
        let (loaded, generation) = current.get();
        let data = StoreData::new(
            imports,
            &runtime.options.limits,
            loaded.info.version.clone(),
        );
        Self {
            runtime,
            current,
            loaded,
            generation,
            settings,
            slot: Slot::Parked(Box::new(data)),
            last_fuel: 0,
            last_guest_time: Duration::ZERO,
            memo: Memo::default(),
            tag_memo: TagMemo::default(),
        }
    }

    /// The component this instance used last (or will use next).
    pub fn info(&self) -> &LoadInfo {
        &self.loaded.info
    }

    /// The settings given to the policy's `configure`.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Replace the settings; the next call makes a new instance and
    /// configures it with them.
    pub fn set_settings(&mut self, settings: Settings) {
        self.settings = settings;
        self.park();
    }

    /// The imports behind the host imports.
    pub fn imports_mut(&mut self) -> &mut dyn HostImports {
        &mut *self.data_mut().imports
    }

    /// The one `state_meta` key the next `admit` call may set (the
    /// runtime's gate on `host.meta-set`, `imports.rs`).
    pub(crate) fn set_admit_key(&mut self, key: String) {
        self.data_mut().next_admit_key = Some(key);
    }

    /// Give the imports back.
    pub fn into_imports(self) -> Box<dyn HostImports> {
        match self.slot {
            Slot::Live(live) => live.into_data().imports,
            Slot::Parked(data) => data.imports,
            Slot::Moving => unreachable!("an instance is live or parked between calls"),
        }
    }

    /// Whether a store with a configured instance is kept for the next call.
    pub fn is_live(&self) -> bool {
        matches!(self.slot, Slot::Live(_))
    }

    /// The largest memory the policy asked for in this instance's current
    /// store, in bytes (0 when no store is live); for measuring budgets.
    pub fn peak_memory(&self) -> usize {
        match &self.slot {
            Slot::Live(live) => live.data().limiter.peak,
            Slot::Parked(_) | Slot::Moving => 0,
        }
    }

    /// Fuel units the last call burned (of
    /// [`Limits::fuel_per_call`](super::Limits)); for measuring budgets.
    pub fn last_call_fuel(&self) -> u64 {
        self.last_fuel
    }

    /// The last call's own running time: the thread's CPU time from its
    /// start to its end minus the wall-clock time spent in host imports (what
    /// [`Limits::guest_time_per_call`](super::Limits) bounds); for
    /// measuring budgets.
    pub fn last_call_guest_time(&self) -> Duration {
        self.last_guest_time
    }

    pub(crate) fn options(&self) -> &PolicyOptions {
        &self.runtime.options
    }

    /// Whether `agent` is the settings' `legacy-agent`, the one agent for
    /// which the legacy `xmpp_session_bridge.py`'s fixed key is read (
    /// docs/src/design/contracts.md#records).
    pub(crate) fn is_legacy(&self, agent: &str) -> bool {
        self.settings.legacy_agent.as_deref() == Some(agent)
    }

    fn data(&self) -> &StoreData {
        match &self.slot {
            Slot::Live(live) => live.data(),
            Slot::Parked(data) => data,
            Slot::Moving => unreachable!("an instance is live or parked between calls"),
        }
    }

    fn data_mut(&mut self) -> &mut StoreData {
        match &mut self.slot {
            Slot::Live(live) => live.data_mut(),
            Slot::Parked(data) => data,
            Slot::Moving => unreachable!("an instance is live or parked between calls"),
        }
    }

    /// Park `data` for the next store, with fresh memory and time budgets.
    fn park_data(&mut self, mut data: Box<StoreData>) {
        data.limiter = Limiter::new(&self.runtime.options.limits);
        data.clock = GuestClock::new(&self.runtime.options.limits);
        self.slot = Slot::Parked(data);
    }

    /// Throw the store away (after a trap, an invalid answer, a swap, new
    /// settings, or a call when stores are not reused), keeping the imports;
    /// the memo goes with it.
    fn park(&mut self) {
        self.memo.clear();
        self.tag_memo.clear();
        if matches!(self.slot, Slot::Live(_)) {
            let Slot::Live(live) = std::mem::replace(&mut self.slot, Slot::Moving) else {
                unreachable!()
            };
            self.park_data(Box::new(live.into_data()));
        }
    }

    /// The decision of an earlier `resolve` of `agent` about `session_id`
    /// that still holds (`memo.rs`), after following a swap. A served
    /// decision ran no guest code: the last call's fuel and time read 0.
    /// Errors: a read of the check failed ([`Memo::get`]).
    pub(crate) fn memoised(
        &mut self,
        agent: &str,
        session_id: &str,
    ) -> Result<Option<Decision>, Failure> {
        self.refresh();
        let data = match &mut self.slot {
            Slot::Live(live) => live.data_mut(),
            Slot::Parked(data) => data,
            Slot::Moving => unreachable!("an instance is live or parked between calls"),
        };
        let decision = self.memo.get(&mut *data.imports, agent, session_id)?;
        if decision.is_some() {
            self.served_without_guest();
        }
        Ok(decision)
    }

    /// The edits `tag` may serve again (`tag_memo.rs`); `None` when memos
    /// are off ([`Self::memo_enabled`]). Follow a swap first
    /// ([`Self::refresh`]), once per call: a swap between a call's reading
    /// and its filling would put the old policy's answers in the new one's
    /// memo.
    pub(crate) fn tag_memo(&mut self) -> Option<&mut TagMemo> {
        self.memo_enabled().then_some(&mut self.tag_memo)
    }

    /// Which swap of the policy this instance follows (changes when
    /// [`Self::refresh`] picks up a swapped component).
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Record that a call was served without the guest.
    pub(crate) fn served_without_guest(&mut self) {
        (self.last_fuel, self.last_guest_time) = (0, Duration::ZERO);
    }

    /// Whether `resolve` keeps its decisions ([`PolicyOptions::memo`] and
    /// `reuse_store`).
    pub(crate) fn memo_enabled(&self) -> bool {
        self.runtime.options.reuse_store && self.runtime.options.memo
    }

    /// Pick up a swapped component before a call.
    pub(crate) fn refresh(&mut self) {
        if self.current.generation() != self.generation {
            let (loaded, generation) = self.current.get();
            tracing::debug!(
                target: "session_switch::runtime",
                from = %self.loaded.info.version,
                to = %loaded.info.version,
                "instance picks up the swapped policy"
            );
            // The old store before the old component's `Arc`: `Served::swap`
            // drops a swapped-out component once its list alone holds it.
            self.park();
            self.loaded = loaded;
            self.generation = generation;
            self.data_mut().policy_version = self.loaded.info.version.clone();
        }
    }

    /// Follow a swap and make a configured store if none is live. Errors:
    /// the policy's refusal of the settings (kind kept), or a `policy`
    /// failure.
    pub(crate) fn ready(&mut self) -> Result<(), Failure> {
        self.refresh();
        if matches!(self.slot, Slot::Live(_)) {
            return Ok(());
        }
        let Slot::Parked(data) = std::mem::replace(&mut self.slot, Slot::Moving) else {
            unreachable!("an instance is live or parked between calls")
        };
        let limits = self.runtime.options.limits;
        let engine = &self.runtime.engine;
        match Live::configured(engine, &self.loaded.pre, *data, &limits, &self.settings) {
            Ok(live) => {
                (self.last_fuel, self.last_guest_time) = live.spent(&limits);
                self.slot = Slot::Live(Box::new(live));
                Ok(())
            }
            Err((why, data)) => {
                self.park_data(data);
                Err(match why {
                    NotReady::Broke(what) => self.fail(Call::Configure, &what),
                    NotReady::Refused(refused) => refused,
                })
            }
        }
    }

    /// A `policy` failure of `call` (`what` the policy did), logged; the
    /// store is thrown away.
    pub(crate) fn fail(&mut self, call: Call, what: &str) -> Failure {
        let failure = policy_failure(&self.data().policy_version, call, what);
        self.park();
        failure
    }

    /// Run export `f` as `call` in a ready store ([`Live::run`]: `check`
    /// looks at the answer inside the call's read snapshot). Any failure
    /// throws the store away; so does every call when stores are not
    /// reused. `Ok` holds the answer and what the call did.
    pub(crate) fn call<R>(
        &mut self,
        call: Call,
        send_args: Option<SendArgs>,
        f: impl FnOnce(&Guest, &mut Store<StoreData>) -> wasmtime::Result<R>,
        check: impl FnOnce(&R, &mut StoreData) -> Result<(), String>,
    ) -> Result<(R, CallState), Failure> {
        self.ready()?;
        let limits = self.runtime.options.limits;
        let Slot::Live(live) = &mut self.slot else {
            unreachable!("ready() leaves a live store")
        };
        let result = live.run(call, send_args, &limits, f, check);
        (self.last_fuel, self.last_guest_time) = live.spent(&limits);
        match result {
            Err(what) => Err(self.fail(call, &what)),
            Ok(done) => {
                if !self.runtime.options.reuse_store {
                    self.park();
                }
                Ok(done)
            }
        }
    }

    /// [`PolicyInstance::call`] of an export that answers
    /// `result<T, failure>`: `check` sees `ok` answers only, and a failure
    /// the policy returns keeps its kind.
    pub(crate) fn call_wit<T>(
        &mut self,
        call: Call,
        send_args: Option<SendArgs>,
        f: impl FnOnce(&Guest, &mut Store<StoreData>) -> wasmtime::Result<Result<T, WitFailure>>,
        check: impl FnOnce(&T, &mut StoreData) -> Result<(), String>,
    ) -> Result<(T, CallState), Failure> {
        let (answer, done) = self.call(call, send_args, f, |answer, data| {
            answer.as_ref().map_or(Ok(()), |value| check(value, data))
        })?;
        match answer {
            Ok(value) => Ok((value, done)),
            Err(failure) => {
                let failure: Failure = failure.into();
                tracing::debug!(
                    target: "session_switch::runtime",
                    call = call.name(),
                    kind = failure.kind.as_str(),
                    "policy refused: {}",
                    failure.message
                );
                Err(failure)
            }
        }
    }
}
