//! Hot swap of the policy file while several threads keep calling it:
//! every call succeeds, each good swap shows up as the new `version`, and a
//! bad file (garbage, WASI, another interface, a failing self-check,
//! settings it refuses) is rejected while the old policy keeps serving.

use session_switch::FailureKind;
use session_switch::runtime::*;
use session_switch_tests::fake_host::FakeHost;
use session_switch_tests::sample::sample_settings;
use session_switch_tests::{component_path, variant_path};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Replace `live` atomically with `from` (copy beside it, then rename), as
/// the docs of `Policy::watch` ask producers to do.
fn install(from: &Path, live: &Path) {
    let tmp = live.with_extension("wasm.tmp");
    std::fs::copy(from, &tmp).unwrap();
    std::fs::rename(&tmp, live).unwrap();
}

fn install_bytes(bytes: &[u8], live: &Path) {
    let tmp = live.with_extension("wasm.tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, live).unwrap();
}

/// Wait until `done` holds, or fail after a generous time.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn callers_keep_succeeding_while_the_file_is_swapped_and_garbage_is_rejected() {
    let Some(backend) = session_switch_tests::fake_host::fixture("hermes-latest.db") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.wasm");
    install(&component_path(), &live);
    let policy = Policy::load(&live, PolicyOptions::default()).unwrap();
    let v1 = policy.version();
    let watcher = policy.watch(
        &live,
        WatchOptions {
            interval: Duration::from_millis(20),
            settings: Some(sample_settings()),
        },
    );

    // Callers: each thread its own session (and backend), resolving in a
    // loop and noting every version it ran on.
    let stop = Arc::new(AtomicBool::new(false));
    let callers: Vec<_> = (0..3)
        .map(|_| {
            let policy = policy.clone();
            let stop = stop.clone();
            let backend = FakeHost::new(backend.snapshot());
            std::thread::spawn(move || {
                let mut session = policy.instance(backend.clone(), sample_settings());
                let mut calls = 0u64;
                let mut versions: Vec<String> = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let decision = session
                        .resolve("mohe", "xmpp-mohe-v2")
                        .unwrap_or_else(|f| panic!("call {calls} failed: {}", f.message));
                    assert_eq!(decision.session_id, "xmpp-mohe-v2");
                    calls += 1;
                    // The fake logs every import: keep the log short.
                    backend.state().calls.clear();
                    let version = &session.info().version;
                    if versions.last() != Some(version) {
                        versions.push(version.clone());
                    }
                }
                (calls, versions)
            })
        })
        .collect();

    let v2_path = variant_path("v2");
    let v3_path = variant_path("v3");
    let plan: [(&str, Option<&PathBuf>); 6] = [
        ("v2", Some(&v2_path)),
        ("v3", Some(&v3_path)),
        ("garbage", None),
        ("v2", Some(&v2_path)),
        ("v3", Some(&v3_path)),
        ("v2", Some(&v2_path)),
    ];
    let mut expected_swaps = 0;
    let mut pauses = Vec::new();
    for (name, path) in plan {
        let before = watcher.stats();
        let serving = policy.version();
        match path {
            Some(path) => {
                install(path, &live);
                expected_swaps += 1;
                wait_for(
                    &format!("the swap to {name} ({:?})", watcher.stats()),
                    || watcher.stats().swaps == expected_swaps,
                );
                let version = policy.version();
                assert!(version.ends_with(name), "{version} after installing {name}");
                assert_ne!(version, serving);
                let report = watcher.stats().last_swap.unwrap();
                pauses.push(report.pause);
                eprintln!(
                    "swap to {version}: prepare {:?}, pause {:?}",
                    report.prepare_time, report.pause
                );
                // A new session (and an old one, at its next call) runs it.
                let mut probe =
                    policy.instance(FakeHost::new(backend.snapshot()), sample_settings());
                assert_eq!(probe.version().unwrap(), version);
            }
            None => {
                install_bytes(b"\0asm garbage, not a component", &live);
                wait_for("the garbage to be rejected", || {
                    watcher.stats().rejections == before.rejections + 1
                });
                let stats = watcher.stats();
                assert_eq!(stats.swaps, before.swaps);
                let why = stats.last_rejection.unwrap();
                assert!(why.contains("not a valid WebAssembly component"), "{why}");
                assert_eq!(policy.version(), serving, "the old policy keeps serving");
            }
        }
        // Let the callers run on this version for a while.
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    for caller in callers {
        let (calls, versions) = caller.join().expect("no caller failed");
        assert!(calls > 10, "{calls} calls");
        assert_eq!(versions.first(), Some(&v1), "{versions:?}");
        assert!(versions.len() >= 3, "saw several versions: {versions:?}");
    }
    assert_eq!(watcher.stats().swaps, 5);
    assert!(
        pauses.iter().all(|p| *p < Duration::from_millis(50)),
        "{pauses:?}"
    );
    watcher.stop();
}

