//! The differential test of the policy: the same generated
//! inputs go to the native rules (`session_switch_policy::Rules`, the code
//! the component is built from) and to the compiled component run by the
//! host runtime (`session_switch::runtime::Policy::embedded` → `PolicyInstance`),
//! and both must give the same answers: decisions with reason and detail,
//! the history the model gets, receipts, record statuses, deleted keys,
//! own-echo verdicts, and failures (kind and message). After every call the
//! two in-memory states must be equal too, the list of import calls and
//! the plans the backend received included.
//!
//! Both sides are served by one implementation of the WIT `host` interface
//! ([`FakeHost`], the tests' one fake), each from its own clone of one generated [`FakeState`], so
//! the inputs are identical by construction. The native side's `context`
//! and `tag` edits are applied with the guest's own `tagging::apply`; the
//! component's by the host runtime (`runtime::apply`), so the two rule
//! books for `[YOU]` are compared as well.
//!
//! Besides the generated scenarios: a hand-checked case whose exact
//! answers both sides must give (so they cannot agree on something wrong),
//! the real Hermes databases of all three schemas through both sides, and a
//! check, native only and from a fixed seed, that the generators reach
//! every rule compared here (each reason, both TTL and skew boundaries from
//! both sides, each refusal of a send, host failures passed on, …).
//!
//! Case counts keep the file well under a minute in a debug build (about
//! 15 s on 2 busy cores); the component is compiled once, in ~1.3 s.

use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};
use session_switch::HistoryRow;
use session_switch::runtime::{
    ContextAnswer, Decision, Policy, PolicyInstance, PolicyOptions, Reason, Receipt, RecordStatus,
    Settings,
};
use session_switch::{Failure, FailureKind};
use session_switch_contract::keys::{LEGACY_KEY, record_key};
use session_switch_contract::limits::MAX_SESSION_ID_CHARS;
use session_switch_policy as guest;
use session_switch_policy::redirect::utc;
use session_switch_tests::FIXTURES;
use session_switch_tests::fake_host::{
    FakeHost, FakeRow, FakeState, Import, ImportCall, summaries,
};
use session_switch_tests::sample::{self, AGENTS, ROOM, SAMPLE_CLI, SAMPLE_NOW, sample_settings};
use session_switch_tests::wit_convert::{
    decision_from_guest, failure_from_guest, receipt_from_guest, record_status_from_guest,
    settings_to_guest,
};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::LazyLock;

/// The clock of most cases: 2027-01-15 08:00:00 UTC.
const NOW: f64 = SAMPLE_NOW;
/// CLI sessions (the ids of the Hermes fixtures).
const CLI_A: &str = SAMPLE_CLI;
const CLI_B: &str = "20260619_193000_a1b2c3";
const CLI_CJK: &str = "会话-1";
const XMPP: [&str; 4] = ["xmpp-mohe-v2", "xmpp-mohe", "xmpp-zhiwei", "xmpp-xiaoguo"];

/// The compiled component, loaded once for every test of this file
/// (compiling it is the slowest step of a case); each case gets its own
/// `PolicyInstance`, so its own `Store` and instance. Without the memo of
/// `resolve`: the policy runs every call, so both sides make the same
/// import calls.
static POLICY: LazyLock<Policy> = LazyLock::new(|| load(false));

/// The same with the memo (the default): answers and state must still
/// agree, the import calls may not ([`agree_with_the_memo`]).
static POLICY_MEMO: LazyLock<Policy> = LazyLock::new(|| load(true));

fn load(memo: bool) -> Policy {
    Policy::embedded(PolicyOptions {
        memo,
        ..PolicyOptions::default()
    })
    .expect("the embedded policy component loads")
}

// ------------------------------------------------------------- settings

/// The sample config (`sample_settings`), with names that exercise tagging and own-echo beyond
/// the plain ones: mohe signs as `墨河` too, zhiwei's nick differs in case
/// from its name, xiaoguo's nick is `果果` and it signs as `XG`.
fn base_settings() -> Settings {
    let mut s = sample_settings();
    s.agents[1].nick = "ZhiWei".into();
    s.agents[2].nick = "果果".into();
    s.agents[2].aliases = vec!["XG".into()];
    s
}

/// Valid settings: the TTL, skew, body limit and legacy agent vary.
fn settings() -> impl Strategy<Value = Settings> {
    (
        prop_oneof![3 => Just(3600u32), 2 => 1u32..7200, 1 => Just(1u32), 1 => Just(u32::MAX)],
        prop_oneof![3 => Just(120u32), 2 => 0u32..600, 1 => Just(u32::MAX)],
        prop_oneof![3 => Just(10_000u32), 2 => 1u32..64],
        select(vec![Some("mohe"), Some("mohe"), None, Some("zhiwei")]),
    )
        .prop_map(|(ttl, skew, max, legacy)| Settings {
            ttl_seconds: ttl,
            future_skew_seconds: skew,
            max_body_chars: max,
            legacy_agent: legacy.map(str::to_string),
            ..base_settings()
        })
}

/// Settings, many of them invalid: one field of the base broken.
fn any_settings() -> impl Strategy<Value = Settings> {
    let broken = (0usize..18, any::<prop::sample::Index>()).prop_map(|(what, i)| {
        let mut s = base_settings();
        let a = i.index(s.agents.len());
        match what {
            0 => s.ttl_seconds = 0,
            1 => s.max_body_chars = 0,
            2 => s.agents.clear(),
            3 => s.agents[a].sessions.clear(),
            4 => s.agents[a].sessions.push("xmpp-zhiwei".into()),
            5 => s.agents[a].nick = "MOHE".into(),
            6 => s.agents[a].aliases.push("you".into()),
            7 => s.agents[a].aliases.push("zhiwei".into()),
            8 => s.legacy_agent = Some("nobody".into()),
            9 => s.room = format!("{ROOM}/mohe"),
            10 => s.room = "coregroup".into(),
            11 => s.agents[a].jid = "mohe @example.org".into(),
            12 => s.agents[a].name = String::new(),
            13 => s.agents[a].name = "mo\u{7}he".into(),
            14 => s.agents[a]
                .sessions
                .push("s".repeat(MAX_SESSION_ID_CHARS + 1)),
            15 => s.agents[a].nick = format!(" {}", s.agents[a].nick),
            16 => s.agents[a].jid = "a@b@c".into(),
            _ => s.agents[a].aliases.push(String::new()),
        }
        s
    });
    prop_oneof![1 => settings(), 3 => broken]
}

// ------------------------------------------------------------- the state

/// The host's clock: whole or fractional seconds.
fn clock() -> impl Strategy<Value = f64> {
    prop_oneof![2 => Just(NOW), 2 => (0.0f64..1.0).prop_map(|f| NOW + f), 1 => Just(NOW + 0.5)]
}

