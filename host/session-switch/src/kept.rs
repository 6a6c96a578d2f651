//! One policy instance and its `state.db` connection kept from call to call,
//! for a caller that decides message after message (the room bot): a new
//! instance per call compiles nothing but still instantiates the component,
//! opens a connection and reads the compression chains each time.
//!
//! Kept, not pinned: the instance follows hot swaps of the policy by itself
//! (`PolicyInstance` picks up a swapped component before its next call);
//! its connection holds no transaction between calls, so it never sits on a
//! lock Hermes waits for; a database file replaced under the same path (a
//! restored backup, a moved-in copy) or a failure of kind `store` makes the
//! next call open a new one; `resolve` reads the settings' compression
//! continuations again first, so a session Hermes compressed since is one
//! of the agent's XMPP sessions at once.

use crate::bridge::{Bridge, refuse_unusable};
use crate::explain::explain_followed;
use crate::from_config::{self, add_continuations};
use crate::hermes_imports::{ChainNotes, HermesImports, lock_notes};
use session_switch_runtime::{Decision, Failure, FailureKind, PolicyInstance};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A policy instance kept for the next call ([`Bridge::with_kept`]);
/// empty until the first call opens one.
#[derive(Default)]
pub struct KeptInstance {
    held: Option<Held>,
}

struct Held {
    instance: PolicyInstance,
    notes: ChainNotes,
    /// The database file it opened (device, inode).
    file: (u64, u64),
}

impl KeptInstance {
    /// Whether an instance is kept (none before the first call, after a
    /// replaced database file or a `store` failure).
    pub fn is_open(&self) -> bool {
        self.held.is_some()
    }
}

/// The identity of the file at `path`; `None` when it cannot be read (the
/// open that follows then says why).
fn file_of(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl Bridge {
    /// `f` on `kept`'s instance, and the chain notes of the call; an
    /// instance is opened first when none is kept or `state.db` is another
    /// file than the one it opened. Kept afterwards, also when `f` failed,
    /// unless with kind `store` (the connection may be what failed).
    ///
    /// Errors: `f`'s; opening an instance ([`Bridge::instance`]).
    pub fn with_kept<R>(
        &self,
        kept: &mut KeptInstance,
        f: impl FnOnce(&mut PolicyInstance, &ChainNotes) -> Result<R, Failure>,
    ) -> Result<R, Failure> {
        let file = file_of(self.db_path());
        if kept.held.as_ref().is_some_and(|h| Some(h.file) != file) {
            // SQLite itself keeps the old connection from writing or
            // checkpointing into the path once the file has moved.
            tracing::warn!(
                "{} is another file than the one the bot opened: opening it again",
                self.db_path().display()
            );
            kept.held = None;
        }
        let held = match &mut kept.held {
            Some(held) => held,
            None => {
                let (instance, notes) = self.instance_noting(false, false)?;
                kept.held.insert(Held {
                    instance,
                    notes,
                    file: file.unwrap_or_default(),
                })
            }
        };
        let result = f(&mut held.instance, &held.notes);
        lock_notes(&held.notes).clear();
        if matches!(&result, Err(e) if e.kind == FailureKind::Store) {
            kept.held = None;
        }
        result
    }

    /// [`Bridge::resolve`] on `kept`'s instance, its settings' compression
    /// continuations read again first. Errors as [`Bridge::resolve`].
    pub fn resolve_kept(
        &self,
        kept: &mut KeptInstance,
        agent: &str,
        session_id: &str,
    ) -> Result<Decision, Failure> {
        refuse_unusable(session_id)?;
        self.with_kept(kept, |instance, notes| {
            let mut settings = from_config::settings(self.config());
            let Some(store) = HermesImports::store_of(instance) else {
                return Err(Failure::policy("a kept instance without a Hermes store"));
            };
            let added = add_continuations(store, &mut settings)?;
            if settings != *instance.settings() {
                for (root, child) in added {
                    tracing::debug!(
                        target: "session_switch::chain",
                        "{child} continues XMPP session {root} (Hermes compression chain)"
                    );
                }
                instance.set_settings(settings);
            }
            let mut decision = instance.resolve(agent, session_id)?;
            explain_followed(&mut decision, notes);
            Ok(decision)
        })
    }
}
