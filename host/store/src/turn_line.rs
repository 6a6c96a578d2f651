//! Whether a turn's line reached Hermes although its answer did not: the
//! room bot asks after a turn whose connection broke, so that a line
//! Hermes has already stored is not passed a second time.

use super::hermes::HermesStore;
use session_switch_contract::failure::Failure;

impl HermesStore {
    /// Whether `session_id`, or its live tip where Hermes continued it by
    /// compression (v31: a turn's session can move while it runs), holds a
    /// `user` row stored at or after `since` (Unix seconds, as Hermes's
    /// `messages.timestamp`) whose text contains `line`.
    ///
    /// SQL: `SELECT EXISTS(SELECT 1 FROM messages WHERE session_id = ?1 AND
    /// role = 'user' AND timestamp >= ?2 AND instr(content, ?3) > 0)` for
    /// each of the two sessions, autocommit. Errors: kind `busy` or
    /// `store`.
    pub fn holds_user_line(
        &self,
        session_id: &str,
        line: &str,
        since: f64,
    ) -> Result<bool, Failure> {
        let tip = self.live_tip(session_id)?;
        let mut sessions = vec![session_id];
        if let Some(t) = tip.session(session_id).filter(|t| *t != session_id) {
            sessions.push(t);
        }
        let doing = format!("look for a turn's line in session {session_id:?}");
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT EXISTS(SELECT 1 FROM messages WHERE session_id = ?1 AND role = 'user' \
                 AND timestamp >= ?2 AND instr(content, ?3) > 0)",
            )
            .map_err(|e| self.fail(&doing, e))?;
        for session in sessions {
            let found: bool = stmt
                .query_row(rusqlite::params![session, since, line], |row| row.get(0))
                .map_err(|e| self.fail(&doing, e))?;
            if found {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
