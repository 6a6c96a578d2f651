//! The reference pages under `docs/src/reference/`, made from the code
//! (`cargo run -q -p xtask -- docs`, `make reference`):
//! - `cli.md` and the man page `xmpp-session-bridge.1`, from the CLI's clap
//!   definition ([`cli`]);
//! - `config.md` and `session-switch.schema.json`, from the config's types,
//!   their doc comments and their defaults ([`config`]);
//! - `json.md`, the shapes of the `--json` answers ([`json`]);
//! - `python.md`, from the Python package's `.pyi` stubs ([`python`]).
//!
//! [`check`] compares the pages on disk with what the code makes now; a test
//! of `make test` (tests/all/reference_pages.rs) runs it.

pub mod cli;
pub mod config;
pub mod json;
pub mod markdown;
pub mod python;

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Where the pages live, relative to the workspace root.
pub const DIR: &str = "docs/src/reference";

/// One generated file: its path relative to the workspace root, its text.
pub struct Page {
    pub path: PathBuf,
    pub text: String,
}

/// Every reference page as the code makes it now. `root` is the workspace
/// root (the Python stubs are read from there).
pub fn pages(root: &Path) -> Result<Vec<Page>> {
    let dir = Path::new(DIR);
    let page = |name: &str, text: String| Page {
        path: dir.join(name),
        text,
    };
    Ok(vec![
        page("cli.md", cli::markdown()),
        page("xmpp-session-bridge.1", cli::man_page()?),
        page("config.md", config::markdown()),
        page("session-switch.schema.json", config::schema_json()),
        page("json.md", json::markdown()),
        page("python.md", python::markdown(root)?),
    ])
}

/// Write every page under `root`.
pub fn write(root: &Path) -> Result<()> {
    for page in pages(root)? {
        let path = root.join(&page.path);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, &page.text).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", page.path.display());
    }
    Ok(())
}

/// The pages under `root` that differ from what the code makes now, or are
/// missing; `Err` names them and says what to run.
pub fn check(root: &Path) -> Result<(), String> {
    let generated = pages(root).map_err(|e| format!("making the reference pages: {e:#}"))?;
    check_against(root, &generated)
}

/// [`check`] against pages already made (the test of the check itself
/// passes a temporary copy).
pub fn check_against(root: &Path, generated: &[Page]) -> Result<(), String> {
    let stale: Vec<String> = generated
        .iter()
        .filter(|page| {
            std::fs::read_to_string(root.join(&page.path))
                .ok()
                .as_deref()
                != Some(&page.text)
        })
        .map(|page| page.path.display().to_string())
        .collect();
    if stale.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "reference pages out of date with the code: {}; run `make reference` \
             (cargo run -q -p xtask -- docs) and commit the result",
            stale.join(", ")
        ))
    }
}
