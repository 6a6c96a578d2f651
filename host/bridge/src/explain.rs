//! What the chain walk's notes (DESIGN §9.4) add to the answers the
//! policy gave: the session a compressed record names, a target refused
//! for `active`.

use crate::hermes_imports::{ChainNote, ChainNotes, lock_notes};
use session_switch_runtime::{Decision, Reason, RecordStatus};

/// A redirect to the tip of a compressed record: say which session the
/// record itself names.
pub(crate) fn explain_followed(decision: &mut Decision, notes: &ChainNotes) {
    if !decision.redirected {
        return;
    }
    for n in lock_notes(notes).iter() {
        if let ChainNote::RecordFollowed { key, recorded, tip } = n
            && *tip == decision.session_id
        {
            decision.detail.push_str(&format!(
                " (record {key} names {recorded}, which Hermes ended by compression; {tip} is \
                 its live tip)"
            ));
            return;
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
