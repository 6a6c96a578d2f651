//! Oracles for hostile input: each `check_*` takes one input of a
//! kind the outside world controls — a `state_meta` value, a config file, a
//! message body, history rows — runs it through the real rules, and panics
//! with a sentence naming the property that broke. The proptest pass
//! (`tests/all/hostile_input.rs`, in `make test`) and the cargo-fuzz targets
//! (`fuzz/`, `make fuzz`) share them, so both check the same things.
//!
//! The properties restate docs/src/design/rules.md and docs/src/design/contracts.md independently of the code under
//! test (the redirect check recomputes which record should win; the tagging
//! check recomputes which rows are the agent's own), so a rule that drifts
//! from the design shows up, not only a crash.

use crate::fake_host::{FakeHost, FakeState, prefix};
use crate::sample::ROOM;
use crate::wit_convert::settings_to_guest;
use session_switch::FailureKind as HostKind;
use session_switch::HistoryRow;
use session_switch::config::Config;
use session_switch::runtime::{Policy as HostPolicy, PolicyInstance, PolicyOptions};
use session_switch_contract::ids::api_session_id_problem;
use session_switch_policy::body::{clean, normalise, xml_allows};
use session_switch_policy::redirect::{LEGACY_KEY, parse_record, record_key};
use session_switch_policy::rows::Row;
use session_switch_policy::samples::{SAMPLE_CLI, sample_settings};
use session_switch_policy::settings::{TAG, ValidSettings, check_session_id};
use session_switch_policy::tagging::{self, signed_by, untag};
use session_switch_policy::{EditAction, FailureKind, Reason, Role, RowSummaries, Rules};

// ---------------------------------------------------------------- records

/// One `state_meta` situation for the redirect rule, on the samples' agents
/// (mohe is the legacy agent, with XMPP sessions `xmpp-mohe-v2` and
/// `xmpp-mohe`; zhiwei and xiaoguo have one each).
#[derive(Clone, Debug)]
pub struct RecordCase {
    /// The value of mohe's record, `session_switch:active:mohe`.
    pub mohe: Option<String>,
    /// The value of the legacy tool's key `active_xmpp_sender_session` (read for
    /// mohe only).
    pub legacy: Option<String>,
    /// The value of zhiwei's record, `session_switch:active:zhiwei`.
    pub zhiwei: Option<String>,
    /// The clock, Unix seconds.
    pub now: f64,
    /// Whether the sessions the records name exist in `state.db`.
    pub targets_exist: bool,
}

/// A record value as the bridge writes it, from its parts: `timestamp` is
/// JSON text (a number, or anything else to probe the shape rules),
/// `agent` is left out when `None`.
pub fn record_value(session_id: &str, timestamp: &str, agent: Option<&str>) -> String {
    let mut value = format!(
        "{{\"session_id\": {}, \"timestamp\": {timestamp}, \"source\": \"cli\"",
        serde_json::Value::from(session_id)
    );
    if let Some(agent) = agent {
        value.push_str(&format!(", \"agent\": {}", serde_json::Value::from(agent)));
    }
    value.push('}');
    value
}

/// Where `agent`'s bot must go at `now` by docs/src/design/rules.md and docs/src/design/contracts.md, restated: of
/// its records (its own key, and the legacy tool's key for the legacy agent) the
/// valid ones are well-formed JSON with a session id, a finite timestamp,
/// the `agent` field (own key only) absent or the agent's name,
/// `-skew <= age < ttl`, and a target that is no agent's XMPP session; the
/// newest wins (the own key on a tie), and redirects if its session
/// exists. `None`: no redirect.
fn expected_target(
    settings: &ValidSettings,
    host: &FakeState,
    agent: &str,
    now: f64,
) -> Option<String> {
    let mut keys = vec![(record_key(agent), true)];
    if settings.is_legacy(agent) {
        keys.push((LEGACY_KEY.to_string(), false));
    }
    let valid = keys.into_iter().filter_map(|(key, own_key)| {
        let value = host.meta.get(&key)?;
        let json: serde_json::Value = serde_json::from_str(value).ok()?;
        let object = json.as_object()?;
        let session = object.get("session_id")?.as_str()?.to_string();
        check_session_id(&session).ok()?;
        // An id Hermes's API server refuses is never a target (stop 21's
        // rule; the oracle lagged it until the fuzz target found B2).
        if api_session_id_problem(&session).is_some() {
            return None;
        }
        let timestamp = object
            .get("timestamp")?
            .as_f64()
            .filter(|t| t.is_finite())?;
        if own_key {
            match object.get("agent") {
                None => {}
                Some(serde_json::Value::String(a)) if a == agent => {}
                Some(_) => return None,
            }
        }
        let age = now - timestamp;
        let fresh = age >= -settings.future_skew_seconds() && age < settings.ttl_seconds();
        (fresh && settings.session_owner(&session).is_none())
            .then_some((session, timestamp, own_key))
    });
    let (session, _, _) = valid.max_by(|a, b| a.1.total_cmp(&b.1).then(a.2.cmp(&b.2)))?;
    host.sessions.contains(&session).then_some(session)
}

