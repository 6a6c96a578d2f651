//! Calling real policy components through the runtime: the normal policy
//! over the histories of a real Hermes database, and the variants that
//! panic, loop forever, allocate without bound or answer bad edits. Every
//! failure is a typed `policy` failure carrying the guest's own words, the
//! safe fallbacks answer, nothing is sent, the test process survives, and
//! the next call works on a fresh store.

use session_switch::FailureKind;
use session_switch::HistoryRow;
use session_switch::runtime::*;
use session_switch_contract::keys::{LEGACY_KEY, record_key};
use session_switch_tests::fake_host::{FakeHost, FakeRow, Import};
use session_switch_tests::sample::{ROOM, record, sample_settings, unix_now};
use session_switch_tests::{component_path, fixture_copy, variant_path};
use std::time::{Duration, Instant};

const CLI: &str = "20260619_190821_7c0afe";
const TOOLS: &str = "20260619_193000_a1b2c3";

fn options() -> PolicyOptions {
    PolicyOptions {
        ..PolicyOptions::default()
    }
}

/// The policy file `path` and a backend over a copy of the newest real
/// Hermes fixture; `None` (skip) when the fixtures are missing.
fn setup(path: std::path::PathBuf) -> Option<(Policy, FakeHost)> {
    let backend = session_switch_tests::fake_host::fixture("hermes-latest.db")?;
    let policy = Policy::load(path, options()).expect("policy loads");
    Some((policy, backend))
}

fn contents(rows: &[HistoryRow]) -> Vec<&str> {
    rows.iter().map(|r| r.content.as_str()).collect()
}

#[test]
fn sessions_are_send() {
    fn is_send<T: Send>() {}
    is_send::<PolicyInstance>();
    fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<Policy>();
}

#[test]
fn context_tags_the_agents_own_rows_of_a_real_history() {
    let Some((policy, backend)) = setup(component_path()) else {
        return;
    };
    let stored = backend.state().rows("xmpp-mohe-v2", "mohe");
    let mut session = policy.instance(backend.clone(), sample_settings());

    let answer = session.context("mohe", "xmpp-mohe-v2", None).unwrap();
    assert!(!answer.decision.redirected);
    assert_eq!(answer.decision.session_id, "xmpp-mohe-v2");
    // The legacy tool's key in the fixture is older than the TTL.
    assert_eq!(answer.decision.reason, Reason::Expired);
    assert_eq!(answer.messages.len(), 8);
    assert_eq!(
        answer.messages[0].content,
        "[YOU] mohe: 大家好，今天的会议改到下午三点。"
    );
    // Nothing else changes: other agents' lines, the mention, `mohe2`, and
    // assistant rows stay as stored; ids and roles are kept.
    assert_eq!(contents(&answer.messages[1..]), contents(&stored[1..]));
    for (got, want) in answer.messages.iter().zip(&stored) {
        assert_eq!((got.id, &got.role), (want.id, &want.role));
    }

    // The last `limit` rows only: the same edits, on the rows read.
    let last = session.context("mohe", "xmpp-mohe-v2", Some(3)).unwrap();
    assert_eq!(contents(&last.messages), contents(&stored[5..]));

    // A CLI session passes through; every field Hermes's loader returns
    // (tool_calls, tool_call_id, tool_name) comes back as stored.
    let tools = session.context("mohe", TOOLS, None).unwrap();
    assert_eq!(tools.decision.reason, Reason::NotAgentSession);
    assert_eq!(tools.messages, backend.state().rows(TOOLS, "mohe"));
    assert!(
        tools.messages[1]
            .tool_calls
            .as_deref()
            .unwrap()
            .contains("call_0001")
    );
    assert_eq!(tools.messages[2].tool_call_id.as_deref(), Some("call_0001"));
    assert_eq!(tools.messages[2].tool_name.as_deref(), Some("terminal"));

    // `tag` over rows the caller holds gives the same edits.
    let tagged = session.tag("mohe", stored.clone()).unwrap();
    assert_eq!(tagged, answer.messages);
    // ... and is idempotent.
    assert_eq!(session.tag("mohe", tagged.clone()).unwrap(), tagged);
}

