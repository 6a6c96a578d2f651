//! History rows as summaries through the tagger for every sample agent,
//! the edits applied with the host's functions, checked by
//! `session_switch_tests::hostile::check_tagging`: own rows get exactly one
//! `[YOU] `, no imitated tag reaches the model (in any form the contract's
//! untag rule covers, behind any number of blanks), the policy's and the
//! host's untag are the contract's rule restated, a second tagging changes
//! nothing.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use session_switch_policy::Role;
use session_switch_tests::hostile::{RowCase, check_tagging};

#[derive(Arbitrary, Debug)]
struct Row {
    role: u8,
    content: String,
    bridge_agent: Option<u8>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    /// The prefix `context` asks for (57 for the samples) or the one
    /// `PolicyInstance::tag` gives (256).
    long_prefix: bool,
    rows: Vec<Row>,
}

fuzz_target!(|input: Input| {
    let rows: Vec<RowCase> = input
        .rows
        .into_iter()
        .map(|r| RowCase {
            role: match r.role % 8 {
                0..=3 => Role::User,
                4 => Role::Assistant,
                5 => Role::Tool,
                6 => Role::System,
                _ => Role::Other,
            },
            content: r.content,
            bridge_agent: r.bridge_agent.map(|a| usize::from(a % 4)),
        })
        .collect();
    check_tagging(&rows, if input.long_prefix { 256 } else { 57 });
});
