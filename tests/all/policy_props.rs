//! Properties of the policy's rules, run natively (the same code the
//! component is built from) with proptest: tagging is idempotent, row-local
//! and never claims another's line; resolve never redirects outside the agent's own
//! sessions or at an age ≥ TTL, one agent's record never changes another
//! agent's decision, and a decision holds until its `valid_until`; body
//! normalisation is idempotent and leaves nothing XML 1.0 forbids. Case counts keep the file well under a minute.

use proptest::prelude::*;
use session_switch_policy::body::{clean, normalise, xml_allows};
use session_switch_policy::redirect::{LEGACY_KEY, record_key, resolve};
use session_switch_policy::samples::{SAMPLE_CLI, SAMPLE_NOW, sample_settings};
use session_switch_policy::tagging::{apply, is_blank, tag, untag};
use session_switch_policy::{
    EditAction, Host, Reason, Role, RowSummaries, Settings, ValidSettings,
};
use session_switch_tests::fake_host::{FakeHost, FakeState, prefix};
use session_switch_tests::hostile::{oracle_blank, starts_with_tag, strip_tags};

fn settings() -> ValidSettings {
    ValidSettings::new(sample_settings()).expect("sample settings are valid")
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 512,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------- tagging

/// A `[YOU]` marker in any ASCII case or in full-width forms, with up to
/// two blanks (whitespace or invisible format characters) after it.
fn marker() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec![
            "[YOU]",
            "[you]",
            "[You]",
            "[yOu]",
            "［YOU］",
            "［ｙｏｕ］",
            "[ＹOU］",
        ]),
        prop::sample::select(vec![
            "",
            " ",
            "  ",
            "\t",
            "\u{200b}",
            "\u{feff} ",
            "\u{2060}",
        ]),
    )
        .prop_map(|(m, ws)| format!("{m}{ws}"))
}

/// Up to four stacked markers (within the policy's prefix budget).
fn markers() -> impl Strategy<Value = String> {
    prop::collection::vec(marker(), 0..=4).prop_map(|v| v.concat())
}

/// Free text that cannot sign a line: no `:`, `：`, `[` or `]`.
fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 ,.!'@好中文👍é-]{0,24}"
}

/// A line start that is NOT a signature of mohe: a longer name, a mention,
/// a possessive, mohe's name in another case (another occupant in the
/// room), another agent's signature, or nothing.
fn foreign_head() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "mohe2: ",
        "mohe2：",
        "moheX:",
        "mohe's ",
        "mohe, ",
        "mohe ",
        "mohe :",
        "@mohe ",
        "@mohe: ",
        "[mohe2] ",
        "[mohe ",
        "MOHE:",
        "Mohe：",
        "[MoHe]",
        "ｍｏｈｅ: ",
        "zhiwei: ",
        "ZHIWEI：",
        "xiaoguo：",
        "[xiaoguo] ",
        "",
    ])
    .prop_map(str::to_string)
}

/// A signature of mohe: one of its names plus a delimiter, or bracketed.
fn own_head() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "mohe: ",
        "mohe:",
        "mohe：",
        "[mohe] ",
        "[mohe]",
        "墨河：",
        "[墨河] ",
    ])
    .prop_map(str::to_string)
}

fn role() -> impl Strategy<Value = Role> {
    prop::sample::select(vec![
        Role::User,
        Role::User,
        Role::User,
        Role::Assistant,
        Role::Tool,
        Role::System,
        Role::Other,
    ])
}

/// A stored row: (role, full content, bridge wrote it for mohe).
fn stored_row() -> impl Strategy<Value = (Role, String, bool)> {
    let content = (
        prop::sample::select(vec!["", " ", "  "]),
        markers(),
        prop_oneof![own_head(), foreign_head()],
        text(),
    )
        .prop_map(|(ws, m, head, tail)| format!("{ws}{m}{head}{tail}"));
    (role(), content, any::<bool>())
}

