//! The loop guard's state per agent and room, as `state_meta` stores it
//! (`{"v":1,"hops":N,"window":[…],"seen":[…]}`, with `"stopped"`,
//! `"quiet"` and `"said"` when they hold something): the hop counter, the
//! times in the room window, the digests of the duplicate window, the
//! stops that hold, and who said the recent agent messages.

use super::GuardSettings;
use serde::{Deserialize, Serialize, Serializer};
use std::borrow::Cow;

/// A recently seen message, for the duplicate rule.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Seen<'a> {
    sender: Cow<'a, str>,
    digest: u64,
    at: f64,
}

/// What the guard remembers per agent and room (in `state_meta`). Its
/// strings borrow from the stored text where they can: `admit` reads and
/// writes the whole state for every room message, and a copy of each of
/// its hundreds of strings would be a large part of that.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GuardState<'a> {
    /// Agent messages since the last human one.
    pub hops: u32,
    /// Unix seconds of the agent messages inside the room window.
    pub(super) window: Vec<f64>,
    /// Messages inside the duplicate window.
    pub(super) seen: Vec<Seen<'a>>,
    /// A person's room-wide stop holds: no agent message is answered
    /// until a person writes something that is not a stop.
    pub stopped: bool,
    /// A person's stop addressed this agent: it answers nothing until a
    /// person addresses it again.
    pub quiet: bool,
    /// `(stanza-id, agent name)` of the recent agent messages, oldest
    /// first: a reply that names a message by its id alone addresses the
    /// agent who said it.
    pub(super) said: Vec<(Cow<'a, str>, Cow<'a, str>)>,
}

/// At most this many remembered messages: a flood cannot grow the record.
const MAX_SEEN: usize = 128;

/// At most this many agent messages' ids are remembered for replies.
const MAX_SAID: usize = 64;

impl<'a> GuardState<'a> {
    /// The state as stored: `{"v":1,"hops":N,"window":[t,…],"seen":[[sender,digest,t],…]}`,
    /// keys in byte order. Written through typed fields rather than a JSON
    /// value tree: it is read and written on every `admit`, twice per
    /// answered message, and a tree costs an allocation per value.
    pub fn to_json(&self) -> String {
        let seen: Vec<(&str, Digest, f64)> = self
            .seen
            .iter()
            .map(|s| (&*s.sender, Digest(s.digest), s.at))
            .collect();
        // Absent keys read as their defaults, so a state without a stop or
        // ids is stored as before.
        let stored = Stored {
            hops: self.hops,
            quiet: self.quiet,
            said: &self.said,
            seen,
            stopped: self.stopped,
            v: 1,
            window: &self.window,
        };
        serde_json::to_string(&stored).expect("a state of strings and finite numbers serialises")
    }

    /// [`GuardState::to_json`] at most `max` bytes long, so that the host
    /// hands it back (WIT `meta-get`): when ids or nicks of unusual length
    /// make it longer, the oldest remembered ids, then messages, then window
    /// times are forgotten, a quarter at a time, until it fits.
    pub fn to_json_within(&mut self, max: usize) -> String {
        loop {
            let text = self.to_json();
            if text.len() <= max {
                return text;
            }
            if !self.said.is_empty() {
                self.said.drain(..self.said.len().div_ceil(4));
            } else if !self.seen.is_empty() {
                self.seen.drain(..self.seen.len().div_ceil(4));
            } else if !self.window.is_empty() {
                self.window.drain(..self.window.len().div_ceil(4));
            } else {
                return text;
            }
        }
    }

    /// The stored state; `None` for text that is not a state of ours (the
    /// caller starts afresh and says so: a malformed state never blocks a
    /// human, and resets at the next human message anyway).
    pub fn from_json(text: &'a str) -> Option<Self> {
        let read: Read<'a> = serde_json::from_str(text).ok()?;
        if read.v != 1 {
            return None;
        }
        let finite = |t: f64| t.is_finite().then_some(t);
        let window = read
            .window
            .into_iter()
            .map(finite)
            .collect::<Option<Vec<f64>>>()?;
        let seen = read
            .seen
            .into_iter()
            .map(|(sender, digest, at)| {
                Some(Seen {
                    sender: sender.0,
                    digest: u64::from_str_radix(&digest.0, 16).ok()?,
                    at: finite(at)?,
                })
            })
            .collect::<Option<Vec<Seen<'a>>>>()?;
        Some(Self {
            hops: read.hops,
            window,
            seen,
            stopped: read.stopped,
            quiet: read.quiet,
            said: read
                .said
                .into_iter()
                .map(|(id, agent)| (id.0, agent.0))
                .collect(),
        })
    }

