//! The bot's life: connect as the agent, join the room, hand each live
//! message to the decision thread once, post its replies, rejoin when the
//! room or the server drops the bot, leave on SIGTERM or SIGINT.
//!
//! Reconnecting is tokio-xmpp's: after a lost connection it connects
//! again with a doubling pause (1 s up to 30 s) and logs each failed try;
//! every new connection is logged here and rejoins the room. A kick or a
//! refused join is retried here, also with a doubling pause (up to 60 s).
//! Before the client starts, the bot takes its agent's lock ([`crate::lock`])
//! and logs in once ([`crate::login`]): a second bot on this machine, a
//! refused login or an untrusted certificate end the process (exit 2). At
//! its first join it looks for its agent's seat from another machine
//! ([`crate::seats`]). `--once` is [`crate::check`].

use crate::decide::{Decider, Reply, UnderWay};
use crate::hermes::HermesClient;
use crate::room::{self, Incoming, RoomEvent};
use crate::seats::{self, JoinView};
use crate::seen::Seen;
use crate::settings::BotSettings;
use crate::tls::StartTls;
use crate::{lock, login, resource};
use futures::StreamExt;
use session_switch::config::BotTls;
use session_switch::{Bridge, Failure, FailureKind};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::{Instant, sleep_until, timeout};
use tokio_xmpp::connect::{DnsConfig, TcpServerConnector};
use tokio_xmpp::jid::{BareJid, FullJid, Jid};
use tokio_xmpp::parsers::iq::Iq;
use tokio_xmpp::xmlstream::Timeouts;
use tokio_xmpp::{Client, Event, IqRequest, IqResponse, Stanza};

/// The first pause before rejoining after a kick or a refused join; it
/// doubles up to [`MAX_REJOIN_PAUSE`] and is reset by a join.
const FIRST_REJOIN_PAUSE: Duration = Duration::from_secs(1);
const MAX_REJOIN_PAUSE: Duration = Duration::from_secs(60);
/// How long a stop waits for replies of turns already under way.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How long one stanza may wait to be written (the connection may be down
/// and reconnecting meanwhile).
const SEND_LIMIT: Duration = Duration::from_secs(30);
/// How long another seat of the agent has to answer a ping (XEP-0199)
/// before it counts as stale.
const PING_LIMIT: Duration = Duration::from_secs(10);
const NS_PING: &str = "urn:xmpp:ping";

/// Run `settings.agent`'s bot until SIGTERM or SIGINT. Returns `Ok` after
/// a graceful stop (left the room, stream closed).
///
/// Errors: another bot of the agent on this machine holds its lock, or
/// answered a ping from its seat in the room (kind `busy`); the server
/// refused the login (kind `not-accepted`, naming the SASL condition); a
/// JID or nick the XMPP library refuses, a `ca_file` that cannot be used,
/// a certificate the roots do not trust, no STARTTLS (kind `bad-input`); a
/// runtime that cannot start or signals that cannot be watched.
pub fn run(bridge: Arc<Bridge>, settings: BotSettings) -> Result<(), Failure> {
    let dir = lock::lock_dir(
        std::env::var("XDG_RUNTIME_DIR").ok().as_deref(),
        &session_switch::hermes_home(),
    );
    let held = lock::take(&lock::lock_path(&dir, &settings.jid), &settings.agent)?;
    tracing::info!(
        "holding {} (one bot of {} on this machine)",
        held.path.display(),
        settings.agent
    );
    let served = runtime()?.block_on(serve(bridge, settings));
    drop(held);
    served
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::transport(format!("cannot start the bot's runtime: {e}")))
}

pub(crate) fn room_jid(settings: &BotSettings) -> Result<BareJid, Failure> {
    BareJid::new(&settings.room)
        .map_err(|e| Failure::bad_input(format!("room {:?}: {e}", settings.room)))
}

/// How the bot reaches the server: the login probe and the client go the
/// same way.
pub(crate) enum Connector {
    Plain(TcpServerConnector),
    StartTls(StartTls),
}

impl Connector {
    /// Log in once (see [`login::probe`]).
    pub(crate) async fn probe(
        &self,
        jid: &Jid,
        password: &str,
        deadline: Option<Instant>,
    ) -> Result<(), Failure> {
        match self {
            Self::Plain(c) => login::probe(c, jid, password, deadline).await,
            Self::StartTls(c) => login::probe(c, jid, password, deadline).await,
        }
    }

    /// A client that connects (and reconnects) in the background.
    pub(crate) fn client(self, jid: Jid, password: String) -> Client {
        match self {
            Self::Plain(c) => Client::new_with_connector(jid, password, c, Timeouts::tight()),
            Self::StartTls(c) => Client::new_with_connector(jid, password, c, Timeouts::tight()),
        }
    }
}

/// The agent's JID, with `resource` when given (else the server picks one).
pub(crate) fn agent_jid(settings: &BotSettings, resource: Option<&str>) -> Result<Jid, Failure> {
    let bad =
        |e: &dyn std::fmt::Display| Failure::bad_input(format!("JID {:?}: {e}", settings.jid));
    let bare = BareJid::new(&settings.jid).map_err(|e| bad(&e))?;
    Ok(match resource {
        Some(r) => Jid::from(bare.with_resource_str(r).map_err(|e| bad(&e))?),
        None => Jid::from(bare),
    })
}

