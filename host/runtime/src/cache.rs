//! The on-disk cache of precompiled policy components (docs/src/design/toolchain.md, docs/src/design/contracts.md):
//! compiling the component costs tens of milliseconds, loading a
//! precompiled artifact well under one.
//!
//! An entry is keyed by the SHA-256 of the component's bytes and
//! `Engine::precompile_compatibility_hash()` (wasmtime version and engine
//! settings: a `.cwasm` is only valid for the engine that made it). Entries
//! are native code the host will run, so the directory is private (mode
//! 0700, owned by us) and every entry carries the SHA-256 of its payload:
//! an entry that is truncated, corrupted or refused by wasmtime is ignored,
//! recompiled and rewritten, never fatal.

use super::engine_config::ShaHasher;
use sha2::{Digest, Sha256};
use std::fs;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Where precompiled components are kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CacheMode {
    /// `$XDG_CACHE_HOME/session-switch/`, else `~/.cache/session-switch/`
    /// (docs/src/design/contracts.md); no cache when neither can be found.
    #[default]
    Default,
    /// This directory (the CLI's `--cache-dir`); created with mode 0700.
    Dir(PathBuf),
    /// Compile every time (the embedded policy still uses the artifact
    /// precompiled into the host, [`CacheUse::Embedded`]).
    Off,
}

/// How a load used the cache; the caller can tell a cached start from a
/// compile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheUse {
    /// A valid entry was loaded: nothing was compiled.
    Hit,
    /// No entry existed: compiled, and the entry was written.
    Stored,
    /// An entry existed but was unusable (corrupted, or refused by
    /// wasmtime): compiled again and the entry rewritten. The string says why.
    Replaced(String),
    /// Compiled; the cache could not be used or written (the string says
    /// why, e.g. a directory that others may write). Not an error.
    Unavailable(String),
    /// The cache is off ([`CacheMode::Off`]): compiled.
    Off,
    /// The embedded policy's artifact precompiled into the host binary at
    /// build time was used: nothing compiled, the cache neither read nor
    /// written (whatever the [`CacheMode`]).
    Embedded,
}

impl CacheUse {
    /// Whether the component came from the cache without compiling.
    pub fn is_hit(&self) -> bool {
        matches!(self, Self::Hit)
    }

    /// Whether the component was compiled by this load (not from the cache
    /// nor from the host's precompiled artifact).
    pub fn compiled(&self) -> bool {
        !matches!(self, Self::Hit | Self::Embedded)
    }
}

/// The default cache directory: `dirs::cache_dir()` (which is
/// `$XDG_CACHE_HOME`, else `~/.cache` on Linux) + `session-switch`.
pub fn default_cache_dir() -> Option<PathBuf> {
    dirs::cache_dir().map(|dir| dir.join("session-switch"))
}

/// Bytes before the payload of an entry: the SHA-256 of the payload.
const DIGEST_LEN: usize = 32;

/// The entry's file name: hex SHA-256 of (component SHA-256, engine
/// compatibility hash), `.cwasm`.
fn entry_name(engine: &Engine, component_sha256: &[u8; 32]) -> String {
    let mut hasher = ShaHasher(Sha256::new());
    hasher.write(b"session-switch precompiled component v1\0");
    hasher.write(component_sha256);
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!("{}.cwasm", hex(&hasher.0.finalize()))
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Make `dir` (and missing parents) with mode 0700 and check it is ours and
/// private; `Err` says why it cannot hold trusted native code.
fn private_dir(dir: &Path) -> Result<(), String> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create cache directory {}: {e}", dir.display()))?;
    let meta = fs::metadata(dir).map_err(|e| format!("cannot stat {}: {e}", dir.display()))?;
    if !meta.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(format!(
            "cache directory {} belongs to uid {}, not to us (uid {me}); not trusting it",
            dir.display(),
            meta.uid()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("cannot make cache directory {} private: {e}", dir.display()))?;
    }
    Ok(())
}

/// Read and verify an entry; `Ok(None)` when there is none.
fn read_entry(path: &Path) -> Result<Option<Vec<u8>>, String> {
    let mut bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    if bytes.len() < DIGEST_LEN {
        return Err(format!("{} is truncated", path.display()));
    }
    let payload = &bytes[DIGEST_LEN..];
    if Sha256::digest(payload).as_slice() != &bytes[..DIGEST_LEN] {
        return Err(format!(
            "{} is corrupted (checksum mismatch)",
            path.display()
        ));
    }
    bytes.drain(..DIGEST_LEN);
    Ok(Some(bytes))
}

/// Write an entry atomically: a private temp file in the same directory,
/// then rename, so a reader sees the old entry or the whole new one.
fn write_entry(path: &Path, payload: &[u8]) -> Result<(), String> {
    // Unique per process and per write: several threads or processes may
    // fill the same entry at once; the last rename wins, all are equal.
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().expect("entry has a directory");
    let tmp = dir.join(format!(
        ".{}.{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("entry"),
        std::process::id(),
        WRITES.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(&Sha256::digest(payload))?;
        file.write_all(payload)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        format!("cannot write cache entry {}: {e}", path.display())
    })
}

