//! The loop guard (DESIGN §9.3): whether an agent's bot should answer one
//! live room message, so that agents in one room cannot answer each other
//! forever.
//!
//! Per receiving agent and room, a hop counter counts the agent messages
//! seen since the last human one. The rule is shaped by how guards
//! elsewhere failed (issue 16):
//! - every live message is classified first, before any other filter (a
//!   counter placed after the self/bot filters never counts); the agent's
//!   own reflections count too;
//! - the counter counts *all* agent messages, not consecutive ones
//!   (interleaving cannot break it), and no time resets it (a slow loop
//!   still stops): only a live human message, or a send a bridge made for a
//!   person (the human-origin marker, trusted only from an agent's real
//!   JID), resets it;
//! - one counter per receiving agent covers every sender (a three-agent
//!   cycle is counted like a two-agent one);
//! - the state lives in `state_meta` ([`GuardState::to_json`]), so a restart
//!   does not reopen a capped chain.
//!
//! Bound: a reply to an agent is allowed only while the counter, this
//! message included, is below `max_hops`. Every agent message reaches every
//! bot once, so between two human messages each agent replies at most
//! `max_hops` times (once to the person, `max_hops - 1` times to agents),
//! and a room of `n` agents carries at most `n × max_hops` agent messages
//! per human one, whatever the delivery order; when every bot sees the
//! same order, at most `(n - 1) × max_hops + 1` (README "Loop guard").

use crate::failure::bad_input;
use crate::host::Host;
use crate::settings::{AgentEntry, ValidSettings};
use crate::{Failure, RoomMessage as WitMessage};
use session_switch_contract::fold::fold_width;
use session_switch_contract::keys::guard_key;
use session_switch_contract::marker::untag;

/// The guard's settings: WIT `loop-guard` (config `[loop_guard]`).
pub use crate::LoopGuard as GuardSettings;

/// One live room message as the receiving bot sees it.
#[derive(Clone, Copy, Debug)]
pub struct RoomMessage<'a> {
    /// The sender's nick in the room (the resource of its occupant JID
    /// `room/nick`, XEP-0045).
    pub nick: &'a str,
    /// The sender's real bare JID, where the room exposes it (non-anonymous
    /// rooms, XEP-0045 §7.2.3).
    pub jid: Option<&'a str>,
    pub body: &'a str,
    /// Delayed delivery (XEP-0203): history the room replays on join.
    pub delayed: bool,
    /// The stanza carries the bridge's human-origin marker.
    pub human_origin: bool,
}

pub use crate::{Admission, AdmitReason};

/// A recently seen message, for the duplicate rule.
#[derive(Clone, Debug, PartialEq)]
struct Seen {
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
    window: Vec<f64>,
    /// Messages inside the duplicate window.
    seen: Vec<Seen>,
}

/// At most this many remembered messages: a flood cannot grow the record.
const MAX_SEEN: usize = 128;

impl GuardState {
    /// The state as stored: `{"v":1,"hops":N,"window":[t,…],"seen":[[sender,digest,t],…]}`.
    pub fn to_json(&self) -> String {
        let seen: Vec<serde_json::Value> = self
            .seen
            .iter()
            .map(|s| serde_json::json!([s.sender, format!("{:016x}", s.digest), s.at]))
            .collect();
        serde_json::json!({"v": 1, "hops": self.hops, "window": self.window, "seen": seen})
            .to_string()
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
        Some(Self { hops, window, seen })
    }

