//! `v3`: the shipped policy with its version suffixed `-v3` and nothing
//! else changed, so that hot-swap tests can tell the components they swap
//! apart.

use session_switch_test_policies::{Guest, Shipped, TestPolicy};

pub struct V3;

impl TestPolicy for V3 {
    fn version() -> String {
        format!("{}-v3", Shipped::version())
    }
}

session_switch_test_policies::export!(V3);
