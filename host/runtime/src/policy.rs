//! Loading the policy component: from the bytes embedded in the host, a
//! file, or memory; through the precompiled cache; refused unless it
//! imports only our interfaces (no WASI), exports our `policy` interface,
//! type-checks against the host's WIT, and passes its self-check.

use super::bindings::{SessionSwitchPre, Settings};
use super::cache::{self, CacheMode, CacheUse};
use super::host_imports::{HostImports, NoImports};
use super::imports::StoreData;
use super::instance::PolicyInstance;
use super::limits::Limits;
use crate::Failure;
use sha2::{Digest, Sha256};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine};

/// The component `make component` built (`target/policy/session_switch.wasm`
/// when the host was compiled; `host/runtime/build.rs` finds it).
pub const EMBEDDED_COMPONENT: &[u8] = include_bytes!(env!("SESSION_SWITCH_POLICY_WASM"));

/// The host interface the policy may import (WIT `host`).
pub const HOST_INTERFACE: &str = "agentsmeeting:session-switch/host@0.1.0";
/// The type-only interface the policy may import (WIT `types`).
pub const TYPES_INTERFACE: &str = "agentsmeeting:session-switch/types@0.1.0";
/// The interface the policy must export (WIT `policy`).
pub const POLICY_INTERFACE: &str = "agentsmeeting:session-switch/policy@0.1.0";

/// How a [`Policy`] loads and runs its component.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyOptions {
    /// Fuel, memory and guest-time budgets of every call.
    pub limits: Limits,
    /// Where precompiled components are cached.
    pub cache: CacheMode,
    /// Keep a session's `Store` and instance between calls that ended well
    /// (`true`, the default), or make a fresh one for every call. A `Store`
    /// is never reused after a trap or an invalid answer either way.
    ///
    /// Measured (release host, real policy, 2-core VM): `resolve` on its
    /// longest path (a redirect: three host imports) costs 9–11 µs with
    /// reuse and 69–74 µs with a fresh store and instance per call (which
    /// also repeats `configure`), so reuse is the default.
    pub reuse_store: bool,
    /// Run the component's `self-check` before using it (a load is refused
    /// when it fails). Hot swaps always run it.
    pub self_check: bool,
    /// How many characters of each row [`PolicyInstance::tag`] shows the policy
    /// (`context` lets the policy choose). 256 covers several `[YOU] `
    /// markers, any sensible agent name and a delimiter.
    pub tag_prefix_chars: u32,
}

impl Default for PolicyOptions {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            cache: CacheMode::Default,
            reuse_store: true,
            self_check: true,
            tag_prefix_chars: 256,
        }
    }
}

/// Where a component came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// [`EMBEDDED_COMPONENT`].
    Embedded,
    /// A file (the path as given).
    File(PathBuf),
    /// Bytes handed to [`Policy::from_bytes`].
    Bytes,
}

impl fmt::Display for Source {
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
    pub source: Source,
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
    /// Whether the precompiled cache was used.
    pub cache: CacheUse,
    /// Time to compile the component or load it from the cache.
    pub compile_time: Duration,
    /// Time to check it: imports/exports, type-check, instantiate, `version`
    /// and `self-check` (and `configure` for a hot swap).
    pub check_time: Duration,
}

/// A loaded, checked component, ready to instantiate.
pub(crate) struct Loaded {
    pub(crate) pre: SessionSwitchPre<StoreData>,
    pub(crate) info: LoadInfo,
}

/// What all sessions of one [`Policy`] share and never changes: the
/// engine, the linker (host interface only) and the options.
pub(crate) struct Runtime {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<StoreData>,
    pub(crate) options: PolicyOptions,
}

/// The component a [`Policy`] serves now; replaced by hot swaps.
pub(crate) struct Current {
    loaded: RwLock<Arc<Loaded>>,
    /// Bumped on every swap, under the write lock: a session compares it
    /// with the one it holds, without locking, before every call.
    generation: AtomicU64,
}

