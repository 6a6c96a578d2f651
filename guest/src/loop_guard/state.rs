//! The loop guard's state per agent and room, as `state_meta` stores it
//! (`{"v":1,"hops":N,"window":[…],"seen":[…]}`, with `"stopped"`,
//! `"quiet"` and `"said"` when they hold something): the hop counter, the
//! times in the room window, the digests of the duplicate window, the
//! stops that hold, and who said the recent agent messages.

use super::GuardSettings;

/// A recently seen message, for the duplicate rule.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Seen {
    sender: String,
    digest: u64,
    at: f64,
}

/// What the guard remembers per agent and room (in `state_meta`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GuardState {
    /// Agent messages since the last human one.
    pub hops: u32,
    /// Unix seconds of the agent messages inside the room window.
    pub(super) window: Vec<f64>,
    /// Messages inside the duplicate window.
    pub(super) seen: Vec<Seen>,
    /// A person's room-wide stop holds: no agent message is answered
    /// until a person writes something that is not a stop.
    pub stopped: bool,
    /// A person's stop addressed this agent: it answers nothing until a
    /// person addresses it again.
    pub quiet: bool,
    /// `(stanza-id, agent name)` of the recent agent messages, oldest
    /// first: a reply that names a message by its id alone addresses the
    /// agent who said it.
    pub(super) said: Vec<(String, String)>,
}

/// At most this many remembered messages: a flood cannot grow the record.
const MAX_SEEN: usize = 128;

/// At most this many agent messages' ids are remembered for replies.
const MAX_SAID: usize = 64;

impl GuardState {
    /// The state as stored: `{"v":1,"hops":N,"window":[t,…],"seen":[[sender,digest,t],…]}`.
    pub fn to_json(&self) -> String {
        let seen: Vec<serde_json::Value> = self
            .seen
            .iter()
            .map(|s| serde_json::json!([s.sender, format!("{:016x}", s.digest), s.at]))
            .collect();
        let mut value =
            serde_json::json!({"v": 1, "hops": self.hops, "window": self.window, "seen": seen});
        // Absent keys read as their defaults, so a state without a stop or
        // ids is stored as before.
        if self.stopped {
            value["stopped"] = true.into();
        }
        if self.quiet {
            value["quiet"] = true.into();
        }
        if !self.said.is_empty() {
            value["said"] = serde_json::json!(self.said);
        }
        value.to_string()
    }

    /// The stored state; `None` for text that is not a state of ours (the
    /// caller starts afresh and says so: a malformed state never blocks a
    /// human, and resets at the next human message anyway).
    pub fn from_json(text: &str) -> Option<Self> {
        let value: serde_json::Value = serde_json::from_str(text).ok()?;
        if value.get("v")?.as_u64()? != 1 {
            return None;
        }
        let hops = u32::try_from(value.get("hops")?.as_u64()?).ok()?;
        let window = value
            .get("window")?
            .as_array()?
            .iter()
            .map(|t| t.as_f64().filter(|t| t.is_finite()))
            .collect::<Option<Vec<f64>>>()?;
        let seen = value
            .get("seen")?
            .as_array()?
            .iter()
            .map(|s| {
                let s = s.as_array()?;
                Some(Seen {
                    sender: s.first()?.as_str()?.to_owned(),
                    digest: u64::from_str_radix(s.get(1)?.as_str()?, 16).ok()?,
                    at: s.get(2)?.as_f64().filter(|t| t.is_finite())?,
                })
            })
            .collect::<Option<Vec<Seen>>>()?;
        let flag = |key: &str| match value.get(key) {
            None => Some(false),
            Some(v) => v.as_bool(),
        };
        let said = match value.get("said") {
            None => Vec::new(),
            Some(said) => said
                .as_array()?
                .iter()
                .map(|pair| {
                    let pair = pair.as_array()?;
                    Some((
                        pair.first()?.as_str()?.to_owned(),
                        pair.get(1)?.as_str()?.to_owned(),
                    ))
                })
                .collect::<Option<Vec<_>>>()?,
        };
        Some(Self {
            hops,
            window,
            seen,
            stopped: flag("stopped")?,
            quiet: flag("quiet")?,
            said,
        })
    }

    /// Remember that `agent` said the message `id`.
    pub(super) fn remember_said(&mut self, id: &str, agent: &str) {
        if self.said.iter().any(|(known, _)| known == id) {
            return;
        }
        self.said.push((id.to_owned(), agent.to_owned()));
        if self.said.len() > MAX_SAID {
            self.said.drain(..self.said.len() - MAX_SAID);
        }
    }

    /// The agent who said the message `id`, if it is remembered.
    pub(super) fn sayer_of(&self, id: &str) -> Option<&str> {
        self.said
            .iter()
            .find(|(known, _)| known == id)
            .map(|(_, agent)| agent.as_str())
    }

    /// Forget what fell out of the windows at `now`.
    pub(super) fn prune(&mut self, guard: &GuardSettings, now: f64) {
        let window = f64::from(guard.window_seconds);
        self.window
            .retain(|&t| now - t < window && t <= now + window);
        let duplicate = f64::from(guard.duplicate_seconds);
        self.seen
            .retain(|s| now - s.at < duplicate && s.at <= now + duplicate);
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
                sender: sender.to_owned(),
                digest,
                at: now,
            });
        }
        seen
    }
}
