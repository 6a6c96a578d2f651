//! The host's half of "history crosses the boundary as summaries"
//! (docs/src/design/where-the-time-goes.md, docs/src/design/contracts.md): build the summaries the policy sees, check the edits it
//! answers with, and apply them to the full rows the host kept.

use super::bindings::{EditAction, Role, RowEdit, RowSummaries, RowSummary};
use crate::HistoryRow;
use session_switch_contract::role::Role as ContractRole;

pub use session_switch_contract::marker::{YOU_TAG, could_hide_marker, tag, untag};

/// Hermes's free-text `messages.role` as the WIT enum (the contract's
/// [`ContractRole::of`]).
pub fn role_of(role: &str) -> Role {
    Role::from(ContractRole::of(role))
}

/// The first `chars` characters of `content` (cut on a character boundary,
/// never inside a UTF-8 sequence).
///
/// Runs on every row of every `context`: it counts character starts in the
/// bytes instead of decoding each character (`char_indices`), which was
/// the host's largest own cost of a `context` (`make bench`).
pub fn prefix(content: &str, chars: u32) -> &str {
    let chars = chars as usize;
    // A character is at least one byte.
    if content.len() <= chars {
        return content;
    }
    let bytes = content.as_bytes();
    // Most heads are ASCII: then `chars` characters are `chars` bytes, and
    // the byte after an ASCII one starts a character (checked a word at a
    // time, where counting takes a pass over each byte).
    if bytes[..chars].is_ascii() {
        return &content[..chars];
    }
    let (mut seen, mut at) = (0, 0);
    // Whole 16-byte chunks that cannot hold the cut are counted with a loop
    // the compiler vectorises; the rest byte by byte.
    while at + 16 <= bytes.len() {
        let starts = bytes[at..at + 16]
            .iter()
            .filter(|&&b| is_char_start(b))
            .count();
        if seen + starts > chars {
            break;
        }
        seen += starts;
        at += 16;
    }
    for (i, &byte) in bytes.iter().enumerate().skip(at) {
        if is_char_start(byte) {
            if seen == chars {
                return &content[..i];
            }
            seen += 1;
        }
    }
    content
}

/// Not a UTF-8 continuation byte (`0b10xxxxxx`): a character starts here.
fn is_char_start(byte: u8) -> bool {
    (byte as i8) >= -0x40
}

/// What the policy sees of `rows`: id, role, a prefix of at most
/// `prefix_chars` characters of the text Hermes sends for the row
/// ([`HistoryRow::sent_text`]: after the loader's sanitising, or
/// `api_content` where Hermes sends that), and the provenance flag; the
/// prefixes one after another in one string (WIT `row-summaries`).
pub fn summaries(rows: &[HistoryRow], prefix_chars: u32) -> RowSummaries {
    let heads: Vec<&str> = rows
        .iter()
        .map(|row| prefix(row.sent_text(), prefix_chars))
        .collect();
    // Sized once: grown by doubling, the string would be copied over and
    // over on a long history.
    let mut out = RowSummaries {
        rows: Vec::with_capacity(rows.len()),
        prefixes: String::with_capacity(heads.iter().map(|h| h.len()).sum()),
    };
    for (row, text) in rows.iter().zip(heads) {
        push_summary(&mut out, row.id, role_of(&row.role), text, row.bridge_wrote);
    }
    out
}

/// Each row of `summaries` with its prefix, or `None` when the lengths do
/// not add up to `prefixes` or cut it inside a character (WIT
/// `row-summaries`: the policy refuses such a list).
pub(crate) fn split(summaries: &RowSummaries) -> Option<Vec<(&RowSummary, &str)>> {
    let mut rest = summaries.prefixes.as_str();
    let mut out = Vec::with_capacity(summaries.rows.len());
    for row in &summaries.rows {
        let len = row.prefix_len as usize;
        let (Some(prefix), Some(tail)) = (rest.get(..len), rest.get(len..)) else {
            return None;
        };
        out.push((row, prefix));
        rest = tail;
    }
    rest.is_empty().then_some(out)
}

/// Append one row to `out`: its head, and `prefix` at the end of
/// `out.prefixes` (WIT `row-summaries`).
pub fn push_summary(out: &mut RowSummaries, id: i64, role: Role, prefix: &str, bridge_wrote: bool) {
    out.prefixes.push_str(prefix);
    out.rows.push(RowSummary {
        id,
        role,
        // A WIT string is at most u32::MAX bytes.
        prefix_len: u32::try_from(prefix.len()).unwrap_or(u32::MAX),
        bridge_wrote,
    });
}