#[test]
fn send_records_then_resolve_redirects_and_clear_removes_the_record() {
    let Some((policy, backend)) = setup(component_path()) else {
        return;
    };
    let mut session = policy.instance(backend.clone(), sample_settings());

    let receipt = session.send("mohe", CLI, "  [YOU] hello room\r\n").unwrap();
    assert_eq!(receipt.body, "hello room\n");
    assert_eq!(receipt.record_key, "session_switch:active:mohe");
    assert_eq!(receipt.room, ROOM);
    {
        let state = backend.state();
        assert_eq!(state.sent.len(), 1);
        let plan = &state.sent[0];
        assert_eq!(plan.room_body, "hello room\n");
        assert_eq!(plan.history_content, "[YOU] hello room\n");
        assert_eq!(plan.history_session_id, "xmpp-mohe-v2");
        assert_eq!(plan.from_jid, "mohe@example.org");
        assert_eq!(plan.timestamp, state.now);
        let record: serde_json::Value = serde_json::from_str(&plan.record_value).unwrap();
        assert_eq!(record["session_id"], CLI);
        assert_eq!(record["agent"], "mohe");
        assert_eq!(record["source"], "cli");
        assert_eq!(
            receipt.message_id,
            state.histories["xmpp-mohe-v2"].last().unwrap().id
        );
    }

    let decision = session.resolve("mohe", "xmpp-mohe-v2").unwrap();
    assert_eq!(decision.reason, Reason::Redirected);
    assert!(decision.redirected);
    assert_eq!(decision.session_id, CLI);
    // Another agent's bot is not moved by mohe's send.
    let other = session.resolve("zhiwei", "xmpp-zhiwei").unwrap();
    assert!(!other.redirected);

    let active = session.active(Some("mohe")).unwrap();
    assert!(
        active
            .iter()
            .any(|r| r.valid && r.session_id.as_deref() == Some(CLI))
    );

    let mut cleared = session.clear(Some("mohe")).unwrap();
    cleared.sort();
    assert_eq!(
        cleared,
        ["active_xmpp_sender_session", "session_switch:active:mohe"]
    );
    assert!(
        !backend
            .state()
            .meta
            .contains_key("session_switch:active:mohe")
    );
    assert_eq!(
        session.resolve("mohe", "xmpp-mohe-v2").unwrap().reason,
        Reason::NoRecord
    );
}

#[test]
fn failures_of_the_backend_and_refusals_of_the_policy_keep_their_kind() {
    let Some((policy, backend)) = setup(component_path()) else {
        return;
    };
    let mut session = policy.instance(backend.clone(), sample_settings());

    backend.state().fail.insert(
        Import::Send,
        session_switch::Failure::new(
            FailureKind::NotAccepted,
            "the room does not accept mohe@example.org as a sender",
        ),
    );
    let err = session.send("mohe", CLI, "hello").unwrap_err();
    assert_eq!(err.kind, FailureKind::NotAccepted);
    assert_eq!(err.exit_status(), 2);
    assert!(err.message.contains("does not accept"), "{}", err.message);
    assert!(backend.state().sent.is_empty());

    let err = session.send("mohe", CLI, "   ").unwrap_err();
    assert_eq!(err.kind, FailureKind::BadInput);
    let err = session.resolve("nobody", "xmpp-mohe-v2").unwrap_err();
    assert_eq!(err.kind, FailureKind::UnknownAgent);
    // A refusal is not a trap: the store is kept.
    assert!(session.is_live());
    assert!(
        session
            .is_own_message("mohe", &format!("{ROOM}/mohe"))
            .unwrap()
    );
}

#[test]
fn settings_the_policy_refuses_fail_every_call_with_its_reason() {
    let Some((policy, backend)) = setup(component_path()) else {
        return;
    };
    let mut bad = sample_settings();
    bad.agents.clear();
    let mut session = policy.instance(backend, bad);
    let err = session.configure().unwrap_err();
    assert_eq!(err.kind, FailureKind::BadInput, "{}", err.message);
    let again = session.resolve("mohe", "xmpp-mohe-v2").unwrap_err();
    assert_eq!(again, err);
    assert!(!session.is_live());
    // The fallback still answers.
    let decision = session.resolve_or_fallback("mohe", "xmpp-mohe-v2");
    assert_eq!(decision.reason, Reason::PolicyError);

    session.set_settings(sample_settings());
    assert!(session.resolve("mohe", "xmpp-mohe-v2").is_ok());
}

