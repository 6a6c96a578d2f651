//! The sentences of `resolve`'s common paths, built without `core::fmt`.

/// `parts` joined, in one allocation. The sentences of `resolve`'s common
/// paths are built with this instead of `format!`: in the component,
/// `core::fmt` was the largest single cost of a `resolve` (`make bench`,
/// docs/src/performance.md), and these run on every room message.
pub(crate) fn concat(parts: &[&str]) -> String {
    let mut out = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        out.push_str(part);
    }
    out
}
