//! `state_meta` values longer than any of ours (WIT `meta-get`: over 1 MiB
//! the host hands the policy an empty text), on the real Hermes store
//! through the CLI: a loop-guard state is read as not ours and rewritten
//! small, a record reads as malformed, and the guard's own state never
//! grows past the bound however long the ids it remembers.

use serde_json::Value;
use session_switch_contract::keys::guard_key;
use session_switch_contract::limits::MAX_META_VALUE_BYTES;
use session_switch_tests::sample::sample_config_text;
use session_switch_tests::{cli, fixture_copy, table_snapshot};
use std::path::{Path, PathBuf};

const ROOM: &str = "coregroup@conference.example.org";

/// A copy of the v31 fixture and the sample config, or `None` (said) when
/// the fixtures are missing.
fn home() -> Option<(tempfile::TempDir, PathBuf, PathBuf)> {
    let (dir, db) = fixture_copy("hermes-latest.db")?;
    let config = dir.path().join("session-switch.toml");
    let text = sample_config_text(ROOM, &|n| format!("{n}@example.org"), "", "");
    std::fs::write(&config, text).unwrap();
    Some((dir, db, config))
}

/// `--json` output of the CLI, which must exit 0.
fn json(config: &Path, db: &Path, args: &[&str]) -> Value {
    let out = cli(config, db).arg("--json").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn set_meta(db: &Path, key: &str, value: &str) {
    rusqlite::Connection::open(db)
        .unwrap()
        .execute(
            "INSERT OR REPLACE INTO state_meta (key, value) VALUES (?1, ?2)",
            [key, value],
        )
        .unwrap();
}

fn meta(db: &Path, key: &str) -> String {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row("SELECT value FROM state_meta WHERE key = ?1", [key], |r| {
            r.get(0)
        })
        .unwrap()
}

/// A valid state of 20 MB (another writer's, or a hand edit) once made
/// every `admit` fail on the policy's memory cap: now it is a state not of
/// ours, read as a capped chain, and a person gets through.
#[test]
fn an_oversized_guard_state_reads_as_not_ours_and_is_rewritten_small() {
    let Some((_dir, db, config)) = home() else {
        return;
    };
    let key = guard_key("mohe", ROOM);
    let huge = format!(
        r#"{{"v":1,"hops":1,"window":[],"seen":[["{}","d02f9088c134b0ac",1000.0]]}}"#,
        "x".repeat(20_000_000)
    );
    set_meta(&db, &key, &huge);
    let zhiwei = format!("{ROOM}/zhiwei");
    let d = json(
        &config,
        &db,
        &["admit", "--agent", "mohe", "--from", &zhiwei, "mohe?"],
    );
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
    let text = meta(&db, &key);
    assert!(text.len() < 1000, "{} bytes", text.len());
    let alice = format!("{ROOM}/alice");
    let d = json(
        &config,
        &db,
        &["admit", "--agent", "mohe", "--from", &alice, "mohe?"],
    );
    assert_eq!(
        (d["reply"].clone(), d["reason"].clone()),
        (true.into(), "human".into())
    );
}

/// Agent messages with ids of 60 KB: remembering 64 of them would pass the
/// bound, so the guard forgets the oldest instead, and its count goes on.
#[test]
fn long_ids_never_grow_the_guard_state_past_the_bound() {
    let Some((_dir, db, config)) = home() else {
        return;
    };
    let key = guard_key("mohe", ROOM);
    let zhiwei = format!("{ROOM}/zhiwei");
    for n in 1..=20u32 {
        let id = format!("{n:05}{}", "i".repeat(60_000));
        let body = format!("mohe, message {n}");
        let d = json(
            &config,
            &db,
            &[
                "admit",
                "--agent",
                "mohe",
                "--from",
                &zhiwei,
                "--stanza-id",
                &id,
                &body,
            ],
        );
        assert_eq!(d["hops"], n, "{n}: {d}");
        assert!(
            !d["detail"].as_str().unwrap().contains("was not valid"),
            "{d}"
        );
        let text = meta(&db, &key);
        assert!(
            text.len() <= MAX_META_VALUE_BYTES,
            "{n}: {} bytes",
            text.len()
        );
    }
    let stored: Value = serde_json::from_str(&meta(&db, &key)).unwrap();
    let said = stored["said"].as_array().unwrap();
    assert!(said.len() < 20, "{}", said.len());
    assert!(
        said.last().unwrap()[0]
            .as_str()
            .unwrap()
            .starts_with("00020")
    );
}

/// A record longer than any of ours reads as a malformed one: `resolve`
/// and `context` load the XMPP session and exit 0, `active` lists it as
/// not valid, and nothing is written.
#[test]
fn an_oversized_record_reads_as_malformed() {
    let Some((_dir, db, config)) = home() else {
        return;
    };
    let record = format!(
        r#"{{"session_id":"{}","sent_at":1000.0}}"#,
        "s".repeat(MAX_META_VALUE_BYTES)
    );
    set_meta(&db, "session_switch:active:mohe", &record);
    let before = table_snapshot(&db);
    for command in ["resolve", "context"] {
        let d = json(&config, &db, &[command, "xmpp-mohe-v2", "--agent", "mohe"]);
        assert_eq!(
            (d["session_id"].as_str(), d["redirected"].as_bool()),
            (Some("xmpp-mohe-v2"), Some(false)),
            "{command}: {d}"
        );
        assert_eq!(d["reason"], "malformed-record", "{command}: {d}");
    }
    let active = json(&config, &db, &["active"]);
    let mohe = active
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["agent"] == "mohe")
        .unwrap_or_else(|| panic!("{active}"));
    assert_eq!(
        (mohe["valid"].clone(), mohe["reason"].clone()),
        (false.into(), "malformed-record".into()),
        "{active}"
    );
    assert!(table_snapshot(&db) == before, "a read wrote");
}
