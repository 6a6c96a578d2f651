//! The budgets every policy call runs under, and the memory limiter that
//! enforces the memory cap and remembers whether the cap was hit.

use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};

/// Per-call and per-store budgets of the policy.
///
/// Fuel counts WebAssembly work only (roughly one unit per instruction),
/// never time spent in host imports: a slow `state.db` or ejabberd cannot
/// make a good policy fail, while a loop in the guest stops after a bounded
/// amount of work. See [`Limits::default`] for how the numbers were chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Fuel units one call may burn (`configure` gets its own budget of the
    /// same size when an instance is created).
    pub fuel_per_call: u64,
    /// Largest linear memory of the instance, in bytes. A store lives for
    /// many calls when it is reused, so this bounds their sum of growth.
    pub memory_bytes: usize,
}

impl Default for Limits {
    /// 2,000,000,000 fuel per call and a 64 MiB memory.
    ///
    /// Chosen from measurements of the real policy (release host, 2-core
    /// VM, `measure_costs` in `tests/runtime.rs`): `context` over 10,000
    /// rows burns about 9.8 M fuel and grows the guest's memory to about
    /// 4.3 MiB; `resolve` burns about 5,000. The budgets leave 200× (fuel)
    /// and 15× (memory) headroom over a 10k-row history, while the `loop`
    /// variant exhausts the fuel in about 0.1 s (0.6 s for a loop with a
    /// heavier body), and a runaway allocation stops at 64 MiB per store.
    ///
    /// Fuel is charged per WebAssembly instruction, so a bulk instruction
    /// (`memory.copy`/`memory.fill` of many bytes) costs as much as an add:
    /// fuel bounds work, not time, for such code (see the runtime report).
    fn default() -> Self {
        Self {
            fuel_per_call: 2_000_000_000,
            memory_bytes: 64 << 20,
        }
    }
}

/// `StoreLimits` plus a note of whether a growth was refused, so a trap can
/// be reported as "memory cap reached" rather than a bare wasmtime message.
pub(crate) struct Limiter {
    inner: StoreLimits,
    cap: usize,
    /// Set when a memory growth beyond the cap was refused; cleared per call.
    pub(crate) hit: bool,
    /// The largest memory size asked for so far, in bytes (for measuring).
    pub(crate) peak: usize,
}

impl Limiter {
    pub(crate) fn new(limits: &Limits) -> Self {
        Self {
            inner: StoreLimitsBuilder::new()
                .memory_size(limits.memory_bytes)
                // A refused growth traps at once with our message, instead of
                // the guest's allocator aborting with a bare `unreachable`.
                .trap_on_grow_failure(true)
                .instances(16)
                .tables(16)
                .memories(4)
                .build(),
            cap: limits.memory_bytes,
            hit: false,
            peak: 0,
        }
    }

    pub(crate) fn cap(&self) -> usize {
        self.cap
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.peak = self.peak.max(desired);
        let answer = self.inner.memory_growing(current, desired, maximum);
        if !matches!(answer, Ok(true)) {
            self.hit = true;
        }
        answer
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.hit = true;
        self.inner.memory_grow_failed(error)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.inner.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.inner.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }

    fn tables(&self) -> usize {
        self.inner.tables()
    }

    fn memories(&self) -> usize {
        self.inner.memories()
    }
}
