//! The TOML config of docs/src/design/contracts.md: the room, the ejabberd transport, the
//! redirect settings and the agents. Adding an agent is a config edit only
//! (the legacy `xmpp_session_bridge.py` needed code changes in two places).
//!
//! Default location: `$HERMES_HOME/session-switch.toml` (`HERMES_HOME`
//! defaults to `~/.hermes`), overridden by `--config`. Every error names the
//! file and the line. Validation includes the policy's `configure` rules
//! (names a signature could be confused by, control characters, id
//! lengths), so a config this accepts is never refused by the policy with
//! a message that lacks the line (gap G3 of docs/src/security.md).

mod agents;
mod bot;
mod load;
mod loop_guard;
mod meeting;
mod raw;
mod schema;
mod source;
#[cfg(test)]
pub(crate) mod tests;
mod types;
mod validate;
mod value_checks;

pub use schema::schema;
pub use session_switch_contract::limits::{DEFAULT_FUTURE_SKEW_SECONDS, DEFAULT_MAX_BODY_CHARS};
pub use types::{
    AgentConfig, AllowBots, BotAgent, BotConfig, BotTls, Config, DEFAULT_TTL_SECONDS,
    DEFAULT_TURN_TIMEOUT_SECONDS, LoopGuardConfig, MeetingConfig, MeetingOverridesConfig,
    PasswordSource, Redirect, TransportKind, Xmpp,
};
