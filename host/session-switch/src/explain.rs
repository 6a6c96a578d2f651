//! What the chain walk's notes (docs/src/design/compression.md) add to the answers the
//! policy gave: the session a compressed record names, a target refused
//! for `active`.

use crate::hermes_imports::{ChainNote, ChainNotes, lock_notes};
use session_switch_runtime::{Decision, Reason, RecordStatus};

/// A redirect to the tip of a compressed record: say which session the
/// record itself names. A history read from the tip of the session decided
/// on: say whose rows they are.
pub(crate) fn explain_followed(decision: &mut Decision, notes: &ChainNotes) {
    for n in lock_notes(notes).iter() {
        match n {
            ChainNote::RecordFollowed { key, recorded, tip }
                if decision.redirected && *tip == decision.session_id =>
            {
                decision.detail.push_str(&format!(
                    " (record {key} names {recorded}, which Hermes ended by compression; {tip} \
                     is its live tip)"
                ));
            }
            ChainNote::HistoryFollowed { asked, tip } if *asked == decision.session_id => {
                decision.detail.push_str(&format!(
                    " (Hermes ended {asked} by compression: the history is its live tip {tip}'s, \
                     which Hermes loads for it)"
                ));
            }
            _ => {}
        }
    }
}

/// `active`'s view of a record after the chain walk's notes.
pub(crate) fn explain_status(status: &mut RecordStatus, notes: &[ChainNote]) {
    for n in notes {
        match n {
            ChainNote::RecordFollowed { key, recorded, tip }
                if *key == status.key && status.session_id.as_deref() == Some(tip) =>
            {
                status.detail.push_str(&format!(
                    " (the record names {recorded}, which Hermes ended by compression; {tip} is \
                     its live tip)"
                ));
                status.session_id = Some(recorded.clone());
            }
            ChainNote::Refused { session, why }
                if status.valid && status.session_id.as_deref() == Some(session) =>
            {
                status.valid = false;
                status.reason = Reason::MalformedRecord;
                status.detail = format!(
                    "record {} names {session}: {why}; resolve does not redirect",
                    status.key
                );
            }
            _ => {}
        }
    }
}