/// Check the redirect rule on `case` (docs/src/design/rules.md#redirect, docs/src/design/contracts.md#records):
/// - `parse_record` never panics, and what it accepts is a valid session id
///   with a finite timestamp;
/// - mohe's XMPP sessions are redirected exactly when a valid record exists,
///   to the newest valid record's session (the per-agent key on a tie),
///   never to an XMPP session, a missing session, an expired or future one;
/// - isolation: zhiwei's decision is the same with and without mohe's
///   records; xiaoguo (no record) is never redirected; sessions that are
///   not the asking agent's own pass through unchanged;
/// - `active` agrees with `resolve`; nothing is written.
///
/// # Panics
/// On any broken property, naming it.
pub fn check_record(case: &RecordCase) {
    for (value, agent) in [
        (&case.mohe, Some("mohe")),
        (&case.legacy, None),
        (&case.zhiwei, Some("zhiwei")),
    ] {
        let Some(value) = value else { continue };
        for owner in [agent, None] {
            let (readable, parsed) = parse_record(value, owner);
            if let Some(t) = readable.timestamp {
                assert!(t.is_finite(), "readable timestamp {t} of {value:?}");
            }
            if let Ok((session, timestamp)) = parsed {
                assert!(timestamp.is_finite(), "{value:?} parsed to {timestamp}");
                assert_eq!(check_session_id(&session), Ok(()), "{value:?}");
                assert_eq!(readable.session_id.as_deref(), Some(session.as_str()));
                assert_eq!(readable.timestamp, Some(timestamp));
            }
        }
    }

    let settings = ValidSettings::new(sample_settings()).expect("sample settings");
    let mut host = FakeState::at(case.now, ROOM);
    for entry in settings.agents() {
        for session in &entry.agent.sessions {
            host.add_session(session);
        }
    }
    host.add_session(SAMPLE_CLI);
    let mut stored = Vec::new();
    for (key, value) in [
        (record_key("mohe"), &case.mohe),
        (LEGACY_KEY.to_string(), &case.legacy),
        (record_key("zhiwei"), &case.zhiwei),
    ] {
        if let Some(value) = value {
            if case.targets_exist
                && let Some(session) = parse_record(value, None).0.session_id
            {
                host.add_session(&session);
            }
            host.meta.insert(key.clone(), value.clone());
            stored.push(key);
        }
    }
    let meta_before = host.meta.clone();
    let mut policy = Rules::new(FakeHost::new(host.clone()));
    policy.configure(sample_settings()).expect("configure");

    let mohe_has_record = case.mohe.is_some() || case.legacy.is_some();
    for asked in ["xmpp-mohe-v2", "xmpp-mohe"] {
        let answer = policy.resolve("mohe", asked);
        if !case.now.is_finite() {
            match answer {
                Err(f) => {
                    assert!(
                        mohe_has_record,
                        "clock {} failed without a record",
                        case.now
                    );
                    assert_eq!(f.kind, FailureKind::Policy, "{}", f.message);
                }
                Ok(d) => {
                    assert!(
                        !mohe_has_record,
                        "a record was judged with clock {}",
                        case.now
                    );
                    assert_eq!(d.reason, Reason::NoRecord);
                }
            }
            continue;
        }
        let d = answer.unwrap_or_else(|f| panic!("resolve failed on {case:?}: {}", f.message));
        assert_eq!(d.redirected, d.reason == Reason::Redirected, "{d:?}");
        assert_ne!(d.reason, Reason::PolicyError);
        match expected_target(&settings, &host, "mohe", case.now) {
            None => {
                assert!(
                    !d.redirected,
                    "redirected, against docs/src/design/rules.md: {d:?} for {case:?}"
                );
                assert_eq!(d.session_id, asked, "{d:?}");
                if !mohe_has_record {
                    assert_eq!(d.reason, Reason::NoRecord, "{d:?}");
                }
            }
            Some(target) => {
                assert!(
                    d.redirected,
                    "a valid record did not redirect: {d:?} for {case:?}"
                );
                assert_eq!(d.session_id, target, "not the newest record's: {case:?}");
                assert!(settings.session_owner(&d.session_id).is_none());
                assert!(host.sessions.contains(&d.session_id));
            }
        }
    }

    // A decision holds until its `valid_until` (the memo's premise,
    // docs/src/design/where-the-time-goes.md): a policy asked later inside the window, with the same records,
    // answers the same, detail included.
    if case.now.is_finite() {
        let d = policy
            .resolve("mohe", "xmpp-mohe-v2")
            .expect("finite clock");
        let later = match d.valid_until {
            Some(until) if until > case.now => Some(case.now + (until - case.now) / 2.0),
            Some(_) => None,
            None => Some(case.now + 1e6),
        };
        if let Some(later) = later {
            let mut host = host.clone();
            host.now = later;
            let mut again = Rules::new(FakeHost::new(host));
            again.configure(sample_settings()).expect("configure");
            assert_eq!(
                again.resolve("mohe", "xmpp-mohe-v2").expect("later"),
                d,
                "the decision changed at {later} before its valid_until: {case:?}"
            );
        }
    }

    // Isolation between agents.
    let z = policy.resolve("zhiwei", "xmpp-zhiwei");
    let mut without_mohe = host.clone();
    without_mohe.meta.remove(&record_key("mohe"));
    without_mohe.meta.remove(LEGACY_KEY);
    let mut alone = Rules::new(FakeHost::new(without_mohe));
    alone.configure(sample_settings()).expect("configure");
    assert_eq!(
        z,
        alone.resolve("zhiwei", "xmpp-zhiwei"),
        "mohe's records changed zhiwei's decision: {case:?}"
    );
    if case.now.is_finite() {
        let z = z.expect("finite clock");
        let target = expected_target(&settings, &host, "zhiwei", case.now);
        assert_eq!(z.redirected, target.is_some(), "{z:?} for {case:?}");
        if let Some(target) = target {
            assert_eq!(z.session_id, target);
        }
        if case.zhiwei.is_none() {
            assert_eq!(z.reason, Reason::NoRecord);
        }
    }
    let x = policy
        .resolve("xiaoguo", "xmpp-xiaoguo")
        .expect("no record");
    assert_eq!(
        (x.session_id.as_str(), x.reason),
        ("xmpp-xiaoguo", Reason::NoRecord),
        "{case:?}"
    );
    for (agent, asked) in [
        ("mohe", "xmpp-zhiwei"),
        ("mohe", SAMPLE_CLI),
        ("zhiwei", "xmpp-mohe-v2"),
        ("xiaoguo", "xmpp-mohe"),
    ] {
        let d = policy.resolve(agent, asked).expect("pass-through");
        assert_eq!(
            (d.session_id.as_str(), d.redirected, d.reason),
            (asked, false, Reason::NotAgentSession),
            "{agent} asked about {asked}: {case:?}"
        );
    }

    // `active` says `valid` exactly when `resolve` would redirect.
    if case.now.is_finite() {
        let statuses = policy.active(None).expect("active");
        assert_eq!(
            statuses.len(),
            stored.len(),
            "one status per stored record: {statuses:?}"
        );
        for s in &statuses {
            assert_eq!(s.valid, s.reason == Reason::Redirected, "{s:?}");
        }
        for (agent, asked) in [
            ("mohe", "xmpp-mohe-v2"),
            ("zhiwei", "xmpp-zhiwei"),
            ("xiaoguo", "xmpp-xiaoguo"),
        ] {
            let valid: Vec<_> = statuses
                .iter()
                .filter(|s| s.agent == agent && s.valid)
                .collect();
            let d = policy.resolve(agent, asked).expect("resolve");
            // `active` calls no record valid while `resolve` stays on a
            // newer record's missing session.
            assert_eq!(
                valid.len(),
                usize::from(d.redirected),
                "active disagrees with resolve for {agent} ({d:?}): {statuses:?}"
            );
            if let Some(s) = valid.first() {
                assert_eq!(s.session_id.as_deref(), Some(d.session_id.as_str()));
            }
        }
    }
    assert_eq!(
        policy.host().snapshot().meta,
        meta_before,
        "resolve or active wrote state_meta"
    );
    assert!(policy.host().snapshot().sent.is_empty());
}

