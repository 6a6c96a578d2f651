//! The live tip of a session in Hermes's compression chain (schema v31,
//! docs/src/design/compression.md). Older schemas have no chains: every session is its own tip.
//!
//! When v31 Hermes compresses a session it ends it (`end_reason =
//! 'compression'`) and continues in a child (`parent_session_id` = the
//! parent), in one transaction (`hermes_state_compression.py`
//! `publish_compression_child`); it refuses any later row in the ended
//! parent (`hermes_state_messages.py`: `CompressionSessionClosedError`).
//!
//! The rule here is Hermes's own walk, `get_compression_chain` /
//! `get_compression_tip` (`hermes_state_compression.py`, `_CHAIN_STEP_SQL`,
//! `_walk_compression_chain`, which the v31 API server uses through
//! `resolve_resume_session_id`, `gateway/platforms/api_server_runs.py`
//! `_resolve_live_session_id`), with one difference: where Hermes orders
//! two candidates and takes the first, we fail closed, as its
//! `find_live_compression_child` does ("more than one fails closed"): a
//! record must not send a bot, nor a `[YOU]` row go, into one of two
//! conversations on a guess.

use rusqlite::{Connection, OptionalExtension, params};

use super::HermesStore;
use super::loader::Loader;
use session_switch_contract::failure::Failure;
use session_switch_contract::ids::api_session_id_problem;

/// Hermes's bound on the forward walk (`_CHAIN_CAP`, 1000 hops).
pub const CHAIN_CAP: usize = 1000;

/// Where the compression chain of a session leads.
#[derive(Clone, Debug, PartialEq)]
pub enum Tip {
    /// Not ended by compression (or not schema v31, or not in `sessions`):
    /// the session is its own tip.
    Itself,
    /// Compressed: the sessions after it, in order; the last is the tip
    /// (live, or ended for another reason than compression, as Hermes's
    /// walk would also end there).
    Moved { path: Vec<String> },
    /// `at` (the session or one on its way) was compressed and has more
    /// than one continuing child (`children`, by `started_at`): no unique
    /// tip.
    Forked { at: String, children: Vec<String> },
    /// `at` was compressed but no continuation can be followed: no child
    /// at all (an interrupted hand-off Hermes reopens later,
    /// `reopen_orphaned_compression_session`), a cycle, or the cap.
    Orphaned { at: String, why: &'static str },
}

impl Tip {
    /// The session to use instead of `asked`: `asked` itself or the tip;
    /// `None` when the chain has no unique tip.
    pub fn session<'a>(&'a self, asked: &'a str) -> Option<&'a str> {
        match self {
            Tip::Itself => Some(asked),
            Tip::Moved { path } => path.last().map(String::as_str),
            Tip::Forked { .. } | Tip::Orphaned { .. } => None,
        }
    }

