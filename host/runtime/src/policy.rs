//! The policy component as callers hold it: load it (embedded, from a
//! file, from bytes), make instances of it, see what is loaded. Hot swaps
//! are in `swap.rs`.

use super::bindings::Settings;
use super::component::{
    ComponentSource, EMBEDDED_COMPONENT, EMBEDDED_SHA256, LoadInfo, prepare, read_component,
};
use super::engine::{PolicyOptions, Runtime};
use super::host_imports::HostImports;
use super::instance::PolicyInstance;
use super::served::Served;
use crate::Failure;
use sha2::{Digest, Sha256};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// The policy component, loaded and checked; cheap to clone and share
/// between threads. Make one [`PolicyInstance`] per thread (or per request
/// handler) with [`Policy::instance`].
#[derive(Clone)]
pub struct Policy {
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) current: Arc<Served>,
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("info", &self.info())
            .finish()
    }
}

impl Policy {
    /// The component embedded in the host binary ([`EMBEDDED_COMPONENT`]).
    ///
    /// Errors (kind `policy`): the embedded bytes are refused, which means
    /// the host was built with a broken component.
    pub fn embedded(options: PolicyOptions) -> Result<Self, Failure> {
        Self::new(
            EMBEDDED_COMPONENT,
            &EMBEDDED_SHA256,
            ComponentSource::Embedded,
            options,
        )
    }

    /// The component in file `path`.
    ///
    /// Errors: kind `bad-input` when the file cannot be read (the message
    /// names the path); kind `policy` when it is not a usable policy
    /// component (not a component, imports WASI or another interface,
    /// exports another interface, does not type-check, traps, or fails its
    /// self-check). The message names the path and the reason.
    pub fn load(path: impl AsRef<Path>, options: PolicyOptions) -> Result<Self, Failure> {
        let path = path.as_ref();
        let bytes = read_component(path)?;
        let sha = Sha256::digest(&bytes).into();
        Self::new(
            &bytes,
            &sha,
            ComponentSource::File(path.to_owned()),
            options,
        )
    }

    /// A component given as bytes (same checks and errors as [`Policy::load`]).
    pub fn from_bytes(bytes: &[u8], options: PolicyOptions) -> Result<Self, Failure> {
        Self::new(
            bytes,
            &Sha256::digest(bytes).into(),
            ComponentSource::Bytes,
            options,
        )
    }

    /// `sha`: the SHA-256 of `bytes`.
    fn new(
        bytes: &[u8],
        sha: &[u8; 32],
        source: ComponentSource,
        options: PolicyOptions,
    ) -> Result<Self, Failure> {
        let self_check = options.self_check;
        let runtime = Arc::new(Runtime::new(options)?);
        let loaded = prepare(&runtime, bytes, sha, source, None, self_check)?;
        Ok(Self {
            runtime,
            current: Arc::new(Served::new(loaded)),
        })
    }

    /// A caller of the policy for one thread: its own `Store` and
    /// instance, `imports` behind the host imports, `settings` passed to
    /// the policy's `configure`. Cheap; the instance is made on the first
    /// call, so invalid settings show up as that call's error (kind as the
    /// policy says, e.g. `bad-input`).
    pub fn instance(&self, imports: impl HostImports, settings: Settings) -> PolicyInstance {
        PolicyInstance::new(
            self.runtime.clone(),
            self.current.clone(),
            Box::new(imports),
            settings,
        )
    }

    /// What is loaded now (after any hot swap).
    pub fn info(&self) -> LoadInfo {
        self.current.get().0.info.clone()
    }

    /// The current component's `version` (as answered when it was loaded).
    pub fn version(&self) -> String {
        self.current.get().0.info.version.clone()
    }

    /// The options this policy was made with.
    pub fn options(&self) -> &PolicyOptions {
        &self.runtime.options
    }
}
