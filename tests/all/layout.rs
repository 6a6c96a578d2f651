//! The layout rules of README "Layout" and DESIGN §2, checked on the
//! sources: the faces (the CLI, the Python binding, the room bot) use only
//! the façade's API; the store takes nothing from the runtime; no module
//! imports one that imports it back; no source file over the size the
//! README allows outside its unit tests.

use session_switch_tests::workspace_root;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates' source folders, as `(folder, crate root file)`.
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

/// Most lines a source file may have before its `#[cfg(test)]` module
/// (README "Layout": ~400).
const MAX_LINES: usize = 420;

fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

fn sources(folder: &str, ext: &str) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    files(&workspace_root().join(folder), ext, &mut found);
    found.sort();
    found
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

/// The text before a file's unit tests (`#[cfg(test)]` at the start of a
/// line; a file of tests only, `tests.rs`, has none of it).
fn outside_tests<'a>(path: &Path, text: &'a str) -> &'a str {
    if path.file_name().is_some_and(|n| n == "tests.rs") {
        return "";
    }
    match text.find("\n#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    }
}

/// The module path of `file` in the crate at `root` (`a::b` for
/// `a/b.rs` and `a/b/mod.rs`; empty for the crate root).
fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The paths of every `use` declaration in `text`, brace groups expanded
/// (`use a::{b, c::d};` → `a::b`, `a::c::d`), and whether each is `pub`.
fn uses(text: &str) -> Vec<(bool, String)> {
    fn expand(prefix: &str, tree: &str, out: &mut Vec<String>) {
        let tree = tree.trim();
        let Some(open) = tree.find('{') else {
            let path = tree.split(" as ").next().unwrap().trim();
            out.push(format!("{prefix}{path}"));
            return;
        };
        let head = format!("{prefix}{}", &tree[..open]);
        let inner = &tree[open + 1..tree.rfind('}').unwrap()];
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&head, &inner[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        if !inner[start..].trim().is_empty() {
            expand(&head, &inner[start..], out);
        }
    }
    let mut found = Vec::new();
    for (i, _) in text.match_indices("use ") {
        let line_start = text[..i].rfind('\n').map_or(0, |n| n + 1);
        let before = text[line_start..i].trim();
        let public = before.starts_with("pub");
        if !(before.is_empty() || public && before.ends_with(')') || before == "pub") {
            continue;
        }
        let Some(end) = text[i..].find(';') else {
            continue;
        };
        let mut paths = Vec::new();
        expand("", &text[i + 4..i + end], &mut paths);
        found.extend(
            paths
                .into_iter()
                .map(|p| (public, p.replace(char::is_whitespace, ""))),
        );
    }
    found
}

/// Module import edges of one crate: `module → module it imports from`,
/// through `crate::` and `super::` paths and the re-exports of the
/// module a path ends in; not the import of a type the module adds an
/// `impl` block to.
fn edges(folder: &str) -> BTreeMap<String, BTreeSet<String>> {
    let root = workspace_root().join(folder);
    let mut modules: BTreeMap<Vec<String>, (PathBuf, String)> = BTreeMap::new();
    for (path, text) in sources(folder, "rs") {
        let text = outside_tests(&path, &text).to_owned();
        modules.insert(module_of(&root, &path), (path, text));
    }
    // name re-exported by a module → the module it comes from
    let mut reexports: BTreeMap<(Vec<String>, String), Vec<String>> = BTreeMap::new();
    for (module, (_, text)) in &modules {
        for (public, path) in uses(text) {
            let segments: Vec<&str> = path.split("::").collect();
            if public && segments.len() >= 2 && modules.contains_key(&child(module, segments[0])) {
                let name = segments.last().unwrap().to_string();
                reexports.insert((module.clone(), name), child(module, segments[0]));
            }
        }
    }
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, (_, text)) in &modules {
        let from = module.join("::");
        let targets = graph.entry(from.clone()).or_default();
        for (_, path) in uses(text) {
            // A file that adds methods to a type (`impl HermesStore { … }`
            // in `store/meta.rs`) is a part of that type, not its user.
            let name = path.rsplit("::").next().unwrap_or_default();
            if text.contains(&format!("impl {name} {{")) {
                continue;
            }
            let mut segments = path.split("::").peekable();
            let mut at: Vec<String> = match segments.peek() {
                Some(&"crate") => {
                    segments.next();
                    Vec::new()
                }
                Some(&"super") => {
                    let mut at = module.clone();
                    while segments.peek() == Some(&"super") {
                        segments.next();
                        at.pop();
                    }
                    at
                }
                _ => continue,
            };
            let rest: Vec<&str> = segments.collect();
            let mut used = 0;
            while used < rest.len() && modules.contains_key(&child(&at, rest[used])) {
                at.push(rest[used].to_owned());
                used += 1;
            }
            if let Some(name) = rest.get(used)
                && let Some(source) = reexports.get(&(at.clone(), name.to_string()))
            {
                at = source.clone();
            }
            // A module's own items and its ancestors' are not an edge.
            if !module.starts_with(&at) {
                targets.insert(at.join("::"));
            }
        }
    }
    graph
}

