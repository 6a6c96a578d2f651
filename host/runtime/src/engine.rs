//! What every component of one [`Policy`](crate::Policy) runs on and never
//! changes: the wasmtime engine (fuel metering, epoch interruption and its
//! ticker), the linker (our host interface only, no WASI) and the options.

use super::bindings::SessionSwitch;
use super::engine_config;
use super::imports::StoreData;
use super::limits::{Limits, start_ticker};
use crate::Failure;
use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker};

/// How a [`Policy`](crate::Policy) loads and runs its component.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyOptions {
    /// Fuel, memory and guest-time budgets of every call.
    pub limits: Limits,
    /// Keep an instance's `Store` between calls that ended well (`true`,
    /// the default), or make a fresh store and instance, and run
    /// `configure` again, for every call. A `Store` is never reused after a
    /// trap or an invalid answer either way.
    ///
    /// Reuse is the default because a fresh store per call costs several
    /// times a whole `resolve` (docs/src/performance.md has the figures).
    pub reuse_store: bool,
    /// Serve a `resolve` whose decision still holds from the instance's
    /// memo, and a `tag` row answered before from its row memo (`true`, the
    /// default; needs `reuse_store`): docs/src/design/where-the-time-goes.md,
    /// [`PolicyInstance::resolve`](crate::PolicyInstance::resolve),
    /// [`PolicyInstance::tag_summaries`](crate::PolicyInstance::tag_summaries).
    /// `false` runs the policy for every call (for measuring it).
    pub memo: bool,
    /// Run the component's `self-check` before using it (a load is refused
    /// when it fails). Hot swaps always run it.
    pub self_check: bool,
    /// How many characters of each row
    /// [`PolicyInstance::tag`](crate::PolicyInstance::tag) shows the policy
    /// (`context` lets the policy choose). The policy judges a row on the
    /// length it asks `context`'s history for and cuts longer prefixes (WIT
    /// `policy.tag`; 8 × 6 + the longest name + 2 for this repository's
    /// policy), so this only needs to be at least that: 256 covers names of
    /// up to 206 characters.
    pub tag_prefix_chars: u32,
}

impl Default for PolicyOptions {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            reuse_store: true,
            memo: true,
            self_check: true,
            tag_prefix_chars: 256,
        }
    }
}

/// What all instances of one [`Policy`](crate::Policy) share, across hot
/// swaps: the engine, the linker and the options.
pub(crate) struct Runtime {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<StoreData>,
    pub(crate) options: PolicyOptions,
    /// Whether the engine traps through signal handlers (the default), or
    /// checks explicitly ([`disable_signal_traps`]): each has its own
    /// embedded artifact.
    pub(crate) signal_traps: bool,
}

impl Runtime {
    /// An engine with fuel metering and epoch interruption on (both are part
    /// of a precompiled artifact's compatibility key) and a ticker thread advancing the
    /// epoch ([`start_ticker`]); a linker with the host interface only.
    ///
    /// Errors (kind `policy`): wasmtime cannot be set up, the ticker thread
    /// cannot start, or the host interface cannot be linked.
    pub(crate) fn new(options: PolicyOptions) -> Result<Self, Failure> {
        // The settings `examples/precompile.rs` precompiles the embedded
        // component with.
        let signal_traps = SIGNAL_TRAPS.load(std::sync::atomic::Ordering::Relaxed);
        let config = engine_config::config(signal_traps);
        let engine = Engine::new(&config)
            .map_err(|e| Failure::policy(format!("cannot set up wasmtime: {e}")))?;
        start_ticker(&engine)?;
        let mut linker = Linker::new(&engine);
        SessionSwitch::add_to_linker::<StoreData, HasSelf<StoreData>>(&mut linker, |data| data)
            .map_err(|e| Failure::policy(format!("cannot link the host interface: {e}")))?;
        Ok(Self {
            engine,
            linker,
            options,
            signal_traps,
        })
    }
}

static SIGNAL_TRAPS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Make every [`Policy`](crate::Policy) created after this call run without
/// signal handlers (wasmtime's `signals_based_traps(false)`): generated code
/// checks bounds and traps explicitly instead of faulting. For a host
/// embedded in a process with signal handlers of its own: inside Hermes,
/// Python's `faulthandler` is installed after wasmtime's handlers, takes a
/// trap's `SIGILL` first and aborts the process. Costs some speed.
pub fn disable_signal_traps() {
    SIGNAL_TRAPS.store(false, std::sync::atomic::Ordering::Relaxed);
}
