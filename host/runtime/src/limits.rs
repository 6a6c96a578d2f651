//! The budgets every policy call runs under: the memory limiter that
//! enforces the memory cap and remembers whether the cap was hit, and the
//! guest clock that bounds a call's own running time (time in host imports
//! not counted) through wasmtime's epoch interruption.

use std::sync::LazyLock;
use std::time::{Duration, Instant};
use wasmtime::{Engine, ResourceLimiter, StoreLimits, StoreLimitsBuilder, UpdateDeadline};

pub use session_switch_contract::limits::{MAX_BODY_CHARS_LIMIT, max_text_bytes};

/// Per-call and per-store budgets of the policy.
///
/// Fuel counts WebAssembly work only (roughly one unit per instruction),
/// never time spent in host imports: a slow `state.db` or ejabberd cannot
/// make a good policy fail, while a loop in the guest stops after a bounded
/// amount of work. Fuel does not bound time (an instruction that misses
/// the cache costs what any other costs), so a call is also stopped when its own running time passes
/// [`Limits::guest_time_per_call`]; time in host imports is not counted
/// there either. See [`Limits::default`] for how the numbers were chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Fuel units one call may burn (`configure` gets its own budget of the
    /// same size when an instance is created).
    pub fuel_per_call: u64,
    /// Largest linear memory of the instance, in bytes. A store lives for
    /// many calls when it is reused, so this bounds their sum of growth.
    pub memory_bytes: usize,
    /// Longest time one call may spend in the policy itself: the calling
    /// thread's CPU time from the call's start, minus the wall-clock time
    /// spent inside host imports (an `ejabberdctl` send waits for an Erlang VM
    /// to boot; the transports have their own time limits). CPU time, not
    /// wall-clock time, so that a loaded machine, which leaves the thread
    /// waiting for a core, does not fail a good policy. Imports are timed by
    /// the wall clock because the thread's CPU clock is a system call (far
    /// slower than the wall clock's vDSO read), read only twice per call: an
    /// import's wall time is at least its CPU time, so the guest is never
    /// charged for the host's work, and at most gains the time an import
    /// waited (bounded by the busy timeouts and the transports' time limits).
    /// Checked every [`EPOCH_TICK`] of wall-clock time, so a call runs at most
    /// about one tick longer (more on a machine too loaded to run the ticker
    /// thread).
    pub guest_time_per_call: Duration,
}

impl Default for Limits {
    /// 2,000,000,000 fuel per call, a 64 MiB memory and 2 s of guest time.
    ///
    /// Chosen from what the real policy costs (`measure_costs` in
    /// `tests/all/runtime.rs` prints it):
    /// its largest honest call, `context` over 10,000 rows, stays two orders
    /// of magnitude under the fuel, more than one under the memory and
    /// tens of times under the guest time even in a debug host (the
    /// canonical ABI's copying of the summaries counts as guest time),
    /// while the test variants that loop or allocate without end stop
    /// within a fraction of a second, and a runaway allocation at 64 MiB
    /// per store.
    ///
    /// Fuel is charged per WebAssembly instruction (and, in wasmtime 48,
    /// per byte of `memory.copy`/`memory.fill`), whatever the instruction
    /// costs in time: a walk through memory that misses the cache on every
    /// step burns only a few units per cache miss, so the `chase` test
    /// variant would run for tens of seconds on its fuel. The guest time
    /// limit bounds such code: `chase` stops after 2 s (`tests/all/sandbox.rs`).
    fn default() -> Self {
        Self {
            fuel_per_call: 2_000_000_000,
            memory_bytes: 64 << 20,
            guest_time_per_call: Duration::from_secs(2),
        }
    }
}

/// How often the engine's epoch advances, i.e. how often a running call's
/// guest time is looked at (wasmtime's epoch interruption: the compiled
/// policy checks the epoch at function entries and loop heads, and calls
/// back only when the deadline passed).
///
/// The checks and the timing of imports cost little per call
/// (docs/src/performance.md); a short tick keeps the overshoot of the
/// limit small against the limit itself.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Advance `engine`'s epoch every [`EPOCH_TICK`] on a thread of its own,
/// until the engine is dropped (the thread holds only a weak handle, so it
/// never keeps an engine alive; it ends within one tick of the last drop).
///
/// Errors: the thread cannot be spawned (kind `policy`).
pub(crate) fn start_ticker(engine: &Engine) -> Result<(), crate::Failure> {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("session-switch-epoch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(EPOCH_TICK);
                match weak.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => return,
                }
            }
        })
        .map(drop)
        .map_err(|e| {
            crate::Failure::policy(format!(
                "cannot start the policy's timer thread: {e}; the system is out of threads"
            ))
        })
}

/// The CPU time the calling thread has used, as a point to measure from.
///
/// `CLOCK_THREAD_CPUTIME_ID` where the system has it (Linux, macOS, BSDs;
/// `GetThreadTimes` on Windows), through the `cpu-time` crate; elsewhere
/// wall-clock time since the first look, so the limit still holds, counted
/// as before.
pub(crate) fn thread_time() -> Duration {
    static FALLBACK: LazyLock<Instant> = LazyLock::new(Instant::now);
    match cpu_time::ThreadTime::try_now() {
        Ok(now) => now.as_duration(),
        Err(_) => FALLBACK.elapsed(),
    }
}

/// The CPU time of the current call (see [`thread_time`]) less the
/// wall-clock time inside host imports: the guest's own time; and whether
/// the guest went past its limit.
///
/// A call runs on one thread from start to end (wasmtime's synchronous
/// calls), which is what makes the thread's CPU time the call's.
#[derive(Debug)]
pub(crate) struct GuestClock {
    limit: Duration,
    started: Duration,
    in_imports: Duration,
    /// Set when the epoch callback stopped the call for its guest time;
    /// cleared per call.
    pub(crate) hit: bool,
}

impl GuestClock {
    pub(crate) fn new(limits: &Limits) -> Self {
        Self {
            limit: limits.guest_time_per_call,
            started: thread_time(),
            in_imports: Duration::ZERO,
            hit: false,
        }
    }

    /// Start timing a new call.
    pub(crate) fn begin(&mut self) {
        self.started = thread_time();
        self.in_imports = Duration::ZERO;
        self.hit = false;
    }

    /// Count `spent` (one host import, wall-clock time) as not the guest's.
    pub(crate) fn add_import(&mut self, spent: Duration) {
        self.in_imports += spent;
    }

    /// The guest's own time in this call so far.
    pub(crate) fn guest_time(&self) -> Duration {
        thread_time()
            .saturating_sub(self.started)
            .saturating_sub(self.in_imports)
    }

    pub(crate) fn limit(&self) -> Duration {
        self.limit
    }

    /// The epoch callback: stop the call once its guest time passed the
    /// limit, else look again at the next tick. Not fewer looks: ticks come
    /// late on a loaded machine, so a deadline counted in ticks would
    /// overshoot; one look costs well under a microsecond per tick.
    pub(crate) fn on_deadline(&mut self) -> UpdateDeadline {
        if self.guest_time() >= self.limit {
            self.hit = true;
            UpdateDeadline::Interrupt
        } else {
            UpdateDeadline::Continue(1)
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