// ------------------------------------------------------------------- body

/// Check body normalisation on `text` with a maximum of `max_chars`
/// (docs/src/design/send.md#body-normalisation):
/// - `clean` is idempotent and leaves no character XML 1.0 forbids, no
///   ESC, no CR, no leading whitespace and no leading `[YOU]` marker;
/// - `normalise` accepts exactly the non-blank results of at most
///   `max_chars` characters and returns the clean text; it refuses the rest
///   as `bad-input` with a one-line message;
/// - the host's `untag`/`tag` (which apply the policy's edits) agree with
///   the policy's on `text`.
///
/// # Panics
/// On any broken property, naming it.
pub fn check_body(text: &str, max_chars: u32) {
    let c = clean(text);
    assert_eq!(clean(&c), c, "clean is not idempotent on {text:?}");
    if let Some(bad) = c
        .chars()
        .find(|&ch| !xml_allows(ch) || ch == '\u{1b}' || ch == '\r')
    {
        panic!("clean({text:?}) kept {bad:?}");
    }
    assert_eq!(
        c.trim_start_matches(oracle_blank),
        c,
        "clean({text:?}) starts with a blank"
    );
    assert!(
        !starts_with_tag(&c),
        "clean({text:?}) = {c:?} starts with [YOU]"
    );
    match normalise(text, max_chars) {
        Ok(body) => {
            assert_eq!(body, c, "normalise and clean differ on {text:?}");
            assert!(
                !body.trim().is_empty(),
                "{text:?} normalised to a blank body"
            );
            assert!(
                body.chars().count() <= max_chars as usize,
                "{text:?} too long"
            );
            // What the room gets and what history gets are the same text.
            let row = format!("{TAG}{body}");
            assert_eq!(row.strip_prefix(TAG), Some(body.as_str()));
            assert_eq!(
                strip_tags(&row),
                body,
                "the history row does not untag to the body"
            );
        }
        Err(f) => {
            assert_eq!(f.kind, FailureKind::BadInput, "{}", f.message);
            assert!(!f.message.contains('\n'), "{:?}", f.message);
            assert!(
                c.trim().is_empty() || c.chars().count() > max_chars as usize,
                "{text:?} refused: {}",
                f.message
            );
        }
    }
    check_untag_agrees(text);
}

