//! The TOML config (docs/src/design/contracts.md): the example parses to the
//! legacy tool's agents and shows every key the config's schema knows, and
//! every validation error names the line and says what is wrong.

use serde_json::Value;
use session_switch::config::{Config, LoopGuardConfig, MeetingConfig, TransportKind};
use session_switch::{Failure, FailureKind};
use session_switch_contract::limits::MAX_SESSION_ID_CHARS;
use std::collections::{BTreeMap, BTreeSet};

const MINIMAL: &str = r#"
[xmpp]
room = "coregroup@conference.example.org"

[[agents]]
name = "mohe"
jid = "mohe@example.org"
sessions = ["xmpp-mohe-v2"]
"#;

fn err(text: &str) -> Failure {
    let e = Config::parse(text, "test.toml").expect_err("config must be refused");
    assert_eq!(e.kind, FailureKind::BadInput, "{e}");
    e
}

/// `MINIMAL` with `extra` appended (a new table or agent).
fn with(extra: &str) -> String {
    format!("{MINIMAL}{extra}")
}

#[test]
fn example_config_is_the_legacy_tools_three_agents() {
    let path = session_switch_tests::workspace_root().join("examples/session-switch.toml");
    let c = Config::load(&path).unwrap();
    assert_eq!(c.path.as_deref(), Some(path.as_path()));
    assert_eq!(c.xmpp.room, "coregroup@conference.yoin.fun");
    assert_eq!(c.xmpp.transport, TransportKind::Ejabberdctl);
    assert_eq!(
        c.xmpp.ejabberdctl,
        ["docker", "exec", "ejabberd", "ejabberdctl"]
    );
    assert_eq!(c.redirect.ttl_seconds, 3600);
    assert_eq!(c.redirect.future_skew_seconds, 120);
    assert_eq!(c.redirect.legacy_agent.as_deref(), Some("mohe"));
    // Its [loop_guard] and [bot] keys say the defaults, as written there.
    assert_eq!(c.loop_guard, LoopGuardConfig::default());
    assert_eq!(c.bot.meeting, MeetingConfig::default());
    assert_eq!(c.bot.turn_timeout_seconds, 300);
    assert!(c.bot.agents["mohe"].password.is_some());
    let names: Vec<_> = c.agents.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["mohe", "zhiwei", "xiaoguo"]);
    let mohe = c.agent("mohe").unwrap();
    assert_eq!(mohe.jid, "mohe@yoin.fun");
    assert_eq!(mohe.sessions, ["xmpp-mohe-v2", "xmpp-mohe"]);
    assert_eq!(
        (mohe.http_port, mohe.gateway_port),
        (Some(5804), Some(8642))
    );
    assert_eq!(c.agent("xiaoguo").unwrap().sessions, ["xmpp-xiaoguo"]);
    assert_eq!(c.agent_names(), "mohe, zhiwei, xiaoguo");
}

/// The example's keys by section (`bot.agents.NAME` for any agent's
/// table), set or commented out (`# key = value`, `# [section]`), each with
/// its line without the `#` and whether it was commented out.
fn example_keys(text: &str) -> BTreeMap<String, BTreeMap<String, (String, bool)>> {
    let mut keys: BTreeMap<String, BTreeMap<String, (String, bool)>> = BTreeMap::new();
    let mut section = String::new();
    for line in text.lines() {
        let commented = line.trim_start().starts_with('#');
        let line = line.trim_start_matches('#').trim();
        if let Some(header) = line.strip_prefix('[') {
            let name = header.trim_start_matches('[').split(']').next().unwrap();
            section = match name.strip_prefix("bot.agents.") {
                Some(_) => "bot.agents.NAME".into(),
                None => name.to_string(),
            };
            keys.entry(section.clone()).or_default();
            continue;
        }
        let Some((key, _)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if !key.is_empty() && key.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
            keys.entry(section.clone())
                .or_default()
                .insert(key.to_string(), (line.to_string(), commented));
        }
    }
    keys
}

