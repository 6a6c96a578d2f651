//! A caller of the policy: one `Store` + instance + limits for one thread,
//! every export as a method, the checks of the policy's answers, and the
//! safe fallbacks a gateway uses so it never stops answering.

use super::apply;
use super::bindings::exports::agentsmeeting::session_switch::policy::Guest;
use super::bindings::{
    Decision, Reason, Receipt, RecordStatus, SessionSwitch, Settings, WitFailure,
};
use super::host_imports::HostImports;
use super::imports::{Call, HistoryQuery, SendArgs, StoreData};
use super::limits::{GuestClock, Limiter, MAX_BODY_CHARS_LIMIT, max_text_bytes};
use super::policy::{Current, LoadInfo, Loaded, Runtime, one_line};
use crate::Failure;
use crate::HistoryRow;
use session_switch_contract::keys::{LEGACY_KEY, record_key};
use std::sync::Arc;
use std::time::Duration;
use wasmtime::{Store, Trap};

/// What [`PolicyInstance::context`] answers: the decision and the chosen
/// session's history, as Hermes's loader returns it (`role`, `content`,
/// `tool_calls`, `tool_call_id`, `tool_name` of each row, in id order), with
/// the policy's `[YOU] ` edits applied.
#[derive(Clone, Debug, PartialEq)]
pub struct ContextAnswer {
    pub decision: Decision,
    pub messages: Vec<HistoryRow>,
}

/// A live instance of the policy in its own store.
struct Live {
    store: Store<StoreData>,
    policy: SessionSwitch,
}

/// Where the session's host data is: inside a live store, or parked
/// (holding the imports) until the next call makes a store.
enum Slot {
    Live(Box<Live>),
    Parked(Box<StoreData>),
    /// Only while moving between the two.
    Moving,
}

/// What one call left behind in the host data besides its answer.
struct Outcome {
    rows: Vec<HistoryRow>,
    history: Option<HistoryQuery>,
    sent: Option<super::bindings::Sent>,
    deleted: Vec<String>,
}

/// A caller of the policy, for one thread at a time (it is `Send`, not
/// `Sync`): its own `Store` and instance, its [`HostImports`] behind the host
/// imports, and the [`Settings`] given to the policy's `configure`.
///
/// Every call runs under the fuel, memory and guest-time budgets of
/// [`Limits`](super::Limits). When the policy traps, runs out of fuel,
/// memory or time, or answers something invalid, the call returns a failure of kind
/// `policy` whose message names the call and includes what the policy
/// logged (its panic message), the reason is logged with `tracing`, and the
/// store is thrown away: the next call gets a fresh one. Failures the
/// policy returns itself (unknown agent, bad input, a store error passed
/// on) keep their kind.
///
/// A session follows hot swaps of its [`Policy`](super::Policy): a call
/// that starts after a swap runs on the new component.
pub struct PolicyInstance {
    runtime: Arc<Runtime>,
    /// `None` for a session pinned to one component (checks before a swap).
    follow: Option<Arc<Current>>,
    loaded: Arc<Loaded>,
    generation: u64,
    /// `None` only for pinned check sessions (no `configure`).
    settings: Option<Settings>,
    slot: Slot,
    /// Fuel the last export call burned (for measuring budgets).
    last_fuel: u64,
    /// Guest time of the last export call (for measuring budgets).
    last_guest_time: Duration,
}

impl PolicyInstance {
    /// A session that follows `current` across swaps.
    pub(crate) fn following(
        runtime: Arc<Runtime>,
        current: Arc<Current>,
        imports: Box<dyn HostImports>,
        settings: Settings,
    ) -> Self {
        let (loaded, generation) = current.get();
        Self::make(
            runtime,
            Some(current),
            loaded,
            generation,
            imports,
            Some(settings),
        )
    }

    /// A session on exactly `loaded`; `settings: None` skips `configure`.
    pub(crate) fn pinned(
        runtime: Arc<Runtime>,
        loaded: Arc<Loaded>,
        imports: Box<dyn HostImports>,
        settings: Option<Settings>,
    ) -> Self {
        Self::make(runtime, None, loaded, 0, imports, settings)
    }

    fn make(
        runtime: Arc<Runtime>,
        follow: Option<Arc<Current>>,
        loaded: Arc<Loaded>,
        generation: u64,
        imports: Box<dyn HostImports>,
        settings: Option<Settings>,
    ) -> Self {
        let state = StoreData::new(
            imports,
            &runtime.options.limits,
            loaded.info.version.clone(),
        );
        Self {
            runtime,
            follow,
            loaded,
            generation,
            settings,
            slot: Slot::Parked(Box::new(state)),
            last_fuel: 0,
            last_guest_time: Duration::ZERO,
        }
    }

