//! End to end through the `xmpp-session-bridge` binary, on private copies
//! of the real Hermes fixtures and the real ejabberd of the test run: a real
//! XMPP occupant watches the room for every body.

use serde_json::Value;
use session_switch_tests::room_observer::RoomObserver;
use session_switch_tests::sample::{SAMPLE_CLI, sample_config_text};
use session_switch_tests::xmpp::{Ejabberd, unused_port};
use session_switch_tests::{bin_path, cli, fixture_copy, pending_sends, table_snapshot};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

const CLI_SESSION: &str = SAMPLE_CLI;
const ROOM_WAIT: Duration = Duration::from_secs(20);

/// One test's world: a fixture copy and a config for the test ejabberd.
struct World {
    _dir: tempfile::TempDir,
    db: PathBuf,
    config: PathBuf,
    ej: Ejabberd,
}

/// How the config reaches ejabberd, and other knobs of a test.
struct Setup<'a> {
    fixture: &'a str,
    transport: &'a str,
    /// `ejabberdctl = [...]` (ignored for http).
    ctl: Vec<String>,
    api_url: Option<String>,
    ttl_seconds: u32,
    legacy_agent: Option<&'a str>,
    /// The JID mohe posts as (default: mohe's own, a subscriber).
    mohe_jid: Option<String>,
    timeout_seconds: u32,
    /// The room of `[xmpp] room` (default: the test server's room).
    room: Option<String>,
}

impl Setup<'_> {
    fn http() -> Self {
        Setup {
            fixture: "hermes-latest.db",
            transport: "http",
            ctl: vec![],
            api_url: None,
            ttl_seconds: 3600,
            legacy_agent: None,
            mohe_jid: None,
            timeout_seconds: 10,
            room: None,
        }
    }
}

impl World {
    fn new(setup: Setup<'_>) -> Option<World> {
        let ej = Ejabberd::from_env()?;
        let (dir, db) = fixture_copy(setup.fixture)?;
        let config = dir.path().join("session-switch.toml");
        let ctl = setup
            .ctl
            .iter()
            .map(|a| format!("{a:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        let api_url = setup.api_url.clone().unwrap_or_else(|| ej.api_url.clone());
        let legacy = setup
            .legacy_agent
            .map(|a| format!("legacy_agent = \"{a}\"\n"))
            .unwrap_or_default();
        let jid = |name: &str| match (name, &setup.mohe_jid) {
            ("mohe", Some(jid)) => jid.clone(),
            _ => ej.jid(name),
        };
        let xmpp = format!(
            "transport = \"{transport}\"\nejabberdctl = [{ctl}]\napi_url = \"{api_url}\"\n\
             timeout_seconds = {timeout}\n",
            transport = setup.transport,
            ctl = if ctl.is_empty() {
                "\"ejabberdctl\"".to_string()
            } else {
                ctl
            },
            timeout = setup.timeout_seconds,
        );
        let redirect = format!("ttl_seconds = {}\n{legacy}", setup.ttl_seconds);
        let room = setup.room.clone().unwrap_or_else(|| ej.room.clone());
        let text = sample_config_text(&room, &jid, &xmpp, &redirect);
        std::fs::write(&config, text).unwrap();
        Some(World {
            _dir: dir,
            db,
            config,
            ej,
        })
    }

    fn cli(&self, args: &[&str]) -> Output {
        self.cli_with_stdin(args, None)
    }

    /// Mohe's XMPP history is still `history_before` and its stored record
    /// still `record`: a refused send wrote neither.
    fn assert_unwritten(&self, history_before: &[(String, String)], record: &str, case: &str) {
        assert_eq!(self.rows("xmpp-mohe-v2"), history_before, "{case}");
        let stored: String = self
            .conn()
            .query_row(
                "SELECT value FROM state_meta WHERE key = 'session_switch:active:mohe'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(stored, record, "{case}: the record is untouched");
    }

    /// Store a record for mohe naming the CLI session, stamped `age`
    /// seconds before this clock (negative: ahead of it); its JSON text.
    fn insert_mohe_record(&self, age: f64) -> String {
        let record = serde_json::json!({
            "session_id": CLI_SESSION,
            "timestamp": session_switch_runtime::unix_now() - age,
            "agent": "mohe",
        })
        .to_string();
        self.conn()
            .execute(
                "INSERT INTO state_meta (key, value) VALUES ('session_switch:active:mohe', ?1)",
                [&record],
            )
            .unwrap();
        record
    }

    fn cli_with_stdin(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = cli(&self.config, &self.db);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("run xmpp-session-bridge");
        let mut input = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            // A CLI that refuses an over-long message stops reading: the
            // broken pipe is its answer, not an error of the test.
            let _ = input.write_all(text.as_bytes());
        }
        drop(input);
        child.wait_with_output().unwrap()
    }

    /// Run with `--json`, expect exit 0, parse stdout.
    fn json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.cli(&all);
        assert!(
            out.status.success(),
            "{args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: stdout is not JSON ({e})"))
    }

