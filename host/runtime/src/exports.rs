//! Every export of the policy as a method of [`PolicyInstance`]: what the
//! host checks before the call, one call through the instance's call path
//! ([`PolicyInstance::call`]), the host's checks of the answer
//! (`answers.rs`), and the `*_or_fallback` forms that answer a safe default
//! instead of a failure, so a gateway never stops answering.

use super::answers::{self, check_cleared, check_decided, check_history_read, check_receipt};
use super::apply;
use super::bindings::{
    Admission, Decision, Reason, Receipt, RecordStatus, RoomMessage, RowEdit, RowSummaries,
};
use super::call::no_check;
use super::imports::{Call, HistoryQuery, SendArgs};
use super::instance::PolicyInstance;
use super::limits::max_text_bytes;
use crate::{Failure, FailureKind, HistoryRow};
use session_switch_contract::keys::guard_key;

/// How many times [`PolicyInstance::admit`] runs when its commit finds the
/// database busy (each attempt's `BEGIN` already waits up to the store's
/// write deadline; a busy `COMMIT` means readers held a DELETE-mode file
/// past the brief busy timeout).
pub const ADMIT_ATTEMPTS: u32 = 3;

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
        answers::self_check(verdict).map_err(|why| self.fail(Call::SelfCheck, &why))
    }

    /// Which session `agent`'s bot should load instead of `session_id`
    /// (DESIGN §3 "Redirect"), and why.
    ///
    /// The answer is checked: `redirected` exactly when the reason is
    /// `redirected`, a redirect names a session, anything else names
    /// `session_id`, and `policy-error` is the host's alone; and a redirect
    /// is honoured only when one of the agent's records names its target,
    /// read by the host in the call's own read snapshot
    /// ([`answers::check_redirect`]). An answer that breaks this is a
    /// `policy` failure.
    ///
    /// A decision that still holds is served from the instance's memo
    /// without running the policy (DESIGN §7, `memo.rs`): same agent and
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
            .and_then(|()| apply::apply_edits(&mut messages, &result.edits))
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
        let edits = self.tag_edits(agent, &rows)?;
        apply::apply_edits(&mut rows, &edits).map_err(|why| self.fail(Call::Tag, &why))?;
        Ok(rows)
    }

    /// The edits [`PolicyInstance::tag`] applies, checked (every index in
    /// range, none twice), for a caller that applies them to rows of its
    /// own (the Python binding edits Hermes's message dicts in place).
    pub fn tag_edits(&mut self, agent: &str, rows: &[HistoryRow]) -> Result<Vec<RowEdit>, Failure> {
        let summaries = apply::summaries(rows, self.options().tag_prefix_chars);
        self.tag_summaries(agent, &summaries)
    }

    /// [`PolicyInstance::tag_edits`] on summaries the caller built, for a
    /// caller whose rows are not [`HistoryRow`]s (the Python binding reads
    /// Hermes's message dicts): each prefix of at most
    /// [`PolicyOptions::tag_prefix_chars`](super::PolicyOptions)
    /// characters of the text Hermes sends ([`crate::sent_text`]). Edits
    /// index `summaries.rows`, in order; out of range or twice on a row: a
    /// `policy` failure; lengths that do not cut `summaries.prefixes`: the
    /// policy's `bad-input`.
    ///
    /// Rows answered before (same agent, role, prefix and bridge-wrote) are
    /// served from the instance's row memo (`tag_memo.rs`, WIT `policy.tag`
    /// is row-local); the others go to the policy in one call, none when
    /// every row was seen and the policy has answered for `agent` before
    /// (an agent it refuses has nothing in the memo, so even an empty list
    /// goes to the policy).
    pub fn tag_summaries(
        &mut self,
        agent: &str,
        summaries: &RowSummaries,
    ) -> Result<Vec<RowEdit>, Failure> {
        self.refresh();
        let Some(memo) = self.tag_memo() else {
            return self.tag_by_policy(agent, summaries);
        };
        // Lengths that do not cut the prefixes: the policy refuses them.
        let Some(rows) = apply::split(summaries) else {
            return self.tag_by_policy(agent, summaries);
        };
        let mut edits = Vec::new();
        let mut unseen = RowSummaries {
            rows: Vec::new(),
            prefixes: String::new(),
        };
        let mut unseen_at = Vec::new();
        let known = memo.knows(agent);
        for (index, (row, prefix)) in (0u32..).zip(&rows) {
            match memo.get(agent, row.role, prefix, row.bridge_wrote) {
                Some(edit) => edits.extend(edit.map(|action| RowEdit { index, action })),
                None => {
                    apply::push_summary(&mut unseen, row.id, row.role, prefix, row.bridge_wrote);
                    unseen_at.push(index);
                }
            }
        }
        if unseen_at.is_empty() && known {
            self.served_without_guest();
            return Ok(edits);
        }
        let mut answered = vec![None; unseen_at.len()];
        let generation = self.generation();
        for RowEdit { index, action } in self.tag_by_policy(agent, &unseen)? {
            answered[index as usize] = Some(action);
        }
        if self.generation() != generation {
            // Swapped just before the policy ran (which emptied the memo):
            // the served rows were the old policy's answers; all anew.
            return self.tag_by_policy(agent, summaries);
        }
        let memo = self.tag_memo().expect("memos were on a moment ago");
        memo.know(agent);
        for ((&index, edit), row) in unseen_at.iter().zip(answered).zip(&unseen.rows) {
            let prefix = rows[index as usize].1;
            memo.put(agent, row.role, prefix, row.bridge_wrote, edit);
            edits.extend(edit.map(|action| RowEdit { index, action }));
        }
        edits.sort_unstable_by_key(|e| e.index);
        Ok(edits)
    }

    /// The policy's `tag` of every row of `summaries`, checked.
    fn tag_by_policy(
        &mut self,
        agent: &str,
        summaries: &RowSummaries,
    ) -> Result<Vec<RowEdit>, Failure> {
        let (edits, _) = self.call_wit(
            Call::Tag,
            None,
            |g, s| g.call_tag(s, agent, summaries),
            no_check,
        )?;
        apply::check_edits(&edits, summaries.rows.len())
            .map_err(|why| self.fail(Call::Tag, &why))?;
        Ok(edits)
    }

    /// [`PolicyInstance::tag`], or on a failure `rows` unchanged (logged).
    pub fn tag_or_fallback(&mut self, agent: &str, rows: Vec<HistoryRow>) -> Vec<HistoryRow> {
        let answer = self.tag(agent, rows.clone());
        or_fallback(Call::Tag, answer, |_| rows)
    }

    /// Send `text` to the room as `agent` from CLI session `cli_session_id`
    /// (DESIGN §3 "Send"): the policy normalises the body and plans the
    /// send, the imports perform it atomically. The host allows one send
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

    /// Delete the record of each agent (or of `agent` only) and the seed's
    /// key for the legacy agent; the keys deleted. The host lets the policy
    /// delete only our keys, and checks that every key it reports was
    /// really deleted in this call.
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

    /// The loop guard (WIT `admit`, DESIGN §9.3): whether `agent`'s bot
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
        let key = guard_key(agent, &self.settings().room);
        let mut attempt = 1;
        loop {
            // Configure (and compile) before taking the write lock.
            self.ready()?;
            self.imports_mut().begin_write()?;
            self.set_admit_key(key.clone());
            let answer = self
                .call_wit(
                    Call::Admit,
                    None,
                    |g, s| g.call_admit(s, agent, message),
                    no_check,
                )
                .map(|(admission, _)| admission);
            let ended = self.imports_mut().end_write(answer.is_ok());
            match (answer, ended) {
                (Err(failure), _) => return Err(failure),
                (Ok(_), Err(busy))
                    if busy.kind == FailureKind::Busy && attempt < ADMIT_ATTEMPTS =>
                {
                    attempt += 1;
                }
                (Ok(_), Err(failure)) => return Err(failure),
                (Ok(admission), Ok(())) => return Ok(admission),
            }
        }
    }

    /// [`PolicyInstance::is_own_message`], or `false` on a failure
    /// (logged): the bot may then answer its own echo once, rather than
    /// drop a message of someone else.
    pub fn is_own_message_or_fallback(&mut self, agent: &str, sender: &str) -> bool {
        let answer = self.is_own_message(agent, sender);
        or_fallback(Call::IsOwnMessage, answer, |_| false)
    }
}

