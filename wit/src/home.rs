//! Where Hermes keeps its files: its home folder, by Hermes's own rule. The
//! store (the default `state.db`) and the config (the default config file)
//! both start from it.

use std::path::PathBuf;

/// Hermes's home folder: `$HERMES_HOME` when set and not empty, else
/// `~/.hermes` (Hermes's own rule), else `.hermes` in the current folder
/// when the home folder is unknown.
pub fn hermes_home() -> PathBuf {
    match std::env::var_os("HERMES_HOME") {
        Some(home) if !home.is_empty() => PathBuf::from(home),
        _ => std::env::home_dir()
            .map(|home| home.join(".hermes"))
            .unwrap_or_else(|| PathBuf::from(".hermes")),
    }
}
