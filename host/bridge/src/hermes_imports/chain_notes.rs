//! What following Hermes's compression chains did during a call (DESIGN
//! §9.4), noted for callers that report it, and the record rewrite that
//! hands the policy a compressed record's live tip.

use super::HermesImports;
use crate::store::Tip;
use session_switch_contract::ids::api_session_id_problem;
use session_switch_contract::keys::{LEGACY_KEY, RECORD_KEY_PREFIX};
use session_switch_runtime::Failure;
use std::borrow::Cow;
use std::sync::{Arc, Mutex};

/// What following compression chains did during calls (DESIGN §9.4), for
/// callers that report it ([`HermesImports::reporting`]).
#[derive(Clone, Debug, PartialEq)]
pub enum ChainNote {
    /// Record `key` names `recorded`, which Hermes ended by compression: the
    /// policy was given the record with `session_id` = `tip`.
    RecordFollowed {
        key: String,
        recorded: String,
        tip: String,
    },
    /// `session` (a record's target, a send's CLI session) may not be
    /// redirected to or recorded: `why`, a sentence.
    Refused { session: String, why: String },
    /// A send wrote its `[YOU]` row into `written`; the plan named
    /// `configured` (equal when the session was not compressed).
    Wrote { configured: String, written: String },
}

/// The notes of one [`HermesImports`], shared with its caller.
pub type ChainNotes = Arc<Mutex<Vec<ChainNote>>>;

/// Add `n` to `notes` when a caller keeps them: imports nobody asked for
/// notes (a gateway's pooled instances) keep none, or the list would grow
/// with every call.
pub(super) fn note(notes: &Option<ChainNotes>, n: ChainNote) {
    if let Some(notes) = notes {
        notes.lock().unwrap_or_else(|e| e.into_inner()).push(n);
    }
}

impl HermesImports {
    /// A record's value as the policy is given it: when it is a JSON object
    /// whose `session_id` Hermes ended by compression with a unique live
    /// tip (v31), the same object with `session_id` = the tip (logged and
    /// noted); else unchanged (a refused target is refused later, by
    /// `session_exists`).
    pub(super) fn follow_record(&mut self, key: &str, value: String) -> Result<String, Failure> {
        let Some(recorded) = recorded_session(&value) else {
            return Ok(value);
        };
        if api_session_id_problem(&recorded).is_some() {
            return Ok(value);
        }
        let tip = self.live_tip(&recorded)?;
        let Some(tip) = tip.session(&recorded).filter(|t| *t != recorded) else {
            return Ok(value);
        };
        let Ok(serde_json::Value::Object(mut record)) = serde_json::from_str(&value) else {
            return Ok(value);
        };
        if api_session_id_problem(tip).is_some() {
            return Ok(value);
        }
        tracing::info!(
            target: "session_switch::chain",
            "record {key} names {recorded}, which Hermes ended by compression; its live tip is {tip}"
        );
        note(
            &self.notes,
            ChainNote::RecordFollowed {
                key: key.to_owned(),
                recorded: recorded.clone(),
                tip: tip.to_owned(),
            },
        );
        record.insert(
            "session_id".into(),
            serde_json::Value::String(tip.to_owned()),
        );
        Ok(serde_json::Value::Object(record).to_string())
    }

    /// [`HermesStore::live_tip`], read once per id in a read snapshot (the
    /// chain cannot change inside it); outside one, read every time.
    pub(super) fn live_tip(&mut self, id: &str) -> Result<Tip, Failure> {
        if let Some((_, tip)) = self.tips.iter().find(|(seen, _)| seen == id) {
            return Ok(tip.clone());
        }
        let tip = self.store.live_tip(id)?;
        if self.reading {
            self.tips.push((id.to_owned(), tip.clone()));
        }
        Ok(tip)
    }
}

/// The `session_id` of a record value that is a JSON object, as a
/// `serde_json::Value` reads it (the last of duplicate keys; `None` when
/// it is not a string or the value is not an object or not JSON). The
/// common shape is read without building the object: this runs on every
/// `resolve` and every memo check (DESIGN §7).
fn recorded_session(value: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Named<'a> {
        #[serde(borrow, default)]
        session_id: Option<Cow<'a, str>>,
    }
    // serde's derive also takes a JSON array for a struct: only objects.
    if value
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('{')
        && let Ok(named) = serde_json::from_str::<Named>(value)
    {
        return named.session_id.map(Cow::into_owned);
    }
    // Odd shapes (a duplicate or non-string `session_id`, bad JSON).
    match serde_json::from_str(value) {
        Ok(serde_json::Value::Object(record)) => {
            record.get("session_id")?.as_str().map(str::to_owned)
        }
        _ => None,
    }
}

/// Keys that hold a record (`session_switch:active:<agent>`, the seed's key).
pub(super) fn is_record_key(key: &str) -> bool {
    key == LEGACY_KEY || key.starts_with(RECORD_KEY_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::recorded_session;

    /// The fast read gives what a `serde_json::Value` gives, on every shape.
    #[test]
    fn a_records_session_is_read_as_a_json_value_reads_it() {
        let value_reads = |v: &str| match serde_json::from_str::<serde_json::Value>(v) {
            Ok(serde_json::Value::Object(m)) => m
                .get("session_id")
                .and_then(|s| s.as_str())
                .map(str::to_owned),
            _ => None,
        };
        for (value, want) in [
            (
                r#"{"session_id": "cli-1", "timestamp": 1.5}"#,
                Some("cli-1"),
            ),
            (" \n\t{\"session_id\":\"cli-1\"}", Some("cli-1")),
            (r#"{"session_id": "a\"b\u00e9"}"#, Some("a\"bé")),
            (r#"{"session_id": "old", "session_id": "new"}"#, Some("new")),
            (r#"{"timestamp": 1}"#, None),
            (r#"{"session_id": 7}"#, None),
            (r#"{"session_id": null}"#, None),
            (r#"["cli-1"]"#, None),
            (r#""cli-1""#, None),
            ("not json", None),
            ("", None),
            (r#"{"session_id": "cli-1"} trailing"#, None),
        ] {
            assert_eq!(recorded_session(value).as_deref(), want, "{value}");
            assert_eq!(recorded_session(value), value_reads(value), "{value}");
        }
        // `Value` refuses a number beyond f64 anywhere; the record still
        // names its session, and following it rewrites nothing (the
        // rewrite needs the `Value`).
        assert_eq!(
            recorded_session(r#"{"session_id": "cli-1", "timestamp": 1e400}"#).as_deref(),
            Some("cli-1")
        );
    }
}
