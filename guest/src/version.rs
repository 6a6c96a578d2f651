//! Build identity of the policy.

/// `session-switch-policy <crate version>`.
pub fn version() -> String {
    format!("session-switch-policy {}", env!("CARGO_PKG_VERSION"))
}