/// Session ids as a record may name them, a room may ask about them, or a
/// CLI may pass them: real ones, XMPP ones, unknown ones, and bad ones
/// (empty, surrounding whitespace, control characters, 256/257 characters).
fn session_id() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => select(vec![
            "xmpp-mohe-v2", "xmpp-mohe", "xmpp-zhiwei", "xmpp-xiaoguo",
            CLI_A, CLI_B, CLI_CJK, "gone",
        ])
        .prop_map(str::to_string),
        3 => select(vec![
            "", " ", " cli-a", "cli-a ", "cli\na", "cli\u{0}a", "cli\u{1b}[31ma",
            "cli\u{85}a", "XMPP-MOHE-V2", "xmpp-mohe-v2 ", "\u{3000}x",
        ])
        .prop_map(str::to_string),
        1 => select(vec![MAX_SESSION_ID_CHARS - 1, MAX_SESSION_ID_CHARS, MAX_SESSION_ID_CHARS + 1, 4096]).prop_map(|n| "s".repeat(n)),
        1 => select(vec![MAX_SESSION_ID_CHARS, MAX_SESSION_ID_CHARS + 1]).prop_map(|n| "é".repeat(n)),
        1 => "[a-z0-9_-]{1,12}",
        1 => any::<String>(),
    ]
}

/// A record's timestamp as JSON, around the rules' boundaries for this
/// clock, TTL and skew: an age of exactly the TTL and one ulp or a
/// millisecond either side, the same around the future skew, integers,
/// anywhere in between, and absurd values.
fn timestamp(now: f64, ttl: u32, skew: u32) -> impl Strategy<Value = Value> {
    let (ttl, skew) = (f64::from(ttl), f64::from(skew));
    let at_ttl = now - ttl;
    let at_skew = now + skew;
    prop_oneof![
        2 => select(vec![-1.0, -0.001, 0.0, 0.001, 1.0]).prop_map(move |d| json!(at_ttl + d)),
        1 => select(vec![at_ttl.next_down(), at_ttl.next_up()]).prop_map(|t| json!(t)),
        2 => select(vec![-1.0, -0.001, 0.0, 0.001, 1.0]).prop_map(move |d| json!(at_skew + d)),
        1 => select(vec![at_skew.next_down(), at_skew.next_up()]).prop_map(|t| json!(t)),
        1 => (-2i64..=2).prop_map(move |d| json!(at_ttl as i64 + d)),
        4 => (-1000.0f64..8000.0).prop_map(move |age| json!(now - age)),
        1 => select(vec![
            json!(0), json!(-1.5), json!(1e300), json!(-1e300), json!(f64::MAX),
            json!(u64::MAX), json!(i64::MIN), json!(1e-300),
        ]),
    ]
}

/// What a record names: mostly a CLI session (existing or not), else any
/// session id (XMPP ones and bad ones included).
fn target() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => select(vec![CLI_A, CLI_B, CLI_CJK, "gone"]).prop_map(str::to_string),
        3 => session_id(),
    ]
}

/// A `state_meta` record value of `owner`'s key: well-formed (with any
/// target, the `agent` field right, wrong or absent), fields of the wrong
/// type, text that is not JSON or not an object, or any string.
fn record(now: f64, ttl: u32, skew: u32, owner: &'static str) -> impl Strategy<Value = String> {
    let agent_field = prop_oneof![
        3 => Just(Some(json!(owner))),
        2 => Just(None),
        1 => select(vec![
            Some(json!("mohe")),
            Some(json!("zhiwei")),
            Some(json!("MOHE")),
            Some(json!(5)),
            Some(Value::Null),
        ]),
    ];
    let well_formed = (
        target(),
        timestamp(now, ttl, skew),
        agent_field,
        any::<bool>(),
    )
        .prop_map(|(sid, ts, agent, source)| {
            let mut v = json!({"session_id": sid, "timestamp": ts});
            if source {
                v["source"] = json!("cli");
            }
            if let Some(a) = agent {
                v["agent"] = a;
            }
            v.to_string()
        });
    let wrong_types = (
        select(vec![
            Some(json!(42)),
            Some(Value::Null),
            Some(json!(true)),
            Some(json!([CLI_A])),
            Some(json!({"id": CLI_A})),
            Some(json!(CLI_A)),
            None,
        ]),
        prop_oneof![
            select(vec![
                Some(json!(NOW.to_string())),
                Some(Value::Null),
                Some(json!(false)),
                Some(json!([NOW])),
                Some(json!({"t": NOW})),
                None,
            ]),
            timestamp(now, ttl, skew).prop_map(Some),
        ],
    )
        .prop_map(|(sid, ts)| {
            let mut v = json!({"source": "cli"});
            if let Some(s) = sid {
                v["session_id"] = s;
            }
            if let Some(t) = ts {
                v["timestamp"] = t;
            }
            v.to_string()
        });
    let not_json = select(vec![
        String::new(),
        "junk".into(),
        "{".into(),
        "[]".into(),
        "null".into(),
        "42".into(),
        format!("\"{CLI_A}\""),
        "{\"session_id\":".into(),
        format!("{{\"session_id\": \"{CLI_A}\", \"timestamp\": 1e999}}"),
        format!("{{\"session_id\": \"{CLI_A}\", \"timestamp\": NaN}}"),
        format!("{{'session_id': '{CLI_A}', 'timestamp': {NOW}}}"),
        format!("{{\"session_id\": \"{CLI_A}\", \"timestamp\": {NOW},}}"),
        format!("\u{feff}{{\"session_id\": \"{CLI_A}\", \"timestamp\": {NOW}}}"),
        format!("{{\"session_id\": \"gone\", \"session_id\": \"{CLI_A}\", \"timestamp\": {NOW}}}"),
        format!("{{\"session_id\": \"{CLI_A}\", \"timestamp\": {NOW}}} trailing"),
    ]);
    prop_oneof![8 => well_formed, 2 => wrong_types, 2 => not_json, 1 => any::<String>()]
}

/// `state_meta`: maybe a record per agent, the legacy tool's key, a record of an
/// agent that is not configured, and always two of Hermes's own keys.
fn meta(now: f64, ttl: u32, skew: u32) -> impl Strategy<Value = BTreeMap<String, String>> {
    let record = |owner| prop::option::weighted(0.6, record(now, ttl, skew, owner));
    (
        record("mohe"),
        record("zhiwei"),
        record("xiaoguo"),
        record("mohe"),
        record("nobody"),
    )
        .prop_map(|(mohe, zhiwei, xiaoguo, legacy, nobody)| {
            let mut meta: BTreeMap<String, String> = [
                (record_key("mohe"), mohe),
                (record_key("zhiwei"), zhiwei),
                (record_key("xiaoguo"), xiaoguo),
                (LEGACY_KEY.to_string(), legacy),
                (record_key("nobody"), nobody),
            ]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
            meta.insert("fts_cjk_version".into(), "2".into());
            meta.insert("last_auto_prune".into(), NOW.to_string());
            meta
        })
}

/// A `[YOU]` marker as people type it: any ASCII case, any space after.
fn marker() -> impl Strategy<Value = &'static str> {
    select(vec![
        "[YOU]",
        "[YOU] ",
        "[you] ",
        "[You]\t",
        "[yOu]  ",
        "[YOU]\u{a0}",
    ])
}

