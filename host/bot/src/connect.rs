//! How the bot reaches the server: the connector `[bot]` describes (plain
//! TCP, or STARTTLS with the trusted roots), the agent's JID, the login
//! probe and the client going the same way, and a stanza sent with a time
//! limit.

use crate::login;
use crate::settings::BotSettings;
use crate::tls::StartTls;
use session_switch::Failure;
use session_switch::config::BotTls;
use std::time::Duration;
use tokio::time::{Instant, timeout};
use tokio_xmpp::connect::{DnsConfig, TcpServerConnector};
use tokio_xmpp::jid::{BareJid, Jid};
use tokio_xmpp::xmlstream::Timeouts;
use tokio_xmpp::{Client, Stanza};

/// How long one stanza may wait to be written (the connection may be down
/// and reconnecting meanwhile).
const SEND_LIMIT: Duration = Duration::from_secs(30);
/// The same once the bot is stopping: what it still says on its way out
/// (held replies, its leave) must not outlast a service manager's stop
/// time-out on a lost connection.
const STOPPING_SEND_LIMIT: Duration = Duration::from_secs(2);

/// Set when SIGTERM or SIGINT came: a stanza waiting on a lost connection
/// gives up at once, so the bot stops promptly. One per process, as the
/// signals are.
static STOP: std::sync::LazyLock<tokio::sync::watch::Sender<bool>> =
    std::sync::LazyLock::new(|| tokio::sync::watch::channel(false).0);

/// The bot is to stop (a signal came); see [`stopping`].
pub(crate) fn request_stop() {
    STOP.send_replace(true);
}

/// A new bot in this process: no stop requested yet.
pub(crate) fn reset_stop() {
    STOP.send_replace(false);
}

/// Whether a stop was requested.
pub(crate) fn stop_requested() -> bool {
    *STOP.borrow()
}

/// Resolves once a stop is requested.
pub(crate) async fn stopping() {
    let mut stop = STOP.subscribe();
    let _ = stop.wait_for(|stop| *stop).await;
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
    ) -> Result<login::Probed, Failure> {
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
    let stopped = stop_requested();
    let limit = if stopped {
        STOPPING_SEND_LIMIT
    } else {
        SEND_LIMIT
    };
    let sent = tokio::select! {
        sent = timeout(limit, client.send_stanza(stanza)) => sent,
        () = stopping(), if !stopped => {
            tracing::warn!("{what} not sent: stopping");
            return false;
        }
    };
    match sent {
        Ok(Ok(_)) => true,
        Ok(Err(e)) => {
            tracing::warn!("{what} not sent: {e}");
            false
        }
        Err(_) => {
            tracing::warn!(
                "{what} not sent within {} s (no connection)",
                limit.as_secs()
            );
            false
        }
    }
}
