//! The Python embedding of the policy (`examples/python-gateway/`, issue 8)
//! under `make test`: runs its unittest suite with the venv's pinned
//! `wasmtime` (`make venv`). The suite compares the Python host with the
//! Rust CLI on copies of the real Hermes fixtures, sends through the test
//! run's ejabberd (the `EJ_*` variables reach it through this process's
//! environment), and tests traps, fallbacks and hot swaps.

use session_switch_tests::{fixtures_dir, venv_python, workspace_root};
use std::process::Command;

/// Fewer tests than this means discovery lost a file: a failure, not a pass.
const AT_LEAST: usize = 25;

#[test]
fn python_gateway_suite() {
    let Some(fixtures) = fixtures_dir() else {
        return;
    };
    let _heavy = session_switch_tests::heavy();
    let root = workspace_root();
    let python = venv_python();
    let gateway = root.join("examples/python-gateway");
    let out = Command::new(&python)
        .args(["-m", "unittest", "discover", "-v", "-s"])
        .arg(gateway.join("tests"))
        .arg("-t")
        .arg(&gateway)
        .env("HERMES_FIXTURES", &fixtures)
        .current_dir(&root)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", python.display()));
    // unittest reports on stderr.
    let report = String::from_utf8_lossy(&out.stderr);
    println!("{report}");
    assert!(
        out.status.success(),
        "the Python gateway's suite failed:\n{report}"
    );
    let ran: usize = report
        .lines()
        .find_map(|l| {
            l.strip_prefix("Ran ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no `Ran N tests` line in:\n{report}"));
    assert!(
        ran >= AT_LEAST,
        "only {ran} tests ran (expected at least {AT_LEAST})"
    );
    // Under `make test` nothing may be skipped: the fixtures are there and
    // so is the ejabberd (`SESSION_SWITCH_REQUIRE_EJABBERD=1`).
    if std::env::var("SESSION_SWITCH_REQUIRE_EJABBERD").as_deref() == Ok("1") {
        assert!(
            !report.contains("skipped"),
            "tests were skipped under make test:\n{report}"
        );
    }
}
