//! The loop guard state's unit tests: its stored form (as earlier bots
//! wrote it, and what a read borrows) and its caps.

use super::*;
use serde_json::{Value, json};

/// The state as a JSON value tree, the way it was first written: what
/// earlier bots left in `state_meta`.
fn as_value(state: &GuardState<'_>) -> Value {
    let seen: Vec<Value> = state
        .seen
        .iter()
        .map(|s| json!([s.sender, format!("{:016x}", s.digest), s.at]))
        .collect();
    let mut value = json!({"v": 1, "hops": state.hops, "window": state.window, "seen": seen});
    if state.stopped {
        value["stopped"] = true.into();
    }
    if state.quiet {
        value["quiet"] = true.into();
    }
    if !state.said.is_empty() {
        value["said"] = json!(state.said);
    }
    value
}

fn sample(flags: bool) -> GuardState<'static> {
    GuardState {
        hops: 7,
        window: vec![1_796_578_172.25, 1_796_578_173.5, 3.0],
        seen: vec![
            Seen {
                sender: "anna".into(),
                digest: 0x0123_4567_89ab_cdef,
                at: 1_796_578_172.971_34,
            },
            Seen {
                sender: "\"墨河\"\n".into(),
                digest: 5,
                at: 0.1,
            },
        ],
        stopped: flags,
        quiet: flags,
        said: if flags {
            vec![("1796578172971340".into(), "mohe".into())]
        } else {
            Vec::new()
        },
    }
}

#[test]
fn the_state_is_written_byte_for_byte_as_the_value_tree_wrote_it() {
    for flags in [false, true] {
        let state = sample(flags);
        let written = state.to_json();
        assert_eq!(written, as_value(&state).to_string());
        assert_eq!(GuardState::from_json(&written), Some(state));
    }
}

#[test]
fn a_read_state_borrows_its_strings_unless_json_escaped_them() {
    let text = sample(true).to_json();
    let read = GuardState::from_json(&text).unwrap();
    let borrowed = |s: &Cow<'_, str>| matches!(s, Cow::Borrowed(_));
    // "anna" is as stored; "\"墨河\"\n" was escaped, so it is unescaped into a copy.
    let senders: Vec<bool> = read.seen.iter().map(|s| borrowed(&s.sender)).collect();
    assert_eq!(senders, [true, false]);
    assert!(
        read.said
            .iter()
            .all(|(id, agent)| borrowed(id) && borrowed(agent))
    );
    assert_eq!(read, sample(true));
}

#[test]
fn the_duplicate_window_keeps_the_newest_messages_up_to_its_cap() {
    let mut state = GuardState::default();
    for digest in 0..200u64 {
        assert!(!state.repeated("anna", digest, 1000.0));
        assert!(state.seen.len() <= MAX_SEEN);
    }
    assert_eq!(state.seen.len(), MAX_SEEN);
    assert_eq!(state.seen[0].digest, 200 - MAX_SEEN as u64);
    assert!(state.repeated("anna", 199, 1000.0));
    // Pushed out by the cap: answered again, and remembered anew.
    assert!(!state.repeated("anna", 0, 1000.0));
    assert_eq!(state.seen.len(), MAX_SEEN);
}

#[test]
fn a_state_written_within_a_bound_forgets_its_oldest_ids_then_messages() {
    let mut state = sample(true);
    state.said = (0..64)
        .map(|n| {
            (
                format!("{n:05}{}", "i".repeat(20_000)).into(),
                "zhiwei".into(),
            )
        })
        .collect();
    let whole = state.to_json();
    assert!(whole.len() > 1 << 20);
    let text = state.clone().to_json_within(1 << 20);
    assert!(text.len() <= 1 << 20, "{}", text.len());
    let read = GuardState::from_json(&text).unwrap();
    assert_eq!((read.hops, read.seen.len(), read.window.len()), (7, 2, 3));
    assert!(!read.said.is_empty() && read.said.len() < 64);
    // The newest are kept.
    assert!(read.said.last().unwrap().0.starts_with("00063"));
    // Within the bound already: written as it is.
    assert_eq!(state.clone().to_json_within(whole.len()), whole);
    // Messages go once the ids are gone.
    let mut state = sample(false);
    let before = state.to_json().len();
    let text = state.to_json_within(before - 1);
    let read = GuardState::from_json(&text).unwrap();
    assert_eq!((read.seen.len(), read.window.len()), (1, 3));
}

proptest::proptest! {
    #[test]
    fn a_digest_is_written_as_sixteen_hexadecimal_digits(digest: u64) {
        let written = serde_json::to_string(&Digest(digest)).unwrap();
        proptest::prop_assert_eq!(written, format!("\"{digest:016x}\""));
    }
}

#[test]
fn a_state_is_read_with_unknown_keys_and_refused_when_a_field_is_wrong() {
    let state = sample(true);
    let mut value = as_value(&state);
    value["later"] = json!({"x": [1, 2]});
    assert_eq!(GuardState::from_json(&value.to_string()), Some(state));
    for bad in [
        r#"{"v":1,"hops":1,"window":[null],"seen":[]}"#,
        r#"{"v":1,"hops":1,"window":[],"seen":[["a","zz",1.0]]}"#,
        r#"{"v":1,"hops":1,"window":[],"seen":[["a","5"]]}"#,
        r#"{"v":1,"hops":4294967296,"window":[],"seen":[]}"#,
        r#"{"v":1,"hops":1,"window":[],"seen":[],"stopped":null}"#,
        r#"{"v":1,"hops":1,"window":[],"seen":[],"said":[["1"]]}"#,
    ] {
        assert_eq!(GuardState::from_json(bad), None, "{bad}");
    }
}
