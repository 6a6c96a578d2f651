//! What the host gives the policy: the trait behind the WIT `host`
//! interface. The Hermes store and the ejabberd transports implement it
//! (glue outside this module); tests implement it over memory.

use std::any::Any;

use super::bindings::{SendPlan, Sent};
use crate::Failure;

/// One history row as Hermes's loader returns it for the model
/// (`SessionDB.get_messages_as_conversation`: 0.19.0 `hermes_state.py`,
/// v31 `hermes_state_messages.py`; research/hermes-state.md §6).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistoryRow {
    /// `messages.id`; history order.
    pub id: i64,
    /// `messages.role`: `user`, `assistant`, `tool`, `system`, … as stored.
    pub role: String,
    /// The text of the message as the loader gives it: string content after
    /// the loader's own cleaning (`sanitize_context(…).strip()` on user and
    /// assistant rows), NULL read as empty. When the content is not a
    /// string ([`LoadedMessage::structured`], e.g. a multimodal list), the
    /// text of its first text part, or empty when it has none.
    pub content: String,
    /// `messages.tool_calls`: JSON text of the OpenAI list, as stored.
    pub tool_calls: Option<String>,
    /// `messages.tool_call_id`: on a `tool` row, the call it answers.
    pub tool_call_id: Option<String>,
    /// `messages.tool_name`: on a `tool` row, the tool that ran.
    pub tool_name: Option<String>,
    /// Listed in `session_switch_sent` for the agent the history was read for.
    pub bridge_wrote: bool,
    /// The whole message the loader builds, when the row was read from a
    /// Hermes `state.db`; `None` for rows that only have the fields above
    /// (memory backends, tests): then the message is `role`, `content` and
    /// the tool fields.
    pub loaded: Option<LoadedMessage>,
}

/// Everything else Hermes's loader puts into one message, read off its
/// source per schema (see `host/bridge/src/store/loader.rs`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadedMessage {
    /// The keys of the loader's message besides `role`, `content` and a
    /// text `api_content`, in the loader's order, with their values. Those
    /// three come from the row ([`HistoryRow::role`],
    /// [`HistoryRow::content`] with [`Self::structured`],
    /// [`Self::api_content`]), so tag edits show and nothing is kept twice.
    pub fields: Vec<(&'static str, serde_json::Value)>,
    /// Content that is not a string: what `"\x00json:"` decoded to (a
    /// multimodal list of parts, or any other JSON value) or JSON null for
    /// a NULL column. `None`: the content is [`HistoryRow::content`].
    pub structured: Option<serde_json::Value>,
    /// Index, in a `structured` list, of the first part
    /// `{"type": "text", "text": <string>}`; its text is
    /// [`HistoryRow::content`] (tag edits land there).
    pub text_part: Option<usize>,
    /// `messages.api_content`, verbatim (the loader neither sanitises nor
    /// strips it). Hermes sends it instead of `content` on user and
    /// assistant rows (0.19.0 `agent/turn_context.py`
    /// `substitute_api_content`, `agent/conversation_loop.py`), so tag
    /// edits apply to it too.
    pub api_content: Option<String>,
}

/// The text Hermes sends to the model for a message of `role` with text
/// `content` and `api_content`: `api_content` when it is non-empty on a
/// user or assistant message (0.19.0 `agent/turn_context.py`
/// `substitute_api_content`), else `content` ([`HistoryRow::sent_text`];
/// the Python binding applies it to Hermes's message dicts).
pub fn sent_text<'a>(role: &str, content: &'a str, api_content: Option<&'a str>) -> &'a str {
    match api_content {
        Some(api) if !api.is_empty() && matches!(role, "user" | "assistant") => api,
        _ => content,
    }
}

impl HistoryRow {
    /// The text Hermes sends to the model for this row: `api_content` when
    /// it is a non-empty string on a user or assistant row (0.19.0
    /// `agent/turn_context.py` `substitute_api_content`), else
    /// [`HistoryRow::content`]. The tagging rule decides on this text.
    pub fn sent_text(&self) -> &str {
        let api = self.loaded.as_ref().and_then(|l| l.api_content.as_deref());
        sent_text(&self.role, &self.content, api)
    }

