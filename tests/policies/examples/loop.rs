//! `loop`: `resolve` never returns; only the fuel budget stops it.

use session_switch_test_policies::{Decision, Failure, TestPolicy, with};

pub struct Loop;

impl TestPolicy for Loop {
    fn resolve(_agent: String, _session_id: String) -> Result<Decision, Failure> {
        with(|_| {
            let mut n = 0u64;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        })
    }
}

session_switch_test_policies::export!(Loop);
