//! Hermes's optional CJK full-text index (schema v23+): when
//! `~/.hermes/lib/libfts5_cjk.so` loads, Hermes adds `messages_fts_cjk`
//! (tokenizer `cjk_unicode61`) and triggers named `messages_fts_cjk*` on
//! `messages`. Any INSERT into `messages` then fails on a connection without
//! that tokenizer ("no such tokenizer: cjk_unicode61"), so a writer must load
//! the same extension first, or refuse. The triggers are Hermes's: never
//! dropped or altered here.

use std::path::PathBuf;

use rusqlite::LoadExtensionGuard;

use super::HermesStore;
use session_switch_contract::failure::Failure;

/// Environment variable naming the tokenizer extension, as Hermes reads it.
pub const CJK_EXTENSION_ENV: &str = "HERMES_FTS5_CJK_SO";

/// The tokenizer extension to load: `$HERMES_FTS5_CJK_SO` when set and not
/// empty, else `$HERMES_HOME/lib/libfts5_cjk.so` (`~/.hermes/lib/…`).
pub fn cjk_extension_path() -> PathBuf {
    match std::env::var_os(CJK_EXTENSION_ENV) {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => super::hermes_home().join("lib").join("libfts5_cjk.so"),
    }
}

impl HermesStore {
    /// Inside each write transaction, before the first INSERT into
    /// `messages`: if the database has
    /// Hermes's CJK triggers, load the tokenizer extension
    /// ([`cjk_extension_path`]) once; if it cannot be loaded, refuse (kind
    /// `store`) and say why and how to fix it.
    ///
    /// SQL: `SELECT EXISTS(… sqlite_master WHERE type = 'trigger' AND name
    /// GLOB 'messages_fts_cjk*')`, then `sqlite3_load_extension` with the
    /// default entry point (as Python's `load_extension` does for Hermes),
    /// with extension loading enabled only for that call.
    pub(super) fn ensure_cjk_tokenizer(&self) -> Result<(), Failure> {
        if self.cjk_loaded.get() {
            return Ok(());
        }
        let has_triggers: bool = self
            .conn
            .query_row(
                "SELECT EXISTS(SELECT 1 FROM sqlite_master WHERE type = 'trigger' \
                 AND name GLOB 'messages_fts_cjk*')",
                [],
                |row| row.get(0),
            )
            .map_err(|e| self.fail("read the schema", e))?;
        if !has_triggers {
            return Ok(());
        }
        let so = cjk_extension_path();
        let why = format!(
            "{} has Hermes's CJK search triggers (messages_fts_cjk*), whose tokenizer \
             cjk_unicode61 lives in the extension {}",
            self.path.display(),
            so.display()
        );
        let fix = format!(
            "install Hermes's libfts5_cjk.so there or set {CJK_EXTENSION_ENV} to its path; \
             nothing was written"
        );
        if !so.is_file() {
            return Err(Failure::store(format!(
                "refusing to write: {why}, and that file does not exist; {fix}"
            )));
        }
        // SAFETY: the library is Hermes's own tokenizer (or what the user
        // named in HERMES_FTS5_CJK_SO): trusted like any program it runs.
        // No SQL runs while the guard keeps extension loading enabled.
        let loaded = unsafe {
            match LoadExtensionGuard::new(&self.conn) {
                Ok(_guard) => self.conn.load_extension(&so, None::<&str>),
                Err(e) => Err(e),
            }
        };
        loaded.map_err(|e| {
            Failure::store(format!(
                "refusing to write: {why}, and it failed to load ({e}); {fix}"
            ))
        })?;
        self.cjk_loaded.set(true);
        Ok(())
    }
}