/// How a line may start: the agents' signatures (name, nick, alias, with
/// `:`, `：` or brackets, in their own case) and the near misses that are not
/// (`MOHE:`, `[MoHe]`, `mohe2: `, `@mohe `, `mohe's`, `mohe :`, `[mohe `, the tag itself).
fn head() -> impl Strategy<Value = &'static str> {
    select(vec![
        "mohe: ",
        "MOHE:",
        "mohe：",
        "[mohe] ",
        "[MoHe]",
        "墨河：",
        "[墨河] ",
        "mohe2: ",
        "moheX:",
        "mohe's ",
        "mohe, ",
        "@mohe ",
        "@mohe: ",
        "mohe :",
        "[mohe ",
        "[mohe2] ",
        "zhiwei: ",
        "ZhiWei：",
        "[zhiwei]",
        "xiaoguo：",
        "果果：",
        "[XG] ",
        "xg: ",
        "YOU: ",
        "[YOU]: ",
        "nobody: ",
    ])
}

/// Text after the head: words, more markers and names inside the line,
/// line ends, control characters, and now and then a long run.
fn tail_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => "[a-zA-Z0-9 ,.!'@好中文👍é-]{0,24}",
        3 => select(vec![" [YOU] ", "mohe: ", "\r\n", "\n", "\u{0}", "\u{1b}[31m", "：", "]"])
            .prop_map(str::to_string),
        1 => Just("x".repeat(300)),
        1 => any::<String>(),
    ]
}

/// A row's content: leading whitespace, stacked markers (sometimes more
/// than the policy's prefix budget of eight), a head, a tail.
fn content() -> impl Strategy<Value = String> {
    let markers = prop_oneof![
        4 => prop::collection::vec(marker(), 0..=3).prop_map(|v| v.concat()),
        1 => (6usize..=10).prop_map(|n| "[YOU] ".repeat(n)),
    ];
    (
        select(vec!["", "", "", " ", "  ", "\t", "\u{3000}", "\n"]),
        markers,
        prop_oneof![2 => Just(""), 3 => head()],
        prop::collection::vec(tail_piece(), 0..4),
    )
        .prop_map(|(ws, m, h, tail)| format!("{ws}{m}{h}{}", tail.concat()))
}

/// A stored row without its id: role as Hermes stores it (free text),
/// content, tool fields, and which agent's send wrote it.
fn row() -> impl Strategy<Value = FakeRow> {
    let role = select(vec![
        "user",
        "user",
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
    let tool = prop::option::weighted(0.15, Just("terminal".to_string()));
    let bridge = select(vec![
        None,
        None,
        None,
        Some("mohe"),
        Some("zhiwei"),
        Some("xiaoguo"),
        Some("nobody"),
    ]);
    (role, content(), tool, bridge).prop_map(|(role, content, tool, bridge)| FakeRow {
        id: 0,
        role: role.into(),
        content,
        tool_calls: tool.as_ref().map(|name| {
            let function = json!({"name": name, "arguments": "{}"});
            json!([{"id": "call_1", "type": "function", "function": function}]).to_string()
        }),
        tool_call_id: tool.as_ref().map(|_| "call_1".to_string()),
        tool_name: tool,
        bridge_agent: bridge.map(str::to_string),
    })
}

/// Rows with ascending ids starting at 1.
fn numbered(rows: Vec<FakeRow>) -> Vec<FakeRow> {
    rows.into_iter()
        .enumerate()
        .map(|(i, r)| FakeRow {
            id: i as i64 + 1,
            ..r
        })
        .collect()
}

/// Histories of the XMPP and CLI sessions, ids interleaved across
/// sessions (with gaps) as in a real `messages` table.
fn histories() -> impl Strategy<Value = BTreeMap<String, Vec<FakeRow>>> {
    let sessions: Vec<&str> = XMPP
        .iter()
        .copied()
        .chain([CLI_A, CLI_B, CLI_CJK])
        .collect();
    prop::collection::vec((select(sessions), 1i64..4, row()), 0..24).prop_map(|rows| {
        let mut out: BTreeMap<String, Vec<FakeRow>> = BTreeMap::new();
        let mut id = 0;
        for (session, gap, r) in rows {
            id += gap;
            out.entry(session.into())
                .or_default()
                .push(FakeRow { id, ..r });
        }
        out
    })
}

/// Maybe one import fails, with any kind and any message: the policy must
/// pass it on unchanged on both sides.
fn scripted_failure() -> impl Strategy<Value = Option<(Import, Failure)>> {
    let kind = select(vec![
        FailureKind::BadInput,
        FailureKind::UnknownAgent,
        FailureKind::NotAccepted,
        FailureKind::Busy,
        FailureKind::UnknownOutcome,
        FailureKind::Store,
        FailureKind::Transport,
        FailureKind::Policy,
    ]);
    let import = select(vec![
        Import::MetaGet,
        Import::MetaDelete,
        Import::SessionExists,
        Import::History,
        Import::Send,
    ]);
    let message = prop_oneof!["[a-z .]{1,30}", any::<String>()];
    prop::option::weighted(
        0.12,
        (import, kind, message).prop_map(|(i, k, m)| (i, Failure::new(k, m))),
    )
}

/// Settings and the state both sides start from.
#[derive(Clone, Debug)]
struct Case {
    settings: Settings,
    state: FakeState,
}

/// Boxed, like the other composite strategies below: a debug build keeps
/// unboxed value trees of this size on the stack and overflows it.
fn case() -> BoxedStrategy<Case> {
    (settings(), clock())
        .prop_flat_map(|(settings, now)| {
            let (ttl, skew) = (settings.ttl_seconds, settings.future_skew_seconds);
            let known: Vec<&str> = XMPP.iter().copied().chain([CLI_B, CLI_CJK]).collect();
            let sessions = (
                prop::sample::subsequence(known.clone(), 0..=known.len()),
                prop::collection::vec(session_id(), 0..3),
            );
            (
                meta(now, ttl, skew).boxed(),
                sessions,
                histories().boxed(),
                scripted_failure(),
            )
                .prop_map(move |(meta, (known, extra), histories, fail)| {
                    let mut sessions: BTreeSet<String> =
                        known.iter().map(|s| s.to_string()).collect();
                    sessions.insert(CLI_A.into());
                    sessions.extend(extra);
                    Case {
                        settings: settings.clone(),
                        state: FakeState {
                            meta,
                            sessions,
                            histories,
                            now,
                            room: ROOM.into(),
                            fail: fail.into_iter().collect(),
                            ..FakeState::default()
                        },
                    }
                })
                .boxed()
        })
        .boxed()
}

// ------------------------------------------------------------ the calls

/// One call of an export (or a tick of both clocks between calls).
#[derive(Clone, Debug)]
enum Op {
    Resolve {
        agent: String,
        session_id: String,
    },
    Context {
        agent: String,
        session_id: String,
        limit: Option<u32>,
    },
    Tag {
        agent: String,
        rows: Vec<FakeRow>,
    },
    Send {
        agent: String,
        cli: String,
        text: String,
    },
    IsOwn {
        agent: String,
        sender: String,
    },
    Active {
        agent: Option<String>,
    },
    Clear {
        agent: Option<String>,
    },
    /// Both clocks move on by this many seconds.
    Tick(f64),
}

/// Mostly a configured agent; sometimes a name that is none (wrong case,
/// trailing space, empty).
fn agent() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => select(AGENTS.to_vec()).prop_map(str::to_string),
        1 => select(vec!["nobody", "", "MOHE", "mohe "]).prop_map(str::to_string),
    ]
}

