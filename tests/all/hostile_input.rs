//! The short proptest pass over everything that parses outside input
//!: `state_meta` values, the config file, message bodies, history
//! rows (summaries and edits, through the native rules and through the real
//! component, and rows other writers left in a real Hermes database). The
//! oracles are `session_switch_tests::hostile`, shared with the cargo-fuzz
//! targets of `fuzz/` (`make fuzz` runs those for longer).
//!
//! Inputs are built from the pieces hostile text is made of — `[YOU]`
//! markers in every case, the agents' names with and without delimiters,
//! full-width punctuation, ANSI escapes, characters XML forbids, CR/LF,
//! boundary timestamps — so a few hundred cases reach the corners.

use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestRunner};
use session_switch::HistoryRow;
use session_switch_policy::samples::{SAMPLE_CLI, SAMPLE_NOW};
use session_switch_policy::{Reason, Role};
use session_switch_store::{HermesStore, py_strip, sanitize_context};
use session_switch_tests::fake_host::{FakeHost, FakeState};
use session_switch_tests::fixture_copy;
use session_switch_tests::hostile::{
    RecordCase, RowCase, check_body, check_config, check_history_rows, check_record, check_tagging,
    component_tagger, record_value,
};
use std::cell::{Cell, RefCell};

/// Cases per property: enough to reach the corners of the pieces below,
/// few enough for `make test` (the whole file runs in a few seconds).
const CASES: u32 = 512;

fn runner() -> TestRunner {
    TestRunner::new(RunnerConfig {
        cases: CASES,
        failure_persistence: None,
        ..RunnerConfig::default()
    })
}

/// Text from `pieces`, `0..max` of them.
fn text_of(pieces: Vec<&'static str>, max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(pieces), 0..max).prop_map(|p| p.concat())
}

/// What room text and record fields are made of.
fn hostile_piece() -> Vec<&'static str> {
    vec![
        "[YOU]",
        "[you]",
        "[YOU] ",
        "[ YOU]",
        "[YO",
        "U]",
        " ",
        "  ",
        "\t",
        "\n",
        "\r\n",
        "\r",
        "\u{3000}",
        "\u{a0}",
        "\u{200b}",
        "\u{feff}",
        "\u{2060}",
        "\u{ad}",
        "\u{202e}",
        "\u{e0020}",
        "\u{3164}",
        "［",
        "］",
        "ＹＯＵ",
        "ｙｏｕ",
        "［YOU］",
        "[ＹOu］",
        "mohe",
        "MOHE",
        "mohe2",
        "墨河",
        "zhiwei",
        "xiaoguo",
        "@mohe",
        "[mohe]",
        "[zhiwei]",
        ":",
        "：",
        ": ",
        ", ",
        "'s",
        "hi",
        "大家好",
        "👍",
        "\u{0}",
        "\u{7}",
        "\u{1b}",
        "\u{1b}[31m",
        "\u{1b}[0m",
        "\u{1b}]0;t\u{7}",
        "\u{1b}(B",
        "\u{b}",
        "\u{fffe}",
        "\u{ffff}",
        "\u{7f}",
        "\u{85}",
        "\"",
        "\\",
        "{",
        "}",
        "x",
    ]
}

fn record_case() -> impl Strategy<Value = RecordCase> {
    let sessions = prop_oneof![
        Just(SAMPLE_CLI.to_string()),
        Just("xmpp-mohe-v2".to_string()),
        Just("xmpp-zhiwei".to_string()),
        Just("deleted-or-missing".to_string()),
        Just(String::new()),
        Just(" padded ".to_string()),
        Just("x".repeat(257)),
        Just("line\nbreak".to_string()),
        "[a-z0-9_]{1,24}",
        text_of(hostile_piece(), 4),
    ];
    // Ages around each boundary of docs/src/design/rules.md (TTL 3600 s, skew 120 s).
    let age = prop_oneof![
        Just(0.0),
        Just(3600.0),
        Just(3599.999),
        Just(3600.001),
        Just(-120.0),
        Just(-120.001),
        Just(-119.999),
        -10_000.0..10_000.0f64,
    ];
    let timestamp = prop_oneof![
        8 => age.prop_map(|age| format!("{}", SAMPLE_NOW - age)),
        1 => prop::sample::select(vec![
            "\"1800000000\"", "null", "true", "1e999", "-1e999", "[1800000000]", "{}",
            "1800000000", "0", "-1",
        ])
        .prop_map(str::to_string),
    ];
    let agent = prop::option::of(prop::sample::select(vec![
        "mohe", "zhiwei", "MOHE", "", "xiaoguo",
    ]));
    let value = prop_oneof![
        6 => (sessions, timestamp, agent).prop_map(|(s, t, a)| record_value(&s, &t, a)),
        1 => text_of(hostile_piece(), 12),
        1 => Just("{\"session_id\": 5, \"timestamp\": 1800000000}".to_string()),
        1 => Just("[]".to_string()),
    ];
    let value = prop::option::of(value);
    let now = prop_oneof![
        20 => Just(SAMPLE_NOW),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
    ];
    (value.clone(), value.clone(), value, now, any::<bool>()).prop_map(
        |(mohe, legacy, zhiwei, now, targets_exist)| RecordCase {
            mohe,
            legacy,
            zhiwei,
            now,
            targets_exist,
        },
    )
}

