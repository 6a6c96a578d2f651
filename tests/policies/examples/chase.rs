//! `chase`: `resolve` walks through 32 MiB at random. Each step is a
//! handful of instructions (a few fuel units) but a cache and TLB miss
//! (~100 ns), so the fuel budget lasts far longer than a call may take;
//! only the guest time limit stops it.

use session_switch_test_policies::{Decision, Failure, TestPolicy, with};

pub struct Chase;

impl TestPolicy for Chase {
    fn resolve(_agent: String, _session_id: String) -> Result<Decision, Failure> {
        with(|_| {
            let n: usize = 8 << 20;
            let mut next: Vec<u32> = (0..n as u32).collect();
            // Sattolo's shuffle: one cycle through every slot.
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            for i in (1..n).rev() {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let j = (x >> 33) as usize % i;
                next.swap(i, j);
            }
            let mut at = 0u32;
            loop {
                at = next[at as usize];
                std::hint::black_box(at);
            }
        })
    }
}

session_switch_test_policies::export!(Chase);
