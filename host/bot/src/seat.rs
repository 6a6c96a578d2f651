//! The bot's seat in the room: whether it is in, when to join again after
//! a kick or a refused join (a doubling pause), who is there, and at the
//! first join the check for another bot of the agent ([`crate::other_seat`]),
//! pinging each other seat of its account.

use crate::connect::send;
use crate::other_seat::{self, JoinView};
use crate::room::{self, Incoming, RoomEvent};
use session_switch::{Failure, FailureKind};
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::{Instant, timeout};
use tokio_xmpp::jid::{BareJid, FullJid, Jid};
use tokio_xmpp::parsers::iq::Iq;
use tokio_xmpp::{Client, IqRequest, IqResponse, Stanza};

/// The first pause before rejoining after a kick or a refused join; it
/// doubles up to [`MAX_REJOIN_PAUSE`] and is reset by a join.
const FIRST_REJOIN_PAUSE: Duration = Duration::from_secs(1);
const MAX_REJOIN_PAUSE: Duration = Duration::from_secs(60);
/// How long another seat of the agent has to answer a ping (XEP-0199)
/// before it counts as stale.
const PING_LIMIT: Duration = Duration::from_secs(10);
const NS_PING: &str = "urn:xmpp:ping";

/// The room seat: whether the bot is in, when to try again, who is there.
pub(crate) struct Seat {
    pub(crate) room: BareJid,
    pub(crate) nick: String,
    pub(crate) joined: bool,
    pub(crate) rejoin_at: Option<Instant>,
    pause: Duration,
    pub(crate) jids: HashMap<String, String>,
    /// The agent's bare JID: the real JID of the bot's own seat where the
    /// room shows none.
    own_jid: String,
    connections: u32,
    /// The full JID the server bound for the current connection.
    pub(crate) bound: Option<FullJid>,
    /// What the presences showed since the join was sent.
    pub(crate) view: JoinView,
    /// The other-seat check ran (once per process, at the first join: the
    /// bot that joined later is the one that leaves).
    checked: bool,
}

impl Seat {
    pub(crate) fn new(room: BareJid, nick: String, own_jid: String) -> Self {
        Self {
            room,
            nick,
            own_jid,
            joined: false,
            rejoin_at: None,
            pause: FIRST_REJOIN_PAUSE,
            jids: HashMap::new(),
            connections: 0,
            bound: None,
            view: JoinView::default(),
            checked: false,
        }
    }

    pub(crate) async fn join(&mut self, client: &mut Client) {
        self.joining();
        match room::join(&self.room, &self.nick) {
            Ok(p) => {
                let p = p.with_priority(other_seat::JOIN_PRIORITY);
                send(client, p.into(), "the join").await;
            }
            Err(e) => tracing::error!("cannot join: {e}"),
        }
    }

    fn retry_later(&mut self, why: &str) {
        self.joined = false;
        tracing::warn!(
            "not in {} ({why}); rejoining in {} s",
            self.room,
            self.pause.as_secs()
        );
        self.rejoin_at = Some(Instant::now() + self.pause);
        self.pause = (self.pause * 2).min(MAX_REJOIN_PAUSE);
    }

    /// A new connection (never a resumed one): the room seat is gone.
    pub(crate) async fn online(&mut self, client: &mut Client, bound: &Jid) {
        self.connected(bound);
        self.join(client).await;
    }

    /// A join is about to be sent (by the seat or by the catch-up): no
    /// rejoin is due, and what the room shows of the join starts afresh.
    pub(crate) fn joining(&mut self) {
        self.rejoin_at = None;
        self.view = JoinView::default();
    }

    /// A new connection (never a resumed one): the room seat is gone; the
    /// join is the caller's.
    pub(crate) fn connected(&mut self, bound: &Jid) {
        self.connections += 1;
        self.joined = false;
        self.jids.clear();
        self.bound = bound.try_as_full().ok().cloned();
        if self.connections == 1 {
            tracing::info!(
                "connected as {bound}; joining {} as {}",
                self.room,
                self.nick
            );
        } else {
            tracing::warn!(
                "reconnected as {bound} (connection {}); rejoining {} as {}",
                self.connections,
                self.room,
                self.nick
            );
        }
    }

