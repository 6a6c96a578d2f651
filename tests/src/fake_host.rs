//! The one fake of the WIT `host` interface is crate
//! `session-switch-fake-host` (`tests/fake-host`), shared with the guest's
//! and the runtime's unit tests; here, what only the integration tests
//! need of it: a fake seeded from a real Hermes database.

use std::path::Path;

pub use session_switch_fake_host::guest::summaries;
pub use session_switch_fake_host::{
    FakeHost, FakeRow, FakeState, GuestSeen, Import, ImportCall, SendPlan, Sent, prefix,
};

/// [`from_fixture`] over a private copy of the Hermes fixture `name`
/// (SQLite writes beside a WAL database even to read it); `None` (skip)
/// when the fixtures are missing.
pub fn fixture(name: &str) -> Option<FakeHost> {
    let (_dir, db) = crate::fixture_copy(name)?;
    Some(from_fixture(&db))
}

/// The sessions, active history rows and `state_meta` of a real Hermes
/// database (read with plain SQL as Hermes's loader does: ORDER BY id,
/// `active = 1` where the column exists; `state_meta` may be missing),
/// in the samples' room. The clock is set to the fixture's last message
/// + 60 s.
pub fn from_fixture(path: &Path) -> FakeHost {
    let db = rusqlite::Connection::open(path).expect("open fixture copy");
    let mut state = FakeState {
        room: crate::sample::ROOM.into(),
        ..FakeState::default()
    };
    let mut ids = db.prepare("SELECT id FROM sessions").unwrap();
    for id in ids.query_map([], |r| r.get::<_, String>(0)).unwrap() {
        state.sessions.insert(id.unwrap());
    }
    let has_active: bool = db
        .query_row(
            "SELECT count(*) FROM pragma_table_info('messages') WHERE name = 'active'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .unwrap()
        > 0;
    let sql = format!(
        "SELECT id, session_id, role, content, tool_calls, tool_call_id, tool_name, timestamp \
         FROM messages {} ORDER BY id",
        if has_active { "WHERE active = 1" } else { "" }
    );
    let mut rows = db.prepare(&sql).unwrap();
    let mut last = 0.0f64;
    let mapped = rows
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(1)?,
                r.get::<_, f64>(7)?,
                FakeRow {
                    id: r.get(0)?,
                    role: r.get(2)?,
                    content: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
                    tool_calls: r.get(4)?,
                    tool_call_id: r.get(5)?,
                    tool_name: r.get(6)?,
                    bridge_agent: None,
                },
            ))
        })
        .unwrap();
    for row in mapped {
        let (session, timestamp, row) = row.unwrap();
        last = last.max(timestamp);
        state.histories.entry(session).or_default().push(row);
    }
    let has_meta: bool = db
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'state_meta'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .unwrap()
        > 0;
    if has_meta {
        let mut meta = db.prepare("SELECT key, value FROM state_meta").unwrap();
        for kv in meta
            .query_map([], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?))
            })
            .unwrap()
        {
            if let (k, Some(v)) = kv.unwrap() {
                state.meta.insert(k, v);
            }
        }
    }
    state.now = last + 60.0;
    FakeHost::new(state)
}
