//! The atomic send of docs/src/design/send.md#the-atomic-send, docs/src/design/send.md#a-send-never-locks-hermes-out: the one place that needs
//! both the store and the transport.

use super::chain_notes::{ChainNote, note};
use super::host_imports::HermesImports;
use session_switch_contract::ids::api_session_id_problem;
use session_switch_runtime::{Failure, FailureKind, SendPlan, Sent};
use session_switch_store::SendWrite;
use session_switch_transport::is_no_such_room;

impl HermesImports {
    /// docs/src/design/send.md#the-atomic-send, docs/src/design/send.md#a-send-never-locks-hermes-out: complete any send that reached the room
    /// but not the database; ask ejabberd whether the agent's JID may post;
    /// then intent → post → record ([`HermesStore::send_write`]: no lock is
    /// held across the post), recording only when the check and the post
    /// both succeeded.
    ///
    /// An agent without a record is checked before anything is written: a
    /// refused sender changes nothing. An agent with a record (only a
    /// delivered send writes one: its JID was accepted before) is checked
    /// on another thread beside the intent and the post, which saves one
    /// round trip (through `ejabberdctl` an Erlang VM boot);
    /// should that check refuse, ejabberd dropped the post unless the JID
    /// is a MUC service admin, which only the room knows: kind
    /// `unknown-outcome` (exit 3), and `active` lists the send until
    /// `clear`. Should it find no such room (a record outlives a change of
    /// `[xmpp] room`), the post reached nobody: `not-accepted` (exit 2),
    /// nothing written, as when the check comes first.
    pub(super) fn send_atomically(&mut self, plan: &SendPlan) -> Result<Sent, Failure> {
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
