//! The loop guard (docs/src/design/loop-guard.md) below the room: the real
//! component deciding over the real Hermes store (its state in
//! `state_meta`, kept across a restart; an early database without
//! `state_meta`), the runtime's gate on `host.meta-set` against a policy
//! that abuses it (`meddle`), the CLI `admit` (JSON shape, exit statuses,
//! a malformed stored state, the test clock), and proptest properties of
//! the rule over random message sequences and delivery orders, deciding
//! apart from posting: each agent replies at most `max_hops` times between
//! two human messages, and the room stays within the bound of docs/src/concepts/loop-guard.md#the-bound.
//! The end-to-end runs with real XMPP bots are in `loop_guard_e2e.rs`.

use proptest::prelude::*;
use serde_json::Value;
use session_switch::FailureKind;
use session_switch::runtime::*;
use session_switch_contract::keys::guard_key;
use session_switch_tests::fake_host::FakeHost;
use session_switch_tests::sample::{room_message, sample_config_text, sample_settings};
use session_switch_tests::{bin_path, component_path, fixture_copy, table_snapshot, variant_path};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const ROOM: &str = "coregroup@conference.example.org";

fn options() -> PolicyOptions {
    PolicyOptions {
        ..PolicyOptions::default()
    }
}

fn message(occupant: &str, jid: Option<&str>, body: &str) -> RoomMessage {
    room_message(occupant, jid, body)
}

/// An instance of `component` over the real Hermes store of `db`.
fn hermes_instance(policy: &Policy, db: &Path) -> PolicyInstance {
    let store = session_switch_store::HermesStore::open(db).unwrap();
    let settings = sample_settings();
    let imports =
        session_switch::hermes_imports::HermesImports::new(store, None, settings.room.clone());
    policy.instance(imports, settings)
}

fn meta(db: &Path, key: &str) -> Option<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("SELECT value FROM state_meta WHERE key = ?1", [key], |r| {
        r.get(0)
    })
    .ok()
}

// ------------------------------------------------- the real store, restarts

/// The counter lives in `state_meta`: a new process (a new store and
/// instance, as a restarted gateway) continues a capped chain instead of
/// reopening it; only a person's message resets it.
#[test]
fn the_counter_survives_a_restart_on_the_real_store() {
    let Some((_dir, db)) = fixture_copy("hermes-latest.db") else {
        return;
    };
    let policy = Policy::load(component_path(), options()).unwrap();
    let mut bot = hermes_instance(&policy, &db);
    for t in 1..=5 {
        let d = bot
            .admit("mohe", &message("zhiwei", None, &format!("mohe, turn {t}")))
            .unwrap();
        assert_eq!((d.reply, d.hops), (true, t), "{d:?}");
    }
    drop(bot);
    let stored: Value =
        serde_json::from_str(&meta(&db, &guard_key("mohe", ROOM)).unwrap()).unwrap();
    assert_eq!(stored["hops"], 5);
    assert_eq!(stored["v"], 1);

    let mut restarted = hermes_instance(&policy, &db);
    let d = restarted
        .admit("mohe", &message("zhiwei", None, "mohe, turn 6"))
        .unwrap();
    assert_eq!(
        (d.reply, d.reason, d.hops),
        (false, AdmitReason::LoopGuard, 6)
    );
    assert_eq!(
        d.detail,
        "6 agent messages since the last human one (max_hops 6)"
    );
    // Each bot counts what it saw, under its own key: this is xiaoguo's first.
    let d = restarted
        .admit("xiaoguo", &message("zhiwei", None, "xiaoguo?"))
        .unwrap();
    assert_eq!((d.reply, d.hops), (true, 1));
    let d = restarted
        .admit(
            "mohe",
            &message("alice", Some("alice@example.org"), "mohe, go on"),
        )
        .unwrap();
    assert_eq!((d.reply, d.reason, d.hops), (true, AdmitReason::Human, 0));
}

/// An early Hermes database has no `state_meta`: the first `admit` creates
/// it with Hermes's DDL (inside its transaction) and nothing else.
#[test]
fn an_early_database_gets_state_meta_and_nothing_else() {
    let Some((_dir, db)) = fixture_copy("hermes-early.db") else {
        return;
    };
    let before = table_snapshot(&db);
    let policy = Policy::load(component_path(), options()).unwrap();
    let mut bot = hermes_instance(&policy, &db);
    let d = bot
        .admit("mohe", &message("zhiwei", None, "mohe?"))
        .unwrap();
    assert!(d.reply, "{d:?}");
    drop(bot);
    let after = table_snapshot(&db);
    let added: Vec<&String> = after.keys().filter(|t| !before.contains_key(*t)).collect();
    if before.contains_key("state_meta") {
        assert!(added.is_empty(), "{added:?}");
    } else {
        assert_eq!(added, ["state_meta"]);
    }
    assert!(meta(&db, &guard_key("mohe", ROOM)).is_some());
}

// --------------------------------------------------- a policy that meddles

