//! `session_switch._native`: the Rust host ([`session_switch::Bridge`]) for
//! Python. A thin layer: it converts arguments and answers (the CLI's JSON
//! shapes, [`session_switch::json`]) and releases the GIL while the host
//! works; every rule stays in the policy, every guard in the Rust host.
//!
//! Threads: one [`Bridge`] serves any number of Python threads. Each call
//! takes a [`PolicyInstance`] (its own wasmtime store and `state.db`
//! connection) from a pool, or opens one, and puts it back afterwards; so
//! no two threads ever share a store, and a gateway's executor threads
//! run in parallel.

use pyo3::IntoPyObjectExt;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use serde_json::Value;
use session_switch::runtime::{
    CacheMode, PolicyInstance, RoomMessage, WatchOptions, Watcher, tag, untag,
};
use session_switch::store::{HermesStore, hermes_home};
use session_switch::{Bridge as RustBridge, BridgeOptions, Failure, HistoryRow, json, wiring};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Mutex;

create_exception!(
    _native,
    SessionSwitchError,
    PyException,
    "A failure of session-switch; `.kind` is its class (`bad-input`, `unknown-agent`, \
     `not-accepted`, `busy`, `unknown-outcome`, `store`, `transport`, `policy`), \
     `.message` one line for a person."
);

fn error(failure: Failure) -> PyErr {
    Python::attach(|py| {
        let err = SessionSwitchError::new_err(failure.message.clone());
        let value = err.value(py);
        let _ = value.setattr("kind", failure.kind.as_str());
        let _ = value.setattr("message", failure.message);
        err
    })
}

/// A JSON value as the Python object `json.loads` would give.
fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_bound_py_any(py)?,
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.into_bound_py_any(py)?,
            (None, Some(f)) => f.into_bound_py_any(py)?,
            (None, None) => n.to_string().into_bound_py_any(py)?,
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// The session-switch host of one Hermes home: the config, `state.db` and
/// the policy (embedded, or a file that is hot-swapped when it changes).
#[pyclass(frozen, module = "session_switch._native")]
struct Bridge {
    bridge: RustBridge,
    /// Instances not in use (without a transport: `send` opens its own).
    pool: Mutex<Vec<PolicyInstance>>,
    /// Connections for [`Bridge::tag_messages`]'s read of the bridge's rows.
    stores: Mutex<Vec<HermesStore>>,
    watcher: Mutex<Option<Watcher>>,
    home: PathBuf,
}

impl Bridge {
    /// Run `f` on a pooled instance with the GIL released.
    fn call<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut PolicyInstance) -> Result<R, Failure> + Send,
    ) -> PyResult<R> {
        py.detach(|| {
            let pooled = self.pool.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let mut instance = match pooled {
                Some(instance) => instance,
                None => self.bridge.instance(false)?,
            };
            let result = f(&mut instance);
            // A failed call leaves the instance usable: a trap threw its
            // store away, the next call makes a fresh one.
            self.pool
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(instance);
            result
        })
        .map_err(error)
    }

    fn bridge_rows(
        &self,
        session_id: &str,
        agent: &str,
    ) -> Result<Vec<(i64, String, f64)>, Failure> {
        let pooled = self.stores.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let store = match pooled {
            Some(store) => store,
            None => HermesStore::open(self.bridge.db_path())?,
        };
        let rows = store.bridge_rows(session_id, agent);
        self.stores
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(store);
        rows
    }
}

