//! What the compiler cannot see about the layout: that each crate depends
//! only along the arrows docs/src/design/crates.md draws (a new
//! dependency line, normal, build or dev, compiles whatever it points at),
//! that every crate is in that table, and that no module of the Python
//! package imports one that imports it back.

mod cycle;
mod python_imports;

use cycle::{cycle, cycles};
use session_switch_tests::workspace_root;
use std::collections::{BTreeMap, BTreeSet};

/// The Python package whose imports must form no cycle.
const PYTHON_PACKAGE: &str = "host/python/python/session_switch";

/// Each crate of the product and the crates of ours it may depend on
/// (normal dependencies; the tests crate may use any).
const ARROWS: [(&str, &[&str]); 11] = [
    ("session-switch-contract", &[]),
    ("session-switch-policy", &["session-switch-contract"]),
    ("session-switch-runtime", &["session-switch-contract"]),
    ("session-switch-store", &["session-switch-contract"]),
    ("session-switch-transport", &["session-switch-contract"]),
    ("session-switch-config", &["session-switch-contract"]),
    (
        "session-switch",
        &[
            "session-switch-config",
            "session-switch-contract",
            "session-switch-runtime",
            "session-switch-store",
            "session-switch-transport",
        ],
    ),
    ("session-switch-bot", &["session-switch"]),
    (
        "session-switch-cli",
        &["session-switch", "session-switch-bot"],
    ),
    // The console script runs the CLI's main in the extension.
    (
        "session-switch-python",
        &["session-switch", "session-switch-cli"],
    ),
    // Test-only: the guest's and the runtime's unit tests use it with the
    // contract alone; its features implement their traits for `tests/`.
    (
        "session-switch-fake-host",
        &[
            "session-switch-contract",
            "session-switch-policy",
            "session-switch-runtime",
        ],
    ),
];

/// Each crate of ours and the crates of ours its tests may use besides
/// (dev-dependencies); none when not listed.
const DEV_ARROWS: [(&str, &[&str]); 2] = [
    ("session-switch-policy", &["session-switch-fake-host"]),
    ("session-switch-runtime", &["session-switch-fake-host"]),
];

/// cargo-hakari's crate (`make workspace-hack`): it names the features the
/// whole workspace turns on, so that a build of a few crates (maturin's of
/// the Python package, a release build of the CLI) reuses the workspace's
/// build of wasmtime. Not a job of the product: outside the arrows.
const WORKSPACE_HACK: &str = "session-switch-workspace-hack";

/// The crates that depend on [`WORKSPACE_HACK`]: those built on their own
/// (`-p`, maturin) and what they build. Never a crate built for wasm32 (the
/// contract, the policy, the test policies): the hack names host crates.
const WITH_WORKSPACE_HACK: [&str; 11] = [
    "session-switch-runtime",
    "session-switch-store",
    "session-switch-transport",
    "session-switch-config",
    "session-switch",
    "session-switch-bot",
    "session-switch-cli",
    "session-switch-python",
    "session-switch-fake-host",
    "session-switch-tests",
    "xtask",
];

/// The workspace's crates that are not the product: tests and tools, free
/// to use any crate of ours.
const FREE: [&str; 4] = [
    "session-switch-tests",
    "session-switch-test-policies",
    "xtask",
    WORKSPACE_HACK,
];

/// Dependencies of one package on crates of ours: `(normal and build,
/// dev)`.
type Edges = (BTreeSet<String>, BTreeSet<String>);

/// Every workspace package and its dependencies on crates of ours, from
/// cargo (the workspace hack included).
fn all_edges() -> BTreeMap<String, Edges> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(workspace_root())
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ours: BTreeSet<&str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    let mut edges = BTreeMap::new();
    for package in meta["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap().to_string();
        let mut found: Edges = Default::default();
        for dep in package["dependencies"].as_array().unwrap() {
            let dep_name = dep["name"].as_str().unwrap();
            if !ours.contains(dep_name) {
                continue;
            }
            if dep["kind"].as_str() == Some("dev") {
                found.1.insert(dep_name.to_string());
            } else {
                found.0.insert(dep_name.to_string());
            }
        }
        edges.insert(name, found);
    }
    edges
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// [`all_edges`] without the workspace hack.
fn our_edges() -> BTreeMap<String, Edges> {
    let mut edges = all_edges();
    for (normal, dev) in edges.values_mut() {
        normal.remove(WORKSPACE_HACK);
        dev.remove(WORKSPACE_HACK);
    }
    edges
}

#[test]
fn the_host_crates_and_no_wasm_crate_depend_on_the_workspace_hack() {
    let with: BTreeSet<String> = all_edges()
        .into_iter()
        .filter(|(_, (normal, _))| normal.contains(WORKSPACE_HACK))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(with, set(&WITH_WORKSPACE_HACK));
    let (hack, hack_dev) = &all_edges()[WORKSPACE_HACK];
    assert!(
        hack.is_empty() && hack_dev.is_empty(),
        "the hack depends on crates of ours: {hack:?}"
    );
}

#[test]
fn the_crates_depend_only_along_the_arrows() {
    let edges = our_edges();
    let listed: BTreeSet<&str> = ARROWS.iter().map(|(n, _)| *n).chain(FREE).collect();
    let unlisted: Vec<&String> = edges
        .keys()
        .filter(|n| !listed.contains(n.as_str()))
        .collect();
    assert!(
        unlisted.is_empty(),
        "crates the arrows do not list (add them to ARROWS, and to DESIGN's table): {unlisted:?}"
    );
    for (name, allowed) in ARROWS {
        let (found, found_dev) = edges
            .get(name)
            .unwrap_or_else(|| panic!("no crate {name} in the workspace: {edges:?}"));
        assert_eq!(
            found,
            &set(allowed),
            "{name}'s dependencies (normal and build) on our crates"
        );
        let dev = DEV_ARROWS
            .iter()
            .find(|(n, _)| *n == name)
            .map_or_else(BTreeSet::new, |(_, d)| set(d));
        assert_eq!(found_dev, &dev, "{name}'s dev-dependencies on our crates");
    }
}

#[test]
fn no_python_module_imports_one_that_imports_it_back() {
    let graph = python_imports::graph(&workspace_root().join(PYTHON_PACKAGE));
    assert!(
        graph.contains_key("session_switch.hermes_plugin.seams"),
        "{graph:?}"
    );
    assert_eq!(
        cycles(&graph),
        Vec::<Vec<String>>::new(),
        "{PYTHON_PACKAGE}"
    );
}

#[test]
fn the_python_check_sees_a_cycle_through_a_package() {
    let dir = tempfile::tempdir_in(workspace_root().join("target")).unwrap();
    let package = dir.path().join("pkg");
    std::fs::create_dir_all(package.join("plugin")).unwrap();
    for (path, text) in [
        ("__init__.py", "\"\"\"from .plugin import x\"\"\"\n"),
        ("plugin/__init__.py", "from . import seams\nHELPER = 1\n"),
        ("plugin/seams.py", "def f():\n    from . import HELPER\n"),
    ] {
        std::fs::write(package.join(path), text).unwrap();
    }
    let graph: BTreeMap<_, _> = python_imports::graph(&package);
    assert_eq!(graph["pkg"], BTreeSet::new(), "a docstring imports nothing");
    assert!(cycle(&graph).is_some(), "{graph:?}");
}
