//! What the rules may ask of the host (the WIT `host` interface) as a Rust
//! trait, so the same rules run inside the component (over the generated
//! imports, [`WitHost`]) and natively (over the tests' fake host, crate
//! `session-switch-fake-host`, or any other implementation a test or the
//! host's differential test brings).

use crate::{Failure, LogLevel, RowSummaries, SendPlan, Sent};

/// The host imports (WIT `host` interface); each method documents the
/// contract of the import of the same name. Host failures are passed on
/// unchanged by the rules.
pub trait Host {
    /// The value of `state_meta` key `key`; `None` when absent.
    fn meta_get(&mut self, key: &str) -> Result<Option<String>, Failure>;
    /// Delete `state_meta` key `key`; `true` when a row was removed.
    fn meta_delete(&mut self, key: &str) -> Result<bool, Failure>;
    /// Set `state_meta` key `key` (only the loop guard's, inside `admit`).
    fn meta_set(&mut self, key: &str, value: &str) -> Result<(), Failure>;
    /// Whether `sessions` has a row with this id.
    fn session_exists(&mut self, session_id: &str) -> Result<bool, Failure>;
    /// Summaries of `session_id`'s history (last `limit` rows, prefixes of at
    /// most `prefix_chars` characters, `bridge-wrote` about `agent`).
    fn history(
        &mut self,
        session_id: &str,
        agent: &str,
        limit: Option<u32>,
        prefix_chars: u32,
    ) -> Result<RowSummaries, Failure>;
    /// The current time, Unix seconds (UTC) with fractions.
    fn now(&mut self) -> f64;
    /// Do one send atomically (docs/src/design/send.md#the-atomic-send).
    fn send(&mut self, plan: &SendPlan) -> Result<Sent, Failure>;
    /// A diagnostic line for the host's log.
    fn log(&mut self, level: LogLevel, message: &str);
}

/// The host of the component: every method calls the WIT import of the
/// same name. Only meaningful inside the component; natively the generated
/// imports are unreachable stubs, so native code uses another [`Host`].
#[derive(Clone, Copy, Debug, Default)]
pub struct WitHost;

use crate::agentsmeeting::session_switch::host as imports;

impl Host for WitHost {
    fn meta_get(&mut self, key: &str) -> Result<Option<String>, Failure> {
        imports::meta_get(key)
    }
    fn meta_delete(&mut self, key: &str) -> Result<bool, Failure> {
        imports::meta_delete(key)
    }
    fn meta_set(&mut self, key: &str, value: &str) -> Result<(), Failure> {
        imports::meta_set(key, value)
    }
    fn session_exists(&mut self, session_id: &str) -> Result<bool, Failure> {
        imports::session_exists(session_id)
    }
    fn history(
        &mut self,
        session_id: &str,
        agent: &str,
        limit: Option<u32>,
        prefix_chars: u32,
    ) -> Result<RowSummaries, Failure> {
        imports::history(session_id, agent, limit, prefix_chars)
    }
    fn now(&mut self) -> f64 {
        imports::now()
    }
    fn send(&mut self, plan: &SendPlan) -> Result<Sent, Failure> {
        imports::send(plan)
    }
    fn log(&mut self, level: LogLevel, message: &str) {
        imports::log(level, message)
    }
}
