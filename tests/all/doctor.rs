//! `doctor` against the real chain: the test ejabberd (a room of the
//! test's own), the real Hermes API server on a copy of a real Hermes
//! database, the bot's own config; first with every link whole, then with
//! one link broken at a time, each run saying which link failed, what
//! fixes it, and which later links it skipped.
//!
//! One world serves every case (a Hermes gateway takes seconds to start):
//! each case breaks its link in a copy of the config, an environment
//! variable or a file it puts back, so the next case starts whole again;
//! Hermes going down is the last case.

use serde_json::Value;
use session_switch_tests::hermes_world;
use session_switch_tests::room_bot::BotWorld;
use session_switch_tests::xmpp::unused_port;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Every link of one agent's check, in order.
const LINKS: [&str; 12] = [
    "config",
    "policy",
    "state-db",
    "ejabberd",
    "room",
    "bot-config",
    "subscriber",
    "login",
    "lock",
    "hermes-api",
    "plugin-listed",
    "plugin-imports",
];

/// What one `doctor` run ended with.
struct Run {
    code: Option<i32>,
    report: Value,
    stderr: String,
}

impl Run {
    /// The link named `link` (for mohe when it is an agent's).
    fn link(&self, link: &str) -> &Value {
        self.report["links"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["link"] == link)
            .unwrap_or_else(|| panic!("no link {link}: {:#}", self.report))
    }

    /// Assert that `link` failed saying `says`, with a fix saying `fixed_by`.
    fn failed(&self, link: &str, says: &str, fixed_by: &str) {
        let l = self.link(link);
        assert_eq!(l["status"], "failed", "{link}: {:#}", self.report);
        let detail = l["detail"].as_str().unwrap();
        assert!(detail.contains(says), "{link}: {detail:?} lacks {says:?}");
        let fix = l["fix"].as_str().unwrap_or_default();
        assert!(
            fix.contains(fixed_by),
            "{link}: fix {fix:?} lacks {fixed_by:?}"
        );
        assert_eq!(
            self.code,
            Some(1),
            "a failed link exits 1: {:#}",
            self.report
        );
        assert_eq!(self.report["ok"], false);
        let last = self.stderr.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("xmpp-session-bridge: doctor: ") && last.contains(link),
            "{}",
            self.stderr
        );
    }

    /// Assert that `link` was skipped because of `because`.
    fn skipped(&self, link: &str, because: &str) {
        let l = self.link(link);
        assert_eq!(l["status"], "skipped", "{link}: {:#}", self.report);
        assert_eq!(l["detail"], format!("because {because}"), "{link}");
        assert_eq!(l["fix"], Value::Null, "{link}");
    }

    /// Assert that every link but `except` is ok (`plugin-imports`, which
    /// only the wheel's command tries, skipped).
    fn others_ok(&self, except: &[&str]) {
        for l in self.report["links"].as_array().unwrap() {
            let name = l["link"].as_str().unwrap();
            if except.contains(&name) {
                continue;
            }
            let want = if name == "plugin-imports" {
                "skipped"
            } else {
                "ok"
            };
            assert_eq!(l["status"], want, "{name}: {:#}", self.report);
        }
    }
}

/// `doctor --json --agent mohe` with this world's environment, on
/// `config` and `db`, with `env` added.
fn doctor(world: &BotWorld, config: &Path, db: &Path, env: &[(&str, &str)]) -> Run {
    doctor_of(world, "mohe", config, db, env)
}

