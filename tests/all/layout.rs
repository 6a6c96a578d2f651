//! The layout rules of README "Layout" and DESIGN §2, checked on the
//! sources: the faces (the CLI, the Python binding, the room bot) use only
//! the façade's API; the façade hands out none of its inner types; the
//! store takes nothing from the runtime; no module imports one that
//! imports it back (Rust and the Python package); no source file over the
//! size the README allows outside its unit tests.
//!
//! A module "imports" another when it names an item of it: in a `use`
//! tree or an inline path (`crate::a::B`, `super::x`, `raw::Source`),
//! followed through `use` aliases and re-exports to the module that
//! defines the item, parent and child modules included. Comments and
//! string literals name nothing; `#[cfg(test)]` items are left out.

mod cycle;
mod python_imports;
mod rust_crate;
mod rust_source;

use cycle::{cycle, cycles};
use rust_crate::{Crate, ModPath, Origin};
use session_switch_tests::workspace_root;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates' source folders.
const CRATES: [&str; 8] = [
    "wit/src",
    "guest/src",
    "host/runtime/src",
    "host/bridge/src",
    "host/cli/src",
    "host/python/src",
    "host/bot/src",
    "tests/src",
];

/// The faces' crate folders: each uses the façade (`session_switch`) only.
const FACES: [&str; 3] = ["host/cli", "host/python", "host/bot"];

/// The façade's inner modules: public for the integration tests, never
/// named by a face, and none of their types handed out by the façade.
const INTERNALS: [&str; 4] = ["store", "transport", "hermes_imports", "wiring"];

/// The crates below the façade, which a face reaches only through it.
const BELOW: [&str; 2] = ["session_switch_contract", "session_switch_runtime"];

/// The Python package whose imports must form no cycle.
const PYTHON_PACKAGE: &str = "host/python/python/session_switch";

/// Most lines a source file may have outside its `#[cfg(test)]` items
/// (README "Layout": ~400).
const MAX_LINES: usize = 400;

fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

/// The `.ext` files under `dir` and their text; at least one, so a folder
/// that moved fails the check instead of passing it empty.
pub fn sources(dir: &Path, ext: &str) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    files(dir, ext, &mut found);
    assert!(!found.is_empty(), "no .{ext} file under {}", dir.display());
    found.sort();
    found
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

fn is_internal(module: &[String]) -> bool {
    module
        .first()
        .is_some_and(|m| INTERNALS.contains(&m.as_str()))
}

fn words(code: &str) -> impl Iterator<Item = &str> {
    code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

/// The public types the façade's inner modules define.
fn internal_types(bridge: &Crate) -> BTreeSet<String> {
    bridge
        .modules
        .iter()
        .filter(|(m, _)| is_internal(m))
        .flat_map(|(_, m)| rust_source::public_types(&m.code))
        .collect()
}

/// What a face's sources and its `Cargo.toml` take past the façade.
fn face_violations(face: &Crate, manifest: &str, internal: &BTreeSet<String>) -> Vec<String> {
    let mut found = Vec::new();
    for (module, m) in &face.modules {
        let at = m.file.display();
        for (path, origin) in face.origins(module) {
            if let Origin::Outside(full) = origin {
                let first = full[0].as_str();
                let inner = full.get(1).is_some_and(|s| INTERNALS.contains(&s.as_str()))
                    || full.iter().any(|s| internal.contains(s));
                if BELOW.contains(&first) || first == "session_switch" && inner {
                    found.push(format!("{at}: {}", path.join("::")));
                }
            }
        }
        // A name the face binds itself (its own type, another crate's
        // `Message`) is not the façade's inner type of that name.
        let own = |w: &str| m.defines.contains(w) || m.uses.iter().any(|u| u.local == w);
        for word in words(&m.code).filter(|w| internal.contains(*w) && !own(w)) {
            found.push(format!("{at}: {word}"));
        }
    }
    let mut section = String::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_owned();
        } else if section.ends_with("dependencies]") {
            let key = line.split(['=', '.']).next().unwrap_or_default().trim();
            if BELOW.contains(&key.replace('-', "_").as_str()) {
                found.push(format!(
                    "{}/Cargo.toml {section}: {key}",
                    face.root.parent().unwrap_or(&face.root).display()
                ));
            }
        }
    }
    found
}