/// The host applies the policy's edits with its own `untag`/`tag`
/// (`session_switch::runtime`); they must be the policy's functions, and
/// both must be the contract's rule as restated here ([`strip_tags`]).
///
/// # Panics
/// When they differ on `text`.
pub fn check_untag_agrees(text: &str) {
    assert_eq!(
        untag(text),
        strip_tags(text),
        "the policy's untag is not the contract's rule on {text:?}"
    );
    assert_eq!(
        session_switch::runtime::untag(text),
        untag(text),
        "host and policy untag differ on {text:?}"
    );
    assert_eq!(
        session_switch::runtime::tag(text),
        tagging::apply(EditAction::Tag, text),
        "host and policy tag differ on {text:?}"
    );
}

// ------------------------------------------------- the untag rule, restated

/// Unicode 16's `Default_Ignorable_Code_Point` (DerivedCoreProperties.txt),
/// as inclusive code-point ranges, copied from the table, not from the code
/// under test.
const DEFAULT_IGNORABLE: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180D),
    (0x180E, 0x180E),
    (0x180F, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x2064),
    (0x2065, 0x2065),
    (0x2066, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
];

/// What the untag rule skips around a marker (WIT `edit-action.untag`):
/// Unicode `White_Space` or `Default_Ignorable_Code_Point`.
pub fn oracle_blank(c: char) -> bool {
    let cp = u32::from(c);
    c.is_whitespace()
        || DEFAULT_IGNORABLE
            .iter()
            .any(|&(lo, hi)| (lo..=hi).contains(&cp))
}