#[test]
fn records_in_state_meta_redirect_only_by_the_rules_and_only_their_agent() {
    runner()
        .run(&record_case(), |case| {
            check_record(&case);
            Ok(())
        })
        .unwrap();
}

/// The `state_meta` fuzz target's oracle agrees with the policy: a record
/// whose `session_id` has a backslash is refused as malformed (Hermes's API
/// server refuses such an id), with a legacy key that is not JSON beside it.
#[test]
fn a_record_naming_an_id_hermes_refuses_is_malformed_for_the_oracle_too() {
    check_record(&RecordCase {
        mohe: Some(
            r#"{"session_id": "s\\wsio", "timestamp": 1800000000.001, "source": "cli"}"#.into(),
        ),
        legacy: Some("e\0z\0\"3\0\0".into()),
        zhiwei: None,
        now: 1_800_000_002.362,
        targets_exist: true,
    });
}

/// The input of `fuzz/seeds/state_meta/b1-active-vs-resolve`: mohe's own
/// record is valid (a CLI session, 3372 s old), the legacy tool's key is newer
/// (2704 s old) but names a session that is not in `state.db`. `resolve`
/// lets the newer record win and stays (`unknown-session`), so `active`
/// calls the older record `superseded`, naming the winner, not `valid`.
#[test]
fn active_agrees_with_resolve_when_the_newer_record_names_a_missing_session() {
    let now = SAMPLE_NOW;
    let mohe = record_value(SAMPLE_CLI, &format!("{}", now - 3372.031), Some("mohe"));
    let legacy = record_value("O", &format!("{}", now - 2704.463), None);
    let mut host = FakeState::at(now, session_switch_tests::sample::ROOM);
    host.add_session(SAMPLE_CLI);
    host.meta.insert("session_switch:active:mohe".into(), mohe);
    host.meta
        .insert("active_xmpp_sender_session".into(), legacy);
    let mut policy = session_switch_policy::Rules::new(FakeHost::new(host));
    policy
        .configure(session_switch_policy::samples::sample_settings())
        .unwrap();
    let d = policy.resolve("mohe", "xmpp-mohe-v2").unwrap();
    let statuses = policy.active(Some("mohe")).unwrap();
    assert_eq!(
        (d.redirected, d.reason),
        (false, Reason::UnknownSession),
        "{d:?}"
    );
    let shown: Vec<_> = statuses
        .iter()
        .map(|s| (s.key.as_str(), s.valid, s.reason))
        .collect();
    assert_eq!(
        shown,
        [
            ("session_switch:active:mohe", false, Reason::Superseded),
            ("active_xmpp_sender_session", false, Reason::UnknownSession),
        ],
        "{statuses:?}"
    );
    assert!(
        statuses[0]
            .detail
            .ends_with("but the newer record active_xmpp_sender_session is the one resolve uses"),
        "{}",
        statuses[0].detail
    );
}

#[test]
fn bodies_normalise_to_what_room_and_history_both_get() {
    let text = prop_oneof![text_of(hostile_piece(), 24), any::<String>()];
    let max = prop_oneof![1..24u32, Just(10_000)];
    runner()
        .run(&(text, max), |(text, max)| {
            check_body(&text, max);
            Ok(())
        })
        .unwrap();
}

fn row_case() -> impl Strategy<Value = RowCase> {
    let role = prop_oneof![
        6 => Just(Role::User),
        1 => Just(Role::Assistant),
        1 => Just(Role::Tool),
        1 => Just(Role::System),
        1 => Just(Role::Other),
    ];
    let content = prop_oneof![
        8 => text_of(hostile_piece(), 16),
        1 => (0..70usize, text_of(hostile_piece(), 6))
            .prop_map(|(n, rest)| format!("{}{rest}", "[YOU] ".repeat(n / 6) + &" ".repeat(n % 6))),
        // A tag behind about as many blanks as the prefix holds (G1).
        1 => (
            40..270usize,
            prop::sample::select(vec![" ", "\u{3000}", "\u{200b}", "\t"]),
            prop::sample::select(vec!["[YOU] ", "［YOU］", "[you]"]),
            text_of(hostile_piece(), 6),
        )
            .prop_map(|(n, blank, tag, rest)| format!("{}{tag}{rest}", blank.repeat(n))),
    ];
    let bridge = prop::option::of(0..3usize);
    (role, content, bridge).prop_map(|(role, content, bridge_agent)| RowCase {
        role,
        content,
        bridge_agent,
    })
}

