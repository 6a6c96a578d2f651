//! The glue every test policy shares. A test policy is the shipped policy
//! with one behaviour changed, for a host test to watch the host cope: a
//! type implementing [`TestPolicy`] that overrides only the export it
//! changes (every other export runs the shipped one), exported with
//! [`export!`]. Each is a program in `examples/`; the host's tests load them
//! from `target/policy/variants/<name>.wasm` (`make variants`).
//!
//! ```ignore
//! struct Panic;
//! impl TestPolicy for Panic {
//!     fn resolve(_agent: String, _session_id: String) -> Result<Decision, Failure> {
//!         with(|_| panic!("resolve panicked on purpose"))
//!     }
//! }
//! session_switch_test_policies::export!(Panic);
//! ```

use std::marker::PhantomData;

pub use session_switch_policy as policy;
pub use session_switch_policy::component::{Component as Shipped, with};
pub use session_switch_policy::exports::agentsmeeting::session_switch::policy::Guest;
pub use session_switch_policy::{
    Admission, ContextResult, Decision, Failure, Receipt, RecordStatus, RoomMessage, RowEdit,
    RowSummaries, Settings,
};

/// The WIT `policy` exports, written once: [`TestPolicy`], whose every
/// method defaults to the shipped one, and the `Guest` impl of
/// [`Exports`] that calls a test policy's methods. A WIT change that adds
/// or changes an export breaks the build here.
macro_rules! exports {
    ($(fn $name:ident($($arg:ident: $type:ty),* $(,)?) -> $answer:ty;)*) => {
        /// A test policy: each method is the WIT export of the same name and
        /// defaults to the shipped policy's ([`Shipped`]); override only
        /// the one the test is about.
        pub trait TestPolicy {
            $(fn $name($($arg: $type),*) -> $answer {
                <Shipped as Guest>::$name($($arg),*)
            })*
        }

        impl<T: TestPolicy> Guest for Exports<T> {
            $(fn $name($($arg: $type),*) -> $answer {
                T::$name($($arg),*)
            })*
        }
    };
}

/// The component exports of test policy `T` ([`export!`] exports them).
pub struct Exports<T>(PhantomData<T>);

exports! {
    fn version() -> String;
    fn self_check() -> Result<String, String>;
    fn configure(settings: Settings) -> Result<(), Failure>;
    fn resolve(agent: String, session_id: String) -> Result<Decision, Failure>;
    fn tag(agent: String, rows: RowSummaries) -> Result<Vec<RowEdit>, Failure>;
    fn context(
        agent: String,
        session_id: String,
        limit: Option<u32>,
    ) -> Result<ContextResult, Failure>;
    fn send(agent: String, cli: String, text: String) -> Result<Receipt, Failure>;
    fn active(agent: Option<String>) -> Result<Vec<RecordStatus>, Failure>;
    fn clear(agent: Option<String>) -> Result<Vec<String>, Failure>;
    fn is_own_message(agent: String, sender: String) -> Result<bool, Failure>;
    fn admit(agent: String, message: RoomMessage) -> Result<Admission, Failure>;
}

/// Export test policy `$policy` as the component's `policy` interface, with
/// the policy crate's own export macro (our world's type information
/// included). Only on wasm32: natively the symbols cannot link (the
/// policy crate's `lib.rs`).
#[macro_export]
macro_rules! export {
    ($policy:ty) => {
        /// This program's component exports.
        pub type Exported = $crate::Exports<$policy>;

        #[cfg(target_arch = "wasm32")]
        $crate::policy::export!(Exported with_types_in $crate::policy);
    };
}