    /// Note what a room presence shows while the join is under way.
    pub(crate) fn note(&mut self, stanza: &Stanza) {
        if let (false, Some(bound), Stanza::Presence(p)) = (self.joined, &self.bound, stanza) {
            self.view.note(p, &self.room, bound);
        }
    }

    /// Whether `stanza` is a presence of another session of the agent's
    /// account seated under the same nick (ejabberd lets them share it):
    /// not the bot's own seat joining or leaving.
    pub(crate) fn other_seat(&self, stanza: &Stanza) -> bool {
        match (&self.bound, stanza) {
            (Some(bound), Stanza::Presence(p)) => {
                other_seat::is_other_seat(p, &self.room, &self.nick, bound)
            }
            _ => false,
        }
    }

    /// The room confirmed the seat: at the first join, look for another
    /// bot of the agent (ping each other seat of its account); then raise
    /// the seat to priority 0.
    ///
    /// Errors (kind `busy`): another seat answered the ping.
    pub(crate) async fn settle(&mut self, client: &mut Client, agent: &str) -> Result<(), Failure> {
        let view = std::mem::take(&mut self.view);
        let first = !self.checked;
        if first {
            self.checked = true;
            if !view.non_anonymous {
                tracing::warn!(
                    "{} does not show real JIDs (a semi-anonymous room): a bot of {agent} on \
                     another machine cannot be seen; not checked",
                    self.room
                );
            }
            for other in &view.others {
                match answers_ping(client, other).await {
                    Ok(()) => {
                        return Err(Failure::new(
                            FailureKind::Busy,
                            format!(
                                "another bot of {agent} is seated in {} as {other} (it answered \
                                 a ping): this one leaves; one bot per agent",
                                self.room
                            ),
                        ));
                    }
                    Err(why) => tracing::warn!(
                        "{other} holds a seat of {agent} in {} but did not answer a ping \
                         within {} s ({why}): taken for a stale seat; staying",
                        self.room,
                        PING_LIMIT.as_secs()
                    ),
                }
            }
        }
        if let Ok(occupant) = self.room.with_resource_str(&self.nick) {
            send(
                client,
                other_seat::seated(occupant).into(),
                "the seat's priority",
            )
            .await;
        }
        if first && view.non_anonymous && view.others.is_empty() {
            tracing::info!("no other bot of {agent} is seated in {}", self.room);
        }
        Ok(())
    }

    /// Update the seat from a room event; the live message, if any.
    pub(crate) fn event(&mut self, event: RoomEvent) -> Option<Incoming> {
        match event {
            RoomEvent::Joined { jid } => {
                // The bot's own reflection carries a CLI send's human-origin
                // marker, which the guard trusts only with an agent's real
                // JID (docs/src/design/loop-guard.md): the seat's JID is the agent's own.
                let jid = jid.unwrap_or_else(|| self.own_jid.clone());
                self.jids.insert(self.nick.clone(), jid);
                if !self.joined {
                    self.joined = true;
                    self.pause = FIRST_REJOIN_PAUSE;
                    self.rejoin_at = None;
                    tracing::info!(
                        "joined {} as {}: messages from here on are live",
                        self.room,
                        self.nick
                    );
                }
            }
            RoomEvent::Created => {
                tracing::error!(
                    "{} does not exist: joining it made the server create it, and the bot \
                     destroys that room again; check [xmpp] room in the config",
                    self.room
                );
                self.retry_later("no such room");
            }
            // The room's own unavailable presence for a seat the bot no
            // longer holds (the room its join created, destroyed): the
            // rejoin is scheduled already.
            RoomEvent::Left(why) if !self.joined && self.rejoin_at.is_some() => {
                tracing::debug!("{} ({why}): not seated, rejoin already set", self.room);
            }
            RoomEvent::Left(why) => self.retry_later(&why),
            RoomEvent::MessageRefused(why) => {
                tracing::warn!("{} refused the bot's message: {why}", self.room);
            }
            RoomEvent::JoinRefused(why) => self.retry_later(&format!("the room refused: {why}")),
            RoomEvent::Occupant {
                nick,
                jid: Some(jid),
            } => {
                self.jids.insert(nick, jid);
            }
            RoomEvent::Occupant { nick, jid: None } => {
                self.jids.remove(&nick);
            }
            RoomEvent::Message(m) if !self.joined => {
                // Before the room echoed the join, a message is history
                // (a server that ignores maxstanzas='0').
                tracing::debug!("{}'s message before the join echo: not answered", m.nick);
            }
            // A delayed message is history: the catch-up takes the history
            // it asked for and drops the rest.
            RoomEvent::Message(m) => return Some(m),
            _ => {}
        }
        None
    }
}