#[test]
fn a_panic_is_a_policy_failure_with_the_guests_message_and_the_next_call_works() {
    let Some((policy, backend)) = setup(variant_path("panic")) else {
        return;
    };
    let stored = backend.state().rows("xmpp-mohe-v2", "mohe");
    let mut session = policy.instance(backend.clone(), sample_settings());
    assert!(session.version().is_ok());
    assert!(session.is_live());

    let err = session.resolve("mohe", "xmpp-mohe-v2").unwrap_err();
    assert_eq!(err.kind, FailureKind::Policy);
    assert_eq!(err.exit_status(), 1);
    assert!(
        err.message.contains("failed in `resolve`"),
        "{}",
        err.message
    );
    assert!(err.message.contains("wasm trap"), "{}", err.message);
    assert!(
        err.message.contains("it said: ")
            && err.message.contains("panicked at")
            && err.message.contains("resolve panicked on purpose"),
        "the guest's panic message arrives through the log import: {}",
        err.message
    );
    assert!(!err.message.contains('\n'), "one line: {}", err.message);
    assert!(!session.is_live(), "a trapped store is never used again");

    // The next call works, on a fresh store.
    assert!(session.is_own_message("mohe", "mohe").unwrap());
    assert!(session.is_live());

    // The safe defaults: no redirect, history as stored, nothing sent.
    let decision = session.resolve_or_fallback("mohe", "xmpp-mohe-v2");
    assert_eq!(decision.reason, Reason::PolicyError);
    assert!(!decision.redirected);
    assert_eq!(decision.session_id, "xmpp-mohe-v2");
    assert!(
        decision.detail.contains("panicked at"),
        "{}",
        decision.detail
    );
    // Only the `resolve` export of this variant panics; `context` works
    // (the fallback of `context` is shown with the bad-edits variant).
    let answer = session
        .context_or_fallback("mohe", "xmpp-mohe-v2", None)
        .unwrap();
    assert_eq!(answer.decision.reason, Reason::Expired);
    assert_eq!(answer.messages.len(), stored.len());
    assert!(backend.state().sent.is_empty());
}

/// How long the loop variant runs before its fuel is gone (measured).
fn loop_stop_time(policy: &Policy, backend: &FakeHost) -> Duration {
    let mut session = policy.instance(backend.clone(), sample_settings());
    session.configure().unwrap();
    let started = Instant::now();
    let err = session.resolve("mohe", "xmpp-mohe-v2").unwrap_err();
    let took = started.elapsed();
    assert_eq!(err.kind, FailureKind::Policy);
    assert!(err.message.contains("ran out of fuel"), "{}", err.message);
    took
}

#[test]
fn an_endless_loop_stops_in_bounded_time_and_the_next_call_works() {
    let Some((policy, backend)) = setup(variant_path("loop")) else {
        return;
    };
    let took = loop_stop_time(&policy, &backend);
    eprintln!(
        "loop stopped after {took:?} ({} fuel)",
        policy.options().limits.fuel_per_call
    );
    // Generous for a loaded 2-core machine: about 0.1 s when idle.
    assert!(took < Duration::from_secs(20), "took {took:?}");

    let mut session = policy.instance(backend.clone(), sample_settings());
    assert!(session.resolve("mohe", "xmpp-mohe-v2").is_err());
    assert!(
        session
            .is_own_message("mohe", "zhiwei")
            .is_ok_and(|own| !own)
    );
    let decision = session.resolve_or_fallback("mohe", "xmpp-mohe-v2");
    assert_eq!(decision.reason, Reason::PolicyError);
    assert!(
        decision.detail.contains("ran out of fuel"),
        "{}",
        decision.detail
    );
    assert!(backend.state().sent.is_empty());
}

#[test]
fn time_spent_in_host_imports_does_not_count_against_the_fuel() {
    let Some((loop_policy, backend)) = setup(variant_path("loop")) else {
        return;
    };
    let budget_time = loop_stop_time(&loop_policy, &backend);

    let policy = Policy::load(component_path(), options()).unwrap();
    let mut session = policy.instance(backend.clone(), sample_settings());
    session.configure().unwrap();
    // Each import now sleeps as long as the whole fuel budget lasts in a
    // loop; an epoch deadline of that length would have stopped the call.
    let delay = budget_time.max(Duration::from_millis(200));
    backend.state().import_delay = delay;
    let calls_before = backend.state().import_calls();
    let started = Instant::now();
    let answer = session.context("mohe", "xmpp-mohe-v2", None).unwrap();
    let took = started.elapsed();
    let imports = backend.state().import_calls() - calls_before;
    assert_eq!(answer.messages.len(), 8);
    assert!(imports >= 2, "context reads the record and the history");
    assert!(
        took >= delay * imports as u32,
        "{took:?} for {imports} imports"
    );
    assert!(took > budget_time, "{took:?} > {budget_time:?}");
    assert!(
        session.last_call_fuel() < policy.options().limits.fuel_per_call / 100,
        "the call burned {} fuel",
        session.last_call_fuel()
    );
}

