//! Body normalisation (docs/src/design/send.md#body-normalisation): what the room and
//! the history row get, computed once, so both hold the same text.

use crate::Failure;
use crate::failure::bad_input;
use crate::tagging::untag;

const ESC: char = '\u{1b}';
const BEL: char = '\u{7}';

/// Whether XML 1.0 allows `c` in a document (its `Char` production): the
/// body travels in an XMPP stanza, and a forbidden character breaks every
/// receiving client (ejabberd research). Forbidden: U+0000–U+001F except TAB,
/// LF and CR (CR never reaches this test), U+FFFE, U+FFFF. Lone surrogates
/// (U+D800–U+DFFF) are forbidden too, but a Rust `char` cannot be one, and
/// the component model only passes valid UTF-8 strings.
pub fn xml_allows(c: char) -> bool {
    !matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}')
}

/// `text` with line ends unified and terminal escapes removed, in this order:
/// 1. CRLF and lone CR → LF;
/// 2. ANSI escape sequences removed: CSI `ESC [` parameters (0x30–0x3F),
///    intermediates (0x20–0x2F) and a final byte (0x40–0x7E); OSC
///    `ESC ]` … `BEL` or `ESC \`; short escapes `ESC x` and `ESC ( B`
///    (intermediates 0x20–0x2F, final 0x30–0x7E, ECMA-35). An unterminated
///    sequence loses only its `ESC [` / `ESC ]` / `ESC` (the rest stays as
///    text: nothing a person typed is swallowed);
/// 3. characters XML 1.0 forbids removed ([`xml_allows`]), any stray `ESC`
///    with them;
/// 4. leading `[YOU]` markers (any case, full-width forms too) removed
///    with the blanks around them (whitespace and invisible format
///    characters: [`untag`], so the room never sees the tag, and the
///    history row `[YOU] ` + body is already in tagged form).
///
/// Inner and trailing whitespace are kept. Idempotent:
/// `clean(clean(t)) == clean(t)`.
pub fn clean(text: &str) -> String {
    let unified = text.replace("\r\n", "\n").replace('\r', "\n");
    let plain = strip_ansi(&unified);
    let allowed: String = plain.chars().filter(|&c| xml_allows(c)).collect();
    untag(&allowed).to_string()
}

/// [`clean`], then the checks: an empty or whitespace-only result is refused
/// (`bad-input`, `empty message`), and so is one longer than
/// `max_chars` characters (`bad-input`,
/// `message is N characters, the maximum is M`).
pub fn normalise(text: &str, max_chars: u32) -> Result<String, Failure> {
    let body = clean(text);
    if body.trim().is_empty() {
        return Err(bad_input(
            "empty message: nothing is left to send after normalisation",
        ));
    }
    let chars = body.chars().count();
    if chars > max_chars as usize {
        return Err(bad_input(format!(
            "message is {chars} characters, the maximum is {max_chars}"
        )));
    }
    Ok(body)
}

fn strip_ansi(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != ESC {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        i += match chars.get(i + 1) {
            Some('[') => csi_len(&chars[i + 2..]).map_or(2, |n| n + 2),
            Some(']') => osc_len(&chars[i + 2..]).map_or(2, |n| n + 2),
            _ => 1 + short_len(&chars[i + 1..]),
        };
    }
    out
}

/// Length of a CSI body (after `ESC [`) up to and including its final byte;
/// `None` when there is no final byte.
fn csi_len(rest: &[char]) -> Option<usize> {
    let params = rest
        .iter()
        .take_while(|c| ('\u{30}'..='\u{3f}').contains(*c))
        .count();
    let inter = rest[params..]
        .iter()
        .take_while(|c| ('\u{20}'..='\u{2f}').contains(*c))
        .count();
    let fin = rest.get(params + inter)?;
    ('\u{40}'..='\u{7e}')
        .contains(fin)
        .then_some(params + inter + 1)
}

/// Length of what follows a lone `ESC` in a short escape (ECMA-35):
/// intermediates (0x20–0x2F) then a final character (0x30–0x7E), e.g. `=`
/// or `( B`; 0 when no final character follows (only the `ESC` goes).
fn short_len(rest: &[char]) -> usize {
    let inter = rest
        .iter()
        .take_while(|c| ('\u{20}'..='\u{2f}').contains(*c))
        .count();
    match rest.get(inter) {
        Some(fin) if ('\u{30}'..='\u{7e}').contains(fin) => inter + 1,
        _ => 0,
    }
}

