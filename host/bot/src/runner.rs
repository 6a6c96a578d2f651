//! The bot's life: connect as the agent, join the room, hand each live
//! message to the decision thread once, post its replies, rejoin when the
//! room or the server drops the bot, leave on SIGTERM or SIGINT.
//!
//! Reconnecting is tokio-xmpp's: after a lost connection it connects
//! again with a doubling pause (1 s up to 30 s) and logs each failed try;
//! every new connection is logged here and rejoins the room. A kick or a
//! refused join is retried here, also with a doubling pause (up to 60 s).
//! `--once` is [`crate::check`].

use crate::decide::{Decider, Progress, Reply, UnderWay, cursor_of};
use crate::hermes::HermesClient;
use crate::room::{self, Incoming, RoomEvent};
use crate::seam::{Seam, Steps};
use crate::seen::Seen;
use crate::settings::BotSettings;
use futures::StreamExt;
use session_switch::config::BotTls;
use session_switch::{Bridge, Failure};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::{Instant, sleep, sleep_until, timeout};
use tokio_xmpp::connect::{DnsConfig, StartTlsServerConnector, TcpServerConnector};
use tokio_xmpp::jid::BareJid;
use tokio_xmpp::xmlstream::Timeouts;
use tokio_xmpp::{Client, Event, Stanza};

/// The first pause before rejoining after a kick or a refused join; it
/// doubles up to [`MAX_REJOIN_PAUSE`] and is reset by a join.
const FIRST_REJOIN_PAUSE: Duration = Duration::from_secs(1);
const MAX_REJOIN_PAUSE: Duration = Duration::from_secs(60);
/// How long a stop waits for replies of turns already under way.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How often a reply waiting for the decision thread to hear the messages
/// before it is looked at again.
const HELD_CHECK: Duration = Duration::from_millis(20);
/// How long one stanza may wait to be written (the connection may be down
/// and reconnecting meanwhile).
const SEND_LIMIT: Duration = Duration::from_secs(30);