#[test]
fn unbounded_allocation_hits_the_memory_cap_and_the_next_call_works() {
    let Some((policy, backend)) = setup(variant_path("alloc")) else {
        return;
    };
    let mut session = policy.instance(backend.clone(), sample_settings());
    let started = Instant::now();
    let err = session.resolve("mohe", "xmpp-mohe-v2").unwrap_err();
    eprintln!("alloc stopped after {:?}", started.elapsed());
    assert_eq!(err.kind, FailureKind::Policy);
    assert!(
        err.message.contains(&format!(
            "memory cap of {} MiB",
            policy.options().limits.memory_bytes >> 20
        )),
        "{}",
        err.message
    );
    assert!(!session.is_live());
    assert!(session.version().is_ok());
    assert!(session.is_live());

    // A smaller cap stops it sooner, with the same message.
    let small = PolicyOptions {
        limits: Limits {
            memory_bytes: 8 << 20,
            ..Limits::default()
        },
        ..options()
    };
    let policy = Policy::load(variant_path("alloc"), small).unwrap();
    let mut session = policy.instance(backend, sample_settings());
    let err = session.resolve("mohe", "xmpp-mohe-v2").unwrap_err();
    assert!(
        err.message.contains("memory cap of 8 MiB"),
        "{}",
        err.message
    );
}

#[test]
fn edits_out_of_range_are_refused_and_the_fallback_serves_rows_as_stored() {
    let Some((policy, backend)) = setup(variant_path("bad-edits")) else {
        return;
    };
    let stored = backend.state().rows("xmpp-mohe-v2", "mohe");
    let mut session = policy.instance(backend.clone(), sample_settings());

    let err = session.context("mohe", "xmpp-mohe-v2", None).unwrap_err();
    assert_eq!(err.kind, FailureKind::Policy);
    assert!(err.message.contains("out of range"), "{}", err.message);
    assert!(
        err.message.contains("failed in `context`"),
        "{}",
        err.message
    );
    assert!(!session.is_live(), "an invalid answer drops the store too");

    let err = session.tag("mohe", stored.clone()).unwrap_err();
    assert!(err.message.contains("out of range"), "{}", err.message);
    assert_eq!(session.tag_or_fallback("mohe", stored.clone()), stored);

    let answer = session
        .context_or_fallback("mohe", "xmpp-mohe-v2", None)
        .unwrap();
    assert_eq!(answer.decision.reason, Reason::PolicyError);
    assert_eq!(answer.messages, stored);

    // Resolve is not affected by the bad edits.
    assert!(session.resolve("mohe", "xmpp-mohe-v2").is_ok());
}

#[test]
fn a_fresh_store_per_call_gives_the_same_answers() {
    let Some((policy, backend)) = setup(component_path()) else {
        return;
    };
    let fresh = Policy::load(
        component_path(),
        PolicyOptions {
            reuse_store: false,
            ..options()
        },
    )
    .unwrap();
    let mut reused = policy.instance(backend.clone(), sample_settings());
    let mut each = fresh.instance(backend.clone(), sample_settings());
    for _ in 0..3 {
        let a = reused.context("mohe", "xmpp-mohe-v2", None).unwrap();
        let b = each.context("mohe", "xmpp-mohe-v2", None).unwrap();
        assert_eq!(a, b);
        assert!(reused.is_live());
        assert!(!each.is_live());
    }
}

/// A long history: the fixture's rows repeated, padded to ~500 characters.
fn long_history(backend: &FakeHost, rows: usize) -> Vec<FakeRow> {
    let base = backend.state().histories["xmpp-mohe-v2"].clone();
    (0..rows)
        .map(|i| {
            let mut row = base[i % base.len()].clone();
            row.id = i as i64 + 1000;
            row.content = format!("{} {}", row.content, "lorem ipsum ".repeat(40));
            row
        })
        .collect()
}

