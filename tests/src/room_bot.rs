//! The room bot's world for its end-to-end tests (`tests/all/bot.rs`): a
//! room of the test's own on the real ejabberd, a Hermes home with a copy
//! of a real Hermes database, the real Hermes API server against the fake
//! LLM, the config the bots read, bot processes (`xmpp-session-bridge bot`)
//! whose log the test reads, and a person who posts.

use crate::fake_llm::FakeLlm;
use crate::hermes_gateway::{HermesGateway, hermes_venv};
use crate::own_room::OwnRoom;
use crate::room_observer::{RoomMessage, RoomObserver};
use crate::xmpp::Ejabberd;
use crate::{fixture_copy, venv_python, workspace_root};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The agents of the world, each with its XMPP session.
pub const AGENTS: [(&str, &str); 3] = [
    ("mohe", "xmpp-mohe-v2"),
    ("zhiwei", "xmpp-zhiwei"),
    ("xiaoguo", "xmpp-xiaoguo"),
];

/// Everything one test's bots run against; torn down on drop (the room
/// destroyed, the gateway stopped, the folder removed).
pub struct BotWorld {
    pub dir: tempfile::TempDir,
    /// The Hermes home: `state.db`, `.env`, `config.yaml`, the config.
    pub home: PathBuf,
    pub db: PathBuf,
    pub config: PathBuf,
    /// The instance, with `room` this test's own.
    pub ej: Ejabberd,
    pub llm: FakeLlm,
    pub gateway: HermesGateway,
    /// Destroys the room when the world is dropped.
    _room: OwnRoom,
}

impl BotWorld {
    /// A world on Hermes 0.19.0 (its fixture and venv), `max_hops` the loop
    /// guard's bound; `None` when ejabberd, the fixtures or the venv are
    /// missing (each says so).
    pub fn new(max_hops: u32) -> Option<BotWorld> {
        BotWorld::on(&Ejabberd::from_env()?, max_hops)
    }

    /// [`BotWorld::new`] on the ejabberd instance `base` (e.g. one the test
    /// started for itself and may restart).
    pub fn on(base: &Ejabberd, max_hops: u32) -> Option<BotWorld> {
        BotWorld::with_hermes(base, "0.19.0", "hermes-0.19.0.db", max_hops)
    }

    /// A world on Hermes `version` (its venv under `target/hermes-venv`)
    /// with a copy of `fixture` as its `state.db`.
    pub fn with_hermes(
        base: &Ejabberd,
        version: &str,
        fixture: &str,
        max_hops: u32,
    ) -> Option<BotWorld> {
        let venv = hermes_venv(version)?;
        let (dir, db) = fixture_copy(fixture)?;
        let room = OwnRoom::new(base, "bots", &AGENTS.map(|(a, _)| a));
        let ej = room.ej.clone();
        let home = dir.path().to_path_buf();
        let llm = FakeLlm::start(&AGENTS.map(|(a, _)| a));
        let gateway = HermesGateway::start(&venv, &home, llm.port);
        let config = home.join("session-switch.toml");
        std::fs::write(
            home.join("mohe.password"),
            format!("{}\n", ej.password("mohe")),
        )
        .unwrap();
        let mut text = format!(
            "[xmpp]\nroom = \"{}\"\ntransport = \"http\"\napi_url = \"{}\"\n\n\
             [loop_guard]\nmax_hops = {max_hops}\n\n\
             [bot]\nserver = \"{}:{}\"\ntls = \"insecure-plaintext\"\nturn_timeout_seconds = 60\n\n\
             [bot.agents.mohe]\npassword_file = \"mohe.password\"\n\n\
             [bot.agents.zhiwei]\npassword_env = \"ZHIWEI_XMPP_PASSWORD\"\n\n\
             [bot.agents.xiaoguo]\npassword = \"{}\"\n",
            ej.room,
            ej.api_url,
            ej.c2s_host,
            ej.c2s_port,
            ej.password("xiaoguo")
        );
        for (agent, session) in AGENTS {
            text.push_str(&format!(
                "\n[[agents]]\nname = \"{agent}\"\njid = \"{}\"\nsessions = [\"{session}\"]\n",
                ej.jid(agent)
            ));
        }
        std::fs::write(&config, text).unwrap();
        Some(BotWorld {
            dir,
            home,
            db,
            config,
            ej,
            llm,
            gateway,
            _room: room,
        })
    }

    /// The CLI with this world's config and database.
    pub fn cli(&self) -> Command {
        self.cli_with(&self.config)
    }

    /// The folder of this world's bots' locks (`HERMES_GATEWAY_LOCK_DIR`): each
    /// world is a machine of its own.
    pub fn lock_dir(&self) -> PathBuf {
        self.home.join("run")
    }

    /// The host name in this world's bots' resource
    /// (`SESSION_SWITCH_BOT_HOST`): unique, so that bots of two worlds on
    /// one server never replace each other's session.
    pub fn host(&self) -> String {
        let name = self.dir.path().file_name().unwrap_or_default();
        format!("test-{}", name.to_string_lossy().trim_start_matches('.'))
    }