/// What the host would hand the policy for these stored rows.
fn summaries(s: &ValidSettings, rows: &[(Role, String, bool)]) -> RowSummaries {
    let mut out = RowSummaries::with_capacity(rows.len(), 0);
    for (id, (role, content, bridge)) in (1..).zip(rows) {
        out.push(id, *role, prefix(content, s.prefix_chars()), *bridge);
    }
    out
}

/// Apply `tag`'s edits for mohe to the full contents, as the host does.
fn tagged_view(s: &ValidSettings, rows: &[(Role, String, bool)]) -> Vec<(Role, String, bool)> {
    let edits = tag(s, "mohe", &summaries(s, rows)).expect("mohe is configured");
    let mut view = rows.to_vec();
    for e in edits {
        let row = &mut view[e.index as usize];
        row.1 = apply(e.action, &row.1);
    }
    view
}

proptest! {
    #![proptest_config(config())]

    /// Tagging the tagged view changes nothing: one `[YOU] ` after any
    /// number of loads.
    #[test]
    fn tagging_is_idempotent(rows in prop::collection::vec(stored_row(), 0..12)) {
        let s = settings();
        let once = tagged_view(&s, &rows);
        let twice = tagged_view(&s, &once);
        prop_assert_eq!(&once, &twice);
        for ((role, before, _), (_, after, _)) in rows.iter().zip(&once) {
            if *role != Role::User {
                prop_assert_eq!(before, after, "only user rows are edited");
            } else if let Some(rest) = after.strip_prefix("[YOU] ") {
                prop_assert!(!starts_with_tag(rest), "two tags in {:?}", after);
            } else {
                prop_assert!(!starts_with_tag(after), "a [YOU] left on another's line: {:?}", after);
            }
        }
    }

    /// `tag` is row-local (WIT `policy.tag`, what the host's row memo
    /// relies on): each row's edit is the edit of that row tagged alone,
    /// whatever its id, its position and the rows around it.
    #[test]
    fn tagging_is_row_local(rows in prop::collection::vec(stored_row(), 0..12), ids in prop::collection::vec(any::<i64>(), 12)) {
        let s = settings();
        let whole = tag(&s, "mohe", &summaries(&s, &rows)).expect("mohe is configured");
        let mut alone = Vec::new();
        for (index, ((role, content, bridge), id)) in (0u32..).zip(rows.iter().zip(&ids)) {
            let mut one = RowSummaries::with_capacity(1, 0);
            one.push(*id, *role, prefix(content, s.prefix_chars()), *bridge);
            for e in tag(&s, "mohe", &one).expect("mohe is configured") {
                prop_assert_eq!(e.index, 0);
                alone.push((index, e.action));
            }
        }
        let whole: Vec<_> = whole.iter().map(|e| (e.index, e.action)).collect();
        prop_assert_eq!(whole, alone);
    }

    /// A line that is not mohe's (longer name, mention, another agent's
    /// signature, an imitated tag) is never tagged, and never reaches the
    /// model starting with `[YOU]`.
    #[test]
    fn never_tags_a_foreign_line(ws in "[ \t]{0,2}", m in markers(), head in foreign_head(), tail in text()) {
        let s = settings();
        let content = format!("{ws}{m}{head}{tail}");
        let rows = vec![(Role::User, content.clone(), false)];
        let edits = tag(&s, "mohe", &summaries(&s, &rows)).unwrap();
        prop_assert!(edits.iter().all(|e| e.action != EditAction::Tag), "{:?} tagged", content);
        let view = &tagged_view(&s, &rows)[0].1;
        prop_assert!(!starts_with_tag(view), "{:?} shown as {:?}", content, view);
        // A blank line may hide a marker past the prefix (G1): untagged.
        if m.is_empty() && !content.trim().is_empty() {
            prop_assert!(edits.is_empty(), "{:?} edited without a marker", content);
        }
    }

    /// The blanks of the untag rule are exactly Unicode's `White_Space`
    /// and `Default_Ignorable_Code_Point` (proptest's regex engine has its
    /// own copy of the Unicode tables), and `untag` is the contract's rule
    /// restated ([`strip_tags`]) on any text.
    #[test]
    fn blanks_are_white_space_and_default_ignorables(
        ignorable in "\\p{Default_Ignorable_Code_Point}",
        other in "\\P{Default_Ignorable_Code_Point}",
        text in "(\\p{Default_Ignorable_Code_Point}|\\s|[［］ＹＯＵｙｏｕ\\[\\]YOUyou]|.){0,12}",
    ) {
        let c = ignorable.chars().next().unwrap();
        prop_assert!(is_blank(c) && oracle_blank(c), "{:?}", c);
        let d = other.chars().next().unwrap();
        prop_assert_eq!(is_blank(d), d.is_whitespace(), "{:?}", d);
        prop_assert_eq!(oracle_blank(d), d.is_whitespace(), "{:?}", d);
        let restated = strip_tags(&text);
        prop_assert_eq!(untag(&text), restated.as_str(), "{:?}", text);
    }

    /// A line signed by mohe is shown as exactly `[YOU] ` + its unmarked text.
    #[test]
    fn always_tags_an_own_line(ws in "[ \t]{0,2}", m in markers(), head in own_head(), tail in text()) {
        let s = settings();
        let content = format!("{ws}{m}{head}{tail}");
        let view = &tagged_view(&s, &[(Role::User, content.clone(), false)])[0].1;
        prop_assert_eq!(view, &format!("[YOU] {head}{tail}"));
    }
}

