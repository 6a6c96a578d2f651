//! A policy component, from bytes to ready: compiled (or the embedded
//! one's precompiled artifact loaded), refused unless it imports only our interfaces (no
//! WASI), exports our `policy` interface and type-checks against the host's
//! WIT, then probed in stores of its own — `version`, `self-check`, and
//! `configure` when settings are given — before anyone calls it.

use super::bindings::{SessionSwitchPre, Settings};
use super::call::{Live, NotReady, no_check, one_line, policy_failure};
use super::engine::Runtime;
use super::host_imports::NoImports;
use super::imports::{Call, StoreData};
use super::precompiled;
use crate::Failure;
use crate::answer_checks;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The component `make component` built (`target/policy/session_switch.wasm`
/// when the host was compiled; `host/runtime/build.rs` finds it).
pub const EMBEDDED_COMPONENT: &[u8] = include_bytes!(env!("SESSION_SWITCH_POLICY_WASM"));

/// SHA-256 of [`EMBEDDED_COMPONENT`], taken by `build.rs` (a start need not
/// hash the component it was built with).
pub(crate) const EMBEDDED_SHA256: [u8; 32] =
    *include_bytes!(concat!(env!("OUT_DIR"), "/component.sha256"));

/// The host interface the policy may import (WIT `host`).
pub const HOST_INTERFACE: &str = "agentsmeeting:session-switch/host@0.3.0";
/// The type-only interface the policy may import (WIT `types`).
pub const TYPES_INTERFACE: &str = "agentsmeeting:session-switch/types@0.3.0";
/// The interface the policy must export (WIT `policy`).
pub const POLICY_INTERFACE: &str = "agentsmeeting:session-switch/policy@0.3.0";

/// Where a component came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ComponentSource {
    /// [`EMBEDDED_COMPONENT`].
    Embedded,
    /// A file (the path as given).
    File(PathBuf),
    /// Bytes handed to [`Policy::from_bytes`](crate::Policy::from_bytes).
    Bytes,
}

impl fmt::Display for ComponentSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Embedded => f.write_str("the embedded policy component"),
            Self::File(path) => write!(f, "policy component {}", path.display()),
            Self::Bytes => f.write_str("the policy component given as bytes"),
        }
    }
}

/// What was loaded, and how.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadInfo {
    pub source: ComponentSource,
    /// Hex SHA-256 of the component's bytes.
    pub sha256: String,
    /// Size of the component in bytes.
    pub size: usize,
    /// What the component's `version` export answered.
    pub version: String,
    /// The component's imports (interface names), as declared.
    pub imports: Vec<String>,
    /// The component's exports (interface or function names), as declared.
    pub exports: Vec<String>,
    /// Whether the host's precompiled artifact was used (nothing was
    /// compiled); a component from a file is always compiled.
    pub precompiled: bool,
    /// Time to compile the component or to load the precompiled artifact.
    pub compile_time: Duration,
    /// Time to check it: imports/exports, type-check, instantiate, `version`
    /// and `self-check` (and `configure` for a hot swap).
    pub check_time: Duration,
}

/// A compiled, checked component, ready to instantiate.
pub(crate) struct Loaded {
    pub(crate) pre: SessionSwitchPre<StoreData>,
    pub(crate) info: LoadInfo,
}

/// One line on what to do about a refused component.
const REBUILD: &str = "build it with `make component` (wasm32-unknown-unknown, our WIT only)";

/// Our WIT package and its version (`wit/*.wit`).
pub const PACKAGE: &str = "agentsmeeting:session-switch";
pub const PACKAGE_VERSION: &str = "0.3.0";

/// The version of `name` (`agentsmeeting:session-switch/IFACE@V`) when it
/// is one of our interfaces at a version other than ours.
fn other_version_of_ours(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(PACKAGE)?.strip_prefix('/')?;
    let (_, version) = rest.split_once('@')?;
    (version != PACKAGE_VERSION).then_some(version)
}

/// The component's imports and exports, or why it cannot be ours: any
/// import but [`HOST_INTERFACE`] and [`TYPES_INTERFACE`] (WASI included), or
/// no [`POLICY_INTERFACE`] export.
fn check_interfaces(
    engine: &Engine,
    component: &Component,
    source: &ComponentSource,
) -> Result<(Vec<String>, Vec<String>), Failure> {
    let ty = component.component_type();
    let imports: Vec<String> = ty
        .imports(engine)
        .map(|(name, _)| name.to_owned())
        .collect();
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_owned())
        .collect();
    // A component of our package at another version: say which, before
    // its imports read as foreign (WIT packages carry a version; a breaking
    // change bumps it, STYLE.md "Spin").
    if let Some(other) = imports
        .iter()
        .chain(&exports)
        .find_map(|name| other_version_of_ours(name))
    {
        return Err(Failure::policy(format!(
            "refusing {source}: it was built for `{PACKAGE}@{other}`, but this host speaks \
             `{PACKAGE}@{PACKAGE_VERSION}`; rebuild the policy against this version's wit/ \
             (`make component`)"
        )));
    }
    let foreign: Vec<&str> = imports
        .iter()
        .map(String::as_str)
        .filter(|name| *name != HOST_INTERFACE && *name != TYPES_INTERFACE)
        .collect();
    if let Some(first) = foreign.first() {
        let more = match foreign.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        return Err(Failure::policy(format!(
            "refusing {source}: it imports `{first}`{more}, but a policy may import only \
             `{HOST_INTERFACE}` and `{TYPES_INTERFACE}` (no WASI, no files, no network); {REBUILD}"
        )));
    }
    if !exports.iter().any(|name| name == POLICY_INTERFACE) {
        let found = if exports.is_empty() {
            "nothing".to_owned()
        } else {
            exports
                .iter()
                .map(|name| format!("`{name}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(Failure::policy(format!(
            "refusing {source}: it does not export `{POLICY_INTERFACE}` (it exports {found}); \
             it is not a session-switch policy of this version; {REBUILD}"
        )));
    }
    Ok((imports, exports))
}