impl Current {
    fn new(loaded: Arc<Loaded>) -> Self {
        Self {
            loaded: RwLock::new(loaded),
            generation: AtomicU64::new(0),
        }
    }

    /// The current component and its generation, read together.
    pub(crate) fn get(&self) -> (Arc<Loaded>, u64) {
        let guard = self.loaded.read().unwrap_or_else(|e| e.into_inner());
        (guard.clone(), self.generation.load(Ordering::Acquire))
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Replace the current component; returns how long the write lock was
    /// held (the longest pause a caller can see).
    pub(crate) fn swap(&self, next: Arc<Loaded>) -> Duration {
        let started = Instant::now();
        let old = {
            let mut guard = self.loaded.write().unwrap_or_else(|e| e.into_inner());
            let old = std::mem::replace(&mut *guard, next);
            self.generation.fetch_add(1, Ordering::AcqRel);
            old
        };
        let pause = started.elapsed();
        // The old component lives on while calls in flight hold it.
        drop(old);
        pause
    }
}

/// The policy component, loaded and checked; cheap to clone and share
/// between threads. Make one [`PolicyInstance`] per thread (or per request
/// handler) with [`Policy::session`].
#[derive(Clone)]
pub struct Policy {
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) current: Arc<Current>,
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("info", &self.info())
            .finish()
    }
}

static SIGNAL_TRAPS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Make every [`Policy`] created after this call run without signal
/// handlers (wasmtime's `signals_based_traps(false)`): generated code
/// checks bounds and traps explicitly instead of faulting. For a host
/// embedded in a process with signal handlers of its own: inside Hermes,
/// Python's `faulthandler` is installed after wasmtime's handlers, takes a
/// trap's `SIGILL` first and aborts the process. Costs some speed.
pub fn disable_signal_traps() {
    SIGNAL_TRAPS.store(false, std::sync::atomic::Ordering::Relaxed);
}

/// The engine every component of a [`Policy`] runs on: fuel metering and
/// epoch interruption on (both are part of the precompiled cache's key),
/// with a ticker thread advancing the epoch ([`super::limits::start_ticker`]).
fn engine() -> Result<Engine, Failure> {
    let mut config = Config::new();
    config.consume_fuel(true);
    config.epoch_interruption(true);
    if !SIGNAL_TRAPS.load(std::sync::atomic::Ordering::Relaxed) {
        config.signals_based_traps(false);
        // SAFETY: both are documented Cranelift settings; wasmtime requires
        // them off without signals-based traps (its spectre guards fault on
        // purpose).
        unsafe {
            config.cranelift_flag_set("enable_heap_access_spectre_mitigation", "false");
            config.cranelift_flag_set("enable_table_access_spectre_mitigation", "false");
        }
    }
    let engine = Engine::new(&config)
        .map_err(|e| Failure::policy(format!("cannot set up wasmtime: {e}")))?;
    super::limits::start_ticker(&engine)?;
    Ok(engine)
}

/// A linker with the host interface only: no WASI, nothing else.
fn linker(engine: &Engine) -> Result<Linker<StoreData>, Failure> {
    let mut linker = Linker::new(engine);
    super::bindings::SessionSwitch::add_to_linker::<StoreData, HasSelf<StoreData>>(
        &mut linker,
        |state| state,
    )
    .map_err(|e| Failure::policy(format!("cannot link the host interface: {e}")))?;
    Ok(linker)
}

/// One line on what to do about a refused component.
const REBUILD: &str = "build it with `make component` (wasm32-unknown-unknown, our WIT only)";