fn child(module: &[String], name: &str) -> Vec<String> {
    let mut c = module.to_vec();
    c.push(name.to_owned());
    c
}

/// One import cycle of `graph`, if it has any.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut c = path[i..].to_vec();
            c.push(m.to_owned());
            return Some(c);
        }
        if !done.insert(m.to_owned()) {
            return None;
        }
        path.push(m.to_owned());
        for next in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(next, graph, done, path) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| visit(m, graph, &mut done, &mut Vec::new()))
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    for folder in CRATES {
        let graph = edges(folder);
        assert_eq!(cycle(&graph), None, "{folder}: an import cycle");
    }
}

#[test]
fn the_cycle_check_sees_a_cycle_through_a_reexport() {
    let dir = tempfile::tempdir_in(workspace_root().join("target")).unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\npub use a::A;\n").unwrap();
    std::fs::write(
        src.join("a.rs"),
        "use crate::b::{self, B};\npub struct A;\n",
    )
    .unwrap();
    std::fs::write(src.join("b.rs"), "use crate::A;\npub struct B;\n").unwrap();
    let folder = src
        .strip_prefix(workspace_root())
        .unwrap()
        .to_str()
        .unwrap();
    assert_eq!(
        cycle(&edges(folder)),
        Some(vec!["a".into(), "b".into(), "a".into()])
    );
}

#[test]
fn the_faces_use_only_the_facade() {
    let inside = [
        "session_switch::store",
        "session_switch::transport",
        "session_switch::hermes_imports",
        "HermesStore",
        "HermesImports",
    ];
    for folder in ["host/cli/src", "host/python/src", "host/bot/src"] {
        for (path, text) in sources(folder, "rs") {
            for word in inside {
                assert!(
                    !text.contains(word),
                    "{} uses {word}: the faces use the façade's API only",
                    path.display()
                );
            }
        }
    }
}

#[test]
fn the_store_takes_nothing_from_the_runtime() {
    for (path, text) in sources("host/bridge/src/store", "rs") {
        assert!(
            !text.contains("session_switch_runtime"),
            "{} uses the runtime: the store's types come from the contract",
            path.display()
        );
    }
}

#[test]
fn no_source_file_is_over_the_size_outside_its_tests() {
    let mut over = Vec::new();
    // tests/src is the tests' own support code.
    for folder in CRATES.iter().filter(|f| !f.starts_with("tests/")) {
        for (path, text) in sources(folder, "rs") {
            let lines = outside_tests(&path, &text).lines().count();
            if lines > MAX_LINES {
                over.push(format!("{} ({lines})", path.display()));
            }
        }
    }
    for (path, text) in sources("host/python/python", "py") {
        let lines = text.lines().count();
        if lines > MAX_LINES {
            over.push(format!("{} ({lines})", path.display()));
        }
    }
    assert!(over.is_empty(), "over {MAX_LINES} lines: {over:?}");
}