    /// The same state owning its strings (a test's room keeps states
    /// between messages, as `state_meta` does).
    #[cfg(test)]
    pub(super) fn into_owned(self) -> GuardState<'static> {
        let own = |text: Cow<'_, str>| Cow::Owned(text.into_owned());
        GuardState {
            hops: self.hops,
            window: self.window,
            seen: self
                .seen
                .into_iter()
                .map(|s| Seen {
                    sender: own(s.sender),
                    digest: s.digest,
                    at: s.at,
                })
                .collect(),
            stopped: self.stopped,
            quiet: self.quiet,
            said: self
                .said
                .into_iter()
                .map(|(id, agent)| (own(id), own(agent)))
                .collect(),
        }
    }

    /// Remember that `agent` said the message `id`.
    pub(super) fn remember_said(&mut self, id: &str, agent: &str) {
        if self.said.iter().any(|(known, _)| known == id) {
            return;
        }
        self.said
            .push((id.to_owned().into(), agent.to_owned().into()));
        if self.said.len() > MAX_SAID {
            self.said.drain(..self.said.len() - MAX_SAID);
        }
    }

    /// The agent who said the message `id`, if it is remembered.
    pub(super) fn sayer_of(&self, id: &str) -> Option<&str> {
        self.said
            .iter()
            .find(|(known, _)| known == id)
            .map(|(_, agent)| &**agent)
    }

    /// Forget what fell out of the windows at `now`.
    pub(super) fn prune(&mut self, guard: &GuardSettings, now: f64) {
        let window = f64::from(guard.window_seconds);
        self.window
            .retain(|&t| now - t < window && t <= now + window);
        let duplicate = f64::from(guard.duplicate_seconds);
        self.seen
            .retain(|s| now - s.at < duplicate && s.at <= now + duplicate);
        self.cap_seen();
    }

    /// At most [`MAX_SEEN`] messages, the newest: after a read (a stored
    /// state may hold more) and after each one remembered.
    fn cap_seen(&mut self) {
        if self.seen.len() > MAX_SEEN {
            self.seen.drain(..self.seen.len() - MAX_SEEN);
        }
    }

    /// Count an agent message at `now` in the room window. More than the
    /// limit reads as over it whatever the count: the newest
    /// `window_messages + 1` decide the same, and the state stays small
    /// however long a window is configured.
    pub(super) fn count_in_window(&mut self, guard: &GuardSettings, now: f64) {
        self.window.push(now);
        let keep = guard.window_messages as usize + 1;
        if self.window.len() > keep {
            self.window.drain(..self.window.len() - keep);
        }
    }

    /// Whether `sender` said `digest` inside the duplicate window; else
    /// remember it. A repeat is not remembered again: the window runs from
    /// the first time, so a person who keeps asking (every 500 s, say) is
    /// answered again once it has passed.
    pub(super) fn repeated(&mut self, sender: &str, digest: u64, now: f64) -> bool {
        let seen = self
            .seen
            .iter()
            .any(|s| s.sender == sender && s.digest == digest);
        if !seen {
            self.seen.push(Seen {
                sender: sender.to_owned().into(),
                digest,
                at: now,
            });
            self.cap_seen();
        }
        seen
    }
}

/// The stored state as written, its keys in byte order (as a JSON object
/// without `preserve_order` writes them).
#[derive(Serialize)]
struct Stored<'a> {
    hops: u32,
    #[serde(skip_serializing_if = "is_false")]
    quiet: bool,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    said: &'a [(Cow<'a, str>, Cow<'a, str>)],
    seen: Vec<(&'a str, Digest, f64)>,
    #[serde(skip_serializing_if = "is_false")]
    stopped: bool,
    v: u32,
    window: &'a [f64],
}

/// The stored state as read: other keys are ignored, a missing flag or
/// `said` reads as its default.
#[derive(Deserialize)]
struct Read<'a> {
    v: u64,
    hops: u32,
    window: Vec<f64>,
    #[serde(borrow)]
    seen: Vec<(Text<'a>, Text<'a>, f64)>,
    #[serde(default)]
    stopped: bool,
    #[serde(default)]
    quiet: bool,
    #[serde(default, borrow)]
    said: Vec<(Text<'a>, Text<'a>)>,
}

/// A string of the stored text, borrowed from it unless JSON escaped
/// something in it (`Cow`'s own `Deserialize` copies: serde borrows a `Cow`
/// only when it is a field itself).
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(text)))
            }
            fn visit_str<E>(self, text: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

/// A digest as stored: 16 hexadecimal digits.
struct Digest(u64);

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // By hand rather than through `format!`: 128 of them per write.
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut digits = [0u8; 16];
        for (i, digit) in digits.iter_mut().enumerate() {
            *digit = HEX[(self.0 >> (60 - 4 * i) & 0xf) as usize];
        }
        serializer.serialize_str(std::str::from_utf8(&digits).expect("hexadecimal digits"))
    }
}

fn is_false(flag: &bool) -> bool {
    !flag
}

#[cfg(test)]
mod tests;