/// Run `settings.agent`'s bot until SIGTERM or SIGINT. Returns `Ok` after
/// a graceful stop (left the room, stream closed).
///
/// Errors: a JID or nick the XMPP library refuses (kind `bad-input`); a
/// runtime that cannot start or signals that cannot be watched.
pub fn run(bridge: Arc<Bridge>, settings: BotSettings) -> Result<(), Failure> {
    runtime()?.block_on(serve(bridge, settings))
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

/// A client that connects (and reconnects) in the background.
pub(crate) fn connect(settings: &BotSettings) -> Result<Client, Failure> {
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
    let password = settings.password.clone();
    Ok(match settings.tls {
        BotTls::Starttls => {
            // rustls needs one process-wide crypto provider; a second
            // install (another bot in the same process) is harmless.
            let _ = tokio_xmpp::rustls::crypto::ring::default_provider().install_default();
            Client::new_with_connector(
                jid,
                password,
                StartTlsServerConnector::from(dns),
                Timeouts::tight(),
            )
        }
        BotTls::InsecurePlaintext => Client::new_with_connector(
            jid,
            password,
            TcpServerConnector::from(dns),
            Timeouts::tight(),
        ),
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
        }
    }

    async fn join(&mut self, client: &mut Client) {
        self.rejoin_at = None;
        match room::join(&self.room, &self.nick) {
            Ok(p) => {
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

    /// A new connection (never a resumed one): the room seat is gone; join.
    pub(crate) async fn online(&mut self, client: &mut Client, bound: &str) {
        self.connected(bound);
        self.join(client).await;
    }

    /// A new connection: the seat is gone, the join is the caller's.
    fn connected(&mut self, bound: &str) {
        self.connections += 1;
        self.joined = false;
        self.jids.clear();
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
            // A delayed message is history: the seam takes the history it
            // asked for and drops the rest.
            RoomEvent::Message(m) => return Some(m),
            _ => {}
        }
        None
    }
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
    let mut client = connect(&settings)?;
    let hermes = HermesClient::new(
        &settings.api_url,
        settings.api_key.as_deref(),
        settings.turn_timeout,
    );
    let (inbox, inbox_rx) = std::sync::mpsc::channel::<Incoming>();
    let (replies_tx, mut replies) = tokio::sync::mpsc::unbounded_channel::<Reply>();
    let under_way = UnderWay::default();
    let progress = Arc::new(Progress::default());
    let mut seam = Seam::new(
        seat.room.clone(),
        seat.nick.clone(),
        settings.catch_up_lines,
    );
    let decider = Decider::new(
        Arc::clone(&bridge),
        hermes,
        settings.clone(),
        under_way.clone(),
        Arc::clone(&progress),
    );
    std::thread::Builder::new()
        .name(format!("bot-{}", settings.agent))
        .spawn(move || decider.run(inbox_rx, replies_tx))
        .map_err(|e| Failure::transport(format!("cannot start the decision thread: {e}")))?;
    let mut seen = Seen::default();
    let mut sent = 0u64;
    // Messages handed to the decision thread, and the replies waiting for
    // it to hear every message that came before them.
    let mut forwarded = 0u64;
    let mut held: VecDeque<(Reply, u64)> = VecDeque::new();
    let far = Instant::now() + Duration::from_secs(86_400 * 365);
    loop {
        // A reply goes out once the decision thread has heard every
        // message that came before it: a stop among them keeps it back.
        while let Some((reply, _)) = held.pop_front_if(|(_, before)| progress.heard() >= *before) {
            sent += 1;
            post_unless_stopped(&mut client, &seat, &settings, reply, sent, &progress).await;
        }
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
                seat.rejoin_at = None;
                let steps = seam.online(cursor_of(&bridge, &settings.agent));
                forward(&mut client, steps, &mut seen, &inbox, &mut forwarded).await?;
            }
            _ = sleep_until(seam.until().unwrap_or(far)), if seam.until().is_some() => {
                let steps = seam.expire();
                forward(&mut client, steps, &mut seen, &inbox, &mut forwarded).await?;
            }
            Some(reply) = replies.recv() => {
                held.push_back((reply, forwarded));
            }
            _ = sleep(HELD_CHECK), if !held.is_empty() => {}
            event = client.next() => match event {
                None => return Err(Failure::transport("the XMPP client ended by itself")),
                Some(Event::Online { bound_jid, resumed: false, .. }) => {
                    seat.connected(&bound_jid.to_string());
                    let cursor = cursor_of(&bridge, &settings.agent);
                    let steps = seam.online(cursor);
                    forward(&mut client, steps, &mut seen, &inbox, &mut forwarded).await?;
                }
                Some(Event::Online { resumed: true, .. }) => {
                    tracing::info!("connection resumed; still in {}", seat.room);
                }
                Some(Event::Disconnected(e)) => tracing::warn!("disconnected: {e}"),
                Some(Event::Stanza(stanza)) => {
                    let steps = match &stanza {
                        Stanza::Iq(iq) => seam.iq(iq),
                        Stanza::Message(m) if seam.archived(m, &seat.jids) => continue,
                        _ => Steps::default(),
                    };
                    forward(&mut client, steps, &mut seen, &inbox, &mut forwarded).await?;
                    // A join queued on a lost connection may have seated the
                    // bot before the room said it archives: ask now.
                    if seat.joined {
                        let steps = seam.joined();
                        forward(&mut client, steps, &mut seen, &inbox, &mut forwarded).await?;
                    }
                    let event = room::classify(stanza, &seat.room, &seat.nick, &seat.jids);
                    if event == RoomEvent::Created {
                        undo_creation(&mut client, &seat.room).await;
                    }
                    let was_joined = seat.joined;
                    let message = seat.event(event);
                    if seat.joined && !was_joined {
                        let steps = seam.joined();
                        forward(&mut client, steps, &mut seen, &inbox, &mut forwarded).await?;
                    }
                    if let Some(m) = message {
                        let steps = seam.message(m);
                        forward(&mut client, steps, &mut seen, &inbox, &mut forwarded).await?;
                    }
                }
            },
        }
    }
    // Turns under way may still answer: post what comes within the grace.
    drop(inbox);
    for (reply, _) in held.drain(..) {
        sent += 1;
        post_unless_stopped(&mut client, &seat, &settings, reply, sent, &progress).await;
    }
    let deadline = Instant::now() + STOP_GRACE;
    while let Ok(Some(reply)) = tokio::time::timeout_at(deadline, replies.recv()).await {
        sent += 1;
        post_unless_stopped(&mut client, &seat, &settings, reply, sent, &progress).await;
    }
    if let Some(turn) = under_way.get() {
        tracing::warn!(
            "stopping with a turn still running in Hermes after {} s: {turn} will not reach \
             the room (Hermes stores it in the session)",
            STOP_GRACE.as_secs()
        );
    }
    if seat.joined
        && let Ok(p) = room::leave(&seat.room, &seat.nick)
    {
        send(&mut client, p.into(), "the leave").await;
    }
    let _ = timeout(Duration::from_secs(5), client.send_end()).await;
    tracing::info!("stopped");
    Ok(())
}

/// Send the stanzas of `steps`, then hand its messages to the decision
/// thread, each once (a message the room delivers again is skipped).
async fn forward(
    client: &mut Client,
    steps: Steps,
    seen: &mut Seen,
    inbox: &std::sync::mpsc::Sender<Incoming>,
    forwarded: &mut u64,
) -> Result<(), Failure> {
    for stanza in steps.send {
        send(client, stanza, "the join or catch-up request").await;
    }
    for m in steps.decide {
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
        *forwarded += 1;
    }
    Ok(())
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

/// Post `reply` unless a stop was heard after the decision thread handed
/// it on.
async fn post_unless_stopped(
    client: &mut Client,
    seat: &Seat,
    settings: &BotSettings,
    reply: Reply,
    n: u64,
    progress: &Progress,
) {
    if progress.stops() != reply.stops {
        tracing::info!(
            "reply to {} not posted: a person said stop before it went out (Hermes keeps it \
             in session {})",
            reply.to_nick,
            reply.session
        );
        return;
    }
    post(client, seat, settings, reply, n).await;
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
