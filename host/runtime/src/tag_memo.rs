//! The memo of `tag` edits (docs/src/design/where-the-time-goes.md): Hermes loads a session's whole
//! history for every request, so the plugin asks `tag` about the same rows
//! request after request, with a row or two new since the last. WIT
//! `policy.tag` is row-local — a row's edit depends on the agent, the
//! settings and that row's role, prefix and bridge-wrote alone, never on its
//! id, its position or the other rows — so the edit of a row seen before is
//! known without the guest, and only rows not seen cross the boundary.
//!
//! Every guard still stands: each remembered edit was answered by a call
//! under fuel and the guest time limit, and checked. The memo lives and dies
//! with the store (a swap, new settings or a failed call empties it:
//! `PolicyInstance::park`).

use super::bindings::{EditAction, Role};
use std::collections::HashMap;

/// Prefixes are hashed on every row of every request: foldhash, not std's
/// SipHash (a visible share of a warm `tag_messages` in perf). The memo is one
/// instance's own, so no caller picks its keys to collide.
type Map = HashMap<Box<str>, Slots, foldhash::fast::RandomState>;

/// A full memo starts over past this many bytes of remembered prefixes
/// (a 10,000-row history of 256-character ASCII prefixes is 2.5 MiB), so an
/// instance never holds more than a few MiB whatever it is shown.
const MAX_PREFIX_BYTES: usize = 4 << 20;

/// Per prefix, the edit (or `Some(None)`: no edit) of each role and
/// bridge-wrote flag seen with it; `None`: not seen.
type Slots = [Option<Option<EditAction>>; 10];

/// The remembered edits of one instance, per agent.
#[derive(Default)]
pub(crate) struct TagMemo {
    agents: Vec<(String, Map)>,
    prefix_bytes: usize,
}

/// Where a row's answer is in its prefix's [`Slots`].
fn slot(role: Role, bridge_wrote: bool) -> usize {
    let role = match role {
        Role::User => 0,
        Role::Assistant => 1,
        Role::Tool => 2,
        Role::System => 3,
        Role::Other => 4,
    };
    role * 2 + usize::from(bridge_wrote)
}

impl TagMemo {
    /// The remembered edit of a row (`Some(None)`: the row needs none), or
    /// `None` when no row like it was answered for `agent`.
    pub(crate) fn get(
        &self,
        agent: &str,
        role: Role,
        prefix: &str,
        bridge_wrote: bool,
    ) -> Option<Option<EditAction>> {
        let (_, rows) = self.agents.iter().find(|(a, _)| a == agent)?;
        rows.get(prefix)?[slot(role, bridge_wrote)]
    }

    /// Whether the policy has answered a `tag` for `agent` (it refuses an
    /// agent it does not know, whatever the rows).
    pub(crate) fn knows(&self, agent: &str) -> bool {
        self.agents.iter().any(|(a, _)| a == agent)
    }

    /// Note that the policy answered a `tag` for `agent`.
    pub(crate) fn know(&mut self, agent: &str) {
        self.rows_of(agent);
    }

    fn rows_of(&mut self, agent: &str) -> &mut Map {
        let at = match self.agents.iter().position(|(a, _)| a == agent) {
            Some(at) => at,
            None => {
                self.agents.push((agent.to_owned(), Map::default()));
                self.agents.len() - 1
            }
        };
        &mut self.agents[at].1
    }

    /// Remember the policy's answer for a row.
    pub(crate) fn put(
        &mut self,
        agent: &str,
        role: Role,
        prefix: &str,
        bridge_wrote: bool,
        edit: Option<EditAction>,
    ) {
        if self.prefix_bytes + prefix.len() > MAX_PREFIX_BYTES {
            self.clear();
        }
        let rows = self.rows_of(agent);
        let added = match rows.get_mut(prefix) {
            Some(slots) => {
                slots[slot(role, bridge_wrote)] = Some(edit);
                0
            }
            None => {
                let mut slots = [None; 10];
                slots[slot(role, bridge_wrote)] = Some(edit);
                rows.insert(prefix.into(), slots);
                prefix.len()
            }
        };
        self.prefix_bytes += added;
    }

    /// Forget every edit.
    pub(crate) fn clear(&mut self) {
        self.agents.clear();
        self.prefix_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_kept_per_agent_role_and_provenance() {
        let mut memo = TagMemo::default();
        memo.put("mohe", Role::User, "mohe: hi", false, Some(EditAction::Tag));
        memo.put("mohe", Role::User, "hi", true, Some(EditAction::Tag));
        memo.put("mohe", Role::User, "hi", false, None);
        let get = |m: &TagMemo, agent, role, prefix, wrote| m.get(agent, role, prefix, wrote);
        assert_eq!(
            get(&memo, "mohe", Role::User, "mohe: hi", false),
            Some(Some(EditAction::Tag))
        );
        assert_eq!(
            get(&memo, "mohe", Role::User, "hi", true),
            Some(Some(EditAction::Tag))
        );
        assert_eq!(get(&memo, "mohe", Role::User, "hi", false), Some(None));
        assert_eq!(get(&memo, "mohe", Role::Assistant, "hi", false), None);
        assert_eq!(get(&memo, "moxian", Role::User, "mohe: hi", false), None);
        assert_eq!(memo.prefix_bytes, "mohe: hi".len() + "hi".len());
        memo.clear();
        assert_eq!(get(&memo, "mohe", Role::User, "hi", false), None);
    }

    #[test]
    fn a_full_memo_starts_over() {
        let mut memo = TagMemo::default();
        let big = "x".repeat(MAX_PREFIX_BYTES / 2 - 1);
        memo.put("mohe", Role::User, &big, false, None);
        memo.put("mohe", Role::User, &format!("{big}y"), false, None);
        assert_eq!(memo.get("mohe", Role::User, &big, false), Some(None));
        memo.put("mohe", Role::User, &format!("{big}zz"), false, None);
        assert_eq!(memo.get("mohe", Role::User, &big, false), None);
        assert_eq!(
            memo.get("mohe", Role::User, &format!("{big}zz"), false),
            Some(None)
        );
        assert_eq!(memo.prefix_bytes, big.len() + 2);
    }
}
