//! One crate's modules as the layout rules see them: which file holds which
//! module, what each module names, and where each name comes from (a
//! module of the crate, or another crate), through `use` aliases and
//! re-exports.

use super::rust_source::{self, Use};
use super::sources;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path inside the crate (`["store", "hermes"]`; empty: the root).
pub type ModPath = Vec<String>;

pub struct Module {
    pub file: PathBuf,
    /// The code outside tests, comments and literals blanked.
    pub code: String,
    pub uses: Vec<Use>,
    /// The inline paths (not the `use` declarations).
    pub paths: Vec<Vec<String>>,
    pub defines: BTreeSet<String>,
}

/// Where a path leads.
#[derive(Clone, Debug, PartialEq)]
pub enum Origin {
    /// An item of this module (or the module itself).
    Module(ModPath),
    /// Another crate's (or a prelude's) item: its full path.
    Outside(Vec<String>),
    Unknown,
}

pub struct Crate {
    /// The folder of the crate's sources.
    pub root: PathBuf,
    pub modules: BTreeMap<ModPath, Module>,
    /// Each non-test file and its lines outside tests.
    pub files: Vec<(PathBuf, usize)>,
}

/// The module path of `file` in the crate whose sources are at `root`
/// (`a::b` for `a/b.rs` and `a/b/mod.rs`; empty for the crate root).
fn module_of(root: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: ModPath = rel
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

pub fn child(module: &[String], name: &str) -> ModPath {
    let mut c = module.to_vec();
    c.push(name.to_owned());
    c
}

impl Crate {
    /// The crate whose sources are under `dir`, its test files left out
    /// (those its modules declare `#[cfg(test)] mod name;`).
    pub fn read(dir: &Path) -> Self {
        let mut read = Vec::new();
        let mut tests = BTreeSet::new();
        for (file, text) in sources(dir, "rs") {
            let module = module_of(dir, &file);
            let code = rust_source::outside_tests(&text);
            tests.extend(code.test_modules.iter().map(|t| child(&module, t)));
            read.push((module, file, code));
        }
        let mut krate = Self {
            root: dir.to_path_buf(),
            modules: BTreeMap::new(),
            files: Vec::new(),
        };
        for (module, file, code) in read {
            if tests.iter().any(|t| module.starts_with(t)) {
                continue;
            }
            krate.files.push((file.clone(), code.lines));
            krate.add(module, &file, &code.code);
        }
        krate
    }

    /// `code` as module `module`, its inline `mod name { … }` blocks as
    /// its children.
    fn add(&mut self, module: ModPath, file: &Path, code: &str) {
        let (own, inline) = rust_source::split_inline_modules(code);
        for (name, inner) in inline {
            self.add(child(&module, &name), file, &inner);
        }
        let (uses, rest) = rust_source::uses(&own);
        self.modules.insert(
            module,
            Module {
                file: file.to_path_buf(),
                defines: rust_source::defined_names(&own).into_iter().collect(),
                paths: rust_source::paths(&rest),
                uses,
                code: own,
            },
        );
    }

    /// The `use` of `module` that binds `name`.
    fn import(&self, module: &[String], name: &str) -> Option<&Use> {
        self.modules
            .get(module)?
            .uses
            .iter()
            .find(|u| u.local == name)
    }

    /// Where `path`, named in `from`, leads.
    pub fn resolve(&self, from: &[String], path: &[String]) -> Origin {
        self.resolve_in(from, path, 0)
    }

    fn resolve_in(&self, from: &[String], path: &[String], depth: usize) -> Origin {
        if depth > 16 || path.is_empty() {
            return Origin::Unknown;
        }
        let (mut at, rest): (ModPath, &[String]) = match path[0].as_str() {
            "crate" => (Vec::new(), &path[1..]),
            "self" => (from.to_vec(), &path[1..]),
            "super" => {
                let mut at = from.to_vec();
                let mut rest = path;
                while rest.first().is_some_and(|s| s == "super") {
                    at.pop();
                    rest = &rest[1..];
                }
                (at, rest)
            }
            "Self" => return Origin::Unknown,
            first if self.modules.contains_key(&child(from, first)) => (from.to_vec(), path),
            first => {
                return match self.import(from, first) {
                    Some(u) if u.path.first().map(String::as_str) != Some(first) => {
                        let mut full = u.path.clone();
                        full.extend_from_slice(&path[1..]);
                        self.resolve_in(from, &full, depth + 1)
                    }
                    _ => Origin::Outside(path.to_vec()),
                };
            }
        };
        let mut used = 0;
        while used < rest.len() && self.modules.contains_key(&child(&at, &rest[used])) {
            at.push(rest[used].clone());
            used += 1;
        }
        let Some(name) = rest.get(used) else {
            return Origin::Module(at);
        };
        // A name the module imports leads where the import leads.
        if let Some(u) = self.import(&at, name).filter(|u| u.local != "*") {
            let mut full = u.path.clone();
            full.extend_from_slice(&rest[used + 1..]);
            return self.resolve_in(&at, &full, depth + 1);
        }
        let Some(module) = self.modules.get(&at) else {
            return Origin::Unknown;
        };
        if !module.defines.contains(name) {
            // Not defined here: one of the module's glob imports.
            for glob in module.uses.iter().filter(|u| u.local == "*") {
                let mut full = glob.path[..glob.path.len() - 1].to_vec();
                full.extend_from_slice(&rest[used..]);
                match self.resolve_in(&at, &full, depth + 1) {
                    Origin::Module(m) if m == at => {}
                    Origin::Unknown => {}
                    found => return found,
                }
            }
        }
        Origin::Module(at)
    }

    /// Everything `module` names (its `use` declarations and inline paths)
    /// and where each leads.
    pub fn origins(&self, module: &[String]) -> Vec<(Vec<String>, Origin)> {
        let m = &self.modules[module];
        let uses = m.uses.iter().map(|u| {
            let path = if u.local == "*" {
                u.path[..u.path.len() - 1].to_vec()
            } else {
                u.path.clone()
            };
            (path.clone(), self.resolve(module, &path))
        });
        let inline = m.paths.iter().map(|p| (p.clone(), self.resolve(module, p)));
        uses.chain(inline).collect()
    }

    /// `module → the other modules it names an item of`.
    pub fn graph(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut graph = BTreeMap::new();
        for module in self.modules.keys() {
            let targets: BTreeSet<String> = self
                .origins(module)
                .into_iter()
                .filter_map(|(_, origin)| match origin {
                    Origin::Module(m) if m != *module => Some(name(&m)),
                    _ => None,
                })
                .collect();
            graph.insert(name(module), targets);
        }
        graph
    }
}

/// `a::b`, or `crate` for the root.
pub fn name(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_owned()
    } else {
        module.join("::")
    }
}
