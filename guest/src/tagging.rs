//! `[YOU]` tagging (docs/src/design/rules.md#tagging, docs/src/design/contracts.md#provenance-of-our-rows):
//! which history rows are the agent's own, to be shown as `[YOU] ` + text,
//! and which imitate the tag, to be shown without it.
//!
//! The rules see only each row's role, provenance and a bounded prefix
//! (`ValidSettings::prefix_chars`), and answer with edits the host applies
//! with [`apply`]. The tagged view is a fixed point: tagging it again gives
//! no edit.

use crate::rows::Row;
use crate::settings::{AgentEntry, ValidSettings};
use crate::{EditAction, Failure, Role, RowEdit, RowSummaries};
use session_switch_contract::marker::{YOU_TAG as TAG, could_hide_marker};
pub use session_switch_contract::marker::{has_marker, is_blank, untag};

/// The content the model sees after `action` (WIT `edit-action`):
/// `tag` → `[YOU] ` + [`untag`]`(content)`; `untag` → [`untag`]`(content)`.
pub fn apply(action: EditAction, content: &str) -> String {
    match action {
        EditAction::Tag => format!("{TAG}{}", untag(content)),
        EditAction::Untag => untag(content).to_string(),
    }
}

/// Whether `base` (a row's text without markers) is signed by one of
/// `names`: it starts with the name immediately followed by `:` or `：`
/// (U+FF1A), or with `[name]`. Names compare exactly, as the room compares
/// nicks (ejabberd keeps their case: `MoHe: …` is another occupant's
/// line). A bare prefix never signs: `mohe2: `, `mohe's`, `moheX:`,
/// `mohe, …`, `@mohe please` are not mohe's (docs/src/design/rules.md).
pub fn signed_by(base: &str, names: &[String]) -> bool {
    names.iter().any(|name| {
        let plain = base
            .strip_prefix(name.as_str())
            .is_some_and(|rest| rest.starts_with(':') || rest.starts_with('：'));
        let bracketed = base
            .strip_prefix('[')
            .and_then(|rest| rest.strip_prefix(name.as_str()))
            .is_some_and(|rest| rest.starts_with(']'));
        plain || bracketed
    })
}

/// The edit one row needs for `agent`, or `None`:
/// - only `user` rows are edited (`assistant` rows are the agent's own by
///   role; `tool`, `system`, `other` are never the agent's words);
/// - own (a send of ours wrote it for the agent, or it is signed by one of the
///   agent's names) → `tag`, unless the prefix already is exactly
///   `[YOU] ` + base with a non-empty base;
/// - not own but starting with a `[YOU]` marker → `untag`; so is a non-own
///   row whose non-empty prefix holds nothing but blanks and markers,
///   possibly ending in the start of a marker (`[`, `[YO`): the prefix may
///   have been cut before a marker the policy cannot see, and `untag` of
///   the whole row removes it if it is there (gap G1 of docs/src/security.md: a
///   `[YOU]` behind more leading blanks than the prefix holds);
/// - else no edit.
pub fn edit_for(agent: &AgentEntry, row: &Row<'_>) -> Option<EditAction> {
    if row.role != Role::User {
        return None;
    }
    let base = untag(row.prefix);
    let own = row.bridge_wrote || signed_by(base, &agent.names);
    if own {
        let tagged = !base.is_empty()
            && row
                .prefix
                .strip_prefix(TAG)
                .is_some_and(|rest| rest == base);
        (!tagged).then_some(EditAction::Tag)
    } else if has_marker(row.prefix) || (!row.prefix.is_empty() && could_hide_marker(base)) {
        Some(EditAction::Untag)
    } else {
        None
    }
}

/// The edits for `agent` on `rows` (WIT `policy.tag`), in row order; `index`
/// is the position in `rows.rows`. Each row is judged on the first
/// [`ValidSettings::prefix_chars`] characters of its prefix, the length
/// `context` asks `host.history` for, so a row gets the same edit from both
/// whatever prefix length a host sends (SECURITY G8). Errors:
/// `unknown-agent`; `bad-input` for prefix lengths that do not cut
/// `rows.prefixes` ([`RowSummaries::split`]).
pub fn tag(
    settings: &ValidSettings,
    agent: &str,
    rows: &RowSummaries,
) -> Result<Vec<RowEdit>, Failure> {
    let entry = settings.agent(agent)?;
    let chars = settings.prefix_chars() as usize;
    let mut rows = rows.split()?;
    for row in &mut rows {
        row.prefix = cut(row.prefix, chars);
    }
    Ok(edits(entry, &rows))
}

/// [`tag`] on rows whose prefixes `host.history` cut to
/// [`ValidSettings::prefix_chars`] already (WIT `policy.context`).
pub fn tag_history(
    settings: &ValidSettings,
    agent: &str,
    rows: &RowSummaries,
) -> Result<Vec<RowEdit>, Failure> {
    let entry = settings.agent(agent)?;
    Ok(edits(entry, &rows.split()?))
}

/// The first `chars` characters of `text` (all of it when shorter).
fn cut(text: &str, chars: usize) -> &str {
    // A character is at least one byte: no shorter text needs counting.
    if text.len() <= chars {
        return text;
    }
    text.char_indices()
        .nth(chars)
        .map_or(text, |(end, _)| &text[..end])
}

/// The edits of [`edit_for`] on `rows`, indexed by position.
fn edits(entry: &AgentEntry, rows: &[Row<'_>]) -> Vec<RowEdit> {
    rows.iter()
        .enumerate()
        .filter_map(|(i, row)| {
            edit_for(entry, row).map(|action| RowEdit {
                // A WIT list cannot hold more than u32::MAX elements.
                index: u32::try_from(i).unwrap_or(u32::MAX),
                action,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
