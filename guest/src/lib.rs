//! The session-switch policy: the rules of DESIGN §3 and §8 as a pure
//! WebAssembly component. This file is glue only: the rules live in
//! `redirect`, `tagging`, `body` and `echo`, which also compile natively.

wit_bindgen::generate!({ world: "session-switch", path: "../wit" });

pub mod body;
pub mod echo;
pub mod env;
pub mod redirect;
pub mod tagging;

pub use agentsmeeting::session_switch::types::*;

use exports::agentsmeeting::session_switch::policy::Guest;

struct Policy;

impl Guest for Policy {
    fn version() -> String {
        env::version()
    }
    fn self_check() -> Result<String, String> {
        todo!()
    }
    fn configure(_settings: Settings) -> Result<(), Failure> {
        todo!()
    }
    fn resolve(_agent: String, _session_id: String) -> Result<Decision, Failure> {
        todo!()
    }
    fn tag(_agent: String, _rows: Vec<RowSummary>) -> Result<Vec<RowEdit>, Failure> {
        todo!()
    }
    fn context(
        _agent: String,
        _session_id: String,
        _limit: Option<u32>,
    ) -> Result<ContextResult, Failure> {
        todo!()
    }
    fn send(_agent: String, _cli: String, _text: String) -> Result<Receipt, Failure> {
        todo!()
    }
    fn active(_agent: Option<String>) -> Result<Vec<RecordStatus>, Failure> {
        todo!()
    }
    fn clear(_agent: Option<String>) -> Result<Vec<String>, Failure> {
        todo!()
    }
    fn is_own_message(_agent: String, _sender: String) -> Result<bool, Failure> {
        todo!()
    }
}

// Only the wasm build exports: the native build (rlib for tests, and a
// cdylib nobody loads) cannot link symbols named `pkg:ns/iface@v#func`.
#[cfg(target_arch = "wasm32")]
export!(Policy);
