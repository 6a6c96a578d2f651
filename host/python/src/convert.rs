//! Answers as Python objects with the CLI's JSON field names
//! ([`session_switch::json`] is the one copy of those shapes), and text
//! and path arguments from Python ([`Text`], [`PathArg`]).

use pyo3::IntoPyObjectExt;
use pyo3::exceptions::PyUnicodeEncodeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyInt, PyList, PyString};
use serde_json::Value;
use session_switch::Failure;
use session_switch::runtime::Decision;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// A JSON value as the Python object `json.loads` would give.
pub fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_bound_py_any(py)?,
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.into_bound_py_any(py)?,
            (None, Some(f)) => f.into_bound_py_any(py)?,
            (None, None) => n.to_string().into_bound_py_any(py)?,
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// `resolve`'s answer, the dict of [`session_switch::json::decision`],
/// built directly: `resolve` runs on every turn of a gateway, and the
/// detour through a `serde_json::Value` (a map, four owned strings) was
/// a measurable part of the binding's own share of it. The keys are
/// interned (made once per process).
pub fn decision<'py>(py: Python<'py>, d: &Decision) -> PyResult<Bound<'py, PyAny>> {
    let dict = PyDict::new(py);
    dict.set_item(intern!(py, "session_id"), &d.session_id)?;
    dict.set_item(intern!(py, "redirected"), d.redirected)?;
    dict.set_item(intern!(py, "reason"), d.reason.as_str())?;
    dict.set_item(intern!(py, "detail"), &d.detail)?;
    dict.set_item(intern!(py, "valid_until"), d.valid_until)?;
    Ok(dict.into_any())
}

/// A `str` argument as UTF-8, borrowed from the Python string (no copy on
/// a call's way in). A Python `str` can hold a lone surrogate
/// (U+D800–U+DFFF, e.g. from `os.fsdecode` or a JSON `"\ud83d"`), which
/// UTF-8 cannot: that is `SessionSwitchError` kind `bad-input`, as the CLI
/// refuses an argument that is not UTF-8 (exit 2), rather than Python's
/// `UnicodeEncodeError`. A value that is not a `str` stays a `TypeError`
/// naming the argument.
pub struct Text<'a>(&'a str);

impl std::ops::Deref for Text<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        self.0
    }
}

impl<'a> FromPyObject<'a, '_> for Text<'a> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, '_, PyAny>) -> PyResult<Self> {
        match <&'a str>::extract(obj) {
            Ok(text) => Ok(Text(text)),
            // A `str` that is not UTF-8; anything else is the `TypeError`.
            Err(why) if obj.is_instance_of::<PyString>() => {
                Err(crate::error::error(Failure::bad_input(format!(
                    "a str argument is not text UTF-8 can carry ({why})"
                ))))
            }
            Err(why) => Err(why),
        }
    }
}

/// A path argument (`str`, `bytes` or `os.PathLike`), as `os.fsencode`
/// gives it to the file system. A `str` it cannot encode (a lone high
/// surrogate) is kind `bad-input`; PyO3's own `PathBuf` extraction panics
/// there. A value of another type stays a `TypeError` naming the argument.
pub struct PathArg(pub PathBuf);

impl FromPyObject<'_, '_> for PathArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, '_, PyAny>) -> PyResult<Self> {
        let py = obj.py();
        let encoded = py
            .import(intern!(py, "os"))?
            .getattr(intern!(py, "fsencode"))?
            .call1((obj,));
        match encoded {
            Ok(bytes) => {
                let bytes = bytes.cast_into::<PyBytes>()?;
                Ok(PathArg(PathBuf::from(OsStr::from_bytes(bytes.as_bytes()))))
            }
            Err(why) if why.is_instance_of::<PyUnicodeEncodeError>(py) => {
                Err(crate::error::error(Failure::bad_input(format!(
                    "a path argument is not one the file system can take ({why})"
                ))))
            }
            Err(why) => Err(why),
        }
    }
}

/// A history limit given as a Python int: a number of rows, or `bad-input`
/// in the CLI's words for `--limit` (a negative or huge int would otherwise
/// be Python's `OverflowError`).
pub fn row_limit(n: &Bound<'_, PyInt>) -> PyResult<u32> {
    // `True` is an int to Python; the CLI's `--limit` takes no such thing.
    let rows = if n.is_instance_of::<PyBool>() {
        None
    } else {
        n.extract::<u32>().ok()
    };
    rows.ok_or_else(|| {
        crate::error::error(Failure::bad_input(format!(
            "limit {n} is not a number of rows (0 to {})",
            u32::MAX
        )))
    })
}
