//! The loop guard (docs/src/design/loop-guard.md): whether an agent's bot should answer one
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
//!   still stops): only a live human message, or a send the CLI made for a
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
//! same order, at most `(n - 1) × max_hops + 1` (docs/src/concepts/loop-guard.md#the-bound).
//!
//! Within the bound, whom a message is answered by is the meeting's rule
//! (Hermes's group settings): a person's message by the agents it
//! addresses (every agent where `require_mention` is off), an agent's per
//! `allow_bots`, nothing while a person's stop holds.
//!
//! This file is the rule ([`admit`]) and its WIT entry ([`admit_message`]);
//! a person's message is decided in `person.rs`, and a decision is a
//! `Verdict` (`verdict.rs`) until it becomes an admission; the message it
//! reads is in `message.rs`, the state it keeps in `state.rs`, whom a
//! message addresses in `address.rs`, a person's stop in `stop.rs`, its
//! reading of bodies (who is named, what counts as the same message) in
//! `text.rs`.

mod address;
mod message;
mod person;
mod state;
mod stop;
mod text;
mod verdict;

use crate::failure::bad_input;
use crate::host::Host;
use crate::settings::{AgentEntry, ValidSettings};
use crate::{AllowBots, Failure, RoomMessage as WitMessage};
use address::Addressing;
use person::person;
use session_switch_contract::keys::guard_key;
use session_switch_contract::limits::MAX_META_VALUE_BYTES;
use text::digest;
use verdict::Verdict;

pub use message::{ReplyTo, RoomMessage};
pub use state::GuardState;
pub use stop::{is_stop, stop_form};
pub use text::addresses;

/// The guard's settings: WIT `loop-guard` (config `[loop_guard]`).
pub use crate::LoopGuard as GuardSettings;

pub use crate::{Admission, AdmitReason};

