//! `python.md`, from the Python package's `.pyi` stubs: `python.py` beside
//! this file reads them with the standard library's `ast` (no built
//! extension needed) and prints the page.

use anyhow::{Context, Result, bail};
use std::path::Path;

/// The package whose stubs are read, relative to the workspace root.
pub const PACKAGE: &str = "host/python/python/session_switch";

pub fn markdown(root: &Path) -> Result<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/reference/python.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(PACKAGE)
        .current_dir(root)
        .output()
        .with_context(|| format!("running python3 {}", script.display()))?;
    if !out.status.success() {
        bail!(
            "python3 {} failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8(out.stdout)?)
}
