//! `--once`: join the room, ask the Hermes API server's `/health`,
//! leave; what a service manager or a monitor checks.

use crate::hermes::HermesClient;
use crate::room::{self, RoomEvent};
use crate::runner::{Seat, connect, room_jid, runtime, send, undo_creation};
use crate::settings::BotSettings;
use futures::StreamExt;
use session_switch::Failure;
use std::time::Duration;
use tokio::time::{Instant, timeout};
use tokio_xmpp::Event;

/// How long `--once` waits to be seated in the room.
const ONCE_LIMIT: Duration = Duration::from_secs(30);

/// What `--once` found: the bot could join, and the Hermes API server
/// answered `/health` (or why not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub agent: String,
    pub room: String,
    pub joined: bool,
    pub api_url: String,
    /// `None`: healthy; else what failed.
    pub hermes_error: Option<String>,
}

impl Health {
    /// Joined and Hermes healthy.
    pub fn ok(&self) -> bool {
        self.joined && self.hermes_error.is_none()
    }
}

/// Join the room once, ask Hermes's `/health`, leave: a check for a
/// service manager (`--once`).
///
/// Errors as [`crate::run`].
pub fn check(settings: BotSettings) -> Result<Health, Failure> {
    runtime()?.block_on(probe(settings))
}

async fn probe(settings: BotSettings) -> Result<Health, Failure> {
    let mut seat = Seat::new(
        room_jid(&settings)?,
        settings.nick.clone(),
        settings.jid.clone(),
    );
    let mut client = connect(&settings)?;
    let deadline = Instant::now() + ONCE_LIMIT;
    while !seat.joined {
        match tokio::time::timeout_at(deadline, client.next()).await {
            Err(_) | Ok(None) => break,
            Ok(Some(Event::Online { bound_jid, .. })) => {
                seat.online(&mut client, &bound_jid.to_string()).await;
            }
            Ok(Some(Event::Stanza(stanza))) => {
                let event = room::classify(stanza, &seat.room, &seat.nick, &seat.jids);
                if let RoomEvent::JoinRefused(why) | RoomEvent::Left(why) = &event {
                    tracing::warn!("the room refused the join: {why}");
                    break;
                }
                if event == RoomEvent::Created {
                    undo_creation(&mut client, &seat.room).await;
                    seat.event(event);
                    break;
                }
                seat.event(event);
            }
            Ok(Some(Event::Disconnected(_))) => {}
        }
    }
    let hermes = HermesClient::new(
        &settings.api_url,
        settings.api_key.as_deref(),
        Duration::from_secs(10),
    );
    let hermes_error = tokio::task::spawn_blocking(move || hermes.health())
        .await
        .map_err(|e| Failure::transport(format!("the health check panicked: {e}")))?
        .err()
        .map(|e| e.to_string());
    if seat.joined
        && let Ok(p) = room::leave(&seat.room, &seat.nick)
    {
        send(&mut client, p.into(), "the leave").await;
    }
    let _ = timeout(Duration::from_secs(5), client.send_end()).await;
    Ok(Health {
        agent: settings.agent,
        room: settings.room,
        joined: seat.joined,
        api_url: settings.api_url,
        hermes_error,
    })
}
