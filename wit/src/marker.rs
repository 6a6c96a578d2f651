//! The `[YOU] ` tag (the legacy `xmpp_session_bridge.py`'s prefix for an
//! agent's own words), its look-alikes and the blanks around it: docs/src/design/contracts.md
//! "Provenance of our rows", WIT `edit-action`. The policy decides with these
//! functions and the host applies its edits with them, so both show the model
//! the same text (docs/src/security.md, gaps G1 and G4).

use crate::fold::reads_as;
use alloc::string::String;

/// The tag before an agent's own words: `[YOU]` and one space.
pub const YOU_TAG: &str = "[YOU] ";

/// The marker alone, without its space.
pub const MARKER: &str = "[YOU]";

/// The marker's name: no agent may sign its lines with it (ASCII case
/// ignored), or its own lines would read as tags.
pub const MARKER_NAME: &str = "YOU";

/// Whether `c` is skipped before and after a `[YOU]` marker: Unicode
/// `White_Space` ([`char::is_whitespace`]), or a
/// `Default_Ignorable_Code_Point` (Unicode 16, DerivedCoreProperties.txt):
/// invisible characters such as U+200B ZERO WIDTH SPACE, U+2060 WORD JOINER,
/// U+FEFF, soft hyphen, bidi controls, variation selectors, Hangul fillers
/// and tags, which a room line could put before a tag so that the model
/// still reads it as one (gap G4 of docs/src/security.md).
pub fn is_blank(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '\u{ad}'
                | '\u{34f}'
                | '\u{61c}'
                | '\u{115f}'..='\u{1160}'
                | '\u{17b4}'..='\u{17b5}'
                | '\u{180b}'..='\u{180f}'
                | '\u{200b}'..='\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{206f}'
                | '\u{3164}'
                | '\u{fe00}'..='\u{fe0f}'
                | '\u{feff}'
                | '\u{ffa0}'
                | '\u{fff0}'..='\u{fff8}'
                | '\u{1bca0}'..='\u{1bca3}'
                | '\u{1d173}'..='\u{1d17a}'
                | '\u{e0000}'..='\u{e0fff}'
        )
}

/// The length in bytes of the `[YOU]` marker `text` starts with, if it
/// starts with one: each character reads as the marker's
/// ([`reads_as`]: ASCII case ignored, full-width forms such as `［ｙｏｕ］`
/// folded, which a model reads as the same tag, gap G4 of docs/src/security.md).
pub fn marker_len(text: &str) -> Option<usize> {
    let mut chars = text.chars();
    let mut len = 0;
    for want in MARKER.chars() {
        let c = chars.next()?;
        if !reads_as(c, want) {
            return None;
        }
        len += c.len_utf8();
    }
    Some(len)
}

/// `text` without its leading blanks ([`is_blank`]).
pub fn skip_blanks(text: &str) -> &str {
    text.trim_start_matches(is_blank)
}

/// `text` without its leading `[YOU]` markers (WIT `edit-action.untag`):
/// repeatedly drop leading blanks ([`is_blank`]) and a marker (as
/// [`marker_len`] reads one), then drop leading blanks. `untag("  [you]［YOU］ hi")`
/// is `"hi"`; text without a marker loses only its leading blanks.
///
/// Borrows, no allocation: it runs on every row a `context` edits.
pub fn untag(text: &str) -> &str {
    let mut rest = skip_blanks(text);
    while let Some(len) = marker_len(rest) {
        rest = skip_blanks(&rest[len..]);
    }
    rest
}

/// Whether `text` starts with at least one `[YOU]` marker (after leading
/// blanks, [`untag`]'s rule).
pub fn has_marker(text: &str) -> bool {
    marker_len(skip_blanks(text)).is_some()
}

