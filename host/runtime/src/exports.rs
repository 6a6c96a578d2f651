//! Every export of the policy as a method of [`PolicyInstance`]: what the host
//! checks before the call, one call through the instance's call path
//! ([`PolicyInstance::call`]), the host's checks of the answer
//! (`answer_checks.rs`), and the `*_or_fallback` forms that answer a safe
//! default instead of a failure, so a gateway never stops answering. The `tag`
//! export and its forms are in `tag.rs`, the safe defaults in `fallback.rs`.

mod fallback;
mod tag;

use super::answer_checks::{self, check_cleared, check_decided, check_history_read, check_receipt};
use super::bindings::{Admission, Decision, Receipt, RecordStatus, RoomMessage};
use super::call::no_check;
use super::imports::{Call, HistoryQuery, SendArgs};
use super::instance::PolicyInstance;
use super::limits::max_text_bytes;
use super::row_edits;
use crate::{Failure, FailureKind, HistoryRow, HostImports};
use fallback::{fallback_decision, or_fallback};
use session_switch_contract::keys::guard_key;

/// How many times [`PolicyInstance::admit`] runs when its commit finds the
/// database busy (each attempt's `BEGIN` already waits up to the store's
/// write deadline; a busy `COMMIT` means readers held a DELETE-mode file
/// past the brief busy timeout).
pub const ADMIT_ATTEMPTS: u32 = 3;

/// What [`PolicyInstance::admit_all_then`] runs after the policy's call on
/// each message: its index, its admission and the imports, inside the
/// write transaction.
pub type ThenEach<'a> =
    dyn FnMut(usize, &Admission, &mut dyn HostImports) -> Result<(), Failure> + 'a;

/// What [`PolicyInstance::context`] answers: the decision and the chosen
/// session's history, as Hermes's loader returns it (`role`, `content`,
/// `tool_calls`, `tool_call_id`, `tool_name` of each row, in id order), with
/// the policy's `[YOU] ` edits applied.
#[derive(Clone, Debug, PartialEq)]
pub struct ContextAnswer {
    pub decision: Decision,
    pub messages: Vec<HistoryRow>,
}

impl PolicyInstance {
    /// Make the instance and run `configure` now (otherwise the first call
    /// does): reports invalid settings early. Errors: the policy's own
    /// refusal of the settings (e.g. `bad-input`), or a `policy` failure.
    pub fn configure(&mut self) -> Result<(), Failure> {
        self.ready()
    }

    /// The policy's `version` (e.g. `session-switch-policy 0.1.0`).
    pub fn version(&mut self) -> Result<String, Failure> {
        Ok(self
            .call(Call::Version, None, |g, s| g.call_version(s), no_check)?
            .0)
    }

    /// The policy's built-in self-check; `Ok` holds its summary. A failing
    /// case is a `policy` failure naming the case.
    pub fn self_check(&mut self) -> Result<String, Failure> {
        let (verdict, _) =
            self.call(Call::SelfCheck, None, |g, s| g.call_self_check(s), no_check)?;
        answer_checks::self_check(verdict).map_err(|why| self.fail(Call::SelfCheck, &why))
    }

    /// Which session `agent`'s bot should load instead of `session_id`
    /// (docs/src/design/rules.md#redirect), and why.
    ///
    /// The answer is checked: `redirected` exactly when the reason is
    /// `redirected`, a redirect names a session, anything else names
    /// `session_id`, and `policy-error` is the host's alone; and a redirect
    /// is honoured only when one of the agent's records names its target,
    /// read by the host in the call's own read snapshot
    /// ([`answer_checks::check_redirect`]). An answer that breaks this is a
    /// `policy` failure.
    ///
    /// A decision that still holds is served from the instance's memo
    /// without running the policy (docs/src/design/where-the-time-goes.md, `memo.rs`): same agent and
    /// session, the clock inside the decision's `valid_until` window, and
    /// `state.db` unchanged or every read of the call answering the same.
    pub fn resolve(&mut self, agent: &str, session_id: &str) -> Result<Decision, Failure> {
        if let Some(decision) = self.memoised(agent, session_id)? {
            return Ok(decision);
        }
        let legacy = self.is_legacy(agent);
        let memo = self.memo_enabled();
        let mut version = None;
        let (decision, done) = self.call_wit(
            Call::Resolve,
            None,
            |g, s| g.call_resolve(s, agent, session_id),
            |d, data| {
                check_decided(d, session_id, agent, legacy, data)?;
                if memo {
                    // Still inside the call's read snapshot. Unreadable: the
                    // decision stands, and the memo checks it by its reads.
                    version = data.imports.data_version().ok().flatten();
                }
                Ok(())
            },
        )?;
        if memo {
            self.memo
                .put(agent, session_id, &decision, done.reads, version);
        }
        Ok(decision)
    }

