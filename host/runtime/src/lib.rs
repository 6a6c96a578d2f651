//! The policy component under wasmtime: load, limit, call, hot-swap.
//!
//! ```no_run
//! # use session_switch_runtime::*;
//! # fn demo(imports: impl HostImports, settings: Settings) -> Result<(), session_switch_runtime::Failure> {
//! let policy = Policy::embedded(PolicyOptions::default())?;
//! let mut instance = policy.instance(imports, settings);
//! let decision = instance.resolve("mohe", "xmpp-mohe-v2")?;
//! # Ok(()) }
//! ```
//!
//! The component imports only our `host` interface (no WASI); every call
//! runs under fuel, memory and guest-time budgets ([`Limits`]); a trap or an
//! invalid answer is a `policy` failure and the store is thrown away; hot
//! swaps ([`Policy::watch`]) replace the component while callers keep
//! running.
//!
//! The modules, each naming items only of those listed before it:
//! `bindings` (the one `bindgen!`), `limits`, `host_imports` (the trait),
//! `row_edits` (summaries and edits), `memo` (decisions `resolve` may serve
//! again), `tag_memo` (edits `tag` may serve again), `imports` (the store's
//! data and the WIT host interface), `artifact_layout` (the precompiled
//! artifact's layout), `engine_config` (the engine settings),
//! `call` (the one call path in a store), `answer_checks` (checks of the policy's
//! answers), `engine` (engine, linker, options), `precompiled` (the
//! embedded component precompiled at build time), `component` (compile,
//! check, probe), `served` (what hot swaps replace), `instance` (a
//! caller's store), `exports` (each export as a method), `policy` (the
//! façade), `swap` (reload and watch).

mod answer_checks;
mod artifact_layout;
pub mod bindings;
mod call;
mod component;
mod engine;
mod engine_config;
mod exports;
#[cfg(test)]
mod fake_host;
mod host_imports;
mod imports;
mod instance;
mod limits;
mod memo;
mod policy;
mod precompiled;
mod row_edits;
mod served;
mod swap;
mod tag_memo;

pub use bindings::{
    Admission, AdmitReason, Agent, AllowBots, ContextResult, Decision, EditAction, LogLevel,
    LoopGuard, Meeting, MeetingOverrides, Reason, Receipt, RecordStatus, ReplyTarget, Role,
    RoomMessage, RowEdit, RowSummaries, RowSummary, SendPlan, Sent, Settings,
};
pub use component::{
    ComponentSource, EMBEDDED_COMPONENT, HOST_INTERFACE, LoadInfo, PACKAGE, PACKAGE_VERSION,
    POLICY_INTERFACE, TYPES_INTERFACE,
};
pub use engine::{PolicyOptions, disable_signal_traps};
pub use engine_config::Cpu;
pub use exports::ContextAnswer;
pub use host_imports::{DataVersion, HostImports};
pub use host_imports::{HistoryRow, LoadedMessage, sent_text, unix_now};
pub use instance::PolicyInstance;
pub use limits::{Limits, MAX_BODY_CHARS_LIMIT, max_text_bytes};
pub use policy::Policy;
pub use precompiled::{embedded_precompiled, precompile_artifact};
pub use row_edits::{YOU_TAG, could_hide_marker, prefix, push_summary, role_of, tag, untag};
pub use session_switch_contract as contract;
pub use session_switch_contract::failure::{Failure, FailureKind};
pub use session_switch_contract::keys::is_our_meta_key;
pub use swap::{SwapReport, WatchOptions, WatchStats, Watcher};
