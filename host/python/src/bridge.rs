//! The `Bridge` class: the host of one Hermes home ([`session_switch::Bridge`])
//! for Python threads. Each call converts its arguments, releases the GIL,
//! runs on a pooled policy instance, and converts the answer; every rule
//! stays in the policy, every guard in the Rust host.

use crate::convert::{self, PathArg, Text, row_limit, to_py};
use crate::error::error;
use crate::pool::Pool;
use crate::tagging;
use crate::watch::Watch;
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyList};
use session_switch::runtime::{PolicyInstance, ReplyTarget, RoomMessage};
use session_switch::{
    Bridge as Host, BridgeOptions, Failure, Reads, hermes_home, json, refuse_unusable,
};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

/// The session-switch host of one Hermes home: the config, `state.db` and
/// the policy (embedded, or a file that is hot-swapped when it changes).
#[pyclass(frozen, module = "session_switch._native")]
pub struct Bridge {
    host: Host,
    /// Instances not in use (without a transport: `send` opens its own).
    instances: Pool<PolicyInstance>,
    watch: Watch,
    home: PathBuf,
    /// The compression continuations [`Bridge::agent_for_session`] found.
    continuations: Mutex<HashSet<String>>,
}

impl Bridge {
    /// Run `f` on a pooled instance with the GIL released.
    pub(crate) fn call<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut PolicyInstance) -> Result<R, Failure> + Send,
    ) -> Result<R, Failure> {
        py.detach(|| self.instances.with(|| self.host.instance(false), f))
    }

    /// `f` on the reads of a pooled instance: a request's plain reads share
    /// the connection its policy calls use, so after Hermes's commit of a
    /// turn SQLite refills one page cache per request, not one per
    /// connection ([`Host::reads`]).
    pub(crate) fn read<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Reads<'_>) -> Result<R, Failure> + Send,
    ) -> Result<R, Failure> {
        self.call(py, |instance| self.host.reads(instance, f))
    }
}

#[pymethods]
impl Bridge {
    /// Open the host of a Hermes home, with the CLI's defaults: `home`
    /// `$HERMES_HOME` (else `~/.hermes`), `config` `home/session-switch.toml`,
    /// `db` `home/state.db`, `policy` the config's `[policy] path`, else the
    /// embedded policy. A policy file is watched and hot-swapped (`watch`).
    #[new]
    #[pyo3(signature = (home=None, *, config=None, db=None, policy=None, watch=true))]
    fn new(
        py: Python<'_>,
        home: Option<PathArg>,
        config: Option<PathArg>,
        db: Option<PathArg>,
        policy: Option<PathArg>,
        watch: bool,
    ) -> PyResult<Self> {
        crate::serve_python();
        let [home, config, db, policy] = [home, config, db, policy].map(|p| p.map(|p| p.0));
        let home = home.unwrap_or_else(hermes_home);
        let options = BridgeOptions {
            config: Some(config.unwrap_or_else(|| home.join("session-switch.toml"))),
            db: Some(db.unwrap_or_else(|| home.join("state.db"))),
            policy,
        };
        let host = py.detach(|| Host::open(options)).map_err(error)?;
        let watch = Watch::new(if watch { host.watch_policy() } else { None });
        Ok(Self {
            host,
            instances: Pool::new(),
            watch,
            home,
            continuations: Mutex::default(),
        })
    }

    /// The Hermes home this host serves.
    #[getter]
    fn home(&self) -> PathBuf {
        self.home.clone()
    }

    /// The path of `state.db`.
    #[getter]
    fn db_path(&self) -> PathBuf {
        self.host.db_path().to_path_buf()
    }

    /// The config file read.
    #[getter]
    fn config_path(&self) -> Option<PathBuf> {
        self.host.config().path.clone()
    }

    /// The policy file in use; `None` for the embedded policy.
    #[getter]
    fn policy_file(&self) -> Option<PathBuf> {
        self.host.policy_file().map(PathBuf::from)
    }

    /// The configured agents' names, in file order.
    #[getter]
    fn agents(&self) -> Vec<String> {
        self.host
            .config()
            .agents
            .iter()
            .map(|a| a.name.clone())
            .collect()
    }

    /// The agent whose XMPP sessions include `session_id`, else `None`: a
    /// session the config names, or on the v31 schema a compression
    /// continuation of one (Hermes's API server runs a compressed session's
    /// turns on its live tip). A continuation seen for the first time
    /// retires the pooled instances, whose settings list the continuations
    /// that existed when they were made. Raises `SessionSwitchError` (kind
    /// `busy` or `store`) when the chain cannot be read.
    fn agent_for_session(&self, py: Python<'_>, session_id: Text) -> PyResult<Option<String>> {
        // The common case, without the GIL dance or a connection.
        if let Some(agent) = self.host.configured_agent(&session_id) {
            return Ok(Some(agent.to_owned()));
        }
        let found = self
            .read(py, |reads| {
                let agent = self.host.agent_for_session(reads, &session_id)?;
                Ok(agent.map(str::to_owned))
            })
            .map_err(error)?;
        if found.is_some() {
            let mut seen = self.continuations.lock().unwrap_or_else(|e| e.into_inner());
            if seen.insert(session_id.to_owned()) {
                self.instances.renew();
            }
        }
        Ok(found)
    }

