//! `bad-self-check`: `self-check` refuses, as a broken build would.

use session_switch_test_policies::TestPolicy;

pub struct BadSelfCheck;

impl TestPolicy for BadSelfCheck {
    fn self_check() -> Result<String, String> {
        Err("variant-bad-self-check: self-check fails on purpose (test build)".to_string())
    }
}

session_switch_test_policies::export!(BadSelfCheck);
