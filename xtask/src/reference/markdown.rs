//! Small helpers for the generated Markdown.

/// The banner every generated page starts with.
pub fn banner(source: &str) -> String {
    format!(
        "<!-- Generated from {source} by `cargo run -q -p xtask -- docs` (`make reference`); \
         do not edit by hand. -->\n\n"
    )
}

/// `text` fit for a table cell: one line, `|` escaped, and [`prose`].
pub fn cell(text: &str) -> String {
    prose(&text.split_whitespace().collect::<Vec<_>>().join(" ")).replace('|', "\\|")
}

/// Help text as Markdown prose: outside code spans, brackets escaped
/// (`[default: …]`, `[YOU]` would read as links) and `<` as an entity
/// (`<NAME>` would read as HTML).
pub fn prose(text: &str) -> String {
    text.split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 {
                part.to_string()
            } else {
                part.replace('[', "\\[")
                    .replace(']', "\\]")
                    .replace('<', "&lt;")
            }
        })
        .collect::<Vec<_>>()
        .join("`")
}