/// `c` as a model reads it for the marker: a full-width ASCII form
/// (U+FF01–U+FF5E) as its ASCII character, then ASCII upper case.
fn oracle_fold(c: char) -> char {
    let cp = u32::from(c);
    let c = if (0xFF01..=0xFF5E).contains(&cp) {
        char::from_u32(cp - 0xFEE0).expect("ASCII")
    } else {
        c
    };
    c.to_ascii_uppercase()
}

/// The characters of `text` after its leading blanks.
fn after_blanks(text: &str) -> impl Iterator<Item = char> + '_ {
    text.chars().skip_while(|&c| oracle_blank(c))
}

/// Whether a model would read `text` as starting with the `[YOU]` tag: after
/// leading blanks, five characters that fold to `[YOU]`.
pub fn starts_with_tag(text: &str) -> bool {
    let head: String = after_blanks(text).take(5).map(oracle_fold).collect();
    head == "[YOU]"
}

/// `text` without its leading tags and blanks, restated from the contract
/// (WIT `edit-action.untag`) with owned strings, to compare with the
/// borrowing implementations.
pub fn strip_tags(text: &str) -> String {
    let mut rest: String = after_blanks(text).collect();
    while starts_with_tag(&rest) {
        let after_tag: String = rest.chars().skip(5).collect();
        rest = after_blanks(&after_tag).collect();
    }
    rest
}

// ---------------------------------------------------------------- tagging

/// One history row for the tagging check.
#[derive(Clone, Debug)]
pub struct RowCase {
    pub role: Role,
    /// The whole stored content.
    pub content: String,
    /// The index (in the samples' agents) of the agent the bridge wrote the
    /// row for, if any.
    pub bridge_agent: Option<usize>,
}

