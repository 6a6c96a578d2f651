//! The component a [`Policy`](crate::Policy) serves now, which hot swaps
//! replace while instances keep calling.

use super::component::Loaded;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// The component served now and its generation.
pub(crate) struct Served {
    loaded: RwLock<Arc<Loaded>>,
    /// Bumped on every swap, under the write lock: an instance compares it
    /// with the one it holds, without locking, before every call.
    generation: AtomicU64,
    /// Components swapped out, kept until no instance holds them: the last
    /// drop of a component unmaps its code and unregisters its types (timed in
    /// `make bench`'s hot swap), which belongs on a swapping thread, not in a
    /// caller's first call on the new component.
    retired: Mutex<Vec<Arc<Loaded>>>,
}

impl Served {
    pub(crate) fn new(loaded: Arc<Loaded>) -> Self {
        Self {
            loaded: RwLock::new(loaded),
            generation: AtomicU64::new(0),
            retired: Mutex::default(),
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
        // The swapped-out components no instance holds any more are dropped
        // first, while callers still run on the current one: dropping one
        // takes wasmtime's type registry, which a caller's first call on
        // `next` needs to instantiate it. An instance drops its store before
        // its `Arc` (`PolicyInstance::refresh`), so one that only this list
        // holds is used by no store.
        let mut retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        retired.retain(|loaded| Arc::strong_count(loaded) > 1);
        let started = Instant::now();
        let old = {
            let mut guard = self.loaded.write().unwrap_or_else(|e| e.into_inner());
            let old = std::mem::replace(&mut *guard, next);
            self.generation.fetch_add(1, Ordering::AcqRel);
            old
        };
        let pause = started.elapsed();
        // Kept while instances hold it; dropped by a later swap.
        retired.push(old);
        pause
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Policy, PolicyOptions};
    use std::sync::Weak;

    /// A new `Loaded` of the embedded component (its compiled code shared).
    fn another(policy: &Policy) -> Arc<Loaded> {
        let (loaded, _) = policy.current.get();
        Arc::new(Loaded {
            pre: loaded.pre.clone(),
            info: loaded.info.clone(),
        })
    }

    #[test]
    fn a_swapped_out_component_is_dropped_by_a_later_swap_once_unused() {
        let options = PolicyOptions {
            ..PolicyOptions::default()
        };
        let policy = Policy::embedded(options).unwrap();
        let (first, second, third) = (another(&policy), another(&policy), another(&policy));
        let current = Served::new(first.clone());
        let weak_first: Weak<Loaded> = Arc::downgrade(&first);

        // An instance still holds the first: kept, not dropped by the swap.
        current.swap(second);
        assert_eq!(current.retired.lock().unwrap().len(), 1);
        assert!(weak_first.upgrade().is_some());

        // Once the instance let go, the next swap drops it (on its thread).
        drop(first);
        current.swap(third);
        assert!(
            weak_first.upgrade().is_none(),
            "the unused component was dropped"
        );
        let retired = current.retired.lock().unwrap();
        assert_eq!(retired.len(), 1, "the second, just swapped out");
        assert_eq!(current.generation(), 2);
    }
}
