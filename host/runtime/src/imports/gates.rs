//! The gates of the imports and their work: what each import may do in
//! the running call (a step outside is refused and noted as the call's
//! violation), then what it does.

use super::{Call, HistoryQuery, StoreData};
use crate::Failure;
use crate::bindings::{LogLevel, RowSummaries, SendPlan, Sent, WitFailure};
use crate::row_edits;
use session_switch_contract::keys::{GUARD_KEY_PREFIX, is_our_meta_key, record_key};

/// How many error/warn lines of the guest one call keeps for its failure
/// message, and how long each may be (in characters).
pub(super) const KEPT_LINES: usize = 8;
pub(super) const KEPT_LINE_CHARS: usize = 2000;

/// The checks the gates share.
impl StoreData {
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
        if plan.history_content.strip_prefix(row_edits::YOU_TAG) != Some(plan.room_body.as_str()) {
            return Err("planned a history row that is not `[YOU] ` + the room's body".into());
        }
        Ok(())
    }
}

/// The imports' work, timed by the `host::Host` methods of `imports.rs`.
impl StoreData {
    pub(super) fn meta_delete_untimed(&mut self, key: String) -> Result<bool, WitFailure> {
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
    pub(super) fn meta_set_untimed(
        &mut self,
        key: String,
        value: String,
    ) -> Result<(), WitFailure> {
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

    pub(super) fn history_untimed(
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
        let summaries = row_edits::summaries(&rows, prefix_chars);
        self.call.rows = rows;
        self.call.history = Some(HistoryQuery {
            session_id,
            agent,
            limit,
        });
        Ok(summaries)
    }

    pub(super) fn send_untimed(&mut self, plan: SendPlan) -> Result<Sent, WitFailure> {
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

    pub(super) fn log_untimed(&mut self, level: LogLevel, message: String) {
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
