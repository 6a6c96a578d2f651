//! The host imports over the real parts: Hermes's `state.db` ([`HermesStore`])
//! and an ejabberd [`Transport`], joined in the one place that needs both,
//! the atomic send of DESIGN §8.
//!
//! Hermes's compression chains (v31, DESIGN §9.4) are followed here, so the
//! policy decides on what the imports tell it and the WIT stays as it is:
//! a record naming a compressed session reads as naming its live tip
//! ([`HostImports::meta_get`]); a session we would redirect to or record
//! that has no unique tip, or an id Hermes's API server refuses, is refused
//! where the policy asks whether it exists ([`HostImports::session_exists`],
//! which it asks last, just before redirecting or sending); the `[YOU]` row
//! goes to the live tip of the agent's XMPP session ([`HostImports::send`]).

use crate::store::{HermesStore, SendWrite, Tip, target_problem};
use crate::transport::{Transport, is_no_such_room};
use session_switch_contract::ids::api_session_id_problem;
use session_switch_contract::keys::{LEGACY_KEY, RECORD_KEY_PREFIX};
use session_switch_runtime::{
    DataVersion, Failure, FailureKind, HistoryRow, HostImports, PolicyInstance, SendPlan, Sent,
};
use std::any::Any;
use std::borrow::Cow;
use std::sync::{Arc, Mutex};

/// What following compression chains did during calls (DESIGN §9.4), for
/// callers that report it ([`HermesImports::reporting`]).
#[derive(Clone, Debug, PartialEq)]
pub enum ChainNote {
    /// Record `key` names `recorded`, which Hermes ended by compression: the
    /// policy was given the record with `session_id` = `tip`.
    RecordFollowed {
        key: String,
        recorded: String,
        tip: String,
    },
    /// `session` (a record's target, a send's CLI session) may not be
    /// redirected to or recorded: `why`, a sentence.
    Refused { session: String, why: String },
    /// A send wrote its `[YOU]` row into `written`; the plan named
    /// `configured` (equal when the session was not compressed).
    Wrote { configured: String, written: String },
}

/// The notes of one [`HermesImports`], shared with its caller.
pub type ChainNotes = Arc<Mutex<Vec<ChainNote>>>;

/// Add `n` to `notes` when a caller keeps them: imports nobody asked for
/// notes (a gateway's pooled instances) keep none, or the list would grow
/// with every call.
fn note(notes: &Option<ChainNotes>, n: ChainNote) {
    if let Some(notes) = notes {
        notes.lock().unwrap_or_else(|e| e.into_inner()).push(n);
    }
}

/// For tests only: when set (and not empty), the host's clock (WIT
/// `host.now`) reads the Unix time in seconds (e.g. `1800000000.5`) from
/// the file this variable names, at every call, instead of the system
/// clock: a test moves time for every process at once (the bots' `admit`
/// calls, `send`, `active`) by rewriting the file. A file that cannot be
/// read or holds no finite number reads as NaN, which the policy refuses
/// (kind `policy`, "not a Unix time"): never a silent fall-back to the real
/// clock.
pub const TEST_CLOCK_ENV: &str = "SESSION_SWITCH_TEST_CLOCK_FILE";

