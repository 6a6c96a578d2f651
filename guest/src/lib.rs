//! The session-switch policy: the rules of DESIGN §3 and §8 as a pure
//! WebAssembly component. This file is glue only (`generate!`, the `Guest`
//! impl, `export!`): the rules live in plain modules that also compile
//! natively, re-exported here for property, differential and host tests.
//!
//! Native use: build a [`Policy`] over any [`Host`] (e.g. the test double
//! [`MemoryHost`]) and call the same methods the component exports.

wit_bindgen::generate!({
    world: "session-switch",
    path: "../wit",
    additional_derives: [PartialEq],
    // With a public export macro, our exports' type information is emitted
    // by `export!` only, so the `variant-other-interface` test build can
    // leave our world out of its component (see `variants.rs`).
    pub_export_macro: true,
});

pub mod body;
pub mod echo;
pub mod env;
pub mod failure;
pub mod host;
pub mod loop_guard;
pub mod memory;
pub mod policy;
pub mod redirect;
pub mod samples;
pub mod self_check;
pub mod send;
pub mod settings;
pub mod tagging;
#[cfg(any(
    feature = "variant-panic",
    feature = "variant-loop",
    feature = "variant-alloc",
    feature = "variant-bad-self-check",
    feature = "variant-bad-edits",
    feature = "variant-other-interface",
    feature = "variant-memcopy",
    feature = "variant-chase",
    feature = "variant-reach",
    feature = "variant-spy",
    feature = "variant-hijack"
))]
mod variants;

pub use agentsmeeting::session_switch::types::*;
pub use host::Host;
pub use memory::MemoryHost;
pub use policy::Policy;
pub use settings::ValidSettings;

#[cfg(not(feature = "variant-other-interface"))]
mod component {
    use std::cell::RefCell;

    use crate::exports::agentsmeeting::session_switch::policy::Guest;
    use crate::host::WitHost;
    use crate::{
        ContextResult, Decision, Failure, Policy, Receipt, RecordStatus, RowEdit, RowSummary,
        Settings,
    };

    thread_local! {
        /// The instance's policy: settings arrive once through `configure`
        /// and serve every later call of this instance.
        static POLICY: RefCell<Policy<WitHost>> = RefCell::new(Policy::new(WitHost));
    }

    /// Run `f` on the instance's policy, with the panic hook in place.
    fn with<T>(f: impl FnOnce(&mut Policy<WitHost>) -> T) -> T {
        install_panic_hook();
        POLICY.with_borrow_mut(f)
    }

    /// A component has no stderr: route the panic message to the host's
    /// log (level error) before the trap, so a person can see why.
    fn install_panic_hook() {
        // Natively the imports are unreachable stubs: keep the default hook.
        #[cfg(target_arch = "wasm32")]
        {
            use crate::host::Host;
            static ONCE: std::sync::Once = std::sync::Once::new();
            ONCE.call_once(|| {
                std::panic::set_hook(Box::new(|info| {
                    let message = format!("session-switch policy {info}");
                    WitHost.log(crate::LogLevel::Error, &message);
                }))
            });
        }
    }

    struct Component;

    impl Guest for Component {
        fn version() -> String {
            with(|p| p.version())
        }
        fn self_check() -> Result<String, String> {
            #[cfg(feature = "variant-bad-self-check")]
            return crate::variants::self_check();
            #[cfg(not(feature = "variant-bad-self-check"))]
            with(|p| p.self_check())
        }
        fn configure(settings: Settings) -> Result<(), Failure> {
            with(|p| p.configure(settings))
        }
        fn resolve(agent: String, session_id: String) -> Result<Decision, Failure> {
            #[cfg(any(
                feature = "variant-panic",
                feature = "variant-loop",
                feature = "variant-alloc",
                feature = "variant-memcopy",
                feature = "variant-chase",
                feature = "variant-spy"
            ))]
            with(|_| crate::variants::in_resolve());
            #[cfg(feature = "variant-reach")]
            return Ok(crate::variants::reach(&agent, &session_id));
            #[cfg(feature = "variant-hijack")]
            return with(|p| p.resolve(&agent, &session_id)).map(crate::variants::hijack);
            #[cfg(not(any(feature = "variant-reach", feature = "variant-hijack")))]
            with(|p| p.resolve(&agent, &session_id))
        }
        fn tag(agent: String, rows: Vec<RowSummary>) -> Result<Vec<RowEdit>, Failure> {
            let edits = with(|p| p.tag(&agent, &rows));
            #[cfg(feature = "variant-bad-edits")]
            let edits = edits.map(|e| crate::variants::bad_edits(e, rows.len()));
            edits
        }
        fn context(
            agent: String,
            session_id: String,
            limit: Option<u32>,
        ) -> Result<ContextResult, Failure> {
            #[cfg(feature = "variant-hijack")]
            let result = with(|p| crate::variants::hijack_context(p, &agent, &session_id, limit));
            #[cfg(not(feature = "variant-hijack"))]
            let result = with(|p| p.context(&agent, &session_id, limit));
            #[cfg(feature = "variant-bad-edits")]
            let result = result.map(|mut c| {
                c.edits = crate::variants::bad_edits(c.edits, u32::MAX as usize);
                c
            });
            result
        }
        fn send(agent: String, cli: String, text: String) -> Result<Receipt, Failure> {
            with(|p| p.send(&agent, &cli, &text))
        }
        fn active(agent: Option<String>) -> Result<Vec<RecordStatus>, Failure> {
            with(|p| p.active(agent.as_deref()))
        }
        fn clear(agent: Option<String>) -> Result<Vec<String>, Failure> {
            with(|p| p.clear(agent.as_deref()))
        }
        fn is_own_message(agent: String, sender: String) -> Result<bool, Failure> {
            #[cfg(feature = "variant-reach")]
            with(|_| crate::variants::read_clock());
            with(|p| p.is_own_message(&agent, &sender))
        }
    }

    // Only the wasm build exports: the native build (rlib for tests, and a
    // cdylib nobody loads) cannot link symbols named `pkg:ns/iface@v#func`.
    #[cfg(target_arch = "wasm32")]
    crate::export!(Component with_types_in crate);
}
