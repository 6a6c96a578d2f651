//! The bot's life: connect as the agent, join the room, hand each live
//! message to the decision thread once, post its replies, rejoin when the
//! room or the server drops the bot, leave on SIGTERM or SIGINT.
//!
//! Reconnecting is tokio-xmpp's: after a lost connection it connects
//! again with a doubling pause (1 s up to 30 s) and logs each failed try;
//! every new connection is logged here and rejoins the room. A kick or a
//! refused join is retried ([`crate::seat`]), also with a doubling pause
//! (up to 60 s). Before the client starts, the bot takes its agent's lock ([`crate::lock`])
//! and logs in once ([`crate::login`]): a second bot on this machine, a
//! refused login or an untrusted certificate end the process (exit 2). At
//! its first join it looks for its agent's seat from another machine
//! ([`crate::other_seat`]). `--once` is [`crate::check`].

use crate::connect::{agent_jid, connector, request_stop, reset_stop, send, stopping};
use crate::decide::{Decider, cursor_of};
use crate::handled_ids::HandledIds;
use crate::hermes::HermesClient;
use crate::login::Probed;
use crate::rejoin::{Rejoin, Steps};
use crate::reply::{Progress, Reply, UnderWay};
use crate::room::{self, Incoming, RoomEvent};
use crate::seat::{Seat, answer_ping};
use crate::settings::BotSettings;
use crate::{lock, resource};
use futures::StreamExt;
use session_switch::config::BotTls;
use session_switch::{Bridge, Failure};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::{Instant, sleep, sleep_until, timeout};
use tokio_xmpp::jid::BareJid;
use tokio_xmpp::{Client, Event, Stanza};

/// How long a stop waits for replies of turns already under way.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How often a reply waiting for the decision thread to hear the messages
/// before it is looked at again.
const HELD_CHECK: Duration = Duration::from_millis(20);

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
    let dir = lock::lock_dir_here()?;
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
    watch_signals()?;
    let connector = connector(&settings)?;
    let jid = agent_jid(&settings, Some(&resource::resource()))?;
    tokio::select! {
        probed = connector.probe(&jid, &settings.password, None) => {
            if let Probed::Unreachable(why) = probed? {
                return Err(Failure::transport(why));
            }
        }
        () = stopping() => {
            tracing::info!("stopping before the login");
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
    let progress = Arc::new(Progress::default());
    let mut rejoin = Rejoin::new(
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
    let mut seen = HandledIds::default();
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
            () = stopping() => break,
            _ = sleep_until(seat.rejoin_at.unwrap_or(far)), if seat.rejoin_at.is_some() => {
                seat.joining();
                let steps = rejoin.online(cursor_of(&bridge, &settings.agent));
                forward(&mut client, steps, &mut seen, &inbox, &mut forwarded).await?;
            }
            _ = sleep_until(rejoin.until().unwrap_or(far)), if rejoin.until().is_some() => {
                let steps = rejoin.expire();
                forward(&mut client, steps, &mut seen, &inbox, &mut forwarded).await?;
            }
            Some(reply) = replies.recv() => {
                held.push_back((reply, forwarded));
            }
            _ = sleep(HELD_CHECK), if !held.is_empty() => {}
            event = client.next() => match event {
                None => return Err(Failure::transport("the XMPP client ended by itself")),
                Some(Event::Online { bound_jid, resumed: false, .. }) => {
                    seat.connected(&bound_jid);
                    seat.joining();
                    let steps = rejoin.online(cursor_of(&bridge, &settings.agent));
                    forward(&mut client, steps, &mut seen, &inbox, &mut forwarded).await?;
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
                    let steps = match &stanza {
                        Stanza::Iq(iq) => rejoin.iq(iq),
                        Stanza::Message(m) if rejoin.archived(m, &seat.jids) => continue,
                        _ => Steps::default(),
                    };
                    forward(&mut client, steps, &mut seen, &inbox, &mut forwarded).await?;
                    // A join queued on a lost connection may have seated the
                    // bot before the room said it archives: ask now.
                    if seat.joined {
                        let steps = rejoin.joined();
                        forward(&mut client, steps, &mut seen, &inbox, &mut forwarded).await?;
                    }
                    let event = room::classify(stanza, &seat.room, &seat.nick, &seat.jids);
                    if event == RoomEvent::Created {
                        undo_creation(&mut client, &seat.room).await;
                    }
                    let was_joined = seat.joined;
                    let message = seat.event(event);
                    if !was_joined
                        && seat.joined
                        && let Err(busy) = seat.settle(&mut client, &settings.agent).await
                    {
                        leave(&mut client, &seat).await;
                        let _ = timeout(Duration::from_secs(5), client.send_end()).await;
                        return Err(busy);
                    }
                    if seat.joined && !was_joined {
                        let steps = rejoin.joined();
                        forward(&mut client, steps, &mut seen, &inbox, &mut forwarded).await?;
                    }
                    if let Some(m) = message {
                        let steps = rejoin.message(m);
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
    leave(&mut client, &seat).await;
    let _ = timeout(Duration::from_secs(5), client.send_end()).await;
    tracing::info!("stopped");
    Ok(())
}

/// SIGTERM and SIGINT request the stop from a task of their own, so that it
/// reaches a stanza waiting on a lost connection too (see
/// [`crate::connect::stopping`]), not only the main loop between events.
///
/// Errors (kind `transport`): a signal that cannot be watched.
fn watch_signals() -> Result<(), Failure> {
    reset_stop();
    let watch = |kind, name| {
        signal(kind).map_err(|e| Failure::transport(format!("cannot watch {name}: {e}")))
    };
    let mut term = watch(SignalKind::terminate(), "SIGTERM")?;
    let mut int = watch(SignalKind::interrupt(), "SIGINT")?;
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        tracing::info!("{name}: stopping");
        request_stop();
    });
    Ok(())
}

async fn leave(client: &mut Client, seat: &Seat) {
    if seat.joined
        && let Ok(p) = room::leave(&seat.room, &seat.nick)
    {
        send(client, p.into(), "the leave").await;
    }
}

/// Send the stanzas of `steps`, then hand its messages to the decision
/// thread, each once (a message the room delivers again is skipped).
async fn forward(
    client: &mut Client,
    steps: Steps,
    seen: &mut HandledIds,
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
        // The bench times the bot's own share of a message from here.
        tracing::debug!("{}'s message handed to the decision thread", m.nick);
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