/// The component's imports and exports, or why it cannot be ours: any
/// import but [`HOST_INTERFACE`] and [`TYPES_INTERFACE`] (WASI included), or
/// no [`POLICY_INTERFACE`] export.
fn check_interfaces(
    engine: &Engine,
    component: &Component,
    source: &Source,
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

/// Compile, check and probe `bytes` (SHA-256 `sha`). `settings`: also run `configure` with
/// them (hot swap). `self_check`: run the component's self-check.
pub(crate) fn prepare(
    runtime: &Arc<Runtime>,
    bytes: &[u8],
    sha: &[u8; 32],
    source: Source,
    settings: Option<&Settings>,
    self_check: bool,
) -> Result<Arc<Loaded>, Failure> {
    let started = Instant::now();
    let (component, cache) = cache::compile(&runtime.engine, bytes, sha, &runtime.options.cache)
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
    let loaded = Loaded {
        pre,
        info: LoadInfo {
            source: source.clone(),
            sha256: cache::hex(sha),
            size: bytes.len(),
            // Until the probe below asks the component itself.
            version: "unchecked component".into(),
            imports,
            exports,
            cache,
            compile_time,
            check_time: Duration::ZERO,
        },
    };

    // Probe it in a store of its own, with no state.db behind it.
    let probe = |loaded: Arc<Loaded>| -> Result<String, Failure> {
        let mut session =
            PolicyInstance::pinned(runtime.clone(), loaded, Box::new(NoImports), None);
        let refuse = |f: Failure| Failure::policy(format!("refusing {source}: {}", f.message));
        let version = session.version().map_err(refuse)?;
        session.set_label(version.clone());
        if self_check {
            session.self_check().map_err(refuse)?;
        }
        if let Some(settings) = settings {
            session.set_settings(settings.clone());
            session.configure().map_err(|f| {
                Failure::policy(format!(
                    "refusing {source}: it does not accept the current settings: {}",
                    f.message
                ))
            })?;
        }
        Ok(version)
    };
    let loaded = Arc::new(loaded);
    let version = probe(loaded.clone())?;
    let mut loaded = Arc::into_inner(loaded).expect("the probe session is gone");
    loaded.info.version = version;
    loaded.info.check_time = started.elapsed();
    Ok(Arc::new(loaded))
}

/// An error and its causes on one line.
pub(crate) fn one_line(e: &wasmtime::Error) -> String {
    format!("{e:#}")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

impl Policy {
    /// The component embedded in the host binary ([`EMBEDDED_COMPONENT`]).
    ///
    /// Errors (kind `policy`): the embedded bytes are refused, which means
    /// the host was built with a broken component.
    pub fn embedded(options: PolicyOptions) -> Result<Self, Failure> {
        Self::new(EMBEDDED_COMPONENT, Source::Embedded, options)
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
        Self::new(&bytes, Source::File(path.to_owned()), options)
    }

    /// A component given as bytes (same checks and errors as [`Policy::load`]).
    pub fn from_bytes(bytes: &[u8], options: PolicyOptions) -> Result<Self, Failure> {
        Self::new(bytes, Source::Bytes, options)
    }

    fn new(bytes: &[u8], source: Source, options: PolicyOptions) -> Result<Self, Failure> {
        let engine = engine()?;
        let linker = linker(&engine)?;
        let self_check = options.self_check;
        let runtime = Arc::new(Runtime {
            engine,
            linker,
            options,
        });
        let sha: [u8; 32] = Sha256::digest(bytes).into();
        let loaded = prepare(&runtime, bytes, &sha, source, None, self_check)?;
        Ok(Self {
            runtime,
            current: Arc::new(Current::new(loaded)),
        })
    }

    /// A caller of the policy for one thread: its own `Store` and
    /// instance, `imports` behind the host imports, `settings` passed to
    /// the policy's `configure`. Cheap; the instance is made on the first
    /// call, so invalid settings show up as that call's error (kind as the
    /// policy says, e.g. `bad-input`).
    pub fn instance(&self, imports: impl HostImports, settings: Settings) -> PolicyInstance {
        PolicyInstance::following(
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

/// Read a component file; kind `bad-input` naming the path on failure.
pub(crate) fn read_component(path: &Path) -> Result<Vec<u8>, Failure> {
    std::fs::read(path).map_err(|e| {
        Failure::bad_input(format!(
            "cannot read policy component {}: {e}; check the path",
            path.display()
        ))
    })
}