/// Compile `bytes` (whose SHA-256 is `sha256`) through the cache of `mode`.
///
/// Errors are wasmtime's compile errors only (the bytes are not a valid
/// component); every cache problem is reported in the [`CacheUse`] and
/// logged at `warn`, and the component is compiled instead.
pub(crate) fn compile(
    engine: &Engine,
    bytes: &[u8],
    sha256: &[u8; 32],
    mode: &CacheMode,
) -> wasmtime::Result<(Component, CacheUse)> {
    let dir = match mode {
        CacheMode::Off => return Ok((Component::new(engine, bytes)?, CacheUse::Off)),
        CacheMode::Dir(dir) => Some(dir.clone()),
        CacheMode::Default => default_cache_dir(),
    };
    let Some(dir) = dir else {
        let why = "no cache directory: neither $XDG_CACHE_HOME nor $HOME is set".to_owned();
        return Ok((Component::new(engine, bytes)?, CacheUse::Unavailable(why)));
    };
    if let Err(why) = private_dir(&dir) {
        tracing::warn!(target: "session_switch::runtime", "precompiled cache not used: {why}");
        return Ok((Component::new(engine, bytes)?, CacheUse::Unavailable(why)));
    }
    let entry = dir.join(entry_name(engine, sha256));

    let problem = match read_entry(&entry) {
        Ok(None) => None,
        Ok(Some(payload)) => {
            // SAFETY: the payload is an artifact this host wrote (checksum
            // verified) into a directory only we can write; wasmtime checks
            // its version and engine settings and refuses a mismatch.
            match unsafe { Component::deserialize(engine, &payload) } {
                Ok(component) => return Ok((component, CacheUse::Hit)),
                Err(e) => Some(format!("{} was refused by wasmtime: {e}", entry.display())),
            }
        }
        Err(why) => Some(why),
    };
    if let Some(why) = &problem {
        tracing::warn!(target: "session_switch::runtime", "ignoring precompiled cache entry: {why}; recompiling");
    }

    let payload = engine.precompile_component(bytes)?;
    // SAFETY: `payload` was produced by this engine just now.
    let component = unsafe { Component::deserialize(engine, &payload)? };
    let used = match write_entry(&entry, &payload) {
        Ok(()) => match problem {
            Some(why) => CacheUse::Replaced(why),
            None => CacheUse::Stored,
        },
        Err(why) => {
            tracing::warn!(target: "session_switch::runtime", "precompiled cache not written: {why}");
            CacheUse::Unavailable(why)
        }
    };
    Ok((component, used))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EMBEDDED_COMPONENT;

    fn engine() -> Engine {
        let mut config = wasmtime::Config::new();
        config.consume_fuel(true);
        Engine::new(&config).unwrap()
    }

    #[test]
    fn entry_names_depend_on_the_bytes_and_the_engine_settings() {
        let fuel = engine();
        let plain = Engine::default();
        let a = entry_name(&fuel, &[1; 32]);
        assert_eq!(a, entry_name(&fuel, &[1; 32]), "stable");
        assert_ne!(a, entry_name(&fuel, &[2; 32]));
        assert_ne!(a, entry_name(&plain, &[1; 32]), "fuel is part of the key");
        assert!(a.ends_with(".cwasm") && a.len() == 64 + 6, "{a}");
    }

    #[test]
    fn an_entry_with_a_valid_checksum_that_wasmtime_refuses_is_replaced() {
        let engine = engine();
        let dir = tempfile_dir();
        let sha: [u8; 32] = Sha256::digest(EMBEDDED_COMPONENT).into();
        let mode = CacheMode::Dir(dir.clone());
        let entry = dir.join(entry_name(&engine, &sha));

        // An artifact of another engine configuration (no fuel): a real
        // `.cwasm`, checksum intact, but not for this engine.
        let other = Engine::default()
            .precompile_component(EMBEDDED_COMPONENT)
            .unwrap();
        private_dir(&dir).unwrap();
        write_entry(&entry, &other).unwrap();
        let (_, used) = compile(&engine, EMBEDDED_COMPONENT, &sha, &mode).unwrap();
        match used {
            CacheUse::Replaced(why) => assert!(why.contains("refused by wasmtime"), "{why}"),
            other => panic!("expected Replaced, got {other:?}"),
        }
        let (_, used) = compile(&engine, EMBEDDED_COMPONENT, &sha, &mode).unwrap();
        assert_eq!(used, CacheUse::Hit);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn read_entry_checks_the_checksum() {
        let dir = tempfile_dir();
        private_dir(&dir).unwrap();
        let path = dir.join("x.cwasm");
        assert_eq!(read_entry(&path), Ok(None));
        write_entry(&path, b"payload").unwrap();
        assert_eq!(read_entry(&path), Ok(Some(b"payload".to_vec())));
        let mut bytes = fs::read(&path).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        fs::write(&path, &bytes).unwrap();
        assert!(read_entry(&path).unwrap_err().contains("checksum mismatch"));
        fs::write(&path, b"short").unwrap();
        assert!(read_entry(&path).unwrap_err().contains("truncated"));
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A fresh directory under the system temp dir (the host crate has no
    /// `tempfile`); removed by each test.
    fn tempfile_dir() -> PathBuf {
        static N: AtomicU64 = AtomicU64::new(0);
        std::env::temp_dir().join(format!(
            "session-switch-cache-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ))
    }
}
