//! The policy's cost per call, in process (criterion), on the databases of
//! the run (`bench/make_dbs.py`: v22 and v31 fixtures with 100 / 1,000 /
//! 10,000 history rows and a fresh record):
//!
//! - `resolve-<db>/component`: `PolicyInstance::resolve` over `HermesImports`,
//!   the store and instance kept between calls (the default, as a gateway
//!   runs it), `state.db` unchanged between calls: the memo serves the
//!   decision after one `PRAGMA data_version`; `component-after-write`: the
//!   same, but another connection commits before each call (as Hermes does
//!   after a turn; not timed), so the memo asks the call's reads again;
//!   `component-no-memo`: the policy runs every call (`memo: false`), and
//!   `component-no-memo-after-write` after another connection's commit;
//!   `component-fresh-store`: a new store, instance and `configure` every
//!   call (`reuse_store: false`); `native`: the same rules compiled into the
//!   host over `HermesStore`, every call.
//! - `context-<db>/component` and `/native`: resolve + history + tagging,
//!   edits applied to the full rows.
//! - `context-<db>/sqlite-alone`: the history's own two selects (the
//!   sent rows, `SENT_ROWS`, and `HermesStore::history_select`)
//!   stepped, each cell handed over by reference and nothing built: what
//!   SQLite alone takes to give any faithful loader the columns Hermes's
//!   loader reads, the floor of `context`.
//! - `tag-<db>/component`: `PolicyInstance::tag_edits` on the CLI
//!   session's loaded rows, the plugin's `tag_messages` without its Python,
//!   every row seen before (the row memo answers); `component-no-memo`:
//!   every row to the policy (`memo: false`).
//!
//! - `SSW_BENCH_ALTERNATE=PATH`: `context`'s component, native and SQLite
//!   alone also timed in alternating rounds (a batch of each, in rotating
//!   order, every round), so that the machine's drift over minutes falls on
//!   all three alike; the medians of each round's ratios are written to
//!   PATH as JSON (`bench/driver.py` judges the `context` targets on them).
//!
//! Every variant is checked to give the same answer (a redirect, the same
//! tagged rows) before it is timed. `bench/driver.py` reads the medians
//! from `$CRITERION_HOME`. `SSW_BENCH_QUICK=1` shortens the runs;
//! `SSW_BENCH_COMPONENT=PATH` times that component instead of the embedded
//! one; `SSW_BENCH_LOOP=ID:N` runs one variant N times for a profiler.

/// The allocator of the CLI (`host/cli/src/main.rs`), whose calls these
/// figures stand for.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod common;

use common::{Run, native_context, native_policy, native_resolve, run};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use rusqlite::types::ValueRef;
use session_switch::from_config;
use session_switch::hermes_imports::HermesImports;
use session_switch::runtime::{Policy, PolicyInstance, PolicyOptions};
use session_switch_store::{HermesStore, SENT_ROWS};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// How an instance runs: a new store every call, the policy every call,
/// or (the default) the memo too.
#[derive(Clone, Copy)]
enum Mode {
    FreshStore,
    NoMemo,
    Memo,
}

fn options(mode: Mode) -> PolicyOptions {
    PolicyOptions {
        reuse_store: !matches!(mode, Mode::FreshStore),
        memo: matches!(mode, Mode::Memo),
        ..PolicyOptions::default()
    }
}

/// Another connection's commit to `db` (a key of no agent's), as Hermes's
/// store of a turn would be: the next `resolve` finds the data version moved.
fn commit_elsewhere(other: &rusqlite::Connection, n: &mut u64) {
    *n += 1;
    other
        .execute(
            "INSERT OR REPLACE INTO state_meta (key, value) VALUES ('bench:elsewhere', ?1)",
            [n.to_string()],
        )
        .expect("a commit of another connection");
}

fn session(run: &Run, policy: &Policy, db: &common::Db) -> PolicyInstance {
    let store = HermesStore::open(&db.path).unwrap_or_else(|f| panic!("{}", f.message));
    let backend = HermesImports::new(store, None, run.config.xmpp.room.clone());
    policy.instance(backend, from_config::settings(&run.config))
}