/// An agent and a session it asks about: mostly one of its own XMPP
/// sessions (the only ones ever redirected), else any session id.
fn agent_and_session() -> impl Strategy<Value = (String, String)> {
    agent().prop_flat_map(|agent| {
        let own: Vec<&str> = XMPP
            .iter()
            .copied()
            .filter(|s| {
                s.strip_prefix("xmpp-")
                    .is_some_and(|rest| rest.starts_with(agent.as_str()))
            })
            .collect();
        let asked = if own.is_empty() || agent.is_empty() {
            session_id().boxed()
        } else {
            prop_oneof![3 => select(own).prop_map(str::to_string), 1 => session_id()].boxed()
        };
        (Just(agent), asked)
    })
}

fn resolve_op() -> impl Strategy<Value = Op> {
    agent_and_session().prop_map(|(agent, session_id)| Op::Resolve { agent, session_id })
}

fn context_op() -> impl Strategy<Value = Op> {
    let limit = prop_oneof![
        3 => Just(None),
        3 => (0u32..8).prop_map(Some),
        1 => Just(Some(u32::MAX)),
    ];
    (agent_and_session(), limit).prop_map(|((agent, session_id), limit)| Op::Context {
        agent,
        session_id,
        limit,
    })
}

fn tag_op() -> impl Strategy<Value = Op> {
    (agent(), prop::collection::vec(row(), 0..10)).prop_map(|(agent, rows)| Op::Tag {
        agent,
        rows: numbered(rows),
    })
}

/// A piece of a message body: what normalisation removes (CR, ANSI
/// escapes of every kind, controls, non-characters, leading markers) and
/// what it keeps (text, TAB, LF, non-ASCII, U+2028).
fn body_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-zA-Z ]{0,8}",
        6 => select(vec![
            "\r\n", "\r", "\n", "\t", "\u{1b}", "\u{1b}[", "\u{1b}[31m", "\u{1b}[0m",
            "\u{1b}[?25l", "\u{1b}]0;title\u{7}", "\u{1b}]8;;http://x\u{1b}\\", "\u{1b}]",
            "\u{1b}(B", "\u{1b}=", "\u{7}", "[YOU]", "[you] ", " [YOU] ", "\u{fffe}\u{ffff}",
            "好👍é", "\u{0}", "\u{b}", "\u{c}", "\u{1f}", "\u{7f}", "\u{85}", "\u{2028}",
            "\u{3000}",
        ])
        .prop_map(str::to_string),
        1 => "[0-9;?]{0,3}[a-zA-Z~]?",
        1 => any::<char>().prop_map(String::from),
        1 => (0u32..0x20).prop_map(|c| char::from_u32(c).unwrap().to_string()),
    ]
}

/// A body: pieces, or text of about the maximum length (one character
/// under, at, over; before and after normalisation shortens it), or far
/// beyond ejabberd's 128 KiB argument limit, or any string.
fn body(max: u32) -> impl Strategy<Value = String> {
    let max = max as usize;
    prop_oneof![
        8 => prop::collection::vec(body_piece(), 0..14).prop_map(|v| v.concat()),
        2 => (
            select(vec![max - 1, max, max + 1]),
            select(vec!["a", "é", "👍"]),
            select(vec!["", "[YOU] ", "\r\n", "\u{1b}[1m"]),
        )
            .prop_map(|(n, c, lead)| format!("{lead}{}", c.repeat(n))),
        // Far over any generated maximum, yet under the host's own cap
        // (`max_text_bytes`: 64 KiB + 4 bytes a character), so the policy's
        // limit is what both sides show; the cap has its own tests.
        1 => Just("x".repeat(60_000)),
        1 => any::<String>(),
    ]
}

fn send_op(max: u32) -> impl Strategy<Value = Op> {
    let cli = prop_oneof![3 => Just(CLI_A.to_string()), 2 => session_id()];
    (agent(), cli, body(max)).prop_map(|(agent, cli, text)| Op::Send { agent, cli, text })
}

/// A room message's sender: occupant JIDs `room/nick`, full and bare JIDs,
/// bare nicks, in any case and padding, near misses, and any string.
fn sender() -> impl Strategy<Value = String> {
    let bare = select(vec![
        ROOM,
        "CoreGroup@Conference.Example.ORG",
        "other@conference.example.org",
        "mohe@example.org",
        "MOHE@EXAMPLE.ORG",
        "zhiwei@example.org",
        "xiaoguo@example.org",
        "mohe2@example.org",
        "mohe@example.org.evil",
        "example.org",
        "mohe",
        "MoHe",
        "ZhiWei",
        "zhiwei",
        "果果",
        "墨河",
        "xiaoguo",
        "XG",
        "",
    ]);
    let resource = select(vec![
        "", "", "/", "/mohe", "/MOHE ", "/ZhiWei", "/zhiwei", "/果果", "/xiaoguo", "/laptop",
        "/mohe/x", "/ mohe",
    ]);
    let pad = select(vec!["", "", " ", "\t", "\u{3000}"]);
    prop_oneof![
        6 => (pad.clone(), bare, resource, pad).prop_map(|(a, b, r, z)| format!("{a}{b}{r}{z}")),
        1 => any::<String>(),
    ]
}

fn is_own_op() -> impl Strategy<Value = Op> {
    (agent(), sender()).prop_map(|(agent, sender)| Op::IsOwn { agent, sender })
}

fn active_op() -> impl Strategy<Value = Op> {
    prop::option::weighted(0.7, agent()).prop_map(|agent| Op::Active { agent })
}

fn clear_op() -> impl Strategy<Value = Op> {
    prop::option::weighted(0.7, agent()).prop_map(|agent| Op::Clear { agent })
}

/// Moves of the clock: a little, across the TTL, back in time.
fn tick_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        select(vec![0.001, 1.0, 3599.0, 3600.0, 3601.0, -121.0]).prop_map(Op::Tick),
        (-200.0f64..4000.0).prop_map(Op::Tick),
    ]
}

/// Any call, for sequences.
fn any_op(s: &Settings) -> BoxedStrategy<Op> {
    let max = s.max_body_chars;
    prop_oneof![
        3 => resolve_op(),
        3 => context_op(),
        1 => tag_op(),
        3 => send_op(max),
        2 => is_own_op(),
        2 => active_op(),
        1 => clear_op(),
        2 => tick_op(),
    ]
    .boxed()
}

/// Mostly `resolve`s (the same few agents and sessions again and again),
/// between ticks of the clock, sends and clears: what the memo must survive.
fn resolve_heavy_op(s: &Settings) -> BoxedStrategy<Op> {
    prop_oneof![
        6 => resolve_op(),
        1 => context_op(),
        2 => send_op(s.max_body_chars),
        1 => clear_op(),
        3 => tick_op(),
    ]
    .boxed()
}

