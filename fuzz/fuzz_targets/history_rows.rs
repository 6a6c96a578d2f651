//! History rows through the real component as a gateway loads them
//! (`PolicyInstance::tag`: summaries in, edits out, applied by the host), checked
//! by `session_switch_tests::hostile::check_history_rows`: no trap, no
//! invalid edit, every field but the content unchanged, and the contents
//! equal to the native rules' answer.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use session_switch::runtime::PolicyInstance;
use session_switch::HistoryRow;
use session_switch_tests::hostile::{check_history_rows, component_tagger};
use std::sync::{Mutex, OnceLock};

#[derive(Arbitrary, Debug)]
struct Row {
    /// One of Hermes's roles, or any text (`None`).
    role: Option<u8>,
    raw_role: String,
    content: String,
    tool_calls: Option<String>,
    tool_name: Option<String>,
    bridge_wrote: bool,
}

#[derive(Arbitrary, Debug)]
struct Input {
    agent: u8,
    rows: Vec<Row>,
}

/// One component instance for the whole run, as in a gateway.
fn session() -> &'static Mutex<PolicyInstance> {
    static SESSION: OnceLock<Mutex<PolicyInstance>> = OnceLock::new();
    SESSION.get_or_init(|| Mutex::new(component_tagger()))
}

fuzz_target!(|input: Input| {
    let agent = ["mohe", "zhiwei", "xiaoguo"][usize::from(input.agent % 3)];
    let rows: Vec<HistoryRow> = input
        .rows
        .into_iter()
        .enumerate()
        .map(|(i, r)| HistoryRow {
            id: i as i64 + 1,
            role: match r.role.map(|n| n % 4) {
                Some(0) => "user".into(),
                Some(1) => "assistant".into(),
                Some(2) => "tool".into(),
                Some(_) => "system".into(),
                None => r.raw_role.into(),
            },
            content: r.content,
            tool_calls: r.tool_calls,
            tool_call_id: None,
            tool_name: r.tool_name,
            bridge_wrote: r.bridge_wrote,
            loaded: None,
        })
        .collect();
    let mut session = session().lock().unwrap_or_else(|e| e.into_inner());
    check_history_rows(&mut session, agent, rows);
});