/// Whether `to` answers a ping (XEP-0199) within [`PING_LIMIT`]; else why
/// not.
async fn answers_ping(client: &mut Client, to: &FullJid) -> Result<(), String> {
    let token = client
        .send_iq(
            Some(Jid::from(to.clone())),
            IqRequest::Get(other_seat::ping()),
        )
        .await;
    match timeout(PING_LIMIT, token).await {
        Ok(Ok(IqResponse::Result(_))) => Ok(()),
        Ok(Ok(IqResponse::Error(e))) => Err(format!("error {:?}", e.defined_condition)),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no answer".into()),
    }
}

/// Answer a ping (XEP-0199) addressed to the bot: another bot of the agent
/// asks whether this seat is alive. `true` when `stanza` was one.
pub(crate) async fn answer_ping(client: &mut Client, stanza: &Stanza) -> bool {
    let Stanza::Iq(Iq::Get {
        from: Some(from),
        id,
        payload,
        ..
    }) = stanza
    else {
        return false;
    };
    if !payload.is("ping", NS_PING) {
        return false;
    }
    tracing::info!("answering {from}'s ping");
    let answer = Iq::empty_result(from.clone(), id.clone());
    send(client, answer.into(), "the ping's answer").await;
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(nick: &str, delayed: bool) -> RoomEvent {
        RoomEvent::Message(Incoming {
            occupant: format!("room@conference.example.org/{nick}"),
            nick: nick.into(),
            jid: None,
            body: "hi".into(),
            delayed,
            human_origin: false,
            stanza_id: None,
            reply_to: None,
            dedupe_key: None,
            caught_up: false,
            at: 0.0,
        })
    }

    #[test]
    fn only_live_messages_after_the_join_echo_are_handed_on() {
        let room = BareJid::new("room@conference.example.org").unwrap();
        let mut seat = Seat::new(room, "mohe".into(), "mohe@example.org".into());
        // A server that replays history despite maxstanzas='0' sends it
        // before the join echo, or marks it delayed.
        assert_eq!(seat.event(message("anna", false)), None);
        assert_eq!(seat.event(RoomEvent::Joined { jid: None }), None);
        // The bot's own seat has its JID, so its reflection's marker counts.
        assert_eq!(
            seat.jids.get("mohe").map(String::as_str),
            Some("mohe@example.org")
        );
        assert!(seat.event(message("anna", false)).is_some());
        // A kick: nothing is handed on until the seat is taken again, and
        // the pause doubles.
        assert_eq!(seat.event(RoomEvent::Left("kicked (307)".into())), None);
        assert!(seat.rejoin_at.is_some());
        assert_eq!(seat.pause, FIRST_REJOIN_PAUSE * 2);
        assert_eq!(seat.event(message("anna", false)), None);
        seat.event(RoomEvent::Joined { jid: None });
        assert_eq!(seat.pause, FIRST_REJOIN_PAUSE);
        assert!(seat.event(message("anna", false)).is_some());
        // A join that created the room: not seated, tried again later.
        assert_eq!(seat.event(RoomEvent::Created), None);
        assert!(!seat.joined && seat.rejoin_at.is_some());
    }
}