fn benches(c: &mut Criterion) {
    let run = run();
    // `SSW_BENCH_COMPONENT`: time another build (e.g. one with symbols,
    // for a profile) instead of the embedded component.
    let load = |mode| match std::env::var_os("SSW_BENCH_COMPONENT") {
        Some(path) => Policy::load(path, options(mode)),
        None => Policy::embedded(options(mode)),
    };
    let reused = load(Mode::Memo).unwrap_or_else(|f| panic!("{}", f.message));
    let no_memo = load(Mode::NoMemo).unwrap_or_else(|f| panic!("{}", f.message));
    let fresh = load(Mode::FreshStore).unwrap_or_else(|f| panic!("{}", f.message));
    let (agent, asked) = (run.agent.as_str(), run.session.as_str());
    // `SSW_BENCH_LOOP=ID:N` (e.g. `resolve-v22-1000/component:20000`): run
    // that variant N times and nothing else, for an instruction count under
    // `valgrind --tool=callgrind` (subtract a run with N = 0).
    let looped = std::env::var("SSW_BENCH_LOOP").ok().map(|v| {
        let (id, n) = v.rsplit_once(':').expect("SSW_BENCH_LOOP=ID:N");
        (
            id.to_owned(),
            n.parse::<u32>().expect("SSW_BENCH_LOOP count"),
        )
    });

    let alternate = std::env::var_os("SSW_BENCH_ALTERNATE");
    let mut alternated = serde_json::Map::new();
    for db in &run.dbs {
        let mut component = session(&run, &reused, db);
        let mut uncached = session(&run, &no_memo, db);
        let mut fresh_store = session(&run, &fresh, db);
        let other = rusqlite::Connection::open(&db.path).expect("a second connection");
        let mut commits = 0u64;
        let mut native = native_policy(&run, &db.path);

        // Same answers before any timing.
        let d = component.resolve(agent, asked).expect("component resolve");
        assert!(d.redirected, "{}: {}", db.name, d.detail);
        assert_eq!(d.session_id, run.cli_session);
        let n = native_resolve(&mut native, agent, asked);
        assert_eq!(
            (n.session_id.as_str(), n.redirected),
            (d.session_id.as_str(), true)
        );
        let f = fresh_store
            .resolve(agent, asked)
            .expect("fresh-store resolve");
        assert_eq!((&f.session_id, f.reason), (&d.session_id, d.reason));
        assert_eq!(uncached.resolve(agent, asked).expect("no-memo resolve"), d);
        commit_elsewhere(&other, &mut commits);
        assert_eq!(component.resolve(agent, asked).expect("after a write"), d);
        assert!(uncached.last_call_fuel() > 0 && component.last_call_fuel() == 0);
        let ctx = component
            .context(agent, asked, None)
            .expect("component context");
        let (_, native_rows) = native_context(&mut native, agent, asked);
        assert_eq!(ctx.messages.len() as u32, db.rows, "{}", db.name);
        assert_eq!(
            ctx.messages, native_rows,
            "{}: component vs native",
            db.name
        );
        assert_eq!(
            component.tag_edits(agent, &ctx.messages).expect("tag"),
            uncached
                .tag_edits(agent, &ctx.messages)
                .expect("tag, no memo"),
            "{}: tag with and without the row memo",
            db.name
        );

        let select = HermesStore::open(&db.path)
            .map(|store| store.history_select())
            .unwrap_or_else(|f| panic!("{}", f.message));
        let mut history_stmt = other.prepare(&select).expect("the history's select");
        let mut sent_stmt = other.prepare(SENT_ROWS).expect("the sent rows");
        let cli = run.cli_session.as_str();
        let mut sqlite_alone = move || -> (u32, usize) {
            let mut ours = sent_stmt
                .query(rusqlite::params![cli, agent])
                .expect("the sent rows");
            while ours.next().expect("a bridge row").is_some() {}
            let mut rows = history_stmt.query([cli]).expect("the history's select");
            let (mut n, mut bytes) = (0, 0);
            while let Some(row) = rows.next().expect("a history row") {
                n += 1;
                for i in 0..row.as_ref().column_count() {
                    bytes += match row.get_ref_unwrap(i) {
                        ValueRef::Text(b) | ValueRef::Blob(b) => b.len(),
                        ValueRef::Integer(_) | ValueRef::Real(_) => 8,
                        ValueRef::Null => 0,
                    };
                }
            }
            (n, bytes)
        };
        assert_eq!(sqlite_alone().0, db.rows, "{}: the select's rows", db.name);

        if let Some((only, n)) = &looped {
            // Profiling mode: a known number of calls, no criterion.
            // The variant's name is matched once: formatting it in the
            // loop was counted as part of every call.
            let variant = ["resolve", "context", "tag"].iter().find_map(|kind| {
                only.strip_prefix(&format!("{kind}-{}/", db.name))
                    .map(|v| (*kind, v))
            });
            for _ in 0..*n {
                match variant {
                    Some(("resolve", "component")) => drop(component.resolve(agent, asked)),
                    Some(("resolve", "component-no-memo")) => drop(uncached.resolve(agent, asked)),
                    Some(("resolve", "component-fresh-store")) => {
                        drop(fresh_store.resolve(agent, asked))
                    }
                    Some(("resolve", "component-after-write")) => {
                        commit_elsewhere(&other, &mut commits);
                        drop(component.resolve(agent, asked))
                    }
                    Some(("resolve", "native")) => drop(native_resolve(&mut native, agent, asked)),
                    Some(("context", "component")) => drop(component.context(agent, asked, None)),
                    Some(("context", "native")) => drop(native_context(&mut native, agent, asked)),
                    Some(("context", "sqlite-alone")) => drop(sqlite_alone()),
                    Some(("tag", "component")) => drop(component.tag_edits(agent, &ctx.messages)),
                    Some(("tag", "component-no-memo")) => {
                        drop(uncached.tag_edits(agent, &ctx.messages))
                    }
                    _ => break,
                }
            }
            continue;
        }

        let mut g = c.benchmark_group(format!("resolve-{}", db.name));
        for (name, instance) in [
            ("component", &mut component),
            ("component-no-memo", &mut uncached),
        ] {
            g.bench_function(name, |b| {
                b.iter(|| black_box(instance.resolve(agent, black_box(asked)).unwrap()))
            });
            g.bench_function(format!("{name}-after-write"), |b| {
                b.iter_batched(
                    || commit_elsewhere(&other, &mut commits),
                    |()| black_box(instance.resolve(agent, black_box(asked)).unwrap()),
                    BatchSize::PerIteration,
                )
            });
        }
        g.bench_function("component-fresh-store", |b| {
            b.iter(|| black_box(fresh_store.resolve(agent, black_box(asked)).unwrap()))
        });
        g.bench_function("native", |b| {
            b.iter(|| black_box(native_resolve(&mut native, agent, black_box(asked))))
        });
        g.finish();

        let mut g = c.benchmark_group(format!("context-{}", db.name));
        if db.rows >= 10_000 {
            g.sample_size(20);
        }
        g.bench_function("component", |b| {
            b.iter(|| black_box(component.context(agent, black_box(asked), None).unwrap()))
        });
        g.bench_function("native", |b| {
            b.iter(|| black_box(native_context(&mut native, agent, black_box(asked))))
        });
        g.bench_function("sqlite-alone", |b| b.iter(|| black_box(sqlite_alone())));
        g.finish();

        if alternate.is_some() {
            let mut variants: [(&str, &mut dyn FnMut()); 3] = [
                ("component", &mut || {
                    black_box(component.context(agent, black_box(asked), None).unwrap());
                }),
                ("native", &mut || {
                    black_box(native_context(&mut native, agent, black_box(asked)));
                }),
                ("sqlite_alone", &mut || {
                    black_box(sqlite_alone());
                }),
            ];
            alternated.insert(db.name.clone(), alternating(&mut variants));
        }

        // The plugin's tagging (`session_switch.Bridge.tag_messages`) minus
        // its Python: the summaries of Hermes's loaded rows crossing into
        // the policy's `tag`, the edits back.
        let mut g = c.benchmark_group(format!("tag-{}", db.name));
        if db.rows >= 10_000 {
            g.sample_size(20);
        }
        for (name, instance) in [
            ("component", &mut component),
            ("component-no-memo", &mut uncached),
        ] {
            g.bench_function(name, |b| {
                b.iter(|| black_box(instance.tag_edits(agent, black_box(&ctx.messages)).unwrap()))
            });
        }
        g.finish();
    }
    if let Some(path) = alternate {
        let text = serde_json::to_string_pretty(&alternated).expect("JSON");
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

/// Time `variants` in alternating rounds: each round runs a batch of each
/// (about 2 ms, found by a first call), in an order that rotates round by
/// round. Gives each variant's median time per call (µs) and, for each pair
/// `a`/`b`, the median over rounds of the round's ratio (`a_over_b`): what
/// the machine's drift does to a round it does to all its variants.
fn alternating(variants: &mut [(&str, &mut dyn FnMut())]) -> serde_json::Value {
    let quick = std::env::var_os("SSW_BENCH_QUICK").is_some();
    let rounds = if quick { 15 } else { 101 };
    let batches: Vec<u32> = variants
        .iter_mut()
        .map(|(_, call)| {
            let start = Instant::now();
            call();
            let once = start.elapsed().as_secs_f64();
            (0.002 / once.max(1e-7)).ceil().clamp(1.0, 10_000.0) as u32
        })
        .collect();
    let n = variants.len();
    let mut per_call: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); n];
    for round in 0..rounds {
        for k in 0..n {
            let v = (round + k) % n;
            let start = Instant::now();
            for _ in 0..batches[v] {
                (variants[v].1)();
            }
            per_call[v].push(start.elapsed().as_secs_f64() * 1e6 / f64::from(batches[v]));
        }
    }
    let median = |mut xs: Vec<f64>| {
        xs.sort_by(f64::total_cmp);
        xs[xs.len() / 2]
    };
    let mut out = serde_json::Map::new();
    out.insert("rounds".into(), rounds.into());
    for (v, (name, _)) in variants.iter().enumerate() {
        out.insert(format!("{name}_us"), median(per_call[v].clone()).into());
        for (w, (other, _)) in variants.iter().enumerate().skip(v + 1) {
            let ratios = per_call[v]
                .iter()
                .zip(&per_call[w])
                .map(|(a, b)| a / b)
                .collect();
            out.insert(format!("{name}_over_{other}"), median(ratios).into());
        }
    }
    out.into()
}

fn config() -> Criterion {
    let quick = std::env::var_os("SSW_BENCH_QUICK").is_some();
    let (warm, measure) = if quick { (0.3, 0.7) } else { (1.0, 3.0) };
    Criterion::default()
        .warm_up_time(Duration::from_secs_f64(warm))
        .measurement_time(Duration::from_secs_f64(measure))
        .sample_size(if quick { 10 } else { 50 })
}

criterion_group! {
    name = policy;
    config = config();
    targets = benches
}
criterion_main!(policy);