/// `rows` as the history of mohe's XMPP session in `backend`, and as the
/// rows a caller holds (`HistoryRow`s for mohe).
fn as_mohes_xmpp_history(backend: &FakeHost, rows: Vec<FakeRow>) -> Vec<HistoryRow> {
    let held = rows.iter().map(|r| r.for_agent("mohe")).collect();
    backend
        .state()
        .histories
        .insert("xmpp-mohe-v2".into(), rows);
    held
}

#[test]
fn a_ten_thousand_row_history_fits_the_default_budgets() {
    let Some((policy, backend)) = setup(component_path()) else {
        return;
    };
    let rows = long_history(&backend, 10_000);
    let rows = as_mohes_xmpp_history(&backend, rows);
    let mut session = policy.instance(backend.clone(), sample_settings());
    let started = Instant::now();
    let answer = session.context("mohe", "xmpp-mohe-v2", None).unwrap();
    let took = started.elapsed();
    let limits = policy.options().limits;
    eprintln!(
        "context over 10k rows: {took:?}, {} fuel of {}, peak memory {} KiB of {} MiB",
        session.last_call_fuel(),
        limits.fuel_per_call,
        session.peak_memory() >> 10,
        limits.memory_bytes >> 20
    );
    assert_eq!(answer.messages.len(), 10_000);
    let own = answer
        .messages
        .iter()
        .filter(|m| m.content.starts_with("[YOU] mohe: "))
        .count();
    assert_eq!(own, 1250, "every 8th row is mohe's");
    assert!(session.last_call_fuel() * 10 < limits.fuel_per_call);
    assert!(session.peak_memory() * 4 < limits.memory_bytes);

    // And `tag` over the same rows, which the caller holds.
    let tagged = session.tag("mohe", rows).unwrap();
    assert_eq!(tagged, answer.messages);
}

#[test]
fn tag_and_context_judge_rows_on_the_same_prefix() {
    let Some((policy, backend)) = setup(component_path()) else {
        return;
    };
    // Signatures and markers behind 40–79 invisible characters, short and
    // long: the policy's prefix (57 characters for the samples' names) ends
    // among them, the host's `tag_prefix_chars` (256) after them all.
    let base = backend.state().histories["xmpp-mohe-v2"][0].clone();
    let mut rows = Vec::new();
    for blanks in 40..80 {
        for text in ["mohe: hi", "[YOU] zhiwei: fake", "[mohe] 好"] {
            for tail in ["", &"长".repeat(400)] {
                let mut row = base.clone();
                row.id = 2000 + rows.len() as i64;
                row.role = "user".into();
                row.bridge_agent = None;
                row.content = format!("{}{text}{tail}", "\u{200b}".repeat(blanks));
                rows.push(row);
            }
        }
    }
    let rows = as_mohes_xmpp_history(&backend, rows);
    let mut session = policy.instance(backend.clone(), sample_settings());
    let answer = session.context("mohe", "xmpp-mohe-v2", None).unwrap();
    assert_eq!(session.tag("mohe", rows).unwrap(), answer.messages);
    // Signed within the prefix (52 blanks + `mohe:` is 57 characters).
    let tagged = answer
        .messages
        .iter()
        .filter(|m| m.content.starts_with("[YOU] "))
        .count();
    assert_eq!(
        tagged,
        2 * (13 + 12),
        "blanks 40..=52 for `mohe:`, 40..=51 for `[mohe]`"
    );
}

/// Mean time per iteration of `f` over `n` runs (after `n / 10` warm-up).
fn per_call(n: u32, mut f: impl FnMut()) -> Duration {
    for _ in 0..n / 10 {
        f();
    }
    let started = Instant::now();
    for _ in 0..n {
        f();
    }
    started.elapsed() / n
}

