//! The room as stanzas: the join (XEP-0045 with a history request of 0),
//! the leave, the bot's reply, and what an incoming stanza means to the
//! bot. Pure functions over xmpp-parsers types, no connection.

use session_switch::origin::{HUMAN_ORIGIN_ELEMENT, HUMAN_ORIGIN_NS, ORIGIN_ID_NS};
use session_switch::runtime::unix_now;
use std::collections::HashMap;
use tokio_xmpp::Stanza;
use tokio_xmpp::jid::{BareJid, FullJid, Jid};
use tokio_xmpp::minidom::Element;
use tokio_xmpp::parsers::date::DateTime;
use tokio_xmpp::parsers::iq::Iq;
use tokio_xmpp::parsers::message::{Id, Lang, Message, MessageType};
use tokio_xmpp::parsers::muc::Muc;
use tokio_xmpp::parsers::muc::muc::History;
use tokio_xmpp::parsers::muc::user::{MucUser, Status};
use tokio_xmpp::parsers::presence::{Presence, Type as PresenceType};
use tokio_xmpp::parsers::stanza_id::OriginId;

const NS_DELAY: &str = "urn:xmpp:delay";
const NS_REPLY: &str = "urn:xmpp:reply:0";
const NS_FALLBACK: &str = "urn:xmpp:fallback:0";
const NS_MUC_USER: &str = "http://jabber.org/protocol/muc#user";
const NS_MUC_OWNER: &str = "http://jabber.org/protocol/muc#owner";

/// One groupchat message of the room, as the bot decides on it.
#[derive(Clone, Debug, PartialEq)]
pub struct Incoming {
    /// The sender's occupant JID `room/nick`.
    pub occupant: String,
    /// The sender's nick (as the room shows it).
    pub nick: String,
    /// The sender's real bare JID, where the room exposes it (learnt from
    /// the occupant's presence: a non-anonymous room).
    pub jid: Option<String>,
    pub body: String,
    /// XEP-0203 delayed delivery: history the room replays.
    pub delayed: bool,
    /// The human-origin marker of a person's send (docs/src/design/loop-guard.md).
    pub human_origin: bool,
    /// The room's XEP-0359 `<stanza-id by='room'/>`.
    pub stanza_id: Option<String>,
    /// XEP-0461: the message it replies to, `(to, id)` (`body` is without
    /// the quoted fallback).
    pub reply_to: Option<(Option<String>, Option<String>)>,
    /// What identifies the message across reconnects: the room's XEP-0359
    /// `<stanza-id by='room'/>`, else the sender's `<origin-id/>`, else the
    /// stanza `id` (each prefixed with its kind and the sender).
    pub dedupe_key: Option<String>,
    /// Said while the bot was away: caught up from the room's archive or
    /// its history after a restart or a reconnect.
    pub caught_up: bool,
    /// When the room got it (Unix seconds): its XEP-0203 delay stamp, else
    /// the time the bot received it.
    pub at: f64,
}

/// What one stanza means to the bot.
#[derive(Debug, PartialEq)]
pub enum RoomEvent {
    /// A groupchat message with a body from an occupant.
    Message(Incoming),
    /// The room's echo of the bot's own join presence (status 110): from
    /// here on, messages are live. `jid`: the real bare JID the room shows
    /// for the bot's seat, where it shows one.
    Joined { jid: Option<String> },
    /// The bot's own join presence says the room was just created for it
    /// (status 201, XEP-0045 §10.1): the configured room did not exist.
    Created,
    /// The bot is no longer in the room: kicked, banned, the room
    /// destroyed or the service shutting down (the reason, for the log).
    Left(String),
    /// The room refused the join (the error condition, for the log).
    JoinRefused(String),
    /// The room refused a message the bot posted (the error condition).
    MessageRefused(String),
    /// Another occupant's presence: its real JID when shown, `None` when
    /// it left.
    Occupant { nick: String, jid: Option<String> },
    /// Anything else (a subject, MUC/Sub events, chat messages, IQs).
    Other,
}

/// The join presence: to `room/nick`, asking for no history (XEP-0045
/// §7.2.15, `maxstanzas='0'`).
pub fn join(room: &BareJid, nick: &str) -> Result<Presence, String> {
    let to = occupant(room, nick)?;
    Ok(Presence::available()
        .with_to(to)
        .with_payload(Muc::new().with_history(History::new().with_maxstanzas(0))))
}