#[test]
fn tagging_marks_own_rows_once_and_never_passes_an_imitated_tag() {
    let rows = prop::collection::vec(row_case(), 0..12);
    let prefix_chars = prop::sample::select(vec![57u32, 256]);
    runner()
        .run(&(rows, prefix_chars), |(rows, prefix_chars)| {
            check_tagging(&rows, prefix_chars);
            Ok(())
        })
        .unwrap();
}

fn history_row() -> impl Strategy<Value = HistoryRow> {
    let role = prop::sample::select(vec![
        "user",
        "user",
        "user",
        "assistant",
        "tool",
        "system",
        "session_meta",
        "User",
        "",
    ]);
    let tool = prop::option::of(prop::sample::select(vec![
        "call_1",
        "",
        "{\"a\":1}",
        "终端",
    ]));
    (
        role,
        text_of(hostile_piece(), 16),
        tool.clone(),
        tool,
        any::<bool>(),
    )
        .prop_map(|(role, content, calls, name, bridge_wrote)| HistoryRow {
            id: 0,
            role: role.to_string().into(),
            content,
            tool_calls: calls.map(str::to_string),
            tool_call_id: None,
            tool_name: name.map(str::to_string),
            bridge_wrote,
            loaded: None,
        })
}

#[test]
fn history_rows_through_the_real_component_match_the_native_rules() {
    let session = RefCell::new(component_tagger());
    let rows = prop::collection::vec(history_row(), 0..16);
    let agent = prop::sample::select(vec!["mohe", "zhiwei", "xiaoguo"]);
    runner()
        .run(&(rows, agent), |(mut rows, agent)| {
            for (i, row) in rows.iter_mut().enumerate() {
                row.id = 1000 + i as i64;
            }
            check_history_rows(&mut session.borrow_mut(), agent, rows);
            Ok(())
        })
        .unwrap();
}

/// Rows other writers left in a real Hermes database (NUL characters, NULL
/// content, roles Hermes never writes, tool fields) are read back by the
/// store as Hermes's loader gives them and tagged by the component like the
/// native rules.
#[test]
fn rows_other_writers_left_in_a_real_database_load_and_tag_safely() {
    let Some((_dir, db)) = fixture_copy("hermes-latest.db") else {
        return;
    };
    let store = HermesStore::open(&db).unwrap();
    let writer = rusqlite::Connection::open(&db).unwrap();
    let session = RefCell::new(component_tagger());
    let rows = prop::collection::vec((history_row(), any::<bool>()), 1..8);
    let case = Cell::new(0u32);
    TestRunner::new(RunnerConfig {
        cases: 64,
        failure_persistence: None,
        ..RunnerConfig::default()
    })
    .run(&rows, |rows| {
        case.set(case.get() + 1);
        let session_id = format!("hostile-{}", case.get());
        writer
            .execute(
                "INSERT INTO sessions (id, source, started_at) VALUES (?1, 'xmpp', 1781870400)",
                [&session_id],
            )
            .unwrap();
        for (row, null_content) in &rows {
            let content = (!null_content).then_some(row.content.as_str());
            writer
                .execute(
                    "INSERT INTO messages (session_id, role, content, tool_calls, tool_name, \
                     timestamp) VALUES (?1, ?2, ?3, ?4, ?5, 1781870400.5)",
                    rusqlite::params![session_id, row.role, content, row.tool_calls, row.tool_name],
                )
                .unwrap();
        }
        let read = store.history(&session_id, "mohe", None).unwrap();
        assert_eq!(read.len(), rows.len());
        for (got, (row, null_content)) in read.iter().zip(&rows) {
            // As Hermes's loader gives it: user and assistant
            // text through `sanitize_context(…).strip()`, NULL as empty; v31
            // blanks a bare `[marker]` answer that has tool calls.
            let stored = if *null_content {
                String::new()
            } else if matches!(&*row.role, "user" | "assistant") {
                py_strip(&sanitize_context(&row.content)).to_owned()
            } else {
                row.content.clone()
            };
            let blanked =
                row.role == "assistant" && row.tool_calls.is_some() && got.content.is_empty();
            assert!(
                got.content == stored || blanked,
                "the store changed a row's content: {:?} != {stored:?}",
                got.content
            );
            assert_eq!(got.role, row.role);
            assert!(!got.bridge_wrote, "no provenance row: not a sent row");
        }
        check_history_rows(&mut session.borrow_mut(), "mohe", read);
        Ok(())
    })
    .unwrap();
}

