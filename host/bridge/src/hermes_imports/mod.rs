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

mod chain_notes;
mod send;
mod test_clock;

pub use chain_notes::{ChainNote, ChainNotes};
pub use test_clock::TEST_CLOCK_ENV;

use crate::store::{HermesStore, Tip, target_problem};
use crate::transport::Transport;
use chain_notes::{is_record_key, note};
use session_switch_runtime::{
    DataVersion, Failure, HistoryRow, HostImports, PolicyInstance, SendPlan, Sent,
};
use std::any::Any;
use std::sync::Arc;

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
        match test_clock::path() {
            Some(path) => test_clock::read(path),
            None => session_switch_runtime::unix_now(),
        }
    }

    /// DESIGN §8 "Send", §9.5 ([`HermesImports::send_atomically`]).
    fn send(&mut self, plan: &SendPlan) -> Result<Sent, Failure> {
        self.send_atomically(plan)
    }
}
