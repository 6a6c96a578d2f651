//! The `tag` export and its forms: rows tagged by the host from the
//! policy's edits, the edits alone, edits on summaries the caller built,
//! served from the row memo where the policy answered before.

use super::fallback::or_fallback;
use crate::bindings::{RowEdit, RowSummaries};
use crate::call::no_check;
use crate::imports::Call;
use crate::instance::PolicyInstance;
use crate::row_edits;
use crate::{Failure, HistoryRow};

impl PolicyInstance {
    /// `rows` with `agent`'s own rows tagged `[YOU] ` and imitations of the
    /// tag removed (docs/src/design/rules.md#tagging): the policy sees summaries (prefix
    /// of [`PolicyOptions::tag_prefix_chars`](crate::PolicyOptions)
    /// characters) and answers edits, which the host applies. Edits out of
    /// range or twice on a row are a `policy` failure.
    pub fn tag(
        &mut self,
        agent: &str,
        mut rows: Vec<HistoryRow>,
    ) -> Result<Vec<HistoryRow>, Failure> {
        let edits = self.tag_edits(agent, &rows)?;
        row_edits::apply_edits(&mut rows, &edits).map_err(|why| self.fail(Call::Tag, &why))?;
        Ok(rows)
    }

    /// The edits [`PolicyInstance::tag`] applies, checked (every index in
    /// range, none twice), for a caller that applies them to rows of its
    /// own (the Python binding edits Hermes's message dicts in place).
    pub fn tag_edits(&mut self, agent: &str, rows: &[HistoryRow]) -> Result<Vec<RowEdit>, Failure> {
        let summaries = row_edits::summaries(rows, self.options().tag_prefix_chars);
        self.tag_summaries(agent, &summaries)
    }

    /// [`PolicyInstance::tag_edits`] on summaries the caller built, for a
    /// caller whose rows are not [`HistoryRow`]s (the Python binding reads
    /// Hermes's message dicts): each prefix of at most
    /// [`PolicyOptions::tag_prefix_chars`](crate::PolicyOptions)
    /// characters of the text Hermes sends ([`crate::sent_text`]). Edits
    /// index `summaries.rows`, in order; out of range or twice on a row: a
    /// `policy` failure; lengths that do not cut `summaries.prefixes`: the
    /// policy's `bad-input`.
    ///
    /// Rows answered before (same agent, role, prefix and bridge-wrote) are
    /// served from the instance's row memo (`tag_memo.rs`, WIT `policy.tag`
    /// is row-local); the others go to the policy in one call, none when
    /// every row was seen and the policy has answered for `agent` before
    /// (an agent it refuses has nothing in the memo, so even an empty list
    /// goes to the policy).
    pub fn tag_summaries(
        &mut self,
        agent: &str,
        summaries: &RowSummaries,
    ) -> Result<Vec<RowEdit>, Failure> {
        self.refresh();
        let Some(memo) = self.tag_memo() else {
            return self.tag_by_policy(agent, summaries);
        };
        // Lengths that do not cut the prefixes: the policy refuses them.
        let Some(rows) = row_edits::split(summaries) else {
            return self.tag_by_policy(agent, summaries);
        };
        let mut edits = Vec::new();
        let mut unseen = RowSummaries {
            rows: Vec::new(),
            prefixes: String::new(),
        };
        let mut unseen_at = Vec::new();
        let known = memo.knows(agent);
        for (index, (row, prefix)) in (0u32..).zip(&rows) {
            match memo.get(agent, row.role, prefix, row.bridge_wrote) {
                Some(edit) => edits.extend(edit.map(|action| RowEdit { index, action })),
                None => {
                    row_edits::push_summary(
                        &mut unseen,
                        row.id,
                        row.role,
                        prefix,
                        row.bridge_wrote,
                    );
                    unseen_at.push(index);
                }
            }
        }
        if unseen_at.is_empty() && known {
            self.served_without_guest();
            return Ok(edits);
        }
        let mut answered = vec![None; unseen_at.len()];
        let generation = self.generation();
        for RowEdit { index, action } in self.tag_by_policy(agent, &unseen)? {
            answered[index as usize] = Some(action);
        }
        if self.generation() != generation {
            // Swapped just before the policy ran (which emptied the memo):
            // the served rows were the old policy's answers; all anew.
            return self.tag_by_policy(agent, summaries);
        }
        let memo = self.tag_memo().expect("memos were on a moment ago");
        memo.know(agent);
        for ((&index, edit), row) in unseen_at.iter().zip(answered).zip(&unseen.rows) {
            let prefix = rows[index as usize].1;
            memo.put(agent, row.role, prefix, row.bridge_wrote, edit);
            edits.extend(edit.map(|action| RowEdit { index, action }));
        }
        edits.sort_unstable_by_key(|e| e.index);
        Ok(edits)
    }

    /// The policy's `tag` of every row of `summaries`, checked.
    fn tag_by_policy(
        &mut self,
        agent: &str,
        summaries: &RowSummaries,
    ) -> Result<Vec<RowEdit>, Failure> {
        let (edits, _) = self.call_wit(
            Call::Tag,
            None,
            |g, s| g.call_tag(s, agent, summaries),
            no_check,
        )?;
        row_edits::check_edits(&edits, summaries.rows.len())
            .map_err(|why| self.fail(Call::Tag, &why))?;
        Ok(edits)
    }

    /// [`PolicyInstance::tag`], or on a failure `rows` unchanged (logged).
    pub fn tag_or_fallback(&mut self, agent: &str, rows: Vec<HistoryRow>) -> Vec<HistoryRow> {
        let answer = self.tag(agent, rows.clone());
        or_fallback(Call::Tag, answer, |_| rows)
    }
}