/// Where the façade's own API (its public signatures and fields, its
/// re-exports) names a type of its inner modules.
fn facade_violations(bridge: &Crate, internal: &BTreeSet<String>) -> Vec<String> {
    let mut found = Vec::new();
    for (module, m) in bridge.modules.iter().filter(|(m, _)| !is_internal(m)) {
        let at = m.file.display();
        for u in m
            .uses
            .iter()
            .filter(|u| u.public && internal.contains(&u.local))
        {
            if let Origin::Module(to) = bridge.resolve(module, &u.path)
                && is_internal(&to)
            {
                found.push(format!("{at}: pub use {}", u.path.join("::")));
            }
        }
        for (i, _) in m.code.match_indices("pub ") {
            let rest = &m.code[i + 4..];
            let is_fn = rest.starts_with("fn ") || rest.starts_with("const fn ");
            let field = rest.split_once(':').is_some_and(|(name, _)| {
                !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_')
            });
            if !(is_fn || field) {
                continue;
            }
            let end = rest.find(['{', ';', '\n']).unwrap_or(rest.len());
            let end = if is_fn {
                rest.find(['{', ';']).unwrap_or(end)
            } else {
                end
            };
            for word in words(&rest[..end]).filter(|w| internal.contains(*w)) {
                found.push(format!("{at}: pub {} names {word}", rest[..end].trim()));
            }
        }
    }
    found
}

/// What a module of the store names outside the store: the runtime, or
/// the rest of its crate.
fn store_violations(bridge: &Crate) -> Vec<String> {
    let mut found = Vec::new();
    let store: Vec<&ModPath> = bridge
        .modules
        .keys()
        .filter(|m| m.first().is_some_and(|s| s == "store"))
        .collect();
    assert!(!store.is_empty(), "no store modules");
    for module in store {
        for (path, origin) in bridge.origins(module) {
            let outside_store = match &origin {
                Origin::Module(to) => to.first().is_none_or(|s| s != "store"),
                Origin::Outside(full) => full[0] == "session_switch_runtime",
                Origin::Unknown => false,
            };
            if outside_store {
                let file = bridge.modules[module].file.display();
                found.push(format!("{file}: {} ({origin:?})", path.join("::")));
            }
        }
    }
    found
}