/// `meddle` sets keys it must not, ignoring the error; the host refuses
/// the answer (kind `policy`, naming the step) and the database keeps no
/// trace: also not of the honest write the same call made before its
/// second one (the transaction is rolled back).
#[test]
fn a_policy_that_abuses_meta_set_is_refused_and_writes_nothing() {
    let Some((_dir, db)) = fixture_copy("hermes-latest.db") else {
        return;
    };
    let policy = Policy::load(variant_path("meddle"), options()).unwrap();
    let mut bot = hermes_instance(&policy, &db);
    let before = table_snapshot(&db);
    let mohe_key = guard_key("mohe", ROOM);
    for (body, needle) in [
        (
            "meddle: other agent",
            format!(
                "set state_meta key '{}'; admit may set only '{mohe_key}'",
                guard_key("zhiwei", ROOM)
            ),
        ),
        (
            "meddle: record",
            format!(
                "set state_meta key 'session_switch:active:mohe'; admit may set only '{mohe_key}'"
            ),
        ),
        (
            "meddle: hermes key",
            format!("set state_meta key 'fts_tokenizer'; admit may set only '{mohe_key}'"),
        ),
        (
            "meddle: twice",
            format!("set state_meta key '{mohe_key}' a second time"),
        ),
    ] {
        let err = bot
            .admit("mohe", &message("zhiwei", None, body))
            .unwrap_err();
        assert_eq!(err.kind, FailureKind::Policy, "{body}: {}", err.message);
        assert!(err.message.contains(&needle), "{body}: {}", err.message);
        assert_eq!(table_snapshot(&db), before, "{body}: the database changed");
    }
    let err = bot.resolve("mohe", "meddle-in-resolve").unwrap_err();
    assert_eq!(err.kind, FailureKind::Policy);
    assert!(
        err.message
            .contains("called host.meta-set during resolve; only policy.admit may set state"),
        "{}",
        err.message
    );
    assert_eq!(table_snapshot(&db), before);
    // Without a cue it is the shipped policy: its one write goes through.
    let d = bot
        .admit("mohe", &message("zhiwei", None, "mohe?"))
        .unwrap();
    assert_eq!((d.reply, d.hops), (true, 1));
    assert!(meta(&db, &mohe_key).is_some());
}

// ----------------------------------------------------------- the CLI admit

struct Cli {
    _dir: tempfile::TempDir,
    db: PathBuf,
    config: PathBuf,
}

impl Cli {
    fn new(loop_guard: &str) -> Option<Cli> {
        let (dir, db) = fixture_copy("hermes-latest.db")?;
        let config = dir.path().join("session-switch.toml");
        let text = sample_config_text(ROOM, &|n| format!("{n}@example.org"), "", "");
        std::fs::write(&config, format!("{text}{loop_guard}")).unwrap();
        Some(Cli {
            _dir: dir,
            db,
            config,
        })
    }

