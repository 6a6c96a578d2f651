//! Constructors of the WIT `failure` record, one per kind the policy itself
//! raises. Host failures are never built here: the policy passes those on
//! unchanged (WIT `host` interface).

use crate::{Failure, FailureKind};

/// `bad-input`: the caller's input (settings, session id, body) is refused.
pub fn bad_input(message: impl Into<String>) -> Failure {
    Failure {
        kind: FailureKind::BadInput,
        message: message.into(),
    }
}

/// `unknown-agent`: `name` is not in the settings; lists the configured names
/// so a person sees the choices, e.g. `unknown agent 'x' (configured: a, b)`.
pub fn unknown_agent<'a>(name: &str, configured: impl IntoIterator<Item = &'a str>) -> Failure {
    let list: Vec<&str> = configured.into_iter().collect();
    Failure {
        kind: FailureKind::UnknownAgent,
        message: format!("unknown agent '{name}' (configured: {})", list.join(", ")),
    }
}

/// `policy`: the policy cannot answer (not configured, impossible host answer).
pub fn policy(message: impl Into<String>) -> Failure {
    Failure {
        kind: FailureKind::Policy,
        message: message.into(),
    }
}

/// What every export but `version` and `self-check` returns before
/// `configure` succeeded (WIT `policy` interface doc).
pub fn not_configured() -> Failure {
    policy("policy not configured: the host must call configure(settings) first")
}
