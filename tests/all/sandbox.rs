//! The policy's sandbox (docs/src/design/what-we-build.md): the component reaches files,
//! network, environment and clock only through our `host` imports; a
//! component that imports WASI or any other interface is refused at load
//! time and at a hot swap; and a call is bounded in time even where fuel
//! does not bound it (cache-missing memory walks), without counting the
//! time the host spends in its imports.
//!
//! The components are test builds of the real policy (`make variants`,
//! `tests/policies/`): `chase` (resolve walks through 32 MiB at
//! random: few instructions, many cache misses), `memcopy` (resolve loops
//! on 8 MiB `copy_within`s), `reach` (resolve tries `std`'s files, sockets,
//! environment, processes and threads; is-own-message reads `std`'s clock),
//! `spy` (imports `test:spy/net`), `wasi` (built for wasm32-wasip2) and
//! `hijack` (redirects every XMPP session of an agent to another person's
//! CLI session, with a well-formed decision: the host checks it against
//! the agent's record, docs/src/security.md#h1-the-host-checks-a-redirect-against-the-record-itself).

use session_switch::FailureKind;
use session_switch::runtime::*;
use session_switch_contract::keys::{LEGACY_KEY, record_key};
use session_switch_tests::fake_host::{FakeHost, FakeRow};
use session_switch_tests::sample::{record, sample_settings, unix_now};
use session_switch_tests::{component_path, fixture_copy, variant_path};
use std::time::{Duration, Instant};

fn options(limits: Limits) -> PolicyOptions {
    PolicyOptions {
        limits,
        ..PolicyOptions::default()
    }
}

/// A backend over a copy of the newest real Hermes fixture; `None` (skip)
/// when the fixtures are missing.
fn backend() -> Option<FakeHost> {
    session_switch_tests::fake_host::fixture("hermes-latest.db")
}

/// How a call of a test variant ended: the failure, its wall-clock time,
/// its own (CPU) time as the guest clock counted it, and the fuel it burned.
struct Stopped {
    err: session_switch::Failure,
    took: Duration,
    guest: Duration,
    fuel: u64,
}

/// Run `resolve` on test variant `variant` under `limits` and say how it
/// ended. Checks that the store was thrown away and that the next call works
/// on a fresh one.
fn stop(variant: &str, limits: Limits, backend: &FakeHost) -> Stopped {
    let policy = Policy::load(variant_path(variant), options(limits)).unwrap();
    let mut session = policy.instance(backend.clone(), sample_settings());
    session.configure().unwrap();
    let started = Instant::now();
    let err = session.resolve("mohe", "xmpp-mohe-v2").unwrap_err();
    let took = started.elapsed();
    let (guest, fuel) = (session.last_call_guest_time(), session.last_call_fuel());
    eprintln!(
        "{variant}: stopped after {took:?} ({guest:?} its own), {fuel} fuel: {}",
        err.message
    );
    assert_eq!(err.kind, FailureKind::Policy);
    assert!(err.message.contains("`resolve`"), "{}", err.message);
    assert!(!session.is_live());
    assert_eq!(session.is_own_message("mohe", "zhiwei"), Ok(false));
    assert!(session.is_live());
    assert!(backend.state().sent.is_empty());
    assert!(took >= guest, "wall-clock {took:?} < CPU {guest:?}");
    Stopped {
        err,
        took,
        guest,
        fuel,
    }
}

/// The message of a call stopped by the guest time limit.
fn over_time(limit: Duration) -> String {
    format!(
        "it ran for more than {} ms of its own time in one call (time in host imports not \
         counted)",
        limit.as_millis()
    )
}

#[test]
fn a_random_walk_that_fuel_does_not_bound_in_time_is_stopped_by_the_guest_time_limit() {
    let Some(backend) = backend() else {
        return;
    };
    let limit = Duration::from_millis(300);
    let limits = Limits {
        guest_time_per_call: limit,
        ..Limits::default()
    };
    let chase = stop("chase", limits, &backend);
    assert!(
        chase.err.message.contains(&over_time(limit)),
        "{}",
        chase.err.message
    );
    assert!(
        chase.guest >= limit,
        "stopped after {:?}, before the limit",
        chase.guest
    );
    // One tick (10 ms) late at most when idle; generous for a loaded
    // machine, whose ticker thread can come late.
    assert!(
        chase.guest < limit + Duration::from_secs(2),
        "{:?}",
        chase.guest
    );
    // On fuel alone the walk runs far longer (measured below): the time
    // limit stopped it.
    assert!(
        chase.fuel < limits.fuel_per_call,
        "burned {} fuel",
        chase.fuel
    );
}

