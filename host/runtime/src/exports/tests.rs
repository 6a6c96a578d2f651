//! Unit tests of the exports' fallbacks: the safe default decision, and
//! each fallback logged under its own call.

use super::*;
use crate::Reason;
use crate::fake_host::{self, FakeRow, settings};
use crate::{EMBEDDED_COMPONENT, Policy, PolicyOptions};
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata};

#[test]
fn the_fallback_decision_loads_the_session_asked_about() {
    let failure = Failure::policy("policy `x` failed in `resolve`: boom");
    let d = fallback_decision("xmpp-mohe-v2", &failure);
    assert_eq!(d.session_id, "xmpp-mohe-v2");
    assert!(!d.redirected);
    assert_eq!(d.reason, Reason::PolicyError);
    assert_eq!(
        d.detail,
        "no redirect: policy `x` failed in `resolve`: boom"
    );
}

/// The fields of each warn event, as text (a `tracing` subscriber that
/// keeps them, so a test can see what a fallback logged).
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<Fields>>>);

/// An event's fields, name and value.
struct Fields(Vec<(String, String)>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().into(), value.into()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().into(), format!("{value:?}")));
    }
}

impl tracing::Subscriber for Warnings {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::always()
    }
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        if *event.metadata().level() == Level::WARN {
            let mut fields = Fields(Vec::new());
            event.record(&mut fields);
            self.0.lock().unwrap().push(fields);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

impl Warnings {
    /// The `call` field of each fallback logged so far.
    fn fallback_calls(&self) -> Vec<String> {
        let events = self.0.lock().unwrap();
        events
            .iter()
            .map(|fields| &fields.0)
            .filter(|fields| {
                fields
                    .iter()
                    .any(|(k, v)| k == "message" && v.starts_with("falling back"))
            })
            .filter_map(|fields| fields.iter().find(|(k, _)| k == "call"))
            .map(|(_, v)| v.clone())
            .collect()
    }
}

/// The one row of the fake host's session.
fn row() -> HistoryRow {
    fake_host::row(7, "user", "zhiwei: 收到")
}

#[test]
fn each_fallback_is_logged_under_its_own_call() {
    let options = PolicyOptions {
        ..PolicyOptions::default()
    };
    let policy = Policy::from_bytes(EMBEDDED_COMPONENT, options).unwrap();
    let mut instance = policy.instance(
        fake_host::host(vec![FakeRow::stored(7, "user", "zhiwei: 收到")]),
        settings(),
    );
    let warnings = Warnings::default();
    tracing::subscriber::with_default(warnings.clone(), || {
        // An agent the settings do not name: the policy refuses
        // (`unknown-agent`), the host falls back.
        let answer = instance
            .context_or_fallback("nobody", "xmpp-mohe-v2", None)
            .unwrap();
        assert_eq!(answer.decision.session_id, "xmpp-mohe-v2");
        assert_eq!(answer.decision.reason, Reason::PolicyError);
        assert_eq!(answer.messages, [row()], "rows as stored");
        let decision = instance.resolve_or_fallback("nobody", "xmpp-mohe-v2");
        assert_eq!(decision.reason, Reason::PolicyError);
    });
    assert_eq!(warnings.fallback_calls(), ["context", "resolve"]);
}
