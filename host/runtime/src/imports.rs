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

use super::apply;
use super::bindings::agentsmeeting::session_switch::{host, types};
use super::bindings::{LogLevel, RowSummaries, SendPlan, Sent, WitFailure};
use super::host_imports::HostImports;
use super::limits::{GuestClock, Limiter, Limits};
use super::memo::Reads;
use crate::Failure;
use crate::HistoryRow;
use session_switch_contract::keys::{GUARD_KEY_PREFIX, is_our_meta_key, record_key};
use std::time::Instant;

/// Which export of the policy is running (what its imports may do).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Call {
    #[default]
    Configure,
    Version,
    SelfCheck,
    Resolve,
    Tag,
    Context,
    Send,
    Active,
    Clear,
    IsOwnMessage,
    Admit,
}

impl Call {
    /// Whether the export only reads (`resolve`, `context`, `active`): the
    /// imports serve it from one read snapshot ([`HostImports::begin_read`]).
    pub(crate) fn only_reads(self) -> bool {
        matches!(self, Self::Resolve | Self::Context | Self::Active)
    }

    /// Whether the call's reads are kept ([`CallState::reads`]).
    fn keeps_reads(self) -> bool {
        matches!(self, Self::Resolve | Self::Context)
    }

    /// The export's WIT name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Configure => "configure",
            Self::Version => "version",
            Self::SelfCheck => "self-check",
            Self::Resolve => "resolve",
            Self::Tag => "tag",
            Self::Context => "context",
            Self::Send => "send",
            Self::Active => "active",
            Self::Clear => "clear",
            Self::IsOwnMessage => "is-own-message",
            Self::Admit => "admit",
        }
    }
}

/// The arguments of the last `host.history` call of a `context`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HistoryQuery {
    pub(crate) session_id: String,
    pub(crate) agent: String,
    pub(crate) limit: Option<u32>,
}

/// The agent and CLI session of the running `policy.send`: the plan must
/// name the same ones.
#[derive(Clone, Debug)]
pub(crate) struct SendArgs {
    pub(crate) agent: String,
    pub(crate) cli_session_id: String,
}

/// How many error/warn lines of the guest one call keeps for its failure
/// message, and how long each may be (in characters).
const KEPT_LINES: usize = 8;
const KEPT_LINE_CHARS: usize = 2000;