#[test]
fn the_default_limits_stop_the_random_walk_and_the_bulk_copies_in_seconds() {
    let Some(backend) = backend() else {
        return;
    };
    let limits = Limits::default();
    let limit = limits.guest_time_per_call;
    let chase = stop("chase", limits, &backend);
    assert!(
        chase.err.message.contains(&over_time(limit)),
        "{}",
        chase.err.message
    );
    assert!(chase.guest >= limit, "{:?}", chase.guest);
    assert!(
        chase.guest < limit + Duration::from_secs(2),
        "{:?}",
        chase.guest
    );

    // wasmtime 48 charges `memory.copy` one fuel unit per byte: a loop of
    // 8 MiB copies runs out of fuel before the time limit.
    let copies = stop("memcopy", limits, &backend);
    assert!(
        copies.err.message.contains("ran out of fuel"),
        "{}",
        copies.err.message
    );
    assert_eq!(copies.fuel, limits.fuel_per_call);
    assert!(copies.guest < limit, "{:?}", copies.guest);
}

/// How long the random walk runs on its fuel alone (no time limit); the
/// figure behind [`Limits::guest_time_per_call`]'s docs:
/// `cargo test -p session-switch-tests --test all sandbox::measure -- --ignored --nocapture`.
#[test]
#[ignore = "measurement: runs for tens of seconds"]
fn measure_the_random_walk_on_fuel_alone() {
    let Some(backend) = backend() else {
        return;
    };
    let limits = Limits {
        guest_time_per_call: Duration::from_secs(3600),
        ..Limits::default()
    };
    let chase = stop("chase", limits, &backend);
    assert!(
        chase.err.message.contains("ran out of fuel"),
        "{}",
        chase.err.message
    );
    eprintln!(
        "the random walk burned {} fuel in {:?} ({:?} CPU)",
        chase.fuel, chase.took, chase.guest
    );
}

#[test]
fn a_host_import_slower_than_the_guest_time_limit_still_succeeds() {
    let Some(backend) = backend() else {
        return;
    };
    let limit = Duration::from_millis(150);
    let policy = Policy::load(
        component_path(),
        options(Limits {
            guest_time_per_call: limit,
            ..Limits::default()
        }),
    )
    .unwrap();
    let mut session = policy.instance(backend.clone(), sample_settings());
    session.configure().unwrap();
    // Every import is busy for twice the whole limit (an ejabberdctl send
    // takes ~0.5 s): only the guest's own time counts.
    let delay = limit * 2;
    backend.state().import_delay = delay;
    let before = backend.state().import_calls();
    let started = Instant::now();
    let answer = session.context("mohe", "xmpp-mohe-v2", None).unwrap();
    let took = started.elapsed();
    let imports = backend.state().import_calls() - before;
    assert_eq!(answer.messages.len(), 8);
    assert!(imports >= 2, "context reads the record and the history");
    assert!(
        took >= delay * imports as u32,
        "{took:?} for {imports} imports"
    );

    // A send whose backend takes as long as a slow ejabberd also completes.
    backend
        .state()
        .sessions
        .insert("20260619_190821_7c0afe".into());
    let receipt = session
        .send(
            "mohe",
            "20260619_190821_7c0afe",
            "slow room, still delivered",
        )
        .unwrap();
    assert_eq!(receipt.body, "slow room, still delivered");
    assert_eq!(backend.state().sent.len(), 1);
    assert!(session.is_live(), "no trap: the store is kept");
}

#[test]
fn a_ten_thousand_row_context_stays_far_below_the_guest_time_limit() {
    let Some(backend) = backend() else {
        return;
    };
    let base = backend.state().histories["xmpp-mohe-v2"].clone();
    let rows: Vec<FakeRow> = (0..10_000)
        .map(|i| {
            let mut row = base[i % base.len()].clone();
            row.id = i as i64 + 1000;
            row.content = format!("{} {}", row.content, "lorem ipsum ".repeat(40));
            row
        })
        .collect();
    backend
        .state()
        .histories
        .insert("xmpp-mohe-v2".into(), rows);
    let policy = Policy::load(component_path(), options(Limits::default())).unwrap();
    let mut session = policy.instance(backend, sample_settings());
    session.configure().unwrap();
    let mut guest = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let answer = session.context("mohe", "xmpp-mohe-v2", None).unwrap();
        assert_eq!(answer.messages.len(), 10_000);
        guest.push((session.last_call_guest_time(), started.elapsed()));
    }
    eprintln!("context over 10k rows (guest time, whole call): {guest:?}");
    let limit = Limits::default().guest_time_per_call;
    let best = guest.iter().map(|g| g.0).min().unwrap();
    assert!(best * 4 < limit, "{best:?} of {limit:?}");
}

