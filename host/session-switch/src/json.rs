//! The JSON shapes of docs/src/design/contracts.md#cli-json, one copy: the
//! CLI prints them (`--json`) and the Python binding returns them as Python
//! objects. The shapes are the contract's [`answers`] types (their
//! reference page is generated from them); this fills them from the
//! runtime's answers.

use crate::HistoryRow;
use crate::pending_report::{PendingReport, PendingStatus};
use serde_json::Value;
use session_switch_contract::answers::{
    self, ActiveEntry, Admitted, Cleared, Context, PendingSend, RecordState, Resolved, Sent,
};
use session_switch_runtime::{Admission, ContextAnswer, Decision, Receipt, RecordStatus};

/// `resolve`: `session_id`, `redirected`, `reason`, `detail`, `valid_until`.
pub fn decision(d: &Decision) -> Value {
    answers::to_value(&resolved(d))
}

fn resolved(d: &Decision) -> Resolved<'_> {
    Resolved {
        session_id: &d.session_id,
        redirected: d.redirected,
        reason: d.reason.as_str(),
        detail: &d.detail,
        valid_until: d.valid_until,
    }
}

/// One message as Hermes's loader returns it (the same keys and values,
/// see [`HistoryRow::message_json`]), with the tag edits applied.
pub fn message(row: &HistoryRow) -> Value {
    Value::Object(row.message_json())
}

/// `context`: the decision's fields and `messages`.
pub fn context(answer: &ContextAnswer) -> Value {
    answers::to_value(&Context {
        decision: resolved(&answer.decision),
        messages: answer
            .messages
            .iter()
            .map(HistoryRow::message_json)
            .collect(),
    })
}

/// `admit`: `reply`, `reason` (kebab-case, e.g. `loop-guard`), `stop` (a
/// person's stop for this agent), `heard` (the line reaches the next turn),
/// `hops` (the hop counter after this message), `detail`.
pub fn admission(a: &Admission) -> Value {
    answers::to_value(&Admitted {
        reply: a.reply,
        reason: a.reason.as_str(),
        stop: a.stop,
        heard: a.heard,
        hops: a.hops,
        detail: &a.detail,
    })
}

/// `send`: what the room got and what was recorded, and the session the
/// `[YOU]` row went into.
pub fn receipt(r: &Receipt, history_session_id: &str) -> Value {
    answers::to_value(&Sent {
        delivered: true,
        room: &r.room,
        body: &r.body,
        message_id: r.message_id,
        record_key: &r.record_key,
        record_replaced: r.record_replaced,
        history_session_id,
    })
}

/// `active`: the records' statuses, then the sends not (yet) in the
/// history ([`pending_send`]), one array.
pub fn active(statuses: &[RecordStatus], pending: &[PendingReport]) -> Value {
    let entries: Vec<ActiveEntry<'_>> = statuses
        .iter()
        .map(|s| ActiveEntry::Record(record_state(s)))
        .chain(
            pending
                .iter()
                .map(|p| ActiveEntry::PendingSend(pending_state(p))),
        )
        .collect();
    answers::to_value(&entries)
}

/// `clear`: `{"cleared": [the record keys deleted], "pending_sends_cleared": N}`.
pub fn cleared(keys: &[String], pending_sends_cleared: usize) -> Value {
    answers::to_value(&Cleared {
        cleared: keys,
        pending_sends_cleared,
    })
}

/// One entry of `active`.
pub fn record_status(s: &RecordStatus) -> Value {
    answers::to_value(&record_state(s))
}

fn record_state(s: &RecordStatus) -> RecordState<'_> {
    RecordState {
        agent: &s.agent,
        key: &s.key,
        session_id: s.session_id.as_deref(),
        timestamp: s.timestamp,
        age_seconds: s.age_seconds,
        remaining_seconds: s.remaining_seconds,
        valid: s.valid,
        reason: s.reason.as_str(),
        detail: &s.detail,
    }
}

/// One entry of `active` for a send not (yet) in the history (docs/src/design/send.md#a-send-never-locks-hermes-out):
/// `pending_send: true`, `key` (its `state_meta` key), `state` (`posting`:
/// being posted, or interrupted when `in_progress` is false; `unknown`: the
/// post timed out; `delivered`: the room took it, the row waits for the
/// database; `malformed`), `delivered`, `in_progress`, `timestamp` (Unix
/// seconds of the send), `cli_session_id`, `body` (the history row's
/// content); the last three `null` for a `malformed` value, whose fields
/// are unreadable (as a malformed record's are).
pub fn pending_send(p: &PendingReport) -> Value {
    answers::to_value(&pending_state(p))
}

fn pending_state(p: &PendingReport) -> PendingSend<'_> {
    let readable = p.state != PendingStatus::Malformed;
    PendingSend {
        agent: &p.agent,
        pending_send: true,
        key: &p.key,
        state: p.state_name(),
        delivered: p.delivered,
        in_progress: p.process_alive,
        timestamp: readable.then_some(p.created_at),
        cli_session_id: readable.then_some(p.cli_session_id.as_str()),
        body: readable.then_some(p.body.as_str()),
    }
}
