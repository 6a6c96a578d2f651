//! The real Hermes API server (`hermes gateway run`) of a test: Hermes
//! from the registry in the venv `make hermes-venvs` builds
//! (`target/hermes-venv/VERSION`), on a Hermes home of the test's own,
//! against a [`crate::fake_llm::FakeLlm`]. The session-switch plugin is
//! enabled when that venv has it installed (the Python tests install the
//! wheel there). Stopped by its process group on drop.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::workspace_root;

/// The API server's key the tests write into Hermes's `.env`.
pub const API_KEY: &str = "sk-session-switch-test-0123456789";

/// A running Hermes gateway with its API server.
pub struct HermesGateway {
    /// Its Hermes home (`config.yaml`, `.env`, `state.db`, logs).
    pub home: PathBuf,
    /// The API server's loopback port.
    pub port: u16,
    /// Whether the session-switch plugin is enabled in it.
    pub plugin: bool,
    venv: PathBuf,
    child: Option<Child>,
}

/// The venv of Hermes `version`, or `None` (printing why) when `make
/// hermes-venvs` has not built it.
///
/// # Panics
/// When it is missing under `make test` (`SESSION_SWITCH_REQUIRE_EJABBERD=1`,
/// which also builds the venvs), so the bot's tests are never skipped there.
pub fn hermes_venv(version: &str) -> Option<PathBuf> {
    let venv = workspace_root().join("target/hermes-venv").join(version);
    if venv.join("bin/python").is_file() {
        Some(venv)
    } else if std::env::var(crate::xmpp::REQUIRE_ENV).as_deref() == Ok("1") {
        panic!("{} is missing: run `make hermes-venvs`", venv.display());
    } else {
        eprintln!("SKIPPED: {} is missing (make hermes-venvs)", venv.display());
        None
    }
}

impl HermesGateway {
    /// Write `config.yaml` (the fake LLM on `llm_port`) and `.env` (the API
    /// server on a free port with [`API_KEY`]) into `home`, start the
    /// gateway and wait for `/health` (at most 90 s).
    ///
    /// # Panics
    /// When it exits or does not answer in time (with its output).
    pub fn start(venv: &Path, home: &Path, llm_port: u16) -> HermesGateway {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let plugin = Command::new(venv.join("bin/python"))
            .args(["-c", "import session_switch.hermes_plugin"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        let enabled = if plugin {
            "plugins:\n  enabled: [session-switch]\n"
        } else {
            ""
        };
        std::fs::write(
            home.join("config.yaml"),
            format!(
                "model:\n  provider: custom\n  base_url: http://127.0.0.1:{llm_port}/v1\n  \
                 default: fake-model\n  api_key: sk-fake-local\n{enabled}"
            ),
        )
        .unwrap();
        std::fs::write(
            home.join(".env"),
            format!(
                "API_SERVER_ENABLED=true\nAPI_SERVER_KEY={API_KEY}\nAPI_SERVER_HOST=127.0.0.1\n\
                 API_SERVER_PORT={port}\n"
            ),
        )
        .unwrap();
        let mut gateway = HermesGateway {
            home: home.to_path_buf(),
            port,
            plugin,
            venv: venv.to_path_buf(),
            child: None,
        };
        gateway.restart();
        gateway
    }

    /// Start it again (after [`HermesGateway::stop`]) on the same port.
    ///
    /// # Panics
    /// As [`HermesGateway::start`].
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "the gateway is running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.home.join("gateway.log"))
            .unwrap();
        let mut cmd = Command::new(self.venv.join("bin/python"));
        cmd.args([
            "-c",
            "import sys; from hermes_cli.main import main; sys.argv[0] = 'hermes'; \
             sys.exit(main())",
            "gateway",
            "run",
            "-v",
        ])
        .current_dir(&self.home)
        .env("HERMES_HOME", &self.home)
        .env_remove("VIRTUAL_ENV")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log);
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let warmed_before = warm_ups(&self.output());
        let warms_up = warms_up(&self.venv);
        self.child = Some(cmd.spawn().expect("start hermes gateway"));
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                panic!("hermes gateway exited {status}:\n{}", self.output());
            }
            // v31 warms its turn machinery (`import run_agent`) on an
            // executor thread while /health already answers; a turn in that
            // window can meet the half-imported module (500 "cannot import
            // name 'AIAgent' from 'run_agent'", seen under load).
            if self.healthy() && (!warms_up || warm_ups(&self.output()) > warmed_before) {
                return;
            }
            if Instant::now() > deadline {
                let output = self.output();
                self.stop();
                panic!("hermes gateway: not ready (/health, the warm-up) within 90 s:\n{output}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Whether `/health` answers 200 now.
    pub fn healthy(&self) -> bool {
        answers_ok(&format!("http://127.0.0.1:{}/health", self.port))
    }

    /// The base URL of its API server.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Its output so far (`gateway.log`).
    pub fn output(&self) -> String {
        std::fs::read_to_string(self.home.join("gateway.log")).unwrap_or_default()
    }

    /// SIGKILL to its process group at once (a crash: nothing is
    /// finished); [`HermesGateway::restart`] starts it again.
    pub fn kill(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let group = format!("-{}", child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = child.wait();
    }

    /// SIGTERM to its process group; SIGKILL after 20 s.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let group = format!("-{}", child.id());
        let signal = |name: &str| {
            let _ = Command::new("kill").args([name, "--", &group]).status();
        };
        signal("-TERM");
        let deadline = Instant::now() + Duration::from_secs(20);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                signal("-KILL");
                let _ = child.wait();
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for HermesGateway {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether a GET of `url` answers 200 within two seconds.
fn answers_ok(url: &str) -> bool {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(2)))
        .build()
        .into();
    agent.get(url).call().is_ok_and(|r| r.status() == 200)
}

/// What v31's gateway logs when its boot warm-up ends
/// (`gateway/run_startup.py`).
const WARMED: [&str; 2] = ["Turn machinery warmed", "Turn-machinery warm-up failed"];

/// How many boot warm-ups `output` says ended.
fn warm_ups(output: &str) -> usize {
    WARMED.iter().map(|line| output.matches(line).count()).sum()
}

/// Whether the Hermes in `venv` warms its turn machinery after start.
fn warms_up(venv: &Path) -> bool {
    let Ok(libs) = std::fs::read_dir(venv.join("lib")) else {
        return false;
    };
    libs.flatten().any(|lib| {
        std::fs::read_to_string(lib.path().join("site-packages/gateway/run_startup.py"))
            .is_ok_and(|text| text.contains(WARMED[0]))
    })
}