#[test]
fn std_inside_the_policy_reaches_no_file_socket_environment_process_or_clock() {
    let Some(backend) = backend() else {
        return;
    };
    // It loads: it imports nothing but our interfaces (std's calls are
    // stubs on wasm32-unknown-unknown, not imports).
    let policy = Policy::load(variant_path("reach"), options(Limits::default())).unwrap();
    let mut imports = policy.info().imports.clone();
    imports.sort();
    assert_eq!(imports, [HOST_INTERFACE, TYPES_INTERFACE]);

    let mut session = policy.instance(backend.clone(), sample_settings());
    let decision = session.resolve("mohe", "xmpp-mohe-v2").unwrap();
    assert_eq!(
        decision.detail,
        "file=Unsupported dir=Unsupported connect=Unsupported bind=Unsupported \
         env-home-or-path=false args=0 cwd=Unsupported command=Unsupported thread=Unsupported"
    );
    // std's clock is no way around `host.now`: reading it traps.
    let err = session.is_own_message("mohe", "mohe").unwrap_err();
    assert_eq!(err.kind, FailureKind::Policy);
    assert!(
        err.message
            .contains("time not implemented on this platform"),
        "{}",
        err.message
    );
    assert!(backend.state().sent.is_empty());
}

#[test]
fn a_component_importing_any_other_interface_is_refused_at_load_and_at_swap() {
    for (variant, import) in [("spy", "`test:spy/net`"), ("wasi", "`wasi:")] {
        let err = Policy::load(variant_path(variant), options(Limits::default())).unwrap_err();
        assert_eq!(err.kind, FailureKind::Policy, "{variant}");
        assert!(
            err.message.contains(&format!("it imports {import}")),
            "{variant}: {}",
            err.message
        );
        assert!(
            err.message.contains("no WASI, no files, no network"),
            "{}",
            err.message
        );
    }

    // Swapped in under a running gateway: refused, the old policy serves.
    let Some(backend) = backend() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("policy.wasm");
    std::fs::copy(component_path(), &live).unwrap();
    let policy = Policy::load(&live, options(Limits::default())).unwrap();
    let serving = policy.info().sha256;
    let mut session = policy.instance(backend, sample_settings());
    for variant in ["spy", "wasi"] {
        std::fs::copy(variant_path(variant), &live).unwrap();
        let err = policy.reload(&live, Some(&sample_settings())).unwrap_err();
        assert!(err.message.contains("it imports"), "{}", err.message);
        assert_eq!(policy.info().sha256, serving);
        assert_eq!(
            session.resolve("mohe", "xmpp-mohe-v2").unwrap().reason,
            Reason::Expired,
            "the fixture's legacy record is from June: the real policy answers"
        );
    }
}

/// The CLI sessions of the fixture `hermes-latest.db`: `hijack` always
/// redirects to the second.
const CLI_A: &str = "20260619_190821_7c0afe";
const HIJACKED: &str = "20260619_193000_a1b2c3";

/// A session of `component` over the real Hermes store of `db` (read
/// snapshots and all), mohe being the legacy agent.
fn hermes_session(component: std::path::PathBuf, db: &std::path::Path) -> PolicyInstance {
    let policy = Policy::load(component, options(Limits::default())).unwrap();
    let store = session_switch_store::HermesStore::open(db).unwrap();
    let mut settings = sample_settings();
    settings.legacy_agent = Some("mohe".into());
    let backend =
        session_switch::hermes_imports::HermesImports::new(store, None, settings.room.clone());
    policy.instance(backend, settings)
}

/// Write `state_meta` key `key` as a send (or the legacy tool) does.
fn set_record(db: &std::path::Path, key: &str, session_id: &str) {
    let value = record(session_id, unix_now() - 60.0, None);
    rusqlite::Connection::open(db)
        .unwrap()
        .execute(
            "INSERT INTO state_meta (key, value) VALUES (?1, ?2) \
             ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [key, &value],
        )
        .unwrap();
}