/// A case and `len` calls from `ops` (which may depend on the settings).
fn scenario(
    ops: fn(&Settings) -> BoxedStrategy<Op>,
    len: Range<usize>,
) -> BoxedStrategy<(Case, Vec<Op>)> {
    case()
        .prop_flat_map(move |case| {
            let ops = prop::collection::vec(ops(&case.settings), len.clone());
            (Just(case), ops).boxed()
        })
        .boxed()
}

// -------------------------------------------------- the two sides, and a call

/// What an export answered, in the host's types.
#[derive(Clone, Debug, PartialEq)]
enum Answer {
    Decision(Decision),
    Context(ContextAnswer),
    Rows(Vec<HistoryRow>),
    Receipt(Receipt),
    Statuses(Vec<RecordStatus>),
    Keys(Vec<String>),
    Own(bool),
    Ticked,
}

type Outcome = Result<Answer, Failure>;

/// The native rules over their own twin.
struct Native {
    policy: guest::Rules<FakeHost>,
    twin: FakeHost,
    /// The edits of the last `context` or `tag` (for the coverage test).
    last_edits: Vec<guest::RowEdit>,
}

impl Native {
    /// The native policy on a clone of `case.state`, and its `configure`.
    fn start(case: &Case) -> (Self, Result<(), Failure>) {
        let twin = FakeHost::new(case.state.clone());
        let mut policy = guest::Rules::new(twin.clone());
        let configured = policy
            .configure(settings_to_guest(&case.settings))
            .map_err(failure_from_guest);
        let native = Self {
            policy,
            twin,
            last_edits: Vec::new(),
        };
        (native, configured)
    }

    fn call(&mut self, op: &Op) -> Outcome {
        let p = &mut self.policy;
        let g = failure_from_guest;
        self.twin.state().last_history.clear();
        self.last_edits.clear();
        Ok(match op {
            Op::Resolve { agent, session_id } => Answer::Decision(decision_from_guest(
                p.resolve(agent, session_id).map_err(g)?,
            )),
            Op::Context {
                agent,
                session_id,
                limit,
            } => {
                let c = p.context(agent, session_id, *limit).map_err(g)?;
                // The full rows of the history call this `context` made.
                let mut rows = self.twin.state().last_history.clone();
                apply_native(&mut rows, &c.edits)?;
                self.last_edits = c.edits;
                Answer::Context(ContextAnswer {
                    decision: decision_from_guest(c.decision),
                    messages: rows,
                })
            }
            Op::Tag { agent, rows } => {
                let mut full: Vec<HistoryRow> = rows.iter().map(|r| r.for_agent(agent)).collect();
                let chars = POLICY.options().tag_prefix_chars;
                let edits = p.tag(agent, &summaries(&full, chars)).map_err(g)?;
                apply_native(&mut full, &edits)?;
                self.last_edits = edits;
                Answer::Rows(full)
            }
            Op::Send { agent, cli, text } => {
                Answer::Receipt(receipt_from_guest(p.send(agent, cli, text).map_err(g)?))
            }
            Op::IsOwn { agent, sender } => Answer::Own(p.is_own_message(agent, sender).map_err(g)?),
            Op::Active { agent } => Answer::Statuses(
                p.active(agent.as_deref())
                    .map_err(g)?
                    .into_iter()
                    .map(record_status_from_guest)
                    .collect(),
            ),
            Op::Clear { agent } => Answer::Keys(p.clear(agent.as_deref()).map_err(g)?),
            Op::Tick(dt) => {
                self.twin.state().now += dt;
                Answer::Ticked
            }
        })
    }
}

/// Apply the native policy's edits with the guest's own rule
/// (`tagging::apply`), refusing what the runtime refuses (an index out of
/// range or twice), so a bad native answer shows as a difference.
fn apply_native(rows: &mut [HistoryRow], edits: &[guest::RowEdit]) -> Result<(), Failure> {
    let mut seen = BTreeSet::new();
    for e in edits {
        let i = e.index as usize;
        if i >= rows.len() || !seen.insert(i) {
            return Err(Failure::policy(format!(
                "native policy answered a bad edit index {i} for {} rows",
                rows.len()
            )));
        }
        rows[i].content = guest::tagging::apply(e.action, &rows[i].content);
    }
    Ok(())
}

/// The compiled component in a runtime `PolicyInstance`, over its own twin.
struct Component {
    session: PolicyInstance,
    twin: FakeHost,
}

impl Component {
    /// A session of the embedded component on a clone of `case.state`,
    /// configured now, and its `configure`.
    fn start(case: &Case) -> (Self, Result<(), Failure>) {
        Self::start_on(&POLICY, case)
    }

    fn start_on(policy: &Policy, case: &Case) -> (Self, Result<(), Failure>) {
        let twin = FakeHost::new(case.state.clone());
        let mut session = policy.instance(twin.clone(), case.settings.clone());
        let configured = session.configure();
        (Self { session, twin }, configured)
    }

    fn call(&mut self, op: &Op) -> Outcome {
        let s = &mut self.session;
        self.twin.state().last_history.clear();
        Ok(match op {
            Op::Resolve { agent, session_id } => Answer::Decision(s.resolve(agent, session_id)?),
            Op::Context {
                agent,
                session_id,
                limit,
            } => Answer::Context(s.context(agent, session_id, *limit)?),
            Op::Tag { agent, rows } => {
                Answer::Rows(s.tag(agent, rows.iter().map(|r| r.for_agent(agent)).collect())?)
            }
            Op::Send { agent, cli, text } => Answer::Receipt(s.send(agent, cli, text)?),
            Op::IsOwn { agent, sender } => Answer::Own(s.is_own_message(agent, sender)?),
            Op::Active { agent } => Answer::Statuses(s.active(agent.as_deref())?),
            Op::Clear { agent } => Answer::Keys(s.clear(agent.as_deref())?),
            Op::Tick(dt) => {
                self.twin.state().now += dt;
                Answer::Ticked
            }
        })
    }
}

/// Start both sides on `case`, check they agree on `configure`, then run
/// every op on both and check the answers and the states (import calls
/// and the plans the backend got included) after each. Returns the
/// common outcomes.
fn agree(case: &Case, ops: &[Op]) -> Result<Vec<Outcome>, TestCaseError> {
    let (mut native, native_configured) = Native::start(case);
    let (mut component, component_configured) = Component::start(case);
    prop_assert_eq!(&native_configured, &component_configured, "configure");
    if native_configured.is_err() {
        // A refused configure leaves the native policy unconfigured, while
        // the runtime retries `configure` on every call: nothing to compare.
        return Ok(Vec::new());
    }
    let mut outcomes = Vec::with_capacity(ops.len());
    // The component's backend also sees the host's own reads (H1), restated:
    // the native calls plus the check's reads of keys the policy did not
    // read in that call (the host reuses what `meta-get` answered).
    let mut expected: Vec<ImportCall> = Vec::new();
    let mut native_seen = 0;
    for (i, op) in ops.iter().enumerate() {
        let n = native.call(op);
        let c = component.call(op);
        prop_assert_eq!(&n, &c, "answer of call #{} {:?}", i, op);
        let (mut ns, cs) = (native.twin.snapshot(), component.twin.snapshot());
        let this_call = ns.calls[native_seen..].to_vec();
        native_seen = ns.calls.len();
        let host_reads = host_check_reads(case, &ns, op, &n)
            .into_iter()
            .filter(|read| !this_call.contains(read));
        expected.extend(this_call.iter().cloned());
        expected.extend(host_reads);
        ns.calls = expected.clone();
        prop_assert_eq!(&ns.calls, &cs.calls, "imports of call #{} {:?}", i, op);
        prop_assert_eq!(&ns, &cs, "state after call #{} {:?}", i, op);
        outcomes.push(n);
    }
    Ok(outcomes)
}

