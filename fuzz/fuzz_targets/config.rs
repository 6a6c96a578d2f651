//! Config files through `Config::parse`, checked by
//! `session_switch_tests::hostile::check_config`: refused as `bad-input`
//! naming the file, or accepted only with unique agents, bare JIDs and a
//! configured legacy agent, and then accepted by the policy's `configure`
//! too (gap G3 of docs/src/security.md: the config refuses with its line whatever
//! the policy would refuse).
#![no_main]

use libfuzzer_sys::fuzz_target;
use session_switch_tests::hostile::check_config;

fuzz_target!(|text: &str| {
    check_config(text);
});
