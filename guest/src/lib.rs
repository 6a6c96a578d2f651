//! The session-switch policy: the rules of docs/src/design/rules.md and docs/src/design/contracts.md as a pure
//! WebAssembly component. This file is glue only (`generate!`, the `Guest`
//! impl, `export!`): the rules live in plain modules that also compile
//! natively, re-exported here for property, differential and host tests.
//!
//! Native use: build a [`Rules`] over any [`Host`] (e.g. the tests' fake
//! host, crate `session-switch-fake-host`) and call the same methods the
//! component exports.

wit_bindgen::generate!({
    world: "session-switch",
    path: "../wit",
    additional_derives: [PartialEq],
    // A public export macro: a test policy (`tests/policies`) exports its
    // own `Guest` impl over these types. It also puts our world's type
    // information in `export!` alone, so a crate linking these rules but
    // exporting another world leaves ours out.
    pub_export_macro: true,
});

pub mod body;
pub mod echo;
pub mod failure;
#[cfg(test)]
mod fake_host;
pub mod host;
pub mod loop_guard;
pub mod redirect;
pub mod rows;
pub mod rules;
pub mod samples;
pub mod self_check;
pub mod send;
pub mod settings;
pub mod tagging;
pub mod version;

pub use agentsmeeting::session_switch::types::*;
pub use host::Host;
pub use rules::Rules;
pub use settings::ValidSettings;

/// The component's exports: the instance's one [`Rules`] over the WIT
/// imports and the shipped `Guest` impl ([`component::Component`]). The test
/// policies (`tests/policies`) link this crate without feature `export` and
/// reuse both, exporting their own `Guest` impl.
pub mod component {
    use std::cell::RefCell;

    use crate::exports::agentsmeeting::session_switch::policy::Guest;
    use crate::host::WitHost;
    use crate::{
        Admission, ContextResult, Decision, Failure, Receipt, RecordStatus, RoomMessage, RowEdit,
        RowSummaries, Rules, Settings,
    };

    thread_local! {
        /// The instance's policy: settings arrive once through `configure`
        /// and serve every later call of this instance.
        static POLICY: RefCell<Rules<WitHost>> = RefCell::new(Rules::new(WitHost));
    }

    /// Run `f` on the instance's policy, with the panic hook in place.
    pub fn with<T>(f: impl FnOnce(&mut Rules<WitHost>) -> T) -> T {
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

    /// The shipped policy's exports: each runs the [`Rules`] method of the
    /// same name on the instance's policy.
    pub struct Component;

    impl Guest for Component {
        fn version() -> String {
            with(|p| p.version())
        }
        fn self_check() -> Result<String, String> {
            with(|p| p.self_check())
        }
        fn configure(settings: Settings) -> Result<(), Failure> {
            with(|p| p.configure(settings))
        }
        fn resolve(agent: String, session_id: String) -> Result<Decision, Failure> {
            with(|p| p.resolve(&agent, &session_id))
        }
        fn tag(agent: String, rows: RowSummaries) -> Result<Vec<RowEdit>, Failure> {
            with(|p| p.tag(&agent, &rows))
        }
        fn context(
            agent: String,
            session_id: String,
            limit: Option<u32>,
        ) -> Result<ContextResult, Failure> {
            with(|p| p.context(&agent, &session_id, limit))
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
            with(|p| p.is_own_message(&agent, &sender))
        }
        fn admit(agent: String, message: RoomMessage) -> Result<Admission, Failure> {
            with(|p| p.admit(&agent, &message))
        }
    }

    // Only the wasm build exports: the native build (rlib for tests, and a
    // cdylib nobody loads) cannot link symbols named `pkg:ns/iface@v#func`.
    // Without feature `export` a test policy exports its own impl instead.
    #[cfg(all(target_arch = "wasm32", feature = "export"))]
    crate::export!(Component with_types_in crate);
}