    fn conn(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(&self.db).unwrap()
    }

    /// Rows of `session` as (role, content), in id order.
    fn rows(&self, session: &str) -> Vec<(String, String)> {
        let conn = self.conn();
        let mut st = conn
            .prepare("SELECT role, coalesce(content, '') FROM messages WHERE session_id = ?1 ORDER BY id")
            .unwrap();
        st.query_map([session], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }
}

/// A body no other test sends.
fn unique(text: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{text} #{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Exit status, and stderr as one line (docs/src/design/contracts.md: a non-zero exit prints
/// exactly one line on stderr).
fn failed(out: &Output) -> (i32, String) {
    let stderr = String::from_utf8(out.stderr.clone()).unwrap();
    assert_eq!(
        stderr.lines().count(),
        1,
        "stderr is not one line: {stderr:?}"
    );
    assert!(
        out.stdout.is_empty(),
        "stdout on failure: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    (
        out.status.code().expect("exit status"),
        stderr.trim_end().to_string(),
    )
}

#[test]
fn send_as_mohe_reaches_the_room_and_redirects_mohes_bot_only() {
    let Some(w) = World::new(Setup::http()) else {
        return;
    };
    let room = RoomObserver::join(&w.ej);
    let body = unique("e2e: 会议改到三点 🚀 \"quoted\" \\n $(id) [YOU] inside");
    let before = w.rows("xmpp-mohe-v2");

    let sent = w.json(&["send", &body, CLI_SESSION, "--agent", "mohe"]);
    assert_eq!(sent["delivered"], true);
    assert_eq!(sent["room"], w.ej.room.as_str());
    assert_eq!(sent["body"], body.as_str());
    assert_eq!(sent["record_key"], "session_switch:active:mohe");
    assert_eq!(
        room.wait_for_body(&body, ROOM_WAIT).as_deref(),
        Some("mohe"),
        "the room never got {body:?}"
    );

    // Exactly one new row, [YOU]-tagged, with its provenance and the record.
    let after = w.rows("xmpp-mohe-v2");
    assert_eq!(after.len(), before.len() + 1);
    assert_eq!(after[..before.len()], before[..]);
    assert_eq!(
        after.last().unwrap(),
        &("user".to_string(), format!("[YOU] {body}"))
    );
    let conn = w.conn();
    let id = sent["message_id"].as_i64().unwrap();
    let (agent, cli): (String, String) = conn
        .query_row(
            "SELECT agent, cli_session_id FROM session_switch_sent WHERE message_id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((agent.as_str(), cli.as_str()), ("mohe", CLI_SESSION));
    let record: String = conn
        .query_row(
            "SELECT value FROM state_meta WHERE key = 'session_switch:active:mohe'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let record: Value = serde_json::from_str(&record).unwrap();
    assert_eq!(
        (
            record["session_id"].as_str(),
            record["source"].as_str(),
            record["agent"].as_str()
        ),
        (Some(CLI_SESSION), Some("cli"), Some("mohe"))
    );

    // mohe's bot now loads the CLI session; zhiwei's bot does not move.
    let d = w.json(&["resolve", "xmpp-mohe-v2", "--agent", "mohe"]);
    assert_eq!(
        (
            d["session_id"].as_str(),
            d["redirected"].as_bool(),
            d["reason"].as_str()
        ),
        (Some(CLI_SESSION), Some(true), Some("redirected"))
    );
    let d = w.json(&["resolve", "xmpp-mohe", "--agent", "mohe"]);
    assert_eq!(
        d["session_id"], CLI_SESSION,
        "every XMPP session of mohe is redirected"
    );
    let d = w.json(&["resolve", "xmpp-zhiwei", "--agent", "zhiwei"]);
    assert_eq!(
        (
            d["session_id"].as_str(),
            d["redirected"].as_bool(),
            d["reason"].as_str()
        ),
        (Some("xmpp-zhiwei"), Some(false), Some("no-record"))
    );
    let d = w.json(&["resolve", "xmpp-zhiwei", "--agent", "mohe"]);
    assert_eq!(
        (d["session_id"].as_str(), d["reason"].as_str()),
        (Some("xmpp-zhiwei"), Some("not-agent-session"))
    );

    // The bot sees the CLI conversation (Hermes's fixture, 4 messages).
    let c = w.json(&["context", "xmpp-mohe-v2", "--agent", "mohe"]);
    assert_eq!(c["session_id"], CLI_SESSION);
    let msgs = c["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 4);
    assert_eq!(
        msgs[0]["content"],
        "Hello Hermes! Can you summarise today's plan?"
    );
    assert_eq!(msgs[2]["content"], "请用中文再说一遍，谢谢。");

    // The record is active, and the room's reflection is mohe's own.
    let active = w.json(&["active", "--agent", "mohe"]);
    assert_eq!(active.as_array().unwrap().len(), 1);
    assert_eq!(
        (
            active[0]["session_id"].as_str(),
            active[0]["valid"].as_bool()
        ),
        (Some(CLI_SESSION), Some(true))
    );
    assert!(active[0]["remaining_seconds"].as_f64().unwrap() > 3500.0);
    let own = |from: &str, agent: &str| {
        w.json(&["is-own", from, "--agent", agent])["own"]
            .as_bool()
            .unwrap()
    };
    assert!(own(&format!("{}/mohe", w.ej.room), "mohe"));
    assert!(own(&format!("{}/cli", w.ej.jid("mohe")), "mohe"));
    assert!(!own(&format!("{}/zhiwei", w.ej.room), "mohe"));
    assert!(!own(&format!("{}/mohe2", w.ej.room), "mohe"));
    assert!(own(&format!("{}/zhiwei", w.ej.room), "zhiwei"));
}

#[test]
fn context_of_the_xmpp_session_tags_mohes_own_lines() {
    let Some(w) = World::new(Setup::http()) else {
        return;
    };
    let body = unique("tagging check");
    w.json(&["send", &body, CLI_SESSION, "--agent", "mohe"]);
    w.json(&["clear", "--agent", "mohe"]);
    let c = w.json(&["context", "xmpp-mohe-v2", "--agent", "mohe"]);
    assert_eq!(
        (c["session_id"].as_str(), c["reason"].as_str()),
        (Some("xmpp-mohe-v2"), Some("no-record"))
    );
    let contents: Vec<&str> = c["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents.len(), 9);
    assert_eq!(contents[0], "[YOU] mohe: 大家好，今天的会议改到下午三点。");
    assert_eq!(
        contents[2],
        "zhiwei: Got it, I'll move the calendar invite."
    );
    assert_eq!(
        contents[4],
        "@mohe please share the meeting link before 3pm."
    );
    assert_eq!(
        contents[6],
        "mohe2: I'm mohe2, not mohe — please keep our notes separate."
    );
    assert_eq!(
        contents[8],
        format!("[YOU] {body}"),
        "our row, stored tagged, is tagged once"
    );
    // zhiwei's view of the same session: its own line tagged, mohe's not.
    let c = w.json(&[
        "context",
        "xmpp-mohe-v2",
        "--agent",
        "zhiwei",
        "--limit",
        "9",
    ]);
    let z: Vec<&str> = c["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(z[0], "mohe: 大家好，今天的会议改到下午三点。");
    assert_eq!(z[2], "[YOU] zhiwei: Got it, I'll move the calendar invite.");
    assert_eq!(
        z[8], body,
        "mohe's [YOU] is not zhiwei's: the tag is removed"
    );
    let c = w.json(&["context", "xmpp-mohe-v2", "--agent", "mohe", "--limit", "2"]);
    assert_eq!(c["messages"].as_array().unwrap().len(), 2);
}

#[test]
fn resolve_and_context_refuse_an_id_hermes_refuses_and_name_a_missing_session() {
    let Some(w) = World::new(Setup::http()) else {
        return;
    };
    for (id, problem) in [
        ("", "is empty"),
        ("../etc", "path-unsafe"),
        (" xmpp-mohe-v2", "blanks around it"),
    ] {
        for command in ["resolve", "context"] {
            assert_refused(&w, &[command, id, "--agent", "mohe"], 2, problem);
        }
    }
    let c = w.json(&["context", "nosuch", "--agent", "mohe"]);
    assert_eq!(
        (c["session_id"].as_str(), c["reason"].as_str()),
        (Some("nosuch"), Some("not-agent-session"))
    );
    assert_eq!(c["messages"].as_array().map(Vec::len), Some(0));
    let detail = c["detail"].as_str().unwrap();
    assert!(
        detail.ends_with("(session nosuch is not in state.db: no history)"),
        "{detail}"
    );
    // A session that is there says nothing of the kind, even when asked
    // for no rows.
    let c = w.json(&["context", CLI_SESSION, "--agent", "mohe", "--limit", "0"]);
    assert_eq!(c["messages"].as_array().map(Vec::len), Some(0));
    assert!(
        !c["detail"].as_str().unwrap().contains("not in state.db"),
        "{c}"
    );
}

#[test]
fn the_record_expires_after_the_ttl_and_clear_ends_it() {
    let Some(w) = World::new(Setup {
        ttl_seconds: 2,
        ..Setup::http()
    }) else {
        return;
    };
    w.json(&[
        "send",
        &unique("short-lived"),
        CLI_SESSION,
        "--agent",
        "mohe",
    ]);
    assert_eq!(
        w.json(&["resolve", "xmpp-mohe-v2", "--agent", "mohe"])["reason"],
        "redirected"
    );
    std::thread::sleep(Duration::from_millis(2100));
    let d = w.json(&["resolve", "xmpp-mohe-v2", "--agent", "mohe"]);
    assert_eq!(
        (d["session_id"].as_str(), d["reason"].as_str()),
        (Some("xmpp-mohe-v2"), Some("expired"))
    );

    w.json(&["send", &unique("again"), CLI_SESSION, "--agent", "mohe"]);
    assert_eq!(
        w.json(&["resolve", "xmpp-mohe-v2", "--agent", "mohe"])["redirected"],
        true
    );
    let cleared = w.json(&["clear", "--agent", "mohe"]);
    assert_eq!(
        cleared["cleared"],
        serde_json::json!(["session_switch:active:mohe"])
    );
    let d = w.json(&["resolve", "xmpp-mohe-v2", "--agent", "mohe"]);
    assert_eq!(
        (d["session_id"].as_str(), d["reason"].as_str()),
        (Some("xmpp-mohe-v2"), Some("no-record"))
    );
    assert_eq!(w.json(&["active"]), serde_json::json!([]));
}

#[test]
fn a_record_the_policy_refuses_is_replaced_by_the_next_send() {
    let Some(w) = World::new(Setup::http()) else {
        return;
    };
    for timestamp in ["9999999999", "1e400"] {
        let value = format!("{{\"session_id\": \"{CLI_SESSION}\", \"timestamp\": {timestamp}}}");
        w.conn()
            .execute(
                "INSERT OR REPLACE INTO state_meta (key, value) VALUES ('session_switch:active:mohe', ?1)",
                [&value],
            )
            .unwrap();
        let d = w.json(&["resolve", "xmpp-mohe-v2", "--agent", "mohe"]);
        assert_eq!(d["redirected"], false, "{timestamp}: {d}");
        let receipt = w.json(&[
            "send",
            &unique("replaces it"),
            CLI_SESSION,
            "--agent",
            "mohe",
        ]);
        assert_eq!(receipt["record_replaced"], true, "{timestamp}: {receipt}");
        let d = w.json(&["resolve", "xmpp-mohe-v2", "--agent", "mohe"]);
        assert_eq!(d["reason"], "redirected", "{timestamp}: {d}");
    }
}

/// `install-legacy-script` puts a script at the legacy tool's path, and the
/// agents' prompts call it as they called the legacy tool (`python3
/// ~/.hermes/scripts/xmpp_session_bridge.py send "…" "$HERMES_SESSION_ID"
/// --agent mohe`, `active`, `clear`): the same output and exit statuses as
/// the command itself.
#[test]
fn the_legacy_tools_path_runs_the_command_with_the_same_arguments() {
    let Some(w) = World::new(Setup::http()) else {
        return;
    };
    let home = w.db.parent().unwrap();
    assert_eq!(w.config.parent().unwrap(), home, "one Hermes home");
    let install = |args: &[&str]| {
        std::process::Command::new(bin_path())
            .arg("install-legacy-script")
            .args(args)
            .env("HERMES_HOME", home)
            .output()
            .unwrap()
    };
    let out = install(&[]);
    assert!(out.status.success(), "{out:?}");
    let script = home.join("scripts/xmpp_session_bridge.py");
    let legacy = |args: &[&str]| {
        std::process::Command::new("python3")
            .arg(&script)
            .args(args)
            .env("HERMES_HOME", home)
            .output()
            .unwrap()
    };
    let text = unique("@zhiwei through the legacy path");
    let sent = legacy(&["send", &text, CLI_SESSION, "--agent", "mohe"]);
    assert!(sent.status.success(), "{sent:?}");
    assert!(
        String::from_utf8_lossy(&sent.stdout).contains("sent"),
        "{sent:?}"
    );
    assert!(
        w.rows("xmpp-mohe-v2")
            .iter()
            .any(|(_, c)| *c == format!("[YOU] {text}")),
        "the send wrote mohe's history"
    );
    assert_eq!(
        legacy(&["agents"]).stdout,
        w.cli(&["agents"]).stdout,
        "the same output as the command"
    );
    let resolved: Value = serde_json::from_slice(
        &legacy(&["--json", "resolve", "xmpp-mohe-v2", "--agent", "mohe"]).stdout,
    )
    .unwrap();
    assert_eq!(resolved["session_id"], CLI_SESSION, "{resolved}");
    // Exit statuses are the command's: an unknown agent is refused (2).
    let refused = legacy(&["send", "x", CLI_SESSION, "--agent", "nobody"]);
    let direct = w.cli(&["send", "x", CLI_SESSION, "--agent", "nobody"]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert_eq!(refused.stderr, direct.stderr);
    let cleared = legacy(&["clear", "--agent", "mohe"]);
    assert!(cleared.status.success(), "{cleared:?}");
    assert_eq!(w.json(&["active"]), serde_json::json!([]));

    // Another file at that path is kept unless --force.
    std::fs::write(&script, "print('the legacy tool')\n").unwrap();
    let (status, line) = failed(&install(&[]));
    assert_eq!(status, 2, "{line}");
    assert!(line.contains("--force"), "{line}");
    assert_eq!(
        std::fs::read_to_string(&script).unwrap(),
        "print('the legacy tool')\n"
    );
    assert!(install(&["--force"]).status.success());
    assert!(legacy(&["active"]).status.success());
}

#[test]
fn the_legacy_tools_key_counts_for_the_legacy_agent_only() {
    // The fixture's `active_xmpp_sender_session` names the CLI session with
    // a June timestamp: read for mohe (expired), never for zhiwei.
    let Some(w) = World::new(Setup {
        legacy_agent: Some("mohe"),
        ..Setup::http()
    }) else {
        return;
    };
    let d = w.json(&["resolve", "xmpp-mohe-v2", "--agent", "mohe"]);
    assert_eq!(
        (d["redirected"].as_bool(), d["reason"].as_str()),
        (Some(false), Some("expired"))
    );
    let d = w.json(&["resolve", "xmpp-zhiwei", "--agent", "zhiwei"]);
    assert_eq!(d["reason"], "no-record");
    let cleared = w.json(&["clear", "--agent", "mohe"]);
    assert_eq!(
        cleared["cleared"],
        serde_json::json!(["active_xmpp_sender_session"])
    );
}

#[test]
fn send_through_ejabberdctl_and_the_docker_form() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    for ctl in [ej.ctl_argv(), Ejabberd::docker_argv()] {
        if ctl[0] == "docker" {
            assert!(
                ej.docker_on_path(),
                "the docker stand-in is not first in PATH"
            );
        }
        let Some(w) = World::new(Setup {
            transport: "ejabberdctl",
            ctl: ctl.clone(),
            fixture: "hermes-0.19.0.db",
            ..Setup::http()
        }) else {
            return;
        };
        let room = RoomObserver::join(&w.ej);
        let body = unique("--via ejabberdctl: 中文 x\", \"y\nsecond line");
        // A body that starts with `-` goes after `--`.
        let out = w.cli(&[
            "--json",
            "send",
            "--agent",
            "mohe",
            "--",
            &body,
            CLI_SESSION,
        ]);
        assert!(
            out.status.success(),
            "{ctl:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            room.wait_for_body(&body, ROOM_WAIT).as_deref(),
            Some("mohe"),
            "{ctl:?}"
        );
        assert_eq!(
            w.rows("xmpp-mohe-v2").last().unwrap().1,
            format!("[YOU] {body}")
        );
    }
}

#[test]
fn text_dash_reads_the_body_from_stdin() {
    let Some(w) = World::new(Setup::http()) else {
        return;
    };
    let room = RoomObserver::join(&w.ej);
    let body = unique("from stdin\nline two");
    let out = w.cli_with_stdin(
        &["send", "-", CLI_SESSION, "--agent", "mohe"],
        Some(&format!("{body}\r\n")),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // CRLF became LF inside; one trailing line break is dropped, as `$(…)`
    // would drop it.
    assert_eq!(
        room.wait_for_body(&body, ROOM_WAIT).as_deref(),
        Some("mohe")
    );
    let rows = w.rows("xmpp-mohe-v2");
    assert_eq!(rows.last().unwrap().1, format!("[YOU] {body}"));

    // More than the longest text the policy could accept is refused before
    // stdin is read to its end, and nothing is written.
    let before = table_snapshot(&w.db);
    let huge = "b".repeat(8_000_000);
    let (code, line) =
        failed(&w.cli_with_stdin(&["send", "-", CLI_SESSION, "--agent", "mohe"], Some(&huge)));
    assert_eq!(
        (code, line.contains("longer than 105536 bytes")),
        (2, true),
        "{line}"
    );
    assert_eq!(table_snapshot(&w.db), before);
}

/// A failed send exits with the documented status, prints one line, and
/// leaves every table's rows as they were.
fn assert_refused(w: &World, args: &[&str], status: i32, needle: &str) {
    let before = table_snapshot(&w.db);
    let (code, line) = failed(&w.cli(args));
    assert_eq!(code, status, "{args:?}: {line}");
    assert!(line.contains(needle), "{args:?}: {line:?} lacks {needle:?}");
    assert_eq!(
        table_snapshot(&w.db),
        before,
        "{args:?} changed the database"
    );
}

#[test]
fn failed_sends_change_nothing() {
    let Some(w) = World::new(Setup::http()) else {
        return;
    };
    let send =
        |text: &'static str, session: &'static str| ["send", text, session, "--agent", "mohe"];
    assert_refused(&w, &send("", CLI_SESSION), 2, "empty");
    assert_refused(&w, &send(" \x01\x1b[31m [YOU] ", CLI_SESSION), 2, "empty");
    let huge = "x".repeat(10_001);
    assert_refused(
        &w,
        &["send", &huge, CLI_SESSION, "--agent", "mohe"],
        2,
        "10001",
    );
    // Longer than any body the policy could accept: the host refuses it
    // before the policy's memory sees it.
    let longer = "y".repeat(110_000);
    assert_refused(
        &w,
        &["send", &longer, CLI_SESSION, "--agent", "mohe"],
        2,
        "110000 bytes long, far over the maximum of 10000 characters",
    );
    assert_refused(&w, &send("hi", ""), 2, "session");
    assert_refused(&w, &send("hi", "no-such-session"), 2, "no-such-session");
    assert_refused(&w, &send("hi", "xmpp-zhiwei"), 2, "xmpp-zhiwei");
    assert_refused(
        &w,
        &["send", "hi", CLI_SESSION, "--agent", "nobody"],
        2,
        "nobody",
    );
    // A text that looks like an option is refused, never taken for --help
    // (which would exit 0 with nothing sent).
    for text in ["-hmm, not sure", "-h", "-V"] {
        assert_refused(
            &w,
            &send(text, CLI_SESSION),
            2,
            "after the options and '--'",
        );
    }
    // The legacy tool warns: a send without a session id is useless.
    assert_refused(&w, &["send", "hi", "--agent", "mohe"], 2, "SESSION_ID");
}

#[test]
fn a_sender_the_room_does_not_accept_is_refused_before_posting() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    let outsider = ej.jid(ej.outsider());
    let Some(w) = World::new(Setup {
        mohe_jid: Some(outsider),
        ..Setup::http()
    }) else {
        return;
    };
    let room = RoomObserver::join(&w.ej);
    let body = unique("must not arrive");
    assert_refused(
        &w,
        &["send", &body, CLI_SESSION, "--agent", "mohe"],
        2,
        "subscribe",
    );
    assert_eq!(room.wait_for_body(&body, Duration::from_secs(2)), None);
}

/// An agent with a record was accepted before, so its post goes out beside
/// the sender check (docs/src/design/contracts.md step 2). When the room no longer accepts it,
/// the post was dropped (unless the JID is a MUC service admin): nothing is
/// recorded, the outcome is unknown (exit 3), and `active` lists the send
/// until `clear`.
#[test]
fn a_sender_refused_beside_its_post_is_an_unknown_outcome_listed_by_active() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    let outsider = ej.jid(ej.outsider());
    for transport in ["http", "ejabberdctl"] {
        let Some(w) = World::new(Setup {
            transport,
            ctl: ej.ctl_argv(),
            mohe_jid: Some(outsider.clone()),
            ..Setup::http()
        }) else {
            return;
        };
        // A minute old, as a delivered send leaves it.
        let record = w.insert_mohe_record(60.0);
        let room = RoomObserver::join(&w.ej);
        let body = unique("dropped beside the check");
        let history_before = w.rows("xmpp-mohe-v2");
        let (code, line) = failed(&w.cli(&["send", &body, CLI_SESSION, "--agent", "mohe"]));
        assert_eq!(code, 3, "{transport}: {line}");
        for needle in ["subscribe", "MUC service admin", "`active` lists it"] {
            assert!(
                line.contains(needle),
                "{transport}: {line:?} lacks {needle:?}"
            );
        }
        w.assert_unwritten(&history_before, &record, transport);
        let active = w.json(&["active"]);
        let pending = pending_sends(&active);
        assert_eq!(pending.len(), 1, "{transport}: {active}");
        assert_eq!(pending[0]["state"], "unknown", "{transport}: {active}");
        assert_eq!(pending[0]["body"], format!("[YOU] {body}"));
        let text = String::from_utf8(w.cli(&["active"]).stdout).unwrap();
        assert!(
            text.contains("has an unknown outcome (the post timed out after the request went out, or the sender check beside it failed)"),
            "{transport}: {text}"
        );
        assert_eq!(room.wait_for_body(&body, Duration::from_secs(2)), None);
        let cleared = w.json(&["clear", "--agent", "mohe"]);
        assert_eq!(
            cleared["pending_sends_cleared"], 1,
            "{transport}: {cleared}"
        );
    }
}

/// A record stamped ahead of this clock but within the future skew is
/// valid, and `active` says how far ahead instead of a negative age.
#[test]
fn active_names_a_record_from_ahead_of_this_clock_as_such() {
    let Some(w) = World::new(Setup::http()) else {
        return;
    };
    w.insert_mohe_record(-60.0);
    let out = w.cli(&["active", "--agent", "mohe"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("mohe: "))
        .unwrap_or_default();
    assert!(
        line.starts_with(&format!("mohe: {CLI_SESSION} (valid: written "))
            && line.contains(" s ahead of this clock, ")
            && !line.contains("age -"),
        "{text}"
    );
}

/// A pending-send intent that is not ours (bad JSON under our key) is named
/// by its key in plain `active`, not printed as a send with empty fields,
/// and `clear` removes it.
#[test]
fn active_names_a_malformed_pending_send_by_its_key_and_quotes_a_records_odd_id() {
    let Some(w) = World::new(Setup::http()) else {
        return;
    };
    let key = "session_switch:pending:mohe:broken";
    w.conn()
        .execute(
            "INSERT INTO state_meta (key, value) VALUES (?1, '{not json')",
            [key],
        )
        .unwrap();
    let out = w.cli(&["active", "--agent", "mohe"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!(
            "mohe: {key} is not a send of ours (unreadable as an intent); clear removes it"
        )) && !text.contains("a send from  "),
        "{text}"
    );
    let json = w.json(&["active", "--agent", "mohe"]);
    let p = &pending_sends(&json)[0];
    assert_eq!(p["state"], "malformed", "{json}");
    // Its fields are unreadable: null, not made-up values.
    for field in ["timestamp", "cli_session_id", "body"] {
        assert!(p[field].is_null(), "{field}: {json}");
    }
    let cleared = w.json(&["clear", "--agent", "mohe"]);
    assert_eq!(cleared["pending_sends_cleared"], 1, "{cleared}");

    // A record's session id that is empty, padded or holds control
    // characters is shown quoted with escapes: no blank field, no second
    // line, no terminal control sequence.
    for (id, shown) in [
        ("", "\"\""),
        ("   ", "\"   \""),
        ("a\nfake: line", "\"a\\nfake: line\""),
        ("\u{1b}[31mred", "\"\\u{1b}[31mred\""),
        ("abc\u{202e}fed", "\"abc\\u{202e}fed\""),
        ("a\u{2028}b", "\"a\\u{2028}b\""),
    ] {
        let record = serde_json::json!({"session_id": id, "timestamp": 1}).to_string();
        w.conn()
            .execute(
                "INSERT OR REPLACE INTO state_meta (key, value) VALUES ('session_switch:active:mohe', ?1)",
                [&record],
            )
            .unwrap();
        let out = w.cli(&["active", "--agent", "mohe"]);
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.starts_with(&format!("mohe: {shown} (")),
            "{id:?}: {text}"
        );
        assert_eq!(text.lines().count(), 1, "{id:?}: {text}");
        assert!(!text.contains('\u{1b}'), "{id:?}: {text}");
    }
}

/// A record outlives a change of `[xmpp] room`: the first send to a room
/// the server does not have runs its check beside the post, yet the post
/// reached nobody, so it is refused (exit 2) and nothing is written or
/// left pending, as for an agent without a record.
#[test]
fn a_send_to_a_missing_room_beside_its_check_is_refused_and_writes_nothing() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    let (_, service) = ej.room.split_once('@').unwrap();
    for transport in ["http", "ejabberdctl"] {
        let Some(w) = World::new(Setup {
            transport,
            ctl: ej.ctl_argv(),
            room: Some(format!("nosuchroom@{service}")),
            ..Setup::http()
        }) else {
            return;
        };
        // A minute old, as a delivered send leaves it.
        let record = w.insert_mohe_record(60.0);
        let history_before = w.rows("xmpp-mohe-v2");
        let body = unique("to a room that is not there");
        let (code, line) = failed(&w.cli(&["send", &body, CLI_SESSION, "--agent", "mohe"]));
        assert_eq!(code, 2, "{transport}: {line}");
        assert!(
            line.contains(&format!("room nosuchroom@{service} does not exist")),
            "{transport}: {line}"
        );
        w.assert_unwritten(&history_before, &record, transport);
        let active = w.json(&["active"]);
        assert!(pending_sends(&active).is_empty(), "{transport}: {active}");
    }
}

#[test]
fn ejabberd_down_is_an_error_and_changes_nothing() {
    let api_url = format!("http://127.0.0.1:{}/api", unused_port());
    let Some(w) = World::new(Setup {
        api_url: Some(api_url.clone()),
        timeout_seconds: 3,
        ..Setup::http()
    }) else {
        return;
    };
    assert_refused(
        &w,
        &["send", "hi", CLI_SESSION, "--agent", "mohe"],
        1,
        &api_url,
    );
    let dir = tempfile::tempdir().unwrap();
    let ctl = w.ej.dead_node_ctl(dir.path());
    let Some(w) = World::new(Setup {
        transport: "ejabberdctl",
        ctl,
        ..Setup::http()
    }) else {
        return;
    };
    assert_refused(
        &w,
        &["send", "hi", CLI_SESSION, "--agent", "mohe"],
        1,
        "down",
    );
}

#[test]
fn a_missing_database_or_config_names_the_path() {
    let Some(w) = World::new(Setup::http()) else {
        return;
    };
    let missing = Path::new("/nonexistent/state.db");
    let out = Command::new(bin_path())
        .args(["--config"])
        .arg(&w.config)
        .arg("--db")
        .arg(missing)
        .args(["resolve", "xmpp-mohe-v2", "--agent", "mohe"])
        .output()
        .unwrap();
    let (code, line) = failed(&out);
    assert_eq!(code, 1);
    assert!(line.contains("/nonexistent/state.db"), "{line}");
    let out = Command::new(bin_path())
        .args(["--config", "/nonexistent/c.toml", "agents"])
        .output()
        .unwrap();
    let (code, line) = failed(&out);
    assert_eq!(code, 2);
    assert!(line.contains("/nonexistent/c.toml"), "{line}");
    // The hint names the way to give another file in the CLI and in the
    // Python package alike (the same message reaches both).
    assert!(
        line.contains("`--config PATH` on the CLI, `Bridge(home, config=PATH)` in Python"),
        "{line}"
    );
}

#[test]
fn argument_errors_are_one_line_with_a_hint_for_the_command_given() {
    let run = |args: &[&str]| failed(&Command::new(bin_path()).args(args).output().unwrap());
    let (code, line) = run(&[
        "context",
        "xmpp-mohe-v2",
        "--agent",
        "mohe",
        "--limit",
        "-1",
    ]);
    assert_eq!(code, 2);
    assert!(
        line.contains("'-1' is not a number of rows (0 to 4294967295)")
            && line.ends_with("(see --help)"),
        "{line}"
    );
    let (code, line) = run(&["send", "-x", "s1", "--agent", "mohe"]);
    assert_eq!(code, 2);
    assert!(
        line.contains("send --agent NAME -- TEXT SESSION_ID"),
        "{line}"
    );
    let (code, line) = run(&[]);
    assert_eq!(code, 2);
    assert_eq!(
        line,
        "xmpp-session-bridge: no command given (see --help for the commands)"
    );
    let (code, line) = run(&["admit", "--agent", "mohe", "--from", "r/n", "-x"]);
    assert_eq!(code, 2);
    assert!(
        line.contains("admit --agent NAME --from OCCUPANT -- BODY"),
        "{line}"
    );
    // A message of several words left unquoted: nothing in it starts with
    // '-', so the hint is the quotes.
    let (code, line) = run(&["send", "a", "b", "c", "--agent", "mohe"]);
    assert_eq!(code, 2);
    assert!(
        line.contains("a message of several words goes in quotes: send \"TEXT\" SESSION_ID")
            && !line.contains("starting with '-'"),
        "{line}"
    );
    let (code, line) = run(&["admit", "--agent", "mohe", "--from", "r/n", "a", "b"]);
    assert_eq!(code, 2);
    assert!(line.contains("in quotes, after '--'"), "{line}");
    // Arguments that are not UTF-8, in every place: one line, exit 2, no
    // panic (the hint's look for the command read the arguments as text).
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let bad = OsStr::from_bytes(b"x\xff");
    let cases: [Vec<&OsStr>; 5] = [
        vec!["resolve".as_ref(), bad, "--agent".as_ref(), "mohe".as_ref()],
        vec!["resolve".as_ref(), "s1".as_ref(), "--agent".as_ref(), bad],
        vec!["is-own".as_ref(), bad],
        vec!["context".as_ref(), bad, "--agent".as_ref(), "mohe".as_ref()],
        vec![OsStr::from_bytes(b"--bogus\xff"), "agents".as_ref()],
    ];
    for args in cases {
        let out = Command::new(bin_path()).args(&args).output().unwrap();
        let (code, line) = failed(&out);
        assert_eq!(code, 2, "{args:?}: {line}");
        assert!(line.ends_with("(see --help)"), "{args:?}: {line}");
    }
}