fn bridge() -> Crate {
    Crate::read(&workspace_root().join("host/bridge/src"))
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let mut found = Vec::new();
    for folder in CRATES {
        let graph = Crate::read(&workspace_root().join(folder)).graph();
        found.extend(
            cycles(&graph)
                .into_iter()
                .map(|c| format!("{folder}: {}", c.join(" → "))),
        );
    }
    assert!(found.is_empty(), "import cycles: {found:#?}");
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
fn the_faces_use_only_the_facade() {
    let internal = internal_types(&bridge());
    assert!(internal.contains("HermesStore"), "{internal:?}");
    let mut found = Vec::new();
    for face in FACES {
        let dir = workspace_root().join(face);
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        found.extend(face_violations(
            &Crate::read(&dir.join("src")),
            &manifest,
            &internal,
        ));
    }
    assert!(found.is_empty(), "past the façade: {found:#?}");
}

#[test]
fn the_facade_hands_out_none_of_its_inner_types() {
    let bridge = bridge();
    let found = facade_violations(&bridge, &internal_types(&bridge));
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_store_takes_nothing_from_the_runtime() {
    let found = store_violations(&bridge());
    assert!(
        found.is_empty(),
        "the store's types come from the contract: {found:#?}"
    );
}

/// A file past the size is named on stderr, not failed: files are split by
/// concept, and a cap on lines splintered concepts across files.
#[test]
fn a_source_file_over_the_size_outside_its_tests_is_named() {
    let mut over = Vec::new();
    // tests/src is the tests' own support code.
    for folder in CRATES.iter().filter(|f| !f.starts_with("tests/")) {
        for (path, lines) in Crate::read(&workspace_root().join(folder)).files {
            if lines > MAX_LINES {
                over.push(format!("{} ({lines})", path.display()));
            }
        }
    }
    for (path, text) in sources(&workspace_root().join(PYTHON_PACKAGE), "py") {
        let lines = text.lines().count();
        if lines > MAX_LINES {
            over.push(format!("{} ({lines})", path.display()));
        }
    }
    if !over.is_empty() {
        eprintln!("warning: over {MAX_LINES} lines: {over:?}");
    }
}

/// A crate of the files `(path under src, text)` in a new folder.
fn scratch(files: &[(&str, &str)]) -> (tempfile::TempDir, Crate) {
    let dir = tempfile::tempdir_in(workspace_root().join("target")).unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let krate = Crate::read(dir.path());
    (dir, krate)
}

fn cycle_of(files: &[(&str, &str)]) -> Option<Vec<String>> {
    cycle(&scratch(files).1.graph())
}

#[test]
fn the_cycle_check_sees_each_kind_of_cycle() {
    let through_reexport = [
        ("lib.rs", "mod a;\nmod b;\npub use a::A;\n"),
        ("a.rs", "use crate::b::{self, B};\npub struct A;\n"),
        ("b.rs", "use crate::A;\npub struct B;\n"),
    ];
    assert_eq!(
        cycle_of(&through_reexport),
        Some(vec!["a".into(), "b".into(), "a".into()])
    );
    // A parent and its child (`use raw::…` in mod.rs, `super::Kind` back).
    let parent_child = [
        ("lib.rs", "mod config;\n"),
        (
            "config/mod.rs",
            "mod raw;\nuse raw::Raw;\npub enum Kind {}\n",
        ),
        ("config/raw.rs", "use super::Kind;\npub struct Raw;\n"),
    ];
    assert!(cycle_of(&parent_child).is_some());
    // A file adding an `impl` to a type it imports still imports it.
    let split_impl = [
        ("lib.rs", "mod hermes;\nmod schema;\n"),
        ("hermes.rs", "use crate::schema::Seen;\npub struct Store;\n"),
        (
            "schema.rs",
            "use crate::hermes::Store;\npub struct Seen;\nimpl Store {}\n",
        ),
    ];
    assert!(cycle_of(&split_impl).is_some());
    // An inline path, no `use`.
    let inline = [
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "pub fn f() { crate::b::g() }\n"),
        ("b.rs", "pub fn g() { super::a::f() }\n"),
    ];
    assert!(cycle_of(&inline).is_some());
    // Names in comments and strings, and test items, are no import.
    let quiet = [
        ("lib.rs", "mod a;\nmod b;\n"),
        (
            "a.rs",
            "/// [`crate::b::g`]\npub fn f() { let _ = \"crate::b::g\"; }\n",
        ),
        (
            "b.rs",
            "pub fn g() {}\n#[cfg(test)]\nmod tests { use crate::a::f; }\n",
        ),
    ];
    assert_eq!(cycle_of(&quiet), None);
}

#[test]
fn a_test_module_declared_early_hides_only_itself() {
    let text = "#[cfg(test)]\nmod extra;\n\nfn a() {}\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\nfn b() {}\n";
    let code = rust_source::outside_tests(text);
    assert_eq!(code.lines, 3, "{}", code.code);
    assert!(code.code.contains("fn a()") && code.code.contains("fn b()"));
    assert_eq!(code.test_modules, ["extra"]);
}

#[test]
fn the_face_check_sees_each_way_past_the_facade() {
    let internal: BTreeSet<String> = ["HermesStore".to_owned()].into();
    for (text, manifest) in [
        ("use session_switch::{Bridge, store::{Tip}};\n", ""),
        ("fn f() { let _ = session_switch::transport::x(); }\n", ""),
        (
            "use session_switch as s;\nfn f() { s::wiring::settings(); }\n",
            "",
        ),
        ("fn f(_: &HermesStore) {}\n", ""),
        ("fn f() { session_switch::HermesStore::open(); }\n", ""),
        ("use session_switch_contract::marker::untag;\n", ""),
        (
            "fn f() {}\n",
            "[dependencies]\nsession-switch-runtime = { path = \"x\" }\n",
        ),
    ] {
        let (_dir, face) = scratch(&[("lib.rs", text)]);
        assert!(
            !face_violations(&face, manifest, &internal).is_empty(),
            "not seen: {text}{manifest}"
        );
    }
    let (_dir, face) = scratch(&[(
        "lib.rs",
        "use session_switch::{Bridge, runtime::Decision};\n",
    )]);
    assert_eq!(face_violations(&face, "", &internal), Vec::<String>::new());
}

#[test]
fn the_store_check_sees_the_runtime_under_any_name() {
    for text in [
        "use crate::runtime::Failure;\n",
        "use crate::Failure;\n",
        "fn f() -> session_switch_runtime::Failure { todo!() }\n",
        "use crate::config::Config;\n",
    ] {
        let (_dir, bridge) = scratch(&[
            (
                "lib.rs",
                "pub mod config;\npub mod store;\npub use session_switch_runtime as runtime;\n\
                 pub use session_switch_runtime::Failure;\n",
            ),
            ("config.rs", "pub struct Config;\n"),
            ("store/mod.rs", "mod meta;\n"),
            ("store/meta.rs", text),
        ]);
        assert!(!store_violations(&bridge).is_empty(), "not seen: {text}");
    }
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