/// The leave presence.
pub fn leave(room: &BareJid, nick: &str) -> Result<Presence, String> {
    Ok(Presence::unavailable().with_to(occupant(room, nick)?))
}

/// The bot's reply: a groupchat message to the room with `id` as its
/// stanza id and XEP-0359 `<origin-id/>`, and no human-origin marker — it
/// is an agent's message, which the other bots count as a hop (docs/src/design/loop-guard.md).
pub fn reply(room: &BareJid, body: &str, id: &str) -> Message {
    let mut message = Message::groupchat(Some(Jid::from(room.clone())));
    message.id = Some(Id(id.to_owned()));
    message.bodies.insert(Lang::default(), body.to_owned());
    message.payloads.push(OriginId { id: id.to_owned() }.into());
    message
}

/// The owner's request to destroy `room` (XEP-0045 §10.9), for a room the
/// bot's join created by mistake.
pub fn destroy(room: &BareJid, id: &str) -> Iq {
    let query = Element::builder("query", NS_MUC_OWNER)
        .append(Element::builder("destroy", NS_MUC_OWNER).build())
        .build();
    Iq::Set {
        from: None,
        to: Some(Jid::from(room.clone())),
        id: id.to_owned(),
        payload: query,
    }
}

/// `room/nick` as a full JID.
fn occupant(room: &BareJid, nick: &str) -> Result<FullJid, String> {
    room.with_resource_str(nick)
        .map_err(|e| format!("the nick {nick:?} cannot be a JID resource: {e}"))
}

/// What `stanza` means for the bot seated as `nick` in `room`; `jids`:
/// the real JIDs the room showed per nick (kept by the caller from
/// [`RoomEvent::Occupant`]).
pub fn classify(
    stanza: Stanza,
    room: &BareJid,
    nick: &str,
    jids: &HashMap<String, String>,
) -> RoomEvent {
    match stanza {
        Stanza::Message(m) => message(m, room, jids),
        Stanza::Presence(p) => presence(p, room, nick),
        Stanza::Iq(_) => RoomEvent::Other,
    }
}

fn from_room(from: Option<&Jid>, room: &BareJid) -> Option<String> {
    let from = from?;
    if from.to_bare() != *room {
        return None;
    }
    from.resource().map(|r| r.as_str().to_owned())
}

pub(crate) fn message(m: Message, room: &BareJid, jids: &HashMap<String, String>) -> RoomEvent {
    if m.type_ == MessageType::Error && m.from.as_ref().is_some_and(|f| f.to_bare() == *room) {
        return RoomEvent::MessageRefused(error_condition(&m.payloads));
    }
    if m.type_ != MessageType::Groupchat {
        return RoomEvent::Other;
    }
    let Some(sender) = from_room(m.from.as_ref(), room) else {
        return RoomEvent::Other;
    };
    let Some((_, body)) = m.get_best_body(vec![]) else {
        return RoomEvent::Other;
    };
    let reply_to = m
        .payloads
        .iter()
        .find(|p| p.is("reply", NS_REPLY))
        .map(|r| {
            (
                r.attr("to").map(str::to_owned),
                r.attr("id").map(str::to_owned),
            )
        });
    let body = if reply_to.is_some() {
        without_fallback(body, &m.payloads)
    } else {
        body.clone()
    };
    let has = |name: &str, ns: &str| m.payloads.iter().any(|p| p.is(name, ns));
    let attr_of = |name: &str, ns: &str, by: Option<&str>| {
        m.payloads
            .iter()
            .filter(|p| p.is(name, ns))
            .filter(|p| {
                by.is_none_or(|by| p.attr("by").is_some_and(|b| b.eq_ignore_ascii_case(by)))
            })
            .find_map(|p| p.attr("id").map(str::to_owned))
    };
    let room_text = room.to_string();
    let stanza_id = attr_of("stanza-id", ORIGIN_ID_NS, Some(&room_text));
    let dedupe_key = stanza_id
        .as_ref()
        .map(|id| format!("stanza-id:{id}"))
        .or_else(|| {
            attr_of("origin-id", ORIGIN_ID_NS, None).map(|id| format!("origin-id:{sender}:{id}"))
        })
        .or_else(|| m.id.as_ref().map(|id| format!("id:{sender}:{}", id.0)));
    RoomEvent::Message(Incoming {
        occupant: format!("{room}/{sender}"),
        jid: jids.get(&sender).cloned(),
        nick: sender,
        body,
        delayed: has("delay", NS_DELAY),
        human_origin: has(HUMAN_ORIGIN_ELEMENT, HUMAN_ORIGIN_NS),
        stanza_id,
        reply_to,
        dedupe_key,
        caught_up: false,
        at: delay_stamp(&m.payloads).unwrap_or_else(unix_now),
    })
}

