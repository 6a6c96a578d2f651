//! Hot swap under load: caller threads resolve on the redirect path in a
//! loop (each its own `PolicyInstance` over `HermesImports` on the v31 1,000-row
//! database) while the main thread swaps the policy file between the `v2`
//! and `v3` test builds (`make variants`) with `Policy::reload`, each swap
//! compiling the new file.
//!
//! One caller by default (`SSW_SWAP_CALLERS=N` for more): on this 2-core
//! machine kind, a spinning caller per core leaves the compile no core of
//! its own, and the slowest calls then measure the scheduler (a caller
//! waiting out another thread's time slice), not the swap.
//!
//! Prints one JSON line: the compile-and-check time of each swap
//! (`prepare_ms`: read + compile + type-check + instantiate +
//! `version` + `self-check` + `configure`), the write-lock hold
//! (`lock_us`), the callers' call latencies in µs (`calls`: every call
//! during the run; `first_after_swap`: the call that picked up the new
//! component and paid for its new store, instance and `configure`), each as
//! p50 / p99 / max, and the failed calls (must be 0).
//! `SSW_BENCH_QUICK=1` makes fewer swaps.

mod common;

use common::run;
use session_switch::from_config;
use session_switch::hermes_imports::HermesImports;
use session_switch::runtime::{Policy, PolicyOptions};
use session_switch_store::HermesStore;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Caller threads (`SSW_SWAP_CALLERS`, default 1).
fn caller_count() -> usize {
    std::env::var("SSW_SWAP_CALLERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

fn variant(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/policy/variants")
        .join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "{} is missing: run `make variants`",
        path.display()
    );
    path
}

/// Replace `live` atomically (copy beside it, then rename), as
/// `Policy::watch` asks producers to.
fn install(from: &Path, live: &Path) {
    let tmp = live.with_extension("wasm.tmp");
    std::fs::copy(from, &tmp).expect("copy the component");
    std::fs::rename(&tmp, live).expect("rename the component");
}

/// `p` in 0..=1 of sorted `v` (nearest rank).
fn pct(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

fn summary(mut v: Vec<f64>) -> serde_json::Value {
    v.sort_by(f64::total_cmp);
    serde_json::json!({
        "n": v.len(),
        "p50": pct(&v, 0.50),
        "p99": pct(&v, 0.99),
        "max": v.last().copied().unwrap_or(f64::NAN),
    })
}

struct CallerLog {
    /// Every call's wall time, µs.
    calls: Vec<f64>,
    /// Calls that ran on a component other than the previous call's, µs.
    first: Vec<f64>,
    failures: u64,
    last_failure: Option<String>,
}

fn one_mode(run: &common::Run, db: &Path, swaps: usize) -> serde_json::Value {
    let dir = run.dir.join("swap");
    std::fs::create_dir_all(&dir).expect("swap dir");
    let live = dir.join("live.wasm");
    install(&variant("v3"), &live);
    let options = PolicyOptions::default();
    let policy = Policy::load(&live, options).unwrap_or_else(|f| panic!("{}", f.message));
    let settings = from_config::settings(&run.config);
    let stop = Arc::new(AtomicBool::new(false));
    let callers: Vec<_> = (0..caller_count())
        .map(|_| {
            let policy = policy.clone();
            let stop = stop.clone();
            let settings = settings.clone();
            let db = db.to_owned();
            let (agent, asked) = (run.agent.clone(), run.session.clone());
            let room = run.config.xmpp.room.clone();
            std::thread::spawn(move || {
                let store = HermesStore::open(&db).unwrap_or_else(|f| panic!("{}", f.message));
                let mut session = policy.instance(HermesImports::new(store, None, room), settings);
                let mut log = CallerLog {
                    calls: Vec::with_capacity(1 << 20),
                    first: Vec::new(),
                    failures: 0,
                    last_failure: None,
                };
                let mut version = session.info().version.clone();
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    let answer = session.resolve(&agent, &asked);
                    let us = started.elapsed().as_secs_f64() * 1e6;
                    match answer {
                        Ok(d) if d.redirected => {}
                        Ok(d) => {
                            log.failures += 1;
                            log.last_failure = Some(format!("no redirect: {}", d.detail));
                        }
                        Err(f) => {
                            log.failures += 1;
                            log.last_failure = Some(f.message);
                        }
                    }
                    log.calls.push(us);
                    if session.info().version != version {
                        version = session.info().version.clone();
                        log.first.push(us);
                    }
                }
                log
            })
        })
        .collect();

    std::thread::sleep(Duration::from_millis(200));
    let (mut prepare_ms, mut lock_us) = (Vec::new(), Vec::new());
    for i in 0..swaps {
        install(&variant(if i % 2 == 0 { "v2" } else { "v3" }), &live);
        let report = policy
            .reload(&live, Some(&settings))
            .unwrap_or_else(|f| panic!("swap {i}: {}", f.message))
            .expect("the bytes changed");
        prepare_ms.push(report.prepare_time.as_secs_f64() * 1e3);
        lock_us.push(report.pause.as_secs_f64() * 1e6);
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    let (mut calls, mut first, mut failures, mut last_failure) = (Vec::new(), Vec::new(), 0, None);
    for caller in callers {
        let log = caller.join().expect("a caller panicked");
        calls.extend(log.calls);
        first.extend(log.first);
        failures += log.failures;
        last_failure = last_failure.or(log.last_failure);
    }
    serde_json::json!({
        "swaps": swaps,
        "callers": caller_count(),
        "prepare_ms": summary(prepare_ms),
        "lock_us": summary(lock_us),
        "calls": summary(calls),
        "first_after_swap": summary(first),
        "failures": failures,
        "last_failure": last_failure,
    })
}

fn main() {
    let run = run();
    let db = run
        .dbs
        .iter()
        .find(|d| d.name == "v31-1000")
        .or(run.dbs.last())
        .expect("a database")
        .path
        .clone();
    let swaps = if std::env::var_os("SSW_BENCH_QUICK").is_some() {
        6
    } else {
        40
    };
    let compiled = one_mode(&run, &db, swaps);
    println!(
        "{}",
        serde_json::json!({ "hot_swap": { "compile": compiled } })
    );
}
