//! The guest's unit tests over the one fake host
//! (`session-switch-fake-host`): this crate's [`Host`](crate::Host) for it,
//! and what the tests read of it.

pub(crate) use session_switch_fake_host::{FakeHost, FakeState, Import, ImportCall, prefix};

session_switch_fake_host::guest_host!(crate, session_switch_fake_host::prefix);

/// An empty fake whose clock reads `now` and whose room is `room`.
pub(crate) fn at(now: f64, room: &str) -> FakeHost {
    FakeHost::new(FakeState::at(now, room))
}

/// Make `import` fail with `failure` (a guest failure, as the rules see it).
pub(crate) fn fail(host: &FakeHost, import: Import, failure: &crate::Failure) {
    let failure = failure_from_guest(failure.clone());
    host.state().fail.insert(import, failure);
}

/// The arguments of one `history` call, `prefix_chars` included.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HistoryCall {
    pub(crate) session_id: String,
    pub(crate) agent: String,
    pub(crate) limit: Option<u32>,
    pub(crate) prefix_chars: u32,
}

/// Every `history` call the fake got, in order.
pub(crate) fn history_calls(host: &FakeHost) -> Vec<HistoryCall> {
    let prefixes = host.guest().prefix_chars.clone();
    let state = host.snapshot();
    let calls = state.calls.into_iter().filter_map(|c| match c {
        ImportCall::History {
            session_id,
            agent,
            limit,
        } => Some((session_id, agent, limit)),
        _ => None,
    });
    calls
        .zip(prefixes)
        .map(|((session_id, agent, limit), prefix_chars)| HistoryCall {
            session_id,
            agent,
            limit,
            prefix_chars,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Host;

    #[test]
    fn history_applies_limit_prefix_and_provenance() {
        let mut h = at(100.0, "room@conference.example.org");
        h.state().push_row("s", "user", "héllo world", Some("mohe"));
        h.state().push_row("s", "assistant", "ok", None);
        h.state().push_row("s", "user", "third", Some("zhiwei"));
        let packed = h.history("s", "mohe", Some(2), 3).unwrap();
        let rows = packed.split().unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!((packed.rows[0].id, rows[0].prefix), (2, "ok"));
        assert_eq!(rows[1].prefix, "thi");
        assert!(
            !rows[1].bridge_wrote,
            "written for zhiwei, asked about mohe"
        );
        let all = h.history("s", "mohe", None, 2).unwrap();
        let all = all.split().unwrap();
        assert_eq!(all[0].prefix, "hé");
        assert!(all[0].bridge_wrote);
        assert!(h.history("unknown", "mohe", None, 5).unwrap().is_empty());
        assert_eq!(history_calls(&h).len(), 3);
    }

    #[test]
    fn scripted_failures_replace_the_import() {
        let mut h = FakeHost::default();
        let f = crate::failure::policy("boom");
        fail(&h, Import::MetaGet, &f);
        assert_eq!(h.meta_get("k"), Err(f));
        assert_eq!(h.meta_delete("k"), Ok(false));
    }
}