/// [`agree`] with the memo of `resolve` on the component's side, over a
/// versioned fake (`data_version` moves with `state_meta` and `sessions`)
/// when `versioned`: every answer and the state after each call agree with
/// the native policy that decides every call; which imports each side
/// calls is not compared (a memoised decision reads less, or nothing).
fn agree_with_the_memo(case: &Case, ops: &[Op], versioned: bool) -> Result<(), TestCaseError> {
    let mut case = case.clone();
    case.state.versioned = versioned;
    let (mut native, native_configured) = Native::start(&case);
    let (mut component, component_configured) = Component::start_on(&POLICY_MEMO, &case);
    prop_assert_eq!(&native_configured, &component_configured, "configure");
    if native_configured.is_err() {
        return Ok(());
    }
    for (i, op) in ops.iter().enumerate() {
        let n = native.call(op);
        let c = component.call(op);
        prop_assert_eq!(&n, &c, "answer of call #{} {:?}", i, op);
        let (mut ns, mut cs) = (native.twin.snapshot(), component.twin.snapshot());
        (ns.calls, cs.calls) = (Vec::new(), Vec::new());
        prop_assert_eq!(&ns, &cs, "state after call #{} {:?}", i, op);
    }
    Ok(())
}

/// The reads the host itself makes after the policy redirected (docs/src/security.md
/// H1, `instance::check_redirect`), restated: the agent's record; then, for
/// the configured legacy agent when that record does not name the target
/// (JSON with `session_id` equal to it), the legacy tool's key.
fn host_check_reads(case: &Case, state: &FakeState, op: &Op, outcome: &Outcome) -> Vec<ImportCall> {
    let (agent, decision) = match (op, outcome) {
        (Op::Resolve { agent, .. }, Ok(Answer::Decision(d))) => (agent, d),
        (Op::Context { agent, .. }, Ok(Answer::Context(c))) => (agent, &c.decision),
        _ => return Vec::new(),
    };
    if !decision.redirected {
        return Vec::new();
    }
    let names_target = |key: &str| {
        state
            .meta
            .get(key)
            .and_then(|v| serde_json::from_str::<Value>(v).ok())
            .is_some_and(|j| {
                j.get("session_id") == Some(&Value::from(decision.session_id.as_str()))
            })
    };
    let own = record_key(agent);
    let mut reads = vec![ImportCall::MetaGet(own.clone())];
    if !names_target(&own) && case.settings.legacy_agent.as_deref() == Some(agent.as_str()) {
        reads.push(ImportCall::MetaGet(LEGACY_KEY.into()));
    }
    reads
}

/// [`agree`] as a plain assertion, for the fixed cases.
#[track_caller]
fn assert_agree(case: &Case, ops: &[Op]) -> Vec<Outcome> {
    agree(case, ops).unwrap_or_else(|e| panic!("native and component differ: {e}"))
}

/// Run [`agree`] on `cases` generated scenarios, or on `$PROPTEST_CASES`
/// of them when set (for a longer soak than the default run).
fn check(cases: u32, strategy: impl Strategy<Value = (Case, Vec<Op>)>) {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(cases);
    let mut runner = TestRunner::new(Config {
        cases,
        // The scenarios are large; a failure shrinks for a while at most.
        max_shrink_iters: 2048,
        ..Config::default()
    });
    if let Err(e) = runner.run(&strategy, |(case, ops)| agree(&case, &ops).map(drop)) {
        panic!("{e}");
    }
}

// ------------------------------------------------- the differential tests

#[test]
fn configure_agrees_on_valid_and_broken_settings() {
    check(96, configure_scenario());
}

/// Settings (often broken) and one `resolve` when they are accepted.
fn configure_scenario() -> impl Strategy<Value = (Case, Vec<Op>)> {
    (any_settings(), clock()).prop_map(|(settings, now)| {
        let state = FakeState {
            now,
            room: ROOM.into(),
            ..FakeState::default()
        };
        let ops = vec![Op::Resolve {
            agent: "mohe".into(),
            session_id: "xmpp-mohe-v2".into(),
        }];
        (Case { settings, state }, ops)
    })
}

fn resolve_ops(_: &Settings) -> BoxedStrategy<Op> {
    prop_oneof![6 => resolve_op(), 1 => tick_op()].boxed()
}

fn context_ops(_: &Settings) -> BoxedStrategy<Op> {
    context_op().boxed()
}

fn tag_ops(_: &Settings) -> BoxedStrategy<Op> {
    tag_op().boxed()
}

/// Sends, and the calls that read what a send wrote.
fn send_ops(s: &Settings) -> BoxedStrategy<Op> {
    prop_oneof![
        4 => send_op(s.max_body_chars),
        1 => resolve_op(),
        1 => context_op(),
        1 => active_op(),
    ]
    .boxed()
}

fn is_own_ops(_: &Settings) -> BoxedStrategy<Op> {
    is_own_op().boxed()
}

fn record_ops(_: &Settings) -> BoxedStrategy<Op> {
    prop_oneof![3 => active_op(), 2 => clear_op(), 1 => tick_op(), 1 => resolve_op()].boxed()
}

#[test]
fn resolve_agrees() {
    check(256, scenario(resolve_ops, 1..5));
}

#[test]
fn context_agrees() {
    check(192, scenario(context_ops, 1..4));
}

#[test]
fn tag_agrees() {
    check(192, scenario(tag_ops, 1..3));
}

#[test]
fn send_agrees() {
    check(160, scenario(send_ops, 1..5));
}

#[test]
fn is_own_message_agrees() {
    check(128, scenario(is_own_ops, 1..10));
}

#[test]
fn active_and_clear_agree() {
    check(160, scenario(record_ops, 1..5));
}

#[test]
fn call_sequences_agree() {
    check(128, scenario(any_op, 2..10));
}

/// The memo of `resolve` changes no answer: long call sequences (clock
/// ticks across the TTL and the skew, sends, clears) with repeated
/// resolves, over imports that report a data version and imports that do
/// not.
#[test]
fn call_sequences_agree_with_the_memo() {
    let mut runner = TestRunner::new(Config {
        cases: 128,
        max_shrink_iters: 2048,
        ..Config::default()
    });
    let strategy = (
        prop_oneof![scenario(any_op, 4..16), scenario(resolve_heavy_op, 4..16)],
        any::<bool>(),
    );
    let run = runner.run(&strategy, |((case, ops), versioned)| {
        agree_with_the_memo(&case, &ops, versioned)
    });
    if let Err(e) = run {
        panic!("{e}");
    }
}

