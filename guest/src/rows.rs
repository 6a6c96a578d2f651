//! History rows as they cross the component boundary (WIT `row-summaries`:
//! one head per row, every prefix in one string) and as the rules read
//! them ([`Row`]: the head with its prefix cut out).

use crate::failure::bad_input;
use crate::{Failure, Role, RowSummaries, RowSummary};

/// One row as the tagging rules see it (WIT `row-summary` with its prefix).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Row<'a> {
    pub role: Role,
    /// The first characters of the row's text (at most the policy's
    /// `prefix_chars`).
    pub prefix: &'a str,
    /// A send of ours wrote the row for the agent asked about.
    pub bridge_wrote: bool,
}

impl RowSummaries {
    /// No rows, room for `rows` of them and `prefix_bytes` bytes of prefixes.
    pub fn with_capacity(rows: usize, prefix_bytes: usize) -> Self {
        RowSummaries {
            rows: Vec::with_capacity(rows),
            prefixes: String::with_capacity(prefix_bytes),
        }
    }

    /// Append a row; `prefix` goes to the end of `prefixes`.
    pub fn push(&mut self, id: i64, role: Role, prefix: &str, bridge_wrote: bool) {
        self.prefixes.push_str(prefix);
        self.rows.push(RowSummary {
            id,
            role,
            // A WIT string is at most u32::MAX bytes.
            prefix_len: u32::try_from(prefix.len()).unwrap_or(u32::MAX),
            bridge_wrote,
        });
    }

    /// `rows` packed, with ids 1, 2, … (for tests and tools that start
    /// from rows).
    pub fn from_rows(rows: &[Row<'_>]) -> Self {
        let bytes = rows.iter().map(|r| r.prefix.len()).sum();
        let mut out = RowSummaries::with_capacity(rows.len(), bytes);
        for (id, r) in (1..).zip(rows) {
            out.push(id, r.role, r.prefix, r.bridge_wrote);
        }
        out
    }

    /// How many rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Each row with its prefix, in order. Errors: `bad-input` when the
    /// lengths do not add up to `prefixes` or cut it inside a character
    /// (WIT `row-summaries`): a sender's bug, refused before any rule runs.
    pub fn split(&self) -> Result<Vec<Row<'_>>, Failure> {
        let mut rest = self.prefixes.as_str();
        let mut out = Vec::with_capacity(self.rows.len());
        for (i, row) in self.rows.iter().enumerate() {
            let len = row.prefix_len as usize;
            let (Some(prefix), Some(tail)) = (rest.get(..len), rest.get(len..)) else {
                return Err(bad_input(format!(
                    "row {i}'s prefix length {len} does not cut the {} bytes of prefixes left \
                     on a character boundary",
                    rest.len()
                )));
            };
            out.push(Row {
                role: row.role,
                prefix,
                bridge_wrote: row.bridge_wrote,
            });
            rest = tail;
        }
        if !rest.is_empty() {
            return Err(bad_input(format!(
                "the rows' prefix lengths leave {} bytes of prefixes unused",
                rest.len()
            )));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FailureKind;

    #[test]
    fn push_then_split_gives_the_rows_back() {
        let mut s = RowSummaries::with_capacity(3, 16);
        s.push(1, Role::User, "héllo", true);
        s.push(2, Role::Assistant, "", false);
        s.push(5, Role::Tool, "墨河", false);
        assert_eq!(s.prefixes, "héllo墨河");
        assert_eq!(s.rows[2].prefix_len, 6);
        let rows = s.split().unwrap();
        assert_eq!(
            rows,
            [
                Row {
                    role: Role::User,
                    prefix: "héllo",
                    bridge_wrote: true
                },
                Row {
                    role: Role::Assistant,
                    prefix: "",
                    bridge_wrote: false
                },
                Row {
                    role: Role::Tool,
                    prefix: "墨河",
                    bridge_wrote: false
                },
            ]
        );
        assert!(
            RowSummaries::with_capacity(0, 0)
                .split()
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn lengths_that_do_not_fit_are_refused() {
        let bad = |lens: &[u32], prefixes: &str| {
            let s = RowSummaries {
                rows: lens
                    .iter()
                    .map(|&prefix_len| RowSummary {
                        id: 1,
                        role: Role::User,
                        prefix_len,
                        bridge_wrote: false,
                    })
                    .collect(),
                prefixes: prefixes.to_string(),
            };
            let f = s.split().unwrap_err();
            assert_eq!(f.kind, FailureKind::BadInput);
            f.message
        };
        assert!(bad(&[1], "hé").contains("leave 2 bytes"));
        assert!(bad(&[2], "hé").contains("row 0's prefix length 2"));
        assert!(bad(&[1, 9], "hé").contains("row 1's prefix length 9"));
        assert!(bad(&[], "x").contains("leave 1 bytes"));
        assert!(bad(&[u32::MAX], "").contains("length 4294967295"));
    }
}
