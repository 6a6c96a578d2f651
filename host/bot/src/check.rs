//! `--once`: join the room, ask the Hermes API server's `/health` and
//! `/v1/models` (with the key), leave; what a service manager or a monitor
//! checks.
//!
//! The check takes no lock and lets the server pick its resource, so it
//! runs beside the agent's bot without replacing the bot's session; for a
//! moment the room seats the agent twice (ejabberd lets sessions of one
//! account share a nick).

use crate::connect::{agent_jid, connector, send};
use crate::hermes::HermesClient;
use crate::login::Probed;
use crate::room::{self, RoomEvent};
use crate::runner::{room_jid, runtime, undo_creation};
use crate::seat::Seat;
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
    /// Why it could not join, when the bot saw a reason (a server it could
    /// not reach, the room's refusal).
    pub join_error: Option<String>,
    pub api_url: String,
    /// Where the URL and the key came from (the config, Hermes's `.env`, a
    /// default), as the bot's start line says it.
    pub api_source: String,
    /// `None`: healthy; else what failed.
    pub hermes_error: Option<String>,
}

impl Health {
    /// Joined and Hermes healthy.
    pub fn ok(&self) -> bool {
        self.joined && self.hermes_error.is_none()
    }
}

/// Join the room once, ask Hermes's `/health` and `/v1/models`, leave: a
/// check for a service manager (`--once`).
///
/// Errors as [`crate::run`], but for `busy`: the check takes no lock and
/// does not look for other seats.
pub fn check(settings: BotSettings) -> Result<Health, Failure> {
    runtime()?.block_on(probe(settings))
}

/// Log in once as the agent and leave, trying again after network
/// failures for at most `limit`: whether the account's login works
/// (`doctor`). `Ok(None)`: logged in; `Ok(Some(why))`: the server could
/// not be reached (the last failure, and where the bot looked).
///
/// Errors: the server refused the login (kind `not-accepted`, naming the
/// SASL condition); TLS that needs the config changed (kind `bad-input`).
pub fn login(settings: &BotSettings, limit: Duration) -> Result<Option<String>, Failure> {
    let connector = connector(settings)?;
    let jid = agent_jid(settings, None)?;
    let deadline = Instant::now() + limit;
    let probed = runtime()?.block_on(async {
        // A try that hangs past the deadline ends with it: the probe looks
        // at its deadline only between tries.
        tokio::time::timeout_at(
            deadline,
            connector.probe(&jid, &settings.password, Some(deadline)),
        )
        .await
    });
    match probed {
        Ok(Ok(Probed::LoggedIn)) => Ok(None),
        Ok(Ok(Probed::Unreachable(why))) => Ok(Some(format!("{why}; tried {}", tried(settings)))),
        Ok(Err(refused)) => Err(refused),
        Err(_) => Ok(Some(format!(
            "could not log in as {}: no answer within {} s; tried {}",
            settings.jid,
            limit.as_secs(),
            tried(settings)
        ))),
    }
}

/// Where the bot looked for the server, for a failure to reach it.
fn tried(settings: &BotSettings) -> String {
    let domain = settings.jid.rsplit_once('@').map_or("", |(_, d)| d);
    settings.server.as_deref().map_or_else(
        || format!("{domain} looked up in DNS (no [bot] server set)"),
        |server| format!("[bot] server {server}"),
    )
}

async fn probe(settings: BotSettings) -> Result<Health, Failure> {
    let mut seat = Seat::new(
        room_jid(&settings)?,
        settings.nick.clone(),
        settings.jid.clone(),
    );
    let deadline = Instant::now() + ONCE_LIMIT;
    let connector = connector(&settings)?;
    let jid = agent_jid(&settings, None)?;
    // A refused login or an untrusted certificate ends the check at once;
    // a server that cannot be reached is a failed join.
    let mut join_error = None;
    let reached = match connector
        .probe(&jid, &settings.password, Some(deadline))
        .await?
    {
        Probed::LoggedIn => true,
        Probed::Unreachable(why) => {
            let why = format!("{why}; tried {}", tried(&settings));
            tracing::warn!("{why}");
            join_error = Some(why);
            false
        }
    };
    let mut client = connector.client(jid, settings.password.clone());
    while reached && !seat.joined {
        match tokio::time::timeout_at(deadline, client.next()).await {
            Err(_) | Ok(None) => break,
            Ok(Some(Event::Online { bound_jid, .. })) => {
                seat.online(&mut client, &bound_jid).await;
            }
            Ok(Some(Event::Stanza(stanza))) => {
                if seat.other_seat(&stanza) {
                    continue;
                }
                let event = room::classify(stanza, &seat.room, &seat.nick, &seat.jids);
                if let RoomEvent::JoinRefused(why) | RoomEvent::Left(why) = &event {
                    tracing::warn!("the room refused the join: {why}");
                    join_error = Some(format!("the room refused the join: {why}"));
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
        join_error,
        api_url: settings.api_url,
        api_source: settings.api_source,
        hermes_error,
    })
}