// ---------------------------------------------------------------- resolve

const AGENTS: [&str; 3] = ["mohe", "zhiwei", "xiaoguo"];

/// Any session id the room could ask about or a record could name.
fn session() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "xmpp-mohe-v2",
            "xmpp-mohe",
            "xmpp-zhiwei",
            "xmpp-xiaoguo",
            SAMPLE_CLI,
            "cli-b",
            "gone",
            "",
            " cli-b",
        ])
        .prop_map(str::to_string),
        "[a-z0-9_]{1,12}",
    ]
}

/// A record value: well-formed with a random age around the TTL, or junk.
fn record(agent: &'static str) -> impl Strategy<Value = String> {
    let well_formed = (session(), -200.0f64..4000.0, any::<bool>(), prop::sample::select(vec![agent, "mohe", "zhiwei"]))
        .prop_map(move |(s, age, with_agent, who)| {
            let mut v = serde_json::json!({"session_id": s, "timestamp": SAMPLE_NOW - age, "source": "cli"});
            if with_agent {
                v["agent"] = who.into();
            }
            v.to_string()
        });
    prop_oneof![
        4 => well_formed,
        1 => prop::sample::select(vec!["", "junk", "{}", "[]", r#"{"session_id": "cli-b", "timestamp": "1"}"#])
            .prop_map(str::to_string),
    ]
}

/// `state_meta` with an optional record per agent and for the legacy tool's key.
fn meta() -> impl Strategy<Value = Vec<(String, String)>> {
    (
        prop::option::of(record("mohe")),
        prop::option::of(record("zhiwei")),
        prop::option::of(record("xiaoguo")),
        prop::option::of(record("mohe")),
    )
        .prop_map(|(m, z, x, l)| {
            let mut out = Vec::new();
            for (key, value) in [
                (record_key("mohe"), m),
                (record_key("zhiwei"), z),
                (record_key("xiaoguo"), x),
                (LEGACY_KEY.to_string(), l),
            ] {
                if let Some(v) = value {
                    out.push((key, v));
                }
            }
            out
        })
}

fn host(meta: &[(String, String)]) -> FakeHost {
    let mut h = FakeState::at(SAMPLE_NOW, session_switch_tests::sample::ROOM);
    for s in [
        "xmpp-mohe-v2",
        "xmpp-mohe",
        "xmpp-zhiwei",
        "xmpp-xiaoguo",
        SAMPLE_CLI,
        "cli-b",
    ] {
        h.add_session(s);
    }
    h.meta.extend(meta.iter().cloned());
    FakeHost::new(h)
}

fn with_ttl(ttl: u32, skew: u32) -> ValidSettings {
    let mut s: Settings = sample_settings();
    s.ttl_seconds = ttl;
    s.future_skew_seconds = skew;
    ValidSettings::new(s).unwrap()
}

proptest! {
    #![proptest_config(config())]

    /// Only the agent's own XMPP sessions are ever redirected, only to an
    /// existing session that is no agent's XMPP session, and only by a
    /// record younger than the TTL and not beyond the skew.
    #[test]
    fn resolve_stays_inside_the_rules(
        meta in meta(),
        agent in prop::sample::select(AGENTS.to_vec()),
        asked in session(),
        ttl in 1u32..4000,
        skew in 0u32..300,
    ) {
        let s = with_ttl(ttl, skew);
        let mut h = host(&meta);
        let d = resolve(&s, &mut h, agent, &asked).unwrap();
        let own = s.agent(agent).unwrap().owns_session(&asked);
        if !own {
            prop_assert_eq!(d.reason, Reason::NotAgentSession);
        }
        if !d.redirected {
            prop_assert_eq!(&d.session_id, &asked);
            prop_assert!(d.reason != Reason::Redirected);
            return Ok(());
        }
        prop_assert!(own, "redirected {} for {}", asked, agent);
        prop_assert_eq!(d.reason, Reason::Redirected);
        prop_assert!(s.session_owner(&d.session_id).is_none(), "target {} is an XMPP session", d.session_id);
        let h = h.snapshot();
        prop_assert!(h.sessions.contains(&d.session_id), "target {} does not exist", d.session_id);
        // The winning record names the target and is young enough.
        let ages: Vec<f64> = h
            .meta
            .iter()
            .filter(|(k, _)| **k == record_key(agent) || (agent == "mohe" && k.as_str() == LEGACY_KEY))
            .filter_map(|(_, v)| serde_json::from_str::<serde_json::Value>(v).ok())
            .filter(|v| v["session_id"] == d.session_id.as_str())
            .filter_map(|v| v["timestamp"].as_f64())
            .map(|t| SAMPLE_NOW - t)
            .collect();
        prop_assert!(
            ages.iter().any(|&age| age < f64::from(ttl) && age >= -f64::from(skew)),
            "no record of {} naming {} is valid: ages {:?}", agent, d.session_id, ages
        );
    }

    /// No record at an age ≥ TTL ever redirects; one just younger does
    /// (when it names an existing CLI session).
    #[test]
    fn resolve_expires_at_the_ttl(ttl in 1u32..100_000, over in 0.0f64..10_000.0, under in 0.001f64..1.0) {
        let s = with_ttl(ttl, 120);
        let value = |age: f64| serde_json::json!({"session_id": SAMPLE_CLI, "timestamp": SAMPLE_NOW - age, "agent": "zhiwei"}).to_string();
        let old = vec![(record_key("zhiwei"), value(f64::from(ttl) + over))];
        let d = resolve(&s, &mut host(&old), "zhiwei", "xmpp-zhiwei").unwrap();
        prop_assert!(!d.redirected);
        prop_assert_eq!(d.reason, Reason::Expired);
        let young = vec![(record_key("zhiwei"), value(f64::from(ttl) - under))];
        let d = resolve(&s, &mut host(&young), "zhiwei", "xmpp-zhiwei").unwrap();
        prop_assert!(d.redirected, "{:?}", d);
    }

    /// A decision holds from its call's clock until its `valid_until`
    /// (forever when `None`): resolving again at any later time before it,
    /// with the same `state_meta`, gives the same decision, detail
    /// included. This is what lets a host answer from its memo (docs/src/design/where-the-time-goes.md).
    #[test]
    fn a_decision_holds_until_its_valid_until(
        meta in meta(),
        agent in prop::sample::select(AGENTS.to_vec()),
        asked in session(),
        ttl in 1u32..4000,
        skew in 0u32..300,
        later in 0.0f64..1.0,
    ) {
        let s = with_ttl(ttl, skew);
        let first = resolve(&s, &mut host(&meta), agent, &asked).unwrap();
        let until = first.valid_until.unwrap_or(SAMPLE_NOW + 1e7);
        prop_assert!(until > SAMPLE_NOW - 0.002, "valid_until {} is before the call", until);
        let at = SAMPLE_NOW + (until - SAMPLE_NOW).max(0.0) * later;
        prop_assume!(at < until);
        let mut h = host(&meta);
        h.state().now = at;
        let again = resolve(&s, &mut h, agent, &asked).unwrap();
        prop_assert_eq!(&first, &again, "at {} (valid until {})", at, until);
    }

    /// Changing every other agent's record (and, for agents other than the
    /// legacy one, the legacy tool's key) never changes an agent's decision.
    #[test]
    fn one_agents_record_never_moves_another(
        meta in meta(),
        others in meta(),
        agent in prop::sample::select(AGENTS.to_vec()),
        asked in session(),
    ) {
        let s = settings();
        let mine = |m: &[(String, String)]| -> Vec<(String, String)> {
            m.iter()
                .filter(|(k, _)| *k == record_key(agent) || (s.is_legacy(agent) && k.as_str() == LEGACY_KEY))
                .cloned()
                .collect()
        };
        let theirs: Vec<(String, String)> = others
            .iter()
            .filter(|(k, _)| !mine(&others).iter().any(|(m, _)| m == k))
            .cloned()
            .collect();
        let alone = resolve(&s, &mut host(&mine(&meta)), agent, &asked).unwrap();
        let mut crowded = mine(&meta);
        crowded.extend(theirs);
        let together = resolve(&s, &mut host(&crowded), agent, &asked).unwrap();
        prop_assert_eq!(alone, together);
    }
}

// ---------------------------------------------------------- normalisation

/// Text rich in what normalisation removes: escapes, CR, controls,
/// non-characters, markers, and ordinary and non-ASCII text between.
fn raw_body() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[a-z ]{0,6}",
        Just("\r\n".to_string()),
        Just("\r".to_string()),
        Just("\n".to_string()),
        Just("\t".to_string()),
        Just("\u{1b}".to_string()),
        Just("\u{1b}[".to_string()),
        Just("\u{1b}]".to_string()),
        Just("\u{7}".to_string()),
        Just("\\".to_string()),
        "[0-9;?]{0,3}[a-zA-Z~]?",
        Just("[YOU]".to_string()),
        Just("[you] ".to_string()),
        Just("\u{fffe}\u{ffff}".to_string()),
        Just("好👍é".to_string()),
        any::<char>().prop_map(String::from),
        (0u32..0x20).prop_map(|c| char::from_u32(c).unwrap().to_string()),
    ];
    prop::collection::vec(piece, 0..16).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(config())]

    /// `clean` is idempotent, leaves no character XML 1.0 forbids, no CR, no
    /// ESC and no leading marker; `normalise` accepts exactly the non-empty
    /// results within the limit and returns them unchanged.
    #[test]
    fn normalisation_is_idempotent_and_xml_safe(text in raw_body(), max in 1u32..40) {
        let once = clean(&text);
        prop_assert_eq!(&clean(&once), &once);
        prop_assert!(once.chars().all(xml_allows), "{:?}", once);
        prop_assert!(!once.contains('\r') && !once.contains('\u{1b}'), "{:?}", once);
        prop_assert!(!starts_with_tag(&once) && once.trim_start_matches(oracle_blank) == once, "{:?}", once);
        match normalise(&text, max) {
            Ok(body) => {
                prop_assert_eq!(&body, &once);
                prop_assert!(!body.trim().is_empty());
                prop_assert!(body.chars().count() <= max as usize);
                prop_assert_eq!(normalise(&body, max).unwrap(), body);
            }
            Err(e) => {
                let n = once.chars().count();
                prop_assert!(once.trim().is_empty() || n > max as usize, "{:?} refused: {}", once, e.message);
            }
        }
    }
}