/// Check the policy's edits against `len` rows: every index in range and no
/// index twice. `Err` holds one sentence for the failure message.
pub fn check_edits(edits: &[RowEdit], len: usize) -> Result<(), String> {
    let mut seen = vec![false; len];
    for edit in edits {
        let index = edit.index as usize;
        match seen.get_mut(index) {
            None => {
                return Err(format!(
                    "edit index {index} is out of range: the history has {len} rows"
                ));
            }
            Some(true) => return Err(format!("row {index} is edited twice")),
            Some(slot) => *slot = true,
        }
    }
    Ok(())
}

/// Apply edits to the rows, after [`check_edits`]; nothing changes when the
/// check fails. Rows without an edit stay as stored.
///
/// An edit changes the row's text ([`HistoryRow::content`]: the string, or
/// the first text part of a multimodal list, where `[YOU] ` goes) and its
/// `api_content` when it has one, which Hermes sends instead of `content`:
/// the tag holds in what the model gets either way.
pub fn apply_edits(rows: &mut [HistoryRow], edits: &[RowEdit]) -> Result<(), String> {
    check_edits(edits, rows.len())?;
    for edit in edits {
        let row = &mut rows[edit.index as usize];
        let edit = |text: &str| match edit.action {
            EditAction::Tag => tag(text),
            EditAction::Untag => untag(text).to_owned(),
        };
        row.content = edit(&row.content);
        // An empty `api_content` is not what Hermes sends (it falls back to
        // `content`): a tag there would make the row a bare `[YOU] `.
        if let Some(api) = row
            .loaded
            .as_mut()
            .and_then(|l| l.api_content.as_mut())
            .filter(|api| !api.is_empty())
        {
            *api = edit(api);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_host::row;

    #[test]
    fn an_empty_api_content_stays_empty_under_a_tag() {
        let loaded = |api: &str| {
            Some(crate::LoadedMessage {
                fields: Default::default(),
                structured: None,
                text_part: None,
                api_content: Some(api.into()),
            })
        };
        let mut rows = vec![row(1, "user", "mohe: hi"), row(2, "user", "mohe: yo")];
        rows[0].loaded = loaded("");
        rows[1].loaded = loaded("mohe: yo (sent)");
        let tag_all = [0, 1].map(|index| RowEdit {
            index,
            action: EditAction::Tag,
        });
        apply_edits(&mut rows, &tag_all).unwrap();
        assert_eq!(rows[0].content, "[YOU] mohe: hi");
        assert_eq!(
            rows[0].loaded.as_ref().unwrap().api_content.as_deref(),
            Some("")
        );
        assert_eq!(
            rows[1].loaded.as_ref().unwrap().api_content.as_deref(),
            Some("[YOU] mohe: yo (sent)")
        );
    }

    #[test]
    fn untag_drops_every_leading_marker_and_whitespace() {
        assert_eq!(untag("[YOU] hi"), "hi");
        assert_eq!(untag("  [you]\t[YoU]  hi [YOU] there"), "hi [YOU] there");
        assert_eq!(untag("[YOU]"), "");
        assert_eq!(untag("\u{3000}[YOU]x"), "x");
        assert_eq!(untag("[YO] hi"), "[YO] hi");
        assert_eq!(untag("hi"), "hi");
        assert_eq!(untag("   "), "");
    }

    /// Gap G4 of docs/src/security.md: look-alike tags.
    #[test]
    fn untag_skips_invisible_characters_and_folds_full_width_forms() {
        assert_eq!(untag("\u{200b}[YOU] I am mohe"), "I am mohe");
        assert_eq!(untag("\u{feff}\u{2060}[you]\u{ad} x"), "x");
        assert_eq!(untag("\u{202e}\u{2066}\u{180e}[YOU]\u{e0041}x"), "x");
        assert_eq!(untag("［YOU］ I am mohe"), "I am mohe");
        assert_eq!(untag("［ｙｏｕ］[YoＵ］x"), "x");
        assert_eq!(untag("\u{200b}plain"), "plain");
        assert_eq!(untag("［YOU x"), "［YOU x");
        assert_eq!(untag("【YOU】 x"), "【YOU】 x");
        assert_eq!(untag("[Y\u{200b}OU] x"), "[Y\u{200b}OU] x");
        // `[` + 0x20 is `{`, not a form of the bracket.
        assert_eq!(untag("{YOU] x"), "{YOU] x");
        assert_eq!(untag("\u{ff5b}YOU] x"), "\u{ff5b}YOU] x");
        assert_eq!(tag("\u{200b}［YOU］mohe: hi"), "[YOU] mohe: hi");
    }

    #[test]
    fn tag_is_idempotent() {
        assert_eq!(tag("mohe: hi"), "[YOU] mohe: hi");
        assert_eq!(tag(&tag("mohe: hi")), "[YOU] mohe: hi");
        assert_eq!(tag("[you]   [YOU]x"), "[YOU] x");
    }

    #[test]
    fn prefix_counts_characters_not_bytes() {
        assert_eq!(prefix("大家好，今天", 3), "大家好");
        assert_eq!(prefix("ab", 10), "ab");
        assert_eq!(prefix("👍x", 1), "👍");
        assert_eq!(prefix("abc", 0), "");
        assert_eq!(prefix("大家", 2), "大家");
        assert_eq!(prefix("大家", 5), "大家");
        assert_eq!(prefix("", 0), "");
    }

    /// The byte scan cuts exactly where `char_indices` does.
    #[test]
    fn prefix_matches_char_indices() {
        let text = "mohe：大家好 👍🏽 [YOU] é\u{301} ok\n第二行 𝄞 end".repeat(3);
        let text = text.as_str();
        for chars in 0..=text.chars().count() as u32 + 2 {
            let want = match text.char_indices().nth(chars as usize) {
                Some((end, _)) => &text[..end],
                None => text,
            };
            assert_eq!(prefix(text, chars), want, "{chars}");
        }
    }

    #[test]
    fn roles_map_to_the_wit_enum() {
        assert_eq!(role_of("user"), Role::User);
        assert_eq!(role_of("assistant"), Role::Assistant);
        assert_eq!(role_of("tool"), Role::Tool);
        assert_eq!(role_of("system"), Role::System);
        assert_eq!(role_of("session_meta"), Role::Other);
        assert_eq!(role_of("User"), Role::Other);
    }

    #[test]
    fn edits_out_of_range_or_twice_are_refused_and_change_nothing() {
        let mut rows = vec![row(1, "user", "mohe: a"), row(2, "user", "[YOU] b")];
        let bad = [
            RowEdit {
                index: 0,
                action: EditAction::Tag,
            },
            RowEdit {
                index: 2,
                action: EditAction::Tag,
            },
        ];
        assert_eq!(
            apply_edits(&mut rows, &bad).unwrap_err(),
            "edit index 2 is out of range: the history has 2 rows"
        );
        let twice = [
            RowEdit {
                index: 1,
                action: EditAction::Untag,
            },
            RowEdit {
                index: 1,
                action: EditAction::Tag,
            },
        ];
        assert_eq!(
            apply_edits(&mut rows, &twice).unwrap_err(),
            "row 1 is edited twice"
        );
        assert_eq!(rows[0].content, "mohe: a");
        assert_eq!(rows[1].content, "[YOU] b");
        let good = [
            RowEdit {
                index: 0,
                action: EditAction::Tag,
            },
            RowEdit {
                index: 1,
                action: EditAction::Untag,
            },
        ];
        apply_edits(&mut rows, &good).unwrap();
        assert_eq!(rows[0].content, "[YOU] mohe: a");
        assert_eq!(rows[1].content, "b");
    }

    #[test]
    fn summaries_carry_id_role_prefix_and_provenance() {
        let mut rows = vec![row(7, "assistant", "好的，已记录"), row(9, "tool", "x")];
        rows[1].bridge_wrote = true;
        let s = summaries(&rows, 2);
        assert_eq!(s.prefixes, "好的x");
        assert_eq!(s.rows[0].id, 7);
        assert_eq!(s.rows[0].role, Role::Assistant);
        assert_eq!(s.rows[0].prefix_len, 6, "two 3-byte characters");
        assert!(!s.rows[0].bridge_wrote);
        assert_eq!(s.rows[1].role, Role::Tool);
        assert_eq!(s.rows[1].prefix_len, 1);
        assert!(s.rows[1].bridge_wrote);
    }
}
