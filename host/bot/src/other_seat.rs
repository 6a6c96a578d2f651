//! Another seat of the agent in the room: a bot of the same agent on
//! another machine (another resource), found in the occupants' presences
//! at the join, then pinged (XEP-0199) to tell a live bot from a stale
//! seat.
//!
//! ejabberd lets sessions of one account share a nick and shows, for that
//! nick, the session whose presence has the highest priority (the newest
//! among equals). So the bot joins with priority -1 ([`JOIN_PRIORITY`]):
//! a seat already there, at priority 0, stays the one the room shows, and
//! the join's presences name its full JID; after the check the bot takes
//! priority 0 like the seats before it.

use std::collections::BTreeSet;
use tokio_xmpp::jid::{BareJid, FullJid, Jid};
use tokio_xmpp::minidom::Element;
use tokio_xmpp::parsers::muc::user::{MucUser, Status};
use tokio_xmpp::parsers::presence::{Presence, Type as PresenceType};

const NS_MUC_USER: &str = "http://jabber.org/protocol/muc#user";

/// The priority of the join presence, below the 0 of a seated bot.
pub const JOIN_PRIORITY: i8 = -1;

/// What the room's presences showed before the bot's own seat was
/// confirmed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct JoinView {
    /// Other full JIDs of the agent's account seated in the room.
    pub others: BTreeSet<FullJid>,
    /// The room said it shows real JIDs (status 100 on the bot's own
    /// join); `false` in a semi-anonymous room.
    pub non_anonymous: bool,
}

impl JoinView {
    /// Note what `presence` shows, for the bot bound as `own`.
    pub fn note(&mut self, presence: &Presence, room: &BareJid, own: &FullJid) {
        if presence.type_ != PresenceType::None
            || presence.from.as_ref().is_none_or(|f| f.to_bare() != *room)
        {
            return;
        }
        let Some(user) = muc_user(presence) else {
            return;
        };
        if user.status.contains(&Status::NonAnonymousRoom) {
            self.non_anonymous = true;
        }
        for jid in user.items.iter().filter_map(|i| i.jid.as_ref()) {
            if jid.to_bare() == own.to_bare() && jid != own {
                self.others.insert(jid.clone());
            }
        }
    }
}

/// Whether `presence`, from the bot's own occupant JID `room/nick`, is
/// about another session of the account bound as `own` (its real JID
/// another resource, no status 110): a seat sharing the bot's nick, whose
/// presences must not move the bot's own seat.
pub fn is_other_seat(presence: &Presence, room: &BareJid, nick: &str, own: &FullJid) -> bool {
    let ours = presence
        .from
        .as_ref()
        .is_some_and(|f| f.to_bare() == *room && f.resource().is_some_and(|r| r.as_str() == nick));
    if !ours {
        return false;
    }
    let Some(user) = muc_user(presence) else {
        return false;
    };
    !user.status.contains(&Status::SelfPresence)
        && user
            .items
            .iter()
            .filter_map(|i| i.jid.as_ref())
            .any(|jid| jid.to_bare() == own.to_bare() && jid != own)
}

fn muc_user(presence: &Presence) -> Option<MucUser> {
    presence
        .payloads
        .iter()
        .find(|e| e.is("x", NS_MUC_USER))
        .and_then(|e| MucUser::try_from(e.clone()).ok())
}

/// The presence that raises the bot's seat to priority 0 once the check
/// is done (no MUC payload: a change of presence, not a join).
pub fn seated(occupant: FullJid) -> Presence {
    Presence::available()
        .with_to(Jid::from(occupant))
        .with_priority(0)
}

