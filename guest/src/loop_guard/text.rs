//! The loop guard's text matching: whether a body names an agent
//! ([`addresses`]), a body without the names in it ([`without_names`], for
//! the stop rule), and the digest the duplicate rule compares. Each reads
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
pub(super) fn fold(text: &str) -> String {
    text.chars()
        .map(fold_width)
        .collect::<String>()
        .to_lowercase()
}

fn contains_word(text: &str, word: &str) -> bool {
    let lower = fold(text);
    whole_words(&lower, &fold(word)).next().is_some()
}

/// The byte ranges of `folded` where the folded `word` stands as a whole
/// word.
fn whole_words<'a>(
    folded: &'a str,
    word: &'a str,
) -> impl Iterator<Item = core::ops::Range<usize>> + 'a {
    folded
        .match_indices(word)
        .filter(move |&(at, _)| {
            let before = folded[..at].chars().next_back();
            let after = folded[at + word.len()..].chars().next();
            before.is_none_or(|c| !continues_word(c)) && after.is_none_or(|c| !continues_word(c))
        })
        .map(move |(at, _)| at..at + word.len())
}

/// `body` folded ([`fold`]) without the whole-word `names` in it, each
/// with an `@` before it and a `:`, `,` or `、` after it: what is left
/// of `@zhiwei, stop` is ` stop`. Empty names are skipped.
pub(super) fn without_names(body: &str, names: &[&str]) -> String {
    let folded = fold(body);
    let mut cut: Vec<core::ops::Range<usize>> = Vec::new();
    for name in names.iter().filter(|n| !n.is_empty()) {
        for mut range in whole_words(&folded, &fold(name)) {
            if folded[..range.start].ends_with('@') {
                range.start -= 1;
            }
            if let Some(c) = folded[range.end..].chars().next()
                && matches!(c, ':' | ',' | '、')
            {
                range.end += c.len_utf8();
            }
            cut.push(range);
        }
    }
    cut.sort_by_key(|r| r.start);
    let mut rest = String::with_capacity(folded.len());
    let mut at = 0;
    for range in cut {
        if range.start > at {
            rest.push_str(&folded[at..range.start]);
        }
        at = at.max(range.end);
    }
    rest.push_str(&folded[at.min(folded.len())..]);
    rest
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
