//! Hermes's free-text `messages.role` as the contract's roles (WIT `role`).

/// The roles Hermes's loader sends to the model, and `Other` for the rest
/// (e.g. `session_meta`); the host's WIT `role` is converted from this once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    User,
    Assistant,
    Tool,
    System,
    Other,
}

impl Role {
    /// The role of a `messages.role` value (Hermes's schema: free text).
    pub fn of(role: &str) -> Self {
        match role {
            "user" => Self::User,
            "assistant" => Self::Assistant,
            "tool" => Self::Tool,
            "system" => Self::System,
            _ => Self::Other,
        }
    }
}
