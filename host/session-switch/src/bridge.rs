//! The façade over the real parts: config → store → transport → policy,
//! wired once. The CLI and the Python binding build on it, so neither
//! repeats the wiring; a Rust gateway can use it too.

use crate::explain::{explain_followed, explain_status};
use crate::from_config;
use crate::from_config::add_continuations;
use crate::hermes_imports::{ChainNote, ChainNotes, HermesImports, lock_notes};
use crate::pending_report::PendingReport;
use crate::reads::Reads;
use session_switch_config::Config;
use session_switch_contract::ids::api_session_id_problem;
use session_switch_runtime::{
    Admission, ContextAnswer, Decision, Failure, Policy, PolicyInstance, PolicyOptions, Receipt,
    RecordStatus, RoomMessage, Settings,
};
use session_switch_store::HermesStore;
use std::path::{Path, PathBuf};

/// Where a [`Bridge`] finds its parts; `None` takes the default.
#[derive(Clone, Debug, Default)]
pub struct BridgeOptions {
    /// The config file (default `$HERMES_HOME/session-switch.toml`).
    pub config: Option<PathBuf>,
    /// Hermes's database (default `$HERMES_HOME/state.db`).
    pub db: Option<PathBuf>,
    /// A policy component file instead of the embedded one (default: the
    /// config's `[policy] path`, else the embedded policy).
    pub policy: Option<PathBuf>,
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
    policy_file: Option<PathBuf>,
}