    /// Why `asked` cannot be followed to one live tip, as a sentence, e.g.
    /// `session A was compressed by Hermes (end_reason 'compression') into
    /// 2 live sessions (B, C): no unique live tip`; `None` when it can.
    pub fn problem(&self, asked: &str) -> Option<String> {
        let via = |at: &str| {
            if at == asked {
                format!("session {asked} was compressed by Hermes (end_reason 'compression')")
            } else {
                format!(
                    "session {asked} continues, through Hermes's compression chain, in {at}, \
                     which was compressed again"
                )
            }
        };
        match self {
            Tip::Itself | Tip::Moved { .. } => None,
            Tip::Forked { at, children } => Some(format!(
                "{} into {} continuing sessions ({}): no unique live tip (Hermes's \
                 find_live_compression_child fails closed too)",
                via(at),
                children.len(),
                children.join(", ")
            )),
            Tip::Orphaned { at, why } => Some(format!("{} and {why}", via(at))),
        }
    }
}

/// The tip of `id` on `conn` (a connection or an open transaction: inside
/// a write transaction no compression can publish between finding the tip
/// and writing to it, as Hermes's `_compression_tip_on`). Anything but
/// [`Loader::V31`] answers [`Tip::Itself`] without a read.
///
/// One step, at a session ended by compression (Hermes's
/// `_ended_by_compression`: `ended_at` set and `end_reason =
/// 'compression'`): its children that are compression continuations
/// (Hermes's `_non_continuation_child_sql`: not a `/branch`, delegate or
/// reset fork of it — `model_config` markers `_branched_from`,
/// `_delegate_from`, `_reset_from` naming it — and not `source = 'tool'`).
/// Of those, the ones that continue (live, or compressed again: classes 0
/// and 1 of `_CHAIN_STEP_SQL`'s order): one is followed, two or more are
/// [`Tip::Forked`]. With none, the ended ones (class 2): one is followed,
/// more are `Forked`, none is [`Tip::Orphaned`].
///
/// SQL (reads only): `SELECT ended_at IS NOT NULL AND end_reason =
/// 'compression' FROM sessions WHERE id = ?1`, and per compressed session
/// `SELECT id, … FROM sessions WHERE parent_session_id = ?1 AND <the
/// filter above> ORDER BY started_at, id`. Errors: SQLite's (e.g. busy).
pub fn tip_on(conn: &Connection, loader: Loader, id: &str) -> rusqlite::Result<Tip> {
    if loader != Loader::V31 {
        return Ok(Tip::Itself);
    }
    let mut path: Vec<String> = Vec::new();
    let mut current = id.to_owned();
    for _ in 0..CHAIN_CAP {
        if !compressed(conn, &current)? {
            return Ok(if path.is_empty() {
                Tip::Itself
            } else {
                Tip::Moved { path }
            });
        }
        let children = continuation_children(conn, &current)?;
        let continuing: Vec<&Child> = children.iter().filter(|c| c.continues).collect();
        let pick: Vec<&Child> = if continuing.is_empty() {
            children.iter().collect()
        } else {
            continuing
        };
        let next = match pick.as_slice() {
            [] => {
                return Ok(Tip::Orphaned {
                    at: current,
                    why: "has no continuation",
                });
            }
            [one] => one.id.clone(),
            many => {
                return Ok(Tip::Forked {
                    at: current,
                    children: many.iter().map(|c| c.id.clone()).collect(),
                });
            }
        };
        if next == id || path.contains(&next) {
            return Ok(Tip::Orphaned {
                at: current,
                why: "its chain runs in a cycle",
            });
        }
        path.push(next.clone());
        current = next;
    }
    Ok(Tip::Orphaned {
        at: current,
        why: "its chain is longer than Hermes's cap of 1000 hops (_CHAIN_CAP)",
    })
}

/// Every compression continuation below `id` (children, their children,
/// …, breadth first, at most [`CHAIN_CAP`]), forks included: all of them
/// continue the conversation of `id`. Empty unless [`Loader::V31`].
pub fn continuations_on(
    conn: &Connection,
    loader: Loader,
    id: &str,
) -> rusqlite::Result<Vec<String>> {
    let mut found: Vec<String> = Vec::new();
    if loader != Loader::V31 {
        return Ok(found);
    }
    let mut queue = vec![id.to_owned()];
    while let Some(current) = queue.pop() {
        if found.len() >= CHAIN_CAP || !compressed(conn, &current)? {
            continue;
        }
        for child in continuation_children(conn, &current)? {
            if child.id != id && !found.contains(&child.id) {
                found.push(child.id.clone());
                queue.insert(0, child.id);
            }
        }
    }
    Ok(found)
}

/// The first session up `id`'s compression chain (its parent, the
/// parent's parent, …, at most [`CHAIN_CAP`] hops) for which `is_root`
/// holds, when each hop is a compression continuation as
/// [`continuations_on`] counts them (the parent ended by compression, the
/// child not a branch, delegation, reset or tool session): `id` then
/// continues that session's conversation. `None` for a session with no
/// such ancestor, a missing one, and unless [`Loader::V31`].
pub fn continued_root_on(
    conn: &Connection,
    loader: Loader,
    id: &str,
    is_root: impl Fn(&str) -> bool,
) -> rusqlite::Result<Option<String>> {
    if loader != Loader::V31 {
        return Ok(None);
    }
    let mut current = id.to_owned();
    for _ in 0..CHAIN_CAP {
        let parent: Option<String> = conn
            .prepare_cached("SELECT parent_session_id FROM sessions WHERE id = ?1")?
            .query_row([&current], |row| row.get(0))
            .optional()?
            .flatten();
        let Some(parent) = parent else {
            return Ok(None);
        };
        let continues = compressed(conn, &parent)?
            && continuation_children(conn, &parent)?
                .iter()
                .any(|c| c.id == current);
        if !continues || parent == id {
            return Ok(None);
        }
        if is_root(&parent) {
            return Ok(Some(parent));
        }
        current = parent;
    }
    Ok(None)
}

struct Child {
    id: String,
    /// Live, or compressed again (it continues the chain).
    continues: bool,
}

/// Hermes's `_ended_by_compression` of the row `id` (false when missing).
fn compressed(conn: &Connection, id: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached(
        "SELECT ended_at IS NOT NULL AND end_reason = 'compression' FROM sessions WHERE id = ?1",
    )?
    .query_row([id], |row| row.get::<_, bool>(0))
    .optional()
    .map(|found| found.unwrap_or(false))
}

/// The children of `parent` that are compression continuations: Hermes's
/// `_non_continuation_child_sql` (`hermes_state_common.py`) with its
/// non-throwing `_sql_json_extract`, by `started_at` as
/// `find_live_compression_child` orders them.
fn continuation_children(conn: &Connection, parent: &str) -> rusqlite::Result<Vec<Child>> {
    let marker = |m: &str| {
        format!(
            "AND COALESCE(json_extract(CASE WHEN json_valid(model_config) THEN model_config \
             ELSE json_object() END, '$.{m}'), '') != ?1 "
        )
    };
    let sql = format!(
        "SELECT id, ended_at IS NULL OR end_reason IS 'compression' FROM sessions \
         WHERE parent_session_id = ?1 {}{}{}AND COALESCE(source, '') != 'tool' \
         ORDER BY started_at, id",
        marker("_branched_from"),
        marker("_delegate_from"),
        marker("_reset_from")
    );
    conn.prepare_cached(&sql)?
        .query_map(params![parent], |row| {
            Ok(Child {
                id: row.get(0)?,
                continues: row.get(1)?,
            })
        })?
        .collect()
}

impl HermesStore {
    /// [`tip_on`] on this connection (inside the caller's read snapshot,
    /// if one is open). Errors: kind `busy` or `store`, naming the session.
    pub fn live_tip(&self, id: &str) -> Result<Tip, Failure> {
        tip_on(&self.conn, self.loader(), id)
            .map_err(|e| self.fail(&format!("follow the compression chain of {id:?}"), e))
    }

