//! `alloc`: `resolve` allocates 1 MiB after 1 MiB until the memory limit
//! stops it.

use session_switch_test_policies::{Decision, Failure, TestPolicy, with};

pub struct Alloc;

impl TestPolicy for Alloc {
    fn resolve(_agent: String, _session_id: String) -> Result<Decision, Failure> {
        with(|_| {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1u8; 1 << 20]);
                std::hint::black_box(&hoard);
            }
        })
    }
}

session_switch_test_policies::export!(Alloc);
