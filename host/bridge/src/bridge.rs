//! The façade over the real parts: config → store → transport → policy,
//! wired once. The CLI and the Python binding build on it, so neither
//! repeats the wiring; a Rust gateway can use it too.

use crate::config::Config;
use crate::hermes_imports::HermesImports;
use crate::store::HermesStore;
use crate::wiring;
use session_switch_runtime::{
    CacheMode, ContextAnswer, Decision, Failure, Policy, PolicyInstance, PolicyOptions, Receipt,
    RecordStatus,
};
use std::path::PathBuf;

/// Where a [`Bridge`] finds its parts; `None` takes the default.
#[derive(Clone, Debug, Default)]
pub struct BridgeOptions {
    /// The config file (default `$HERMES_HOME/session-switch.toml`).
    pub config: Option<PathBuf>,
    /// Hermes's database (default `$HERMES_HOME/state.db`).
    pub db: Option<PathBuf>,
    /// A policy component file instead of the embedded one.
    pub policy: Option<PathBuf>,
    /// Where precompiled components are cached.
    pub cache: CacheMode,
}

/// The config, the database path and the loaded policy of one Hermes home.
///
/// `Bridge` is `Sync`: threads share it and each opens its own
/// [`PolicyInstance`] ([`Bridge::instance`]), which follows hot swaps of
/// [`Bridge::policy`]. The one-shot methods (`resolve`, `send`, …) open an
/// instance, call it once and drop it, as the CLI does.
pub struct Bridge {
    config: Config,
    db: PathBuf,
    policy: Policy,
}

impl Bridge {
    /// Load the config and the policy (DESIGN §8 "Files", "Config").
    ///
    /// Errors: the config's own (kind `bad-input`, with file and line), a
    /// policy file that is not a valid component of our WIT (kind `policy`).
    /// The database is not opened here: each instance opens it.
    pub fn open(options: BridgeOptions) -> Result<Self, Failure> {
        let config = Config::load(&options.config.unwrap_or_else(Config::default_path))?;
        let policy_options = PolicyOptions {
            cache: options.cache,
            ..PolicyOptions::default()
        };
        let policy = match &options.policy {
            Some(path) => Policy::load(path, policy_options)?,
            None => Policy::embedded(policy_options)?,
        };
        Ok(Self {
            config,
            db: options.db.unwrap_or_else(HermesStore::default_path),
            policy,
        })
    }

    /// The validated config.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The path of Hermes's `state.db`.
    pub fn db_path(&self) -> &std::path::Path {
        &self.db
    }

    /// The loaded policy (reload it, watch its file, read its version).
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// A new instance of the policy over its own connection to `state.db`;
    /// with `sends`, over the configured ejabberd transport too (errors:
    /// the transport's config, e.g. an unset `api_password_env`).
    ///
    /// Errors: a missing or unreadable database (kind `store`, naming the
    /// path).
    pub fn instance(&self, sends: bool) -> Result<PolicyInstance, Failure> {
        let transport = if sends {
            Some(wiring::transport(&self.config)?)
        } else {
            None
        };
        let store = HermesStore::open(&self.db)?;
        let imports = HermesImports::new(store, transport, self.config.xmpp.room.clone());
        Ok(self
            .policy
            .instance(imports, wiring::settings(&self.config)))
    }

    /// Which session `agent`'s bot loads for `session_id` (WIT `resolve`).
    pub fn resolve(&self, agent: &str, session_id: &str) -> Result<Decision, Failure> {
        self.instance(false)?.resolve(agent, session_id)
    }

    /// The decision and the chosen session's history as the model sees it
    /// (WIT `context`); `limit`: the last rows only.
    pub fn context(
        &self,
        agent: &str,
        session_id: &str,
        limit: Option<u32>,
    ) -> Result<ContextAnswer, Failure> {
        self.instance(false)?.context(agent, session_id, limit)
    }

    /// Post `text` to the room as `agent` and record it (DESIGN §8 "Send").
    pub fn send(&self, agent: &str, cli_session_id: &str, text: &str) -> Result<Receipt, Failure> {
        self.instance(true)?.send(agent, cli_session_id, text)
    }

    /// The records of `agent` (or every agent) and whether each is valid.
    pub fn active(&self, agent: Option<&str>) -> Result<Vec<RecordStatus>, Failure> {
        self.instance(false)?.active(agent)
    }

    /// Delete the records of `agent` (or every agent); the keys removed.
    pub fn clear(&self, agent: Option<&str>) -> Result<Vec<String>, Failure> {
        self.instance(false)?.clear(agent)
    }

    /// Whether a room message from `sender` is `agent`'s own echo.
    pub fn is_own(&self, agent: &str, sender: &str) -> Result<bool, Failure> {
        self.instance(false)?.is_own_message(agent, sender)
    }
}
