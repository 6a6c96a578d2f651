//! A record's value as `state_meta` holds it: the session it names, read
//! fast (it runs on every `resolve`).

use std::borrow::Cow;

/// The `session_id` of a record value that is a JSON object, as a
/// `serde_json::Value` reads it (the last of duplicate keys; `None` when
/// it is not a string or the value is not an object or not JSON). The
/// common shape is read without building the object: this runs on every
/// `resolve` and every memo check (docs/src/design/where-the-time-goes.md).
pub(super) fn recorded_session(value: &str) -> Option<String> {
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
