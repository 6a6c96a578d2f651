//! The loop guard's text matching: whether a body names an agent
//! ([`addresses`]), and the digest the duplicate rule compares. Both read
//! text as the `[YOU]` marker is read: full-width forms as ASCII, case
//! ignored.

use session_switch_contract::fold::fold_width;
use session_switch_contract::marker::untag;

/// Whether `body` names the agent: its `mention` (e.g. `@mohe`) or its nick
/// as a whole word, read as the `[YOU]` marker is read (case ignored,
/// full-width forms folded: `＠ｍｏｈｅ` names mohe); `mohe2` does not name
/// `mohe`. Addressing decides whether to answer, not who spoke, so it folds
/// where identities never do.
pub fn addresses(body: &str, nick: &str, mention: Option<&str>) -> bool {
    mention
        .into_iter()
        .chain([nick])
        .filter(|name| !name.is_empty())
        .any(|name| contains_word(body, name))
}

/// `text` as the loop guard's text matches read it: full-width forms as
/// ASCII ([`fold_width`], the marker's rule), then lower case.
fn fold(text: &str) -> String {
    text.chars()
        .map(fold_width)
        .collect::<String>()
        .to_lowercase()
}

fn contains_word(text: &str, word: &str) -> bool {
    let lower = fold(text);
    let word = fold(word);
    lower.match_indices(&word).any(|(at, _)| {
        let before = lower[..at].chars().next_back();
        let after = lower[at + word.len()..].chars().next();
        before.is_none_or(|c| !continues_word(c)) && after.is_none_or(|c| !continues_word(c))
    })
}

/// Whether `c` beside a name makes it part of a longer word: a letter,
/// digit, `_` or combining mark (`mohe` + U+0301 is another word), except
/// in the scripts written without spaces between words (Han, kana,
/// Hangul, Thai, Lao, Khmer, Myanmar): `@mohe你好` and `请mohe看一下` name
/// mohe, and a Chinese nick inside a Chinese sentence is found.
fn continues_word(c: char) -> bool {
    let combining = matches!(c,
        '\u{0300}'..='\u{036F}' | '\u{1AB0}'..='\u{1AFF}' | '\u{1DC0}'..='\u{1DFF}'
        | '\u{20D0}'..='\u{20FF}' | '\u{FE20}'..='\u{FE2F}');
    let unspaced = matches!(c,
        '\u{0E00}'..='\u{0EFF}' | '\u{1000}'..='\u{109F}' | '\u{1100}'..='\u{11FF}'
        | '\u{1780}'..='\u{17FF}' | '\u{3005}'..='\u{3007}' | '\u{3040}'..='\u{30FF}'
        | '\u{3130}'..='\u{318F}' | '\u{31F0}'..='\u{31FF}' | '\u{3400}'..='\u{4DBF}'
        | '\u{4E00}'..='\u{9FFF}' | '\u{AC00}'..='\u{D7AF}' | '\u{F900}'..='\u{FAFF}'
        | '\u{20000}'..='\u{3FFFF}');
    (c.is_alphanumeric() || c == '_' || combining) && !unspaced
}

/// The body as the duplicate rule compares it: without `[YOU]` markers,
/// blanks folded, full-width forms and case folded ([`fold`]); FNV-1a 64
/// so the state stores no text.
pub(super) fn digest(body: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let folded = fold(untag(body));
    let mut first = true;
    for word in folded.split_whitespace() {
        if !first {
            hash = (hash ^ u64::from(b' ')).wrapping_mul(0x0100_0000_01b3);
        }
        first = false;
        for byte in word.bytes() {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}