/// The schema's keys by section, as [`example_keys`] names sections, each
/// with its default when it has one.
fn schema_keys(schema: &Value) -> BTreeMap<String, BTreeMap<String, Option<Value>>> {
    fn resolve<'a>(root: &'a Value, s: &'a Value) -> &'a Value {
        match s.get("$ref").and_then(Value::as_str) {
            Some(r) => &root["$defs"][r.trim_start_matches("#/$defs/")],
            None => s,
        }
    }
    fn table<'a>(root: &'a Value, s: &'a Value) -> Option<(&'a Value, &'static str)> {
        let s = resolve(root, s);
        if s.get("properties").is_some() {
            return Some((s, ""));
        }
        for (key, suffix) in [("items", ""), ("additionalProperties", ".NAME")] {
            if let Some(inner) = s.get(key).map(|i| resolve(root, i))
                && inner.get("properties").is_some()
            {
                return Some((inner, suffix));
            }
        }
        None
    }
    fn walk(
        root: &Value,
        name: &str,
        s: &Value,
        out: &mut BTreeMap<String, BTreeMap<String, Option<Value>>>,
    ) {
        let mut own = BTreeMap::new();
        for (key, property) in s["properties"].as_object().unwrap() {
            match table(root, property) {
                Some((inner, suffix)) => {
                    let path = if name.is_empty() {
                        key.clone()
                    } else {
                        format!("{name}.{key}")
                    };
                    walk(root, &format!("{path}{suffix}"), inner, out);
                }
                None => {
                    own.insert(key.clone(), property.get("default").cloned());
                }
            }
        }
        if !name.is_empty() {
            out.insert(name.to_string(), own);
        }
    }
    let mut out = BTreeMap::new();
    walk(schema, "", schema, &mut out);
    out
}

