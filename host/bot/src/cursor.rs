//! The bot's cursor in the room: the last message it decided (its
//! XEP-0359 stanza-id and time) and the latest few it decided, kept in
//! `state.db` with each decision so that a restarted or reconnected bot
//! catches up from there and never decides a message twice across a
//! rejoin.

use crate::room::Incoming;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// How many decided messages are remembered for a rejoin: more than a
/// room replays of the same second.
const RECENT: usize = 32;

/// How far apart two times of one message may be when the room gives it
/// no stanza-id: the room stamps a replayed message with its own clock,
/// the bot stamped the live one on receipt.
pub const SAME_TIME_SECONDS: f64 = 3.0;

/// One decided message, as a rejoin compares it.
/// A message decided, as stored (its keys in byte order, as they were
/// first written); written with every decision, so through typed fields
/// rather than a JSON value tree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Recent {
    at: f64,
    body: String,
    nick: String,
    stanza_id: Option<String>,
}

/// The cursor as read.
#[derive(Deserialize)]
struct Stored {
    at: f64,
    recent: VecDeque<Recent>,
    stanza_id: Option<String>,
}

/// Where the bot is in the room.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cursor {
    /// The last decided message's stanza-id, where the room gave one.
    pub stanza_id: Option<String>,
    /// The last decided message's time (Unix seconds); 0 before any.
    pub at: f64,
    recent: VecDeque<Recent>,
}

impl Cursor {
    /// The cursor stored as `text`; `None` for text that is not one of
    /// ours (the bot then starts as on a first start, and says so).
    pub fn from_json(text: &str) -> Option<Self> {
        let read: Stored = serde_json::from_str(text).ok()?;
        Some(Self {
            stanza_id: read.stanza_id,
            at: read.at,
            recent: read.recent,
        })
    }

    /// The cursor as stored.
    pub fn to_json(&self) -> String {
        #[derive(Serialize)]
        struct Written<'a> {
            at: f64,
            recent: &'a VecDeque<Recent>,
            stanza_id: &'a Option<String>,
        }
        let written = Written {
            at: self.at,
            recent: &self.recent,
            stanza_id: &self.stanza_id,
        };
        serde_json::to_string(&written).expect("strings and finite numbers serialise")
    }

    /// The cursor once `m` is decided.
    pub fn after(&self, m: &Incoming) -> Self {
        let mut next = self.clone();
        if m.stanza_id.is_some() || m.at >= next.at {
            next.stanza_id = m.stanza_id.clone();
            next.at = next.at.max(m.at);
        }
        next.recent.push_back(Recent {
            stanza_id: m.stanza_id.clone(),
            nick: m.nick.clone(),
            body: m.body.clone(),
            at: m.at,
        });
        while next.recent.len() > RECENT {
            next.recent.pop_front();
        }
        next
    }

    /// Whether `m` is one the bot decided already: the same stanza-id, or,
    /// where either has none, the same sender and body at the same time.
    pub fn decided(&self, m: &Incoming) -> bool {
        self.recent
            .iter()
            .any(|r| match (&r.stanza_id, &m.stanza_id) {
                (Some(a), Some(b)) => a == b,
                _ => {
                    r.nick == m.nick && r.body == m.body && (r.at - m.at).abs() <= SAME_TIME_SECONDS
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(nick: &str, body: &str, id: Option<&str>, at: f64) -> Incoming {
        Incoming {
            occupant: format!("room@conference.example.org/{nick}"),
            nick: nick.into(),
            jid: None,
            body: body.into(),
            delayed: false,
            human_origin: false,
            stanza_id: id.map(Into::into),
            reply_to: None,
            dedupe_key: None,
            caught_up: false,
            at,
        }
    }

    #[test]
    fn a_decided_message_is_known_by_its_id_or_by_sender_body_and_time() {
        let c = Cursor::default()
            .after(&message("anna", "hi", Some("s1"), 100.0))
            .after(&message("bob", "yo", None, 101.0));
        assert_eq!(c.stanza_id, None);
        assert_eq!(c.at, 101.0);
        assert!(c.decided(&message("anna", "other", Some("s1"), 500.0)));
        assert!(!c.decided(&message("anna", "hi", Some("s2"), 100.0)));
        assert!(c.decided(&message("bob", "yo", None, 102.5)));
        assert!(!c.decided(&message("bob", "yo", None, 110.0)));
        assert!(!c.decided(&message("carl", "yo", None, 101.0)));
        let back = Cursor::from_json(&c.to_json()).unwrap();
        assert_eq!(back, c);
        assert_eq!(Cursor::from_json("{\"at\": \"x\"}"), None);
        assert_eq!(Cursor::from_json("not json"), None);
        let mut many = Cursor::default();
        for i in 0..100 {
            many = many.after(&message("anna", &i.to_string(), Some(&i.to_string()), 1.0));
        }
        assert!(!many.decided(&message("anna", "0", Some("0"), 1.0)));
        assert!(many.decided(&message("anna", "99", Some("99"), 1.0)));
    }

    #[test]
    fn the_cursor_is_written_as_the_first_bots_wrote_it() {
        let c = Cursor::default()
            .after(&message("anna", "say \"hi\"\n", Some("s1"), 100.5))
            .after(&message("墨河", "yo", None, 101.0));
        let first = serde_json::json!({
            "stanza_id": null,
            "at": 101.0,
            "recent": [
                {"stanza_id": "s1", "nick": "anna", "body": "say \"hi\"\n", "at": 100.5},
                {"stanza_id": null, "nick": "墨河", "body": "yo", "at": 101.0},
            ],
        });
        assert_eq!(c.to_json(), first.to_string());
        assert_eq!(Cursor::from_json(&first.to_string()), Some(c));
    }
}
