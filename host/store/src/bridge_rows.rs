//! The rows the bridge wrote into Hermes's history, as the store reads
//! them: the select over our list `session_switch_sent`, and its row.

/// A row the bridge wrote: `(messages.id, role, timestamp)`
/// ([`HermesStore::bridge_rows`](super::HermesStore::bridge_rows)).
pub type BridgeRow = (i64, String, f64);

/// [`HermesStore::bridge_rows`](super::HermesStore::bridge_rows)' select (`?1` the session, `?2` the agent).
/// `CROSS JOIN` keeps `session_switch_sent` the outer loop (SQLite never
/// reorders a `CROSS JOIN`), so the cost follows the agent's sends (each a
/// row of its XMPP history), not the session's length. A plain join let
/// SQLite, without statistics (Hermes's database has no `ANALYZE`), walk
/// every row of the session and probe the list for each: 740–760 µs a call
/// at 10,000 rows where the list's walk takes 5–8 µs (`bench/make_dbs.py`'s
/// databases, five sends).
pub const BRIDGE_ROWS: &str = "SELECT m.id, m.role, m.timestamp \
     FROM session_switch_sent s CROSS JOIN messages m ON m.id = s.message_id \
     WHERE s.agent = ?2 AND m.session_id = ?1 ORDER BY s.message_id";
