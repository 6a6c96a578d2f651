//! The component a [`Policy`](crate::Policy) serves now, which hot swaps
//! replace while instances keep calling.

use super::component::Loaded;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// The component served now and its generation.
pub(crate) struct Current {
    loaded: RwLock<Arc<Loaded>>,
    /// Bumped on every swap, under the write lock: an instance compares it
    /// with the one it holds, without locking, before every call.
    generation: AtomicU64,
}

impl Current {
    pub(crate) fn new(loaded: Arc<Loaded>) -> Self {
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