    /// [`PolicyInstance::resolve`], or on any failure the safe default: no
    /// redirect, reason `policy-error`, the failure in `detail` (and in the
    /// log). Never fails.
    pub fn resolve_or_fallback(&mut self, agent: &str, session_id: &str) -> Decision {
        let answer = self.resolve(agent, session_id);
        or_fallback(Call::Resolve, answer, |failure| {
            fallback_decision(session_id, failure)
        })
    }

    /// The history `agent`'s bot should get when it loads `session_id`:
    /// `resolve`, the chosen session's rows (the last `limit` when `Some`)
    /// read through the imports, and the policy's `[YOU] ` edits applied by
    /// the host to the full rows.
    ///
    /// Checked like [`PolicyInstance::resolve`] (the redirect against the
    /// record too), plus: the policy read the history of the session it
    /// decided on, for `agent` and `limit`, and its edits index those rows,
    /// each at most once. Otherwise a `policy` failure.
    pub fn context(
        &mut self,
        agent: &str,
        session_id: &str,
        limit: Option<u32>,
    ) -> Result<ContextAnswer, Failure> {
        let legacy = self.is_legacy(agent);
        let (result, done) = self.call_wit(
            Call::Context,
            None,
            |g, s| g.call_context(s, agent, session_id, limit),
            |c, data| check_decided(&c.decision, session_id, agent, legacy, data),
        )?;
        let decided = HistoryQuery {
            session_id: result.decision.session_id.clone(),
            agent: agent.to_owned(),
            limit,
        };
        let mut messages = done.rows;
        check_history_read(done.history.as_ref(), &decided)
            .and_then(|()| row_edits::apply_edits(&mut messages, &result.edits))
            .map_err(|why| self.fail(Call::Context, &why))?;
        Ok(ContextAnswer {
            decision: result.decision,
            messages,
        })
    }

    /// [`PolicyInstance::context`], or on a failure the safe default: no
    /// redirect (reason `policy-error`, the failure in `detail` and in the
    /// log) and the history of `session_id` read straight from the imports,
    /// with no `[YOU] ` edits (rows as stored). Errors only when that read
    /// fails too.
    pub fn context_or_fallback(
        &mut self,
        agent: &str,
        session_id: &str,
        limit: Option<u32>,
    ) -> Result<ContextAnswer, Failure> {
        let answer = self.context(agent, session_id, limit).map(Ok);
        or_fallback(Call::Context, answer, |failure| {
            let decision = fallback_decision(session_id, failure);
            let messages = self.imports_mut().history(session_id, agent, limit)?;
            Ok(ContextAnswer { decision, messages })
        })
    }

    /// Send `text` to the room as `agent` from CLI session `cli_session_id`
    /// (docs/src/design/rules.md#send): the policy normalises the body and plans the
    /// send, the imports perform it atomically. The host allows one send
    /// per call, with a plan that names this agent, this CLI session, the
    /// agent's record key and a history row of `[YOU] ` + the room's body.
    /// A `text` longer than [`max_text_bytes`] of the settings'
    /// `max_body_chars` is refused (`bad-input`) before the policy sees it.
    ///
    /// Errors keep their kind (`bad-input`, `unknown-agent`, `not-accepted`,
    /// `busy`, `unknown-outcome`, `store`, `transport`; exit status per
    /// docs/src/design/contracts.md). A `policy` failure means the policy broke: the host never
    /// sends on its own, and the message says if the send had already
    /// happened before the failure.
    pub fn send(
        &mut self,
        agent: &str,
        cli_session_id: &str,
        text: &str,
    ) -> Result<Receipt, Failure> {
        let max_chars = self.settings().max_body_chars;
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
        let (receipt, done) = self.call_wit(
            Call::Send,
            Some(args),
            |g, s| g.call_send(s, agent, cli_session_id, text),
            no_check,
        )?;
        check_receipt(&receipt, done.sent.as_ref()).map_err(|why| self.fail(Call::Send, &why))?;
        Ok(receipt)
    }

    /// The record of each agent (or of `agent` only) that has one.
    pub fn active(&mut self, agent: Option<&str>) -> Result<Vec<RecordStatus>, Failure> {
        Ok(self
            .call_wit(Call::Active, None, |g, s| g.call_active(s, agent), no_check)?
            .0)
    }

    /// Delete the record of each agent (or of `agent` only) and the legacy
    /// `xmpp_session_bridge.py`'s key for the legacy agent; the keys deleted.
    /// The host lets the policy delete only our keys, and checks that every
    /// key it reports was really deleted in this call.
    pub fn clear(&mut self, agent: Option<&str>) -> Result<Vec<String>, Failure> {
        let (keys, done) =
            self.call_wit(Call::Clear, None, |g, s| g.call_clear(s, agent), no_check)?;
        check_cleared(&keys, &done.deleted).map_err(|why| self.fail(Call::Clear, &why))?;
        Ok(keys)
    }