/// Check `[YOU]` tagging of `rows` for every sample agent, with summaries
/// of `prefix_chars` characters (judged on at most the policy's own prefix
/// length, 57 for the samples), the edits applied by the host's functions
/// (docs/src/design/rules.md#tagging, docs/src/design/contracts.md "Provenance"):
/// - edits index the rows in order, each at most once; only `user` rows
///   are edited;
/// - an own row (the bridge wrote it for the agent, or it is signed by one
///   of the agent's names plus a delimiter) is shown as exactly one
///   `[YOU] ` + its untagged text; a row signed by one agent is no other
///   agent's;
/// - any other user row never reaches the model starting with a `[YOU]`
///   tag, in any of the forms the contract's untag rule covers (restated
///   here: [`starts_with_tag`]), wherever the tag lies behind the prefix
///   the policy saw (G1 and G4 of docs/src/security.md);
/// - tagging the result again changes nothing.
///
/// # Panics
/// On any broken property, naming it.
pub fn check_tagging(rows: &[RowCase], prefix_chars: u32) {
    for row in rows {
        check_untag_agrees(&row.content);
    }
    let settings = ValidSettings::new(sample_settings()).expect("sample settings");
    let judged = prefix_chars.min(settings.prefix_chars());
    for (a, entry) in settings.agents().iter().enumerate() {
        let name = entry.agent.name.as_str();
        let prefixes: Vec<&str> = rows
            .iter()
            .map(|r| prefix(&r.content, prefix_chars))
            .collect();
        let seen: Vec<Row<'_>> = rows
            .iter()
            .zip(&prefixes)
            .map(|(r, p)| Row {
                role: r.role,
                prefix: p,
                bridge_wrote: r.bridge_agent == Some(a),
            })
            .collect();
        let edits =
            tagging::tag(&settings, name, &RowSummaries::from_rows(&seen)).expect("known agent");
        let mut last = None;
        for e in &edits {
            assert!((e.index as usize) < rows.len(), "edit {e:?} out of range");
            assert!(last < Some(e.index), "edits not in row order: {edits:?}");
            last = Some(e.index);
        }
        let mut view: Vec<String> = rows.iter().map(|r| r.content.clone()).collect();
        for e in &edits {
            let content = &rows[e.index as usize].content;
            view[e.index as usize] = match e.action {
                EditAction::Tag => session_switch::runtime::tag(content),
                EditAction::Untag => session_switch::runtime::untag(content).to_string(),
            };
        }
        for (i, (row, shown)) in rows.iter().zip(&view).enumerate() {
            let s = &seen[i];
            let edited = edits.iter().any(|e| e.index as usize == i);
            if row.role != Role::User {
                assert!(!edited, "{name}: a {:?} row was edited", row.role);
                continue;
            }
            // The policy judges the prefix it asks `context` for, however
            // long the one sent (SECURITY G8).
            let base = strip_tags(prefix(&row.content, judged));
            let own = s.bridge_wrote || signed_by(&base, &entry.names);
            if own {
                assert_eq!(
                    shown,
                    &format!("{TAG}{}", strip_tags(&row.content)),
                    "{name}: own row {:?} is not shown with exactly one tag",
                    row.content
                );
            } else {
                assert!(
                    !starts_with_tag(shown),
                    "{name}: {:?}, not {name}'s, reaches the model as {shown:?}",
                    row.content
                );
            }
            if !s.bridge_wrote && signed_by(&base, &entry.names) {
                for other in settings.agents().iter().filter(|o| o.agent.name != name) {
                    assert!(
                        !signed_by(&base, &other.names),
                        "{:?} is signed by both {name} and {}",
                        row.content,
                        other.agent.name
                    );
                }
            }
        }
        // A fixed point: tagging the view again changes nothing, for rows
        // the policy saw whole. (A longer row whose stacked markers push
        // its signature out of the prefix is shown untagged, the safe side,
        // and its untagged view then shows the signature: known gap G2.)
        let again: Vec<Row<'_>> = seen
            .iter()
            .zip(&view)
            .map(|(s, v)| Row {
                prefix: prefix(v, prefix_chars),
                ..*s
            })
            .collect();
        for e in
            tagging::tag(&settings, name, &RowSummaries::from_rows(&again)).expect("known agent")
        {
            if rows[e.index as usize].content.chars().count() > judged as usize {
                continue;
            }
            let v = &view[e.index as usize];
            let twice = match e.action {
                EditAction::Tag => session_switch::runtime::tag(v),
                EditAction::Untag => session_switch::runtime::untag(v).to_string(),
            };
            assert_eq!(&twice, v, "{name}: tagging {v:?} again changed it");
        }
    }
}

// ------------------------------------------------ history rows, component

/// A session of the embedded (shipped) policy component, configured with
/// the samples' settings, for [`check_history_rows`]. Uncached: nothing is
/// written outside the process. No memo: every case reaches the policy.
pub fn component_tagger() -> PolicyInstance {
    let options = PolicyOptions {
        memo: false,
        ..PolicyOptions::default()
    };
    let policy = HostPolicy::embedded(options).expect("the embedded component loads");
    // `tag` uses no host import: the fake refuses them all, so a policy
    // that calls one shows up.
    let mut session = policy.instance(FakeHost::refusing("tag"), host_settings());
    session
        .configure()
        .expect("the samples' settings are valid");
    session
}

/// The samples' settings as the host's bindings type (the tests' sample
/// config, which equals the guest's samples: `tests/all/config.rs`).
pub fn host_settings() -> session_switch::runtime::Settings {
    crate::sample::sample_settings()
}