/// The file [`TEST_CLOCK_ENV`] names, read once per process: `getenv` on
/// every `now` was a tenth of a served `resolve` (callgrind). Tests set it
/// for the processes they start.
static TEST_CLOCK: std::sync::LazyLock<Option<std::path::PathBuf>> =
    std::sync::LazyLock::new(|| {
        std::env::var_os(TEST_CLOCK_ENV)
            .filter(|path| !path.is_empty())
            .map(std::path::PathBuf::from)
    });

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
    /// The live tips read in the open snapshot: a `resolve` asks for its
    /// record's target twice (the record, then whether the target exists).
    tips: Vec<(String, Tip)>,
    /// What the chain walk did (see [`ChainNote`]), when a caller asked
    /// ([`HermesImports::reporting`]).
    notes: Option<ChainNotes>,
    /// Refusals of [`HostImports::session_exists`] are noted instead of
    /// failing the call (for `active`, which lists every record).
    report: bool,
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
            tips: Vec::new(),
            notes: None,
            report: false,
        }
    }

    /// These imports, noting what the chain walk does into a list the
    /// caller keeps; with `report`, a refused target
    /// ([`HostImports::session_exists`]) is noted ([`ChainNote::Refused`])
    /// and answered as it stands in `sessions` instead of failing, so the
    /// caller (`active`) can list it and say why it does not redirect.
    pub fn reporting(mut self, report: bool) -> (Self, ChainNotes) {
        self.report = report;
        let notes = ChainNotes::default();
        self.notes = Some(Arc::clone(&notes));
        (self, notes)
    }

    pub fn store(&self) -> &HermesStore {
        &self.store
    }

    /// The store of `instance`, when its imports are `HermesImports` (every
    /// instance [`Bridge::instance`](crate::Bridge::instance) makes): for a
    /// gateway's plain reads between policy calls on the connection those
    /// calls use. After another connection's commit SQLite drops a
    /// connection's page cache and the next read goes back to the file
    /// (~40 µs); a request whose reads share one connection pays that once.
    pub fn store_of(instance: &mut PolicyInstance) -> Option<&HermesStore> {
        let imports: &mut dyn Any = instance.imports_mut();
        imports
            .downcast_mut::<HermesImports>()
            .map(|imports| &imports.store)
    }

    /// A record's value as the policy is given it: when it is a JSON object
    /// whose `session_id` Hermes ended by compression with a unique live
    /// tip (v31), the same object with `session_id` = the tip (logged and
    /// noted); else unchanged (a refused target is refused later, by
    /// `session_exists`).
    fn follow_record(&mut self, key: &str, value: String) -> Result<String, Failure> {
        let Some(recorded) = recorded_session(&value) else {
            return Ok(value);
        };
        if api_session_id_problem(&recorded).is_some() {
            return Ok(value);
        }
        let tip = self.live_tip(&recorded)?;
        let Some(tip) = tip.session(&recorded).filter(|t| *t != recorded) else {
            return Ok(value);
        };
        let Ok(serde_json::Value::Object(mut record)) = serde_json::from_str(&value) else {
            return Ok(value);
        };
        if api_session_id_problem(tip).is_some() {
            return Ok(value);
        }
        tracing::info!(
            target: "session_switch::chain",
            "record {key} names {recorded}, which Hermes ended by compression; its live tip is {tip}"
        );
        note(
            &self.notes,
            ChainNote::RecordFollowed {
                key: key.to_owned(),
                recorded: recorded.clone(),
                tip: tip.to_owned(),
            },
        );
        record.insert(
            "session_id".into(),
            serde_json::Value::String(tip.to_owned()),
        );
        Ok(serde_json::Value::Object(record).to_string())
    }

    /// [`HermesStore::live_tip`], read once per id in a read snapshot (the
    /// chain cannot change inside it); outside one, read every time.
    fn live_tip(&mut self, id: &str) -> Result<Tip, Failure> {
        if let Some((_, tip)) = self.tips.iter().find(|(seen, _)| seen == id) {
            return Ok(tip.clone());
        }
        let tip = self.store.live_tip(id)?;
        if self.reading {
            self.tips.push((id.to_owned(), tip.clone()));
        }
        Ok(tip)
    }
}

/// The `session_id` of a record value that is a JSON object, as a
/// `serde_json::Value` reads it (the last of duplicate keys; `None` when
/// it is not a string or the value is not an object or not JSON). The
/// common shape is read without building the object: this runs on every
/// `resolve` and every memo check (DESIGN §7).
fn recorded_session(value: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Named<'a> {
        #[serde(borrow, default)]
        session_id: Option<Cow<'a, str>>,
    }
    // serde's derive also takes a JSON array for a struct: only objects.
    if value
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('{')
        && let Ok(named) = serde_json::from_str::<Named>(value)
    {
        return named.session_id.map(Cow::into_owned);
    }
    // Odd shapes (a duplicate or non-string `session_id`, bad JSON).
    match serde_json::from_str(value) {
        Ok(serde_json::Value::Object(record)) => {
            record.get("session_id")?.as_str().map(str::to_owned)
        }
        _ => None,
    }
}

/// Keys that hold a record (`session_switch:active:<agent>`, the seed's key).
fn is_record_key(key: &str) -> bool {
    key == LEGACY_KEY || key.starts_with(RECORD_KEY_PREFIX)
}

