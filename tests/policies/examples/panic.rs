//! `panic`: `resolve` panics, a trap, with the message on the host's log
//! (through the shipped panic hook); every other export works.

use session_switch_test_policies::{Decision, Failure, TestPolicy, with};

pub struct Panic;

impl TestPolicy for Panic {
    fn resolve(_agent: String, _session_id: String) -> Result<Decision, Failure> {
        with(|_| panic!("variant-panic: resolve panicked on purpose (test build)"))
    }
}

session_switch_test_policies::export!(Panic);