/// Check history rows as a gateway loads them through the real component
/// (`PolicyInstance::tag`: summaries of the host's `tag_prefix_chars` cross into
/// the component, edits come back, the host applies them), for `agent`:
/// - the call succeeds (no trap, no invalid edit) and leaves the store live;
/// - ids, roles and tool fields come back unchanged, in order;
/// - the contents equal the native rules' answer on the same summaries
///   applied with the policy's own `apply` (component = native rules).
///
/// # Panics
/// On any broken property, naming it.
pub fn check_history_rows(session: &mut PolicyInstance, agent: &str, rows: Vec<HistoryRow>) {
    let prefix_chars = PolicyOptions::default().tag_prefix_chars;
    let tagged = session
        .tag(agent, rows.clone())
        .unwrap_or_else(|f| panic!("tag failed ({:?}): {}", f.kind, f.message));
    assert!(session.is_live(), "the store was thrown away");
    assert_eq!(tagged.len(), rows.len());
    let settings = ValidSettings::new(sample_settings()).expect("sample settings");
    let summaries = crate::fake_host::summaries(&rows, prefix_chars);
    let mut expected: Vec<String> = rows.iter().map(|r| r.content.clone()).collect();
    for e in tagging::tag(&settings, agent, &summaries).expect("known agent") {
        let i = e.index as usize;
        expected[i] = tagging::apply(e.action, &rows[i].content);
    }
    for ((before, after), want) in rows.iter().zip(&tagged).zip(&expected) {
        assert_eq!(
            (
                &after.id,
                &after.role,
                &after.tool_calls,
                &after.tool_call_id
            ),
            (
                &before.id,
                &before.role,
                &before.tool_calls,
                &before.tool_call_id
            )
        );
        assert_eq!(after.tool_name, before.tool_name);
        assert_eq!(after.bridge_wrote, before.bridge_wrote);
        assert_eq!(
            &after.content, want,
            "component and native rules differ on {:?} (role {:?})",
            before.content, before.role
        );
    }
}

// ----------------------------------------------------------------- config

/// Check the config parser on `text` (docs/src/design/contracts.md#config):
/// - errors are `bad-input` and name the file (`config fuzz.toml…`);
/// - an accepted config has agents, unique names, JIDs, nicks and session
///   ids, bare JIDs, a TTL of at least 1 s and a configured legacy agent;
/// - the policy's `configure` accepts the settings of every accepted config
///   (gap G3 of docs/src/security.md: the config refuses, with its line, whatever
///   the policy would refuse).
///
/// Returns the accepted config, if any.
///
/// # Panics
/// On any broken property, naming it.
pub fn check_config(text: &str) -> Option<Config> {
    let config = match Config::parse(text, "fuzz.toml") {
        Ok(config) => config,
        Err(f) => {
            assert_eq!(f.kind, HostKind::BadInput, "{}", f.message);
            assert!(
                f.message.starts_with("config fuzz.toml"),
                "the error does not name the file: {}",
                f.message
            );
            return None;
        }
    };
    assert!(!config.agents.is_empty(), "accepted without agents");
    let mut seen = std::collections::HashSet::new();
    for a in &config.agents {
        for (what, value) in [
            ("name", a.name.clone()),
            ("jid", a.jid.to_lowercase()),
            ("nick", a.nick.to_lowercase()),
        ] {
            assert!(
                seen.insert((what, value.clone())),
                "duplicate {what} {value:?}"
            );
        }
        assert!(!a.sessions.is_empty(), "agent {} without sessions", a.name);
        for s in &a.sessions {
            assert!(
                seen.insert(("session", s.clone())),
                "duplicate session {s:?}"
            );
        }
        for jid in [&a.jid, &config.xmpp.room] {
            let (local, domain) = jid.split_once('@').expect("bare JID");
            assert!(
                !local.is_empty() && !domain.is_empty() && !jid.contains('/'),
                "{jid:?}"
            );
        }
    }
    assert!(config.redirect.ttl_seconds >= 1);
    if let Some(legacy) = &config.redirect.legacy_agent {
        assert!(
            config.agent(legacy).is_some(),
            "legacy agent {legacy:?} not configured"
        );
    }
    let settings = settings_to_guest(&session_switch::from_config::settings(&config));
    if let Err(e) = ValidSettings::new(settings) {
        panic!(
            "the config accepts settings the policy refuses ({:?}): {}",
            e.kind, e.message
        );
    }
    Some(config)
}
