//! A decision of the loop guard before it becomes the WIT `admission`:
//! whether to answer, why, and whether the line is heard or is a stop.

use crate::{Admission, AdmitReason};

/// What a decision says, before it becomes an [`Admission`].
pub(super) struct Verdict {
    pub reply: bool,
    pub reason: AdmitReason,
    pub stop: bool,
    pub heard: bool,
    pub detail: String,
}

impl Verdict {
    pub fn answer(reason: AdmitReason, detail: String) -> Self {
        Self {
            reply: true,
            reason,
            stop: false,
            heard: false,
            detail,
        }
    }

    /// Not answered; the line reaches the agent's next turn.
    pub fn heard(reason: AdmitReason, detail: String) -> Self {
        Self {
            reply: false,
            reason,
            stop: false,
            heard: true,
            detail,
        }
    }

    /// Not answered, and not worth the agent's attention (its own line, a
    /// repeat, replayed history).
    pub fn ignored(reason: AdmitReason, detail: String) -> Self {
        Self {
            reply: false,
            reason,
            stop: false,
            heard: false,
            detail,
        }
    }

    pub fn with_hops(self, hops: u32) -> Admission {
        Admission {
            reply: self.reply,
            reason: self.reason,
            stop: self.stop,
            heard: self.heard,
            hops,
            detail: self.detail,
        }
    }
}
