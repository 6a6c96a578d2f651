//! The one exception of the module: a [`Failure`] of the host, its kind kept.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use session_switch::Failure;

// Named `session_switch.SessionSwitchError`, where the package exports
// it: pickle (multiprocessing, a process pool) finds a class by its module
// and name, and there is no top-level module `_native` to import.
create_exception!(
    session_switch,
    SessionSwitchError,
    PyException,
    "A failure of session-switch; `.kind` is its class (`bad-input`, `unknown-agent`, \
     `not-accepted`, `busy`, `unknown-outcome`, `store`, `transport`, `policy`), \
     `.message` one line for a person."
);

/// `failure` as a [`SessionSwitchError`] with `.kind` and `.message` set.
pub fn error(failure: Failure) -> PyErr {
    Python::attach(|py| {
        let err = SessionSwitchError::new_err(failure.message.clone());
        let value = err.value(py);
        let _ = value.setattr("kind", failure.kind.as_str());
        let _ = value.setattr("message", failure.message);
        err
    })
}