impl Bridge {
    /// Load the config and the policy (docs/src/design/contracts.md#files, "Config").
    ///
    /// Errors: the config's own (kind `bad-input`, with file and line), a
    /// policy file that is not a valid component of our WIT (kind `policy`).
    /// The database is not opened here: each instance opens it.
    pub fn open(options: BridgeOptions) -> Result<Self, Failure> {
        let config = Config::load(&options.config.unwrap_or_else(Config::default_path))?;
        let policy_options = PolicyOptions::default();
        let policy_file = options.policy.or_else(|| config.policy_path.clone());
        let policy = match &policy_file {
            Some(path) => Policy::load(path, policy_options)?,
            None => Policy::embedded(policy_options)?,
        };
        Ok(Self {
            config,
            db: options.db.unwrap_or_else(HermesStore::default_path),
            policy,
            policy_file,
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

    /// The policy file in use (`--policy`, else `[policy] path`); `None`
    /// for the embedded policy.
    pub fn policy_file(&self) -> Option<&std::path::Path> {
        self.policy_file.as_deref()
    }

    /// The loaded policy (its version, its options; [`Bridge::watch_policy`]
    /// and [`Bridge::reload_policy`] swap it).
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// A new instance of the policy over its own connection to `state.db`;
    /// with `sends`, over the configured ejabberd transport too (errors:
    /// the transport's config, e.g. an unset `api_password_env`).
    ///
    /// On schema v31 the settings' XMPP sessions of each agent include the
    /// compression continuations of its configured ones as they are now
    /// (docs/src/design/compression.md, `from_config::add_continuations`): a child of
    /// `xmpp-mohe-v2` resolves as `xmpp-mohe-v2` does. An instance kept for
    /// long learns of later compressions only with new settings
    /// ([`PolicyInstance::set_settings`]) or a new instance.
    ///
    /// Errors: a missing or unreadable database (kind `store`, naming the
    /// path).
    ///
    /// Its imports keep no chain notes: an instance kept for long would
    /// grow a note per call, and imports that keep notes make every call
    /// its reads, so its memo could never serve a decision on the data
    /// version alone.
    pub fn instance(&self, sends: bool) -> Result<PolicyInstance, Failure> {
        let (imports, settings) = self.imports(sends)?;
        Ok(self.policy.instance(imports, settings))
    }

    /// The agent whose XMPP sessions include `session_id`: one its config
    /// names, or on the v31 schema a compression continuation of one
    /// (docs/src/design/compression.md: Hermes's API server runs a compressed session's turns
    /// on its live tip), read on `reads`. `None`: nobody's XMPP session.
    ///
    /// Errors: kind `busy` or `store` from the chain walk (only for a
    /// session no config line names).
    pub fn agent_for_session(
        &self,
        reads: &Reads<'_>,
        session_id: &str,
    ) -> Result<Option<&str>, Failure> {
        if let Some(agent) = self.configured_agent(session_id) {
            return Ok(Some(agent));
        }
        let root = reads.continued_root(session_id, |id| self.configured_agent(id).is_some())?;
        Ok(root.and_then(|root| self.configured_agent(&root)))
    }

    /// `f` on the reads of `instance`'s own connection when
    /// [`Bridge::instance`] made it, else on a new connection.
    ///
    /// Errors: `f`'s, and opening a connection (kind `store`).
    pub fn reads<R>(
        &self,
        instance: &mut PolicyInstance,
        f: impl FnOnce(&Reads<'_>) -> Result<R, Failure>,
    ) -> Result<R, Failure> {
        match HermesImports::store_of(instance) {
            Some(store) => f(&Reads(store)),
            None => f(&Reads(&self.store()?)),
        }
    }

    /// The agent whose config lists `session_id` among its XMPP sessions
    /// (no database read; see [`Bridge::agent_for_session`]).
    pub fn configured_agent(&self, session_id: &str) -> Option<&str> {
        self.config
            .agents
            .iter()
            .find(|a| a.sessions.iter().any(|s| s == session_id))
            .map(|a| a.name.as_str())
    }

    /// A connection to the agent's `state.db`, with the config's future
    /// skew for the sends it completes ([`HermesStore::set_future_skew`]).
    pub(crate) fn store(&self) -> Result<HermesStore, Failure> {
        let mut store = HermesStore::open(&self.db)?;
        store.set_future_skew(self.config.redirect.future_skew_seconds);
        Ok(store)
    }

    /// [`Bridge::instance`], with the notes of its chain walk
    /// ([`HermesImports::reporting`]).
    pub(crate) fn instance_noting(
        &self,
        sends: bool,
        report: bool,
    ) -> Result<(PolicyInstance, ChainNotes), Failure> {
        let (imports, settings) = self.imports(sends)?;
        let (imports, notes) = imports.reporting(report);
        Ok((self.policy.instance(imports, settings), notes))
    }

    /// The imports of a new instance (a new connection, a transport when
    /// it `sends`) and its settings, the continuations of the agents' XMPP
    /// sessions included.
    fn imports(&self, sends: bool) -> Result<(HermesImports, Settings), Failure> {
        let transport = if sends {
            Some(from_config::transport(&self.config)?)
        } else {
            None
        };
        let store = self.store()?;
        let mut settings = from_config::settings(&self.config);
        for (root, child) in add_continuations(&store, &mut settings)? {
            tracing::debug!(
                target: "session_switch::chain",
                "{child} continues XMPP session {root} (Hermes compression chain)"
            );
        }
        let imports = HermesImports::new(store, transport, self.config.xmpp.room.clone());
        Ok((imports, settings))
    }

    /// Which session `agent`'s bot loads for `session_id` (WIT `resolve`).
    /// A redirect through a compressed record names the tip; its detail
    /// then also names the record's own session. A record whose session has
    /// no unique tip is an answer, not an error: the session asked about,
    /// not redirected, reason `malformed-record`, the fork in `detail`.
    ///
    /// Errors: kind `bad-input` for an id Hermes's API server refuses
    /// (empty, path-unsafe, …: `session_switch_contract::ids`), since no
    /// gateway can ask for it; the policy's and the store's failures.
    pub fn resolve(&self, agent: &str, session_id: &str) -> Result<Decision, Failure> {
        refuse_unusable(session_id)?;
        let (mut instance, notes) = self.instance_noting(false, false)?;
        let mut decision = instance.resolve(agent, session_id)?;
        explain_followed(&mut decision, &notes);
        Ok(decision)
    }

    /// The decision and the chosen session's history as the model sees it
    /// (WIT `context`); `limit`: the last rows only. The detail names a
    /// compressed record's own session as [`Bridge::resolve`]'s does.
    ///
    /// Errors as [`Bridge::resolve`].
    pub fn context(
        &self,
        agent: &str,
        session_id: &str,
        limit: Option<u32>,
    ) -> Result<ContextAnswer, Failure> {
        refuse_unusable(session_id)?;
        let (mut instance, notes) = self.instance_noting(false, false)?;
        let mut answer = instance.context(agent, session_id, limit)?;
        explain_followed(&mut answer.decision, &notes);
        Ok(answer)
    }

    /// Post `text` to the room as `agent` and record it (docs/src/design/send.md#the-atomic-send).
    pub fn send(&self, agent: &str, cli_session_id: &str, text: &str) -> Result<Receipt, Failure> {
        Ok(self.send_noting(agent, cli_session_id, text)?.0)
    }

    /// [`Bridge::send`], and the session the `[YOU]` row went into: the
    /// agent's first XMPP session, or on v31 its live compression tip.
    pub fn send_noting(
        &self,
        agent: &str,
        cli_session_id: &str,
        text: &str,
    ) -> Result<(Receipt, String), Failure> {
        let (mut instance, notes) = self.instance_noting(true, false)?;
        let receipt = instance.send(agent, cli_session_id, text)?;
        let written = lock_notes(&notes)
            .iter()
            .rev()
            .find_map(|n| match n {
                ChainNote::Wrote { written, .. } => Some(written.clone()),
                _ => None,
            })
            .unwrap_or_default();
        Ok((receipt, written))
    }

    /// The records of `agent` (or every agent) and whether each is valid.
    /// A record whose session Hermes compressed shows the recorded session
    /// and names its live tip in the detail; one whose target has no unique
    /// tip, or an id Hermes's API server refuses, is not valid (reason
    /// `malformed-record`: it names a session that may not be a target),
    /// and the detail says what was found.
    pub fn active(&self, agent: Option<&str>) -> Result<Vec<RecordStatus>, Failure> {
        let (mut instance, notes) = self.instance_noting(false, true)?;
        let mut statuses = instance.active(agent)?;
        let notes = lock_notes(&notes);
        for status in &mut statuses {
            explain_status(status, &notes);
        }
        Ok(statuses)
    }

    /// Delete the records of `agent` (or every agent); the keys removed.
    pub fn clear(&self, agent: Option<&str>) -> Result<Vec<String>, Failure> {
        self.instance(false)?.clear(agent)
    }

    /// Write the sends that reached the room but not the database (
    /// docs/src/design/send.md#a-send-never-locks-hermes-out, [`HermesStore::complete_pending`]), each exactly once; how many
    /// were written. Errors: kind `busy` past the write deadline, kind
    /// `store`.
    pub fn complete_pending(&self) -> Result<usize, Failure> {
        Ok(self.store()?.complete_pending()?.len())
    }

    /// The sends of `agent` (or every agent) not (yet) in the history
    /// (docs/src/design/send.md#a-send-never-locks-hermes-out), after writing those that can be written now
    /// ([`HermesStore::complete_pending`]): interrupted or timed-out posts
    /// the room may have, and delivered ones the database stayed too busy to
    /// take. Errors as [`Bridge::complete_pending`].
    pub fn pending_sends(&self, agent: Option<&str>) -> Result<Vec<PendingReport>, Failure> {
        let mut store = self.store()?;
        store.complete_pending()?;
        let pending = store.pending_sends()?;
        Ok(pending
            .into_iter()
            .filter(|p| agent.is_none_or(|a| p.agent == a))
            .map(PendingReport::from)
            .collect())
    }

    /// Forget the pending sends of `agent` (or every agent); how many.
    /// Delivered ones are not forgotten unwritten: call
    /// [`Bridge::complete_pending`] first (the CLI's `clear` does).
    pub fn clear_pending(&self, agent: Option<&str>) -> Result<usize, Failure> {
        self.store()?.clear_pending(agent)
    }

    /// What `active` shows (the CLI's and the binding's): every record's
    /// status ([`Bridge::active`]) and the sends not yet in the history
    /// ([`Bridge::pending_sends`], delivered ones written first).
    pub fn active_and_pending(
        &self,
        agent: Option<&str>,
    ) -> Result<(Vec<RecordStatus>, Vec<PendingReport>), Failure> {
        // Pending first: writing a delivered send writes its record too,
        // which the statuses must then show.
        let pending = self.pending_sends(agent)?;
        Ok((self.active(agent)?, pending))
    }

    /// What `clear` does (the CLI's and the binding's): the delivered sends
    /// are written first (the room has them, so the history must too), then
    /// the records of `agent` (or every agent) deleted and its other pending
    /// sends forgotten. Returns the record keys deleted and how many pending
    /// sends were forgotten.
    pub fn clear_all(&self, agent: Option<&str>) -> Result<(Vec<String>, usize), Failure> {
        self.complete_pending()?;
        let keys = self.clear(agent)?;
        Ok((keys, self.clear_pending(agent)?))
    }

    /// The loop guard: whether `agent`'s bot should answer `message`, and
    /// why (WIT `admit`, docs/src/design/loop-guard.md).
    pub fn admit(&self, agent: &str, message: &RoomMessage) -> Result<Admission, Failure> {
        self.instance(false)?.admit(agent, message)
    }

    /// Whether a room message from `sender` is `agent`'s own echo.
    pub fn is_own(&self, agent: &str, sender: &str) -> Result<bool, Failure> {
        self.instance(false)?.is_own_message(agent, sender)
    }
}

/// `$HERMES_HOME/state.db`, `HERMES_HOME` defaulting to `~/.hermes`
/// (Hermes's own rule): the database a [`Bridge`] opens by default.
pub fn default_db_path() -> PathBuf {
    HermesStore::default_path()
}

/// Create an empty Hermes-compatible `state.db` at `path` (the v31 schema,
/// journal mode DELETE), and its folder when missing, as Hermes creates
/// `HERMES_HOME` (CLI `init-db`).
///
/// Errors: kind `bad-input` when `path` is a folder or a file that is not
/// empty (never overwritten); kind `store` when it cannot be created (a
/// file this call created is removed again).
pub fn init_db(path: &Path) -> Result<(), Failure> {
    HermesStore::init(path).map(drop)
}

/// Open Hermes's `state.db` at `path` as every command does, change
/// nothing, and say its `schema_version` (`None`: a database without that
/// table, an early Hermes): whether a command could work on it.
///
/// Errors (kind `store`): no file there, not SQLite, a SQLite file without
/// Hermes's `sessions` and `messages` tables; kind `busy` as
/// [`HermesStore::open`].
pub fn db_schema(path: &Path) -> Result<Option<i64>, Failure> {
    HermesStore::open(path)?.schema_version()
}

/// Refuse a session id Hermes's API server would refuse
/// (`session_switch_contract::ids`): no gateway turn runs on it, so a
/// decision or history for it could only mislead (`resolve ""` answering
/// "loading it unchanged" would name a session no bot loads). Errors: kind
/// `bad-input`.
pub fn refuse_unusable(session_id: &str) -> Result<(), Failure> {
    match api_session_id_problem(session_id) {
        Some(problem) => Err(Failure::bad_input(format!(
            "session id {session_id:?} {problem}: Hermes's API server refuses it, so no \
             gateway loads it; nothing was read"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