/// docs/src/security.md#h1-the-host-checks-a-redirect-against-the-record-itself: a policy that redirects a bot to a session no record of
/// the agent names (another person's CLI conversation) is refused by the
/// host, with or without a record, in `resolve` and in `context`; the
/// fallback loads the session asked about, rows as stored; a redirect that
/// a record does name is honoured.
#[test]
fn a_redirect_no_record_names_is_refused_by_the_host() {
    let Some((dir, db)) = fixture_copy("hermes-latest.db") else {
        return;
    };
    let before = std::fs::read(&db).unwrap();
    let mut s = hermes_session(variant_path("hijack"), &db);
    let want = format!(
        "failed in `resolve`: it redirected 'mohe' to session '{HIJACKED}', which no record of \
         the agent names (read: session_switch:active:mohe, active_xmpp_sender_session). \
         Fix or replace the policy component"
    );
    let e = s.resolve("mohe", "xmpp-mohe-v2").unwrap_err();
    assert_eq!(e.kind, FailureKind::Policy);
    assert!(e.message.ends_with(&want), "{}", e.message);
    assert!(!s.is_live(), "the store is thrown away");
    let d = s.resolve_or_fallback("mohe", "xmpp-mohe-v2");
    assert_eq!(
        (d.session_id.as_str(), d.redirected, d.reason),
        ("xmpp-mohe-v2", false, Reason::PolicyError)
    );
    assert!(d.detail.ends_with(&want), "{}", d.detail);
    let e = s.context("mohe", "xmpp-mohe-v2", None).unwrap_err();
    assert_eq!(e.kind, FailureKind::Policy);
    assert!(
        e.message.ends_with(&want.replace("`resolve`", "`context`")),
        "{}",
        e.message
    );
    let c = s.context_or_fallback("mohe", "xmpp-mohe-v2", None).unwrap();
    assert_eq!(c.decision.session_id, "xmpp-mohe-v2");
    assert_eq!(c.decision.reason, Reason::PolicyError);
    assert_eq!(c.messages.len(), 8, "the XMPP session's rows, as stored");
    assert_eq!(
        c.messages[0].content,
        "mohe: 大家好，今天的会议改到下午三点。"
    );
    // Another agent (not the legacy one) is checked against its own key only.
    let e = s.resolve("zhiwei", "xmpp-zhiwei").unwrap_err();
    assert!(
        e.message
            .contains("which no record of the agent names (read: session_switch:active:zhiwei)."),
        "{}",
        e.message
    );
    // Sessions the policy passes through are not redirects: no check.
    let d = s.resolve("mohe", CLI_A).unwrap();
    assert_eq!(
        (d.session_id.as_str(), d.reason),
        (CLI_A, Reason::NotAgentSession)
    );
    // Reading never wrote.
    assert_eq!(std::fs::read(&db).unwrap(), before);

    // A valid record for another session: still refused.
    set_record(&db, &record_key("mohe"), CLI_A);
    let e = s.resolve("mohe", "xmpp-mohe-v2").unwrap_err();
    assert!(e.message.ends_with(&want), "{}", e.message);
    // zhiwei's record naming the target does not vouch for mohe.
    set_record(&db, &record_key("zhiwei"), HIJACKED);
    assert!(s.resolve("mohe", "xmpp-mohe-v2").is_err());
    // The legacy tool's key counts for the legacy agent only.
    set_record(&db, LEGACY_KEY, HIJACKED);
    let d = s.resolve("mohe", "xmpp-mohe-v2").unwrap();
    assert_eq!((d.session_id.as_str(), d.redirected), (HIJACKED, true));
    // Once mohe's own record names it, the redirect is honoured; the
    // context is the target's history.
    set_record(&db, &record_key("mohe"), HIJACKED);
    let c = s.context("mohe", "xmpp-mohe-v2", None).unwrap();
    assert_eq!(
        (c.decision.session_id.as_str(), c.decision.redirected),
        (HIJACKED, true)
    );
    drop(s);
    drop(dir);
}

/// The shipped policy's redirects pass the host's check: a valid record
/// redirects through `resolve` and `context` as before.
#[test]
fn honest_redirects_pass_the_hosts_check() {
    let Some((_dir, db)) = fixture_copy("hermes-latest.db") else {
        return;
    };
    set_record(&db, &record_key("mohe"), CLI_A);
    let mut s = hermes_session(component_path(), &db);
    let d = s.resolve("mohe", "xmpp-mohe").unwrap();
    assert_eq!(
        (d.session_id.as_str(), d.reason),
        (CLI_A, Reason::Redirected)
    );
    let c = s.context("mohe", "xmpp-mohe-v2", Some(3)).unwrap();
    assert_eq!(c.decision.session_id, CLI_A);
    assert!(c.messages.len() <= 3);
    // The legacy tool's key, for the legacy agent.
    let sql = rusqlite::Connection::open(&db).unwrap();
    sql.execute(
        "DELETE FROM state_meta WHERE key = 'session_switch:active:mohe'",
        [],
    )
    .unwrap();
    set_record(&db, LEGACY_KEY, HIJACKED);
    let d = s.resolve("mohe", "xmpp-mohe-v2").unwrap();
    assert_eq!(
        (d.session_id.as_str(), d.reason),
        (HIJACKED, Reason::Redirected)
    );
}
