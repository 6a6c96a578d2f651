//! The safe defaults the `*_or_fallback` exports answer instead of a
//! failure, each logged under its export's name, so a gateway never stops
//! answering.

use crate::Failure;
use crate::bindings::{Decision, Reason};
use crate::imports::Call;

/// `answer`, or the safe `default` for its failure; a failure is logged
/// (warn) as a fallback of `call`, named by the export's WIT name.
pub(super) fn or_fallback<T>(
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
pub(super) fn fallback_decision(asked: &str, failure: &Failure) -> Decision {
    Decision {
        session_id: asked.to_owned(),
        redirected: false,
        reason: Reason::PolicyError,
        detail: format!("no redirect: {}", failure.message),
        valid_until: None,
    }
}