/// Compile, check and probe `bytes` (SHA-256 `sha`) from `source`.
/// `settings`: the probe also runs `configure` with them (hot swap);
/// `self_check`: it runs the component's `self-check`.
///
/// Errors (kind `policy`, the message starting with `refusing SOURCE`): not
/// a component, foreign imports, no `policy` export, a WIT mismatch, or a
/// probe that traps, fails its self-check or refuses the settings.
pub(crate) fn prepare(
    runtime: &Runtime,
    bytes: &[u8],
    sha: &[u8; 32],
    source: ComponentSource,
    settings: Option<&Settings>,
    self_check: bool,
) -> Result<Arc<Loaded>, Failure> {
    let started = Instant::now();
    let (component, precompiled) = precompiled::compile(
        &runtime.engine,
        bytes,
        sha,
        (source == ComponentSource::Embedded).then_some(runtime.signal_traps),
    )
    .map_err(|e| {
        Failure::policy(format!(
            "refusing {source}: it is not a valid WebAssembly component ({}); {REBUILD}",
            one_line(&e)
        ))
    })?;
    let compile_time = started.elapsed();

    let started = Instant::now();
    let (imports, exports) = check_interfaces(&runtime.engine, &component, &source)?;
    let pre = runtime
        .linker
        .instantiate_pre(&component)
        .and_then(SessionSwitchPre::new)
        .map_err(|e| {
            Failure::policy(format!(
                "refusing {source}: it does not match the host's WIT contract ({}); {REBUILD}",
                one_line(&e)
            ))
        })?;
    let version = probe(runtime, &pre, &source, settings, self_check)?;
    Ok(Arc::new(Loaded {
        pre,
        info: LoadInfo {
            source,
            sha256: hex(sha),
            size: bytes.len(),
            version,
            imports,
            exports,
            precompiled,
            compile_time,
            check_time: started.elapsed(),
        },
    }))
}

/// How a component is named before it answered `version`.
const UNCHECKED: &str = "unchecked component";

/// Run the fresh component `pre` with nothing behind its imports
/// ([`NoImports`]: no state.db): `version`, then `self-check` when
/// `self_check`, in one store; then `configure` with `settings`, when
/// given, in a new store, as an instance's first call runs it. Each call
/// takes the one call path ([`Live::run`]). `Ok` holds the version.
fn probe(
    runtime: &Runtime,
    pre: &SessionSwitchPre<StoreData>,
    source: &ComponentSource,
    settings: Option<&Settings>,
    self_check: bool,
) -> Result<String, Failure> {
    let limits = runtime.options.limits;
    let data = || StoreData::new(Box::new(NoImports), &limits, UNCHECKED.into());
    let refuse = |f: Failure| Failure::policy(format!("refusing {source}: {}", f.message));
    let mut live = Live::start(&runtime.engine, pre, data(), &limits)
        .map_err(|(what, _)| refuse(policy_failure(UNCHECKED, Call::Configure, &what)))?;
    let (version, _) = live
        .run(
            Call::Version,
            None,
            &limits,
            |g, s| g.call_version(s),
            no_check,
        )
        .map_err(|what| refuse(policy_failure(UNCHECKED, Call::Version, &what)))?;
    live.data_mut().policy_version = version.clone();
    if self_check {
        let broke = |what: String| refuse(policy_failure(&version, Call::SelfCheck, &what));
        let (verdict, _) = live
            .run(
                Call::SelfCheck,
                None,
                &limits,
                |g, s| g.call_self_check(s),
                no_check,
            )
            .map_err(broke)?;
        answer_checks::self_check(verdict).map_err(broke)?;
    }
    if let Some(settings) = settings {
        let mut data = data();
        data.policy_version = version.clone();
        Live::configured(&runtime.engine, pre, data, &limits, settings).map_err(|(why, _)| {
            let failure = match why {
                NotReady::Broke(what) => policy_failure(&version, Call::Configure, &what),
                NotReady::Refused(failure) => failure,
            };
            Failure::policy(format!(
                "refusing {source}: it does not accept the current settings: {}",
                failure.message
            ))
        })?;
    }
    Ok(version)
}

/// Read a component file; kind `bad-input` naming the path on failure.
pub(crate) fn read_component(path: &Path) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|e| {
        Failure::bad_input(format!(
            "cannot read policy component {}: {e}; check the path",
            path.display()
        ))
    })
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
