//! `session_switch._native`: the Rust host ([`session_switch::Bridge`]) for
//! Python. A thin layer: it converts arguments and answers (the CLI's JSON
//! shapes, [`session_switch::json`]) and releases the GIL while the host
//! works; every rule stays in the policy, every guard in the Rust host.
//!
//! - `bridge.rs`: the `Bridge` class, one method per host call;
//! - `tagging.rs`: the `[YOU] ` edits on Hermes's own loader output;
//! - `pool.rs`: instances and connections kept between calls, one per
//!   concurrent caller (one `Bridge` serves any number of Python threads);
//! - `watch.rs`: the policy file's watcher of one `Bridge`;
//! - `convert.rs`: answers as Python objects; `error.rs`: the exception.

mod bridge;
mod convert;
mod error;
mod pool;
mod tagging;
mod watch;

use error::SessionSwitchError;
use pyo3::prelude::*;
use std::ffi::OsString;

/// Where this module was built from: its version and whether SQLite is the
/// process's own (always, for this module: it links no SQLite of its own).
#[pyfunction]
fn build_info<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
    let value = serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "sqlite": "system",
        "sqlite_version": session_switch::sqlite_version(),
    });
    convert::to_py(py, &value)
}

/// The console script `xmpp-session-bridge` (`session_switch.cli`): run
/// the command line `argv` (the script's path first) as the binary does,
/// with the GIL released for the whole run (a bot's life), and return the
/// exit status. The process is the command's: its log goes to stderr as
/// the binary's does, not to Python's `logging`.
#[pyfunction]
fn run_cli(py: Python<'_>, argv: Vec<OsString>) -> u8 {
    let launch = session_switch_cli::Launch {
        // The executable is Python: a legacy script must run this script.
        command: argv.first().and_then(|p| std::path::absolute(p).ok()),
        plugin_import: Some(Box::new(plugin_import)),
    };
    py.detach(|| session_switch_cli::run_from_args(argv, launch))
}

/// `doctor`'s `plugin-imports` link: `session_switch.cli.plugin_import`
/// in this interpreter, the one Hermes would load the plugin in.
fn plugin_import() -> Result<String, String> {
    Python::attach(|py| {
        py.import("session_switch.cli")?
            .call_method0("plugin_import")?
            .extract::<String>()
    })
    .map_err(|e| e.to_string())
}

/// What a process that serves Python callers needs, once, before its first
/// host: tracing events (policy swapped or rejected, policy failures) reach
/// Python's `logging` through the `log` crate, and wasmtime installs no
/// signal handlers (Python's faulthandler, which Hermes enables, would
/// take a policy trap's signal and abort the process). The console script
/// needs neither, so module import does not do this.
pub(crate) fn serve_python() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = pyo3_log::try_init();
        session_switch::runtime::disable_signal_traps();
    });
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add(
        "SessionSwitchError",
        m.py().get_type::<SessionSwitchError>(),
    )?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<bridge::Bridge>()?;
    m.add_function(wrap_pyfunction!(build_info, m)?)?;
    m.add_function(wrap_pyfunction!(run_cli, m)?)?;
    Ok(())
}
