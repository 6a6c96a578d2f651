//! `memcopy`: `resolve` loops on bulk memory copies. Each round is a
//! `memory.copy` of 8 MiB; wasmtime 48 charges fuel per byte copied, so the
//! fuel budget bounds it (an older or differently configured wasmtime
//! charges one unit per copy).

use session_switch_test_policies::{Decision, Failure, TestPolicy, with};

pub struct Memcopy;

impl TestPolicy for Memcopy {
    fn resolve(_agent: String, _session_id: String) -> Result<Decision, Failure> {
        with(|_| {
            let mut buffer = vec![0u8; 16 << 20];
            let half = buffer.len() / 2;
            loop {
                buffer.copy_within(0..half, half);
                buffer.copy_within(half.., 0);
                std::hint::black_box(&mut buffer);
            }
        })
    }
}

session_switch_test_policies::export!(Memcopy);