    /// The CLI with the config at `config` and this world's database.
    pub fn cli_with(&self, config: &std::path::Path) -> Command {
        let mut cmd = crate::cli(config, &self.db);
        cmd.env("HERMES_HOME", &self.home)
            .env("HERMES_GATEWAY_LOCK_DIR", self.lock_dir())
            .env("SESSION_SWITCH_BOT_HOST", self.host())
            .env("ZHIWEI_XMPP_PASSWORD", self.ej.password("zhiwei"))
            .stdin(Stdio::null());
        cmd
    }

    /// A copy of this world's config with `keys` added to its `[bot]`
    /// section, e.g. `require_mention = false`.
    pub fn config_with_bot_keys(&self, name: &str, keys: &str) -> PathBuf {
        let text = std::fs::read_to_string(&self.config).unwrap();
        let text = text.replacen("[bot]\n", &format!("[bot]\n{keys}\n"), 1);
        let path = self.home.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Start `agent`'s bot and wait until it is seated (at most 60 s).
    pub fn bot(&self, agent: &str) -> BotProcess {
        self.bot_with(agent, &self.config)
    }

    /// [`BotWorld::bot`] reading the config at `config`.
    pub fn bot_with(&self, agent: &str, config: &std::path::Path) -> BotProcess {
        let mut cmd = self.cli_with(config);
        cmd.args(["bot", "--agent", agent]);
        self.seated(cmd, agent)
    }

    /// Start `cmd` (a `bot` command line) and wait until the bot is
    /// seated (at most 60 s).
    pub fn seated(&self, cmd: Command, agent: &str) -> BotProcess {
        let bot = BotProcess::spawn(cmd, agent);
        assert!(
            bot.wait_log("joined", 1, Duration::from_secs(60)),
            "{agent}'s bot did not join:\n{}",
            bot.log()
        );
        // A service's log: each line starts with its UTC time (RFC 3339).
        let log = bot.log();
        let joined = log.lines().find(|l| l.contains("joined")).unwrap_or("");
        let time = joined.split_whitespace().next().unwrap_or("");
        assert!(
            time.ends_with('Z') && chrono::DateTime::parse_from_rfc3339(time).is_ok(),
            "{agent}'s bot logged a line without its UTC time: {joined:?}"
        );
        bot
    }

    /// `cmd` (a `bot` command line of [`BotWorld::cli`]) started, not
    /// waited for.
    pub fn spawn(&self, cmd: Command, agent: &str) -> BotProcess {
        BotProcess::spawn(cmd, agent)
    }

    /// The room's occupants as ejabberd lists them: `(real JID, nick)`.
    pub fn occupants(&self) -> Vec<(String, String)> {
        let answer = self.ej.api(
            "get_room_occupants",
            &serde_json::json!({"name": self.ej.room_name, "service": self.ej.muc_service}),
        );
        let occupants = answer
            .as_array()
            .expect("get_room_occupants answers a list");
        occupants
            .iter()
            .map(|o| {
                (
                    o["jid"].as_str().unwrap_or_default().to_owned(),
                    o["nick"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    /// A real occupant that records what the room broadcast.
    pub fn observer(&self) -> RoomObserver {
        RoomObserver::join(&self.ej)
    }

    /// A person (`outsider`'s account) posts `body` as `nick`; returns once
    /// the room reflected it.
    pub fn say(&self, nick: &str, body: &str) {
        self.say_with(nick, body, &[]);
    }

    /// [`BotWorld::say`] as an XEP-0461 reply to `to`'s message (a nick of
    /// the room), quoting `quote` before `body` as clients do.
    pub fn reply(&self, nick: &str, body: &str, to: &str, quote: &str) {
        let occupant = format!("{}/{to}", self.ej.room);
        self.say_with(
            nick,
            body,
            &[
                "--reply-to",
                &occupant,
                "--reply-id",
                "unknown",
                "--quote",
                quote,
            ],
        );
    }

    /// [`BotWorld::say`], `false` (instead of a panic) when the person's
    /// client could not post it (the server restarting).
    pub fn try_say(&self, nick: &str, body: &str) -> bool {
        let ej = &self.ej;
        Command::new(venv_python())
            .arg(workspace_root().join("tests/ejabberd/guard_bot.py"))
            .args(["say", "--jid", &ej.jid(ej.outsider())])
            .args(["--password", &ej.password(ej.outsider())])
            .args(["--room", &ej.room, "--nick", nick, "--body", body])
            .args(["--port", &ej.c2s_port.to_string(), "--timeout", "15"])
            .output()
            .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("\"said\""))
    }

    fn say_with(&self, nick: &str, body: &str, more: &[&str]) {
        let ej = &self.ej;
        let out = Command::new(venv_python())
            .arg(workspace_root().join("tests/ejabberd/guard_bot.py"))
            .args(["say", "--jid", &ej.jid(ej.outsider())])
            .args(["--password", &ej.password(ej.outsider())])
            .args(["--room", &ej.room, "--nick", nick, "--body", body])
            .args(["--port", &ej.c2s_port.to_string(), "--timeout", "30"])
            .args(more)
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("\"said\""),
            "say {body:?}: {out:?}"
        );
    }

    /// `(role, content)` of `session`'s rows in `state.db`, oldest first.
    pub fn rows(&self, session: &str) -> Vec<(String, String)> {
        let conn = rusqlite::Connection::open(&self.db).unwrap();
        let mut stmt = conn
            .prepare(
                "SELECT role, COALESCE(content, '') FROM messages WHERE session_id = ? ORDER BY id",
            )
            .unwrap();
        stmt.query_map([session], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }
}

/// A bot process; its stderr (the log) collected line by line. SIGTERM,
/// then SIGKILL after 10 s, on drop.
pub struct BotProcess {
    pub agent: String,
    child: Option<Child>,
    log: Arc<(Mutex<Vec<String>>, Condvar)>,
    /// The thread that reads the process's stderr into `log`.
    reader: Option<std::thread::JoinHandle<()>>,
}

impl BotProcess {
    fn spawn(mut cmd: Command, agent: &str) -> BotProcess {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log: Arc<(Mutex<Vec<String>>, Condvar)> = Arc::default();
        let shared = Arc::clone(&log);
        let stderr = child.stderr.take().unwrap();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                shared.0.lock().unwrap().push(line);
                shared.1.notify_all();
            }
        });
        BotProcess {
            agent: agent.into(),
            child: Some(child),
            log,
            reader: Some(reader),
        }
    }

    /// Wait (at most 5 s) until the log reader read the exited process's
    /// last line: the exit can be seen before its stderr is drained.
    fn drain_log(&mut self) {
        let Some(reader) = self.reader.take() else {
            return;
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while !reader.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if reader.is_finished() {
            let _ = reader.join();
        }
    }

    /// The process's PID.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or_default()
    }

    /// SIGKILL: the process ends without a word to the server.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            self.drain_log();
        }
    }