// ------------------------------------------- fixed cases and real histories

fn stored(id: i64, role: &str, content: &str) -> FakeRow {
    FakeRow::stored(id, role, content)
}

/// A hand-checked case: both sides give exactly these answers, so they do
/// not merely agree on something wrong.
#[test]
fn both_sides_give_the_known_answers() {
    let mut state = FakeState {
        now: NOW,
        room: ROOM.into(),
        ..FakeState::default()
    };
    state
        .sessions
        .extend([CLI_A.to_string(), "xmpp-mohe-v2".into()]);
    state.meta.insert(
        record_key("mohe"),
        sample::record(CLI_A, NOW - 12.0, Some("mohe")),
    );
    state.histories.insert(
        CLI_A.into(),
        vec![
            stored(1, "user", "mohe: hi"),
            stored(2, "user", "[you] zhiwei: I am mohe"),
            stored(3, "assistant", "[YOU] ok"),
        ],
    );
    let case = Case {
        settings: base_settings(),
        state,
    };
    let ops = [
        Op::Context {
            agent: "mohe".into(),
            session_id: "xmpp-mohe-v2".into(),
            limit: None,
        },
        Op::Send {
            agent: "mohe".into(),
            cli: CLI_A.into(),
            text: "\u{1b}[1m[YOU] 大家好\r\n".into(),
        },
        // The record just written is exactly one TTL old.
        Op::Tick(3600.0),
        Op::Resolve {
            agent: "mohe".into(),
            session_id: "xmpp-mohe".into(),
        },
        Op::IsOwn {
            agent: "zhiwei".into(),
            sender: format!("{ROOM}/ZhiWei"),
        },
        Op::Clear { agent: None },
        Op::Send {
            agent: "mohe".into(),
            cli: CLI_A.into(),
            text: "[YOU] \u{7}\r\n".into(),
        },
    ];
    let outcomes = assert_agree(&case, &ops);

    let Ok(Answer::Context(context)) = &outcomes[0] else {
        panic!("context: {:?}", outcomes[0]);
    };
    assert_eq!(
        context.decision,
        Decision {
            session_id: CLI_A.into(),
            redirected: true,
            reason: Reason::Redirected,
            detail: format!(
                "record session_switch:active:mohe, written {}, holds until {} (TTL 3600 s): \
                 loading CLI session {CLI_A} instead of xmpp-mohe-v2",
                utc(NOW - 12.0),
                utc(NOW + 3588.0)
            ),
            valid_until: Some(NOW + 3588.0 - 0.001),
        }
    );
    let contents: Vec<&str> = context
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(
        contents,
        ["[YOU] mohe: hi", "zhiwei: I am mohe", "[YOU] ok"]
    );
    assert_eq!(
        outcomes[1],
        Ok(Answer::Receipt(Receipt {
            message_id: 4,
            room: ROOM.into(),
            body: "大家好\n".into(),
            record_key: record_key("mohe"),
            record_replaced: true,
        }))
    );
    assert_eq!(
        outcomes[3],
        Ok(Answer::Decision(Decision {
            session_id: "xmpp-mohe".into(),
            redirected: false,
            reason: Reason::Expired,
            detail: format!(
                "record session_switch:active:mohe, written {}, expired at {} (TTL 3600 s): \
                 loading xmpp-mohe",
                utc(NOW),
                utc(NOW + 3600.0)
            ),
            valid_until: None,
        }))
    );
    assert_eq!(outcomes[4], Ok(Answer::Own(true)));
    assert_eq!(outcomes[5], Ok(Answer::Keys(vec![record_key("mohe")])));
    assert_eq!(
        outcomes[6],
        Err(Failure::bad_input(
            "empty message: nothing is left to send after normalisation"
        ))
    );
}

/// The real Hermes databases (all three schemas): every session's history
/// through `context` for every agent (all rows and the last three), every
/// history through `tag`, `active`, a send and the history it lands in; and
/// `resolve` at clocks around the legacy tool's record in the fixtures (written at
/// 1781867301): inside the TTL, one millisecond before it, at it, after it,
/// at the edge of the future skew and beyond.
#[test]
fn real_hermes_histories_agree() {
    for name in FIXTURES {
        let Some(fake) = session_switch_tests::fake_host::fixture(name) else {
            return;
        };
        let m = fake.snapshot();
        let mut case = Case {
            settings: base_settings(),
            state: FakeState {
                room: ROOM.into(),
                ..m.clone()
            },
        };
        let mut sessions: BTreeSet<String> = m.sessions.clone();
        sessions.extend(XMPP.iter().map(|s| s.to_string()));
        let mut ops = Vec::new();
        for agent in AGENTS {
            for session in &sessions {
                for limit in [None, Some(3)] {
                    ops.push(Op::Context {
                        agent: agent.into(),
                        session_id: session.clone(),
                        limit,
                    });
                }
            }
            for rows in case.state.histories.values() {
                ops.push(Op::Tag {
                    agent: agent.into(),
                    rows: rows.clone(),
                });
            }
        }
        ops.push(Op::Active { agent: None });
        let sent = [
            Op::Send {
                agent: "mohe".into(),
                cli: CLI_A.into(),
                text: "已收到，\u{1b}[32m三点见\u{1b}[0m\r\n".into(),
            },
            // Until the record it wrote expires, mohe's bot loads the CLI
            // session instead of the XMPP one.
            Op::Tick(3600.0),
            Op::Context {
                agent: "mohe".into(),
                session_id: "xmpp-mohe-v2".into(),
                limit: Some(2),
            },
        ];
        ops.extend(sent);
        let outcomes = assert_agree(&case, &ops);
        let mohe_v2 = ops
            .iter()
            .position(|op| {
                matches!(op, Op::Context { agent, session_id, limit: None }
                    if agent == "mohe" && session_id == "xmpp-mohe-v2")
            })
            .expect("the ops load xmpp-mohe-v2 for mohe");
        let Ok(Answer::Context(first)) = &outcomes[mohe_v2] else {
            panic!("{name}: {:?}", outcomes[mohe_v2]);
        };
        assert_eq!(
            first.messages[0].content, "[YOU] mohe: 大家好，今天的会议改到下午三点。",
            "{name}: mohe's own line of xmpp-mohe-v2 is tagged"
        );
        let Some(Ok(Answer::Context(last))) = outcomes.last() else {
            panic!("{name}: {:?}", outcomes.last());
        };
        assert_eq!(
            last.messages.last().unwrap().content,
            "[YOU] 已收到，三点见\n",
            "{name}: the sent row reaches the model tagged once"
        );

        let written = 1_781_867_301.0;
        let has_record = m.meta.contains_key(LEGACY_KEY);
        assert_eq!(has_record, name != "hermes-early.db", "{name}");
        for (age, want) in [
            (12.0, Reason::Redirected),
            (3599.999, Reason::Redirected),
            (3600.0, Reason::Expired),
            (3600.001, Reason::Expired),
            (-120.0, Reason::Redirected),
            (-120.001, Reason::FutureTimestamp),
        ] {
            case.state.now = written + age;
            let ops = [
                Op::Resolve {
                    agent: "mohe".into(),
                    session_id: "xmpp-mohe-v2".into(),
                },
                Op::Active { agent: None },
            ];
            let outcomes = assert_agree(&case, &ops);
            let Ok(Answer::Decision(d)) = &outcomes[0] else {
                panic!("{name}: {:?}", outcomes[0]);
            };
            let want = if has_record { want } else { Reason::NoRecord };
            assert_eq!(d.reason, want, "{name} at age {age}: {}", d.detail);
        }
    }
}