// ------------------------------------------------ the real Hermes fixtures

/// The tests' fake host holding what a Hermes fixture holds (its sessions,
/// the active rows of every session in id order as Hermes's loader sees
/// them, `state_meta` when the table exists: not in the earliest schema),
/// its clock at `clock`.
fn fixture_host(name: &str, clock: f64) -> Option<FakeHost> {
    let h = session_switch_tests::fake_host::fixture(name)?;
    h.state().now = clock;
    Some(h)
}

/// The fixture sessions' settings: the legacy tool's agents with the XMPP
/// sessions the fixtures hold (`xmpp-mohe-v2`, `xmpp-zhiwei`).
fn fixture_settings() -> ValidSettings {
    let mut s = sample_settings();
    s.agents[0].sessions = vec!["xmpp-mohe-v2".into()];
    ValidSettings::new(s).unwrap()
}

/// The real lines of `xmpp-mohe-v2`, tagged for each agent: mohe's line is
/// mohe's, zhiwei's zhiwei's, xiaoguo's (full-width colon) xiaoguo's; the
/// mention, `mohe2: …` and the assistant rows are nobody's to tag.
#[test]
fn fixture_xmpp_mohe_v2_is_tagged_per_agent() {
    for name in session_switch_tests::FIXTURES {
        let Some(mut h) = fixture_host(name, SAMPLE_NOW) else {
            return;
        };
        let s = fixture_settings();
        let rows = h
            .history("xmpp-mohe-v2", "mohe", None, s.prefix_chars())
            .unwrap();
        let split = rows.split().unwrap();
        let lines: Vec<&str> = split.iter().map(|r| r.prefix).collect();
        assert_eq!(lines[0], "mohe: 大家好，今天的会议改到下午三点。", "{name}");
        assert_eq!(
            lines[4], "@mohe please share the meeting link before 3pm.",
            "{name}"
        );
        assert_eq!(rows.len(), 8, "{name}");
        let tagged = |agent: &str| -> Vec<(u32, EditAction)> {
            tag(&s, agent, &rows)
                .unwrap()
                .into_iter()
                .map(|e| (e.index, e.action))
                .collect()
        };
        assert_eq!(tagged("mohe"), vec![(0, EditAction::Tag)], "{name}");
        assert_eq!(tagged("zhiwei"), vec![(2, EditAction::Tag)], "{name}");
        assert_eq!(tagged("xiaoguo"), vec![(3, EditAction::Tag)], "{name}");
        assert_eq!(
            apply(EditAction::Tag, lines[0]),
            "[YOU] mohe: 大家好，今天的会议改到下午三点。"
        );
    }
}

