//! The loop guard (DESIGN §9.3): whether an agent's bot should answer one
//! live room message, so that agents in one room cannot answer each other
//! forever.
//!
//! Per receiving agent and room, a hop counter counts the agent messages
//! seen since the last human one. The rule is shaped by how guards
//! elsewhere fail:
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
//!
//! This file is the rule ([`admit`]) and its WIT entry ([`admit_message`]);
//! the state it keeps is in `state.rs`, its reading of bodies (who is
//! named, what counts as the same message) in `text.rs`.

mod state;
mod text;

use crate::failure::bad_input;
use crate::host::Host;
use crate::settings::{AgentEntry, ValidSettings};
use crate::{Failure, RoomMessage as WitMessage};
use session_switch_contract::keys::guard_key;
use text::digest;

pub use state::GuardState;
pub use text::addresses;

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
    // The state keeps one time past the bound, enough to decide: the
    // detail says "more than", not a count it does not keep.
    if state.window.len() > guard.window_messages as usize {
        return answer(
            false,
            AdmitReason::LoopGuard,
            hops,
            format!(
                "more than {} agent messages in the last {} s (the room window's bound)",
                guard.window_messages, guard.window_seconds
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
/// ejabberd seats nicks: `MoHe` and `mohe ` are other occupants than
/// `mohe`) or its real
/// bare JID (either suffices: a room may hide real JIDs).
fn is_agent(agent: &AgentEntry, message: &RoomMessage<'_>) -> bool {
    message.nick == agent.agent.nick
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
    // Blanks before the room's JID are no one's; after the `/` they are
    // the nick's own.
    let occupant = message.occupant.trim_start();
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
                    "loop-guard state {key} is not a state of ours; read as a capped chain ({} hops) and rewritten",
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
mod tests;