/// A config file with hostile parts: mostly a valid room of up to four
/// agents, each field replaced now and then by a name with characters a
/// `state_meta` key should not hold, a duplicate of another agent's, a JID
/// with a resource, an empty or padded value, a bad number or type, or an
/// unknown key.
fn config_text() -> impl Strategy<Value = String> {
    fn field(valid: String, hostile: Vec<&'static str>) -> impl Strategy<Value = String> {
        prop_oneof![
            24 => Just(valid),
            1 => prop::sample::select(hostile).prop_map(str::to_string),
        ]
    }
    let word = || {
        vec![
            "mohe",
            "Mohe",
            "YOU",
            "you",
            "mohe:x",
            "",
            " ",
            "a b",
            "墨河",
            "x\ny",
            "mohe\u{0}",
            "zhiwei",
        ]
    };
    let jid = || {
        vec![
            "mohe@example.org",
            "MOHE@example.org",
            "mohe@example.org/laptop",
            "example.org",
            "@example.org",
            "mohe@",
            "",
            "a@b@c",
        ]
    };
    let session = || {
        vec![
            "xmpp-mohe-v2",
            "",
            " padded",
            "tab\there",
            "20260619_190821_7c0afe",
        ]
    };
    let q = |s: &str| serde_json::Value::from(s).to_string();
    let agent = move |name: &'static str| {
        (
            field(name.to_string(), word()),
            field(format!("{name}@example.org"), jid()),
            prop::option::of(field(name.to_string(), word())),
            (1..3usize).prop_flat_map(move |n| {
                (0..n)
                    .map(|k| field(format!("xmpp-{name}-{k}"), session()))
                    .collect::<Vec<_>>()
            }),
            prop::collection::vec(field(format!("{name}-alias"), word()), 0..2),
        )
            .prop_map(move |(name, jid, nick, sessions, aliases)| {
                let list = |v: &[String]| v.iter().map(|s| q(s)).collect::<Vec<_>>().join(", ");
                let mut t = format!("\n[[agents]]\nname = {}\njid = {}\n", q(&name), q(&jid));
                if let Some(nick) = nick {
                    t.push_str(&format!("nick = {}\n", q(&nick)));
                }
                t.push_str(&format!(
                    "sessions = [{}]\naliases = [{}]\n",
                    list(&sessions),
                    list(&aliases)
                ));
                t
            })
    };
    // Distinct agents, so that duplicates come from the hostile fields.
    let agents = prop::sample::subsequence(vec!["mohe", "zhiwei", "xiaoguo", "lin"], 1..=4)
        .prop_flat_map(move |names| names.into_iter().map(agent).collect::<Vec<_>>());
    let number = |valid: &'static str| {
        field(
            valid.to_string(),
            vec!["0", "-1", "4294967296", "\"3600\"", "1.5"],
        )
    };
    let transport = field("\"http\"".into(), vec!["\"ejabberdctl\"", "\"smtp\"", "1"]);
    let api = field(
        "\"http://127.0.0.1:5280/api\"".into(),
        vec!["\"ftp://x\"", "\"\"", "\"http://u:p@h/api\""],
    );
    let room = field("coregroup@conference.example.org".into(), jid());
    let extra = field(
        String::new(),
        vec!["unknown = 1\n", "[xmpp]\n", "room = 1\n"],
    );
    let legacy = prop::option::of(field("mohe".into(), word()));
    (
        room,
        transport,
        api,
        number("3600"),
        number("120"),
        legacy,
        agents,
        extra,
    )
        .prop_map(
            move |(room, transport, api, ttl, skew, legacy, agents, extra)| {
                let mut t = format!(
                    "[xmpp]\nroom = {}\ntransport = {transport}\napi_url = {api}\n{extra}",
                    q(&room)
                );
                t.push_str(&format!(
                    "\n[redirect]\nttl_seconds = {ttl}\nfuture_skew_seconds = {skew}\n"
                ));
                if let Some(legacy) = legacy {
                    t.push_str(&format!("legacy_agent = {}\n", q(&legacy)));
                }
                t.extend(agents);
                t
            },
        )
}

#[test]
fn config_files_are_accepted_only_when_valid_and_refused_naming_the_file() {
    let text = prop_oneof![3 => config_text(), 1 => any::<String>()];
    let accepted = Cell::new(0u32);
    let refused = Cell::new(0u32);
    runner()
        .run(&text, |text| {
            // check_config also requires the policy to accept what the
            // config accepts (G3).
            if check_config(&text).is_some() {
                accepted.set(accepted.get() + 1);
            } else {
                refused.set(refused.get() + 1);
            }
            Ok(())
        })
        .unwrap();
    eprintln!(
        "{} of {CASES} configs accepted, {} refused naming the file",
        accepted.get(),
        refused.get()
    );
    assert!(
        accepted.get() > 0,
        "no generated config was valid: the generator is broken"
    );
}
