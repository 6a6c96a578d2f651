//! The real ejabberd of a test run.
//!
//! `make test` runs every test under `tests/ejabberd/with-ejabberd.sh`, which
//! starts one isolated ejabberd on free loopback ports and exports its
//! `EJ_*` variables (see `tests/ejabberd/start.sh`); [`Ejabberd::from_env`]
//! reads them. What the room really broadcast is `room_observer.rs`'s.

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Set to `1` by `make test`: a missing ejabberd is then a failure, not a skip.
pub const REQUIRE_ENV: &str = "SESSION_SWITCH_REQUIRE_EJABBERD";

/// The isolated ejabberd instance of this test run, from the `EJ_*`
/// variables `tests/ejabberd/start.sh` prints.
#[derive(Clone, Debug)]
pub struct Ejabberd {
    /// The instance's folder (`EJ_HOME`): config, Mnesia, logs.
    pub home: PathBuf,
    /// Erlang node name (`EJ_NODE`), e.g. `sswAbC123@localhost`.
    pub node: String,
    /// XMPP domain (`EJ_DOMAIN`), e.g. `meeting.localhost`.
    pub domain: String,
    /// The room's bare JID (`EJ_ROOM`), e.g. `coregroup@conference.meeting.localhost`.
    pub room: String,
    /// The room's local part (`EJ_ROOM_NAME`).
    pub room_name: String,
    /// The MUC service (`EJ_MUC_SERVICE`), e.g. `conference.meeting.localhost`.
    pub muc_service: String,
    /// `mod_http_api` base URL (`EJ_API_URL`), e.g. `http://127.0.0.1:23456/api`.
    pub api_url: String,
    /// `ejabberdctl` bound to this instance (`EJ_CTL`, a one-line wrapper).
    pub ctl: PathBuf,
    /// The same as a command line (`EJ_CTL_CMD`:
    /// `/usr/sbin/ejabberdctl --config-dir HOME/etc`).
    pub ctl_cmd: Vec<String>,
    /// Folder holding `ejabberdctl` and the `docker` stand-in (`EJ_BIN`);
    /// with-ejabberd.sh puts it first in `PATH`.
    pub bin_dir: PathBuf,
    /// XMPP client (c2s) host and port, plain TCP without TLS.
    pub c2s_host: String,
    /// See `c2s_host`.
    pub c2s_port: u16,
    /// The client port with STARTTLS required (`EJ_C2S_TLS_PORT`), its
    /// certificate signed by the instance's test CA.
    pub c2s_tls_port: u16,
    /// That CA's certificate, PEM (`EJ_CA_FILE`).
    pub ca_file: PathBuf,
    /// Registered users besides `admin` (`EJ_USERS`), password `pw-<user>`.
    pub users: Vec<String>,
    /// Users subscribed to the room with MUC/Sub, nick = user name.
    pub subscribers: Vec<String>,
    /// Registered users that are not subscribers (`EJ_OUTSIDERS`): the room
    /// silently drops what they post.
    pub outsiders: Vec<String>,
    password_prefix: String,
}

impl Ejabberd {
    /// The instance exported by with-ejabberd.sh / start.sh, or `None`
    /// (printing `SKIPPED: no ejabberd (run through make test)`) when the
    /// variables are absent.
    ///
    /// # Panics
    /// When they are absent but `SESSION_SWITCH_REQUIRE_EJABBERD=1` (so `make
    /// test` never skips), or when one is malformed.
    pub fn from_env() -> Option<Ejabberd> {
        let vars: HashMap<String, String> = std::env::vars()
            .filter(|(k, _)| k.starts_with("EJ_"))
            .collect();
        if !vars.contains_key("EJ_HOME") {
            if std::env::var(REQUIRE_ENV).as_deref() == Ok("1") {
                panic!(
                    "{REQUIRE_ENV}=1 but no ejabberd is exported (EJ_HOME unset): run through \
                     tests/ejabberd/with-ejabberd.sh (make test)"
                );
            }
            eprintln!("SKIPPED: no ejabberd (run through make test)");
            return None;
        }
        Some(Self::from_vars(&vars))
    }

    /// The instance described by the `EJ_*` variables in `vars` (as
    /// start.sh prints them), e.g. an instance a test started for itself.
    ///
    /// # Panics
    /// When a variable is missing or malformed.
    pub fn from_vars(vars: &HashMap<String, String>) -> Ejabberd {
        let Some(home) = vars.get("EJ_HOME") else {
            panic!("EJ_HOME is not among the variables: re-run start.sh");
        };
        let get = |name: &str| -> String {
            vars.get(name)
                .cloned()
                .unwrap_or_else(|| panic!("EJ_HOME is set but {name} is not: re-run start.sh"))
        };
        let port = |name: &str| -> u16 {
            get(name)
                .parse()
                .unwrap_or_else(|e| panic!("{name}={:?} is not a port: {e}", get(name)))
        };
        let words = |name: &str| -> Vec<String> {
            get(name).split_whitespace().map(str::to_owned).collect()
        };
        Ejabberd {
            home: PathBuf::from(home),
            node: get("EJ_NODE"),
            domain: get("EJ_DOMAIN"),
            room: get("EJ_ROOM"),
            room_name: get("EJ_ROOM_NAME"),
            muc_service: get("EJ_MUC_SERVICE"),
            api_url: get("EJ_API_URL"),
            ctl: PathBuf::from(get("EJ_CTL")),
            ctl_cmd: words("EJ_CTL_CMD"),
            bin_dir: PathBuf::from(get("EJ_BIN")),
            c2s_host: get("EJ_C2S_HOST"),
            c2s_port: port("EJ_C2S_PORT"),
            c2s_tls_port: port("EJ_C2S_TLS_PORT"),
            ca_file: PathBuf::from(get("EJ_CA_FILE")),
            users: words("EJ_USERS"),
            subscribers: words("EJ_SUBSCRIBERS"),
            outsiders: words("EJ_OUTSIDERS"),
            password_prefix: get("EJ_PASSWORD_PREFIX"),
        }
    }