/// The XEP-0203 `<delay stamp=…/>` of a message, as Unix seconds.
pub fn delay_stamp(payloads: &[Element]) -> Option<f64> {
    let delay = payloads.iter().find(|p| p.is("delay", NS_DELAY))?;
    let stamp = delay.attr("stamp")?.parse::<DateTime>().ok()?;
    let t = stamp.0;
    Some(t.timestamp() as f64 + f64::from(t.timestamp_subsec_micros()) / 1e6)
}

/// A reply's body without the quote its client put in front for clients
/// that know no replies (XEP-0428 `<fallback for='urn:xmpp:reply:0'>`,
/// ranges in characters): a quoted `@mohe` must not address mohe. A
/// fallback with no range is the whole body.
fn without_fallback(body: &str, payloads: &[Element]) -> String {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for fallback in payloads
        .iter()
        .filter(|p| p.is("fallback", NS_FALLBACK) && p.attr("for") == Some(NS_REPLY))
    {
        let mut bodies = fallback
            .children()
            .filter(|c| c.name() == "body")
            .peekable();
        if bodies.peek().is_none() {
            return String::new();
        }
        for b in bodies {
            let at = |name| b.attr(name).and_then(|v| v.parse::<usize>().ok());
            if let (Some(start), Some(end)) = (at("start"), at("end"))
                && start < end
            {
                ranges.push((start, end));
            }
        }
    }
    body.chars()
        .enumerate()
        .filter(|(i, _)| !ranges.iter().any(|&(start, end)| (start..end).contains(i)))
        .map(|(_, c)| c)
        .collect()
}

fn presence(p: Presence, room: &BareJid, nick: &str) -> RoomEvent {
    let Some(sender) = from_room(p.from.as_ref(), room) else {
        return RoomEvent::Other;
    };
    let user = p
        .payloads
        .iter()
        .find(|e| e.is("x", NS_MUC_USER))
        .and_then(|e| MucUser::try_from(e.clone()).ok());
    let statuses = user
        .as_ref()
        .map(|u| u.status.as_slice())
        .unwrap_or_default();
    let own = sender == nick || statuses.contains(&Status::SelfPresence);
    let created = statuses.contains(&Status::RoomHasBeenCreated);
    let jid = || {
        user.as_ref()
            .and_then(|u| u.items.iter().find_map(|i| i.jid.as_ref()))
            .map(|j| j.to_bare().to_string())
    };
    match p.type_ {
        PresenceType::Error if own => RoomEvent::JoinRefused(error_condition(&p.payloads)),
        PresenceType::Unavailable if own => RoomEvent::Left(leave_reason(statuses)),
        PresenceType::None if own && created => RoomEvent::Created,
        PresenceType::None if own => RoomEvent::Joined { jid: jid() },
        PresenceType::Unavailable => RoomEvent::Occupant {
            nick: sender,
            jid: None,
        },
        PresenceType::None => RoomEvent::Occupant {
            jid: jid(),
            nick: sender,
        },
        _ => RoomEvent::Other,
    }
}

fn leave_reason(statuses: &[Status]) -> String {
    let reason = if statuses.contains(&Status::Kicked) {
        "kicked (307)"
    } else if statuses.contains(&Status::Banned) {
        "banned (301)"
    } else if statuses.contains(&Status::ServiceShutdown) {
        "the MUC service is shutting down (332)"
    } else if statuses.contains(&Status::RemovalFromRoom) {
        "removed from the room (321/322)"
    } else {
        "the room sent the bot's own unavailable presence"
    };
    reason.to_owned()
}

fn error_condition(payloads: &[Element]) -> String {
    payloads
        .iter()
        .find(|e| e.name() == "error")
        .and_then(|e| e.children().next().map(|c| c.name().to_owned()))
        .unwrap_or_else(|| "an error without a condition".into())
}

#[cfg(test)]
mod tests;