#[pymethods]
impl Bridge {
    /// Open the host of a Hermes home, with the CLI's defaults: `home`
    /// `$HERMES_HOME` (else `~/.hermes`), `config` `home/session-switch.toml`,
    /// `db` `home/state.db`, `policy` the config's `[policy] path`, else the
    /// embedded policy. A policy file is watched and hot-swapped (`watch`).
    #[new]
    #[pyo3(signature = (home=None, *, config=None, db=None, policy=None, cache_dir=None, watch=true))]
    fn new(
        py: Python<'_>,
        home: Option<PathBuf>,
        config: Option<PathBuf>,
        db: Option<PathBuf>,
        policy: Option<PathBuf>,
        cache_dir: Option<PathBuf>,
        watch: bool,
    ) -> PyResult<Self> {
        let home = home.unwrap_or_else(hermes_home);
        let options = BridgeOptions {
            config: Some(config.unwrap_or_else(|| home.join("session-switch.toml"))),
            db: Some(db.unwrap_or_else(|| home.join("state.db"))),
            policy,
            cache: cache_dir.map_or(CacheMode::Default, CacheMode::Dir),
        };
        let bridge = py.detach(|| RustBridge::open(options)).map_err(error)?;
        let watcher = match (watch, bridge.policy_file()) {
            (true, Some(path)) => Some(bridge.policy().watch(
                path,
                WatchOptions {
                    settings: Some(wiring::settings(bridge.config())),
                    ..WatchOptions::default()
                },
            )),
            _ => None,
        };
        Ok(Self {
            bridge,
            pool: Mutex::new(Vec::new()),
            stores: Mutex::new(Vec::new()),
            watcher: Mutex::new(watcher),
            home,
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
        self.bridge.db_path().to_path_buf()
    }

    /// The config file read.
    #[getter]
    fn config_path(&self) -> Option<PathBuf> {
        self.bridge.config().path.clone()
    }

    /// The policy file in use; `None` for the embedded policy.
    #[getter]
    fn policy_file(&self) -> Option<PathBuf> {
        self.bridge.policy_file().map(PathBuf::from)
    }

    /// The configured agents' names, in file order.
    #[getter]
    fn agents(&self) -> Vec<String> {
        self.bridge
            .config()
            .agents
            .iter()
            .map(|a| a.name.clone())
            .collect()
    }

    /// The agent whose XMPP sessions include `session_id`, else `None`.
    fn agent_for_session(&self, session_id: &str) -> Option<String> {
        self.bridge
            .config()
            .agents
            .iter()
            .find(|a| a.sessions.iter().any(|s| s == session_id))
            .map(|a| a.name.clone())
    }

    /// The serving policy's version, e.g. `session-switch-policy 0.1.0`.
    fn version(&self) -> String {
        self.bridge.policy().version()
    }

    /// Which session `agent`'s bot loads for `session_id`: a dict with
    /// `session_id`, `redirected`, `reason`, `detail` (CLI `resolve --json`).
    fn resolve<'py>(
        &self,
        py: Python<'py>,
        agent: &str,
        session_id: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let decision = self.call(py, |i| i.resolve(agent, session_id))?;
        to_py(py, &json::decision(&decision))
    }

    /// The decision and the chosen session's history with the `[YOU] ` edits
    /// applied (CLI `context --json`); `limit`: the last rows only.
    #[pyo3(signature = (agent, session_id, limit=None))]
    fn context<'py>(
        &self,
        py: Python<'py>,
        agent: &str,
        session_id: &str,
        limit: Option<u32>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let answer = self.call(py, |i| i.context(agent, session_id, limit))?;
        to_py(py, &json::context(&answer))
    }

