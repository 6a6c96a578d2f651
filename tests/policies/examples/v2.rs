//! `v2`: the shipped policy with its version suffixed `-v2` and nothing
//! else changed, so that hot-swap tests can tell the components they swap
//! apart.

use session_switch_test_policies::{Guest, Shipped, TestPolicy};

pub struct V2;

impl TestPolicy for V2 {
    fn version() -> String {
        format!("{}-v2", Shipped::version())
    }
}

session_switch_test_policies::export!(V2);
