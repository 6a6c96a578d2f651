//! The memo of `resolve` decisions (docs/src/design/where-the-time-goes.md): a gateway asks `resolve`
//! for every room message, mostly about the same session with nothing
//! changed in between. The policy is pure, so the same answers of its
//! imports give the same decision; the decision says itself how long the
//! clock leaves it standing (WIT `decision.valid-until`). A memo entry
//! keeps the decision with what the call's imports answered, and serves a
//! later `resolve` of the same agent and session while the clock is inside
//! the decision's window and, in one read snapshot of `state.db`
//! (`HostImports::begin_read`), either
//! - the snapshot's data version ([`HostImports::data_version`]: SQLite's
//!   `PRAGMA data_version`, read under the snapshot's lock, and the
//!   connection's own changes) is the one the decision was made at, or
//! - every read of the call, asked again in that snapshot, answers the
//!   same (`state.db` changed elsewhere, e.g. Hermes stored a turn: the
//!   reads, without the guest).
//!
//! SQLite answers whether anyone committed, under its own lock; nothing is
//! read from the file behind it.
//!
//! When an entry goes, all in this module: its window ends by the clock (or
//! the clock is set back before the call), its reads answer otherwise, a
//! read or the version fails, the memo is full ([`MAX_ENTRIES`]: it starts
//! over), or [`Memo::clear`] (a swap, new settings or a failed call:
//! `PolicyInstance::park`). Only a call that ended well is kept.
//!
//! Every guard still stands: the memoised decision was made by a call under
//! fuel and the guest time limit and passed the host's redirect check on
//! those same reads.

use super::bindings::Decision;
use super::host_imports::{DataVersion, HostImports};
use crate::Failure;
/// At most this many (agent, session) entries; a full memo starts over. A
/// gateway asks about its agent's few XMPP sessions: a short list searched
/// in order costs less than hashing two new key strings per call.
const MAX_ENTRIES: usize = 16;

/// What a `resolve` call's imports answered it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ImportAnswers {
    /// `meta-get`: key and value.
    pub(crate) meta: Vec<(String, Option<String>)>,
    /// `session-exists`: id and answer.
    pub(crate) exists: Vec<(String, bool)>,
    /// The first `now` the call was answered (Unix seconds).
    pub(crate) now: Option<f64>,
}