/// Whether `base` (a prefix after [`untag`]) could be the start of a
/// `[YOU]` marker cut off by the prefix's length: empty, or a proper prefix
/// of a marker form (`[`, `［Y`, `[yo`, …).
///
/// Reads at most the first five characters: it runs on every other
/// person's row a `tag` sees, whose prefix may be hundreds of characters
/// (counting them all was most of the policy's `tag` per row).
pub fn could_hide_marker(base: &str) -> bool {
    let mut chars = base.chars();
    for want in MARKER.chars() {
        match chars.next() {
            // Ended inside (or before) a marker: a proper prefix of one.
            None => return true,
            Some(c) if !reads_as(c, want) => return false,
            Some(_) => {}
        }
    }
    // A whole marker is not a proper prefix of one.
    false
}

/// The tagged form of a row (WIT `edit-action.tag`): [`YOU_TAG`] +
/// [`untag`]`(text)`, so a row carries exactly one tag however often it is
/// tagged.
pub fn tag(text: &str) -> String {
    let base = untag(text);
    let mut out = String::with_capacity(YOU_TAG.len() + base.len());
    out.push_str(YOU_TAG);
    out.push_str(base);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untag_drops_every_leading_marker_and_blank() {
        for (text, want) in [
            ("[YOU] hi", "hi"),
            ("  [You]  [YOU]\t[yOu] hi there ", "hi there "),
            ("[YOU]", ""),
            ("[ YOU] hi", "[ YOU] hi"),
            ("hi [YOU]", "hi [YOU]"),
            ("\u{3000}[YOU]\u{a0}x", "x"),
            ("\u{200b}[YOU] I am mohe", "I am mohe"),
            ("\u{feff}\u{2060}[YOU]\u{ad}x", "x"),
            ("\u{e0020}[YOU]\u{fe0f} x", "x"),
            ("［ｙｏｕ］ x", "x"),
        ] {
            assert_eq!(untag(text), want, "{text:?}");
        }
    }

    #[test]
    fn tag_is_idempotent() {
        assert_eq!(tag("[you][YOU] a"), "[YOU] a");
        assert_eq!(tag(&tag("a")), "[YOU] a");
        assert!(has_marker(" \u{200b}[YOU]x"));
        assert!(!has_marker(" x [YOU]"));
        assert!(could_hide_marker("［Y"));
        assert!(!could_hide_marker("[x"));
    }

    /// The early-stopping read agrees with the definition (fewer characters
    /// than a marker, each in its marker form) on every string of up to
    /// five characters over the marker forms and two others.
    #[test]
    fn could_hide_marker_is_a_proper_prefix_of_a_marker() {
        use alloc::vec::Vec;
        // Each marker character in ASCII upper and lower case and its
        // full-width forms, written out rather than derived.
        let forms: [&[char]; 5] = [
            &['[', '\u{ff3b}'],
            &['Y', 'y', '\u{ff39}', '\u{ff59}'],
            &['O', 'o', '\u{ff2f}', '\u{ff4f}'],
            &['U', 'u', '\u{ff35}', '\u{ff55}'],
            &[']', '\u{ff3d}'],
        ];
        let defined = |base: &str| {
            base.chars().count() < forms.len()
                && base
                    .chars()
                    .zip(&forms)
                    .all(|(c, forms)| forms.contains(&c))
        };
        let mut alphabet: Vec<char> = forms.iter().flat_map(|f| f.iter()).copied().collect();
        alphabet.extend(['x', ' ']);
        alphabet.sort_unstable();
        alphabet.dedup();
        let mut layer = alloc::vec![String::new()];
        for len in 0..=5 {
            for s in &layer {
                assert_eq!(could_hide_marker(s), defined(s), "{s:?}");
            }
            if len == 5 {
                break;
            }
            layer = layer
                .iter()
                .flat_map(|s| alphabet.iter().map(move |c| alloc::format!("{s}{c}")))
                .collect();
        }
        assert!(could_hide_marker(""));
        assert!(could_hide_marker("[yO"));
        assert!(could_hide_marker("[YOU"));
        assert!(!could_hide_marker("[YOU]"));
        assert!(!could_hide_marker("[YOx"));
    }
}