#[test]
fn a_bad_component_is_rejected_by_reload_and_the_old_one_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.wasm");
    install(&component_path(), &live);
    let policy = Policy::load(&live, PolicyOptions::default()).unwrap();
    let v1 = policy.version();
    let mut session = policy.instance(FakeHost::default(), sample_settings());
    assert_eq!(session.version().unwrap(), v1);

    let cases = [
        ("wasi", "it imports `wasi:"),
        (
            "other-interface",
            "does not export `agentsmeeting:session-switch/policy@0.3.0`",
        ),
        ("bad-self-check", "self-check failed"),
    ];
    for (variant, why) in cases {
        install(&variant_path(variant), &live);
        let err = policy.reload(&live, Some(&sample_settings())).unwrap_err();
        assert_eq!(err.kind, FailureKind::Policy);
        assert!(err.message.contains(why), "{variant}: {}", err.message);
        assert_eq!(policy.version(), v1);
        assert_eq!(session.version().unwrap(), v1);
    }

    // Settings the new component refuses: rejected before the swap.
    install(&variant_path("v2"), &live);
    let mut bad = sample_settings();
    bad.agents.clear();
    let err = policy.reload(&live, Some(&bad)).unwrap_err();
    assert!(
        err.message.contains("does not accept the current settings"),
        "{}",
        err.message
    );
    assert_eq!(session.version().unwrap(), v1);

    // The same file with good settings swaps; reloading unchanged bytes is
    // a no-op.
    let report = policy
        .reload(&live, Some(&sample_settings()))
        .unwrap()
        .unwrap();
    assert!(report.info.version.ends_with("v2"));
    assert_eq!(session.version().unwrap(), report.info.version);
    assert!(
        policy
            .reload(&live, Some(&sample_settings()))
            .unwrap()
            .is_none()
    );
}

#[test]
fn a_call_in_flight_finishes_on_the_old_component() {
    let Some(backend) = session_switch_tests::fake_host::fixture("hermes-latest.db") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.wasm");
    install(&component_path(), &live);
    let policy = Policy::load(&live, PolicyOptions::default()).unwrap();
    let v1 = policy.version();
    let mut session = policy.instance(backend.clone(), sample_settings());
    session.configure().unwrap();
    backend.state().import_delay = Duration::from_millis(300);

    let in_flight = std::thread::spawn(move || {
        let answer = session.context("mohe", "xmpp-mohe-v2", None);
        (answer, session)
    });
    std::thread::sleep(Duration::from_millis(100));
    install(&variant_path("v3"), &live);
    let report = policy.reload(&live, None).unwrap().unwrap();
    assert!(report.info.version.ends_with("v3"));

    let (answer, mut session) = in_flight.join().unwrap();
    let answer = answer.expect("the call in flight succeeds");
    assert_eq!(answer.messages.len(), 8);
    assert_eq!(session.info().version, v1, "it ran on the old component");
    backend.state().import_delay = Duration::ZERO;
    assert_eq!(session.version().unwrap(), report.info.version);
    assert_eq!(session.info().version, report.info.version);
}

#[test]
fn a_change_made_before_the_watcher_starts_is_picked_up() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.wasm");
    install(&component_path(), &live);
    let policy = Policy::load(&live, PolicyOptions::default()).unwrap();
    install(&variant_path("v3"), &live);
    let watcher = policy.watch(
        &live,
        WatchOptions {
            interval: Duration::from_millis(20),
            settings: None,
        },
    );
    wait_for("the swap to v3", || watcher.stats().swaps == 1);
    assert!(policy.version().ends_with("v3"), "{}", policy.version());
    // Unchanged bytes under a new file are not a swap.
    install(&variant_path("v3"), &live);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(watcher.stats().swaps, 1);
    assert_eq!(watcher.stats().rejections, 0);
}
