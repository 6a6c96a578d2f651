//! What one send writes (checked before anything is touched) and what a
//! committed send wrote (docs/src/design/send.md#the-atomic-send).

use session_switch_contract::failure::Failure;

use crate::write_tx::check_our_key;

/// What one send writes (docs/src/design/send.md#the-atomic-send); all in one transaction.
#[derive(Clone, Copy, Debug)]
pub struct SendWrite<'a> {
    /// Agent name (provenance and record).
    pub agent: &'a str,
    /// The agent's XMPP session that receives the row.
    pub history_session_id: &'a str,
    /// `[YOU] ` + the body; role `user`.
    pub history_content: &'a str,
    /// The CLI session that sent.
    pub cli_session_id: &'a str,
    /// `session_switch:active:<agent>`.
    pub record_key: &'a str,
    /// JSON `{"session_id", "timestamp", "source": "cli", "agent"}`.
    pub record_value: &'a str,
    /// Unix seconds: row timestamp, record timestamp, `sent_at`.
    pub timestamp: f64,
}

impl SendWrite<'_> {
    /// Refuse (kind `bad-input`) what must never be written, before
    /// anything is touched: empty ids or content, content with a NUL, a
    /// record key that is not ours, a timestamp that is not Unix seconds,
    /// a record value that is not a JSON object with a numeric `timestamp`
    /// (see [`HermesStore::send_write`]). A stored intent is checked the
    /// same way before it is completed.
    pub(super) fn check(&self) -> Result<(), Failure> {
        for (name, value) in [
            ("agent", self.agent),
            ("history session id", self.history_session_id),
            ("CLI session id", self.cli_session_id),
            ("history content", self.history_content),
        ] {
            if value.is_empty() {
                return Err(Failure::bad_input(format!(
                    "refusing to write a send with an empty {name}"
                )));
            }
        }
        if self.history_content.contains('\0') {
            return Err(Failure::bad_input(
                "refusing to write history content with a NUL character (Hermes reads content \
             starting with NUL + `json:` as multimodal parts); normalise the body first",
            ));
        }
        check_our_key(self.record_key, false)?;
        if !(self.timestamp.is_finite() && self.timestamp > 0.0) {
            return Err(Failure::bad_input(format!(
                "refusing to write a send with timestamp {}: it must be Unix seconds > 0",
                self.timestamp
            )));
        }
        let record: Option<serde_json::Value> = serde_json::from_str(self.record_value).ok();
        let timestamp = record
            .as_ref()
            .and_then(|r| r.as_object())
            .and_then(|r| r.get("timestamp"))
            .filter(|t| t.is_number());
        if timestamp.is_none() {
            return Err(Failure::bad_input(format!(
                "refusing to write record {:?}: its value is not a JSON object with a numeric \
             \"timestamp\" (docs/src/design/contracts.md): {}",
                self.record_key, self.record_value
            )));
        }
        Ok(())
    }
}

/// What a committed send wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct Written {
    /// `messages.id` of the new row.
    pub message_id: i64,
    /// The session the row went into: the agent's XMPP session, or on v31
    /// its live compression tip (docs/src/design/compression.md, `chain.rs`).
    pub history_session_id: String,
    /// False when a newer record was already stored and was kept.
    pub record_replaced: bool,
}
