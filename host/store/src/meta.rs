//! Our reads and deletes of Hermes's `state_meta` table (docs/src/design/hermes-state-db.md: never
//! Hermes's own keys), and the one upsert the decision's transaction uses.
//! Writes of records and intents are `send/mod.rs`'s and `send/pending.rs`'s;
//! the loop guard's state is `guard_state.rs`'s, the room cursor `heard.rs`'s.

use rusqlite::OptionalExtension;

use super::HermesStore;
use super::loader;
use super::sqlite_failure::sqlite_failure;
use super::write_tx::{check_our_key, commit_with_retry};
use session_switch_contract::failure::Failure;

impl HermesStore {
    /// The value of `state_meta` key `key`; `None` when the key, or the
    /// whole `state_meta` table (early Hermes databases), is absent, or the
    /// stored value is NULL. Non-text values are returned as SQLite's text
    /// form (`CAST(value AS TEXT)`); bytes that are not UTF-8 (anyone can
    /// write a blob there) become U+FFFD, so the policy sees a malformed
    /// record it can report and `clear` can remove, not a read error.
    ///
    /// SQL (autocommit, read only): `SELECT CAST(value AS TEXT) FROM
    /// state_meta WHERE key = ?1`. On `SQLITE_BUSY` past the busy timeout
    /// (a DELETE-mode writer mid-commit): kind `busy`.
    pub fn meta_get(&self, key: &str) -> Result<Option<String>, Failure> {
        let Some(mut stmt) = self.prepare_reading(
            "state_meta",
            "SELECT CAST(value AS TEXT) FROM state_meta WHERE key = ?1",
            "read state_meta",
        )?
        else {
            return Ok(None);
        };
        stmt.query_row([key], |row| lossy_text(row, 0))
            .optional()
            .map(Option::flatten)
            .map_err(|e| self.fail(&format!("read state_meta key {key:?}"), e))
    }

    /// Delete `state_meta` key `key`; `true` when a row was removed.
    ///
    /// Only our keys may be deleted: those starting with
    /// [`OUR_KEY_PREFIX`](session_switch_contract::keys::OUR_KEY_PREFIX)
    /// (`session_switch:`) and the legacy `xmpp_session_bridge.py`'s
    /// [`LEGACY_KEY`](session_switch_contract::keys::LEGACY_KEY); any other
    /// key is refused with kind `bad-input` before the database is touched
    /// (Hermes's own keys, e.g. `fts_*` that its triggers read, are not ours:
    /// docs/src/design/hermes-state-db.md).
    ///
    /// SQL: `BEGIN IMMEDIATE` (retried as in [`HermesStore::send_write`]),
    /// `DELETE FROM state_meta WHERE key = ?1`, `COMMIT`. When the table is
    /// missing, nothing runs and the answer is `false` (the file stays
    /// untouched). `SQLITE_BUSY` past the retries: kind `busy`, nothing
    /// deleted.
    pub fn meta_delete(&self, key: &str) -> Result<bool, Failure> {
        check_our_key(key, true)?;
        if !self.table_exists("state_meta")? {
            return Ok(false);
        }
        let doing = format!("delete state_meta key {key:?}");
        let tx = self.begin_write(&doing)?;
        let removed = tx
            .execute("DELETE FROM state_meta WHERE key = ?1", [key])
            .map_err(|e| sqlite_failure(&self.path, self.busy_timeout, &doing, e))?;
        commit_with_retry(tx, &self.path, self.busy_timeout, &doing)?;
        Ok(removed > 0)
    }

    /// Our keys (prefix `session_switch:`) with their values, sorted by key
    /// (byte order). NULL values read as `""`. Empty when `state_meta` is
    /// missing.
    ///
    /// SQL (autocommit, read only): `SELECT key, COALESCE(CAST(value AS
    /// TEXT), '') FROM state_meta WHERE key >= 'session_switch:' AND key <
    /// 'session_switch;' ORDER BY key` (a range, not `LIKE`, which ignores
    /// ASCII case and treats `_` as a wildcard). `SQLITE_BUSY`: kind `busy`.
    pub fn meta_list_ours(&self) -> Result<Vec<(String, String)>, Failure> {
        if !self.table_exists("state_meta")? {
            return Ok(Vec::new());
        }
        let doing = "list our state_meta keys";
        let mut stmt = self
            .conn
            .prepare(
                "SELECT key, COALESCE(CAST(value AS TEXT), '') FROM state_meta \
                 WHERE key >= 'session_switch:' AND key < 'session_switch;' ORDER BY key",
            )
            .map_err(|e| self.fail(doing, e))?;
        stmt.query_map([], |row| {
            Ok((row.get(0)?, lossy_text(row, 1)?.unwrap_or_default()))
        })
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(|e| self.fail(doing, e))
    }
}

/// Column `i` as text, bytes that are not UTF-8 replaced by U+FFFD; `None`
/// for NULL.
fn lossy_text(row: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<String>> {
    Ok(row
        .get_ref(i)?
        .as_bytes_or_null()?
        .map(|b| loader::lossy(b).into_owned()))
}

/// `state_meta` as Hermes creates it, for the early databases without it.
pub(super) const CREATE_STATE_META: &str =
    "CREATE TABLE IF NOT EXISTS state_meta (key TEXT PRIMARY KEY, value TEXT);";

impl HermesStore {
    /// Set `key` to `value` inside the caller's open write transaction,
    /// creating `state_meta` where an early Hermes database lacks it.
    ///
    /// SQL: `CREATE TABLE IF NOT EXISTS state_meta …`, then `INSERT …
    /// ON CONFLICT(key) DO UPDATE`. Errors as the caller's statements.
    pub(super) fn meta_upsert_in_tx(&self, key: &str, value: &str) -> Result<(), Failure> {
        // Both through the statement cache: this runs with every decision.
        self.run_cached(CREATE_STATE_META)
            .and_then(|()| {
                self.conn
                    .prepare_cached(
                        "INSERT INTO state_meta (key, value) VALUES (?1, ?2) \
                         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    )?
                    .execute([key, value])
            })
            .map(|_| ())
            .map_err(|e| self.fail(&format!("set state_meta key {key:?}"), e))
    }
}
