//! [`HermesImports`]: the host imports over Hermes's `state.db` and an
//! ejabberd transport, with the compression-chain rewrite of records
//! (docs/src/design/compression.md) the policy is handed.

use super::chain_notes::{ChainNote, ChainNotes, note};
use super::record::recorded_session;
use super::test_clock;
use session_switch_contract::ids::api_session_id_problem;
use session_switch_contract::keys::is_record_key;
use session_switch_contract::limits::MAX_META_VALUE_BYTES;
use session_switch_runtime::{
    DataVersion, Failure, HistoryRow, HostImports, PolicyInstance, SendPlan, Sent,
};
use session_switch_store::{HermesStore, Tip, target_problem};
use session_switch_transport::Transport;
use std::any::Any;
use std::sync::Arc;

/// [`HostImports`] over a Hermes database and, for sends, an ejabberd transport.
pub struct HermesImports {
    pub(super) store: HermesStore,
    /// `None` for callers that never send (resolve, context, active, clear).
    pub(super) transport: Option<Box<dyn Transport>>,
    /// Bare JID of the room sends go to.
    pub(super) room: String,
    /// A read snapshot of ours is open ([`HostImports::begin_read`]).
    reading: bool,
    /// The live tips read in the open snapshot: a `resolve` asks for its
    /// record's target twice (the record, then whether the target exists).
    tips: Vec<(String, Tip)>,
    /// What the chain walk did (see [`ChainNote`]), when a caller asked
    /// ([`HermesImports::reporting`]).
    pub(super) notes: Option<ChainNotes>,
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

    /// The store of `instance`, when its imports are `HermesImports` (every
    /// instance [`Bridge::instance`](crate::Bridge::instance) makes): for a
    /// gateway's plain reads between policy calls on the connection those
    /// calls use. After another connection's commit SQLite drops a
    /// connection's page cache and the next read goes back to the file (docs/src/design/hermes-plugin.md#as-built); a request whose reads share one connection
    /// pays that once.
    pub(crate) fn store_of(instance: &mut PolicyInstance) -> Option<&HermesStore> {
        let imports: &mut dyn Any = instance.imports_mut();
        imports
            .downcast_mut::<HermesImports>()
            .map(|imports| &imports.store)
    }

    /// [`HermesImports::store_of`], for a write between policy calls.
    pub(crate) fn store_mut_of(instance: &mut PolicyInstance) -> Option<&mut HermesStore> {
        let imports: &mut dyn Any = instance.imports_mut();
        imports
            .downcast_mut::<HermesImports>()
            .map(|imports| &mut imports.store)
    }

    /// The store these imports read and write.
    pub(crate) fn store(&self) -> &HermesStore {
        &self.store
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
    pub(super) fn live_tip(&mut self, id: &str) -> Result<Tip, Failure> {
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

impl HostImports for HermesImports {
    /// The value of `key`; a record naming a compressed session reads as
    /// naming its live tip ([`HermesImports::follow_record`]).
    fn meta_get(&mut self, key: &str) -> Result<Option<String>, Failure> {
        match self.store.meta_get(key)? {
            // Longer than any value of ours (WIT `meta-get`): an empty text,
            // which every reader of the policy takes for a value not of ours.
            Some(value) if value.len() > MAX_META_VALUE_BYTES => {
                tracing::warn!(
                    "state_meta key {key:?} holds {} bytes, more than any value of ours \
                     ({MAX_META_VALUE_BYTES} at most): handed to the policy as empty",
                    value.len()
                );
                Ok(Some(String::new()))
            }
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

    /// Whether `sessions` has `id`. The policy asks this last about a session
    /// it would redirect to or record, so a session that may be neither is
    /// refused here (kind `bad-input`, nothing redirected or written): an id
    /// Hermes's API server refuses (`session_switch_contract::ids`), or a
    /// compressed session without a unique live tip
    /// (`host/store/src/chain.rs`); the policy's `resolve` and `active` answer
    /// "not redirecting" with the message, its `send` fails with it. In
    /// reporting mode it is noted instead.
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

    /// The rows of `session_id`, or of its live tip when Hermes ended it by
    /// compression (v31): Hermes's API server moves a client-addressed
    /// session to that tip before it loads the history
    /// (`api_server_openai_routes.py`, `_resolve_live_session_id`), so the
    /// model sees the tip's rows. A chain with no unique tip is read where
    /// it starts, as Hermes's walk fails open to the id it was given.
    fn history(
        &mut self,
        session_id: &str,
        agent: &str,
        limit: Option<u32>,
    ) -> Result<Vec<HistoryRow>, Failure> {
        let tip = self.live_tip(session_id)?;
        let read = tip.session(session_id).unwrap_or(session_id);
        if read != session_id {
            note(
                &self.notes,
                ChainNote::HistoryFollowed {
                    asked: session_id.to_owned(),
                    tip: read.to_owned(),
                },
            );
        }
        self.store.history(read, agent, limit)
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
        match test_clock::path() {
            Some(path) => test_clock::read(path),
            None => session_switch_runtime::unix_now(),
        }
    }

    /// docs/src/design/send.md#the-atomic-send, docs/src/design/send.md#a-send-never-locks-hermes-out ([`HermesImports::send_atomically`]).
    fn send(&mut self, plan: &SendPlan) -> Result<Sent, Failure> {
        self.send_atomically(plan)
    }
}
