//! Message bodies through the policy's normalisation, checked by
//! `session_switch_tests::hostile::check_body`: idempotent, nothing XML
//! forbids, no escape sequences, no leading `[YOU]`, the room's body equals
//! history's, refusals are `bad-input`; the host's `untag`/`tag` agree.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use session_switch_tests::hostile::check_body;

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    /// The maximum body length, in characters.
    max_chars: u16,
    text: &'a str,
}

fuzz_target!(|input: Input<'_>| {
    check_body(input.text, u32::from(input.max_chars));
});
