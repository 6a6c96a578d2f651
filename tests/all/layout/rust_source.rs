//! One Rust source file read for the layout rules: comments and string
//! literals blanked (so a doc link or a message names nothing), the
//! `#[cfg(test)]` items cut out, inline `mod name { … }` blocks split off,
//! and the `use` trees and inline paths it names.

/// A file's code outside its tests: `code` with comments and literals
/// blanked, `lines` the lines of the original text that remain.
pub struct Code {
    pub code: String,
    pub lines: usize,
    /// Modules declared `#[cfg(test)] mod name;`: their files are tests.
    pub test_modules: Vec<String>,
}

/// `text` without its `#[cfg(test)]` items, each cut from the attribute to
/// the end of the item it marks (its `;`, or the `}` closing its block),
/// so a `#[cfg(test)] mod extra;` near the top hides nothing after it.
pub fn outside_tests(text: &str) -> Code {
    let original: Vec<char> = text.chars().collect();
    let masked = mask(&original);
    let mut cut = vec![false; original.len()];
    let mut test_modules = Vec::new();
    let attribute: Vec<char> = "#[cfg(test)]".chars().collect();
    let mut i = 0;
    while i + attribute.len() <= masked.len() {
        if masked[i..i + attribute.len()] != attribute[..] {
            i += 1;
            continue;
        }
        let start = line_start_if_blank(&masked, i);
        let item = i + attribute.len();
        let end = item_end(&masked, item);
        let head: String = masked[item..end].iter().collect();
        if head.trim_end().ends_with(';')
            && let Some(name) = head.split_whitespace().skip_while(|w| *w != "mod").nth(1)
        {
            test_modules.push(name.trim_end_matches(';').to_owned());
        }
        let end = if masked.get(end) == Some(&'\n') {
            end + 1
        } else {
            end
        };
        cut[start..end].iter_mut().for_each(|c| *c = true);
        i = end;
    }
    let keep = |chars: &[char]| -> String {
        chars
            .iter()
            .zip(&cut)
            .filter(|(_, c)| !**c)
            .map(|(ch, _)| *ch)
            .collect()
    };
    Code {
        code: keep(&masked),
        lines: keep(&original).lines().count(),
        test_modules,
    }
}

/// The start of `i`'s line when only blanks precede `i` on it, else `i`.
fn line_start_if_blank(chars: &[char], i: usize) -> usize {
    let mut s = i;
    while s > 0 && (chars[s - 1] == ' ' || chars[s - 1] == '\t') {
        s -= 1;
    }
    if s == 0 || chars[s - 1] == '\n' { s } else { i }
}

/// The end (exclusive) of the item starting at `from`: past its first `;`
/// outside brackets, or past the `}` matching its first `{`.
fn item_end(chars: &[char], from: usize) -> usize {
    let mut depth = 0i32;
    let mut i = from;
    while i < chars.len() {
        match chars[i] {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ';' if depth == 0 => return i + 1,
            '{' if depth == 0 => return matching_brace(chars, i) + 1,
            _ => {}
        }
        i += 1;
    }
    chars.len()
}

/// The index of the `}` that closes the `{` at `open`.
fn matching_brace(chars: &[char], open: usize) -> usize {
    let mut depth = 0;
    for (i, c) in chars.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    chars.len() - 1
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `chars` with comments and the insides of string and char literals
/// replaced by spaces; newlines kept, so lines and offsets stay.
fn mask(chars: &[char]) -> Vec<char> {
    let mut out = chars.to_vec();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in &mut out[from..to.min(chars.len())] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let after_ident = i > 0 && is_ident(chars[i - 1]);
        if c == '/' && at(i + 1) == '/' {
            let end = (i..chars.len())
                .find(|&k| chars[k] == '\n')
                .unwrap_or(chars.len());
            blank(&mut out, i, end);
            i = end;
        } else if c == '/' && at(i + 1) == '*' {
            let (mut depth, mut k) = (1, i + 2);
            while k < chars.len() && depth > 0 {
                if chars[k] == '/' && at(k + 1) == '*' {
                    depth += 1;
                    k += 1;
                } else if chars[k] == '*' && at(k + 1) == '/' {
                    depth -= 1;
                    k += 1;
                }
                k += 1;
            }
            blank(&mut out, i, k);
            i = k;
        } else if c == 'r'
            && (!after_ident
                || (i >= 1 && chars[i - 1] == 'b' && !(i >= 2 && is_ident(chars[i - 2]))))
            && (at(i + 1) == '"' || at(i + 1) == '#')
        {
            let hashes = (i + 1..chars.len())
                .take_while(|&k| chars[k] == '#')
                .count();
            if at(i + 1 + hashes) != '"' {
                i += 1;
                continue;
            }
            let body = i + 2 + hashes;
            let mut k = body;
            while k < chars.len() && !(chars[k] == '"' && (1..=hashes).all(|h| at(k + h) == '#')) {
                k += 1;
            }
            blank(&mut out, body, k);
            i = k + 1 + hashes;
        } else if c == '"' {
            let mut k = i + 1;
            while k < chars.len() && chars[k] != '"' {
                k += if chars[k] == '\\' { 2 } else { 1 };
            }
            blank(&mut out, i + 1, k);
            i = k + 1;
        } else if c == '\'' && !after_ident && (at(i + 1) == '\\' || at(i + 2) == '\'') {
            let mut k = i + 2;
            while k < chars.len() && chars[k] != '\'' {
                k += 1;
            }
            blank(&mut out, i + 1, k);
            i = k + 1;
        } else {
            i += 1;
        }
    }
    out
}

