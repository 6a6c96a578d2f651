//! Answers of the two plain reads a gateway makes on every turn, kept while
//! the database's data version stays the same: whether a session has children
//! ([`HermesStore::has_child_sessions`]) and the sent rows of a session
//! ([`HermesStore::sent_rows`]).
//!
//! Why: in DELETE journal mode each of them is a read transaction of its own,
//! and SQLite's lock cycle (three `fcntl`s, a look for a hot journal, the
//! header read, the unlock) is most of its cost, against one `pread` of the
//! change counter (docs/src/design/hermes-plugin.md#as-built). Same rule as the decision
//! memo and [`HermesStore::table_exists`]: the version is read *before* the
//! query, so a commit that lands in between leaves an older version next to
//! the newer answer, and the next call reads again. The version moves on any
//! other connection's commit and on this connection's own changed rows
//! (`DataVersion`). What it trusts in DELETE mode is SECURITY G6.

use std::cell::RefCell;
use std::collections::HashMap;

use session_switch_contract::history::DataVersion;

use super::send::SentRow;

/// Distinct keys kept per data version; past it the memo starts over (a
/// gateway asks about a handful of sessions between two commits).
const MAX_KEYS: usize = 256;

/// The answers read at one data version.
#[derive(Debug, Default)]
pub(super) struct ReadMemo(RefCell<Answers>);

#[derive(Debug, Default)]
struct Answers {
    version: Option<DataVersion>,
    children: HashMap<String, bool>,
    sent_rows: HashMap<(String, String), Vec<SentRow>>,
}

impl Answers {
    /// Drop what was read at another version, or when too many keys.
    fn at(&mut self, version: DataVersion) -> &mut Self {
        let keys = self.children.len() + self.sent_rows.len();
        if self.version != Some(version) || keys >= MAX_KEYS {
            self.children.clear();
            self.sent_rows.clear();
            self.version = Some(version);
        }
        self
    }
}

impl ReadMemo {
    /// Whether `session_id` has children, as read at `version`, if kept.
    pub(super) fn children(&self, version: DataVersion, session_id: &str) -> Option<bool> {
        let answers = self.0.borrow();
        (answers.version == Some(version))
            .then(|| answers.children.get(session_id).copied())
            .flatten()
    }

    /// Keep `has` for `session_id`, read at `version` (read before the query).
    pub(super) fn keep_children(&self, version: DataVersion, session_id: &str, has: bool) {
        let mut answers = self.0.borrow_mut();
        answers
            .at(version)
            .children
            .insert(session_id.to_owned(), has);
    }

    /// The sent rows of `session_id` for `agent` read at `version`, if kept.
    pub(super) fn sent_rows(
        &self,
        version: DataVersion,
        session_id: &str,
        agent: &str,
    ) -> Option<Vec<SentRow>> {
        let answers = self.0.borrow();
        if answers.version != Some(version) {
            return None;
        }
        // Two borrowed strs cannot look up an owned pair: few keys, a scan.
        answers
            .sent_rows
            .iter()
            .find(|((s, a), _)| s == session_id && a == agent)
            .map(|(_, rows)| rows.clone())
    }

    /// Keep `rows` for `session_id` and `agent`, read at `version`.
    pub(super) fn keep_sent_rows(
        &self,
        version: DataVersion,
        session_id: &str,
        agent: &str,
        rows: &[SentRow],
    ) {
        let mut answers = self.0.borrow_mut();
        answers
            .at(version)
            .sent_rows
            .insert((session_id.to_owned(), agent.to_owned()), rows.to_vec());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_hold_for_the_version_they_were_read_at() {
        let memo = ReadMemo::default();
        let v1 = DataVersion(-5, 0);
        let v2 = DataVersion(-6, 0);
        let row = SentRow {
            message_id: 7,
            role: "user".into(),
            timestamp: 1.5,
        };
        assert_eq!(memo.children(v1, "s"), None);
        memo.keep_children(v1, "s", true);
        memo.keep_sent_rows(v1, "s", "mohe", std::slice::from_ref(&row));
        assert_eq!(memo.children(v1, "s"), Some(true));
        assert_eq!(memo.children(v1, "t"), None);
        assert_eq!(memo.sent_rows(v1, "s", "mohe"), Some(vec![row]));
        assert_eq!(memo.sent_rows(v1, "s", "zhiwei"), None);
        // Another commit, or this connection's own change: nothing served.
        assert_eq!(memo.children(v2, "s"), None);
        assert_eq!(memo.children(DataVersion(-5, 1), "s"), None);
        assert_eq!(memo.sent_rows(v2, "s", "mohe"), None);
        // Keeping at the new version drops the old answers.
        memo.keep_children(v2, "t", false);
        assert_eq!(memo.children(v2, "t"), Some(false));
        assert_eq!(memo.children(v1, "s"), None);
        assert_eq!(memo.sent_rows(v2, "s", "mohe"), None);
    }

    #[test]
    fn the_memo_starts_over_past_its_keys() {
        let memo = ReadMemo::default();
        let v = DataVersion(1, 0);
        for i in 0..MAX_KEYS {
            memo.keep_children(v, &i.to_string(), true);
        }
        assert_eq!(memo.children(v, "0"), Some(true));
        memo.keep_children(v, "one more", false);
        assert_eq!(memo.children(v, "0"), None);
        assert_eq!(memo.children(v, "one more"), Some(false));
    }
}