    /// The message's `content` as the loader returns it, with this row's
    /// (possibly tagged) text: a string, or the structured value with the
    /// text of its first text part replaced.
    pub fn content_json(&self) -> serde_json::Value {
        use serde_json::Value;
        let Some(loaded) = &self.loaded else {
            return Value::String(self.content.clone());
        };
        let Some(structured) = &loaded.structured else {
            return Value::String(self.content.clone());
        };
        let mut value = structured.clone();
        if let Some(part) = loaded
            .text_part
            .and_then(|i| value.get_mut(i))
            .and_then(Value::as_object_mut)
        {
            part.insert("text".into(), Value::String(self.content.clone()));
        }
        value
    }

    /// The message as Hermes's loader returns it (the same keys and
    /// values), with this row's edits applied. Rows without
    /// [`HistoryRow::loaded`]: `role`, `content`, and `tool_calls` (parsed;
    /// the text when it is not JSON), `tool_call_id`, `tool_name` when set.
    pub fn message_json(&self) -> serde_json::Map<String, serde_json::Value> {
        use serde_json::Value;
        let mut m = serde_json::Map::new();
        m.insert("role".into(), Value::String(self.role.clone()));
        m.insert("content".into(), self.content_json());
        if let Some(loaded) = &self.loaded {
            if let Some(api) = &loaded.api_content {
                m.insert("api_content".into(), Value::String(api.clone()));
            }
            for (key, value) in &loaded.fields {
                m.insert((*key).to_owned(), value.clone());
            }
            return m;
        }
        if let Some(calls) = &self.tool_calls {
            m.insert(
                "tool_calls".into(),
                serde_json::from_str(calls).unwrap_or_else(|_| Value::String(calls.clone())),
            );
        }
        if let Some(id) = &self.tool_call_id {
            m.insert("tool_call_id".into(), Value::String(id.clone()));
        }
        if let Some(name) = &self.tool_name {
            m.insert("tool_name".into(), Value::String(name.clone()));
        }
        m
    }
}

/// The host imports of the policy (WIT `agentsmeeting:session-switch/host`),
/// minus `log`, which the runtime itself routes to `tracing`.
///
/// One `HostImports` belongs to one [`PolicyInstance`](super::PolicyInstance) and is only
/// called from inside that instance's calls, on the caller's thread; it is
/// `Send` so an instance may move between threads. A `Failure` returned here
/// reaches the policy unchanged as a WIT `failure`, and the policy passes it
/// back to the caller with the same kind. `Any`, so that a host can reach
/// its own type behind [`PolicyInstance::imports_mut`](super::PolicyInstance::imports_mut)
/// (e.g. for plain reads on the connection the policy's calls use).
pub trait HostImports: Any + Send {
    /// The value of `state_meta` key `key`; `None` when the key or the whole
    /// table is absent (early Hermes databases have none). Must not write.
    fn meta_get(&mut self, key: &str) -> Result<Option<String>, Failure>;

    /// Delete `state_meta` key `key`; `true` when a row was removed. The
    /// runtime already refuses any key but ours (see
    /// [`is_our_meta_key`](super::is_our_meta_key)) before calling this.
    fn meta_delete(&mut self, key: &str) -> Result<bool, Failure>;

    /// Set `state_meta` key `key` to `value` (insert or replace; creates
    /// the table where it is missing). The runtime calls it only inside
    /// `admit` and only for a loop-guard key, between
    /// [`HostImports::begin_write`] and [`HostImports::end_write`].
    fn meta_set(&mut self, key: &str, value: &str) -> Result<(), Failure>;

    /// Whether Hermes's `sessions` table has a row with this id.
    fn session_exists(&mut self, id: &str) -> Result<bool, Failure>;

    /// The history of `session_id` as Hermes's loader returns it (ORDER BY
    /// `messages.id`, `active = 1` rows only where that column exists, the
    /// last `limit` rows when `Some`); `bridge_wrote` is about `agent`. An
    /// unknown session has an empty history (DESIGN §8).
    fn history(
        &mut self,
        session_id: &str,
        agent: &str,
        limit: Option<u32>,
    ) -> Result<Vec<HistoryRow>, Failure>;