/// Decide for `receiver` (one of the configured agents) whether to answer
/// `message` at `now` (Unix seconds), updating `state` (the receiver's,
/// for this room).
///
/// The order is the guard's first (every live message is classified and
/// every agent message counted before any other filter), then a person's
/// stop, then who the message addresses:
/// - a person's message resets the counter and a room-wide stop; it is
///   answered by the agents it addresses, by every agent when it
///   addresses nobody and `require_mention` is off, and never by an agent
///   it does not address when it addresses others;
/// - an agent's message is answered within the bounds, per `allow_bots`,
///   and never while a stop holds.
pub fn admit(
    settings: &ValidSettings,
    receiver: &AgentEntry,
    message: &RoomMessage<'_>,
    state: &mut GuardState<'_>,
    now: f64,
) -> Admission {
    let guard = settings.loop_guard();
    if message.delayed {
        return Verdict::ignored(
            AdmitReason::Delayed,
            "delayed history is never answered nor counted".into(),
        )
        .with_hops(state.hops);
    }
    state.prune(guard, now);
    let agents = settings.agents();
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
    let to = Addressing::of(agents, receiver, sender_agent, message, state);
    let name = &receiver.agent.name;

    if human {
        let verdict = person(settings, receiver, message, state, now, &sender, own, &to);
        return caught_up_if(message, verdict).with_hops(state.hops);
    }

    if message.caught_up {
        // The agent message was answered (or not) while the bot was away:
        // counting it now would cap a chain the room has moved past.
        if let (Some(id), Some(agent)) = (message.stanza_id, sender_agent) {
            state.remember_said(id, &agent.agent.name);
        }
        let verdict = if own {
            Verdict::ignored(AdmitReason::OwnMessage, "the agent's own message".into())
        } else {
            Verdict::heard(
                AdmitReason::CaughtUp,
                format!("'{sender}' said this while the bot was away: heard, not counted"),
            )
        };
        return verdict.with_hops(state.hops);
    }

    // An agent message: counted before any other filter.
    state.hops = state.hops.saturating_add(1);
    state.count_in_window(guard, now);
    if let (Some(id), Some(agent)) = (message.stanza_id, sender_agent) {
        state.remember_said(id, &agent.agent.name);
    }
    let hops = state.hops;
    let duplicate = state.repeated(&sender, digest(message.body), now);
    let verdict = if own {
        Verdict::ignored(AdmitReason::OwnMessage, "the agent's own message".into())
    } else if duplicate {
        Verdict::ignored(
            AdmitReason::Duplicate,
            format!("'{sender}' said this within {} s", guard.duplicate_seconds),
        )
    } else if state.stopped || state.quiet {
        let why = if state.stopped {
            "a person's stop holds until a person writes again"
        } else {
            "a person's stop holds until a person addresses it again"
        };
        Verdict::heard(AdmitReason::Stopped, format!("'{name}' is stopped: {why}"))
    } else if receiver.meeting.allow_bots == AllowBots::None {
        Verdict::heard(
            AdmitReason::BotsNotAllowed,
            format!("'{name}' answers no agent (allow_bots none)"),
        )
    } else if hops >= guard.max_hops {
        Verdict::heard(
            AdmitReason::LoopGuard,
            format!(
                "{hops} agent messages since the last human one (max_hops {})",
                guard.max_hops
            ),
        )
    } else if state.window.len() > guard.window_messages as usize {
        // The state keeps one time past the bound, enough to decide: the
        // detail says "more than", not a count it does not keep.
        Verdict::heard(
            AdmitReason::LoopGuard,
            format!(
                "more than {} agent messages in the last {} s (the room window's bound)",
                guard.window_messages, guard.window_seconds
            ),
        )
    } else if to.here {
        Verdict::answer(
            AdmitReason::Addressed,
            format!("'{sender}' addressed '{name}'"),
        )
    } else if to.elsewhere {
        Verdict::heard(
            AdmitReason::AddressedElsewhere,
            format!("'{sender}' addressed other agents, not '{name}'"),
        )
    } else if receiver.meeting.allow_bots == AllowBots::All {
        Verdict::answer(
            AdmitReason::FreeResponse,
            format!("'{sender}' addressed nobody; '{name}' answers any agent (allow_bots all)"),
        )
    } else {
        Verdict::heard(
            AdmitReason::NotAddressed,
            format!("'{sender}' did not address '{name}'"),
        )
    };
    verdict.with_hops(hops)
}

/// A caught-up message is never answered: an answer becomes a heard line.
fn caught_up_if(message: &RoomMessage<'_>, verdict: Verdict) -> Verdict {
    if message.caught_up && verdict.reply {
        Verdict::heard(
            AdmitReason::CaughtUp,
            format!(
                "said while the bot was away, heard and not answered ({})",
                verdict.detail
            ),
        )
    } else {
        verdict
    }
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
    let stored = host.meta_get(&key)?;
    let mut state = match stored.as_deref() {
        None => GuardState::default(),
        Some(text) => GuardState::from_json(text).unwrap_or_else(|| {
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
    let reply_to = message.reply_to.as_ref().map(|r| ReplyTo {
        // `room/nick` or a bare nick: a room's JID has no `/`.
        nick: r
            .to
            .as_deref()
            .map(|to| to.split_once('/').map_or(to, |(_, nick)| nick)),
        id: r.id.as_deref(),
    });
    let room_message = RoomMessage {
        nick,
        jid: message.jid.as_deref(),
        body: &message.body,
        delayed: message.delayed,
        human_origin: message.human_origin,
        stanza_id: message.stanza_id.as_deref(),
        reply_to,
        caught_up: message.caught_up,
    };
    let before = state.clone();
    let mut admission = admit(settings, receiver, &room_message, &mut state, now);
    if malformed {
        admission.detail.push_str(&format!(
            " (the stored state {key} was not valid: read as {} hops)",
            guard.max_hops
        ));
    }
    if malformed || state != before {
        host.meta_set(&key, &state.to_json_within(MAX_META_VALUE_BYTES))?;
    }
    Ok(admission)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod meeting_tests;