    fn run(&self, args: &[&str], env: &[(&str, &Path)]) -> Output {
        let mut cmd = Command::new(bin_path());
        cmd.arg("--config")
            .arg(&self.config)
            .arg("--db")
            .arg(&self.db)
            .args(args)
            .env_remove("SESSION_SWITCH_TEST_CLOCK_FILE");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    fn admit(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json", "admit"];
        all.extend_from_slice(args);
        let out = self.run(&all, &[]);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

fn failed(out: &Output) -> (i32, String) {
    let stderr = String::from_utf8(out.stderr.clone()).unwrap();
    assert_eq!(stderr.lines().count(), 1, "stderr: {stderr:?}");
    assert!(out.stdout.is_empty());
    (out.status.code().unwrap(), stderr.trim_end().to_string())
}

/// `admit` prints `{"reply", "reason", "stop", "heard", "hops", "detail"}` and exits 0
/// whether the bot should reply or not; the text form says the same.
#[test]
fn cli_admit_prints_the_decision_and_exits_0_either_way() {
    let Some(cli) = Cli::new("\n[loop_guard]\nmax_hops = 2\n") else {
        return;
    };
    let from = format!("{ROOM}/zhiwei");
    let first = cli.admit(&["--agent", "mohe", "--from", &from, "--", "mohe: -one"]);
    assert_eq!(
        first,
        serde_json::json!({"reply": true, "reason": "addressed", "stop": false, "heard": false,
                           "hops": 1, "detail": "'zhiwei' addressed 'mohe'"})
    );
    let second = cli.admit(&["--agent", "mohe", "--from", &from, "--", "mohe: two"]);
    assert_eq!(
        second,
        serde_json::json!({"reply": false, "reason": "loop-guard", "stop": false, "heard": true,
                           "hops": 2,
                           "detail": "2 agent messages since the last human one (max_hops 2)"})
    );
    let again = cli.admit(&["--agent", "mohe", "--from", &from, "--", "mohe: two"]);
    assert_eq!(again["reason"], "duplicate", "{again}");
    // A delayed person does not reset; a live one does.
    let alice = format!("{ROOM}/alice");
    let replay = cli.admit(&["--agent", "mohe", "--from", &alice, "--delayed", "hi mohe"]);
    assert_eq!(
        (
            replay["reply"].clone(),
            replay["reason"].clone(),
            replay["hops"].clone()
        ),
        (false.into(), "delayed".into(), 3.into())
    );
    let live = cli.admit(&[
        "--agent",
        "mohe",
        "--from",
        &alice,
        "--jid",
        "alice@example.org",
        "hi mohe",
    ]);
    assert_eq!(
        (
            live["reply"].clone(),
            live["reason"].clone(),
            live["hops"].clone()
        ),
        (true.into(), "human".into(), 0.into())
    );
    // The marker from zhiwei's real JID is a person typing through zhiwei's
    // bridge; the same from another JID under zhiwei's nick is not.
    let forged = cli.admit(&[
        "--agent",
        "mohe",
        "--from",
        &from,
        "--jid",
        "mallory@example.org/x",
        "--human-origin",
        "mohe: a person says",
    ]);
    assert_eq!(forged["reason"], "addressed", "{forged}");
    assert_eq!(forged["hops"], 1);
    let trusted = cli.admit(&[
        "--agent",
        "mohe",
        "--from",
        &from,
        "--jid",
        "zhiwei@example.org/cli",
        "--human-origin",
        "mohe: a person says so",
    ]);
    assert_eq!(
        (trusted["reason"].clone(), trusted["hops"].clone()),
        ("human".into(), 0.into())
    );

    let text = cli.run(
        &["admit", "--agent", "mohe", "--from", &from, "mohe, three"],
        &[],
    );
    assert!(text.status.success());
    assert_eq!(
        String::from_utf8(text.stdout).unwrap(),
        "reply (addressed, hops 1): 'zhiwei' addressed 'mohe'\n"
    );
    let text = cli.run(
        &["admit", "--agent", "mohe", "--from", &from, "mohe, four"],
        &[],
    );
    assert!(text.status.success(), "exit 0 when it must not reply");
    assert_eq!(
        String::from_utf8(text.stdout).unwrap(),
        "do not reply (loop-guard, hops 2, heard): 2 agent messages since the last human one (max_hops 2)\n"
    );
}

#[test]
fn cli_admit_errors_have_the_usual_statuses() {
    let Some(cli) = Cli::new("") else {
        return;
    };
    let from = format!("{ROOM}/zhiwei");
    let (code, line) = failed(&cli.run(&["admit", "--agent", "nobody", "--from", &from, "x"], &[]));
    assert_eq!(code, 2, "{line}");
    assert!(line.contains("nobody"), "{line}");
    let (code, line) = failed(&cli.run(
        &[
            "admit",
            "--agent",
            "mohe",
            "--from",
            "elsewhere@conference.example.org/zhiwei",
            "x",
        ],
        &[],
    ));
    assert_eq!(code, 2, "{line}");
    assert!(
        line.contains("is not `room/nick` of the configured room"),
        "{line}"
    );
    // No database: exit 1, naming the path.
    std::fs::remove_file(&cli.db).unwrap();
    let (code, line) = failed(&cli.run(&["admit", "--agent", "mohe", "--from", &from, "x"], &[]));
    assert_eq!(code, 1, "{line}");
    assert!(line.contains(&cli.db.display().to_string()), "{line}");
}

/// `admit` under each meeting setting: a table of (setting, messages,
/// decisions) run through the CLI, each on a fresh state.
#[test]
fn cli_admit_follows_the_meeting_settings() {
    let person = format!("{ROOM}/alice");
    let zhiwei = format!("{ROOM}/zhiwei");
    let free_room = format!("free_response_rooms = [\"{ROOM}\"]\n");
    let reply_to_zhiwei = ["--reply-to", zhiwei.as_str()];
    // (extra config, [(agent, sender, extra args, body, reply, reason)])
    type Step<'a> = (&'a str, &'a str, &'a [&'a str], &'a str, bool, &'a str);
    let table: [(&str, Vec<Step>); 7] = [
        (
            "",
            vec![
                (
                    "mohe",
                    &person,
                    &[],
                    "what does everyone think?",
                    false,
                    "not-addressed",
                ),
                (
                    "mohe",
                    &person,
                    &[],
                    "@zhiwei hi",
                    false,
                    "addressed-elsewhere",
                ),
                ("zhiwei", &person, &[], "@zhiwei hi", true, "human"),
                ("zhiwei", &person, &reply_to_zhiwei, "go on", true, "human"),
                (
                    "mohe",
                    &person,
                    &["--reply-to", "zhiwei"],
                    "go on then",
                    false,
                    "addressed-elsewhere",
                ),
                // An agent's message by id, then a reply naming that id only.
                (
                    "mohe",
                    &zhiwei,
                    &["--stanza-id", "s-7"],
                    "@mohe a plan",
                    true,
                    "addressed",
                ),
                (
                    "mohe",
                    &person,
                    &["--reply-to-id", "s-7"],
                    "fine by me",
                    false,
                    "addressed-elsewhere",
                ),
                (
                    "mohe",
                    &zhiwei,
                    &[],
                    "nobody in particular",
                    false,
                    "not-addressed",
                ),
            ],
        ),
        (
            "require_mention = false\n",
            vec![
                (
                    "mohe",
                    &person,
                    &[],
                    "what does everyone think?",
                    true,
                    "free-response",
                ),
                (
                    "mohe",
                    &person,
                    &[],
                    "@zhiwei only you",
                    false,
                    "addressed-elsewhere",
                ),
            ],
        ),
        (
            &free_room,
            vec![("mohe", &person, &[], "anyone?", true, "free-response")],
        ),
        (
            "allow_bots = \"none\"\n",
            vec![
                (
                    "mohe",
                    &zhiwei,
                    &[],
                    "@mohe your view?",
                    false,
                    "bots-not-allowed",
                ),
                ("mohe", &person, &[], "@mohe yours?", true, "human"),
            ],
        ),
        (
            "allow_bots = \"all\"\n",
            vec![
                (
                    "mohe",
                    &zhiwei,
                    &[],
                    "done for today",
                    true,
                    "free-response",
                ),
                (
                    "mohe",
                    &zhiwei,
                    &[],
                    "@xiaoguo your turn",
                    false,
                    "addressed-elsewhere",
                ),
            ],
        ),
        (
            "mention_patterns = [\"^team[,:]\"]\n",
            vec![
                ("mohe", &person, &[], "Team: stand-up", true, "human"),
                (
                    "mohe",
                    &person,
                    &[],
                    "the team is here",
                    false,
                    "not-addressed",
                ),
            ],
        ),
        (
            "stop_words = [\"enough\"]\n",
            vec![
                ("mohe", &person, &[], "@mohe go", true, "human"),
                ("mohe", &person, &[], "Enough!", false, "stopped"),
                ("mohe", &zhiwei, &[], "@mohe and then", false, "stopped"),
                ("mohe", &person, &[], "stop", false, "not-addressed"),
                ("mohe", &zhiwei, &[], "@mohe so", true, "addressed"),
            ],
        ),
    ];
    for (keys, steps) in table {
        let Some(cli) = Cli::new(&format!("\n[bot]\n{keys}")) else {
            return;
        };
        for (agent, from, more, body, reply, reason) in steps {
            let mut args = vec!["--agent", agent, "--from", from];
            args.extend_from_slice(more);
            args.extend(["--", body]);
            let d = cli.admit(&args);
            assert_eq!(
                (d["reply"].as_bool(), d["reason"].as_str()),
                (Some(reply), Some(reason)),
                "[bot] {keys:?}, {agent} on {from} {more:?} {body:?}: {d}"
            );
        }
    }
}

/// A person's stop through the CLI: `stop` is true for the agents it
/// stops, and the text form says so.
#[test]
fn cli_admit_says_stop() {
    let Some(cli) = Cli::new("") else {
        return;
    };
    let person = format!("{ROOM}/alice");
    let d = cli.admit(&["--agent", "zhiwei", "--from", &person, "@zhiwei stop"]);
    assert_eq!(
        (d["reason"].as_str(), d["stop"].as_bool()),
        (Some("stopped"), Some(true))
    );
    let d = cli.admit(&["--agent", "mohe", "--from", &person, "@zhiwei stop."]);
    assert_eq!(
        (d["reason"].as_str(), d["stop"].as_bool()),
        (Some("addressed-elsewhere"), Some(false))
    );
    let text = cli.run(
        &["admit", "--agent", "xiaoguo", "--from", &person, "停！"],
        &[],
    );
    let out = String::from_utf8(text.stdout).unwrap();
    assert_eq!(
        out,
        "stop (stopped, hops 0, heard): 'alice' stopped every agent until a person writes again\n"
    );
}

/// `admit` under the sample config with `section` added, which the
/// config refuses: the CLI exits 2; its error line and the config's line
/// count. `None` (skip) when the fixtures are missing.
fn admit_refused(section: &str) -> Option<(String, usize)> {
    let cli = Cli::new(section)?;
    let lines = std::fs::read_to_string(&cli.config)
        .unwrap()
        .lines()
        .count();
    let from = format!("{ROOM}/zhiwei");
    let (code, line) = failed(&cli.run(&["admit", "--agent", "mohe", "--from", &from, "x"], &[]));
    assert_eq!(code, 2, "{line}");
    Some((line, lines))
}

/// A meeting key the config refuses names its line; the CLI exits 2.
#[test]
fn cli_admit_refuses_a_bad_mention_pattern_with_its_line() {
    let Some((line, lines)) = admit_refused("\n[bot]\nmention_patterns = [\"(team\"]\n") else {
        return;
    };
    assert!(
        line.contains(&format!(
            "line {lines}: [bot] mention_patterns: \"(team\" is not a valid pattern"
        )),
        "{line}"
    );
}

/// A `[loop_guard]` value the config refuses names its line; the CLI exits 2.
#[test]
fn cli_admit_refuses_a_bad_loop_guard_section_with_its_line() {
    let Some((line, lines)) = admit_refused("\n[loop_guard]\nwindow_seconds = 0\n") else {
        return;
    };
    assert!(
        line.ends_with(&format!(
            "line {lines}: [loop_guard] window_seconds must be at least 1"
        )),
        "{line}"
    );
}

/// Bad JSON in the stored state: read as a capped chain (an agent's
/// message is refused, saying why), a person still gets through, and the
/// state is valid again afterwards.
#[test]
fn cli_admit_fails_closed_on_a_malformed_stored_state() {
    let Some(cli) = Cli::new("") else {
        return;
    };
    let key = guard_key("mohe", ROOM);
    rusqlite::Connection::open(&cli.db)
        .unwrap()
        .execute(
            "INSERT OR REPLACE INTO state_meta (key, value) VALUES (?1, '{\"v\":1,\"hops\":')",
            [&key],
        )
        .unwrap();
    let from = format!("{ROOM}/zhiwei");
    let d = cli.admit(&["--agent", "mohe", "--from", &from, "mohe?"]);
    assert_eq!(
        (d["reply"].clone(), d["reason"].clone(), d["hops"].clone()),
        (false.into(), "loop-guard".into(), 7.into())
    );
    assert!(
        d["detail"].as_str().unwrap().ends_with(&format!(
            "(the stored state {key} was not valid: read as 6 hops)"
        )),
        "{d}"
    );
    let stored: Value = serde_json::from_str(&meta(&cli.db, &key).unwrap()).unwrap();
    assert_eq!(stored["hops"], 7);
    let d = cli.admit(&[
        "--agent",
        "mohe",
        "--from",
        &format!("{ROOM}/alice"),
        "mohe?",
    ]);
    assert_eq!(
        (d["reply"].clone(), d["reason"].clone()),
        (true.into(), "human".into())
    );
}

/// The test clock (`SESSION_SWITCH_TEST_CLOCK_FILE`): the time in the
/// file is the host's `now`; an unreadable file is refused, never
/// replaced by the real clock.
#[test]
fn the_test_clock_file_sets_now_and_a_bad_one_is_refused() {
    let Some(cli) =
        Cli::new("\n[loop_guard]\nwindow_messages = 2\nwindow_seconds = 300\nmax_hops = 100\n")
    else {
        return;
    };
    let clock = cli.db.with_file_name("clock");
    let env = [("SESSION_SWITCH_TEST_CLOCK_FILE", clock.as_path())];
    let from = format!("{ROOM}/zhiwei");
    let admit = |at: &str, body: &str| -> Value {
        std::fs::write(&clock, at).unwrap();
        let out = cli.run(
            &["--json", "admit", "--agent", "mohe", "--from", &from, body],
            &env,
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(admit("1800000000", "mohe 1")["reply"], true);
    assert_eq!(admit("1800000100.5\n", "mohe 2")["reply"], true);
    let third = admit("1800000200", "mohe 3");
    assert_eq!(
        third["detail"],
        "more than 2 agent messages in the last 300 s (the room window's bound)"
    );
    // 300 s after the first, it has left the window.
    assert_eq!(
        admit("1800000300", "mohe 4")["reply"],
        false,
        "2nd and 3rd still in"
    );
    assert_eq!(admit("1800000700", "mohe 5")["reply"], true);
    let stored: Value =
        serde_json::from_str(&meta(&cli.db, &guard_key("mohe", ROOM)).unwrap()).unwrap();
    assert_eq!(stored["window"], serde_json::json!([1800000700.0]));

    std::fs::write(&clock, "soon").unwrap();
    let (code, line) = failed(&cli.run(&["admit", "--agent", "mohe", "--from", &from, "x"], &env));
    assert_eq!(code, 1, "{line}");
    assert!(line.contains("not a Unix time"), "{line}");
}

/// Issue 41 through the CLI: 21 agent messages in 300 s cap the room
/// window (`max_hops` 100, so the window is what refuses); a person's
/// `@mohe …` then is answered with `hops` 0 (the counter after a person's
/// message: reset), and the next agent message is counted from a fresh
/// window and answered (`hops` 1: the one agent message since the person).
#[test]
fn cli_admit_a_person_after_a_capped_window_resets_it() {
    let Some(cli) = Cli::new("\n[loop_guard]\nmax_hops = 100\n") else {
        return;
    };
    let clock = cli.db.with_file_name("clock");
    std::fs::write(&clock, "1800000000").unwrap();
    let env = [("SESSION_SWITCH_TEST_CLOCK_FILE", clock.as_path())];
    let admit = |args: &[&str]| -> Value {
        let mut all = vec!["--json", "admit", "--agent", "mohe"];
        all.extend_from_slice(args);
        let out = cli.run(&all, &env);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let zhiwei = format!("{ROOM}/zhiwei");
    for t in 1..=20 {
        let d = admit(&["--from", &zhiwei, "--", &format!("mohe, turn {t}")]);
        assert_eq!(d["reply"], true, "{t}: {d}");
    }
    assert_eq!(
        admit(&["--from", &zhiwei, "--", "mohe, turn 21"]),
        serde_json::json!({"reply": false, "reason": "loop-guard", "stop": false, "heard": true,
                           "hops": 21,
                           "detail": "more than 20 agent messages in the last 300 s (the room window's bound)"})
    );
    let alice = format!("{ROOM}/alice");
    assert_eq!(
        admit(&[
            "--from",
            &alice,
            "--jid",
            "alice@example.org",
            "--",
            "@mohe are you there?"
        ]),
        serde_json::json!({"reply": true, "reason": "human", "stop": false, "heard": false,
                           "hops": 0,
                           "detail": "a person addressed 'mohe': the hop counter and the room window are reset"})
    );
    assert_eq!(
        admit(&["--from", &zhiwei, "--", "mohe, alice is back"]),
        serde_json::json!({"reply": true, "reason": "addressed", "stop": false, "heard": false,
                           "hops": 1, "detail": "'zhiwei' addressed 'mohe'"})
    );
    let stored: Value =
        serde_json::from_str(&meta(&cli.db, &guard_key("mohe", ROOM)).unwrap()).unwrap();
    assert_eq!(stored["window"], serde_json::json!([1800000000.0]));
}

// ------------------------------------------------------------- properties

/// The shipped component, compiled once for every case.
fn shipped() -> &'static Policy {
    static POLICY: OnceLock<Policy> = OnceLock::new();
    POLICY.get_or_init(|| Policy::load(component_path(), options()).unwrap())
}

/// A message in the room's log.
#[derive(Clone, Debug)]
struct Posted {
    nick: String,
    jid: Option<String>,
    body: String,
    human_origin: bool,
    delayed: bool,
    /// A bot's reply (index of the agent), as opposed to a person's
    /// message, a CLI send or a forgery.
    by_bot: Option<usize>,
}

/// What is injected into the room besides the bots' replies.
#[derive(Clone, Copy, Debug)]
enum Outside {
    /// A person in the room.
    Person,
    /// A person typing through agent `i`'s CLI (the marker, agent's JID).
    CliSend(usize),
    /// The room replaying a person's line to a bot that (re)joined.
    Replay,
    /// Agent zhiwei's nick and the marker, from another JID.
    Forged,
    /// The person says her last live line again.
    Repeat,
}

fn outside() -> impl Strategy<Value = Outside> {
    prop_oneof![
        3 => Just(Outside::Person),
        3 => (0usize..3).prop_map(Outside::CliSend),
        1 => Just(Outside::Replay),
        1 => Just(Outside::Forged),
    ]
}

/// A bot's decision on a live human message (a person's or a CLI send),
/// with the bot's stored guard state right after it.
#[derive(Debug)]
struct HumanSeen {
    /// The receiving agent (index).
    agent: usize,
    what: Outside,
    /// The same sender said the same body to this bot within
    /// `duplicate_seconds` of the first time (the harness's own record).
    repeat: bool,
    reply: bool,
    reason: AdmitReason,
    /// `hops` and the room window's length in the stored state after it.
    stored_hops: u64,
    stored_window: usize,
}

/// One run of [`run_room_with`].
struct RoomRun {
    /// Per agent: replies since its last reset, one entry per segment.
    segments: Vec<Vec<u32>>,
    /// Bot messages in the room.
    total: usize,
    /// Human messages injected (repeats included).
    resets: usize,
    humans: Vec<HumanSeen>,
}

/// [`run_room_with`] with the default room window and duplicate time.
fn run_room(
    first: Outside,
    max_hops: u32,
    in_log_order: bool,
    events: &[(u8, Outside)],
    choices: &[u16],
) -> (Vec<Vec<u32>>, usize, usize) {
    let guard = LoopGuard {
        max_hops,
        ..sample_settings().loop_guard
    };
    let run = run_room_with(first, guard, in_log_order, events, choices);
    (run.segments, run.total, run.resets)
}

/// One run: three bots that answer everything they are allowed to, naming
/// the other two. `in_log_order`: every bot reads the room in the room's
/// one order (a MUC), at its own pace; else each bot picks any unread
/// message (any delivery order). A bot's reply is posted later than it was
/// decided (`choices` drive who acts: read, post, or advance the clock).
/// `first` opens the room (a person or a CLI send); the clock moves 1–79 s
/// at every step.
fn run_room_with(
    first: Outside,
    guard: LoopGuard,
    in_log_order: bool,
    events: &[(u8, Outside)],
    choices: &[u16],
) -> RoomRun {
    let mut settings = sample_settings();
    let duplicate_seconds = f64::from(guard.duplicate_seconds);
    settings.loop_guard = guard;
    let names: Vec<String> = settings.agents.iter().map(|a| a.name.clone()).collect();
    let nicks: Vec<String> = settings.agents.iter().map(|a| a.nick.clone()).collect();
    let jids: Vec<String> = settings.agents.iter().map(|a| a.jid.clone()).collect();
    let n = nicks.len();
    let host = FakeHost::default();
    host.state().room = ROOM.into();
    host.state().now = 1_800_000_000.0;
    let mut bot = shipped().instance(host.clone(), settings);

    let mut log: Vec<Posted> = Vec::new();
    let mut unread: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut outbox: Vec<Vec<String>> = vec![Vec::new(); n];
    // Per agent: replies since its last reset, one entry per segment.
    let mut segments: Vec<Vec<u32>> = vec![vec![0]; n];
    let mut resets = 0;
    let mut replies = vec![0u32; n];
    // What each injected message was (by log index), and per bot when it
    // first read each human line inside the duplicate window.
    let mut kinds: std::collections::HashMap<usize, Outside> = Default::default();
    let mut first_read: Vec<std::collections::HashMap<(String, String), f64>> =
        vec![Default::default(); n];
    let mut humans = Vec::new();
    let mut serial = 0usize;
    let post = |log: &mut Vec<Posted>, unread: &mut Vec<Vec<usize>>, p: Posted| {
        log.push(p);
        for u in unread.iter_mut() {
            u.push(log.len() - 1);
        }
    };
    let person = |k: usize| Posted {
        nick: "alice".into(),
        jid: Some("alice@example.org".into()),
        body: format!("hello mohe zhiwei xiaoguo, #{k}"),
        human_origin: false,
        delayed: false,
        by_bot: None,
    };
    let cli = |i: usize, step: usize| Posted {
        nick: nicks[i].clone(),
        jid: Some(format!("{}/cli", jids[i])),
        body: format!(
            "mohe zhiwei xiaoguo, a person speaks through {} #{step}",
            nicks[i]
        ),
        human_origin: true,
        delayed: false,
        by_bot: None,
    };
    let opening = match first {
        Outside::CliSend(i) => cli(i, 0),
        _ => person(0),
    };
    let mut last_person = person(0).body;
    kinds.insert(0, first);
    post(&mut log, &mut unread, opening);
    resets += 1;
    let mut events = events.iter().peekable();
    let mut step = 0usize;
    let mut choice = choices.iter().cycle();
    loop {
        step += 1;
        while let Some((_, what)) = events.next_if(|(at, _)| usize::from(*at) <= step / 4) {
            serial += 1;
            let p = match *what {
                Outside::Person => {
                    resets += 1;
                    let p = person(serial);
                    last_person = p.body.clone();
                    p
                }
                Outside::Repeat => {
                    resets += 1;
                    Posted {
                        body: last_person.clone(),
                        ..person(0)
                    }
                }
                Outside::CliSend(i) => {
                    resets += 1;
                    cli(i, serial)
                }
                Outside::Replay => Posted {
                    delayed: true,
                    ..person(0)
                },
                Outside::Forged => Posted {
                    nick: "zhiwei".into(),
                    jid: Some("mallory@example.org/x".into()),
                    body: format!("mohe xiaoguo, a person says #{serial}"),
                    human_origin: true,
                    delayed: false,
                    by_bot: None,
                },
            };
            kinds.insert(log.len(), *what);
            post(&mut log, &mut unread, p);
        }
        let busy: Vec<usize> = (0..n)
            .filter(|&i| !unread[i].is_empty() || !outbox[i].is_empty())
            .collect();
        if busy.is_empty() && events.peek().is_none() {
            break;
        }
        assert!(log.len() < 2000, "the room never fell silent");
        let c = usize::from(*choice.next().unwrap());
        host.state().now += f64::from((c % 7) as u32 * 13 + 1);
        if busy.is_empty() {
            continue;
        }
        let i = busy[c % busy.len()];
        // Post a decided reply (sometimes), else read the next message.
        if !outbox[i].is_empty() && (unread[i].is_empty() || c % 3 == 0) {
            let body = outbox[i].remove(0);
            post(
                &mut log,
                &mut unread,
                Posted {
                    nick: nicks[i].clone(),
                    jid: Some(format!("{}/bot", jids[i])),
                    body,
                    human_origin: false,
                    delayed: false,
                    by_bot: Some(i),
                },
            );
            continue;
        }
        let at = if in_log_order {
            0
        } else {
            (c / 3) % unread[i].len()
        };
        let index = unread[i].remove(at);
        let p = log[index].clone();
        let now = host.state().now;
        let d = bot
            .admit(
                &nicks[i],
                &RoomMessage {
                    occupant: format!("{ROOM}/{}", p.nick),
                    jid: p.jid.clone(),
                    body: p.body.clone(),
                    delayed: p.delayed,
                    human_origin: p.human_origin,
                    stanza_id: None,
                    reply_to: None,
                    caught_up: false,
                },
            )
            .unwrap();
        let human = match kinds.get(&index) {
            Some(k @ (Outside::Person | Outside::Repeat | Outside::CliSend(_))) if !p.delayed => {
                Some(*k)
            }
            _ => None,
        };
        if let Some(what) = human {
            let sender = (p.nick.clone(), p.body.clone());
            let repeat = first_read[i]
                .get(&sender)
                .is_some_and(|&t| now - t < duplicate_seconds);
            if !repeat {
                first_read[i].insert(sender, now);
            }
            let stored: Value =
                serde_json::from_str(&host.state().meta[&guard_key(&names[i], ROOM)]).unwrap();
            humans.push(HumanSeen {
                agent: i,
                what,
                repeat,
                reply: d.reply,
                reason: d.reason,
                stored_hops: stored["hops"].as_u64().unwrap(),
                stored_window: stored["window"].as_array().unwrap().len(),
            });
        }
        if d.reason == AdmitReason::Human
            || (d.reason == AdmitReason::OwnMessage
                && d.hops == 0
                && p.by_bot.is_none()
                && !p.delayed)
        {
            segments[i].push(0);
        }
        if d.reply {
            replies[i] += 1;
            *segments[i].last_mut().unwrap() += 1;
            let others: Vec<&str> = (0..n)
                .filter(|&j| j != i)
                .map(|j| nicks[j].as_str())
                .collect();
            outbox[i].push(format!(
                "{}: reply {} of {}",
                others.join(" and "),
                replies[i],
                nicks[i]
            ));
        }
    }
    let total = log.iter().filter(|p| p.by_bot.is_some()).count();
    RoomRun {
        segments,
        total,
        resets,
        humans,
    }
}

/// [`outside`] with a person's repeats.
fn outside_with_repeats() -> impl Strategy<Value = Outside> {
    prop_oneof![
        4 => outside(),
        1 => Just(Outside::Repeat),
    ]
}

fn props_config() -> ProptestConfig {
    ProptestConfig {
        cases: 48,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(props_config())]

    /// In the room's one order (a MUC): each agent replies at most
    /// `max_hops` times between two human messages it sees, and the room
    /// carries at most `(n − 1) × max_hops + 1` bot messages per human
    /// message (docs/src/concepts/loop-guard.md#the-bound).
    #[test]
    fn in_the_rooms_order_each_agent_and_the_room_stay_within_the_bound(
        max_hops in 2u32..=7,
        events in prop::collection::vec((0u8..40, outside()), 0..5)
            .prop_map(|mut v| { v.sort_by_key(|e| e.0); v }),
        choices in prop::collection::vec(any::<u16>(), 1..64),
    ) {
        let (segments, total, resets) = run_room(Outside::Person, max_hops, true, &events, &choices);
        for (agent, s) in segments.iter().enumerate() {
            prop_assert!(s.iter().all(|&r| r <= max_hops), "agent {agent}: {s:?}");
        }
        let bound = resets * (2 * max_hops as usize + 1);
        prop_assert!(total <= bound, "{total} > {bound} ({resets} human messages)");
    }

    /// Any delivery order (each bot reads any unread message next, e.g. a
    /// gateway deciding concurrently, so it may see a reply before the
    /// message it answers): each agent still replies at most `max_hops`
    /// times between two human messages it sees; the room carries at most
    /// `n × max_hops` per human message plus `n × (max_hops − 1)` that bots
    /// sent before they saw the first (docs/src/concepts/loop-guard.md#the-bound).
    #[test]
    fn in_any_delivery_order_each_agent_and_the_room_stay_within_the_bound(
        max_hops in 2u32..=7,
        events in prop::collection::vec((0u8..40, outside()), 0..5)
            .prop_map(|mut v| { v.sort_by_key(|e| e.0); v }),
        choices in prop::collection::vec(any::<u16>(), 1..64),
    ) {
        let (segments, total, resets) = run_room(Outside::Person, max_hops, false, &events, &choices);
        for (agent, s) in segments.iter().enumerate() {
            prop_assert!(s.iter().all(|&r| r <= max_hops), "agent {agent}: {s:?}");
        }
        let bound = resets * 3 * max_hops as usize + 3 * (max_hops as usize - 1);
        prop_assert!(total <= bound, "{total} > {bound} ({resets} human messages)");
    }
}

proptest! {
    #![proptest_config(props_config())]

    /// Issue 41: random rooms in the room's one order (people, CLI sends,
    /// a person's repeats, replays, forgeries and the bots' own replies,
    /// the clock moving 1–79 s a step) under loop-guard settings where the
    /// room window may cap a chain before the hop counter does. Every bot
    /// answers a person's message (each names all three agents) unless the
    /// same line came within `duplicate_seconds` of its first time (then
    /// it refuses it as a duplicate, or, once its bounded memory of recent
    /// messages let the line go, answers it as new); after
    /// every live human message that is no such repeat (a person's or a
    /// CLI send) the bot's stored state has no hop and an empty room
    /// window; and the bounds of docs/src/concepts/loop-guard.md#the-bound still hold: each agent replies at
    /// most `max_hops` times between two human messages, the room carries
    /// at most `(n − 1) × max_hops + 1` bot messages per human message.
    #[test]
    fn a_persons_message_is_answered_and_empties_the_room_window(
        max_hops in 2u32..=12,
        window_messages in 1u32..=12,
        window_seconds in 20u32..=400,
        duplicate_seconds in prop_oneof![Just(0u32), 20u32..=600],
        events in prop::collection::vec((0u8..40, outside_with_repeats()), 0..8)
            .prop_map(|mut v| { v.sort_by_key(|e| e.0); v }),
        choices in prop::collection::vec(any::<u16>(), 1..64),
    ) {
        let guard = LoopGuard { max_hops, window_messages, window_seconds, duplicate_seconds };
        let run = run_room_with(Outside::Person, guard, true, &events, &choices);
        for h in &run.humans {
            if h.repeat {
                // Refused as a duplicate, or read as a new line once the
                // guard's bounded memory (128 recent messages) let it go.
                prop_assert!(
                    matches!((h.reply, h.reason), (false, AdmitReason::Duplicate) | (true, AdmitReason::Human)),
                    "{:?}", h
                );
                continue;
            }
            let own_cli = matches!(h.what, Outside::CliSend(i) if i == h.agent);
            let want = if own_cli {
                (false, AdmitReason::OwnMessage)
            } else {
                (true, AdmitReason::Human)
            };
            prop_assert_eq!((h.reply, h.reason), want, "{:?}", h);
            prop_assert_eq!((h.stored_hops, h.stored_window), (0, 0), "{:?}", h);
        }
        for (agent, s) in run.segments.iter().enumerate() {
            prop_assert!(s.iter().all(|&r| r <= max_hops), "agent {}: {:?}", agent, s);
        }
        let bound = run.resets * (2 * max_hops as usize + 1);
        prop_assert!(run.total <= bound, "{} > {} ({} human messages)", run.total, bound, run.resets);
    }
}

/// The figure docs/src/concepts/loop-guard.md#the-bound states: one message, bots that answer at once in
/// the room's order, defaults. A person in the room: 13 bot messages
/// (`(n − 1) × max_hops + 1`); a CLI send: 12 (`(n − 1) × max_hops`: the
/// sender's own bot does not answer its person).
#[test]
fn one_human_message_makes_at_most_13_bot_messages_and_a_cli_send_12() {
    // choices [0]: the first busy bot acts, posting as soon as it decided.
    let (_, person, _) = run_room(Outside::Person, 6, true, &[], &[0]);
    assert_eq!(person, 13);
    let (segments, cli, _) = run_room(Outside::CliSend(0), 6, true, &[], &[0]);
    assert_eq!(cli, 12);
    // mohe's bot does not answer its own person: no reply before agents spoke.
    assert!(segments[0].iter().sum::<u32>() <= 5, "{segments:?}");
}