#[test]
fn example_config_shows_every_key_and_only_known_ones() {
    let path = session_switch_tests::workspace_root().join("examples/session-switch.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    Config::load(&path).expect("the example loads");
    let example = example_keys(&text);
    let schema = schema_keys(&session_switch::config::schema());
    assert!(schema.contains_key("bot.agents.NAME"), "{schema:?}");
    let sections = |keys: Vec<&String>| keys.into_iter().cloned().collect::<BTreeSet<_>>();
    assert_eq!(
        sections(example.keys().filter(|s| !s.is_empty()).collect()),
        sections(schema.keys().collect()),
        "the example's sections (set or commented) and the config's"
    );
    for (section, known) in &schema {
        let shown = &example[section];
        let missing: Vec<_> = known.keys().filter(|k| !shown.contains_key(*k)).collect();
        let unknown: Vec<_> = shown.keys().filter(|k| !known.contains_key(*k)).collect();
        assert!(
            missing.is_empty() && unknown.is_empty(),
            "examples/session-switch.toml [{section}]: keys missing {missing:?} (set them, \
             or comment them out where setting one changes what happens), unknown {unknown:?}"
        );
        // A key commented out shows its default, where it has one (a key
        // that is set may say what a deployment needs).
        for (key, (line, commented)) in shown {
            let (true, Some(Some(default))) = (commented, known.get(key)) else {
                continue;
            };
            let value = line.split(" #").next().unwrap();
            let written: toml::Table = toml::from_str(value)
                .unwrap_or_else(|e| panic!("[{section}] {line:?} is not TOML: {e}"));
            let written = serde_json::to_value(&written[key]).unwrap();
            assert_eq!(&written, default, "[{section}] # {line}: not the default");
        }
    }
}

#[test]
fn defaults_fill_what_is_left_out() {
    let c = Config::parse(MINIMAL, "m.toml").unwrap();
    assert_eq!(c.xmpp.transport, TransportKind::Ejabberdctl);
    assert_eq!(c.xmpp.ejabberdctl, ["ejabberdctl"]);
    assert_eq!(c.xmpp.max_body_chars, 10_000);
    assert_eq!(c.redirect.ttl_seconds, 3600);
    assert_eq!(c.redirect.future_skew_seconds, 120);
    assert_eq!(c.redirect.legacy_agent, None);
    let mohe = &c.agents[0];
    assert_eq!(mohe.nick, "mohe", "the nick defaults to the name");
    assert!(mohe.aliases.is_empty());
}

#[test]
fn adding_an_agent_is_a_config_edit_only() {
    let c = Config::parse(
        &with("\n[[agents]]\nname = \"newbie\"\njid = \"newbie@example.org\"\nnick = \"nb\"\nsessions = [\"xmpp-newbie\"]\naliases = [\"NB\"]\n"),
        "t",
    )
    .unwrap();
    let newbie = c.agent("newbie").unwrap();
    assert_eq!(
        (newbie.nick.as_str(), newbie.aliases.as_slice()),
        ("nb", &["NB".to_string()][..])
    );
}

#[test]
fn duplicate_name_names_both_lines() {
    let e = err(&with(
        "\n[[agents]]\nname = \"mohe\"\njid = \"other@example.org\"\nsessions = [\"s2\"]\n",
    ));
    assert_eq!(
        e.message,
        "config test.toml, line 11: duplicate agent name 'mohe' (first at line 6)"
    );
}

#[test]
fn duplicate_session_across_agents_is_refused() {
    let e = err(&with(
        "\n[[agents]]\nname = \"zhiwei\"\njid = \"zhiwei@example.org\"\nsessions = [\"xmpp-mohe-v2\"]\n",
    ));
    assert_eq!(
        e.message,
        "config test.toml, line 13: session 'xmpp-mohe-v2' is already a session of agent 'mohe'"
    );
}

#[test]
fn duplicate_jid_and_nick_are_refused() {
    let e = err(&with(
        "\n[[agents]]\nname = \"x\"\njid = \"MOHE@example.org\"\nsessions = [\"s\"]\n",
    ));
    assert!(
        e.message
            .contains("line 12: duplicate jid 'mohe@example.org' (first at line 7)"),
        "{e}"
    );
    let e = err(&with(
        "\n[[agents]]\nname = \"x\"\njid = \"x@example.org\"\nnick = \"mohe\"\nsessions = [\"s\"]\n",
    ));
    assert!(e.message.contains("line 13: duplicate nick 'mohe'"), "{e}");
    let e = err(&with(
        "\n[[agents]]\nname = \"x\"\njid = \"x@example.org\"\nnick = \"MoHe\"\nsessions = [\"s\"]\n",
    ));
    assert!(
        e.message
            .contains("line 13: duplicate nick 'MoHe' (first at line 6, compared ignoring case)"),
        "{e}"
    );
}

/// ejabberd seats a nick as its resourceprep makes it (NFKC, characters
/// mapped to nothing removed): a nick written otherwise would never match
/// the agent's own reflection, so the config refuses it and names the
/// form to write.
#[test]
fn a_nick_the_room_would_seat_under_another_form_is_refused() {
    for (nick, seated) in [
        ("\u{ff4d}\u{ff4f}\u{ff48}\u{ff45}", "mohe"),
        ("zhi\u{200b}wei", "zhiwei"),
        ("\u{fb01}x", "fix"),
    ] {
        let e = err(&two_agents(&format!("nick = \"{nick}\"\n")));
        assert!(
            e.message.contains(&format!(
                "line 14: nick {nick:?} is not the nick the room would seat: ejabberd \
                 prepares it (resourceprep) to {seated:?}"
            )) && e.message.ends_with(&format!("write nick = {seated:?}")),
            "{nick:?}: {e}"
        );
    }
    let c = Config::parse(&two_agents("nick = \"知微 zw\"\n"), "t").unwrap();
    assert_eq!(c.agent("zhiwei").unwrap().nick, "知微 zw");
}

#[test]
fn bad_jids_are_refused_with_their_line() {
    let bad_room = MINIMAL.replace(
        "coregroup@conference.example.org",
        "coregroup@conference.example.org/nick",
    );
    assert!(
        err(&bad_room)
            .message
            .contains("line 3: room 'coregroup@conference.example.org/nick' must be a bare JID")
    );
    let no_local = MINIMAL.replace("mohe@example.org", "example.org");
    assert!(
        err(&no_local)
            .message
            .contains("line 7: jid of agent 'mohe' 'example.org' needs a local part")
    );
    let invalid = MINIMAL.replace("mohe@example.org", "mo he@@example.org");
    assert!(
        err(&invalid)
            .message
            .contains("line 7: jid of agent 'mohe' 'mo he@@example.org' is not a valid JID")
    );
}

#[test]
fn empty_values_are_refused() {
    assert!(
        err(&MINIMAL.replace("name = \"mohe\"", "name = \"\""))
            .message
            .contains("line 6: agent name must not be empty")
    );
    assert!(
        err(&MINIMAL.replace("[\"xmpp-mohe-v2\"]", "[]"))
            .message
            .contains("line 8: agent 'mohe' needs at least one XMPP session id")
    );
    assert!(
        err(&MINIMAL.replace("[\"xmpp-mohe-v2\"]", "[\" \"]"))
            .message
            .contains("line 8: session id must not be empty")
    );
    let e = err("[xmpp]\nroom = \"r@conference.example.org\"\n");
    assert_eq!(
        e.message,
        "config test.toml, line 1: no [[agents]]: configure at least one agent"
    );
}

#[test]
fn unknown_keys_are_refused_with_their_line() {
    let e = err(&MINIMAL.replace("sessions = ", "sesions = [\"typo\"]\nsessions = "));
    assert!(
        e.message
            .starts_with("config test.toml, line 8: unknown field `sesions`"),
        "{e}"
    );
    let e = err(&with("\n[redirect]\nttl = 5\n"));
    assert!(
        e.message
            .starts_with("config test.toml, line 11: unknown field `ttl`"),
        "{e}"
    );
}

#[test]
fn wrong_types_and_ranges_are_refused() {
    let e = err(&with("\n[redirect]\nttl_seconds = \"1h\"\n"));
    assert!(e.message.starts_with("config test.toml, line 11:"), "{e}");
    let e = err(&with("\n[redirect]\nttl_seconds = 0\n"));
    assert_eq!(
        e.message,
        "config test.toml, line 11: ttl_seconds must be at least 1"
    );
    // The policy gets the text to normalise in its 64 MiB memory: a
    // million characters at most (host/runtime/src/limits.rs).
    let e = err(&MINIMAL.replace("[xmpp]\n", "[xmpp]\nmax_body_chars = 1000001\n"));
    assert_eq!(
        e.message,
        "config test.toml, line 3: max_body_chars must be at most 1000000"
    );
    let ok = MINIMAL.replace("[xmpp]\n", "[xmpp]\nmax_body_chars = 1000000\n");
    assert_eq!(
        Config::parse(&ok, "test.toml").unwrap().xmpp.max_body_chars,
        1_000_000
    );
    let e = err(&with("\n[redirect]\nlegacy_agent = \"nobody\"\n"));
    assert_eq!(
        e.message,
        "config test.toml, line 11: legacy_agent 'nobody' is not a configured agent"
    );
    let e = err(&MINIMAL.replace("[xmpp]\n", "[xmpp]\ntransport = \"carrier-pigeon\"\n"));
    assert!(
        e.message
            .starts_with("config test.toml, line 3: unknown variant `carrier-pigeon`"),
        "{e}"
    );
}

#[test]
fn http_transport_needs_a_url_and_paired_credentials() {
    let e = err(&MINIMAL.replace("[xmpp]\n", "[xmpp]\ntransport = \"http\"\n"));
    assert!(
        e.message.contains("transport = \"http\" needs api_url"),
        "{e}"
    );
    let e = err(&MINIMAL.replace("[xmpp]\n", "[xmpp]\napi_url = \"127.0.0.1:5280/api\"\n"));
    assert!(
        e.message
            .contains("line 3: api_url '127.0.0.1:5280/api' must start with http://"),
        "{e}"
    );
    let e = err(&MINIMAL.replace("[xmpp]\n", "[xmpp]\napi_user = \"admin@example.org\"\n"));
    assert!(
        e.message
            .contains("line 3: api_user needs api_password_env"),
        "{e}"
    );
    let ok = Config::parse(
        &MINIMAL.replace(
            "[xmpp]\n",
            "[xmpp]\ntransport = \"http\"\napi_url = \"http://127.0.0.1:5280/api/\"\n",
        ),
        "t",
    )
    .unwrap();
    assert_eq!(
        ok.xmpp.api_url.as_deref(),
        Some("http://127.0.0.1:5280/api"),
        "a trailing / is dropped"
    );
}

#[test]
fn agent_names_must_fit_a_state_meta_key() {
    let e = err(&MINIMAL.replace("name = \"mohe\"", "name = \"mo he\""));
    assert!(
        e.message
            .contains("line 6: agent name 'mo he' may use only letters, digits"),
        "{e}"
    );
}

#[test]
fn a_missing_file_says_where_and_what_to_do() {
    let e = Config::load(std::path::Path::new("/nonexistent/session-switch.toml")).unwrap_err();
    assert_eq!(e.kind, FailureKind::BadInput);
    assert!(
        e.message
            .starts_with("cannot read config /nonexistent/session-switch.toml:"),
        "{e}"
    );
    assert!(e.message.contains("--config PATH"), "{e}");
}

/// `MINIMAL` plus zhiwei (`[[agents]]` at line 10, name at 11, JID at 12,
/// sessions at 13), then `zhiwei_extra` from line 14 on.
fn two_agents(zhiwei_extra: &str) -> String {
    with(&format!(
        "\n[[agents]]\nname = \"zhiwei\"\njid = \"zhiwei@example.org\"\nsessions = [\"xmpp-zhiwei\"]\n{zhiwei_extra}"
    ))
}

/// The policy's `configure` rules, checked by the config with the line
/// (gap G3 of docs/src/security.md): else these configs would parse and every call
/// then fail with `invalid settings: …`, naming no line.
#[test]
fn names_a_signature_could_be_confused_by_are_refused_with_their_line() {
    // An alias that is another agent's name, nick or JID local part.
    let e = err(&two_agents("aliases = [\"mohe\"]\n"));
    assert_eq!(
        e.message,
        "config test.toml, line 14: alias 'mohe' of agent 'zhiwei' is already a name of \
         agent 'mohe' (first at line 6): tagging could not tell their lines apart"
    );
    let e = err(&two_agents("aliases = [\"MOHE\"]\n"));
    assert!(
        e.message
            .contains("line 14: alias 'MOHE' of agent 'zhiwei' is already a name of agent 'mohe'"),
        "{e}"
    );
    let e = err(&two_agents("nick = \"lin\"\n")
        .replace("jid = \"mohe@example.org\"", "jid = \"lin@example.org\""));
    assert_eq!(
        e.message,
        "config test.toml, line 14: nick 'lin' of agent 'zhiwei' is already a name of agent \
         'mohe' (first at line 7): tagging could not tell their lines apart"
    );
    // An agent name equal to another's alias (the alias came first).
    let text = MINIMAL.replace(
        "sessions = [\"xmpp-mohe-v2\"]",
        "sessions = [\"xmpp-mohe-v2\"]\naliases = [\"Zhiwei\"]",
    ) + "\n[[agents]]\nname = \"zhiwei\"\njid = \"zw@example.org\"\nnick = \"zw\"\nsessions = [\"xmpp-zhiwei\"]\n";
    let e = err(&text);
    assert_eq!(
        e.message,
        "config test.toml, line 12: name 'zhiwei' of agent 'zhiwei' is already a name of agent \
         'mohe' (first at line 9): tagging could not tell their lines apart"
    );
    // An agent name differing only in case from another's.
    let e = err(&with(
        "\n[[agents]]\nname = \"Mohe\"\njid = \"other@example.org\"\nnick = \"o\"\nsessions = [\"s2\"]\n",
    ));
    assert_eq!(
        e.message,
        "config test.toml, line 11: duplicate agent name 'Mohe' (first at line 6, compared ignoring case)"
    );
    // The tag itself, as alias, nick or JID local part, in any case.
    let e = err(&two_agents("aliases = [\"You\"]\n"));
    assert_eq!(
        e.message,
        "config test.toml, line 14: alias 'You' of agent 'zhiwei' is the [YOU] tag itself; \
         choose another (tagging would take any line for the agent's)"
    );
    let e = err(&MINIMAL.replace("[\"xmpp-mohe-v2\"]", "[\"xmpp-mohe-v2\"]\nnick = \"YOU\""));
    assert!(
        e.message
            .contains("line 9: nick 'YOU' of agent 'mohe' is the [YOU] tag itself"),
        "{e}"
    );
    let e = err(&MINIMAL.replace("mohe@example.org", "you@example.org"));
    assert!(
        e.message
            .contains("line 7: JID local part 'you' of agent 'mohe' is the [YOU] tag itself"),
        "{e}"
    );
    // The agent's own names may repeat each other: mohe's nick is its name.
    let c = Config::parse(
        &two_agents("nick = \"Zhiwei\"\naliases = [\"zhiwei\", \"知微\"]\n"),
        "t",
    )
    .unwrap();
    assert_eq!(c.agent("zhiwei").unwrap().aliases, ["zhiwei", "知微"]);
}

#[test]
fn control_characters_and_padding_in_nicks_and_aliases_are_refused_with_their_line() {
    let cases = [
        (
            "nick = \"zh\\u0007iwei\"\n",
            "line 14: nick \"zh\\u{7}iwei\" contains a control character",
        ),
        (
            "nick = \"zh\\niwei\"\n",
            "line 14: nick \"zh\\niwei\" contains a control character",
        ),
        (
            "nick = \" zhiwei\"\n",
            "line 14: nick \" zhiwei\" has leading or trailing whitespace",
        ),
        (
            "aliases = [\"zw\\u0000\"]\n",
            "line 14: alias \"zw\\0\" contains a control character",
        ),
        (
            "aliases = [\"zw\\u0085\"]\n",
            "line 14: alias \"zw\\u{85}\" contains a control character",
        ),
        (
            "aliases = [\"zw \"]\n",
            "line 14: alias \"zw \" has leading or trailing whitespace",
        ),
        ("aliases = [\"\"]\n", "line 14: alias must not be empty"),
    ];
    for (extra, want) in cases {
        let e = err(&two_agents(extra));
        assert!(e.message.contains(want), "{extra:?}: {e}");
        assert!(e.message.starts_with("config test.toml, line 14: "), "{e}");
    }
    // Inner spaces and non-ASCII are fine in a nick or alias.
    let c = Config::parse(
        &two_agents("nick = \"zhi wei\"\naliases = [\"知微\"]\n"),
        "t",
    )
    .unwrap();
    assert_eq!(c.agent("zhiwei").unwrap().nick, "zhi wei");
}

#[test]
fn jids_and_session_ids_the_policy_would_refuse_are_refused_with_their_line() {
    let long = "s".repeat(MAX_SESSION_ID_CHARS + 1);
    let e = err(&MINIMAL.replace("xmpp-mohe-v2", &long));
    assert_eq!(
        e.message,
        format!(
            "config test.toml, line 8: session id is {} characters long, the maximum is \
             {MAX_SESSION_ID_CHARS} (Hermes refuses longer ids)",
            MAX_SESSION_ID_CHARS + 1
        )
    );
    Config::parse(
        &MINIMAL.replace("xmpp-mohe-v2", &"s".repeat(MAX_SESSION_ID_CHARS)),
        "t",
    )
    .unwrap();
    // What the policy refuses in a JID, the `jid` crate's nodeprep and IDNA
    // checks refuse already.
    for (jid, why) in [
        (
            "mo\\u0009he@example.org",
            "localpart doesn’t pass nodeprep validation",
        ),
        (
            "mo\\u00a0he@example.org",
            "localpart doesn’t pass nodeprep validation",
        ),
        ("mohe@exa mple.org", "domain doesn’t pass idna validation"),
        (
            "mohe@example.org\\u0085",
            "domain doesn’t pass idna validation",
        ),
        (
            "mohe@a@example.org",
            "second @ found before parsing the resource",
        ),
        (
            "mohe@example.org/",
            "resource empty despite the presence of a /",
        ),
    ] {
        let e = err(&MINIMAL.replace("mohe@example.org", jid));
        assert!(
            e.message
                .starts_with("config test.toml, line 7: jid of agent 'mohe' '"),
            "{e}"
        );
        assert!(
            e.message.ends_with(&format!("is not a valid JID: {why}")),
            "{e}"
        );
    }
    let e = err(&MINIMAL.replace(
        "coregroup@conference.example.org",
        "core group@conference.example.org",
    ));
    assert!(
        e.message.starts_with(
            "config test.toml, line 3: room 'core group@conference.example.org' is not a valid JID"
        ),
        "{e}"
    );
}

/// JIDs are kept as the server compares them (nodeprep and nameprep fold
/// case): ejabberd's commands find a room by its prepared name only (a
/// send to `CoreGroup@Conference…` would reach the room and then be
/// refused as "room does not exist").
#[test]
fn jids_are_kept_prepared() {
    let c = Config::parse(
        &MINIMAL
            .replace(
                "coregroup@conference.example.org",
                "CoreGroup@Conference.Example.ORG",
            )
            .replace("mohe@example.org", "Mohe@EXAMPLE.org"),
        "t",
    )
    .unwrap();
    assert_eq!(c.xmpp.room, "coregroup@conference.example.org");
    assert_eq!(c.agents[0].jid, "mohe@example.org");
}

/// A session id Hermes's API server refuses (`contract::ids`) could never
/// be asked for: refused when the config loads, not at the first send.
#[test]
fn session_ids_hermes_api_server_refuses_are_refused_with_their_line() {
    for (id, why) in [
        ("../x", "is path-unsafe (`..`, `/` or `\\`)"),
        ("a/b", "is path-unsafe (`..`, `/` or `\\`)"),
        ("C:zz", "starts like a drive path (`X:`)"),
    ] {
        let e = err(&MINIMAL.replace("xmpp-mohe-v2", id));
        assert_eq!(
            e.message,
            format!(
                "config test.toml, line 8: session id {id:?} {why}: Hermes's API server \
                 refuses it, so no gateway turn could run on it"
            )
        );
    }
}

/// Every config the parser accepts, the policy's `configure` accepts too
/// (the example, and configs at the edges of the rules above).
#[test]
fn configs_the_parser_accepts_the_policy_accepts() {
    let example = session_switch_tests::workspace_root().join("examples/session-switch.toml");
    let texts = [
        std::fs::read_to_string(example).unwrap(),
        MINIMAL.to_string(),
        two_agents("nick = \"zhi wei\"\naliases = [\"知微\", \"ZW\", \"zhiwei\"]\n"),
        MINIMAL.replace("xmpp-mohe-v2", &"s".repeat(MAX_SESSION_ID_CHARS)),
    ];
    for text in texts {
        assert!(
            session_switch_tests::hostile::check_config(&text).is_some(),
            "{text}"
        );
    }
}

/// The tests' sample config (`tests/src/sample.rs`), through the product's
/// one config → settings conversion, is the guest's sample
/// (`session_switch_policy::samples`): the native and the compiled sides of
/// the tests start from the same three agents.
#[test]
fn the_tests_sample_config_is_the_guests_sample() {
    use session_switch_tests::sample::sample_config;
    use session_switch_tests::wit_convert::settings_to_host;
    assert_eq!(
        session_switch::from_config::settings(&sample_config()),
        settings_to_host(&session_switch_policy::samples::sample_settings())
    );
}
