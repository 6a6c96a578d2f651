//! The policy file's watcher of one `Bridge` (the façade's
//! `Bridge::watch_policy`): its counts for `watch_stats`, stopped by
//! `close` or when the `Bridge` goes.

use pyo3::Python;
use serde_json::{Value, json};
use session_switch::runtime::Watcher;
use std::sync::Mutex;

/// The watcher, `None` for the embedded policy, after `close`, or when the
/// `Bridge` was opened with `watch=False`.
pub struct Watch(Mutex<Option<Watcher>>);

impl Watch {
    pub fn new(watcher: Option<Watcher>) -> Self {
        Self(Mutex::new(watcher))
    }

    /// `{"swaps", "rejections", "last_rejection"}`; `None` without a watcher.
    pub fn stats(&self) -> Option<Value> {
        let guard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let stats = guard.as_ref()?.stats();
        Some(json!({
            "swaps": stats.swaps,
            "rejections": stats.rejections,
            "last_rejection": stats.last_rejection,
        }))
    }

    /// Stop watching (with the GIL released while the thread ends).
    pub fn stop(&self, py: Python<'_>) {
        let watcher = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(watcher) = watcher {
            py.detach(|| watcher.stop());
        }
    }
}
