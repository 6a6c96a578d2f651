//! The config text that spans point into: errors that name the file and
//! the line.

use session_switch_contract::failure::Failure;

/// The config text, for errors that name the line.
pub(super) struct Source<'a> {
    pub(super) text: &'a str,
    pub(super) origin: &'a str,
}

pub(super) type Span = std::ops::Range<usize>;

impl Source<'_> {
    pub(super) fn line(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }
    pub(super) fn at(&self, span: Span, msg: String) -> Failure {
        Failure::bad_input(format!(
            "config {}, line {}: {msg}",
            self.origin,
            self.line(span.start)
        ))
    }
}