impl ImportAnswers {
    /// Whether `imports` answer every read as the call was answered (the
    /// caller holds one read snapshot around this). A read that fails
    /// fails this, unchanged: the call would have got the same failure, and
    /// asking again would wait out a lock a second time.
    fn still_hold(&self, imports: &mut dyn HostImports) -> Result<bool, Failure> {
        for (key, value) in &self.meta {
            if imports.meta_get(key)? != *value {
                return Ok(false);
            }
        }
        for (id, exists) in &self.exists {
            if imports.session_exists(id)? != *exists {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

struct Entry {
    agent: String,
    session_id: String,
    decision: Decision,
    /// The clock window in which the decision holds: `[since, until)`.
    since: f64,
    until: f64,
    /// `state.db`'s version in the call's (or the last replay's) snapshot.
    version: Option<DataVersion>,
    reads: ImportAnswers,
}

/// The decisions of one instance (one store, one thread at a time).
#[derive(Default)]
pub(crate) struct Memo {
    entries: Vec<Entry>,
}

impl Memo {
    /// The memoised decision for `agent` and `session_id`, when it still
    /// holds against `imports` (see the module's rules); a stale entry is
    /// dropped. `Err`: reading the version or a read failed (e.g. kind
    /// `busy` after the store's busy timeout): the answer of the call, which
    /// would fail on the same read, so that a lock is waited out once.
    pub(crate) fn get(
        &mut self,
        imports: &mut dyn HostImports,
        agent: &str,
        session_id: &str,
    ) -> Result<Option<Decision>, Failure> {
        let Some(at) = self
            .entries
            .iter()
            .position(|e| e.agent == agent && e.session_id == session_id)
        else {
            return Ok(None);
        };
        let entry = &mut self.entries[at];
        let now = imports.now();
        // Also refuses a clock that went back before the call.
        if !(entry.since <= now && now < entry.until) {
            self.entries.swap_remove(at);
            return Ok(None);
        }
        // The version and, when it moved, the reads: one snapshot, so the
        // reads see the state the version names.
        imports.begin_read();
        let held = imports.data_version().and_then(|version| {
            if version.is_some() && version == entry.version {
                return Ok((true, version));
            }
            Ok((entry.reads.still_hold(imports)?, version))
        });
        imports.end_read();
        match held {
            Ok((true, version)) => {
                entry.version = version;
                Ok(Some(entry.decision.clone()))
            }
            Ok((false, _)) => {
                self.entries.swap_remove(at);
                Ok(None)
            }
            Err(failure) => {
                self.entries.swap_remove(at);
                Err(failure)
            }
        }
    }

    /// Keep `decision`, made from `reads` in a snapshot of `version`. Not
    /// kept: a decision that depends on the clock but was never told the
    /// time (its window has no start).
    pub(crate) fn put(
        &mut self,
        agent: &str,
        session_id: &str,
        decision: &Decision,
        reads: ImportAnswers,
        version: Option<DataVersion>,
    ) {
        let (since, until) = match (decision.valid_until, reads.now) {
            // Time-independent, yet (an expired record) not before the call.
            (None, now) => (now.unwrap_or(f64::NEG_INFINITY), f64::INFINITY),
            (Some(until), Some(now)) => (now, until),
            (Some(_), None) => return,
        };
        self.entries
            .retain(|e| !(e.agent == agent && e.session_id == session_id));
        if self.entries.len() >= MAX_ENTRIES {
            self.entries.clear();
        }
        self.entries.push(Entry {
            agent: agent.to_owned(),
            session_id: session_id.to_owned(),
            decision: decision.clone(),
            since,
            until,
            version,
            reads,
        });
    }

    /// Forget every decision.
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use crate::fake_host::{self, FakeHost, ImportCall, NOW, settings};
    use crate::{
        DataVersion, Failure, HistoryRow, HostImports, Policy, PolicyInstance, PolicyOptions,
        Reason, SendPlan, Sent,
    };
    use std::sync::{Arc, Mutex};

    const KEY: &str = "session_switch:active:mohe";

    /// An instance over a fake host whose mohe record names `cli-1`,
    /// written `age` seconds before [`NOW`], and the fake.
    fn instance(age: f64) -> (PolicyInstance, FakeHost) {
        let options = PolicyOptions {
            ..PolicyOptions::default()
        };
        let policy = Policy::embedded(options).unwrap();
        let host = fake_host::host(vec![]);
        host.state().add_session("cli-1");
        set_record(&host, age);
        (policy.instance(host.clone(), settings()), host)
    }

    fn set_record(host: &FakeHost, age: f64) {
        let record = serde_json::json!({"session_id": "cli-1", "timestamp": NOW - age});
        host.state().meta.insert(KEY.into(), record.to_string());
    }

    /// How many `meta-get` calls reached the fake.
    fn reads(host: &FakeHost) -> usize {
        fake_host::calls(host, |c| matches!(c, ImportCall::MetaGet(_)))
    }

    #[test]
    fn an_unchanged_database_is_not_read_again() {
        let (mut i, host) = instance(10.0);
        host.state().version = Some(DataVersion(1, 0));
        let first = i.resolve("mohe", "xmpp-mohe-v2").unwrap();
        assert_eq!(
            (first.session_id.as_str(), first.reason),
            ("cli-1", Reason::Redirected)
        );
        assert_eq!(first.valid_until, Some(NOW - 10.0 + 3600.0 - 0.001));
        assert!(i.last_call_fuel() > 0, "the policy ran");
        assert_eq!(reads(&host), 1);
        host.state().now = NOW + 100.0;
        assert_eq!(i.resolve("mohe", "xmpp-mohe-v2").unwrap(), first);
        assert_eq!(i.last_call_fuel(), 0, "served from the memo");
        assert_eq!(reads(&host), 1, "no read while the version stands");
    }

    #[test]
    fn a_changed_database_asks_the_reads_again() {
        let (mut i, host) = instance(10.0);
        host.state().version = Some(DataVersion(1, 0));
        let first = i.resolve("mohe", "xmpp-mohe-v2").unwrap();
        // Another connection wrote something else: the reads answer the same.
        host.state().version = Some(DataVersion(2, 0));
        assert_eq!(i.resolve("mohe", "xmpp-mohe-v2").unwrap(), first);
        assert_eq!((i.last_call_fuel(), reads(&host)), (0, 2));
        // Now at version 2: served without reading.
        assert_eq!(i.resolve("mohe", "xmpp-mohe-v2").unwrap(), first);
        assert_eq!(reads(&host), 2);
        // A new send rewrote the record: the policy decides again.
        set_record(&host, 1.0);
        host.state().version = Some(DataVersion(3, 0));
        let second = i.resolve("mohe", "xmpp-mohe-v2").unwrap();
        assert_ne!(second, first);
        assert!(second.detail.contains("holds until"), "{}", second.detail);
        assert!(i.last_call_fuel() > 0);
    }

    #[test]
    fn imports_without_a_version_are_asked_every_time() {
        let (mut i, host) = instance(10.0);
        let first = i.resolve("mohe", "xmpp-mohe-v2").unwrap();
        for n in 2..5 {
            assert_eq!(i.resolve("mohe", "xmpp-mohe-v2").unwrap(), first);
            assert_eq!((i.last_call_fuel(), reads(&host)), (0, n));
        }
        host.state().meta.clear();
        let none = i.resolve("mohe", "xmpp-mohe-v2").unwrap();
        assert_eq!(none.reason, Reason::NoRecord);
        assert_eq!(none.valid_until, None);
    }

    #[test]
    fn the_clock_ends_the_window_either_way() {
        let (mut i, host) = instance(10.0);
        host.state().version = Some(DataVersion(1, 0));
        let first = i.resolve("mohe", "xmpp-mohe-v2").unwrap();
        let until = first.valid_until.unwrap();
        host.state().now = until;
        let expired = i.resolve("mohe", "xmpp-mohe-v2").unwrap();
        assert!(i.last_call_fuel() > 0, "past the window the policy decides");
        assert_eq!(expired.reason, Reason::Redirected, "a millisecond early");
        host.state().now = NOW - 10.0 + 3600.0;
        assert_eq!(
            i.resolve("mohe", "xmpp-mohe-v2").unwrap().reason,
            Reason::Expired
        );
        // An expired record holds for good, but not for a clock set back.
        host.state().now = NOW;
        assert_eq!(i.resolve("mohe", "xmpp-mohe-v2").unwrap(), first);
        assert!(
            i.last_call_fuel() > 0,
            "a clock before the call is not trusted"
        );
    }

    /// The fake behind a spy: whether each `data_version` was read inside
    /// a read snapshot (`begin_read` … `end_read`).
    struct Snapshots {
        host: FakeHost,
        open: bool,
        versions: Arc<Mutex<Vec<bool>>>,
    }

    impl HostImports for Snapshots {
        fn meta_get(&mut self, key: &str) -> Result<Option<String>, Failure> {
            self.host.meta_get(key)
        }
        fn meta_delete(&mut self, key: &str) -> Result<bool, Failure> {
            self.host.meta_delete(key)
        }
        fn meta_set(&mut self, key: &str, value: &str) -> Result<(), Failure> {
            self.host.meta_set(key, value)
        }
        fn session_exists(&mut self, id: &str) -> Result<bool, Failure> {
            self.host.session_exists(id)
        }
        fn history(
            &mut self,
            session_id: &str,
            agent: &str,
            limit: Option<u32>,
        ) -> Result<Vec<HistoryRow>, Failure> {
            self.host.history(session_id, agent, limit)
        }
        fn now(&mut self) -> f64 {
            self.host.now()
        }
        fn send(&mut self, plan: &SendPlan) -> Result<Sent, Failure> {
            self.host.send(plan)
        }
        fn begin_read(&mut self) {
            self.open = true;
        }
        fn end_read(&mut self) {
            self.open = false;
        }
        fn data_version(&mut self) -> Result<Option<DataVersion>, Failure> {
            self.versions.lock().unwrap().push(self.open);
            self.host.data_version()
        }
    }

    #[test]
    fn the_version_is_read_in_the_snapshot_whose_reads_it_vouches_for() {
        let (_, host) = instance(10.0);
        host.state().version = Some(DataVersion(1, 0));
        let versions = Arc::new(Mutex::new(Vec::new()));
        let spy = Snapshots {
            host: host.clone(),
            open: false,
            versions: versions.clone(),
        };
        let options = PolicyOptions {
            ..PolicyOptions::default()
        };
        let mut i = Policy::embedded(options).unwrap().instance(spy, settings());
        let first = i.resolve("mohe", "xmpp-mohe-v2").unwrap();
        assert_eq!(i.resolve("mohe", "xmpp-mohe-v2").unwrap(), first);
        assert_eq!(
            (i.last_call_fuel(), reads(&host)),
            (0, 1),
            "served by the version"
        );
        host.state().version = Some(DataVersion(2, 0));
        assert_eq!(i.resolve("mohe", "xmpp-mohe-v2").unwrap(), first);
        assert_eq!(
            (i.last_call_fuel(), reads(&host)),
            (0, 2),
            "served by the reads"
        );
        // The call's own, then each check's: every one under a snapshot.
        assert_eq!(*versions.lock().unwrap(), vec![true, true, true]);
    }

    #[test]
    fn each_session_and_new_settings_have_their_own_answer() {
        let (mut i, host) = instance(10.0);
        host.state().version = Some(DataVersion(1, 0));
        let xmpp = i.resolve("mohe", "xmpp-mohe-v2").unwrap();
        let other = i.resolve("mohe", "elsewhere").unwrap();
        assert_eq!(other.reason, Reason::NotAgentSession);
        assert_eq!(i.resolve("mohe", "xmpp-mohe-v2").unwrap(), xmpp);
        assert_eq!(i.last_call_fuel(), 0);
        let mut shorter = settings();
        shorter.ttl_seconds = 5;
        i.set_settings(shorter);
        let d = i.resolve("mohe", "xmpp-mohe-v2").unwrap();
        assert_eq!(d.reason, Reason::Expired, "new settings empty the memo");
    }
}
