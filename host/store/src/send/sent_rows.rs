//! The sent rows: the `[YOU] ` rows our sends wrote into Hermes's history,
//! as the store reads them: the select over our list
//! `session_switch_sent`, and its row.

/// A row a send wrote into a session for an agent
/// ([`HermesStore::sent_rows`](crate::HermesStore::sent_rows)).
#[derive(Clone, Debug, PartialEq)]
pub struct SentRow {
    /// `messages.id`.
    pub message_id: i64,
    pub role: String,
    /// The row's stored timestamp (Unix seconds).
    pub timestamp: f64,
}

/// [`HermesStore::sent_rows`](crate::HermesStore::sent_rows)' select (`?1` the session, `?2` the agent).
/// `CROSS JOIN` keeps `session_switch_sent` the outer loop (SQLite never
/// reorders a `CROSS JOIN`), so the cost follows the agent's sends (each a
/// row of its XMPP history), not the session's length. A plain join let
/// SQLite, without statistics (Hermes's database has no `ANALYZE`), walk
/// every row of the session and probe the list for each.
pub const SENT_ROWS: &str = "SELECT m.id, m.role, m.timestamp \
     FROM session_switch_sent s CROSS JOIN messages m ON m.id = s.message_id \
     WHERE s.agent = ?2 AND m.session_id = ?1 ORDER BY s.message_id";
