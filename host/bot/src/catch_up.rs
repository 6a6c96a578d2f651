//! Catching up on what the room said while the bot was away, as stanzas:
//! the room's `disco#info` (does it archive, `urn:xmpp:mam:2`?), the
//! archive query for what came after the cursor (XEP-0313 from the
//! cursor's time, the last page of XEP-0059, so the newest lines win),
//! and the join that asks for the history since the cursor's time where
//! the room keeps no archive (XEP-0045 §7.2.15). Messages the bot decided
//! before are recognised by the decision thread (`cursor.rs`). Pure
//! functions over xmpp-parsers types, no connection; the steps between
//! them are `rejoin.rs`'s.

use crate::room::{self, Incoming, RoomEvent};
use std::collections::HashMap;
use tokio_xmpp::jid::{BareJid, Jid};
use tokio_xmpp::parsers::data_forms::{DataForm, DataFormType, Field};
use tokio_xmpp::parsers::date::DateTime;
use tokio_xmpp::parsers::disco::{DiscoInfoQuery, DiscoInfoResult};
use tokio_xmpp::parsers::iq::Iq;
use tokio_xmpp::parsers::mam::{Fin, Query, QueryId, Result_};
use tokio_xmpp::parsers::message::Message;
use tokio_xmpp::parsers::muc::Muc;
use tokio_xmpp::parsers::muc::muc::History;
use tokio_xmpp::parsers::presence::Presence;
use tokio_xmpp::parsers::rsm::SetQuery;

/// The feature a room that archives lists (XEP-0313).
pub const NS_MAM: &str = "urn:xmpp:mam:2";

/// The room's `disco#info` request.
pub fn disco_info(room: &BareJid, id: &str) -> Iq {
    Iq::from_get(id, DiscoInfoQuery { node: None }).with_to(Jid::from(room.clone()))
}

/// Whether `iq` answers the `disco#info` request `id`, and then whether
/// the room archives: `Some(false)` for an error (the bot uses the
/// history instead).
pub fn archives(iq: &Iq, id: &str) -> Option<bool> {
    match iq {
        Iq::Result {
            id: got,
            payload: Some(payload),
            ..
        } if got == id => Some(
            DiscoInfoResult::try_from(payload.clone())
                .is_ok_and(|info| info.features.contains(NS_MAM)),
        ),
        Iq::Result { id: got, .. } | Iq::Error { id: got, .. } if got == id => Some(false),
        _ => None,
    }
}

/// The join presence asking for at most `max` messages of the history
/// since `since` (Unix seconds).
pub fn join_since(room: &BareJid, nick: &str, since: f64, max: u32) -> Result<Presence, String> {
    let to = room
        .with_resource_str(nick)
        .map_err(|e| format!("the nick {nick:?} cannot be a JID resource: {e}"))?;
    let history = History {
        since: Some(date(since)?),
        maxstanzas: Some(max),
        ..History::new()
    };
    Ok(Presence::available()
        .with_to(to)
        .with_payload(Muc::new().with_history(history)))
}

/// The archive query `id` for the latest `max` messages from the time
/// `start` (the last page, XEP-0059 `<before/>`), oldest first.
pub fn archive_query(room: &BareJid, id: &str, start: f64, max: usize) -> Result<Iq, String> {
    let start = date(start)?;
    let fields = vec![Field::text_single("start", &start_text(&start))];
    let query = Query {
        queryid: Some(QueryId(id.to_owned())),
        node: None,
        form: Some(DataForm::new(DataFormType::Submit, NS_MAM, fields)),
        set: Some(SetQuery {
            max: Some(max),
            after: None,
            before: Some(String::new()),
            index: None,
        }),
        flip_page: false,
    };
    Ok(Iq::from_set(id, query).with_to(Jid::from(room.clone())))
}

fn start_text(date: &DateTime) -> String {
    date.format("%Y-%m-%dT%H:%M:%S%.6fZ")
}

fn date(unix: f64) -> Result<DateTime, String> {
    let micros = (unix * 1e6).round() as i64;
    chrono::DateTime::from_timestamp_micros(micros)
        .map(|t| DateTime(t.fixed_offset()))
        .ok_or_else(|| format!("{unix} is not a time"))
}

/// The archived room message `m` carries for the query `id`, as the bot
/// decides on it: caught up, its time the archive's, its stanza-id the
/// archive's id. `None` for anything else.
pub fn archived(
    m: &Message,
    id: &str,
    room: &BareJid,
    jids: &HashMap<String, String>,
) -> Option<Incoming> {
    let result = m
        .payloads
        .iter()
        .filter(|p| p.is("result", NS_MAM))
        .find_map(|p| Result_::try_from(p.clone()).ok())?;
    if result.queryid.as_ref().map(|q| q.0.as_str()) != Some(id) {
        return None;
    }
    let at = result.forwarded.delay.as_ref().map(|d| {
        let t = d.stamp.0;
        t.timestamp() as f64 + f64::from(t.timestamp_subsec_micros()) / 1e6
    });
    let RoomEvent::Message(mut incoming) = room::message(result.forwarded.message, room, jids)
    else {
        return None;
    };
    incoming.dedupe_key = Some(format!("stanza-id:{}", result.id));
    incoming.stanza_id = Some(result.id);
    incoming.delayed = false;
    incoming.caught_up = true;
    if let Some(at) = at {
        incoming.at = at;
    }
    Some(incoming)
}

/// Whether `iq` ends the archive query `id`: `Ok(count)`, how many
/// messages the archive holds past the start (where it says), or the
/// error's condition.
pub fn finished(iq: &Iq, id: &str) -> Option<Result<Option<usize>, String>> {
    match iq {
        Iq::Result {
            id: got, payload, ..
        } if got == id => Some(Ok(payload
            .as_ref()
            .and_then(|p| Fin::try_from(p.clone()).ok())
            .and_then(|fin| fin.set.count))),
        Iq::Error { id: got, error, .. } if got == id => {
            Some(Err(format!("{:?}", error.defined_condition)))
        }
        _ => None,
    }
}