/// [`doctor`] with `--agent agent`.
fn doctor_of(world: &BotWorld, agent: &str, config: &Path, db: &Path, env: &[(&str, &str)]) -> Run {
    let mut cmd = command(world, config, db);
    cmd.args(["--json", "doctor", "--agent", agent]);
    for (name, value) in env {
        cmd.env(name, value);
    }
    let out = cmd.output().unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not one JSON document ({e}):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    Run {
        code: out.status.code(),
        report,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The CLI as [`BotWorld::cli_with`] runs it, on `db` instead of the
/// world's database.
fn command(world: &BotWorld, config: &Path, db: &Path) -> Command {
    let mut cmd = session_switch_tests::cli(config, db);
    cmd.env("HERMES_HOME", &world.home)
        .env("HERMES_GATEWAY_LOCK_DIR", world.lock_dir())
        .env("SESSION_SWITCH_BOT_HOST", world.host())
        .env("ZHIWEI_XMPP_PASSWORD", world.ej.password("zhiwei"))
        .stdin(Stdio::null());
    cmd
}

/// A copy of the world's config named `name` with `from` replaced by `to`.
fn config_with(world: &BotWorld, name: &str, from: &str, to: &str) -> PathBuf {
    let text = std::fs::read_to_string(&world.config).unwrap();
    assert!(
        text.contains(from),
        "{from:?} is not in the config:\n{text}"
    );
    let path = world.home.join(name);
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    path
}

#[test]
fn each_link_is_checked_and_a_broken_one_says_what_fixes_it() {
    let _world = hermes_world();
    let Some(mut world) = BotWorld::new(6) else {
        return;
    };
    // Hermes's config.yaml lists the plugin where the venv has it; the
    // doctor reads the file, so it is listed here whichever venv runs.
    let yaml = world.home.join("config.yaml");
    let listed = std::fs::read_to_string(&yaml).unwrap();
    let listed = if listed.contains("session-switch") {
        listed
    } else {
        format!("{listed}plugins:\n  enabled: [session-switch]\n")
    };
    std::fs::write(&yaml, &listed).unwrap();
    let (config, db) = (world.config.clone(), world.db.clone());

    // Every link whole: exit 0, each link ok in order, the JSON's shape.
    let whole = doctor(&world, &config, &db, &[]);
    assert_eq!(whole.code, Some(0), "{:#}\n{}", whole.report, whole.stderr);
    assert_eq!(whole.report["ok"], true);
    let links = whole.report["links"].as_array().unwrap();
    let names: Vec<&str> = links.iter().map(|l| l["link"].as_str().unwrap()).collect();
    assert_eq!(names, LINKS);
    for l in links {
        let keys: Vec<&String> = l.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["agent", "detail", "fix", "link", "status"], "{l}");
        let shared = [
            "config",
            "policy",
            "state-db",
            "ejabberd",
            "room",
            "plugin-listed",
            "plugin-imports",
        ];
        let agent = if shared.contains(&l["link"].as_str().unwrap()) {
            Value::Null
        } else {
            Value::from("mohe")
        };
        assert_eq!(l["agent"], agent, "{l}");
    }
    whole.others_ok(&[]);
    assert!(
        whole.link("room")["detail"]
            .as_str()
            .unwrap()
            .contains("is non-anonymous, archives (mam true)"),
        "{:#}",
        whole.report
    );
    whole.skipped(
        "plugin-imports",
        "this command does not run from the wheel (the xmpp-session-bridge that pip installs \
         with the plugin into Hermes's venv tries the import)",
    );

    // Without --agent every agent of the config is checked, each as its
    // bot would run from this home; as text, a line per link.
    let out = command(&world, &config, &db)
        .arg("doctor")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for agent in ["mohe", "zhiwei", "xiaoguo"] {
        for link in ["bot-config", "subscriber", "login", "lock", "hermes-api"] {
            assert!(
                text.contains(&format!("ok       {link} ({agent}): ")),
                "{text}"
            );
        }
    }
    assert!(
        text.ends_with("no link failed (21 ok, 1 skipped)\n"),
        "{text}"
    );

    // A key the config does not have: everything that needs the config is
    // skipped; state.db and config.yaml are still checked.
    let bad = world.config_with_bot_keys("bad-key.toml", "colour = \"red\"");
    let run = doctor(&world, &bad, &db, &[]);
    run.failed("config", "colour", "bad-key.toml");
    for link in [
        "policy",
        "ejabberd",
        "room",
        "bot-config",
        "subscriber",
        "login",
        "lock",
        "hermes-api",
    ] {
        run.skipped(link, "the config did not load");
    }
    assert_eq!(run.link("state-db")["status"], "ok");
    assert_eq!(run.link("plugin-listed")["status"], "ok");

    // A policy file that does not load: every command would stop on it.
    let missing = config_with(
        &world,
        "missing-policy.toml",
        "[xmpp]",
        "[policy]\npath = \"missing.wasm\"\n\n[xmpp]",
    );
    let run = doctor(&world, &missing, &db, &[]);
    run.failed("policy", "missing.wasm", "[policy] path");
    run.others_ok(&["policy"]);

    // An agent the config does not have: its links are skipped, the
    // shared ones still checked.
    let run = doctor_of(&world, "nobody", &config, &db, &[]);
    run.failed(
        "config",
        "has no agent \"nobody\" (configured: mohe, zhiwei, xiaoguo)",
        "--agent",
    );
    for link in ["bot-config", "subscriber", "login", "lock", "hermes-api"] {
        run.skipped(link, "the config has no agent \"nobody\"");
        assert_eq!(run.link(link)["agent"], "nobody");
    }
    assert_eq!(run.link("room")["status"], "ok");

    // No state.db there, then a SQLite file that is not Hermes's: only
    // that link fails (no other needs it).
    let missing = world.home.join("no-such/state.db");
    let run = doctor(&world, &missing, &missing, &[]);
    assert_eq!(
        run.link("config")["status"],
        "failed",
        "the config is not there either"
    );
    let run = doctor(&world, &config, &missing, &[]);
    run.failed("state-db", "no Hermes database at", "--db");
    run.others_ok(&["state-db"]);
    let other = world.home.join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        .unwrap();
    let run = doctor(&world, &config, &other, &[]);
    run.failed(
        "state-db",
        "no `sessions` and `messages` tables",
        "Hermes's own state.db",
    );
    run.others_ok(&["state-db"]);

    // ejabberd's HTTP API where nothing listens: the room and the
    // subscription are skipped; the login, over the client port, works.
    let api = world.ej.api_url.clone();
    let port = unused_port();
    let unreached = config_with(
        &world,
        "unreached.toml",
        &api,
        &format!("http://127.0.0.1:{port}/api"),
    );
    let run = doctor(&world, &unreached, &db, &[]);
    run.failed("ejabberd", &format!("127.0.0.1:{port}"), "[xmpp] api_url");
    run.skipped("room", "the ejabberd link failed");
    run.skipped("subscriber", "the ejabberd link failed");
    run.others_ok(&["ejabberd", "room", "subscriber"]);

    // ejabberd's HTTP listener at a path that is not its API: reached, but
    // the detail names what answered, and the room is skipped as above.
    let wrong_path = config_with(
        &world,
        "wrong-path.toml",
        &api,
        &api.replace("/api", "/not-the-api"),
    );
    let run = doctor(&world, &wrong_path, &db, &[]);
    run.failed("ejabberd", "/not-the-api", "[xmpp] api_url");
    run.skipped("room", "the ejabberd link failed");
    run.others_ok(&["ejabberd", "room", "subscriber"]);

    // The same through ejabberdctl: whole, then a command that is not there.
    let via_ctl = config_with(
        &world,
        "ejabberdctl.toml",
        &format!("transport = \"http\"\napi_url = \"{api}\"\n"),
        &format!(
            "transport = \"ejabberdctl\"\nejabberdctl = [\"{}\"]\n",
            world.ej.ctl.display()
        ),
    );
    doctor(&world, &via_ctl, &db, &[]).others_ok(&[]);
    let no_ctl = config_with(
        &world,
        "no-ejabberdctl.toml",
        &format!("transport = \"http\"\napi_url = \"{api}\"\n"),
        "transport = \"ejabberdctl\"\nejabberdctl = [\"/nonexistent/ejabberdctl\"]\n",
    );
    let run = doctor(&world, &no_ctl, &db, &[]);
    run.failed("ejabberd", "command not found", "[xmpp] ejabberdctl");
    run.skipped("room", "the ejabberd link failed");

    // An HTTP API password variable that is not set: nothing is asked.
    let no_secret = config_with(
        &world,
        "no-secret.toml",
        &format!("api_url = \"{api}\"\n"),
        &format!(
            "api_url = \"{api}\"\napi_user = \"admin@{}\"\n\
             api_password_env = \"DOCTOR_TEST_UNSET\"\n",
            world.ej.domain
        ),
    );
    let run = doctor(&world, &no_secret, &db, &[]);
    run.failed(
        "ejabberd",
        "api_password_env names DOCTOR_TEST_UNSET",
        "[xmpp]",
    );
    run.skipped("subscriber", "the ejabberd link failed");

    // No XMPP server at [bot] server: the login says where it looked.
    let server = format!("{}:{}", world.ej.c2s_host, world.ej.c2s_port);
    let c2s = unused_port();
    let no_server = config_with(
        &world,
        "no-server.toml",
        &server,
        &format!("127.0.0.1:{c2s}"),
    );
    let run = doctor(&world, &no_server, &db, &[]);
    run.failed(
        "login",
        &format!("tried [bot] server 127.0.0.1:{c2s}"),
        "set [bot] server",
    );
    run.others_ok(&["login"]);

    // A room the server does not have: its subscribers are not asked.
    let room = world.ej.room.clone();
    let (name, service) = room.split_once('@').unwrap();
    let missing_room = format!("nosuch{}@{service}", std::process::id());
    let no_room = config_with(&world, "no-room.toml", &room, &missing_room);
    let run = doctor(&world, &no_room, &db, &[]);
    run.failed(
        "room",
        &format!("room {missing_room} does not exist on the server"),
        &format!(
            "ejabberdctl create_room nosuch{} {service} {}",
            std::process::id(),
            world.ej.domain
        ),
    );
    run.skipped("subscriber", "the room does not exist");
    run.others_ok(&["room", "subscriber"]);

    // A semi-anonymous room: it exists, so the subscription is checked.
    world.ej.set_room_option("anonymous", "true");
    let run = doctor(&world, &config, &db, &[]);
    world.ej.set_room_option("anonymous", "false");
    run.failed(
        "room",
        "is semi-anonymous (anonymous true)",
        &format!("ejabberdctl change_room_option {name} {service} anonymous false"),
    );
    run.others_ok(&["room"]);

    // mohe as an account that is not a MUC/Sub subscriber of the room.
    let outsider = world.ej.outsider().to_owned();
    let text = std::fs::read_to_string(&world.config).unwrap();
    let text = text
        .replace(
            &format!("jid = \"{}\"", world.ej.jid("mohe")),
            &format!("jid = \"{}\"", world.ej.jid(&outsider)),
        )
        .replace(
            "password_file = \"mohe.password\"",
            &format!("password = \"{}\"", world.ej.password(&outsider)),
        );
    let not_subscribed = world.home.join("not-subscribed.toml");
    std::fs::write(&not_subscribed, text).unwrap();
    let run = doctor(&world, &not_subscribed, &db, &[]);
    run.failed(
        "subscriber",
        "is not a MUC/Sub subscriber of room",
        &format!(
            "ejabberdctl subscribe_room {} mohe {room} urn:xmpp:mucsub:nodes:messages",
            world.ej.jid(&outsider)
        ),
    );
    run.others_ok(&["subscriber"]);

    // A wrong password: the server's SASL condition is named.
    let wrong = config_with(
        &world,
        "wrong-password.toml",
        "password_file = \"mohe.password\"",
        "password = \"not-mohes-password\"",
    );
    let run = doctor(&world, &wrong, &db, &[]);
    run.failed(
        "login",
        &format!(
            "the server refused the login of {}: SASL not-authorized",
            world.ej.jid("mohe")
        ),
        &format!(
            "ejabberdctl change_password mohe {} PASSWORD",
            world.ej.domain
        ),
    );
    run.others_ok(&["login"]);

    // No password source: the login and the Hermes API server need the
    // bot's keys; the subscription and the lock do not.
    let no_password = config_with(
        &world,
        "no-password.toml",
        "password_file = \"mohe.password\"",
        "",
    );
    let run = doctor(&world, &no_password, &db, &[]);
    run.failed(
        "bot-config",
        "no XMPP password for mohe",
        "password_file = ",
    );
    run.skipped("login", "the bot's config keys could not be read");
    run.skipped("hermes-api", "the bot's config keys could not be read");
    run.others_ok(&["bot-config", "login", "hermes-api"]);

    // mohe's bot running passes, saying that a second would be refused.
    let mut bot = world.bot("mohe");
    let run = doctor(&world, &config, &db, &[]);
    let lock = run.link("lock");
    let detail = lock["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!(
            "another bot of mohe runs on this machine: PID {} holds",
            bot.pid()
        )) && detail.contains("a second `bot --agent mohe` would be refused"),
        "{detail}"
    );
    run.others_ok(&[]);
    assert_eq!(run.code, Some(0), "{:#}", run.report);
    assert!(bot.stop(), "the bot stops on SIGTERM:\n{}", bot.log());

    // A key the API server refuses.
    let wrong_key = config_with(
        &world,
        "wrong-key.toml",
        "[bot.agents.mohe]\n",
        "[bot.agents.mohe]\napi_key_env = \"DOCTOR_TEST_KEY\"\n",
    );
    let run = doctor(
        &world,
        &wrong_key,
        &db,
        &[("DOCTOR_TEST_KEY", "sk-not-the-key")],
    );
    run.failed("hermes-api", "HTTP 401", "API_SERVER_KEY");
    run.others_ok(&["hermes-api"]);

    // Hermes's config.yaml without the plugin.
    std::fs::write(&yaml, listed.replace("session-switch", "other-plugin")).unwrap();
    let run = doctor(&world, &config, &db, &[]);
    std::fs::write(&yaml, &listed).unwrap();
    run.failed(
        "plugin-listed",
        "does not list session-switch in plugins.enabled (it lists other-plugin)",
        "add session-switch to plugins.enabled",
    );
    run.others_ok(&["plugin-listed"]);

    // Hermes down, last: nothing after it needs the gateway.
    world.gateway.stop();
    let run = doctor(&world, &config, &db, &[]);
    run.failed(
        "hermes-api",
        "Hermes API server unreachable",
        "hermes gateway run",
    );
    run.others_ok(&["hermes-api"]);
}