/// The connector `[bot] server`, `tls` and `ca_file` describe.
///
/// Errors (kind `bad-input`): a `ca_file` that cannot be used.
pub(crate) fn connector(settings: &BotSettings) -> Result<Connector, Failure> {
    let jid = BareJid::new(&settings.jid)
        .map_err(|e| Failure::bad_input(format!("JID {:?}: {e}", settings.jid)))?;
    let dns = match &settings.server {
        Some(server) => {
            let (host, port) = server.rsplit_once(':').unwrap_or((server, "5222"));
            let port = port.parse().unwrap_or(5222);
            DnsConfig::no_srv(host.trim_start_matches('[').trim_end_matches(']'), port)
        }
        None => DnsConfig::srv_default_client(jid.domain().as_str()),
    };
    Ok(match settings.tls {
        BotTls::Starttls => {
            // rustls needs one process-wide crypto provider; a second
            // install (another bot in the same process) is harmless.
            let _ = tokio_xmpp::rustls::crypto::ring::default_provider().install_default();
            let roots = crate::tls::roots(settings.ca_file.as_deref())?;
            Connector::StartTls(StartTls::new(dns, roots))
        }
        BotTls::InsecurePlaintext => Connector::Plain(TcpServerConnector::from(dns)),
    })
}

pub(crate) async fn send(client: &mut Client, stanza: Stanza, what: &str) -> bool {
    match timeout(SEND_LIMIT, client.send_stanza(stanza)).await {
        Ok(Ok(_)) => true,
        Ok(Err(e)) => {
            tracing::warn!("{what} not sent: {e}");
            false
        }
        Err(_) => {
            tracing::warn!(
                "{what} not sent within {} s (no connection)",
                SEND_LIMIT.as_secs()
            );
            false
        }
    }
}

/// The room seat: whether the bot is in, when to try again, who is there.
pub(crate) struct Seat {
    pub(crate) room: BareJid,
    pub(crate) nick: String,
    pub(crate) joined: bool,
    rejoin_at: Option<Instant>,
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

    async fn join(&mut self, client: &mut Client) {
        self.rejoin_at = None;
        self.view = JoinView::default();
        match room::join(&self.room, &self.nick) {
            Ok(p) => {
                let p = p.with_priority(seats::JOIN_PRIORITY);
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
        self.join(client).await;
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
                seats::is_other_seat(p, &self.room, &self.nick, bound)
            }
            _ => false,
        }
    }