    /// The current time in Unix seconds (UTC), with fractions.
    fn now(&mut self) -> f64;

    /// Do one send atomically (DESIGN §8 "Send"): the history row, its
    /// provenance and the record are committed only if the room accepted
    /// `plan.room_body`; on any failure nothing is written.
    fn send(&mut self, plan: &SendPlan) -> Result<Sent, Failure>;

    /// A policy call that only reads (`resolve`, `context`, `active`) is
    /// about to run: the imports may serve all its imports from one read
    /// snapshot (one lock instead of one per read, and one consistent
    /// state). Imports that cannot simply serve each read on their own.
    /// Default: nothing.
    fn begin_read(&mut self) {}

    /// A policy call that reads and writes its state (`admit`) is about to
    /// run: open one brief write transaction so the read and the write are
    /// atomic against other bots and CLI calls. Errors (e.g. kind `busy`)
    /// fail the call before the policy runs. Default: nothing.
    fn begin_write(&mut self) -> Result<(), Failure> {
        Ok(())
    }

    /// End the call [`HostImports::begin_write`] announced: commit when
    /// `commit`, else roll back. Default: nothing.
    fn end_write(&mut self, commit: bool) -> Result<(), Failure> {
        let _ = commit;
        Ok(())
    }

    /// The call [`HostImports::begin_read`] announced has ended, also when the
    /// policy trapped: close the snapshot. Default: nothing.
    fn end_read(&mut self) {}

    /// A value that changes whenever what these imports read may have
    /// changed: another connection committed to `state.db`, or these
    /// imports wrote. Inside a read snapshot, the snapshot's version. The
    /// memo of `resolve` (`memo.rs`) serves a decision without reading when
    /// it is equal to the one the decision was made at. `Ok(None)` (the
    /// default): the imports cannot tell, and every memoised decision is
    /// checked by asking its reads again. `Err` as a read's (e.g. kind
    /// `busy`): that `resolve` fails with it.
    fn data_version(&mut self) -> Result<Option<DataVersion>, Failure> {
        Ok(None)
    }
}

/// A version of what a [`HostImports`] reads ([`HostImports::data_version`]),
/// only compared for equality: for a Hermes `state.db`, SQLite's
/// `PRAGMA data_version` of the connection (changes when another connection
/// commits) and the connection's own count of changed rows
/// (`sqlite3_total_changes`: its own writes, which `data_version` does not
/// count).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataVersion(pub i64, pub u64);

/// Imports with nothing behind them: every fallible import fails with kind
/// `store`. The check of a new component runs `version`, `self-check` and
/// `configure` with them, none of which may call the host.
pub(crate) struct NoImports;

impl NoImports {
    fn refuse(what: &str) -> Failure {
        Failure::store(format!(
            "the policy called host.{what} while being checked, where no state.db is attached; \
             self-check and configure must not call the host"
        ))
    }
}

impl HostImports for NoImports {
    fn meta_get(&mut self, _key: &str) -> Result<Option<String>, Failure> {
        Err(Self::refuse("meta-get"))
    }
    fn meta_delete(&mut self, _key: &str) -> Result<bool, Failure> {
        Err(Self::refuse("meta-delete"))
    }
    fn meta_set(&mut self, _key: &str, _value: &str) -> Result<(), Failure> {
        Err(Self::refuse("meta-set"))
    }
    fn session_exists(&mut self, _id: &str) -> Result<bool, Failure> {
        Err(Self::refuse("session-exists"))
    }
    fn history(&mut self, _: &str, _: &str, _: Option<u32>) -> Result<Vec<HistoryRow>, Failure> {
        Err(Self::refuse("history"))
    }
    fn now(&mut self) -> f64 {
        unix_now()
    }
    fn send(&mut self, _plan: &SendPlan) -> Result<Sent, Failure> {
        Err(Self::refuse("send"))
    }
}

/// The system clock in Unix seconds, as `state.db` and WIT `host.now` count
/// time (REAL seconds; 0 for a clock set before 1970).
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
