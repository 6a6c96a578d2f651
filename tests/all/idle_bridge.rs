//! An idle gateway connection (Rust side): a long-lived
//! in-process [`Bridge`] and its [`PolicyInstance`], kept open and idle
//! between calls, while CLI `send`s run through a real ejabberd, on DELETE
//! and WAL copies of the v31 fixture. Every send exits 0, the instance's
//! next `resolve` sees the new record, and after `clear` it says
//! `no-record`: the host holds no read transaction or unfinished statement
//! between calls (one would make a DELETE-mode send fail as busy, and keep
//! a WAL-mode reader on the old record).

use std::process::Command;
use std::time::Duration;

use session_switch::runtime::Reason;
use session_switch::{Bridge, BridgeOptions};
use session_switch_tests::sample::sample_config_text;
use session_switch_tests::xmpp::Ejabberd;
use session_switch_tests::{bin_path, fixture_copy, journal_mode};

fn idle_bridge_sees_every_cli_send(wal: bool) {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    let Some((_dir, db)) = fixture_copy("hermes-latest.db") else {
        return;
    };
    if wal {
        let conn = rusqlite::Connection::open(&db).unwrap();
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }
    assert_eq!(journal_mode(&db), if wal { "wal" } else { "delete" });
    let config = db.with_file_name("session-switch.toml");
    let xmpp = format!(
        "transport = \"ejabberdctl\"\nejabberdctl = [{:?}]\n",
        ej.ctl_argv()[0]
    );
    std::fs::write(
        &config,
        sample_config_text(&ej.room, &|n| ej.jid(n), &xmpp, ""),
    )
    .unwrap();
    let bridge = Bridge::open(BridgeOptions {
        config: Some(config.clone()),
        db: Some(db.clone()),
        ..BridgeOptions::default()
    })
    .unwrap();
    let mut gateway = bridge.instance(false).unwrap();
    // Open the connection and run a first call, then leave it idle.
    let first = gateway.resolve("mohe", "xmpp-mohe-v2").unwrap();
    assert_eq!(first.reason, Reason::NoRecord, "{first:?}");
    let cli = |args: &[&str]| {
        Command::new(bin_path())
            .arg("--config")
            .arg(&config)
            .arg("--db")
            .arg(&db)
            .args(args)
            .output()
            .unwrap()
    };
    let sessions = [
        "20260619_190821_7c0afe",
        "20260619_193000_a1b2c3",
        "20260619_194500_c0ffee",
    ];
    for (round, cli_session) in sessions.iter().enumerate() {
        std::thread::sleep(Duration::from_millis(200));
        let out = cli(&[
            "send",
            &format!("idle round {round}"),
            cli_session,
            "--agent",
            "mohe",
        ]);
        assert!(
            out.status.success(),
            "send {round} (wal {wal}): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let decision = gateway.resolve("mohe", "xmpp-mohe-v2").unwrap();
        assert_eq!(decision.session_id, *cli_session, "{decision:?}");
        assert_eq!(decision.reason, Reason::Redirected);
        // The history read of the same idle instance sees the new row too.
        let context = gateway.context("mohe", "xmpp-mohe-v2", None).unwrap();
        assert_eq!(context.decision.session_id, *cli_session);
        let history = bridge.context("mohe", "xmpp-zhiwei", Some(1)).unwrap();
        assert_eq!(history.decision.reason, Reason::NotAgentSession);
    }
    let out = cli(&["clear", "--agent", "mohe"]);
    assert!(
        out.status.success(),
        "clear: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = gateway.resolve("mohe", "xmpp-mohe-v2").unwrap();
    assert_eq!(after.reason, Reason::NoRecord, "{after:?}");
    assert_eq!(after.session_id, "xmpp-mohe-v2");
}

#[test]
fn an_idle_bridge_sees_every_cli_send_delete_mode() {
    idle_bridge_sees_every_cli_send(false);
}

#[test]
fn an_idle_bridge_sees_every_cli_send_wal_mode() {
    idle_bridge_sees_every_cli_send(true);
}
