//! The history rows a host hands the policy's caller, as Hermes's loader
//! returns them (WIT `host.history` carries their summaries), and the
//! version of what a host reads. Host side only (feature `host`): the
//! runtime builds them, the store reads them off `state.db`.

use alloc::borrow::{Cow, ToOwned};
use alloc::string::String;

/// The keys of one loaded message besides `role`, `content` and a text
/// `api_content`, in the loader's order. Most messages have one to three
/// (`timestamp`; on v31 `_db_persisted` first; an assistant's
/// `finish_reason`): kept inline, so a row costs no allocation for them.
pub type LoadedFields = smallvec::SmallVec<[(&'static str, serde_json::Value); 3]>;

/// One history row as Hermes's loader returns it for the model
/// (`SessionDB.get_messages_as_conversation`: 0.19.0 `hermes_state.py`, v31
/// `hermes_state_messages.py`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistoryRow {
    /// `messages.id`; history order.
    pub id: i64,
    /// `messages.role`: `user`, `assistant`, `tool`, `system`, … as stored
    /// (Hermes's own roles borrowed, any other text owned).
    pub role: Cow<'static, str>,
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
/// source per schema (see `host/store/src/loader/`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadedMessage {
    /// The keys of the loader's message besides `role`, `content` and a
    /// text `api_content`, in the loader's order, with their values. Those
    /// three come from the row ([`HistoryRow::role`],
    /// [`HistoryRow::content`] with [`Self::structured`],
    /// [`Self::api_content`]), so tag edits show and nothing is kept twice.
    pub fields: LoadedFields,
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
        m.insert("role".into(), Value::String(self.role.clone().into_owned()));
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

/// A version of what a host reads (the runtime's `HostImports::data_version`),
/// only compared for equality: for a Hermes `state.db`, SQLite's
/// `PRAGMA data_version` of the connection (changes when another connection
/// commits) and the connection's own count of changed rows
/// (`sqlite3_total_changes`: its own writes, which `data_version` does not
/// count).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataVersion(pub i64, pub u64);