/// The legacy tool's record in the fixtures (`active_xmpp_sender_session`, written
/// at the CLI session's start) redirects the legacy agent mohe while younger
/// than the TTL, never zhiwei; the earliest schema has no `state_meta`.
#[test]
fn fixture_legacy_record_redirects_the_legacy_agent_only() {
    let cli = SAMPLE_CLI;
    let written = 1_781_867_301.0;
    let s = fixture_settings();
    for name in session_switch_tests::FIXTURES {
        let Some(mut h) = fixture_host(name, written + 12.0) else {
            return;
        };
        let has_record = h.state().meta.contains_key(LEGACY_KEY);
        assert_eq!(has_record, name != "hermes-early.db", "{name}");
        let d = resolve(&s, &mut h, "mohe", "xmpp-mohe-v2").unwrap();
        if has_record {
            assert_eq!(
                (d.redirected, d.session_id.as_str(), d.reason),
                (true, cli, Reason::Redirected),
                "{name}"
            );
        } else {
            assert_eq!(d.reason, Reason::NoRecord, "{name}");
        }
        let d = resolve(&s, &mut h, "zhiwei", "xmpp-zhiwei").unwrap();
        assert_eq!(
            d.reason,
            Reason::NoRecord,
            "{name}: zhiwei never reads the legacy tool's key"
        );
        h.state().now = written + 3600.0;
        let d = resolve(&s, &mut h, "mohe", "xmpp-mohe-v2").unwrap();
        let want = if has_record {
            Reason::Expired
        } else {
            Reason::NoRecord
        };
        assert_eq!(d.reason, want, "{name}: exactly one TTL later");
    }
}