    /// Whether any session of `state.db` names `session_id` as its parent.
    /// Without one, Hermes's own walks from it to a continuation (v31
    /// `resolve_resume_session_id`, `get_compression_tip`) end at
    /// `session_id` itself, so the plugin need not ask them. Raises
    /// `SessionSwitchError` (kind `busy`/`store`) when it cannot be read.
    fn has_child_sessions(&self, py: Python<'_>, session_id: Text) -> PyResult<bool> {
        self.read(py, |reads| reads.has_child_sessions(&session_id))
            .map_err(error)
    }

    /// The serving policy's version, e.g. `session-switch-policy 0.1.0`.
    fn version(&self) -> String {
        self.host.policy().version()
    }

    /// Which session `agent`'s bot loads for `session_id`: a dict with
    /// `session_id`, `redirected`, `reason`, `detail`, `valid_until` (CLI
    /// `resolve --json`). A decision that still holds is served by the
    /// pooled instance's memo without running the policy (docs/src/embedding/rust.md,
    /// docs/src/design/where-the-time-goes.md). An id Hermes's API server refuses (empty,
    /// path-unsafe, …) raises kind `bad-input`, as the CLI exits 2.
    fn resolve<'py>(
        &self,
        py: Python<'py>,
        agent: Text,
        session_id: Text,
    ) -> PyResult<Bound<'py, PyAny>> {
        refuse_unusable(&session_id).map_err(error)?;
        let decision = self
            .call(py, |i| i.resolve(&agent, &session_id))
            .map_err(error)?;
        convert::decision(py, &decision)
    }

    /// The decision and the chosen session's history with the `[YOU] ` edits
    /// applied (CLI `context --json`); `limit`: the last rows only (an int
    /// from 0 to 2³²−1, else `bad-input`, as the CLI's `--limit`).
    #[pyo3(signature = (agent, session_id, limit=None))]
    fn context<'py>(
        &self,
        py: Python<'py>,
        agent: Text,
        session_id: Text,
        limit: Option<Bound<'py, PyInt>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let limit = limit.map(|n| row_limit(&n)).transpose()?;
        refuse_unusable(&session_id).map_err(error)?;
        let answer = self
            .call(py, |i| i.context(&agent, &session_id, limit))
            .map_err(error)?;
        to_py(py, &json::context(&answer))
    }

    /// Post `text` to the room as `agent` and record CLI session
    /// `cli_session_id` (CLI `send --json`).
    fn send<'py>(
        &self,
        py: Python<'py>,
        agent: Text,
        cli_session_id: Text,
        text: Text,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (receipt, history_session) = py
            .detach(|| self.host.send_noting(&agent, &cli_session_id, &text))
            .map_err(error)?;
        to_py(py, &json::receipt(&receipt, &history_session))
    }

    /// The records of `agent` (or of every agent), then its sends not yet in
    /// the history (`"pending_send": True`; delivered ones are written
    /// first), each a dict as CLI `active --json`.
    #[pyo3(signature = (agent=None))]
    fn active<'py>(&self, py: Python<'py>, agent: Option<Text>) -> PyResult<Bound<'py, PyAny>> {
        let agent = agent.as_deref();
        let (statuses, pending) = py
            .detach(|| self.host.active_and_pending(agent))
            .map_err(error)?;
        to_py(py, &json::active(&statuses, &pending))
    }

    /// Delete the records of `agent` (or of every agent) and forget its
    /// pending sends (delivered ones are written first), as CLI `clear`:
    /// `{"cleared": [keys], "pending_sends_cleared": n}`.
    #[pyo3(signature = (agent=None))]
    fn clear<'py>(&self, py: Python<'py>, agent: Option<Text>) -> PyResult<Bound<'py, PyAny>> {
        let agent = agent.as_deref();
        let (keys, pending) = py.detach(|| self.host.clear_all(agent)).map_err(error)?;
        to_py(py, &json::cleared(&keys, pending))
    }

    /// Whether a room message from `sender` is `agent`'s own echo.
    fn is_own(&self, py: Python<'_>, agent: Text, sender: Text) -> PyResult<bool> {
        self.call(py, |i| i.is_own_message(&agent, &sender))
            .map_err(error)
    }

    /// The loop guard (CLI `admit --json`, docs/src/design/loop-guard.md): whether `agent`'s
    /// bot should answer one live room message from `occupant`
    /// (`room/nick` as the room shows it; `jid` the sender's real bare JID
    /// where the room exposes it), and why: a dict with `reply`, `reason`,
    /// `stop`, `heard`, `hops`, `detail`. `delayed`: the message is
    /// replayed history; `human_origin`: it carries the
    /// human-origin marker of a person's send; `stanza_id`: the room's XEP-0359 id of it;
    /// `reply_to` / `reply_to_id`: the sender (`room/nick` or a nick) and
    /// the stanza-id of the message it replies to (XEP-0461).
    #[pyo3(signature = (
        agent, occupant, body, *, jid=None, delayed=false, human_origin=false,
        stanza_id=None, reply_to=None, reply_to_id=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn admit<'py>(
        &self,
        py: Python<'py>,
        agent: Text,
        occupant: Text,
        body: Text,
        jid: Option<Text>,
        delayed: bool,
        human_origin: bool,
        stanza_id: Option<Text>,
        reply_to: Option<Text>,
        reply_to_id: Option<Text>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let reply_to = (reply_to.is_some() || reply_to_id.is_some()).then(|| ReplyTarget {
            to: reply_to.map(|t| t.to_owned()),
            id: reply_to_id.map(|t| t.to_owned()),
        });
        let message = RoomMessage {
            occupant: occupant.to_owned(),
            jid: jid.map(|jid| jid.to_owned()),
            body: body.to_owned(),
            delayed,
            human_origin,
            stanza_id: stanza_id.map(|s| s.to_owned()),
            reply_to,
            caught_up: false,
        };
        let admission = py
            .detach(|| self.host.admit(&agent, &message))
            .map_err(error)?;
        to_py(py, &json::admission(&admission))
    }

    /// Swap in the policy file `path` (default: the one in use) if it passes
    /// every check; the old policy keeps serving on any failure (raised).
    /// Returns the new version, or `None` when the bytes are unchanged.
    #[pyo3(signature = (path=None))]
    fn reload(&self, py: Python<'_>, path: Option<PathArg>) -> PyResult<Option<String>> {
        let path = path.map(|p| p.0);
        py.detach(|| self.host.reload_policy(path.as_deref()))
            .map_err(error)
    }

    /// What the file watcher has done: `swaps`, `rejections`,
    /// `last_rejection` (`None` without a watcher).
    fn watch_stats<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.watch
            .stats()
            .map(|stats| to_py(py, &stats))
            .transpose()
    }

    /// Stop watching the policy file.
    fn close(&self, py: Python<'_>) {
        self.watch.stop(py);
    }

    /// Apply the `[YOU] ` edits to `messages`, Hermes's own loader output
    /// for `session_id` (dicts with `role`, `content` (a string, a list of
    /// parts, or `None`), `timestamp`, maybe `api_content`), in place;
    /// returns how many messages changed.
    ///
    /// The policy sees each message's text as Hermes would send it
    /// (`api_content` when it is a non-empty string on a user or assistant
    /// message, else the content: a string, or a list's first `{"type":
    /// "text"}` part) and whether a send of ours wrote the row; the sent rows are
    /// recognised by role and stored timestamp, never by position, as the
    /// loader drops rows and carries no ids. An edit applies to the content's
    /// text and a non-empty `api_content` alike. Raises `SessionSwitchError`
    /// (`bad-input` for an id Hermes's API server refuses, as `resolve`;
    /// `store`, `policy`) and leaves `messages` as they were.
    fn tag_messages(
        &self,
        py: Python<'_>,
        agent: Text,
        session_id: Text,
        messages: &Bound<'_, PyList>,
    ) -> PyResult<usize> {
        refuse_unusable(&session_id).map_err(error)?;
        let ours = self
            .read(py, |reads| reads.sent_rows(&session_id, &agent))
            .map_err(error)?;
        let chars = self.host.policy().options().tag_prefix_chars;
        tagging::tag_messages(py, &ours, chars, messages, |summaries| {
            self.call(py, |i| i.tag_summaries(&agent, summaries))
        })
    }

    /// For `make bench` (bench/driver.py): `resolve` run `n` times in Rust
    /// on one pooled instance with the GIL released, no Python objects
    /// made; nanoseconds per call. Set beside the time of `resolve` from
    /// Python, it splits a call into the host's share and the binding's.
    fn _bench_resolve(
        &self,
        py: Python<'_>,
        agent: Text,
        session_id: Text,
        n: u32,
    ) -> PyResult<f64> {
        self.call(py, |i| {
            let start = Instant::now();
            for _ in 0..n {
                i.resolve(&agent, &session_id)?;
            }
            Ok(start.elapsed().as_nanos() as f64 / f64::from(n.max(1)))
        })
        .map_err(error)
    }
}
