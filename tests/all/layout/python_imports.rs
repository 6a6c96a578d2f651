//! A Python package's import graph: `module → the package's modules it
//! imports`, from every `import` and `from … import` statement (at any
//! depth, so an import inside a function counts), absolute or relative.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The dotted name of `file` in the package whose folder is `package`
/// (`session_switch.hermes_plugin` for `hermes_plugin/__init__.py`).
fn module_of(package: &Path, file: &Path) -> String {
    let name = package.file_name().unwrap().to_string_lossy().into_owned();
    let rel = file.strip_prefix(package).unwrap().with_extension("");
    let mut parts = vec![name];
    parts.extend(
        rel.components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    if parts.last().is_some_and(|p| p == "__init__") {
        parts.pop();
    }
    parts.join(".")
}

/// `text` without comments and the insides of string literals (triple
/// quoted ones too); newlines kept.
fn mask(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '"' || c == '\'' {
            let triple = chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c);
            let quote = if triple { 3 } else { 1 };
            let mut k = i + quote;
            while k < chars.len() {
                if chars[k] == '\\' {
                    k += 2;
                    continue;
                }
                if chars[k] == c && (!triple || chars[k..].starts_with(&[c, c, c])) {
                    break;
                }
                if !triple && chars[k] == '\n' {
                    break;
                }
                if chars[k] == '\n' {
                    out.push('\n');
                }
                k += 1;
            }
            out.push_str("\"\"");
            i = (k + quote).min(chars.len());
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The import statements of `code`, one per logical line, each as
/// `(from, names)`: `import a.b` → `("", ["a.b"])`, `from .x import (y,
/// z)` → `(".x", ["y", "z"])`.
fn imports(code: &str) -> Vec<(String, Vec<String>)> {
    let mut found = Vec::new();
    let mut lines = code.lines();
    while let Some(line) = lines.next() {
        let line = line.trim();
        let mut statement = line.to_owned();
        if line.starts_with("from ") && line.contains("import (") {
            while !statement.contains(')') {
                let Some(next) = lines.next() else { break };
                statement.push(' ');
                statement.push_str(next.trim());
            }
        }
        let names = |list: &str| -> Vec<String> {
            list.trim_matches(|c| c == '(' || c == ')' || c == ' ')
                .split(',')
                .map(|n| n.split(" as ").next().unwrap().trim().to_owned())
                .filter(|n| !n.is_empty())
                .collect()
        };
        if let Some(rest) = statement.strip_prefix("import ") {
            found.push((String::new(), names(rest)));
        } else if let Some(rest) = statement.strip_prefix("from ")
            && let Some((from, list)) = rest.split_once(" import ")
        {
            found.push((from.trim().to_owned(), names(list)));
        }
    }
    found
}

/// The import graph of the package in folder `package`.
pub fn graph(package: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut modules = BTreeMap::new();
    for (file, text) in sources(package, "py") {
        let is_package = file.file_name().is_some_and(|n| n == "__init__.py");
        modules.insert(module_of(package, &file), (is_package, mask(&text)));
    }
    let mut graph = BTreeMap::new();
    for (module, (is_package, code)) in &modules {
        let mut targets = BTreeSet::new();
        // The package a relative import starts from.
        let here: Vec<&str> = module.split('.').collect();
        let here = if *is_package {
            &here[..]
        } else {
            &here[..here.len() - 1]
        };
        for (from, names) in imports(code) {
            let base = if from.is_empty() {
                None
            } else if from.starts_with('.') {
                let dots = from.chars().take_while(|c| *c == '.').count();
                let mut base: Vec<&str> = here[..here.len().saturating_sub(dots - 1)].to_vec();
                base.extend(from[dots..].split('.').filter(|s| !s.is_empty()));
                Some(base.join("."))
            } else {
                Some(from.clone())
            };
            for name in names {
                let full = match &base {
                    Some(base) => format!("{base}.{name}"),
                    None => name,
                };
                // The longest known module the import names.
                let mut parts: Vec<&str> = full.split('.').collect();
                while !parts.is_empty() && !modules.contains_key(&parts.join(".")) {
                    parts.pop();
                }
                let target = parts.join(".");
                if !target.is_empty() && target != *module {
                    targets.insert(target);
                }
            }
        }
        graph.insert(module.clone(), targets);
    }
    graph
}

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
fn sources(dir: &Path, ext: &str) -> Vec<(PathBuf, String)> {
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