/// What one call may do and what it did: the export that runs, the
/// arguments its `host.send` must match, and what its imports read, sent,
/// deleted, refused and logged. Replaced whole when a call begins
/// ([`StoreData::begin`]) and taken whole when it ends
/// ([`StoreData::finish`]), so nothing of one call reaches the next.
#[derive(Debug, Default)]
pub(crate) struct CallState {
    /// Which export runs (what its imports may do).
    pub(crate) export: Call,
    pub(crate) send_args: Option<SendArgs>,
    /// The full rows `host.history` read, for the host to apply edits to.
    pub(crate) rows: Vec<HistoryRow>,
    pub(crate) history: Option<HistoryQuery>,
    pub(crate) sent: Option<Sent>,
    /// The `state_meta` keys `host.meta-delete` removed.
    pub(crate) deleted: Vec<String>,
    /// The first thing the policy did that it may not do in this call.
    pub(crate) violation: Option<String>,
    /// Error and warn lines the guest logged in this call (its panic hook
    /// writes the panic message here).
    pub(crate) said: Vec<String>,
    /// What `meta-get`, `session-exists` and `now` answered a `resolve` or
    /// `context`: the host's own check of a redirect reuses the values
    /// (same read snapshot) instead of reading `state_meta` again, and the
    /// memo of `resolve` keeps them with its decision.
    pub(crate) reads: Reads,
    /// The one key `admit` may set: the receiving agent's guard key in the
    /// configured room (`None` in every other call).
    pub(crate) admit_key: Option<String>,
    /// `admit` has set its loop-guard state.
    pub(crate) guard_written: bool,
}

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

    /// Note a step outside the call's rights and build the failure the
    /// policy gets for it.
    fn refuse(&mut self, what: String) -> WitFailure {
        let message = format!("the policy {what}, which the host refuses");
        if self.call.violation.is_none() {
            self.call.violation = Some(what);
        }
        Failure::policy(message).into()
    }

    /// Check a send plan against the call (WIT `send-plan`); `Err` says
    /// which field is wrong.
    fn check_plan(&self, plan: &SendPlan) -> Result<(), String> {
        let Some(args) = &self.call.send_args else {
            return Err("called host.send outside policy.send".into());
        };
        if plan.agent != args.agent {
            return Err(format!(
                "planned a send for agent '{}' while asked to send for '{}'",
                plan.agent, args.agent
            ));
        }
        if plan.cli_session_id != args.cli_session_id {
            return Err(format!(
                "planned a send from CLI session '{}' while asked for '{}'",
                plan.cli_session_id, args.cli_session_id
            ));
        }
        let key = record_key(&args.agent);
        if plan.record_key != key {
            return Err(format!(
                "planned to write record key '{}' instead of '{key}'",
                plan.record_key
            ));
        }
        if plan.history_content.strip_prefix(apply::YOU_TAG) != Some(plan.room_body.as_str()) {
            return Err("planned a history row that is not `[YOU] ` + the room's body".into());
        }
        Ok(())
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

/// The imports' work, timed by the `host::Host` methods above.
impl StoreData {
    fn meta_delete_untimed(&mut self, key: String) -> Result<bool, WitFailure> {
        if self.call.export != Call::Clear {
            return Err(self.refuse(format!(
                "called host.meta-delete during {}; only policy.clear may delete",
                self.call.export.name()
            )));
        }
        if !is_our_meta_key(&key) {
            return Err(Failure::bad_input(format!(
                "state_meta key '{key}' is not ours: only `session_switch:` keys and \
                 `active_xmpp_sender_session` may be deleted"
            ))
            .into());
        }
        let deleted = self.imports.meta_delete(&key)?;
        if deleted {
            self.call.deleted.push(key);
        }
        Ok(deleted)
    }

    /// `meta-set` only inside `policy.admit`, once, on the receiving
    /// agent's loop-guard key in the configured room
    /// (`session_switch:loop:<agent>:<room>`): the guard's state is the one
    /// thing the policy writes itself, and one agent's bot must not move
    /// another agent's counter.
    fn meta_set_untimed(&mut self, key: String, value: String) -> Result<(), WitFailure> {
        if self.call.export != Call::Admit {
            return Err(self.refuse(format!(
                "called host.meta-set during {}; only policy.admit may set state",
                self.call.export.name()
            )));
        }
        if self.call.guard_written {
            return Err(self.refuse(format!(
                "set state_meta key '{key}' a second time; admit may set its key once"
            )));
        }
        if self.call.admit_key.as_deref() != Some(key.as_str()) {
            let allowed = self.call.admit_key.as_deref().unwrap_or(GUARD_KEY_PREFIX);
            return Err(self.refuse(format!(
                "set state_meta key '{key}'; admit may set only '{allowed}'"
            )));
        }
        self.call.guard_written = true;
        self.imports.meta_set(&key, &value).map_err(Into::into)
    }

    fn history_untimed(
        &mut self,
        session_id: String,
        agent: String,
        limit: Option<u32>,
        prefix_chars: u32,
    ) -> Result<RowSummaries, WitFailure> {
        if self.call.export != Call::Context {
            return Err(self.refuse(format!(
                "called host.history during {}; only policy.context reads history",
                self.call.export.name()
            )));
        }
        let rows = self.imports.history(&session_id, &agent, limit)?;
        let summaries = apply::summaries(&rows, prefix_chars);
        self.call.rows = rows;
        self.call.history = Some(HistoryQuery {
            session_id,
            agent,
            limit,
        });
        Ok(summaries)
    }

    fn send_untimed(&mut self, plan: SendPlan) -> Result<Sent, WitFailure> {
        if self.call.export != Call::Send {
            return Err(self.refuse(format!(
                "called host.send during {}; only policy.send may send",
                self.call.export.name()
            )));
        }
        if self.call.sent.is_some() {
            return Err(self.refuse("called host.send twice in one policy.send".into()));
        }
        if let Err(why) = self.check_plan(&plan) {
            return Err(self.refuse(why));
        }
        let sent = self.imports.send(&plan)?;
        self.call.sent = Some(sent.clone());
        Ok(sent)
    }

    fn log_untimed(&mut self, level: LogLevel, message: String) {
        let call = self.call.export.name();
        let policy = &self.policy_version;
        match level {
            LogLevel::Debug => {
                tracing::debug!(target: "session_switch::policy", policy, call, "{message}")
            }
            LogLevel::Info => {
                tracing::info!(target: "session_switch::policy", policy, call, "{message}")
            }
            LogLevel::Warn => {
                tracing::warn!(target: "session_switch::policy", policy, call, "{message}")
            }
            LogLevel::Error => {
                tracing::error!(target: "session_switch::policy", policy, call, "{message}")
            }
        }
        if matches!(level, LogLevel::Warn | LogLevel::Error) && self.call.said.len() < KEPT_LINES {
            // One line for the failure message: the panic hook's text spans
            // two lines ("panicked at FILE:LINE:COL:\nMESSAGE").
            let line: String = message
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .chars()
                .take(KEPT_LINE_CHARS)
                .collect();
            self.call.said.push(line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::agentsmeeting::session_switch::host::Host as _;
    use crate::test_host::{self, NOW, Seen, TestHost};
    use std::sync::{Arc, Mutex};

    /// A store's data over the test host, and what reaches its imports.
    fn state() -> (StoreData, Arc<Mutex<Seen>>) {
        let host = TestHost::new(vec![test_host::row(
            5,
            "user",
            "mohe: 大家好，今天的会议改到下午三点。",
        )]);
        let seen = host.seen();
        let state = StoreData::new(Box::new(host), &Limits::default(), "test".into());
        (state, seen)
    }

    fn plan() -> SendPlan {
        SendPlan {
            agent: "mohe".into(),
            from_jid: "mohe@example.org".into(),
            room_body: "hello".into(),
            history_session_id: "xmpp-mohe-v2".into(),
            history_content: "[YOU] hello".into(),
            cli_session_id: "20260619_190821_7c0afe".into(),
            record_key: "session_switch:active:mohe".into(),
            record_value: "{}".into(),
            timestamp: NOW,
        }
    }

    fn send_args() -> Option<SendArgs> {
        Some(SendArgs {
            agent: "mohe".into(),
            cli_session_id: "20260619_190821_7c0afe".into(),
        })
    }

    fn policy_message(result: Result<impl std::fmt::Debug, WitFailure>) -> String {
        let failure: Failure = result.unwrap_err().into();
        assert_eq!(
            failure.kind,
            crate::FailureKind::Policy,
            "{}",
            failure.message
        );
        failure.message
    }

    #[test]
    fn send_is_refused_outside_policy_send_and_nothing_is_sent() {
        let (mut state, seen) = state();
        state.begin(Call::Resolve, None);
        let message = policy_message(state.send(plan()));
        assert!(
            message.contains("called host.send during resolve"),
            "{message}"
        );
        assert!(state.call.violation.is_some());
        assert!(seen.lock().unwrap().sends.is_empty());
    }

    #[test]
    fn one_send_per_call_with_a_plan_that_matches_the_call() {
        let (mut state, seen) = state();
        state.begin(Call::Send, send_args());
        assert_eq!(state.send(plan()).unwrap().message_id, 23);
        assert_eq!(state.call.sent.as_ref().unwrap().message_id, 23);
        let message = policy_message(state.send(plan()));
        assert!(message.contains("twice"), "{message}");
        assert_eq!(seen.lock().unwrap().sends.len(), 1);

        type Spoil = fn(&mut SendPlan);
        let wrong: [(Spoil, &str); 4] = [
            (|p| p.agent = "zhiwei".into(), "for agent 'zhiwei'"),
            (
                |p| p.cli_session_id = "other".into(),
                "from CLI session 'other'",
            ),
            (|p| p.record_key = "fts_x".into(), "record key 'fts_x'"),
            (
                |p| p.history_content = "[YOU] hello!".into(),
                "not `[YOU] ` + the room's body",
            ),
        ];
        for (spoil, expected) in wrong {
            state.begin(Call::Send, send_args());
            let mut bad = plan();
            spoil(&mut bad);
            let message = policy_message(state.send(bad));
            assert!(message.contains(expected), "{message}");
            assert!(state.call.violation.is_some());
        }
        assert_eq!(seen.lock().unwrap().sends.len(), 1, "no bad plan was sent");
    }

    #[test]
    fn meta_delete_only_in_clear_and_only_our_keys() {
        let (mut state, seen) = state();
        state.begin(Call::Resolve, None);
        let message = policy_message(state.meta_delete("session_switch:active:mohe".into()));
        assert!(
            message.contains("only policy.clear may delete"),
            "{message}"
        );

        state.begin(Call::Clear, None);
        let refused: Failure = state
            .meta_delete("fts_storage_version".into())
            .unwrap_err()
            .into();
        assert_eq!(refused.kind, crate::FailureKind::BadInput);
        assert!(refused.message.contains("not ours"), "{}", refused.message);
        assert!(
            state.call.violation.is_none(),
            "a refused key is the policy's to handle"
        );

        assert!(
            state
                .meta_delete("session_switch:active:mohe".into())
                .unwrap()
        );
        assert!(
            state
                .meta_delete("active_xmpp_sender_session".into())
                .unwrap()
        );
        assert_eq!(
            seen.lock().unwrap().deletes,
            ["session_switch:active:mohe", "active_xmpp_sender_session"]
        );
        assert_eq!(state.call.deleted, seen.lock().unwrap().deletes);
    }

    #[test]
    fn history_only_in_context_keeps_the_rows_and_gives_summaries() {
        let (mut state, seen) = state();
        state.begin(Call::Tag, None);
        let message = policy_message(state.history("xmpp-mohe-v2".into(), "mohe".into(), None, 8));
        assert!(
            message.contains("only policy.context reads history"),
            "{message}"
        );
        assert_eq!(seen.lock().unwrap().histories, 0);

        state.begin(Call::Context, None);
        let summaries = state
            .history("xmpp-mohe-v2".into(), "mohe".into(), Some(10), 6)
            .unwrap();
        assert_eq!(summaries.rows.len(), 1);
        assert_eq!(summaries.prefixes, "mohe: ");
        assert_eq!(
            state.call.rows[0].content,
            "mohe: 大家好，今天的会议改到下午三点。"
        );
        assert_eq!(
            state.call.history,
            Some(HistoryQuery {
                session_id: "xmpp-mohe-v2".into(),
                agent: "mohe".into(),
                limit: Some(10),
            })
        );
        // The next call starts clean.
        state.begin(Call::Resolve, None);
        assert!(state.call.rows.is_empty() && state.call.history.is_none());
    }

    #[test]
    fn error_lines_of_the_guest_are_kept_on_one_line_and_bounded() {
        let (mut state, _) = state();
        state.begin(Call::Resolve, None);
        state.log(LogLevel::Info, "not kept".into());
        state.log(
            LogLevel::Error,
            "session-switch policy panicked at a.rs:1:2:\nboom".into(),
        );
        assert_eq!(
            state.call.said,
            ["session-switch policy panicked at a.rs:1:2: boom"]
        );
        for _ in 0..20 {
            state.log(LogLevel::Warn, "x".repeat(5000));
        }
        assert_eq!(state.call.said.len(), KEPT_LINES);
        assert!(
            state
                .call
                .said
                .iter()
                .all(|l| l.chars().count() <= KEPT_LINE_CHARS)
        );
    }
}