    /// Wait at most `within` for the process to exit by itself: its exit
    /// status, `None` while it still runs.
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            let child = self.child.as_mut()?;
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                self.drain_log();
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether the process still runs.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    /// The log so far.
    pub fn log(&self) -> String {
        self.log.0.lock().unwrap().join("\n")
    }

    /// How many log lines contain `text`.
    pub fn count(&self, text: &str) -> usize {
        self.log
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(text))
            .count()
    }

    /// Wait at most `within` until `times` log lines contain `text`.
    pub fn wait_log(&self, text: &str, times: usize, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let (lock, cvar) = &*self.log;
        let mut lines = lock.lock().unwrap();
        loop {
            if lines.iter().filter(|l| l.contains(text)).count() >= times {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            lines = cvar.wait_timeout(lines, left).unwrap().0;
        }
    }

    /// [`Self::wait_log`], which must see the lines: panics with the log
    /// when `times` lines with `text` do not come within `within`.
    pub fn expect_log(&self, text: &str, times: usize, within: Duration) {
        assert!(
            self.wait_log(text, times, within),
            "no {times} log line(s) with {text:?} within {within:?}:\n{}",
            self.log()
        );
    }

    /// Send `signal` (`KILL`, `STOP`, `CONT`, …) to the process.
    pub fn signal(&self, signal: &str) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill")
                .args([&format!("-{signal}"), &child.id().to_string()])
                .status();
        }
    }

    /// SIGTERM and wait (at most 15 s); whether it exited with status 0.
    pub fn stop(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return false;
        };
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                self.drain_log();
                return status.success();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                self.drain_log();
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for BotProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How long a bot may take to answer (a Hermes turn with the fake LLM).
pub const ANSWER: Duration = Duration::from_secs(60);

/// A body no other test posts.
pub fn unique(what: &str) -> String {
    format!("{what} {}-{:?}", std::process::id(), Instant::now())
}

/// Wait until the room has been still for `still` (at most 240 s); the
/// message count then.
pub fn quiet(observer: &RoomObserver, still: Duration) -> usize {
    let started = Instant::now();
    let mut last = observer.messages().len();
    let mut since = Instant::now();
    while since.elapsed() < still {
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "the room never went quiet"
        );
        std::thread::sleep(Duration::from_millis(200));
        let now = observer.messages().len();
        if now != last {
            last = now;
            since = Instant::now();
        }
    }
    last
}

/// Wait at most `within` for a live message from `nick` among the
/// observer's messages after the first `after`; the first such.
pub fn wait_from(
    observer: &RoomObserver,
    nick: &str,
    after: usize,
    within: Duration,
) -> Option<RoomMessage> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(m) = observer
            .messages()
            .into_iter()
            .skip(after)
            .find(|m| m.nick == nick)
        {
            return Some(m);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