    /// Post `text` to the room as `agent` and record CLI session
    /// `cli_session_id` (CLI `send --json`).
    fn send<'py>(
        &self,
        py: Python<'py>,
        agent: &str,
        cli_session_id: &str,
        text: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let receipt = py
            .detach(|| self.bridge.send(agent, cli_session_id, text))
            .map_err(error)?;
        to_py(py, &json::receipt(&receipt))
    }

    /// The records of `agent` (or of every agent), each a dict as CLI
    /// `active --json`.
    #[pyo3(signature = (agent=None))]
    fn active<'py>(&self, py: Python<'py>, agent: Option<&str>) -> PyResult<Bound<'py, PyAny>> {
        let statuses = self.call(py, |i| i.active(agent))?;
        let list: Vec<Value> = statuses.iter().map(json::record_status).collect();
        to_py(py, &Value::Array(list))
    }

    /// Delete the records of `agent` (or of every agent); the keys removed.
    #[pyo3(signature = (agent=None))]
    fn clear(&self, py: Python<'_>, agent: Option<&str>) -> PyResult<Vec<String>> {
        self.call(py, |i| i.clear(agent))
    }

    /// Whether a room message from `sender` is `agent`'s own echo.
    fn is_own(&self, py: Python<'_>, agent: &str, sender: &str) -> PyResult<bool> {
        self.call(py, |i| i.is_own_message(agent, sender))
    }

    /// The loop guard (CLI `admit --json`): whether `agent`'s bot should
    /// answer one live room message from `occupant` (`room/nick`), and why;
    /// a dict with `reply`, `reason`, `hops`, `detail`. A thin call over
    /// `Bridge::admit`.
    #[pyo3(signature = (agent, occupant, body, *, jid=None, delayed=false, human_origin=false))]
    #[allow(clippy::too_many_arguments)]
    fn admit<'py>(
        &self,
        py: Python<'py>,
        agent: &str,
        occupant: String,
        body: String,
        jid: Option<String>,
        delayed: bool,
        human_origin: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let message = RoomMessage {
            occupant,
            jid,
            body,
            delayed,
            human_origin,
        };
        let admission = py
            .detach(|| self.bridge.admit(agent, &message))
            .map_err(error)?;
        to_py(py, &json::admission(&admission))
    }

    /// Swap in the policy file `path` (default: the one in use) if it passes
    /// every check; the old policy keeps serving on any failure (raised).
    /// Returns the new version, or `None` when the bytes are unchanged.
    #[pyo3(signature = (path=None))]
    fn reload(&self, py: Python<'_>, path: Option<PathBuf>) -> PyResult<Option<String>> {
        let path = match path.or_else(|| self.bridge.policy_file().map(PathBuf::from)) {
            Some(path) => path,
            None => {
                return Err(error(Failure::bad_input(
                    "the embedded policy has no file to reload: pass a path".to_owned(),
                )));
            }
        };
        let settings = wiring::settings(self.bridge.config());
        py.detach(|| self.bridge.policy().reload(&path, Some(&settings)))
            .map(|report| report.map(|r| r.info.version))
            .map_err(error)
    }

    /// What the file watcher has done: `swaps`, `rejections`,
    /// `last_rejection` (`None` without a watcher).
    fn watch_stats<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let guard = self.watcher.lock().unwrap_or_else(|e| e.into_inner());
        let Some(watcher) = guard.as_ref() else {
            return Ok(None);
        };
        let stats = watcher.stats();
        let value = serde_json::json!({
            "swaps": stats.swaps,
            "rejections": stats.rejections,
            "last_rejection": stats.last_rejection,
        });
        to_py(py, &value).map(Some)
    }

    /// Stop watching the policy file.
    fn close(&self, py: Python<'_>) {
        let watcher = self
            .watcher
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(watcher) = watcher {
            py.detach(|| watcher.stop());
        }
    }

    /// Apply the `[YOU] ` edits to `messages`, Hermes's own loader output
    /// for `session_id` (dicts with `role`, `content`, `timestamp`, maybe
    /// `api_content`), in place; returns how many rows changed.
    ///
    /// The policy sees each row's text as Hermes would send it
    /// (`api_content` when present, else `content`, after Hermes's
    /// sanitising) and whether the bridge wrote it; the bridge's rows are
    /// recognised by role and stored timestamp, never by position, as the
    /// loader drops rows and carries no ids. An edit applies to `content`
    /// and `api_content` alike. Rows whose content is not text
    /// (multimodal lists) are shown to the policy as empty and not edited.
    fn tag_messages(
        &self,
        py: Python<'_>,
        agent: &str,
        session_id: &str,
        messages: &Bound<'_, PyList>,
    ) -> PyResult<usize> {
        let ours: HashSet<(String, u64)> = py
            .detach(|| self.bridge_rows(session_id, agent))
            .map_err(error)?
            .into_iter()
            .map(|(_, role, ts)| (role, ts.to_bits()))
            .collect();
        let mut rows = Vec::with_capacity(messages.len());
        let mut texts: Vec<(Option<String>, Option<String>)> = Vec::with_capacity(messages.len());
        for (index, item) in messages.iter().enumerate() {
            let msg = item.cast::<PyDict>()?;
            let role: String = match msg.get_item("role")? {
                Some(r) => r.extract()?,
                None => String::new(),
            };
            let text_of = |key: &str| -> PyResult<Option<String>> {
                Ok(match msg.get_item(key)? {
                    Some(v) if v.is_instance_of::<PyString>() => Some(v.extract()?),
                    _ => None,
                })
            };
            let content = text_of("content")?;
            let api_content = text_of("api_content")?;
            let bridge_wrote = !ours.is_empty()
                && match msg.get_item("timestamp")? {
                    Some(ts) => ts
                        .extract::<f64>()
                        .is_ok_and(|ts| ours.contains(&(role.clone(), ts.to_bits()))),
                    None => false,
                };
            rows.push(HistoryRow {
                id: index as i64,
                role,
                content: api_content
                    .clone()
                    .or_else(|| content.clone())
                    .unwrap_or_default(),
                tool_calls: None,
                tool_call_id: None,
                tool_name: None,
                bridge_wrote,
                loaded: None,
            });
            texts.push((content, api_content));
        }
        let before: Vec<String> = rows.iter().map(|r| r.content.clone()).collect();
        let tagged = self.call(py, |i| i.tag(agent, rows))?;
        let mut changed = 0;
        for (index, (row, old)) in tagged.iter().zip(&before).enumerate() {
            if row.content == *old {
                continue;
            }
            // tag() always starts the text with the tag; untag() never does.
            let edit = |text: &str| -> String {
                if row.content.starts_with(session_switch::runtime::YOU_TAG) {
                    tag(text)
                } else {
                    untag(text).to_owned()
                }
            };
            let msg = messages.get_item(index)?.cast_into::<PyDict>()?;
            let (content, api_content) = &texts[index];
            if let Some(text) = content {
                msg.set_item("content", edit(text))?;
            }
            if let Some(text) = api_content {
                msg.set_item("api_content", edit(text))?;
            }
            changed += 1;
        }
        Ok(changed)
    }
}

/// Where this module was built from: its version and whether SQLite is the
/// process's own (always, for this module: it links no SQLite of its own).
#[pyfunction]
fn build_info<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
    let value = serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "sqlite": "system",
        "sqlite_version": rusqlite_version(),
    });
    to_py(py, &value)
}

fn rusqlite_version() -> String {
    session_switch::store::sqlite_version()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // tracing events (policy swapped or rejected, policy failures) reach
    // Python's `logging` through the `log` crate.
    let _ = pyo3_log::try_init();
    // No signal handlers of wasmtime's: Python's faulthandler (which Hermes
    // enables) would take a policy trap's signal and abort the process.
    session_switch::runtime::disable_signal_traps();
    m.add(
        "SessionSwitchError",
        m.py().get_type::<SessionSwitchError>(),
    )?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<Bridge>()?;
    m.add_function(wrap_pyfunction!(build_info, m)?)?;
    Ok(())
}
