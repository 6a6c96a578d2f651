//! Objects kept between calls, one per concurrent caller at most: policy
//! instances, each its own wasmtime store and `state.db` connection. A
//! caller takes one or opens one, and puts it back after its call, so no
//! two threads ever share a wasmtime store (a store used by two threads at
//! once aborts the process).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// A stack of idle objects, each tagged with the generation it was opened
/// in. The lock is held only to pop or push, never during a call.
pub struct Pool<T> {
    idle: Mutex<Vec<(u64, T)>>,
    generation: AtomicU64,
}

impl<T> Pool<T> {
    pub fn new() -> Self {
        Self {
            idle: Mutex::new(Vec::new()),
            generation: AtomicU64::new(0),
        }
    }

    /// Run `f` on an idle object of the current generation, or on a new
    /// one from `open`, and keep it afterwards, also when `f` failed: a
    /// policy trap has already thrown its store away (the next call makes a
    /// fresh one), and a store connection holds no transaction between
    /// calls. Objects of an older generation are dropped, not reused.
    pub fn with<R, E>(
        &self,
        open: impl FnOnce() -> Result<T, E>,
        f: impl FnOnce(&mut T) -> Result<R, E>,
    ) -> Result<R, E> {
        let current = self.generation.load(Ordering::Acquire);
        let idle = {
            // A panic elsewhere while the lock was held left a plain Vec: usable.
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            idle.retain(|(g, _)| *g == current);
            idle.pop()
        };
        let (generation, mut item) = match idle {
            Some(tagged) => tagged,
            None => (current, open()?),
        };
        let result = f(&mut item);
        if generation == self.generation.load(Ordering::Acquire) {
            self.idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((generation, item));
        }
        result
    }

    /// Retire every object opened so far: idle ones are dropped at the next
    /// call, ones in use when their call ends. For objects that copied a
    /// state that has changed (an instance's settings list the compression
    /// continuations that existed when it was made).
    pub fn renew(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}