/// The ping (XEP-0199) payload.
pub fn ping() -> Element {
    tokio_xmpp::parsers::ping::Ping.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn presence(xml: &str) -> Presence {
        Presence::try_from(xml.parse::<Element>().unwrap()).unwrap()
    }

    #[test]
    fn another_resource_of_the_account_is_noted_and_the_own_seat_is_not() {
        let room = BareJid::new("coregroup@conference.example.org").unwrap();
        let own = FullJid::new("mohe@example.org/session-switch-bot-b").unwrap();
        let mut view = JoinView::default();
        // The seat already there, as the join's presences show it.
        view.note(
            &presence(
                "<presence xmlns='jabber:client' from='coregroup@conference.example.org/mohe'>\
                 <x xmlns='http://jabber.org/protocol/muc#user'><item affiliation='member' \
                 role='participant' jid='mohe@example.org/session-switch-bot-a'/></x></presence>",
            ),
            &room,
            &own,
        );
        // Another agent, and the bot's own seat with status 100.
        for xml in [
            "<presence xmlns='jabber:client' from='coregroup@conference.example.org/zhiwei'>\
             <x xmlns='http://jabber.org/protocol/muc#user'><item affiliation='member' \
             role='participant' jid='zhiwei@example.org/session-switch-bot-a'/></x></presence>",
            "<presence xmlns='jabber:client' from='coregroup@conference.example.org/mohe'>\
             <x xmlns='http://jabber.org/protocol/muc#user'><item affiliation='member' \
             role='participant' jid='mohe@example.org/session-switch-bot-b'/>\
             <status code='100'/><status code='110'/></x></presence>",
        ] {
            view.note(&presence(xml), &room, &own);
        }
        assert!(view.non_anonymous);
        assert_eq!(
            view.others
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            vec!["mohe@example.org/session-switch-bot-a"]
        );
        // A semi-anonymous room shows no JIDs and no status 100.
        let mut view = JoinView::default();
        view.note(
            &presence(
                "<presence xmlns='jabber:client' from='coregroup@conference.example.org/mohe'>\
                 <x xmlns='http://jabber.org/protocol/muc#user'><item affiliation='member' \
                 role='participant'/><status code='110'/></x></presence>",
            ),
            &room,
            &own,
        );
        assert_eq!(view, JoinView::default());
    }

    #[test]
    fn a_presence_of_another_session_sharing_the_nick_is_not_the_bots_own() {
        let room = BareJid::new("coregroup@conference.example.org").unwrap();
        let own = FullJid::new("mohe@example.org/session-switch-bot-b").unwrap();
        let other = presence(
            "<presence xmlns='jabber:client' type='unavailable' \
             from='coregroup@conference.example.org/mohe'>\
             <x xmlns='http://jabber.org/protocol/muc#user'><item affiliation='member' \
             role='none' jid='mohe@example.org/session-switch-bot-a'/></x></presence>",
        );
        assert!(is_other_seat(&other, &room, "mohe", &own));
        // The bot's own seat, even where ejabberd names the other session's
        // JID in it (status 110 says whose it is).
        let own_seat = presence(
            "<presence xmlns='jabber:client' from='coregroup@conference.example.org/mohe'>\
             <x xmlns='http://jabber.org/protocol/muc#user'><item affiliation='member' \
             role='participant' jid='mohe@example.org/session-switch-bot-a'/>\
             <status code='110'/></x></presence>",
        );
        assert!(!is_other_seat(&own_seat, &room, "mohe", &own));
        let zhiwei = presence(
            "<presence xmlns='jabber:client' from='coregroup@conference.example.org/zhiwei'>\
             <x xmlns='http://jabber.org/protocol/muc#user'><item affiliation='member' \
             role='participant' jid='zhiwei@example.org/session-switch-bot-a'/></x></presence>",
        );
        assert!(!is_other_seat(&zhiwei, &room, "mohe", &own));
        // The account under another nick (a person's client) is an
        // occupant like any other.
        let phone = presence(
            "<presence xmlns='jabber:client' from='coregroup@conference.example.org/mohe-phone'>\
             <x xmlns='http://jabber.org/protocol/muc#user'><item affiliation='member' \
             role='participant' jid='mohe@example.org/phone'/></x></presence>",
        );
        assert!(!is_other_seat(&phone, &room, "mohe", &own));
    }

    #[test]
    fn the_seat_is_raised_to_priority_zero_and_the_ping_is_xep_0199() {
        let occupant = FullJid::new("coregroup@conference.example.org/mohe").unwrap();
        let xml = String::from(&Element::from(seated(occupant)));
        assert!(!xml.contains("muc"), "{xml}");
        assert!(
            xml.contains("coregroup@conference.example.org/mohe"),
            "{xml}"
        );
        assert!(ping().is("ping", "urn:xmpp:ping"));
    }
}
