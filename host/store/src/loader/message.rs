//! The row the loader builds, read and extended as Hermes's
//! `_rows_to_conversation` reads and extends its message dict: a
//! [`HistoryRow`] whose [`HistoryRow::loaded`] part is always set.

use serde_json::Value;
use session_switch_contract::history::HistoryRow;

/// A message under construction: the [`HistoryRow`] itself, so that the
/// finished conversation is the rows as built, with nothing copied.
pub(super) type Message = HistoryRow;

/// The dict operations the loader's rules use on a [`Message`].
pub(super) trait Keys {
    /// The value of `key` among the message's keys (not `role`,
    /// `content`, a text `api_content`).
    fn key(&self, key: &str) -> Option<&Value>;
    /// Add `key` after the message's other keys.
    fn add_key(&mut self, key: &'static str, value: Value);
    /// Set the text `api_content`.
    fn set_api_content(&mut self, text: String);
    /// The content, when it is a string (not structured).
    fn text(&self) -> Option<&str>;
    /// Make the content the empty string.
    fn clear_text(&mut self);
}

impl Keys for Message {
    fn key(&self, key: &str) -> Option<&Value> {
        let loaded = self.loaded.as_ref()?;
        loaded
            .fields
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }

    fn add_key(&mut self, key: &'static str, value: Value) {
        if let Some(loaded) = &mut self.loaded {
            loaded.fields.push((key, value));
        }
    }

    fn set_api_content(&mut self, text: String) {
        if let Some(loaded) = &mut self.loaded {
            loaded.api_content = Some(text);
        }
    }

    fn text(&self) -> Option<&str> {
        match &self.loaded {
            Some(loaded) if loaded.structured.is_some() => None,
            _ => Some(&self.content),
        }
    }

    fn clear_text(&mut self) {
        self.content.clear();
        if let Some(loaded) = &mut self.loaded {
            loaded.structured = None;
            loaded.text_part = None;
        }
    }
}
