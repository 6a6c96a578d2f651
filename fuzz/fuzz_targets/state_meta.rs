//! `state_meta` values (mohe's record, the legacy `xmpp_session_bridge.py`'s
//! key, zhiwei's record) through `parse_record` and the redirect rule over
//! the fake host, checked by `session_switch_tests::hostile::check_record`:
//! redirects only by docs/src/design/rules.md, only the record's own agent, never to an XMPP,
//! missing, expired or future session; `active` agrees; nothing is written.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use session_switch_policy::samples::{SAMPLE_CLI, SAMPLE_NOW};
use session_switch_tests::hostile::{RecordCase, check_record, record_value};

/// The session a shaped record names.
#[derive(Arbitrary, Debug)]
enum Target {
    Cli,
    OwnXmpp,
    OtherXmpp,
    Any(String),
}

#[derive(Arbitrary, Debug)]
enum Value {
    /// Any text, JSON or not.
    Raw(String),
    /// A send's record shape with fuzzed parts; `age_ms` is how old the
    /// timestamp is (milliseconds), `timestamp` replaces it with any text.
    Shaped {
        target: Target,
        age_ms: i64,
        timestamp: Option<String>,
        agent: Option<String>,
    },
}

impl Value {
    fn text(&self) -> String {
        match self {
            Value::Raw(text) => text.clone(),
            Value::Shaped {
                target,
                age_ms,
                timestamp,
                agent,
            } => {
                let session = match target {
                    Target::Cli => SAMPLE_CLI,
                    Target::OwnXmpp => "xmpp-mohe-v2",
                    Target::OtherXmpp => "xmpp-zhiwei",
                    Target::Any(s) => s.as_str(),
                };
                // Ages within a few hours either way, to the millisecond.
                let age = (age_ms % 20_000_000) as f64 / 1000.0;
                let timestamp = timestamp
                    .clone()
                    .unwrap_or_else(|| format!("{}", SAMPLE_NOW - age));
                record_value(session, &timestamp, agent.as_deref())
            }
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    mohe: Option<Value>,
    legacy: Option<Value>,
    zhiwei: Option<Value>,
    /// Milliseconds added to the clock; `None`: the clock reads NaN.
    clock_ms: Option<i16>,
    targets_exist: bool,
}

fuzz_target!(|input: Input| {
    check_record(&RecordCase {
        mohe: input.mohe.as_ref().map(Value::text),
        legacy: input.legacy.as_ref().map(Value::text),
        zhiwei: input.zhiwei.as_ref().map(Value::text),
        now: input
            .clock_ms
            .map_or(f64::NAN, |ms| SAMPLE_NOW + f64::from(ms) / 1000.0),
        targets_exist: input.targets_exist,
    });
});