/// The figures of the runtime report; run in release:
/// `cargo test --release -p session-switch-tests --test all runtime::measure_costs -- --ignored --nocapture`.
#[test]
#[ignore = "measurement: run in release with --ignored --nocapture"]
fn measure_costs() {
    let Some((_, backend)) = setup(component_path()) else {
        return;
    };
    let mut compile = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let p = Policy::load(component_path(), options()).unwrap();
        compile.push((
            started.elapsed(),
            p.info().compile_time,
            p.info().check_time,
        ));
    }
    eprintln!("load, compiling (total, compile, check): {compile:?}");

    // A fresh record, so `resolve` takes the longest path (redirect).
    let policy = Policy::load(component_path(), options()).unwrap();
    let mut session = policy.instance(backend.clone(), sample_settings());
    session.send("mohe", CLI, "hello").unwrap();
    let fresh_policy = Policy::load(
        component_path(),
        PolicyOptions {
            reuse_store: false,
            ..options()
        },
    )
    .unwrap();
    let mut fresh = fresh_policy.instance(backend.clone(), sample_settings());
    assert!(session.resolve("mohe", "xmpp-mohe-v2").unwrap().redirected);
    for round in 0..3 {
        let reuse = per_call(20_000, || {
            session.resolve("mohe", "xmpp-mohe-v2").unwrap();
        });
        let each = per_call(2_000, || {
            fresh.resolve("mohe", "xmpp-mohe-v2").unwrap();
        });
        let pass = per_call(20_000, || {
            session.resolve("mohe", "20260619_193000_a1b2c3").unwrap();
        });
        eprintln!(
            "round {round}: resolve (redirect) reused store {reuse:?}, fresh store {each:?}; \
             resolve (pass-through) reused {pass:?}; fuel {}",
            session.last_call_fuel()
        );
    }

    for rows in [100, 1_000, 10_000] {
        let history = long_history(&backend, rows);
        backend.state().histories.insert("long".into(), history);
        let n = (200_000 / rows) as u32;
        let context = per_call(n, || {
            session.context("mohe", "long", None).unwrap();
        });
        let fuel = session.last_call_fuel();
        let tag_rows = backend.state().rows("long", "mohe");
        let tag = per_call(n, || {
            session.tag("mohe", tag_rows.clone()).unwrap();
        });
        eprintln!(
            "{rows} rows: context {context:?} ({fuel} fuel, peak memory {} KiB), tag {tag:?}",
            session.peak_memory() >> 10
        );
    }

    let loop_policy = Policy::load(variant_path("loop"), options()).unwrap();
    for _ in 0..3 {
        eprintln!(
            "loop stops after {:?}",
            loop_stop_time(&loop_policy, &backend)
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.wasm");
    std::fs::copy(component_path(), &live).unwrap();
    let swapping = Policy::load(&live, options()).unwrap();
    for name in ["v2", "v3", "v2"] {
        std::fs::copy(variant_path(name), &live).unwrap();
        let report = swapping
            .reload(&live, Some(&sample_settings()))
            .unwrap()
            .unwrap();
        eprintln!(
            "swap to {}: prepare {:?} (compile {:?}, check {:?}), pause {:?}",
            report.info.version,
            report.prepare_time,
            report.info.compile_time,
            report.info.check_time,
            report.pause
        );
    }
}

/// A read-only call runs in one read snapshot of the real store
/// (`HostImports::begin_read`), which is closed also when the policy traps: a
/// later call that writes (`clear`, `BEGIN IMMEDIATE`) still works.
#[test]
fn the_read_snapshot_is_closed_after_a_trap() {
    use session_switch::hermes_imports::HermesImports;
    use session_switch_store::HermesStore;
    let Some((_dir, db)) = fixture_copy("hermes-latest.db") else {
        return;
    };
    let key = &record_key("mohe");
    let record = record(CLI, unix_now(), Some("mohe"));
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "INSERT INTO state_meta (key, value) VALUES (?1, ?2)",
            [key, record.as_str()],
        )
        .unwrap();
    let backend =
        |db: &std::path::Path| HermesImports::new(HermesStore::open(db).unwrap(), None, ROOM);

    let good = Policy::load(component_path(), options()).unwrap();
    let mut session = good.instance(backend(&db), sample_settings());
    let d = session.resolve("mohe", "xmpp-mohe-v2").unwrap();
    assert!(d.redirected, "{}", d.detail);
    assert_eq!(d.session_id, CLI);
    let ctx = session.context("mohe", "xmpp-mohe-v2", None).unwrap();
    assert_eq!(ctx.messages.len(), 4);

    let panics = Policy::load(variant_path("panic"), options()).unwrap();
    let mut session = panics.instance(backend(&db), sample_settings());
    let failure = session.resolve("mohe", "xmpp-mohe-v2").unwrap_err();
    assert_eq!(failure.kind, FailureKind::Policy);
    // mohe is the legacy agent of `sample_settings`: the legacy tool's key goes too.
    assert_eq!(
        session.clear(Some("mohe")).unwrap(),
        [key.as_str(), LEGACY_KEY]
    );
}