// ------------------------------------------------ what the generators reach

fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Resolve { .. } => "resolve",
        Op::Context { .. } => "context",
        Op::Tag { .. } => "tag",
        Op::Send { .. } => "send",
        Op::IsOwn { .. } => "is-own-message",
        Op::Active { .. } => "active",
        Op::Clear { .. } => "clear",
        Op::Tick(_) => "tick",
    }
}

fn edit_name(action: guest::EditAction) -> &'static str {
    match action {
        guest::EditAction::Tag => "tag",
        guest::EditAction::Untag => "untag",
    }
}

/// The ages (seconds, at `state.now`) of the records the agent of a
/// `resolve` or `context` has (its own key, and the legacy tool's for the legacy
/// agent).
fn record_ages(case: &Case, op: &Op, state: &FakeState) -> Vec<f64> {
    let (Op::Resolve { agent, .. } | Op::Context { agent, .. }) = op else {
        return Vec::new();
    };
    let mut keys = vec![record_key(agent)];
    if case.settings.legacy_agent.as_deref() == Some(agent.as_str()) {
        keys.push(LEGACY_KEY.to_owned());
    }
    keys.iter()
        .filter_map(|k| state.meta.get(k))
        .filter_map(|v| serde_json::from_str::<Value>(v).ok())
        .filter_map(|v| v["timestamp"].as_f64())
        .map(|t| state.now - t)
        .collect()
}

/// What one call showed of the rules: labels like `resolve expired`,
/// `expired at the TTL`, `send refuses a long body`, `context edit untag`.
fn labels(
    case: &Case,
    op: &Op,
    outcome: &Outcome,
    edits: &[guest::RowEdit],
    state: &FakeState,
) -> Vec<String> {
    let name = op_name(op);
    let ttl = case.settings.ttl_seconds;
    let skew = case.settings.future_skew_seconds;
    let mut out: Vec<String> = edits
        .iter()
        .map(|e| format!("{name} edit {}", edit_name(e.action)))
        .collect();
    match outcome {
        Err(f) => {
            out.push(format!("{name} fails {}", f.kind.as_str()));
            if case.state.fail.values().any(|scripted| scripted == f) {
                out.push("a host failure passes through".into());
            }
            if matches!(op, Op::Send { .. }) {
                for (needle, label) in [
                    ("empty message", "send refuses an empty body"),
                    ("characters, the maximum is", "send refuses a long body"),
                    ("bad CLI session", "send refuses a bad CLI session id"),
                    ("not a CLI session", "send refuses an XMPP session"),
                    ("is not in state.db", "send refuses an unknown CLI session"),
                ] {
                    if f.message.contains(needle) {
                        out.push(label.into());
                    }
                }
            }
        }
        Ok(Answer::Decision(d)) | Ok(Answer::Context(ContextAnswer { decision: d, .. })) => {
            let reason = d.reason.as_str();
            out.push(format!("{name} {reason}"));
            // A record of the agent within a millisecond of the boundary.
            let ages = record_ages(case, op, state);
            let near = |edge: f64| ages.iter().any(|age| (age - edge).abs() < 0.0005);
            if near(f64::from(ttl)) {
                out.push(format!("{reason} at the TTL"));
            }
            if near(-f64::from(skew)) {
                out.push(format!("{reason} at the skew"));
            }
            if d.detail.contains("which is never a target") {
                out.push("a record naming an XMPP session".into());
            }
        }
        Ok(Answer::Receipt(r)) if r.record_replaced => out.push("send delivers".into()),
        Ok(Answer::Receipt(_)) => out.push("send keeps a newer record".into()),
        Ok(Answer::Statuses(all)) => {
            for s in all {
                out.push(format!("active {} valid={}", s.reason.as_str(), s.valid));
            }
        }
        Ok(Answer::Keys(keys)) if !keys.is_empty() => out.push("clear deletes".into()),
        Ok(Answer::Own(own)) => out.push(format!("own {own}")),
        Ok(Answer::Keys(_) | Answer::Rows(_) | Answer::Ticked) => {}
    }
    out
}

/// The generators reach every rule the tests above compare: each decision
/// reason (and the TTL and skew boundaries from both sides), both edits,
/// each way a send passes or is refused, host failures passed on, records
/// valid and not, own echo and not, refused settings. Native side only,
/// from a fixed seed, so it is quick and never flaky.
#[test]
fn generators_reach_every_rule() {
    let mut runner = TestRunner::deterministic();
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    let mut count = |labels: Vec<String>| {
        for label in labels {
            *seen.entry(label).or_default() += 1;
        }
    };
    let strategy = scenario(any_op, 2..10);
    for _ in 0..600 {
        let (case, ops) = strategy.new_tree(&mut runner).unwrap().current();
        let (mut native, configured) = Native::start(&case);
        configured.expect("generated settings are valid");
        for op in &ops {
            let outcome = native.call(op);
            let state = native.twin.state().clone();
            count(labels(&case, op, &outcome, &native.last_edits, &state));
        }
    }
    let configure = configure_scenario();
    for _ in 0..100 {
        let (case, _) = configure.new_tree(&mut runner).unwrap().current();
        let (_, configured) = Native::start(&case);
        count(vec![match configured {
            Ok(()) => "configure accepts".into(),
            Err(f) => format!("configure refuses ({})", f.kind.as_str()),
        }]);
    }
    let want = [
        "resolve redirected",
        "resolve no-record",
        "resolve expired",
        "resolve future-timestamp",
        "resolve malformed-record",
        "resolve unknown-session",
        "resolve not-agent-session",
        "resolve fails unknown-agent",
        "context redirected",
        "context expired",
        "context not-agent-session",
        "expired at the TTL",
        "redirected at the TTL",
        "future-timestamp at the skew",
        "redirected at the skew",
        "a record naming an XMPP session",
        "context edit tag",
        "context edit untag",
        "tag edit tag",
        "tag edit untag",
        "send delivers",
        "send keeps a newer record",
        "send refuses an empty body",
        "send refuses a long body",
        "send refuses a bad CLI session id",
        "send refuses an XMPP session",
        "send refuses an unknown CLI session",
        "send fails unknown-agent",
        "a host failure passes through",
        "active redirected valid=true",
        "active expired valid=false",
        "active future-timestamp valid=false",
        "active malformed-record valid=false",
        "active unknown-session valid=false",
        "clear deletes",
        "own true",
        "own false",
        "configure accepts",
        "configure refuses (bad-input)",
    ];
    let missing: Vec<&str> = want
        .into_iter()
        .filter(|w| !seen.contains_key(*w))
        .collect();
    assert!(
        missing.is_empty(),
        "the generators never reached {missing:?}; they reached {seen:#?}"
    );
}
