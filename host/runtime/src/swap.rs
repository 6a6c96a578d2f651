//! Hot swap: replace the policy while callers keep running. The new
//! component is compiled, type-checked, instantiated
//! once and made to pass `self-check` and `configure` off the hot path;
//! then one `Arc` is swapped. Calls in flight finish on the old component;
//! each instance picks up the new one at its next call. Anything that fails
//! a check is rejected with a `tracing` line and the old policy keeps
//! serving.

use super::bindings::Settings;
use super::component::{ComponentSource, LoadInfo, prepare, read_component};
use super::policy::Policy;
use crate::Failure;
use sha2::{Digest, Sha256};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// What one accepted swap cost.
#[derive(Clone, Debug, PartialEq)]
pub struct SwapReport {
    /// The component now serving (its compile and check times inside).
    pub info: LoadInfo,
    /// Read + compile + check, all before the swap.
    pub prepare_time: Duration,
    /// How long the swap held the lock callers read: the only pause they
    /// can see.
    pub pause: Duration,
}

impl Policy {
    /// Load the component in `path` and swap it in if it passes every check
    /// (valid component, our imports only, our export, type-check,
    /// `self-check`, and `configure` with `settings` when given). The
    /// current component keeps serving during the checks and after any
    /// failure. Unchanged bytes (same SHA-256) are not swapped: `Ok(None)`.
    ///
    /// Errors as [`Policy::load`]; nothing changes on error.
    pub fn reload(
        &self,
        path: impl AsRef<Path>,
        settings: Option<&Settings>,
    ) -> Result<Option<SwapReport>, Failure> {
        let path = path.as_ref();
        let started = Instant::now();
        let bytes = read_component(path)?;
        let sha: [u8; 32] = Sha256::digest(&bytes).into();
        if super::component::hex(&sha) == self.current.get().0.info.sha256 {
            return Ok(None);
        }
        let loaded = prepare(
            &self.runtime,
            &bytes,
            &sha,
            ComponentSource::File(path.to_owned()),
            settings,
            true,
        )?;
        let prepare_time = started.elapsed();
        let info = loaded.info.clone();
        let pause = self.current.swap(loaded);
        Ok(Some(SwapReport {
            info,
            prepare_time,
            pause,
        }))
    }

    /// Watch `path` on a thread of its own and [`reload`](Policy::reload)
    /// it whenever its modification time, size or inode changes. Replace
    /// the file atomically (write beside it, then rename): a half-written
    /// file is rejected like any bad one, and picked up once complete.
    ///
    /// The watcher stops when the returned [`Watcher`] is dropped.
    pub fn watch(&self, path: impl Into<PathBuf>, options: WatchOptions) -> Watcher {
        let path = path.into();
        let shared = Arc::new(WatchShared {
            stop: Mutex::new(false),
            wake: Condvar::new(),
            stats: Mutex::new(WatchStats::default()),
        });
        let thread = {
            let policy = self.clone();
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("session-switch-watch".into())
                .spawn(move || watch_loop(&policy, &path, &options, &shared))
                .expect("spawn the policy watcher thread")
        };
        Watcher {
            shared,
            thread: Some(thread),
        }
    }
}

/// How a [`Watcher`] works.
#[derive(Clone, Debug)]
pub struct WatchOptions {
    /// Time between two looks at the file (default 100 ms).
    pub interval: Duration,
    /// The settings a new component must accept in `configure` before it is
    /// swapped in; `None` skips that check.
    pub settings: Option<Settings>,
}

impl Default for WatchOptions {
    fn default() -> Self {
        Self {
            interval: Duration::from_millis(100),
            settings: None,
        }
    }
}

/// What a watcher has done so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WatchStats {
    /// Components swapped in.
    pub swaps: u64,
    /// Changed files rejected (the old policy kept serving).
    pub rejections: u64,
    /// The last rejection's message.
    pub last_rejection: Option<String>,
    /// The last swap.
    pub last_swap: Option<SwapReport>,
}

struct WatchShared {
    stop: Mutex<bool>,
    wake: Condvar,
    stats: Mutex<WatchStats>,
}

/// A running watcher of a policy file; dropping it stops the thread.
pub struct Watcher {
    shared: Arc<WatchShared>,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    /// What the watcher has done so far.
    pub fn stats(&self) -> WatchStats {
        self.shared
            .stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stop watching and wait for the thread.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        *self.shared.stop.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.shared.wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.halt();
    }
}

/// What identifies a version of the file without reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    size: u64,
    dev: u64,
    inode: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some(Stamp {
        modified: meta.modified().ok(),
        size: meta.len(),
        dev: meta.dev(),
        inode: meta.ino(),
    })
}

fn watch_loop(policy: &Policy, path: &Path, options: &WatchOptions, shared: &WatchShared) {
    // Nothing seen yet: the first look reloads, which is a no-op when the
    // bytes are those being served, and catches a change made between
    // loading the policy and starting this thread.
    let mut seen: Option<Stamp> = None;
    loop {
        {
            let stop = shared.stop.lock().unwrap_or_else(|e| e.into_inner());
            let (stop, _) = shared
                .wake
                .wait_timeout_while(stop, options.interval, |stop| !*stop)
                .unwrap_or_else(|e| e.into_inner());
            if *stop {
                return;
            }
        }
        let now = stamp(path);
        if now == seen || now.is_none() {
            // Unchanged, or gone for a moment (mid-rename): keep serving.
            continue;
        }
        seen = now;
        match policy.reload(path, options.settings.as_ref()) {
            Ok(None) => {}
            Ok(Some(report)) => {
                tracing::info!(
                    target: "session_switch::runtime",
                    path = %path.display(),
                    version = %report.info.version,
                    prepare_ms = report.prepare_time.as_secs_f64() * 1e3,
                    pause_us = report.pause.as_secs_f64() * 1e6,
                    precompiled = report.info.precompiled,
                    "policy swapped"
                );
                let mut stats = shared.stats.lock().unwrap_or_else(|e| e.into_inner());
                stats.swaps += 1;
                stats.last_swap = Some(report);
            }
            Err(failure) => {
                tracing::warn!(
                    target: "session_switch::runtime",
                    path = %path.display(),
                    serving = %policy.version(),
                    "policy file rejected, the old policy keeps serving: {}",
                    failure.message
                );
                let mut stats = shared.stats.lock().unwrap_or_else(|e| e.into_inner());
                stats.rejections += 1;
                stats.last_rejection = Some(failure.message);
            }
        }
    }
}
