//! Build identity of the policy.

/// `session-switch-policy <version>`; `POLICY_VERSION` at build time replaces
/// the crate version (test builds use it to tell swapped components apart).
pub fn version() -> String {
    format!(
        "session-switch-policy {}",
        option_env!("POLICY_VERSION").unwrap_or(env!("CARGO_PKG_VERSION"))
    )
}
