//! The test clock: a file that every process of a test reads as the
//! host's clock (WIT `host.now`).

/// For tests only: when set (and not empty), the host's clock (WIT
/// `host.now`) reads the Unix time in seconds (e.g. `1800000000.5`) from
/// the file this variable names, at every call, instead of the system
/// clock: a test moves time for every process at once (the bots' `admit`
/// calls, `send`, `active`) by rewriting the file. A file that cannot be
/// read or holds no finite number reads as NaN, which the policy refuses
/// (kind `policy`, "not a Unix time"): never a silent fall-back to the real
/// clock.
pub const TEST_CLOCK_ENV: &str = "SESSION_SWITCH_TEST_CLOCK_FILE";

/// The file [`TEST_CLOCK_ENV`] names, read once per process: a `getenv` on
/// every `now` would weigh on every served `resolve`. Tests set it for the
/// processes they start.
static TEST_CLOCK: std::sync::LazyLock<Option<std::path::PathBuf>> =
    std::sync::LazyLock::new(|| {
        std::env::var_os(TEST_CLOCK_ENV)
            .filter(|path| !path.is_empty())
            .map(std::path::PathBuf::from)
    });

/// The time in the test clock's file ([`TEST_CLOCK_ENV`]), NaN when unreadable.
pub(super) fn read(path: &std::path::Path) -> f64 {
    let read = std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|text| text.trim().parse::<f64>().map_err(|e| e.to_string()))
        .and_then(|t| {
            if t.is_finite() {
                Ok(t)
            } else {
                Err(format!("{t} is not a finite number"))
            }
        });
    read.unwrap_or_else(|e| {
        tracing::warn!(
            target: "session_switch::hermes_imports",
            "test clock {} ({TEST_CLOCK_ENV}) is unreadable: {e}",
            path.display()
        );
        f64::NAN
    })
}

/// The file [`TEST_CLOCK_ENV`] names, when set.
pub(super) fn path() -> Option<&'static std::path::Path> {
    TEST_CLOCK.as_deref()
}