impl HostImports for HermesImports {
    /// The value of `key`; a record naming a compressed session reads as
    /// naming its live tip ([`HermesImports::follow_record`]).
    fn meta_get(&mut self, key: &str) -> Result<Option<String>, Failure> {
        match self.store.meta_get(key)? {
            Some(value) if is_record_key(key) => self.follow_record(key, value).map(Some),
            other => Ok(other),
        }
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

    /// Whether `sessions` has `id`. The policy asks this last about a
    /// session it would redirect to or record, so a session that may be
    /// neither is refused here (kind `bad-input`, nothing redirected or
    /// written): an id Hermes's API server refuses
    /// (`session_switch_contract::ids`), or a compressed session without a
    /// unique live tip (`store/chain.rs`); the policy's `resolve` and
    /// `active` answer "not redirecting" with the message, its `send`
    /// fails with it. In reporting mode it is noted instead.
    fn session_exists(&mut self, id: &str) -> Result<bool, Failure> {
        if let Some(why) = target_problem(id, |id| self.live_tip(id))? {
            tracing::warn!(target: "session_switch::chain", "refusing session {id:?}: {why}");
            if !self.report {
                return Err(Failure::bad_input(format!(
                    "not redirecting to or recording session {id}: {why}"
                )));
            }
            note(
                &self.notes,
                ChainNote::Refused {
                    session: id.to_owned(),
                    why,
                },
            );
        }
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
        self.tips.clear();
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
        self.tips.clear();
        if std::mem::take(&mut self.reading)
            && let Err(failure) = self.store.end_read()
        {
            tracing::warn!(target: "session_switch::hermes_imports", "{}", failure.message);
        }
    }

    /// [`HermesStore::data_version`] (its failure, e.g. `busy` after the
    /// busy timeout, as it is); `None` when a caller keeps the notes
    /// ([`HermesImports::reporting`]): it reads the notes each call leaves,
    /// so every call must make its reads.
    fn data_version(&mut self) -> Result<Option<DataVersion>, Failure> {
        if self.notes.is_some() {
            return Ok(None);
        }
        self.store.data_version().map(Some)
    }

    /// The system clock in Unix seconds, or the test clock of
    /// [`TEST_CLOCK_ENV`] when that variable is set.
    fn now(&mut self) -> f64 {
        match TEST_CLOCK.as_deref() {
            Some(path) => test_clock(path),
            None => session_switch_runtime::unix_now(),
        }
    }

    /// DESIGN §8 "Send", §9.5: complete any send that reached the room
    /// but not the database; ask ejabberd whether the agent's JID may post;
    /// then intent → post → record ([`HermesStore::send_write`]: no lock is
    /// held across the post), recording only when the check and the post
    /// both succeeded.
    ///
    /// An agent without a record is checked before anything is written: a
    /// refused sender changes nothing. An agent with a record (only a
    /// delivered send writes one: its JID was accepted before) is checked
    /// on another thread beside the intent and the post, which saves one
    /// round trip (through `ejabberdctl` an Erlang VM boot, ~0.25–0.5 s);
    /// should that check refuse, ejabberd dropped the post unless the JID
    /// is a MUC service admin, which only the room knows: kind
    /// `unknown-outcome` (exit 3), and `active` lists the send until
    /// `clear`. Should it find no such room (a record outlives a change of
    /// `[xmpp] room`), the post reached nobody: `not-accepted` (exit 2),
    /// nothing written, as when the check comes first.
    fn send(&mut self, plan: &SendPlan) -> Result<Sent, Failure> {
        let transport = self.transport.as_deref().ok_or_else(|| {
            Failure::transport("no ejabberd transport is configured for this caller")
        })?;
        // Before anything is written or posted: the record will name the
        // CLI session, so Hermes's API server must take its id; and the row
        // needs a unique live tip (checked again inside the record
        // transaction, store/chain.rs `write_target`).
        if let Some(problem) = api_session_id_problem(&plan.cli_session_id) {
            return Err(Failure::bad_input(format!(
                "CLI session id {:?} {problem}, so Hermes's API server would refuse it; nothing was sent or written",
                plan.cli_session_id
            )));
        }
        self.store.write_target(&plan.history_session_id)?;
        self.store.complete_pending()?;
        let accepted_before = self.store.meta_get(&plan.record_key)?.is_some();
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
        let post = || transport.post(&plan.from_jid, room, &plan.room_body);
        let (written, ()) = if accepted_before {
            let store = &mut self.store;
            std::thread::scope(|scope| {
                let check = scope.spawn(|| {
                    // Caught here: an unjoined thread's panic would panic the scope.
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        transport.check_sender(&plan.from_jid, room)
                    }))
                    .unwrap_or_else(|_| Err(Failure::transport("the sender check panicked")))
                });
                store.send_write(&write, || match (post(), checked(check)) {
                    // Nobody can have it: nothing is recorded, as if the
                    // check had come first (after a change of [xmpp] room).
                    (Ok(()), Err(check)) if is_no_such_room(&check) => Err(check),
                    (Ok(()), Err(check)) => Err(posted_unchecked(check, &plan.from_jid)),
                    (posted, _) => posted,
                })
            })?
        } else {
            // A refused sender changes nothing: asked before anything is written.
            transport.check_sender(&plan.from_jid, room)?;
            self.store.send_write(&write, post)?
        };
        if written.history_session_id != plan.history_session_id {
            tracing::info!(
                target: "session_switch::chain",
                "wrote the [YOU] row into {}, the live tip of {} (ended by compression)",
                written.history_session_id,
                plan.history_session_id
            );
        }
        note(
            &self.notes,
            ChainNote::Wrote {
                configured: plan.history_session_id.clone(),
                written: written.history_session_id.clone(),
            },
        );
        Ok(Sent {
            message_id: written.message_id,
            room: self.room.clone(),
            record_replaced: written.record_replaced,
        })
    }
}

