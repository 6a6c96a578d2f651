//! Small helpers for the generated Markdown.

/// The banner every generated page starts with.
pub fn banner(source: &str) -> String {
    format!(
        "<!-- Generated from {source} by `cargo run -q -p xtask -- docs` (`make reference`); \
         do not edit by hand. -->\n\n"
    )
}

/// `text` fit for a table cell: one line, `|` escaped.
pub fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}
