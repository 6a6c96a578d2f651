//! What the benches share: the databases of the run (built by
//! `bench/make_dbs.py`, listed in its `manifest.json`), the config, and the
//! "native" reference — the policy's own rules compiled into the host
//! (`session_switch_policy::Rules`) over [`HermesStore`], the floor of
//! this design.

#![allow(dead_code)] // each bench uses part of this module

use session_switch::HistoryRow;
use session_switch::config::Config;
use session_switch::from_config;
use session_switch::runtime::{tag, untag};
use session_switch_policy as native;
use session_switch_store::HermesStore;
use session_switch_tests::wit_convert::{failure_to_guest, settings_to_guest};
use session_switch_tests::workspace_root;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// One database of the run.
#[derive(Clone, Debug)]
pub struct Db {
    /// `v22-1000`: fixture schema and history rows.
    pub name: String,
    pub rows: u32,
    pub path: PathBuf,
}

/// The run's databases and what to ask of them (`manifest.json`).
#[derive(Clone, Debug)]
pub struct Run {
    pub dir: PathBuf,
    pub config: Config,
    pub config_path: PathBuf,
    pub agent: String,
    /// The agent's XMPP session the gateway asks about.
    pub session: String,
    /// The CLI session the records name (the redirect target).
    pub cli_session: String,
    pub dbs: Vec<Db>,
}

/// The run of `$SSW_BENCH_DIR` (the driver builds it), else a new one in a
/// temp dir, built with `python3 bench/make_dbs.py` from the fixtures of
/// `$HERMES_FIXTURES` (default `../shared/fixtures/hermes`). Records are
/// renewed first, so the redirect path is taken. Panics with what to do.
pub fn run() -> Run {
    let root = workspace_root();
    let script = root.join("bench/make_dbs.py");
    let dir = match std::env::var_os("SSW_BENCH_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            python(&script, &[dir.as_os_str(), "--restamp".as_ref()]);
            dir
        }
        None => {
            let dir = std::env::temp_dir().join(format!("ssw-bench-{}", std::process::id()));
            let fixtures = std::env::var_os("HERMES_FIXTURES")
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join("../shared/fixtures/hermes"));
            python(
                &script,
                &[dir.as_os_str(), "--fixtures".as_ref(), fixtures.as_os_str()],
            );
            dir
        }
    };
    let manifest_path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&manifest_path)
        .unwrap_or_else(|e| panic!("{}: {e}", manifest_path.display()));
    let m: serde_json::Value = serde_json::from_str(&text).expect("manifest.json is JSON");
    let s = |key: &str| m[key].as_str().expect("manifest string").to_owned();
    let config_path = PathBuf::from(s("config"));
    let config = Config::load(&config_path).unwrap_or_else(|f| panic!("{}", f.message));
    let dbs = m["dbs"]
        .as_array()
        .expect("manifest dbs")
        .iter()
        .map(|d| Db {
            name: d["name"].as_str().unwrap().to_owned(),
            rows: d["rows"].as_u64().unwrap() as u32,
            path: PathBuf::from(d["path"].as_str().unwrap()),
        })
        .collect();
    Run {
        dir,
        config,
        config_path,
        agent: s("agent"),
        session: s("session"),
        cli_session: s("cli_session"),
        dbs,
    }
}

fn python(script: &Path, args: &[&std::ffi::OsStr]) {
    let out = Command::new("python3")
        .arg(script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run python3 {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The host imports over [`HermesStore`] for the natively compiled rules:
/// what the component's host does, minus the boundary. Keeps the full rows
/// of the last `history` call, as the component's host does.
pub struct NativeHost {
    pub store: HermesStore,
    pub rows: Vec<HistoryRow>,
}

impl native::Host for NativeHost {
    fn meta_get(&mut self, key: &str) -> Result<Option<String>, native::Failure> {
        self.store.meta_get(key).map_err(|f| failure_to_guest(&f))
    }
    fn meta_set(&mut self, key: &str, value: &str) -> Result<(), native::Failure> {
        self.store
            .meta_set(key, value)
            .map_err(|f| failure_to_guest(&f))
    }
    fn meta_delete(&mut self, key: &str) -> Result<bool, native::Failure> {
        self.store
            .meta_delete(key)
            .map_err(|f| failure_to_guest(&f))
    }
    fn session_exists(&mut self, session_id: &str) -> Result<bool, native::Failure> {
        self.store
            .session_exists(session_id)
            .map_err(|f| failure_to_guest(&f))
    }
    fn history(
        &mut self,
        session_id: &str,
        agent: &str,
        limit: Option<u32>,
        prefix_chars: u32,
    ) -> Result<native::RowSummaries, native::Failure> {
        let rows = self
            .store
            .history(session_id, agent, limit)
            .map_err(|f| failure_to_guest(&f))?;
        let summaries = session_switch_tests::fake_host::summaries(&rows, prefix_chars);
        self.rows = rows;
        Ok(summaries)
    }
    fn now(&mut self) -> f64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    }
    fn send(&mut self, _plan: &native::SendPlan) -> Result<native::Sent, native::Failure> {
        Err(native::Failure {
            kind: native::FailureKind::Policy,
            message: "the native bench host does not send".into(),
        })
    }
    fn log(&mut self, _level: native::LogLevel, _message: &str) {}
}

/// The native policy over the database at `path`, configured.
pub fn native_policy(run: &Run, path: &Path) -> native::Rules<NativeHost> {
    let store = HermesStore::open(path).unwrap_or_else(|f| panic!("{}", f.message));
    let mut policy = native::Rules::new(NativeHost {
        store,
        rows: Vec::new(),
    });
    policy
        .configure(settings_to_guest(&from_config::settings(&run.config)))
        .unwrap_or_else(|f| panic!("{}", f.message));
    policy
}

/// Run `f` inside one read snapshot of the store, as the runtime does
/// around a read-only policy call (`HermesStore::begin_read`).
fn snapshot<T>(
    policy: &mut native::Rules<NativeHost>,
    f: impl FnOnce(&mut native::Rules<NativeHost>) -> T,
) -> T {
    let opened = policy.host().store.begin_read().expect("begin a read");
    let out = f(policy);
    if opened {
        policy.host().store.end_read().expect("end a read");
    }
    out
}

/// `resolve` natively, in one read snapshot like the component's call.
pub fn native_resolve(
    policy: &mut native::Rules<NativeHost>,
    agent: &str,
    session: &str,
) -> native::Decision {
    snapshot(policy, |p| p.resolve(agent, session)).unwrap_or_else(|f| panic!("{}", f.message))
}

/// `context` natively: the rules' decision and edits (in one read
/// snapshot), applied by the host to the rows it kept, exactly as
/// `PolicyInstance::context` does for the component.
pub fn native_context(
    policy: &mut native::Rules<NativeHost>,
    agent: &str,
    session: &str,
) -> (native::Decision, Vec<HistoryRow>) {
    let answer = snapshot(policy, |p| p.context(agent, session, None))
        .unwrap_or_else(|f| panic!("{}", f.message));
    let mut rows = std::mem::take(&mut policy.host_mut().rows);
    for edit in &answer.edits {
        let row = &mut rows[edit.index as usize];
        row.content = match edit.action {
            native::EditAction::Tag => tag(&row.content),
            native::EditAction::Untag => untag(&row.content).to_owned(),
        };
    }
    (answer.decision, rows)
}
