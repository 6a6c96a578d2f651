//! What the compiler cannot see about the layout: that each crate depends
//! only along the arrows DESIGN "The crates" draws (a new `[dependencies]`
//! line compiles whatever it points at), and that no module of the Python
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
    ("session-switch-python", &["session-switch"]),
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

/// `package → its normal dependencies named session-switch*`, from cargo.
fn our_edges() -> BTreeMap<String, BTreeSet<String>> {
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
    let mut edges = BTreeMap::new();
    for package in meta["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap().to_string();
        let deps = package["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null())
            .filter_map(|d| d["name"].as_str())
            .filter(|d| d.starts_with("session-switch"))
            .map(String::from)
            .collect();
        edges.insert(name, deps);
    }
    edges
}

#[test]
fn the_crates_depend_only_along_the_arrows() {
    let edges = our_edges();
    for (name, allowed) in ARROWS {
        let found = edges
            .get(name)
            .unwrap_or_else(|| panic!("no crate {name} in the workspace: {edges:?}"));
        let allowed: BTreeSet<String> = allowed.iter().map(|s| s.to_string()).collect();
        assert_eq!(found, &allowed, "{name}'s dependencies on our crates");
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