    /// Forget what fell out of the windows at `now`.
    fn prune(&mut self, guard: &GuardSettings, now: f64) {
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
    fn count_in_window(&mut self, guard: &GuardSettings, now: f64) {
        self.window.push(now);
        let keep = guard.window_messages as usize + 1;
        if self.window.len() > keep {
            self.window.drain(..self.window.len() - keep);
        }
    }

    /// Whether `sender` said `digest` inside the duplicate window; else
    /// remember it. A repeat is not remembered again: the window runs from
    /// the first time, so a person who asks again after it is answered
    /// (a repeat that restarted it kept one every 500 s unanswered).
    fn repeated(&mut self, sender: &str, digest: u64, now: f64) -> bool {
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

/// Decide for `receiver` (one of `agents`) whether to answer `message` at
/// `now` (Unix seconds), updating `state` (the receiver's, for this room).
pub fn admit(
    agents: &[AgentEntry],
    receiver: &AgentEntry,
    mention: Option<&str>,
    guard: &GuardSettings,
    message: &RoomMessage<'_>,
    state: &mut GuardState,
    now: f64,
) -> Admission {
    let answer = |reply, reason, hops, detail: String| Admission {
        reply,
        reason,
        hops,
        detail,
    };
    if message.delayed {
        return answer(
            false,
            AdmitReason::Delayed,
            state.hops,
            "delayed history is never answered nor counted".into(),
        );
    }
    state.prune(guard, now);
    let sender_agent = agents.iter().find(|a| is_agent(a, message));
    let jid_agent = message
        .jid
        .and_then(|jid| agents.iter().find(|a| jid_matches(&a.agent.jid, jid)));
    // The marker says a person typed this through a bridge; only an agent's
    // real JID can carry it (anyone can put the element on a stanza).
    let human = sender_agent.is_none() || (message.human_origin && jid_agent.is_some());
    let own = sender_agent.is_some_and(|a| a.agent.name == receiver.agent.name);
    let sender = sender_agent.map_or_else(
        || {
            message
                .jid
                .map_or_else(|| message.nick.to_string(), str::to_ascii_lowercase)
        },
        |a| a.agent.name.clone(),
    );
    let duplicate = state.repeated(&sender, digest(message.body), now);

    if human {
        if duplicate {
            return answer(
                false,
                AdmitReason::Duplicate,
                state.hops,
                format!("'{sender}' said this within {} s", guard.duplicate_seconds),
            );
        }
        // A person resets both bounds (Hermes's own bot loop guard resets
        // its window when a human speaks): the window caps agent-origin
        // messages only, so a person is never kept waiting for it.
        state.hops = 0;
        state.window.clear();
        let (reply, reason) = if own {
            (false, AdmitReason::OwnMessage)
        } else {
            (true, AdmitReason::Human)
        };
        return answer(
            reply,
            reason,
            0,
            "a person spoke: the hop counter and the room window are reset".into(),
        );
    }

    // An agent message: counted before any other filter.
    state.hops = state.hops.saturating_add(1);
    state.count_in_window(guard, now);
    let hops = state.hops;
    if own {
        return answer(
            false,
            AdmitReason::OwnMessage,
            hops,
            "the agent's own message".into(),
        );
    }
    if duplicate {
        return answer(
            false,
            AdmitReason::Duplicate,
            hops,
            format!("'{sender}' said this within {} s", guard.duplicate_seconds),
        );
    }
    if hops >= guard.max_hops {
        return answer(
            false,
            AdmitReason::LoopGuard,
            hops,
            format!(
                "{hops} agent messages since the last human one (max_hops {})",
                guard.max_hops
            ),
        );
    }
    let in_window = state.window.len();
    if in_window > guard.window_messages as usize {
        return answer(
            false,
            AdmitReason::LoopGuard,
            hops,
            format!(
                "{in_window} agent messages in the last {} s (at most {})",
                guard.window_seconds, guard.window_messages
            ),
        );
    }
    if !addresses(message.body, &receiver.agent.nick, mention) {
        return answer(
            false,
            AdmitReason::NotAddressed,
            hops,
            format!("'{sender}' did not name '{}'", receiver.agent.name),
        );
    }
    answer(
        true,
        AdmitReason::Addressed,
        hops,
        format!("'{sender}' named '{}'", receiver.agent.name),
    )
}

/// Whether `message` comes from `agent`: its nick in the room (exactly, as
/// ejabberd seats nicks: `MoHe` is another occupant than `mohe`) or its real
/// bare JID (either suffices: a room may hide real JIDs).
fn is_agent(agent: &AgentEntry, message: &RoomMessage<'_>) -> bool {
    message.nick.trim() == agent.agent.nick
        || message
            .jid
            .is_some_and(|jid| jid_matches(&agent.agent.jid, jid))
}

/// Whether `jid` (bare or full) is `bare`, case-folded as RFC 7622 compares.
fn jid_matches(bare: &str, jid: &str) -> bool {
    let jid = jid.trim();
    let jid = jid.split_once('/').map_or(jid, |(b, _)| b);
    jid.eq_ignore_ascii_case(bare)
}

/// Whether `body` names the agent: its `mention` (e.g. `@mohe`) or its nick
/// as a whole word, read as the `[YOU]` marker is read (case ignored,
/// full-width forms folded: `＠ｍｏｈｅ` names mohe); `mohe2` does not name
/// `mohe`. Addressing decides whether to answer, not who spoke, so it folds
/// where identities never do.
pub fn addresses(body: &str, nick: &str, mention: Option<&str>) -> bool {
    mention
        .into_iter()
        .chain([nick])
        .filter(|name| !name.is_empty())
        .any(|name| contains_word(body, name))
}

/// `text` as the loop guard's text matches read it: full-width forms as
/// ASCII ([`fold_width`], the marker's rule), then lower case.
fn fold(text: &str) -> String {
    text.chars()
        .map(fold_width)
        .collect::<String>()
        .to_lowercase()
}

fn contains_word(text: &str, word: &str) -> bool {
    let lower = fold(text);
    let word = fold(word);
    lower.match_indices(&word).any(|(at, _)| {
        let before = lower[..at].chars().next_back();
        let after = lower[at + word.len()..].chars().next();
        before.is_none_or(|c| !continues_word(c)) && after.is_none_or(|c| !continues_word(c))
    })
}

/// Whether `c` beside a name makes it part of a longer word: a letter,
/// digit, `_` or combining mark (`mohe` + U+0301 is another word), except
/// in the scripts written without spaces between words (Han, kana,
/// Hangul, Thai, Lao, Khmer, Myanmar): `@mohe你好` and `请mohe看一下` name
/// mohe, and a Chinese nick inside a Chinese sentence is found.
fn continues_word(c: char) -> bool {
    let combining = matches!(c,
        '\u{0300}'..='\u{036F}' | '\u{1AB0}'..='\u{1AFF}' | '\u{1DC0}'..='\u{1DFF}'
        | '\u{20D0}'..='\u{20FF}' | '\u{FE20}'..='\u{FE2F}');
    let unspaced = matches!(c,
        '\u{0E00}'..='\u{0EFF}' | '\u{1000}'..='\u{109F}' | '\u{1100}'..='\u{11FF}'
        | '\u{1780}'..='\u{17FF}' | '\u{3005}'..='\u{3007}' | '\u{3040}'..='\u{30FF}'
        | '\u{3130}'..='\u{318F}' | '\u{31F0}'..='\u{31FF}' | '\u{3400}'..='\u{4DBF}'
        | '\u{4E00}'..='\u{9FFF}' | '\u{AC00}'..='\u{D7AF}' | '\u{F900}'..='\u{FAFF}'
        | '\u{20000}'..='\u{3FFFF}');
    (c.is_alphanumeric() || c == '_' || combining) && !unspaced
}

/// The body as the duplicate rule compares it: without `[YOU]` markers,
/// blanks folded, full-width forms and case folded ([`fold`]); FNV-1a 64
/// so the state stores no text.
fn digest(body: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let folded = fold(untag(body));
    let mut first = true;
    for word in folded.split_whitespace() {
        if !first {
            hash = (hash ^ u64::from(b' ')).wrapping_mul(0x0100_0000_01b3);
        }
        first = false;
        for byte in word.bytes() {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// WIT `admit` for `agent`: parse the occupant (`room/nick` of the
/// configured room), read the agent's guard state, decide at the host's
/// clock, write the state back when it changed.
///
/// A stored state that is not ours (not JSON, another version, a field of
/// the wrong type) fails closed: it is read as a capped chain (`max_hops`
/// agent messages), so a corrupted value never reopens a loop, while a
/// person's message still gets through and resets it; the state is then
/// rewritten whole and the decision's detail says so (logged too).
///
/// Errors: `unknown-agent`; `bad-input` for an occupant outside the room;
/// `policy` when the host's clock is not a finite Unix time; the host's
/// failures unchanged.
pub fn admit_message(
    settings: &ValidSettings,
    host: &mut impl Host,
    agent: &str,
    message: &WitMessage,
) -> Result<Admission, Failure> {
    let receiver = settings.agent(agent)?;
    let occupant = message.occupant.trim();
    let nick = match occupant.split_once('/') {
        Some((room, nick)) if room.eq_ignore_ascii_case(settings.room()) && !nick.is_empty() => {
            nick
        }
        _ => {
            return Err(bad_input(format!(
                "occupant {occupant:?} is not `room/nick` of the configured room {}",
                settings.room()
            )));
        }
    };
    let guard = settings.loop_guard();
    let key = guard_key(agent, settings.room());
    let mut malformed = false;
    let mut state = match host.meta_get(&key)? {
        None => GuardState::default(),
        Some(text) => GuardState::from_json(&text).unwrap_or_else(|| {
            malformed = true;
            host.log(
                crate::LogLevel::Warn,
                &format!(
                    "loop-guard state {key} is not a state of ours; read as a capped chain                      ({} hops) and rewritten",
                    guard.max_hops
                ),
            );
            GuardState {
                hops: guard.max_hops,
                ..GuardState::default()
            }
        }),
    };
    let now = host.now();
    if !now.is_finite() {
        return Err(crate::failure::policy(format!(
            "the host's clock returned {}, not a Unix time in seconds",
            crate::redirect::non_finite(now)
        )));
    }
    let room_message = RoomMessage {
        nick,
        jid: message.jid.as_deref(),
        body: &message.body,
        delayed: message.delayed,
        human_origin: message.human_origin,
    };
    let before = state.clone();
    let mut admission = admit(
        settings.agents(),
        receiver,
        receiver.agent.mention.as_deref(),
        guard,
        &room_message,
        &mut state,
        now,
    );
    if malformed {
        admission.detail.push_str(&format!(
            " (the stored state {key} was not valid: read as {} hops)",
            guard.max_hops
        ));
    }
    if malformed || state != before {
        host.meta_set(&key, &state.to_json())?;
    }
    Ok(admission)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samples::sample_settings;

    fn msg<'a>(nick: &'a str, jid: Option<&'a str>, body: &'a str) -> RoomMessage<'a> {
        RoomMessage {
            nick,
            jid,
            body,
            delayed: false,
            human_origin: false,
        }
    }

    struct Room {
        settings: ValidSettings,
        guard: GuardSettings,
        states: Vec<GuardState>,
    }

    impl Room {
        fn new() -> Self {
            let settings = ValidSettings::new(sample_settings()).unwrap();
            let n = settings.agents().len();
            Self {
                settings,
                guard: crate::samples::default_loop_guard(),
                states: vec![GuardState::default(); n],
            }
        }
        /// Every agent's decision on one message, in agent order.
        fn deliver(&mut self, m: &RoomMessage<'_>, now: f64) -> Vec<Admission> {
            let agents = self.settings.agents();
            (0..agents.len())
                .map(|i| {
                    admit(
                        agents,
                        &agents[i],
                        None,
                        &self.guard,
                        m,
                        &mut self.states[i],
                        now,
                    )
                })
                .collect()
        }
    }

    #[test]
    fn two_agents_answering_each_other_stop_at_max_hops() {
        let mut room = Room::new();
        let a = room.deliver(
            &msg("alice", Some("alice@example.org"), "hi mohe and zhiwei"),
            0.0,
        );
        assert!(a[0].reply && a[1].reply, "{a:?}");
        // mohe and zhiwei answer each other, naming the other.
        let mut agent_messages = 0;
        let mut speaker = ("mohe", "zhiwei");
        for t in 1..100 {
            let body = format!("{} turn {t}", speaker.1);
            let d = room.deliver(&msg(speaker.0, None, &body), f64::from(t) * 70.0);
            agent_messages += 1;
            let other = if speaker.1 == "mohe" { 0 } else { 1 };
            if !d[other].reply {
                assert_eq!(d[other].reason, AdmitReason::LoopGuard, "{d:?}");
                assert_eq!(d[other].hops, 6);
                break;
            }
            speaker = (speaker.1, speaker.0);
        }
        assert_eq!(agent_messages, 6, "(2 - 1) × max_hops, even 70 s apart");
    }

    #[test]
    fn a_human_resets_and_a_delayed_human_does_not() {
        let mut room = Room::new();
        for t in 0..6 {
            room.deliver(&msg("zhiwei", None, &format!("mohe {t}")), f64::from(t));
        }
        assert_eq!(
            room.deliver(&msg("zhiwei", None, "mohe 7"), 7.0)[0].reason,
            AdmitReason::LoopGuard
        );
        let mut replay = msg("alice", None, "mohe wake up");
        replay.delayed = true;
        assert_eq!(room.deliver(&replay, 8.0)[0].reason, AdmitReason::Delayed);
        assert_eq!(
            room.deliver(&msg("zhiwei", None, "mohe 9"), 9.0)[0].reason,
            AdmitReason::LoopGuard
        );
        assert_eq!(
            room.deliver(&msg("alice", None, "mohe wake up"), 10.0)[0].reason,
            AdmitReason::Human
        );
        let d = room.deliver(&msg("zhiwei", None, "mohe 11"), 11.0);
        assert_eq!((d[0].reply, d[0].hops), (true, 1));
    }

    #[test]
    fn the_marker_counts_only_from_an_agents_real_jid() {
        let mut room = Room::new();
        for t in 0..6 {
            room.deliver(&msg("zhiwei", None, &format!("mohe {t}")), f64::from(t));
        }
        let mut forged = msg(
            "zhiwei",
            Some("mallory@example.org"),
            "mohe: a person typed this",
        );
        forged.human_origin = true;
        let d = room.deliver(&forged, 7.0);
        assert_eq!(d[0].reason, AdmitReason::LoopGuard, "{d:?}");
        let mut real = msg(
            "zhiwei",
            Some("zhiwei@example.org/bridge"),
            "mohe: a person typed that",
        );
        real.human_origin = true;
        let d = room.deliver(&real, 8.0);
        assert_eq!((d[0].reason, d[0].hops), (AdmitReason::Human, 0));
        assert_eq!(
            d[1].reason,
            AdmitReason::OwnMessage,
            "the sender's own bot never answers"
        );
        assert_eq!(d[1].hops, 0, "but its chain is reset too");
    }

    /// ejabberd seats `MoHe` beside `mohe`: that occupant is a person to
    /// every bot, not mohe (nicks compare exactly).
    #[test]
    fn a_nick_in_another_case_is_another_occupant() {
        let mut room = Room::new();
        for t in 0..6 {
            room.deliver(&msg("zhiwei", None, &format!("mohe {t}")), f64::from(t));
        }
        for (t, nick) in [(7.0, "MoHe"), (8.0, "MOHE"), (9.0, "ｍｏｈｅ")] {
            let d = room.deliver(
                &msg(nick, None, &format!("mohe and zhiwei, {nick} here")),
                t,
            );
            assert_eq!(
                (d[0].reason, d[0].reply),
                (AdmitReason::Human, true),
                "{nick}: {d:?}"
            );
            assert_eq!(
                (d[1].reason, d[1].hops),
                (AdmitReason::Human, 0),
                "{nick}: {d:?}"
            );
        }
    }

    #[test]
    fn own_and_unaddressed_messages_still_count() {
        let mut room = Room::new();
        let d = room.deliver(&msg("mohe", None, "just thinking aloud"), 0.0);
        assert_eq!(d[0].reason, AdmitReason::OwnMessage);
        assert_eq!(d[1].reason, AdmitReason::NotAddressed);
        assert!(d.iter().all(|a| a.hops == 1), "{d:?}");
    }

    #[test]
    fn the_same_body_twice_is_answered_once() {
        let mut room = Room::new();
        assert!(room.deliver(&msg("alice", None, "Hello  mohe"), 0.0)[0].reply);
        let d = room.deliver(&msg("alice", None, "hello mohe "), 60.0);
        assert_eq!(d[0].reason, AdmitReason::Duplicate);
        assert!(
            room.deliver(&msg("alice", None, "hello mohe"), 700.0)[0].reply,
            "after the window"
        );
        // A refused repeat does not restart the window (fresh-user trial:
        // "@mohe ping" every 500 s was never answered again).
        let mut room = Room::new();
        let answered: Vec<bool> = [0.0, 500.0, 1000.0, 1500.0]
            .iter()
            .map(|&t| room.deliver(&msg("alice", None, "@mohe ping"), t)[0].reply)
            .collect();
        assert_eq!(answered, [true, false, true, false]);
    }

    /// The window keeps its newest `window_messages + 1` times: the same
    /// decisions as every time, in a state that stays small (a fresh-user
    /// trial grew it to 1M entries with a day-long window, past `admit`'s
    /// memory cap).
    #[test]
    fn the_room_window_keeps_no_more_than_decides() {
        let mut room = Room::new();
        room.guard.max_hops = 100_000;
        room.guard.window_seconds = 86_400;
        let mut refused_from = None;
        for t in 0..1000 {
            let d = room.deliver(&msg("zhiwei", None, &format!("mohe {t}")), f64::from(t));
            if !d[0].reply && refused_from.is_none() {
                refused_from = Some(t);
            }
            if refused_from.is_some() {
                assert_eq!(d[0].reason, AdmitReason::LoopGuard, "{t}");
            }
        }
        assert_eq!(refused_from, Some(20));
        let limit = room.guard.window_messages as usize + 1;
        assert!(room.states.iter().all(|s| s.window.len() <= limit));
        // A person still gets through; agents after the window passes.
        assert!(room.deliver(&msg("alice", None, "mohe?"), 1000.0)[0].reply);
        assert!(room.deliver(&msg("zhiwei", None, "mohe again"), 1000.0 + 86_400.0)[0].reply);
    }

    #[test]
    fn the_room_window_caps_a_burst() {
        let mut room = Room::new();
        room.guard.max_hops = 1000;
        let mut refused = None;
        for t in 0..30 {
            let d = room.deliver(&msg("zhiwei", None, &format!("mohe {t}")), f64::from(t));
            if !d[0].reply {
                refused = Some((t, d[0].detail.clone()));
                break;
            }
        }
        let (t, detail) = refused.unwrap();
        assert_eq!(t, 20, "the 21st agent message in 300 s");
        assert!(detail.contains("in the last 300 s"), "{detail}");
    }

    /// A capped window, then a person addresses mohe: mohe answers, and the
    /// agents' chain that follows is bounded again (the window starts
    /// afresh), not refused at once.
    #[test]
    fn a_person_resets_the_room_window() {
        let mut room = Room::new();
        room.guard.max_hops = 1000;
        // Agent messages until the window refuses one: the 21st in 300 s.
        let chain = |room: &mut Room, start: f64| {
            (0..30)
                .find(|&i| {
                    let body = format!("mohe {start} {i}");
                    let d = room.deliver(&msg("zhiwei", None, &body), start + f64::from(i));
                    !d[0].reply
                })
                .map(|i| (i, room.states[0].window.len()))
        };
        assert_eq!(chain(&mut room, 0.0), Some((20, 21)));
        let d = room.deliver(&msg("alice", None, "@mohe are you there?"), 30.0);
        assert_eq!(
            (d[0].reply, d[0].reason, d[0].hops),
            (true, AdmitReason::Human, 0),
            "{d:?}"
        );
        assert!(room.states.iter().all(|s| s.window.is_empty()));
        assert_eq!(chain(&mut room, 31.0), Some((20, 21)), "bounded again");
    }

    #[test]
    fn state_round_trips_through_json_and_refuses_foreign_text() {
        let mut room = Room::new();
        for t in 0..3 {
            room.deliver(&msg("zhiwei", None, &format!("mohe {t}")), f64::from(t));
        }
        let text = room.states[0].to_json();
        assert_eq!(GuardState::from_json(&text).as_ref(), Some(&room.states[0]));
        for bad in [
            "",
            "{}",
            "[1]",
            r#"{"v":2,"hops":1,"window":[],"seen":[]}"#,
            r#"{"v":1,"hops":-1,"window":[],"seen":[]}"#,
        ] {
            assert_eq!(GuardState::from_json(bad), None, "{bad}");
        }
    }

    /// Three agents that answer everything, naming the others, with a
    /// random delivery order per bot (deciding apart from posting): each
    /// agent replies at most `max_hops` times per human message and the room
    /// stays within `n × max_hops`; with one order for all, within
    /// `(n - 1) × max_hops + 1`.
    #[test]
    fn flooding_agents_stay_within_the_bound_in_any_delivery_order() {
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..300 {
            let same_order = round % 3 == 0;
            let mut room = Room::new();
            room.guard.max_hops = 2 + (next() % 6) as u32;
            let max_hops = room.guard.max_hops as usize;
            let agents: Vec<String> = room
                .settings
                .agents()
                .iter()
                .map(|a| a.agent.nick.clone())
                .collect();
            let n = agents.len();
            // Each bot's inbox: (sender index or None for the person, body).
            let mut log: Vec<(Option<usize>, String)> =
                vec![(None, "hello mohe zhiwei xiaoguo".into())];
            let mut read = vec![0usize; n];
            let mut replies = vec![0usize; n];
            let mut now = 0.0;
            loop {
                // A bot with unread messages, chosen at random (or in turn).
                let pending: Vec<usize> = (0..n).filter(|&i| read[i] < log.len()).collect();
                if pending.is_empty() {
                    break;
                }
                let i = if same_order {
                    pending[0]
                } else {
                    pending[(next() % pending.len() as u64) as usize]
                };
                let (from, body) = log[read[i]].clone();
                read[i] += 1;
                now += 1.0 + (next() % 100) as f64;
                let nick = from.map_or("alice", |f| agents[f].as_str());
                let agents_all = room.settings.agents();
                let d = admit(
                    agents_all,
                    &agents_all[i],
                    None,
                    &room.guard,
                    &msg(nick, None, &body),
                    &mut room.states[i],
                    now,
                );
                if d.reply {
                    replies[i] += 1;
                    let others: Vec<&str> = (0..n)
                        .filter(|&j| j != i)
                        .map(|j| agents[j].as_str())
                        .collect();
                    log.push((
                        Some(i),
                        format!(
                            "{} reply {} from {}",
                            others.join(" "),
                            replies[i],
                            agents[i]
                        ),
                    ));
                }
                assert!(log.len() < 10_000, "the room never fell silent");
            }
            let total = log.len() - 1;
            assert!(
                replies.iter().all(|&r| r <= max_hops),
                "round {round}: {replies:?}, max_hops {max_hops}"
            );
            assert!(
                total <= n * max_hops,
                "round {round}: {total} > {n} × {max_hops}"
            );
            if same_order {
                assert!(
                    total <= (n - 1) * max_hops + 1,
                    "round {round}: {total}, max_hops {max_hops}"
                );
            }
        }
    }

    fn wit(occupant: &str, jid: Option<&str>, body: &str) -> WitMessage {
        WitMessage {
            occupant: occupant.into(),
            jid: jid.map(Into::into),
            body: body.into(),
            delayed: false,
            human_origin: false,
        }
    }

    const ROOM: &str = "coregroup@conference.example.org";

    #[test]
    fn admit_message_keeps_the_state_under_the_agents_key() {
        let settings = ValidSettings::new(sample_settings()).unwrap();
        let mut host = crate::memory::MemoryHost::new(1000.0, ROOM);
        let d = admit_message(
            &settings,
            &mut host,
            "mohe",
            &wit(&format!("{ROOM}/zhiwei"), None, "mohe, over to you"),
        )
        .unwrap();
        assert_eq!(
            (d.reply, d.reason, d.hops),
            (true, AdmitReason::Addressed, 1)
        );
        let key = format!("session_switch:loop:mohe:{ROOM}");
        let stored = GuardState::from_json(&host.meta[&key]).unwrap();
        assert_eq!(stored.hops, 1);
        assert_eq!(host.meta.len(), 1, "{:?}", host.meta);
        // Delayed history changes nothing: nothing is written.
        host.meta.insert(key.clone(), "kept".into());
        let mut replay = wit(&format!("{ROOM}/alice"), None, "hello");
        replay.delayed = true;
        let d = admit_message(&settings, &mut host, "mohe", &replay);
        // "kept" is malformed: read as capped, and rewritten even so.
        assert_eq!(d.unwrap().reason, AdmitReason::Delayed);
        assert!(GuardState::from_json(&host.meta[&key]).is_some());
    }

    #[test]
    fn a_malformed_state_fails_closed_for_agents_and_open_for_people() {
        let settings = ValidSettings::new(sample_settings()).unwrap();
        let key = format!("session_switch:loop:mohe:{ROOM}");
        for bad in [
            "{not json",
            "[]",
            r#"{"v":1,"hops":"3","window":[],"seen":[]}"#,
        ] {
            let mut host = crate::memory::MemoryHost::new(1000.0, ROOM);
            host.meta.insert(key.clone(), bad.into());
            let d = admit_message(
                &settings,
                &mut host,
                "mohe",
                &wit(&format!("{ROOM}/zhiwei"), None, "mohe?"),
            )
            .unwrap();
            assert_eq!(
                (d.reply, d.reason, d.hops),
                (false, AdmitReason::LoopGuard, 7),
                "{bad}"
            );
            assert!(
                d.detail.contains("was not valid: read as 6 hops"),
                "{}",
                d.detail
            );
            assert!(
                host.logs
                    .iter()
                    .any(|(_, l)| l.contains("is not a state of ours")),
                "{:?}",
                host.logs
            );
            let stored = GuardState::from_json(&host.meta[&key]).expect("rewritten whole");
            assert_eq!(stored.hops, 7);
            let d = admit_message(
                &settings,
                &mut host,
                "mohe",
                &wit(&format!("{ROOM}/alice"), Some("alice@example.org"), "mohe?"),
            )
            .unwrap();
            assert_eq!((d.reply, d.reason, d.hops), (true, AdmitReason::Human, 0));
        }
    }

    #[test]
    fn admit_message_refuses_bad_occupants_unknown_agents_and_a_broken_clock() {
        let settings = ValidSettings::new(sample_settings()).unwrap();
        let mut host = crate::memory::MemoryHost::new(1000.0, ROOM);
        for occupant in [
            "zhiwei",
            "other@conference.example.org/zhiwei",
            &format!("{ROOM}/"),
        ] {
            let e =
                admit_message(&settings, &mut host, "mohe", &wit(occupant, None, "x")).unwrap_err();
            assert_eq!(e.kind, crate::FailureKind::BadInput, "{occupant}");
            assert!(e.message.contains("is not `room/nick`"), "{}", e.message);
        }
        let e = admit_message(
            &settings,
            &mut host,
            "nobody",
            &wit(&format!("{ROOM}/a"), None, "x"),
        )
        .unwrap_err();
        assert_eq!(e.kind, crate::FailureKind::UnknownAgent);
        host.clock = f64::NAN;
        let e = admit_message(
            &settings,
            &mut host,
            "mohe",
            &wit(&format!("{ROOM}/a"), None, "x"),
        )
        .unwrap_err();
        assert_eq!(e.kind, crate::FailureKind::Policy);
        assert!(e.message.contains("not a Unix time"), "{}", e.message);
        assert!(host.meta.is_empty(), "nothing written: {:?}", host.meta);
    }

    #[test]
    fn addressing_is_by_whole_word() {
        assert!(addresses("mohe, could you", "mohe", None));
        assert!(addresses("Thanks MOHE!", "mohe", None));
        assert!(addresses("＠ｍｏｈｅ ｐｌｅａｓｅ", "mohe", Some("@mohe")));
        assert!(addresses("Ｍｏｈｅ，好", "mohe", None));
        assert!(!addresses("ｍｏｈｅ２ said so", "mohe", None));
        assert!(addresses("ping @mohe", "mohe", Some("@mohe")));
        assert!(!addresses("mohe2 said so", "mohe", None));
        assert!(!addresses("nothing here", "mohe", Some("@mohe")));
        assert!(addresses("墨河 mohe：好", "mohe", None));
        // Scripts without spaces between words (fresh-user trial).
        for body in [
            "@mohe你好",
            "mohe你好",
            "你好mohe",
            "请mohe看一下",
            "mohe는",
        ] {
            assert!(addresses(body, "mohe", Some("@mohe")), "{body}");
        }
        assert!(addresses("我是墨河啊", "墨河", None));
        // A combining mark makes another word, as the precomposed letter does.
        assert!(!addresses("mohe\u{301} said", "mohe", None));
        assert!(!addresses("mohé said", "mohe", None));
        assert!(!addresses("mohe_bot said", "mohe", None));
    }
}