    /// Whether a room message from `sender` (occupant JID `room/nick`, full
    /// or bare JID, or nick) is the room's reflection of `agent`'s own.
    pub fn is_own_message(&mut self, agent: &str, sender: &str) -> Result<bool, Failure> {
        Ok(self
            .call_wit(
                Call::IsOwnMessage,
                None,
                |g, s| g.call_is_own_message(s, agent, sender),
                no_check,
            )?
            .0)
    }

    /// The loop guard (WIT `admit`, docs/src/design/loop-guard.md): whether `agent`'s bot
    /// should answer `message`, and why. Runs in one brief write
    /// transaction of the imports ([`HostImports::begin_write`]): the
    /// guard's state is read and written atomically, committed only when
    /// the policy answered (a refused or trapping policy changes nothing).
    /// The policy may set exactly one key, once: `agent`'s guard key in the
    /// configured room ([`guard_key`]). A commit the database refused as
    /// busy is rolled back and the whole call tried again, at most
    /// [`ADMIT_ATTEMPTS`] times in all (the decision depends only on the
    /// stored state, so a retry decides afresh from it).
    ///
    /// Errors: the policy's (`unknown-agent`, `bad-input` for an occupant
    /// outside the room), the imports' (`busy`, `store`), `policy`.
    pub fn admit(&mut self, agent: &str, message: &RoomMessage) -> Result<Admission, Failure> {
        self.admit_then(agent, message, &mut |_, _| Ok(()))
    }

    /// [`PolicyInstance::admit`], then `then` with the admission and the
    /// imports, inside the same write transaction and before its commit:
    /// the host writes what follows from the decision (the line the bot
    /// keeps for the next turn) with the guard's state, or nothing at all.
    /// A failure of `then` rolls the whole decision back and is returned.
    pub fn admit_then(
        &mut self,
        agent: &str,
        message: &RoomMessage,
        then: &mut dyn FnMut(&Admission, &mut dyn HostImports) -> Result<(), Failure>,
    ) -> Result<Admission, Failure> {
        let mut admissions = self.admit_all_then(
            agent,
            std::slice::from_ref(message),
            &mut |_, admission, imports| then(admission, imports),
        )?;
        Ok(admissions.remove(0))
    }

    /// [`PolicyInstance::admit_then`] for `messages` in order, inside one
    /// write transaction: `then` gets each message's index and admission
    /// after the policy's call on it, and the next call sees what the one
    /// before wrote. One commit for them all (a bot that fell behind writes
    /// the messages waiting with one set of fsyncs); all are written or
    /// none, and a failure of any call or of `then` rolls all back and is
    /// returned. Busy commits are retried as [`PolicyInstance::admit`]'s.
    /// An empty `messages` does nothing.
    pub fn admit_all_then(
        &mut self,
        agent: &str,
        messages: &[RoomMessage],
        then: &mut ThenEach<'_>,
    ) -> Result<Vec<Admission>, Failure> {
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        let key = guard_key(agent, &self.settings().room);
        let mut attempt = 1;
        loop {
            // Configure (and compile) before taking the write lock.
            self.ready()?;
            self.imports_mut().begin_write()?;
            let answer = self.admit_each(agent, &key, messages, then);
            let ended = self.imports_mut().end_write(answer.is_ok());
            match (answer, ended) {
                (Err(failure), _) => return Err(failure),
                (Ok(_), Err(busy))
                    if busy.kind == FailureKind::Busy && attempt < ADMIT_ATTEMPTS =>
                {
                    attempt += 1;
                }
                (Ok(_), Err(failure)) => return Err(failure),
                (Ok(admissions), Ok(())) => return Ok(admissions),
            }
        }
    }

    /// The policy's `admit` on each of `messages` in the open write
    /// transaction, `then` after each; stops at the first failure.
    fn admit_each(
        &mut self,
        agent: &str,
        key: &str,
        messages: &[RoomMessage],
        then: &mut ThenEach<'_>,
    ) -> Result<Vec<Admission>, Failure> {
        let mut admissions = Vec::with_capacity(messages.len());
        for (i, message) in messages.iter().enumerate() {
            self.set_admit_key(key.to_owned());
            let (admission, _) = self.call_wit(
                Call::Admit,
                None,
                |g, s| g.call_admit(s, agent, message),
                no_check,
            )?;
            then(i, &admission, self.imports_mut())?;
            admissions.push(admission);
        }
        Ok(admissions)
    }

    /// [`PolicyInstance::is_own_message`], or `false` on a failure
    /// (logged): the bot may then answer its own echo once, rather than
    /// drop a message of someone else.
    pub fn is_own_message_or_fallback(&mut self, agent: &str, sender: &str) -> bool {
        let answer = self.is_own_message(agent, sender);
        or_fallback(Call::IsOwnMessage, answer, |_| false)
    }
}

#[cfg(test)]
mod tests;