/// `answer`, or the safe `default` for its failure; a failure is logged
/// (warn) as a fallback of `call`, named by the export's WIT name.
fn or_fallback<T>(
    call: Call,
    answer: Result<T, Failure>,
    default: impl FnOnce(&Failure) -> T,
) -> T {
    answer.unwrap_or_else(|failure| {
        tracing::warn!(
            target: "session_switch::runtime",
            call = call.name(),
            kind = failure.kind.as_str(),
            "falling back to the safe default: {}",
            failure.message
        );
        default(&failure)
    })
}

/// The safe default decision: load the session asked about.
fn fallback_decision(asked: &str, failure: &Failure) -> Decision {
    Decision {
        session_id: asked.to_owned(),
        redirected: false,
        reason: Reason::PolicyError,
        detail: format!("no redirect: {}", failure.message),
        valid_until: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_host::{self, TestHost, settings};
    use crate::{CacheMode, EMBEDDED_COMPONENT, Policy, PolicyOptions};
    use std::sync::{Arc, Mutex};
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::subscriber::Interest;
    use tracing::{Event, Level, Metadata};

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

    /// The fields of each warn event, as text (a `tracing` subscriber that
    /// keeps them, so a test can see what a fallback logged).
    #[derive(Clone, Default)]
    struct Warnings(Arc<Mutex<Vec<Fields>>>);

    /// An event's fields, name and value.
    struct Fields(Vec<(String, String)>);

    impl Visit for Fields {
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.push((field.name().into(), value.into()));
        }
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0.push((field.name().into(), format!("{value:?}")));
        }
    }

    impl tracing::Subscriber for Warnings {
        fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
            Interest::always()
        }
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            if *event.metadata().level() == Level::WARN {
                let mut fields = Fields(Vec::new());
                event.record(&mut fields);
                self.0.lock().unwrap().push(fields);
            }
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    impl Warnings {
        /// The `call` field of each fallback logged so far.
        fn fallback_calls(&self) -> Vec<String> {
            let events = self.0.lock().unwrap();
            events
                .iter()
                .map(|fields| &fields.0)
                .filter(|fields| {
                    fields
                        .iter()
                        .any(|(k, v)| k == "message" && v.starts_with("falling back"))
                })
                .filter_map(|fields| fields.iter().find(|(k, _)| k == "call"))
                .map(|(_, v)| v.clone())
                .collect()
        }
    }

    /// The one row of the test host's sessions.
    fn row() -> HistoryRow {
        test_host::row(7, "user", "zhiwei: 收到")
    }

    #[test]
    fn each_fallback_is_logged_under_its_own_call() {
        let options = PolicyOptions {
            cache: CacheMode::Off,
            ..PolicyOptions::default()
        };
        let policy = Policy::from_bytes(EMBEDDED_COMPONENT, options).unwrap();
        let mut instance = policy.instance(TestHost::new(vec![row()]), settings());
        let warnings = Warnings::default();
        tracing::subscriber::with_default(warnings.clone(), || {
            // An agent the settings do not name: the policy refuses
            // (`unknown-agent`), the host falls back.
            let answer = instance
                .context_or_fallback("nobody", "xmpp-mohe-v2", None)
                .unwrap();
            assert_eq!(answer.decision.session_id, "xmpp-mohe-v2");
            assert_eq!(answer.decision.reason, Reason::PolicyError);
            assert_eq!(answer.messages, [row()], "rows as stored");
            let decision = instance.resolve_or_fallback("nobody", "xmpp-mohe-v2");
            assert_eq!(decision.reason, Reason::PolicyError);
        });
        assert_eq!(warnings.fallback_calls(), ["context", "resolve"]);
    }
}