    /// The room confirmed the seat: at the first join, look for another
    /// bot of the agent (ping each other seat of its account); then raise
    /// the seat to priority 0.
    ///
    /// Errors (kind `busy`): another seat answered the ping.
    async fn settle(&mut self, client: &mut Client, agent: &str) -> Result<(), Failure> {
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
                seats::seated(occupant).into(),
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
                // JID (DESIGN §9.3): the seat's JID is the agent's own.
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
            RoomEvent::Message(m) if m.delayed => {
                tracing::debug!("{}'s delayed message (history): not answered", m.nick);
            }
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
        .send_iq(Some(Jid::from(to.clone())), IqRequest::Get(seats::ping()))
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
async fn answer_ping(client: &mut Client, stanza: &Stanza) -> bool {
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

fn start_log(settings: &BotSettings) {
    tracing::info!(
        "bot of {}: {} as {} in {}; Hermes API server {} ({})",
        settings.agent,
        settings.jid,
        settings.nick,
        settings.room,
        settings.api_url,
        settings.api_source
    );
    if settings.api_key.is_none() {
        tracing::warn!(
            "no API server key (API_SERVER_KEY in Hermes's .env, or [bot.agents.{}] \
             api_key_env): Hermes refuses a turn in a named session without one",
            settings.agent
        );
    }
    if settings.tls == BotTls::InsecurePlaintext {
        tracing::warn!(
            "[bot] tls = \"insecure-plaintext\": the password and the messages cross the \
             network unencrypted (meant for a server on loopback)"
        );
    }
}

async fn serve(bridge: Arc<Bridge>, settings: BotSettings) -> Result<(), Failure> {
    start_log(&settings);
    let mut seat = Seat::new(
        room_jid(&settings)?,
        settings.nick.clone(),
        settings.jid.clone(),
    );
    let watch = |kind, name| {
        signal(kind).map_err(|e| Failure::transport(format!("cannot watch {name}: {e}")))
    };
    let mut term = watch(SignalKind::terminate(), "SIGTERM")?;
    let mut int = watch(SignalKind::interrupt(), "SIGINT")?;
    let connector = connector(&settings)?;
    let jid = agent_jid(&settings, Some(&resource::resource()))?;
    tokio::select! {
        probed = connector.probe(&jid, &settings.password, None) => probed?,
        _ = term.recv() => {
            tracing::info!("SIGTERM before the login: stopping");
            return Ok(());
        }
        _ = int.recv() => {
            tracing::info!("SIGINT before the login: stopping");
            return Ok(());
        }
    }
    let mut client = connector.client(jid, settings.password.clone());
    let hermes = HermesClient::new(
        &settings.api_url,
        settings.api_key.as_deref(),
        settings.turn_timeout,
    );
    let (inbox, inbox_rx) = std::sync::mpsc::channel::<Incoming>();
    let (replies_tx, mut replies) = tokio::sync::mpsc::unbounded_channel::<Reply>();
    let under_way = UnderWay::default();
    let decider = Decider::new(bridge, hermes, settings.clone(), under_way.clone());
    std::thread::Builder::new()
        .name(format!("bot-{}", settings.agent))
        .spawn(move || decider.run(inbox_rx, replies_tx))
        .map_err(|e| Failure::transport(format!("cannot start the decision thread: {e}")))?;
    let mut seen = Seen::default();
    let mut sent = 0u64;
    let far = Instant::now() + Duration::from_secs(86_400 * 365);
    loop {
        tokio::select! {
            _ = term.recv() => {
                tracing::info!("SIGTERM: stopping");
                break;
            }
            _ = int.recv() => {
                tracing::info!("SIGINT: stopping");
                break;
            }
            _ = sleep_until(seat.rejoin_at.unwrap_or(far)), if seat.rejoin_at.is_some() => {
                seat.join(&mut client).await;
            }
            Some(reply) = replies.recv() => {
                sent += 1;
                post(&mut client, &seat, &settings, reply, sent).await;
            }
            event = client.next() => match event {
                None => return Err(Failure::transport("the XMPP client ended by itself")),
                Some(Event::Online { bound_jid, resumed: false, .. }) => {
                    seat.online(&mut client, &bound_jid).await;
                }
                Some(Event::Online { resumed: true, .. }) => {
                    tracing::info!("connection resumed; still in {}", seat.room);
                }
                Some(Event::Disconnected(e)) => tracing::warn!("disconnected: {e}"),
                Some(Event::Stanza(stanza)) => {
                    if answer_ping(&mut client, &stanza).await {
                        continue;
                    }
                    seat.note(&stanza);
                    if seat.other_seat(&stanza) {
                        continue;
                    }
                    let event = room::classify(stanza, &seat.room, &seat.nick, &seat.jids);
                    if event == RoomEvent::Created {
                        undo_creation(&mut client, &seat.room).await;
                    }
                    let was_joined = seat.joined;
                    let incoming = seat.event(event);
                    if !was_joined
                        && seat.joined
                        && let Err(busy) = seat.settle(&mut client, &settings.agent).await
                    {
                        leave(&mut client, &seat).await;
                        let _ = timeout(Duration::from_secs(5), client.send_end()).await;
                        return Err(busy);
                    }
                    if let Some(m) = incoming {
                        if let Some(key) = &m.dedupe_key
                            && !seen.first_time(key)
                        {
                            tracing::info!(
                                "{}'s message {key} delivered again: already decided",
                                m.nick
                            );
                            continue;
                        }
                        if inbox.send(m).is_err() {
                            return Err(Failure::transport("the decision thread ended"));
                        }
                    }
                }
            },
        }
    }
    // Turns under way may still answer: post what comes within the grace.
    drop(inbox);
    let deadline = Instant::now() + STOP_GRACE;
    while let Ok(Some(reply)) = tokio::time::timeout_at(deadline, replies.recv()).await {
        sent += 1;
        post(&mut client, &seat, &settings, reply, sent).await;
    }
    if let Some(turn) = under_way.get() {
        tracing::warn!(
            "stopping with a turn still running in Hermes after {} s: {turn} will not reach \
             the room (Hermes stores it in the session)",
            STOP_GRACE.as_secs()
        );
    }
    leave(&mut client, &seat).await;
    let _ = timeout(Duration::from_secs(5), client.send_end()).await;
    tracing::info!("stopped");
    Ok(())
}

async fn leave(client: &mut Client, seat: &Seat) {
    if seat.joined
        && let Ok(p) = room::leave(&seat.room, &seat.nick)
    {
        send(client, p.into(), "the leave").await;
    }
}

/// Destroy the room the bot's join created (the configured room did not
/// exist): a room nobody meant stays otherwise, and a later `send` to the
/// name would find it.
pub(crate) async fn undo_creation(client: &mut Client, room: &BareJid) {
    let id = format!("ssw-destroy-{}", std::process::id());
    send(
        client,
        room::destroy(room, &id).into(),
        "the room's destruction",
    )
    .await;
}

async fn post(client: &mut Client, seat: &Seat, settings: &BotSettings, reply: Reply, n: u64) {
    let id = format!("ssw-bot-{}-{}-{n}", settings.agent, std::process::id());
    let message = room::reply(&seat.room, &reply.body, &id);
    if send(client, message.into(), "the reply").await {
        tracing::info!(
            "replied to {} from session {} ({} characters)",
            reply.to_nick,
            reply.session,
            reply.body.chars().count()
        );
    }
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
            dedupe_key: None,
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
        assert_eq!(seat.event(message("anna", true)), None);
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