/// A post that went out beside a sender check that failed: whether the
/// room took it is unknown (kind `unknown-outcome`).
fn posted_unchecked(check: Failure, from_jid: &str) -> Failure {
    let outcome = if check.kind == FailureKind::NotAccepted {
        format!("the room may have the message only if {from_jid} is a MUC service admin")
    } else {
        "the room may have the message".to_owned()
    };
    Failure::new(
        FailureKind::UnknownOutcome,
        format!(
            "{}; the post went out beside this check: {outcome}",
            check.message
        ),
    )
}

/// The sender check's answer from its thread.
fn checked(check: std::thread::ScopedJoinHandle<'_, Result<(), Failure>>) -> Result<(), Failure> {
    check
        .join()
        .unwrap_or_else(|_| Err(Failure::transport("the sender check panicked")))
}

#[cfg(test)]
mod tests {
    use super::recorded_session;

    /// The fast read gives what a `serde_json::Value` gives, on every shape.
    #[test]
    fn a_records_session_is_read_as_a_json_value_reads_it() {
        let value_reads = |v: &str| match serde_json::from_str::<serde_json::Value>(v) {
            Ok(serde_json::Value::Object(m)) => m
                .get("session_id")
                .and_then(|s| s.as_str())
                .map(str::to_owned),
            _ => None,
        };
        for (value, want) in [
            (
                r#"{"session_id": "cli-1", "timestamp": 1.5}"#,
                Some("cli-1"),
            ),
            (" \n\t{\"session_id\":\"cli-1\"}", Some("cli-1")),
            (r#"{"session_id": "a\"b\u00e9"}"#, Some("a\"bé")),
            (r#"{"session_id": "old", "session_id": "new"}"#, Some("new")),
            (r#"{"timestamp": 1}"#, None),
            (r#"{"session_id": 7}"#, None),
            (r#"{"session_id": null}"#, None),
            (r#"["cli-1"]"#, None),
            (r#""cli-1""#, None),
            ("not json", None),
            ("", None),
            (r#"{"session_id": "cli-1"} trailing"#, None),
        ] {
            assert_eq!(recorded_session(value).as_deref(), want, "{value}");
            assert_eq!(recorded_session(value), value_reads(value), "{value}");
        }
        // `Value` refuses a number beyond f64 anywhere; the record still
        // names its session, and following it rewrites nothing (the
        // rewrite needs the `Value`).
        assert_eq!(
            recorded_session(r#"{"session_id": "cli-1", "timestamp": 1e400}"#).as_deref(),
            Some("cli-1")
        );
    }
}