/// Length of an OSC body (after `ESC ]`) up to and including its terminator
/// (`BEL` or `ESC \`); `None` when unterminated.
fn osc_len(rest: &[char]) -> Option<usize> {
    (0..rest.len()).find_map(|i| match rest[i] {
        BEL => Some(i + 1),
        ESC if rest.get(i + 1) == Some(&'\\') => Some(i + 2),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FailureKind;

    #[test]
    fn clean_table() {
        let cases = [
            ("hello", "hello"),
            ("a\r\nb\rc\nd", "a\nb\nc\nd"),
            ("\r\r\n", ""),
            ("x\r", "x\n"),
            ("\u{1b}[31mred\u{1b}[0m plain", "red plain"),
            ("\u{1b}[1;32;40mbold\u{1b}[m", "bold"),
            ("\u{1b}[?25lcursor\u{1b}[?25h", "cursor"),
            ("\u{1b}[ qx", "x"),
            ("\u{1b}]0;title\u{7}text", "text"),
            ("\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\", "link"),
            ("\u{1b}(Bok", "ok"),
            ("\u{1b}=keypad", "keypad"),
            ("\u{1b}Mreverse", "reverse"),
            ("a\u{1b} é", "a é"),
            ("\u{1b} unfinished", "nfinished"),
            ("unterminated \u{1b}[12", "unterminated 12"),
            ("unterminated \u{1b}]0;title", "unterminated 0;title"),
            ("esc at end \u{1b}", "esc at end "),
            ("esc \u{1b}\u{1b}[0mx", "esc x"),
            ("esc+ctl \u{1b}\u{1}x", "esc+ctl x"),
            ("nul\u{0}bel\u{7}vt\u{b}ff\u{c}us\u{1f}", "nulbelvtffus"),
            ("tab\tand\nlf kept", "tab\tand\nlf kept"),
            ("nonchar\u{fffe}\u{ffff}!", "nonchar!"),
            (
                "del \u{7f} and c1 \u{85} are XML chars",
                "del \u{7f} and c1 \u{85} are XML chars",
            ),
            ("[YOU] hi", "hi"),
            ("[you][YOU]  hi", "hi"),
            ("  indented", "indented"),
            ("[\u{1b}[0mYOU] hidden tag", "hidden tag"),
            ("[YO\u{0}U] hidden tag", "hidden tag"),
            ("inner  and trailing  \n", "inner  and trailing  \n"),
            ("say [YOU] later", "say [YOU] later"),
            ("emoji 👍 和中文", "emoji 👍 和中文"),
            ("\u{200b}［YOU］\u{feff} look-alike tag", "look-alike tag"),
            ("\u{200b}zero width first", "zero width first"),
            ("inner\u{200b}kept", "inner\u{200b}kept"),
        ];
        for (text, want) in cases {
            let got = clean(text);
            assert_eq!(got, want, "clean({text:?})");
            assert_eq!(clean(&got), got, "clean is not idempotent on {text:?}");
        }
    }

    #[test]
    fn normalise_refuses_empty_and_oversized() {
        for text in [
            "",
            "   ",
            "\r\n\t ",
            "[YOU]",
            "[YOU]   ",
            "\u{1b}[0m",
            "\u{0}\u{1}",
            "\u{200b}\u{feff}",
            "［ｙｏｕ］\u{2060}",
        ] {
            let e = normalise(text, 10).unwrap_err();
            assert_eq!(e.kind, FailureKind::BadInput, "{text:?}");
            assert!(
                e.message.starts_with("empty message"),
                "{text:?}: {}",
                e.message
            );
        }
        let e = normalise("abcdefghijk", 10).unwrap_err();
        assert_eq!(e.kind, FailureKind::BadInput);
        assert_eq!(e.message, "message is 11 characters, the maximum is 10");
        // Characters, not bytes; counted after normalisation.
        assert_eq!(normalise(&"好".repeat(10), 10).unwrap(), "好".repeat(10));
        assert_eq!(normalise("[YOU] 0123456789", 10).unwrap(), "0123456789");
        assert_eq!(
            normalise(&"好".repeat(11), 10).unwrap_err().message,
            "message is 11 characters, the maximum is 10"
        );
        assert_eq!(normalise("a\r\nb", 3).unwrap(), "a\nb");
        assert_eq!(normalise("  x  ", 10).unwrap(), "x  ");
    }

    #[test]
    fn xml_char_table() {
        for c in [
            '\t',
            '\n',
            '\r',
            ' ',
            '\u{7f}',
            '\u{d7ff}',
            '\u{e000}',
            '\u{fffd}',
            '\u{10000}',
            '\u{10ffff}',
        ] {
            assert!(xml_allows(c), "{c:?}");
        }
        for c in [
            '\u{0}', '\u{8}', '\u{b}', '\u{c}', '\u{e}', '\u{1b}', '\u{1f}', '\u{fffe}', '\u{ffff}',
        ] {
            assert!(!xml_allows(c), "{c:?}");
        }
    }
}