    /// The component this session used last (or will use next).
    pub fn info(&self) -> &LoadInfo {
        &self.loaded.info
    }

    /// Name the component in failure messages and logs (the check before a
    /// swap learns the version only from the component itself).
    pub(crate) fn set_label(&mut self, label: String) {
        self.state_mut().policy = label;
    }

    /// The settings given to the policy's `configure`.
    pub fn settings(&self) -> Option<&Settings> {
        self.settings.as_ref()
    }

    /// Whether `agent` is the settings' `legacy-agent`, the one agent for
    /// which the seed's fixed key is read (DESIGN §8 "Records").
    fn is_legacy(&self, agent: &str) -> bool {
        self.settings
            .as_ref()
            .and_then(|s| s.legacy_agent.as_deref())
            == Some(agent)
    }

    /// Replace the settings; the next call makes a new instance and
    /// configures it with them.
    pub fn set_settings(&mut self, settings: Settings) {
        self.settings = Some(settings);
        self.park();
    }

    /// The imports behind the host imports.
    pub fn imports_mut(&mut self) -> &mut dyn HostImports {
        &mut *self.state_mut().imports
    }

    /// Give the imports back.
    pub fn into_imports(self) -> Box<dyn HostImports> {
        match self.slot {
            Slot::Live(live) => live.store.into_data().imports,
            Slot::Parked(state) => state.imports,
            Slot::Moving => unreachable!("a session is live or parked between calls"),
        }
    }

    /// Whether a store with a configured instance is kept for the next call.
    pub fn is_live(&self) -> bool {
        matches!(self.slot, Slot::Live(_))
    }

    /// The largest memory the policy asked for in this session's current
    /// store, in bytes (0 when no store is live); for measuring budgets.
    pub fn peak_memory(&self) -> usize {
        match &self.slot {
            Slot::Live(live) => live.store.data().limiter.peak,
            Slot::Parked(_) | Slot::Moving => 0,
        }
    }

    /// Fuel units the last call burned (of
    /// [`Limits::fuel_per_call`](super::Limits)); for measuring budgets.
    pub fn last_call_fuel(&self) -> u64 {
        self.last_fuel
    }

    /// The last call's own running time: wall-clock time from its start to
    /// its end minus the time spent in host imports (what
    /// [`Limits::guest_time_per_call`](super::Limits) bounds); for
    /// measuring budgets.
    pub fn last_call_guest_time(&self) -> Duration {
        self.last_guest_time
    }

    fn state_mut(&mut self) -> &mut StoreData {
        match &mut self.slot {
            Slot::Live(live) => live.store.data_mut(),
            Slot::Parked(state) => state,
            Slot::Moving => unreachable!("a session is live or parked between calls"),
        }
    }

    /// Throw the store away (after a trap, an invalid answer, a swap, or a
    /// call when stores are not reused), keeping the imports.
    fn park(&mut self) {
        if matches!(self.slot, Slot::Live(_)) {
            let Slot::Live(live) = std::mem::replace(&mut self.slot, Slot::Moving) else {
                unreachable!()
            };
            let mut state = live.store.into_data();
            state.limiter = Limiter::new(&self.runtime.options.limits);
            state.clock = GuestClock::new(&self.runtime.options.limits);
            self.slot = Slot::Parked(Box::new(state));
        }
    }

    /// Pick up a swapped component before a call.
    fn refresh(&mut self) {
        if let Some(current) = &self.follow
            && current.generation() != self.generation
        {
            let (loaded, generation) = current.get();
            tracing::debug!(
                target: "session_switch::runtime",
                from = %self.loaded.info.version,
                to = %loaded.info.version,
                "session picks up the swapped policy"
            );
            self.loaded = loaded;
            self.generation = generation;
            self.park();
            self.state_mut().policy = self.loaded.info.version.clone();
        }
    }

    /// A failure of the policy itself: logged, store thrown away.
    fn policy_failure(&mut self, call: Call, what: String) -> Failure {
        let message = format!(
            "policy `{}` failed in `{}`: {what}. Fix or replace the policy component",
            self.state_mut().policy,
            call.name()
        );
        tracing::error!(target: "session_switch::runtime", call = call.name(), "{message}");
        self.park();
        Failure::policy(message)
    }
}

