//! `bad-edits`: `tag` and `context` add an edit whose index is out of range.

use session_switch_test_policies::policy::EditAction;
use session_switch_test_policies::{
    ContextResult, Failure, Guest, RowEdit, RowSummaries, Shipped, TestPolicy,
};

pub struct BadEdits;

impl TestPolicy for BadEdits {
    fn tag(agent: String, rows: RowSummaries) -> Result<Vec<RowEdit>, Failure> {
        let len = rows.len();
        Shipped::tag(agent, rows).map(|edits| bad_edits(edits, len))
    }
    fn context(
        agent: String,
        session_id: String,
        limit: Option<u32>,
    ) -> Result<ContextResult, Failure> {
        Shipped::context(agent, session_id, limit).map(|mut c| {
            c.edits = bad_edits(c.edits, u32::MAX as usize);
            c
        })
    }
}

/// `edits` and one whose index is `len`, the number of rows (`u32::MAX` when
/// unknown).
fn bad_edits(mut edits: Vec<RowEdit>, len: usize) -> Vec<RowEdit> {
    edits.push(RowEdit {
        index: u32::try_from(len).unwrap_or(u32::MAX),
        action: EditAction::Tag,
    });
    edits
}

session_switch_test_policies::export!(BadEdits);
