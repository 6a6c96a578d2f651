//! How the policy reads a character as a model reads it, one rule for
//! every text match that is not an identity: the `[YOU]` marker
//! ([`crate::marker`]) and the loop guard's mentions and duplicate digest
//! (docs/src/design/rules.md, docs/src/design/loop-guard.md). Identities never fold: nicks and signatures compare
//! exactly, as ejabberd seats nicks.

/// `c` with a full-width ASCII form (U+FF01–U+FF5E, `！`…`～`) read as its
/// ASCII character (`Ｙ` → `Y`, `［` → `[`); every other character as is.
/// Case is left to the caller.
pub fn fold_width(c: char) -> char {
    match c {
        '\u{ff01}'..='\u{ff5e}' => char::from_u32(c as u32 - 0xfee0).unwrap_or(c),
        _ => c,
    }
}

/// Whether `c` reads as the ASCII character `want`: full-width forms
/// folded ([`fold_width`]), ASCII case ignored.
pub fn reads_as(c: char, want: char) -> bool {
    fold_width(c).eq_ignore_ascii_case(&want)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_width_forms_read_as_ascii() {
        for (wide, ascii) in [
            ('！', '!'),
            ('Ａ', 'A'),
            ('ｚ', 'z'),
            ('～', '~'),
            ('［', '['),
        ] {
            assert_eq!(fold_width(wide), ascii);
        }
        for c in ['a', '墨', '\u{3000}', '\u{ff5f}', '\u{ff00}'] {
            assert_eq!(fold_width(c), c);
        }
        assert!(reads_as('ｙ', 'Y'));
        assert!(reads_as('y', 'Y'));
        assert!(!reads_as('x', 'Y'));
    }
}