    /// [`write_target`] on this connection, outside a transaction: the
    /// check a send makes before it posts.
    pub fn write_target(&self, configured: &str) -> Result<String, Failure> {
        write_target(&self.conn, self.loader(), configured)
    }

    /// [`continued_root_on`] on this connection. Errors as [`Self::live_tip`].
    pub fn continued_root(
        &self,
        id: &str,
        is_root: impl Fn(&str) -> bool,
    ) -> Result<Option<String>, Failure> {
        continued_root_on(&self.conn, self.loader(), id, is_root)
            .map_err(|e| self.fail(&format!("follow the compression chain of {id:?} up"), e))
    }

    /// Whether any session names `id` as its parent (`parent_session_id`,
    /// Hermes's index `idx_sessions_parent`). Without one, every walk Hermes
    /// makes from `id` to a continuation (v31 `get_compression_tip`,
    /// `resolve_resume_session_id`) ends at `id` itself: the plugin then skips
    /// Hermes's own walk (Python, per request). Every Hermes schema has the
    /// column. Errors as [`Self::live_tip`].
    ///
    /// SQL (autocommit, read only): `SELECT EXISTS(SELECT 1 FROM sessions
    /// WHERE parent_session_id = ?1)`.
    pub fn has_child_sessions(&self, id: &str) -> Result<bool, Failure> {
        self.conn
            .prepare_cached("SELECT EXISTS(SELECT 1 FROM sessions WHERE parent_session_id = ?1)")
            .and_then(|mut stmt| stmt.query_row([id], |row| row.get(0)))
            .map_err(|e| self.fail(&format!("look for the children of session {id:?}"), e))
    }

    /// [`continuations_on`] on this connection. Errors as [`Self::live_tip`].
    pub fn compression_continuations(&self, id: &str) -> Result<Vec<String>, Failure> {
        continuations_on(&self.conn, self.loader(), id)
            .map_err(|e| self.fail(&format!("read the compression children of {id:?}"), e))
    }
}

/// The session a send's `[YOU]` row goes to instead of `configured` (an
/// agent's XMPP session): its live tip, read on `conn` (the record
/// transaction). Errors (kind `bad-input`, nothing written): the chain has
/// no unique tip, or the tip is an id Hermes's API server refuses.
pub fn write_target(
    conn: &Connection,
    loader: Loader,
    configured: &str,
) -> Result<String, Failure> {
    let tip = tip_on(conn, loader, configured).map_err(|e| {
        Failure::store(format!(
            "could not follow the compression chain of {configured:?}: {e}"
        ))
    })?;
    match tip.session(configured) {
        Some(target) => {
            if let Some(problem) = api_session_id_problem(target) {
                return Err(Failure::bad_input(format!(
                    "the live tip {target:?} of XMPP session {configured} {problem}, so Hermes's \
                     API server could not continue it; nothing was written"
                )));
            }
            Ok(target.to_owned())
        }
        None => Err(Failure::bad_input(format!(
            "not writing the [YOU] row: {}; Hermes refuses rows in a session it ended by \
             compression, so end all but one continuation (or clear the fork) and send again",
            tip.problem(configured).unwrap_or_default()
        ))),
    }
}

/// A refusal of `id` as a session we record or redirect to: Hermes's API
/// server would not take it (`api_session_id_problem`), or its chain has
/// no unique live tip (`live_tip`: [`HermesStore::live_tip`], or a caller's
/// memo of it). `None` when it may be used.
pub fn target_problem(
    id: &str,
    live_tip: impl FnOnce(&str) -> Result<Tip, Failure>,
) -> Result<Option<String>, Failure> {
    let refused = |id: &str, problem: &str| {
        format!(
            "session id {id:?} {problem}: Hermes's API server refuses it (400 \"Invalid session \
             ID\" / \"Session ID too long\")"
        )
    };
    if let Some(problem) = api_session_id_problem(id) {
        return Ok(Some(refused(id, problem)));
    }
    let tip = live_tip(id)?;
    Ok(match tip.session(id) {
        Some(t) => api_session_id_problem(t).map(|p| refused(t, p)),
        None => tip.problem(id),
    })
}
