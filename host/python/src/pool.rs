//! Objects kept between calls, one per concurrent caller at most: policy
//! instances (each its own wasmtime store and `state.db` connection) and
//! plain store connections. A caller takes one or opens one, and puts it
//! back after its call, so no two threads ever share a wasmtime store (a
//! store used by two threads at once aborts the process).

use std::sync::Mutex;

/// A stack of idle objects. The lock is held only to pop or push, never
/// during a call.
pub struct Pool<T> {
    idle: Mutex<Vec<T>>,
}

impl<T> Pool<T> {
    pub fn new() -> Self {
        Self {
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Run `f` on an idle object, or on a new one from `open`, and keep it
    /// afterwards, also when `f` failed: a policy trap has already thrown
    /// its store away (the next call makes a fresh one), and a store
    /// connection holds no transaction between calls.
    pub fn with<R, E>(
        &self,
        open: impl FnOnce() -> Result<T, E>,
        f: impl FnOnce(&mut T) -> Result<R, E>,
    ) -> Result<R, E> {
        // A panic elsewhere while the lock was held left a plain Vec: usable.
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut item = match idle {
            Some(item) => item,
            None => open()?,
        };
        let result = f(&mut item);
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(item);
        result
    }
}