/// Inline `mod name { … }` blocks of `code` (not at deeper levels): the
/// code left outside them, and each block's name and inside.
pub fn split_inline_modules(code: &str) -> (String, Vec<(String, String)>) {
    let chars: Vec<char> = code.chars().collect();
    let mut outside = String::new();
    let mut inline = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let word_start = i == 0 || !is_ident(chars[i - 1]);
        if word_start && chars[i..].starts_with(&['m', 'o', 'd', ' ']) {
            let mut k = i + 4;
            let name_start = k;
            while k < chars.len() && is_ident(chars[k]) {
                k += 1;
            }
            let name: String = chars[name_start..k].iter().collect();
            while k < chars.len() && chars[k] == ' ' {
                k += 1;
            }
            if !name.is_empty() && chars.get(k) == Some(&'{') {
                let close = matching_brace(&chars, k);
                inline.push((name, chars[k + 1..close].iter().collect()));
                i = close + 1;
                continue;
            }
        }
        outside.push(chars[i]);
        i += 1;
    }
    (outside, inline)
}

/// One name a `use` declaration binds.
#[derive(Clone, Debug)]
pub struct Use {
    pub public: bool,
    /// The name it binds (the last segment, or the `as` name); `*` for a glob.
    pub local: String,
    pub path: Vec<String>,
}

/// The `use` declarations of `code` (at any depth, any visibility), brace
/// groups expanded (`use a::{b, c::{self, d}};` → `a::b`, `a::c`,
/// `a::c::d`); and `code` with them blanked, for [`paths`].
pub fn uses(code: &str) -> (Vec<Use>, String) {
    fn expand(public: bool, prefix: &[String], tree: &str, out: &mut Vec<Use>) {
        let tree = tree.trim();
        let Some(open) = tree.find('{') else {
            let (path, alias) = match tree.split_once(" as ") {
                Some((p, a)) => (p.trim(), Some(a.trim())),
                None => (tree, None),
            };
            let mut full = prefix.to_vec();
            full.extend(
                path.split("::")
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned),
            );
            if full.last().is_some_and(|s| s == "self") {
                full.pop();
            }
            let Some(last) = full.last().cloned() else {
                return;
            };
            let local = alias.map_or(last, str::to_owned);
            if local != "_" {
                out.push(Use {
                    public,
                    local,
                    path: full,
                });
            }
            return;
        };
        let mut head = prefix.to_vec();
        head.extend(
            tree[..open]
                .split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        );
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(public, &head, &inner[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        if !inner[start..].trim().is_empty() {
            expand(public, &head, &inner[start..], out);
        }
    }
    let mut found = Vec::new();
    let mut rest: Vec<char> = code.chars().collect();
    for (i, _) in code.match_indices("use ") {
        let line_start = code[..i].rfind('\n').map_or(0, |n| n + 1);
        let before = code[line_start..i].trim();
        let public = before.starts_with("pub");
        if !(before.is_empty() || before == "pub" || public && before.ends_with(')')) {
            continue;
        }
        let Some(end) = code[i..].find(';') else {
            continue;
        };
        expand(public, &[], &code[i + 4..i + end], &mut found);
        // Blank the declaration (char offsets: the code may hold non-ASCII).
        let from = code[..i].chars().count();
        let len = code[i..i + end].chars().count();
        for c in &mut rest[from..from + len] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    }
    (found, rest.into_iter().collect())
}

/// Every path of two or more segments in `code` (`crate::a::B`,
/// `super::x`, `raw::RawConfig::from`), as its segments.
pub fn paths(code: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = is_ident(chars[i])
            && !chars[i].is_ascii_digit()
            && (i == 0 || !(is_ident(chars[i - 1]) || chars[i - 1] == ':' || chars[i - 1] == '.'));
        if !starts {
            i += 1;
            continue;
        }
        let mut segments = Vec::new();
        let mut k = i;
        loop {
            let s = k;
            while k < chars.len() && is_ident(chars[k]) {
                k += 1;
            }
            segments.push(chars[s..k].iter().collect::<String>());
            let more = chars.get(k) == Some(&':')
                && chars.get(k + 1) == Some(&':')
                && chars.get(k + 2).is_some_and(|c| is_ident(*c));
            if !more {
                break;
            }
            k += 2;
        }
        if segments.len() >= 2 {
            found.push(segments);
        }
        i = k.max(i + 1);
    }
    found
}

/// The names `code` defines at any depth (`struct`, `enum`, `fn`, …).
pub fn defined_names(code: &str) -> Vec<String> {
    let words: Vec<&str> = code
        .split(|c: char| !is_ident(c) && c != '!')
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(2)
        .filter(|w| {
            matches!(
                w[0],
                "struct"
                    | "enum"
                    | "union"
                    | "trait"
                    | "type"
                    | "fn"
                    | "const"
                    | "static"
                    | "macro_rules!"
            )
        })
        .map(|w| w[1].trim_end_matches('!').to_owned())
        .collect()
}

/// The public types `code` defines (`pub struct`, `pub enum`, `pub
/// union`, `pub trait`, `pub type`; not `pub(crate)` ones).
pub fn public_types(code: &str) -> Vec<String> {
    let words: Vec<&str> = code
        .split(|c: char| !is_ident(c))
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(3)
        .filter(|w| w[0] == "pub" && matches!(w[1], "struct" | "enum" | "union" | "trait" | "type"))
        .map(|w| w[2].to_owned())
        .collect()
}