    /// `user@domain`.
    pub fn jid(&self, user: &str) -> String {
        format!("{user}@{}", self.domain)
    }

    /// The password start.sh registered `user` with.
    pub fn password(&self, user: &str) -> String {
        format!("{}{user}", self.password_prefix)
    }

    /// A registered user who is not a subscriber of the room.
    ///
    /// # Panics
    /// When the instance has none (start.sh's default has `outsider`).
    pub fn outsider(&self) -> &str {
        self.outsiders
            .first()
            .expect("the instance has no registered non-subscriber (EJ_OUTSIDERS is empty)")
    }

    /// `POST {api_url}/{command}` with `args` (`mod_http_api`, which the
    /// test config opens to loopback for every command): the answer's JSON.
    /// Tests set rooms up this way rather than with `ejabberdctl`, whose
    /// every call boots an Erlang VM.
    ///
    /// # Panics
    /// When the request fails or ejabberd refuses the command (its answer
    /// in the message).
    pub fn api(&self, command: &str, args: &serde_json::Value) -> serde_json::Value {
        self.try_api(command, args)
            .unwrap_or_else(|why| panic!("{why}"))
    }

    /// `change_room_option` on this instance's room ([`Ejabberd::room_name`]).
    ///
    /// # Panics
    /// As [`Ejabberd::api`].
    pub fn set_room_option(&self, option: &str, value: &str) {
        self.api(
            "change_room_option",
            &serde_json::json!({
                "name": self.room_name,
                "service": self.muc_service,
                "option": option,
                "value": value,
            }),
        );
    }

    /// [`Ejabberd::api`], the failure as a message instead of a panic.
    pub fn try_api(
        &self,
        command: &str,
        args: &serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        let url = format!("{}/{command}", self.api_url.trim_end_matches('/'));
        let mut answer = agent
            .post(&url)
            .send_json(args)
            .map_err(|e| format!("POST {url} {args}: {e}"))?;
        let status = answer.status();
        let text = answer.body_mut().read_to_string().unwrap_or_default();
        if !status.is_success() {
            return Err(format!("POST {url} {args}: {status} {text}"));
        }
        serde_json::from_str(&text).map_err(|e| format!("POST {url}: {e} in {text:?}"))
    }

    /// `[EJ_CTL]`: the config's `ejabberdctl` list for this instance.
    pub fn ctl_argv(&self) -> Vec<String> {
        vec![self.ctl.display().to_string()]
    }

    /// The legacy tool's production form, served by the `docker` stand-in in
    /// [`Ejabberd::bin_dir`] when that is first in `PATH`.
    pub fn docker_argv() -> Vec<String> {
        ["docker", "exec", "ejabberd", "ejabberdctl"]
            .map(str::to_owned)
            .to_vec()
    }

    /// Whether `docker` on this process's `PATH` is the instance's stand-in
    /// (with-ejabberd.sh puts [`Ejabberd::bin_dir`] first), so
    /// [`Ejabberd::docker_argv`] reaches this instance.
    pub fn docker_on_path(&self) -> bool {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|dir| dir.join("docker"))
            .find(|candidate| candidate.is_file())
            .is_some_and(|found| found == self.bin_dir.join("docker"))
    }

    /// An `ejabberdctl` command line for a node that is not running: a copy
    /// of this instance's `etc/` in `dir` whose `ejabberdctl.cfg` names
    /// another node on an unused distribution port (so no epmd is started
    /// either). Every call through it exits 3, "nodedown".
    pub fn dead_node_ctl(&self, dir: &Path) -> Vec<String> {
        let etc = dir.join("etc");
        std::fs::create_dir_all(&etc).expect("create etc/");
        for name in ["ejabberd.yml", "inetrc"] {
            std::fs::copy(self.home.join("etc").join(name), etc.join(name))
                .unwrap_or_else(|e| panic!("copy etc/{name}: {e}"));
        }
        let cfg = std::fs::read_to_string(self.home.join("etc/ejabberdctl.cfg"))
            .expect("read etc/ejabberdctl.cfg");
        let cfg: String = cfg
            .lines()
            .map(|line| {
                if line.starts_with("ERLANG_NODE=") {
                    format!("ERLANG_NODE=ghost{}@localhost\n", std::process::id())
                } else if line.starts_with("ERL_DIST_PORT=") {
                    format!("ERL_DIST_PORT={}\n", unused_port())
                } else {
                    format!("{line}\n")
                }
            })
            .collect();
        std::fs::write(etc.join("ejabberdctl.cfg"), cfg).expect("write ejabberdctl.cfg");
        // Debian's ejabberdctl runs as user ejabberd (via su): it must reach
        // the folder, and tempdirs are 0700.
        for d in [dir, etc.as_path()] {
            let mut perms = std::fs::metadata(d).expect("stat").permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
            std::fs::set_permissions(d, perms).expect("chmod 755");
        }
        let program = self
            .ctl_cmd
            .first()
            .cloned()
            .unwrap_or_else(|| "/usr/sbin/ejabberdctl".to_owned());
        vec![
            program,
            "--config-dir".to_owned(),
            etc.display().to_string(),
        ]
    }
}

/// A loopback TCP port nothing listens on right now (bound, then released).
pub fn unused_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}