/// Describe a trap (or other wasmtime error) of a call, with what the
/// policy said (its panic message) and whether a send had happened.
fn describe_trap(limits: &super::Limits, error: &wasmtime::Error, state: &StoreData) -> String {
    let mut what = if state.limiter.hit {
        format!(
            "it went past its memory cap of {} MiB",
            state.limiter.cap() >> 20
        )
    } else if state.clock.hit {
        format!(
            "it ran for more than {} ms of its own time in one call (time in host imports \
             not counted): it loops or works far too long",
            state.clock.limit().as_millis()
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
    if !state.said.is_empty() {
        what.push_str("; it said: ");
        what.push_str(&state.said.join(" | "));
    }
    if let Some(sent) = &state.sent {
        what.push_str(&format!(
            "; NOTE: the room had already accepted the message and it was recorded \
                 (messages.id {}) before the policy failed",
            sent.message_id
        ));
    }
    what
}

impl PolicyInstance {
    /// Make a store and a configured instance if none is live.
    fn ensure_live(&mut self) -> Result<(), Failure> {
        if matches!(self.slot, Slot::Live(_)) {
            return Ok(());
        }
        let Slot::Parked(state) = std::mem::replace(&mut self.slot, Slot::Moving) else {
            unreachable!("a session is live or parked between calls")
        };
        let mut store = Store::new(&self.runtime.engine, *state);
        store.limiter(|state| &mut state.limiter);
        store.epoch_deadline_callback(|mut ctx| Ok(ctx.data_mut().clock.on_deadline()));
        store.data_mut().begin(Call::Configure, None);
        store
            .set_fuel(self.runtime.options.limits.fuel_per_call)
            .expect("fuel is enabled on the engine");
        store.set_epoch_deadline(1);
        let instance = match self.loaded.pre.instantiate(&mut store) {
            Ok(instance) => instance,
            Err(e) => {
                let what = format!(
                    "cannot instantiate it: {}",
                    describe_trap(&self.runtime.options.limits, &e, store.data())
                );
                self.slot = Slot::Parked(Box::new(store.into_data()));
                return Err(self.policy_failure(Call::Configure, what));
            }
        };
        self.slot = Slot::Live(Box::new(Live {
            store,
            policy: instance,
        }));
        if let Some(settings) = self.settings.clone() {
            let answer = self.raw(
                Call::Configure,
                None,
                |guest, store| guest.call_configure(store, &settings),
                |_, _| Ok(()),
            )?;
            if let Err(refused) = answer.0 {
                self.park();
                return Err(refused.into());
            }
        }
        Ok(())
    }

    /// Run one export with fresh per-call state and a full fuel budget.
    /// A trap parks the session (the store is never used again) and
    /// becomes a `policy` failure.
    ///
    /// `check` looks at an answer before the call's read snapshot closes
    /// (so it sees the state the policy saw); `Err` holds the sentence of a
    /// `policy` failure.
    fn raw<R>(
        &mut self,
        call: Call,
        send_args: Option<SendArgs>,
        f: impl FnOnce(&Guest, &mut Store<StoreData>) -> wasmtime::Result<R>,
        check: impl FnOnce(&R, &mut StoreData) -> Result<(), String>,
    ) -> Result<(R, Outcome), Failure> {
        let limits = self.runtime.options.limits;
        let fuel = limits.fuel_per_call;
        let Slot::Live(live) = &mut self.slot else {
            unreachable!("raw() runs on a live store")
        };
        live.store.data_mut().begin(call, send_args);
        live.store
            .set_fuel(fuel)
            .expect("fuel is enabled on the engine");
        // The guest clock is looked at every tick (GuestClock::on_deadline).
        live.store.set_epoch_deadline(1);
        // One read snapshot for the whole call: the calls that read only.
        let snapshot = matches!(call, Call::Resolve | Call::Context | Call::Active);
        if snapshot {
            live.store.data_mut().imports.begin_read();
        }
        let result = f(
            live.policy.agentsmeeting_session_switch_policy(),
            &mut live.store,
        );
        let checked = match &result {
            Ok(answer) => check(answer, live.store.data_mut()),
            Err(_) => Ok(()),
        };
        if snapshot {
            live.store.data_mut().imports.end_read();
        }
        self.last_fuel = fuel - live.store.get_fuel().unwrap_or(0);
        self.last_guest_time = live.store.data().clock.guest_time();
        let state = live.store.data_mut();
        let outcome = Outcome {
            rows: std::mem::take(&mut state.rows),
            history: state.history.take(),
            sent: state.sent.take(),
            deleted: std::mem::take(&mut state.deleted),
        };
        match result {
            Err(error) => {
                // Put `sent` back for the message: a send may have happened.
                state.sent = outcome.sent;
                let what = describe_trap(&limits, &error, live.store.data());
                Err(self.policy_failure(call, what))
            }
            Ok(answer) => {
                if let Some(violation) = state.violation.take() {
                    let mut what = format!("it {violation}");
                    if let Some(sent) = &outcome.sent {
                        what.push_str(&format!(
                            "; the message was delivered and recorded (messages.id {})",
                            sent.message_id
                        ));
                    }
                    return Err(self.policy_failure(call, what));
                }
                if let Err(why) = checked {
                    return Err(self.policy_failure(call, why));
                }
                Ok((answer, outcome))
            }
        }
    }

    /// Refresh, make sure an instance is live, run `f`, and drop the store
    /// afterwards unless stores are reused.
    fn run<R>(
        &mut self,
        call: Call,
        send_args: Option<SendArgs>,
        f: impl FnOnce(&Guest, &mut Store<StoreData>) -> wasmtime::Result<R>,
    ) -> Result<(R, Outcome), Failure> {
        self.run_checked(call, send_args, f, |_, _| Ok(()))
    }

    /// [`PolicyInstance::run`] with a `check` of the answer inside the call's read
    /// snapshot (see [`PolicyInstance::raw`]).
    fn run_checked<R>(
        &mut self,
        call: Call,
        send_args: Option<SendArgs>,
        f: impl FnOnce(&Guest, &mut Store<StoreData>) -> wasmtime::Result<R>,
        check: impl FnOnce(&R, &mut StoreData) -> Result<(), String>,
    ) -> Result<(R, Outcome), Failure> {
        self.refresh();
        self.ensure_live()?;
        let result = self.raw(call, send_args, f, check);
        if !self.runtime.options.reuse_store {
            self.park();
        }
        result
    }

    /// Run an export whose answer is `result<T, failure>`; a failure the
    /// policy returns keeps its kind.
    fn run_wit<T>(
        &mut self,
        call: Call,
        send_args: Option<SendArgs>,
        f: impl FnOnce(&Guest, &mut Store<StoreData>) -> wasmtime::Result<Result<T, WitFailure>>,
    ) -> Result<(T, Outcome), Failure> {
        self.run_wit_checked(call, send_args, f, |_, _| Ok(()))
    }

    /// [`PolicyInstance::run_wit`] with a `check` of an `ok` answer inside the
    /// call's read snapshot (see [`PolicyInstance::raw`]).
    fn run_wit_checked<T>(
        &mut self,
        call: Call,
        send_args: Option<SendArgs>,
        f: impl FnOnce(&Guest, &mut Store<StoreData>) -> wasmtime::Result<Result<T, WitFailure>>,
        check: impl FnOnce(&T, &mut StoreData) -> Result<(), String>,
    ) -> Result<(T, Outcome), Failure> {
        let (answer, outcome) = self.run_checked(call, send_args, f, |answer, state| {
            answer.as_ref().map_or(Ok(()), |value| check(value, state))
        })?;
        match answer {
            Ok(value) => Ok((value, outcome)),
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

    /// Make the instance and run `configure` now (otherwise the first call
    /// does): reports invalid settings early. Errors: the policy's own
    /// refusal of the settings (e.g. `bad-input`), or a `policy` failure.
    pub fn configure(&mut self) -> Result<(), Failure> {
        self.refresh();
        self.ensure_live()
    }

    /// The policy's `version` (e.g. `session-switch-policy 0.1.0`).
    pub fn version(&mut self) -> Result<String, Failure> {
        Ok(self.run(Call::Version, None, |g, s| g.call_version(s))?.0)
    }

    /// The policy's built-in self-check; `Ok` holds its summary. A failing
    /// case is a `policy` failure naming the case.
    pub fn self_check(&mut self) -> Result<String, Failure> {
        match self
            .run(Call::SelfCheck, None, |g, s| g.call_self_check(s))?
            .0
        {
            Ok(summary) => Ok(summary),
            Err(case) => {
                Err(self.policy_failure(Call::SelfCheck, format!("self-check failed: {case}")))
            }
        }
    }

    /// Which session `agent`'s bot should load instead of `session_id`
    /// (DESIGN §3 "Redirect"), and why.
    ///
    /// The answer is checked: `redirected` exactly when the reason is
    /// `redirected`, a redirect names a session, anything else names
    /// `session_id`, and `policy-error` is the host's alone; and a redirect
    /// is honoured only when one of the agent's records names its target,
    /// read by the host in the call's own read snapshot
    /// ([`check_redirect`]). An answer that breaks this is a `policy`
    /// failure.
    pub fn resolve(&mut self, agent: &str, session_id: &str) -> Result<Decision, Failure> {
        let legacy = self.is_legacy(agent);
        let (decision, _) = self.run_wit_checked(
            Call::Resolve,
            None,
            |g, s| g.call_resolve(s, agent, session_id),
            |d, state| {
                check_decision(d, session_id)?;
                check_redirect(&mut |key| state.record(key), agent, legacy, d)
            },
        )?;
        Ok(decision)
    }

    /// [`PolicyInstance::resolve`], or on any failure the safe default: no
    /// redirect, reason `policy-error`, the failure in `detail` (and in the
    /// log). Never fails.
    pub fn resolve_or_fallback(&mut self, agent: &str, session_id: &str) -> Decision {
        self.resolve(agent, session_id)
            .unwrap_or_else(|failure| fallback_decision(session_id, &failure))
    }

    /// The history `agent`'s bot should get when it loads `session_id`:
    /// `resolve`, the chosen session's rows (the last `limit` when `Some`)
    /// read through the imports, and the policy's `[YOU] ` edits applied by
    /// the host to the full rows.
    ///
    /// Checked like [`PolicyInstance::resolve`] (the redirect against the record
    /// too), plus: the policy read the history
    /// of the session it decided on, for `agent` and `limit`, and its edits
    /// index those rows, each at most once. Otherwise a `policy` failure.
    pub fn context(
        &mut self,
        agent: &str,
        session_id: &str,
        limit: Option<u32>,
    ) -> Result<ContextAnswer, Failure> {
        let legacy = self.is_legacy(agent);
        let (result, outcome) = self.run_wit_checked(
            Call::Context,
            None,
            |g, s| g.call_context(s, agent, session_id, limit),
            |c, state| {
                check_decision(&c.decision, session_id)?;
                check_redirect(&mut |key| state.record(key), agent, legacy, &c.decision)
            },
        )?;
        let checked = {
            let asked = HistoryQuery {
                session_id: result.decision.session_id.clone(),
                agent: agent.to_owned(),
                limit,
            };
            match &outcome.history {
                None => Err("it answered without reading the history".to_owned()),
                Some(read) if *read != asked => Err(format!(
                    "it read the history of '{}' for '{}' (limit {:?}) but decided on '{}' \
                     for '{agent}' (limit {limit:?})",
                    read.session_id, read.agent, read.limit, asked.session_id
                )),
                Some(_) => Ok(()),
            }
        };
        if let Err(why) = checked {
            return Err(self.policy_failure(Call::Context, why));
        }
        let mut messages = outcome.rows;
        if let Err(why) = apply::apply_edits(&mut messages, &result.edits) {
            return Err(self.policy_failure(Call::Context, why));
        }
        Ok(ContextAnswer {
            decision: result.decision,
            messages,
        })
    }

    /// [`PolicyInstance::context`], or on a failure the safe default: no redirect
    /// (reason `policy-error`, the failure in `detail` and in the log) and
    /// the history of `session_id` read straight from the imports, with no
    /// `[YOU] ` edits (rows as stored). Errors only when that read fails too.
    pub fn context_or_fallback(
        &mut self,
        agent: &str,
        session_id: &str,
        limit: Option<u32>,
    ) -> Result<ContextAnswer, Failure> {
        match self.context(agent, session_id, limit) {
            Ok(answer) => Ok(answer),
            Err(failure) => {
                let decision = fallback_decision(session_id, &failure);
                let messages = self.imports_mut().history(session_id, agent, limit)?;
                Ok(ContextAnswer { decision, messages })
            }
        }
    }

    /// `rows` with `agent`'s own rows tagged `[YOU] ` and imitations of the
    /// tag removed (DESIGN §3 "Tagging"): the policy sees summaries (prefix
    /// of [`PolicyOptions::tag_prefix_chars`](super::PolicyOptions)
    /// characters) and answers edits, which the host applies. Edits out of
    /// range or twice on a row are a `policy` failure.
    pub fn tag(
        &mut self,
        agent: &str,
        mut rows: Vec<HistoryRow>,
    ) -> Result<Vec<HistoryRow>, Failure> {
        let summaries = apply::summaries(&rows, self.runtime.options.tag_prefix_chars);
        let (edits, _) = self.run_wit(Call::Tag, None, |g, s| g.call_tag(s, agent, &summaries))?;
        if let Err(why) = apply::apply_edits(&mut rows, &edits) {
            return Err(self.policy_failure(Call::Tag, why));
        }
        Ok(rows)
    }

    /// [`PolicyInstance::tag`], or on a failure `rows` unchanged (logged).
    pub fn tag_or_fallback(&mut self, agent: &str, rows: Vec<HistoryRow>) -> Vec<HistoryRow> {
        match self.tag(agent, rows.clone()) {
            Ok(tagged) => tagged,
            Err(failure) => {
                log_fallback(Call::Tag, &failure);
                rows
            }
        }
    }

    /// Send `text` to the room as `agent` from CLI session `cli_session_id`
    /// (DESIGN §3 "Send"): the policy normalises the body and plans the
    /// send, the imports performs it atomically. The host allows one send
    /// per call, with a plan that names this agent, this CLI session, the
    /// agent's record key and a history row of `[YOU] ` + the room's body.
    /// A `text` longer than [`max_text_bytes`] of the settings'
    /// `max_body_chars` is refused (`bad-input`) before the policy sees it.
    ///
    /// Errors keep their kind (`bad-input`, `unknown-agent`, `not-accepted`,
    /// `busy`, `unknown-outcome`, `store`, `transport`; exit status per
    /// DESIGN §8). A `policy` failure means the policy broke: the host never
    /// sends on its own, and the message says if the send had already
    /// happened before the failure.
    pub fn send(
        &mut self,
        agent: &str,
        cli_session_id: &str,
        text: &str,
    ) -> Result<Receipt, Failure> {
        let max_chars = self
            .settings
            .as_ref()
            .map_or(MAX_BODY_CHARS_LIMIT, |s| s.max_body_chars);
        if text.len() > max_text_bytes(max_chars) {
            return Err(Failure::bad_input(format!(
                "message is {} bytes long, far over the maximum of {max_chars} characters; \
                 nothing was sent",
                text.len()
            )));
        }
        let args = SendArgs {
            agent: agent.to_owned(),
            cli_session_id: cli_session_id.to_owned(),
        };
        let (receipt, outcome) = self.run_wit(Call::Send, Some(args), |g, s| {
            g.call_send(s, agent, cli_session_id, text)
        })?;
        let checked = match &outcome.sent {
            None => Err("it reported a send that the host never performed".to_owned()),
            Some(sent) if sent.message_id != receipt.message_id || sent.room != receipt.room => {
                Err(format!(
                    "it reported message {} in room {} but the host sent message {} to {}",
                    receipt.message_id, receipt.room, sent.message_id, sent.room
                ))
            }
            Some(_) => Ok(()),
        };
        if let Err(why) = checked {
            return Err(self.policy_failure(Call::Send, why));
        }
        Ok(receipt)
    }

    /// The record of each agent (or of `agent` only) that has one.
    pub fn active(&mut self, agent: Option<&str>) -> Result<Vec<RecordStatus>, Failure> {
        Ok(self
            .run_wit(Call::Active, None, |g, s| g.call_active(s, agent))?
            .0)
    }

    /// Delete the record of each agent (or of `agent` only) and the seed's
    /// key for the legacy agent; the keys deleted. The host lets the policy
    /// delete only our keys, and checks that every key it reports was
    /// really deleted in this call.
    pub fn clear(&mut self, agent: Option<&str>) -> Result<Vec<String>, Failure> {
        let (keys, outcome) = self.run_wit(Call::Clear, None, |g, s| g.call_clear(s, agent))?;
        if let Some(key) = keys.iter().find(|key| !outcome.deleted.contains(key)) {
            let why = format!("it reported key '{key}' as deleted, but did not delete it");
            return Err(self.policy_failure(Call::Clear, why));
        }
        Ok(keys)
    }

    /// Whether a room message from `sender` (occupant JID `room/nick`, full
    /// or bare JID, or nick) is the room's reflection of `agent`'s own.
    pub fn is_own_message(&mut self, agent: &str, sender: &str) -> Result<bool, Failure> {
        Ok(self
            .run_wit(Call::IsOwnMessage, None, |g, s| {
                g.call_is_own_message(s, agent, sender)
            })?
            .0)
    }

    /// [`PolicyInstance::is_own_message`], or `false` on a failure (logged): the
    /// bot may then answer its own echo once, rather than drop a message
    /// of someone else.
    pub fn is_own_message_or_fallback(&mut self, agent: &str, sender: &str) -> bool {
        self.is_own_message(agent, sender)
            .unwrap_or_else(|failure| {
                log_fallback(Call::IsOwnMessage, &failure);
                false
            })
    }
}

/// The checks of DESIGN §8 on a decision for `asked`.
fn check_decision(decision: &Decision, asked: &str) -> Result<(), String> {
    let says_redirected = decision.reason == Reason::Redirected;
    if decision.redirected != says_redirected {
        return Err(format!(
            "it answered redirected = {} with reason {:?}",
            decision.redirected, decision.reason
        ));
    }
    if decision.reason == Reason::PolicyError {
        return Err("it answered reason policy-error, which only the host gives".into());
    }
    if decision.reason == Reason::Superseded {
        return Err("it answered reason superseded, which only active gives".into());
    }
    if decision.redirected {
        if decision.session_id.is_empty() {
            return Err("it redirected to an empty session id".into());
        }
    } else if decision.session_id != asked {
        return Err(format!(
            "it did not redirect, yet named session '{}' instead of '{asked}'",
            decision.session_id
        ));
    }
    Ok(())
}

/// The host's own check of a redirect (SECURITY.md, "What a hostile policy
/// can still do"): a decision that redirects `agent` is honoured only when
/// one of the agent's records — `session_switch:active:<agent>`, and the
/// seed's `active_xmpp_sender_session` when `legacy` (the configured
/// `legacy-agent` only, DESIGN §8) — is a JSON object whose `session_id`
/// is the decision's target. A decision that does not redirect passes.
///
/// This does not repeat the policy's rules (TTL, skew, target session):
/// it only stops a policy from sending a bot to a session no record names.
/// `Err` holds the sentence of the `policy` failure, also when a record
/// cannot be read (nothing is then honoured). `read` gives a key's value
/// in the call's snapshot ([`StoreData::record`]: what the policy was
/// answered, so a redirect usually costs no extra read).
pub(crate) fn check_redirect(
    read: &mut dyn FnMut(&str) -> Result<Option<String>, Failure>,
    agent: &str,
    legacy: bool,
    decision: &Decision,
) -> Result<(), String> {
    if !decision.redirected {
        return Ok(());
    }
    let target = decision.session_id.as_str();
    let mut keys = vec![record_key(agent)];
    if legacy {
        keys.push(LEGACY_KEY.to_owned());
    }
    for key in &keys {
        let value = read(key).map_err(|failure| {
            format!(
                "it redirected '{agent}' to session '{target}', and the host could not read \
                 record '{key}' to check that: {}",
                failure.message
            )
        })?;
        let names_target = value
            .and_then(|v| serde_json::from_str::<serde_json::Value>(&v).ok())
            .is_some_and(|json| json.get("session_id").and_then(|s| s.as_str()) == Some(target));
        if names_target {
            return Ok(());
        }
    }
    Err(format!(
        "it redirected '{agent}' to session '{target}', which no record of the agent names \
         (read: {})",
        keys.join(", ")
    ))
}

fn log_fallback(call: Call, failure: &Failure) {
    tracing::warn!(
        target: "session_switch::runtime",
        call = call.name(),
        kind = failure.kind.as_str(),
        "falling back to the safe default: {}",
        failure.message
    );
}

/// The safe default decision: load the session asked about.
fn fallback_decision(asked: &str, failure: &Failure) -> Decision {
    log_fallback(Call::Resolve, failure);
    Decision {
        session_id: asked.to_owned(),
        redirected: false,
        reason: Reason::PolicyError,
        detail: format!("no redirect: {}", failure.message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(session_id: &str, redirected: bool, reason: Reason) -> Decision {
        Decision {
            session_id: session_id.into(),
            redirected,
            reason,
            detail: String::new(),
        }
    }

    #[test]
    fn decisions_that_break_the_contract_are_refused() {
        let asked = "xmpp-mohe-v2";
        let cli = "20260619_190821_7c0afe";
        assert!(check_decision(&decision(cli, true, Reason::Redirected), asked).is_ok());
        assert!(check_decision(&decision(asked, false, Reason::Expired), asked).is_ok());
        assert!(check_decision(&decision(asked, false, Reason::NotAgentSession), asked).is_ok());

        let bad = [
            (
                decision(cli, true, Reason::Expired),
                "redirected = true with reason Reason::Expired",
            ),
            (
                decision(cli, false, Reason::Redirected),
                "redirected = false",
            ),
            (decision("", true, Reason::Redirected), "empty session id"),
            (
                decision(cli, false, Reason::NoRecord),
                "named session '20260619_190821_7c0afe'",
            ),
            (
                decision(asked, false, Reason::PolicyError),
                "only the host gives",
            ),
            (
                decision(asked, false, Reason::Superseded),
                "only active gives",
            ),
        ];
        for (d, why) in bad {
            let err = check_decision(&d, asked).unwrap_err();
            assert!(err.contains(why), "{err} / {why}");
        }
    }

    /// `state_meta` in memory: enough for [`check_redirect`], which reads
    /// records only (a unit test of the logic above the store; the real
    /// store is exercised in `tests/sandbox.rs`).
    struct Meta(Vec<(&'static str, &'static str)>, Vec<String>);

    impl HostImports for Meta {
        fn meta_get(&mut self, key: &str) -> Result<Option<String>, Failure> {
            self.1.push(key.to_owned());
            if key == "session_switch:active:broken" {
                return Err(Failure::store("state.db is locked"));
            }
            Ok(self
                .0
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| (*v).to_owned()))
        }
        fn meta_delete(&mut self, _: &str) -> Result<bool, Failure> {
            unreachable!("the check only reads")
        }
        fn session_exists(&mut self, _: &str) -> Result<bool, Failure> {
            unreachable!("the check only reads records")
        }
        fn history(
            &mut self,
            _: &str,
            _: &str,
            _: Option<u32>,
        ) -> Result<Vec<HistoryRow>, Failure> {
            unreachable!("the check only reads records")
        }
        fn now(&mut self) -> f64 {
            0.0
        }
        fn send(
            &mut self,
            _: &super::super::bindings::SendPlan,
        ) -> Result<super::super::bindings::Sent, Failure> {
            unreachable!("the check only reads")
        }
    }

    #[test]
    fn a_redirect_is_honoured_only_when_a_record_of_the_agent_names_its_target() {
        let cli = "20260619_190821_7c0afe";
        let other = "20260619_193000_a1b2c3";
        let to = |target: &str| decision(target, true, Reason::Redirected);
        let own = r#"{"session_id": "20260619_190821_7c0afe", "timestamp": 1.0, "source": "cli", "agent": "mohe"}"#;
        let seed = r#"{"session_id": "20260619_193000_a1b2c3", "timestamp": 1.0, "source": "cli"}"#;
        let mut meta = Meta(
            vec![
                ("session_switch:active:mohe", own),
                ("active_xmpp_sender_session", seed),
                ("session_switch:active:zhiwei", "not json"),
                ("session_switch:active:xiaoguo", r#"{"session_id": 7}"#),
            ],
            vec![],
        );
        assert_eq!(
            check_redirect(&mut |k| meta.meta_get(k), "mohe", false, &to(cli)),
            Ok(())
        );
        assert_eq!(
            meta.1,
            ["session_switch:active:mohe"],
            "one read when the own record names it"
        );
        // The seed's key counts for the legacy agent only.
        assert_eq!(
            check_redirect(&mut |k| meta.meta_get(k), "mohe", true, &to(other)),
            Ok(())
        );
        assert_eq!(
            check_redirect(&mut |k| meta.meta_get(k), "mohe", false, &to(other)).unwrap_err(),
            "it redirected 'mohe' to session '20260619_193000_a1b2c3', which no record of \
             the agent names (read: session_switch:active:mohe)"
        );
        // Another agent's record never vouches for this agent's redirect.
        let e = check_redirect(&mut |k| meta.meta_get(k), "xiaoguo", false, &to(cli)).unwrap_err();
        assert!(
            e.contains("which no record of the agent names (read: session_switch:active:xiaoguo)"),
            "{e}"
        );
        // Not JSON, no record at all.
        for agent in ["zhiwei", "nobody"] {
            let e = check_redirect(&mut |k| meta.meta_get(k), agent, false, &to(cli)).unwrap_err();
            assert!(
                e.ends_with(&format!("names (read: session_switch:active:{agent})")),
                "{e}"
            );
        }
        // A record that cannot be read honours nothing.
        let e = check_redirect(&mut |k| meta.meta_get(k), "broken", false, &to(cli)).unwrap_err();
        assert_eq!(
            e,
            "it redirected 'broken' to session '20260619_190821_7c0afe', and the host could \
             not read record 'session_switch:active:broken' to check that: state.db is locked"
        );
        // No redirect, no read.
        meta.1.clear();
        let stay = decision("xmpp-mohe-v2", false, Reason::NoRecord);
        assert_eq!(
            check_redirect(&mut |k| meta.meta_get(k), "mohe", true, &stay),
            Ok(())
        );
        assert!(meta.1.is_empty());
    }

    #[test]
    fn the_fallback_decision_loads_the_session_asked_about() {
        let failure = Failure::policy("policy `x` failed in `resolve`: boom");
        let d = fallback_decision("xmpp-mohe-v2", &failure);
        assert_eq!(d.session_id, "xmpp-mohe-v2");
        assert!(!d.redirected);
        assert_eq!(d.reason, Reason::PolicyError);
        assert_eq!(
            d.detail,
            "no redirect: policy `x` failed in `resolve`: boom"
        );
    }
}
