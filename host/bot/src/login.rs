//! The login probe: one connection and SASL exchange before the client
//! starts, so that what no retry can mend ends the process (exit 2).
//!
//! tokio-xmpp 6's `Client` logs a refused login or an untrusted
//! certificate and connects again for ever: under a service manager that
//! restarts on failure, a wrong password or a missing CA would loop
//! unseen. The probe authenticates with tokio-xmpp's own connector and
//! `client_login`, and sorts what fails: the server's SASL `<failure/>`
//! (kind `not-accepted`) and TLS the operator must fix (kind `bad-input`)
//! end the bot; a network failure is tried again with a doubling pause,
//! as the client itself would.

use session_switch::{Failure, FailureKind};
use std::time::Duration;
use tokio::time::{Instant, sleep};
use tokio_xmpp::connect::ServerConnector;
use tokio_xmpp::error::{AuthError, Error, ProtocolError};
use tokio_xmpp::jid::Jid;
use tokio_xmpp::parsers::ns;
use tokio_xmpp::parsers::sasl::DefinedCondition;
use tokio_xmpp::rustls;
use tokio_xmpp::xmlstream::{Timeouts, XmppStream};

const FIRST_PAUSE: Duration = Duration::from_secs(1);
const MAX_PAUSE: Duration = Duration::from_secs(30);
/// One try's limit: a server that accepts the connection and never
/// answers is a network failure too.
const TRY_LIMIT: Duration = Duration::from_secs(20);

/// What the probe found short of a refusal.
#[derive(Debug, PartialEq, Eq)]
pub enum Probed {
    LoggedIn,
    /// The server could not be reached before the deadline: the last
    /// failure.
    Unreachable(String),
}

/// Log in once as `jid` through `connector`, trying again after network
/// failures until `deadline` (`None`: no limit).
///
/// Errors: the server refused the login (kind `not-accepted`, naming the
/// SASL condition); TLS that needs the config changed (kind `bad-input`).
pub async fn probe<C: ServerConnector>(
    connector: &C,
    jid: &Jid,
    password: &str,
    deadline: Option<Instant>,
) -> Result<Probed, Failure> {
    let mut pause = FIRST_PAUSE;
    loop {
        let tried = tokio::time::timeout(TRY_LIMIT, login(connector, jid, password)).await;
        let failure = match tried {
            Ok(Ok(())) => return Ok(Probed::LoggedIn),
            Ok(Err(e)) => {
                if let Some(fatal) = refusal(&e, jid) {
                    return Err(fatal);
                }
                network_failure(&e)
            }
            Err(_) => format!("no answer within {} s", TRY_LIMIT.as_secs()),
        };
        if deadline.is_some_and(|d| Instant::now() + pause > d) {
            return Ok(Probed::Unreachable(format!(
                "could not log in as {jid}: {failure}"
            )));
        }
        tracing::warn!(
            "cannot log in as {jid} ({failure}); trying again in {} s",
            pause.as_secs()
        );
        sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

async fn login<C: ServerConnector>(connector: &C, jid: &Jid, password: &str) -> Result<(), Error> {
    let (stream, binding) = connector
        .connect(jid, ns::JABBER_CLIENT, Timeouts::tight())
        .await?;
    let (features, stream): (_, XmppStream<C::Stream>) = stream.recv_features().await?;
    let creds = sasl::common::Credentials::default()
        .with_username(jid.node().map(|n| n.as_str()).unwrap_or_default())
        .with_password(password)
        .with_channel_binding(binding);
    // Authenticated; the stream is dropped unbound, which the server takes
    // as a closed connection.
    tokio_xmpp::client_login(stream, features.sasl_mechanisms, creds).await?;
    Ok(())
}

/// What in `e` no retry mends, as the bot's failure; `None` for a network
/// failure.
pub fn refusal(e: &Error, jid: &Jid) -> Option<Failure> {
    match e {
        // The server cannot check the password now (its auth backend is
        // down, at boot say): tried again, as a network failure is, so a
        // service is not left stopped by `RestartPreventExitStatus=2`.
        Error::Auth(AuthError::Fail(DefinedCondition::TemporaryAuthFailure)) => None,
        Error::Auth(AuthError::Fail(condition)) => Some(Failure::new(
            FailureKind::NotAccepted,
            format!(
                "the server refused the login of {}: SASL {} (a wrong password or an \
                 unknown account: check the agent's password in [bot.agents])",
                jid.to_bare(),
                kebab(&format!("{condition:?}"))
            ),
        )),
        Error::Auth(AuthError::NoMechanism) => Some(Failure::new(
            FailureKind::NotAccepted,
            format!(
                "the server offers {} no SASL mechanism the bot has (SCRAM-SHA-256, \
                 SCRAM-SHA-1, PLAIN)",
                jid.to_bare()
            ),
        )),
        Error::Protocol(ProtocolError::NoTls) => Some(Failure::bad_input(
            "the server offers no STARTTLS: enable it in ejabberd, or set [bot] tls = \
             \"insecure-plaintext\" for a server on loopback",
        )),
        Error::Io(io) => {
            let tls = io.get_ref()?.downcast_ref::<rustls::Error>()?;
            match tls {
                rustls::Error::InvalidCertificate(problem) => Some(Failure::bad_input(format!(
                    "the server's certificate is not trusted: {}",
                    certificate_problem(problem)
                ))),
                _ => None,
            }
        }
        _ => None,
    }
}

/// A failure to reach the server, said so that the reader knows where to
/// look (tokio-xmpp prints a DNS failure as its debug form).
fn network_failure(e: &Error) -> String {
    match e {
        Error::DnsNet(_) | Error::DnsProto(_) | Error::Idna => {
            "the server's name does not resolve (DNS has no address for it)".into()
        }
        Error::Io(io)
            if io
                .to_string()
                .contains("invalid eof at beginning of document") =>
        {
            format!("{e} (what answered is no XMPP server: is it ejabberd's client port?)")
        }
        Error::Io(io) if io.to_string().contains("tls handshake eof") => format!(
            "{e} (the server ended the TLS handshake: it may have no certificate for the \
             JID's domain; see ejabberd's certfiles, hosts and log)"
        ),
        _ => e.to_string(),
    }
}

/// What is wrong with the server's certificate, and what mends it.
fn certificate_problem(problem: &rustls::CertificateError) -> String {
    use rustls::CertificateError as E;
    const CA_FILE: &str = "if the server's operator runs its own CA, set [bot] ca_file to that \
                           CA's PEM (relative to the config's folder); if ca_file is set, it \
                           does not hold the CA that signed this certificate (a stale copy?)";
    match problem {
        E::UnknownIssuer => {
            format!("signed by a CA that is not among the trusted roots; {CA_FILE}")
        }
        E::BadSignature => {
            format!("its signature does not verify against the trusted CA; {CA_FILE}")
        }
        E::NotValidForName | E::NotValidForNameContext { .. } => {
            "not issued for the JID's domain (its subjectAltName must name the domain)".into()
        }
        E::Expired | E::ExpiredContext { .. } => "expired".into(),
        E::NotValidYet | E::NotValidYetContext { .. } => {
            "not valid yet (or this machine's clock is behind)".into()
        }
        E::Revoked => "revoked".into(),
        // rustls hands webpki's reason over as an opaque error: its name is
        // the one way to tell a CA certificate serving as the server's own.
        E::Other(other) if format!("{other:?}").contains("CaUsedAsEndEntity") => {
            "a CA certificate (basicConstraints CA:TRUE, what `openssl req -x509` makes \
             by default) serving as the server's own: make the server's certificate with \
             basicConstraints CA:FALSE, or sign it with a CA of its own and name that CA in \
             [bot] ca_file (the book's ejabberd chapter, TLS)"
                .into()
        }
        other => format!("refused ({other:?}); {CA_FILE}"),
    }
}

/// `NotAuthorized` as the XML element's name, `not-authorized`.
fn kebab(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('-');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jid() -> Jid {
        Jid::new("mohe@example.org/session-switch-bot-box1").unwrap()
    }

    #[test]
    fn a_sasl_failure_is_not_accepted_and_names_its_condition() {
        let e = Error::Auth(AuthError::Fail(DefinedCondition::NotAuthorized));
        let f = refusal(&e, &jid()).unwrap();
        assert_eq!(f.kind, FailureKind::NotAccepted);
        assert_eq!(f.exit_status(), 2);
        assert!(
            f.message.starts_with(
                "the server refused the login of mohe@example.org: SASL not-authorized"
            ),
            "{}",
            f.message
        );
        let e = Error::Auth(AuthError::Fail(DefinedCondition::AccountDisabled));
        assert!(
            refusal(&e, &jid())
                .unwrap()
                .message
                .contains("SASL account-disabled")
        );
        // A server that cannot check the password now is tried again.
        let e = Error::Auth(AuthError::Fail(DefinedCondition::TemporaryAuthFailure));
        assert!(refusal(&e, &jid()).is_none());
    }

    #[test]
    fn a_server_that_cannot_be_reached_is_tried_again_until_the_deadline() {
        // A port that was just free: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let connector = tokio_xmpp::connect::TcpServerConnector::from(
            tokio_xmpp::connect::DnsConfig::no_srv("127.0.0.1", port),
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let started = std::time::Instant::now();
        let deadline = Instant::now() + Duration::from_millis(2500);
        let probed = runtime
            .block_on(probe(&connector, &jid(), "pw", Some(deadline)))
            .unwrap();
        let Probed::Unreachable(why) = probed else {
            panic!("{probed:?}")
        };
        assert!(
            why.starts_with("could not log in as mohe@example.org"),
            "{why}"
        );
        // Tried again after the first pause, given up before the second.
        let took = started.elapsed();
        assert!(took >= FIRST_PAUSE && took < FIRST_PAUSE * 2, "{took:?}");
    }

    /// webpki's reason as rustls hands it over: only its name is seen.
    #[derive(Debug)]
    struct CaUsedAsEndEntity;

    impl std::fmt::Display for CaUsedAsEndEntity {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("CA used as end entity")
        }
    }

    impl std::error::Error for CaUsedAsEndEntity {}

    #[test]
    fn a_network_failure_says_where_to_look() {
        let eof = |text: &str| {
            Error::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                text.to_string(),
            ))
        };
        assert!(
            network_failure(&eof("invalid eof at beginning of document"))
                .contains("is it ejabberd's client port?")
        );
        assert!(network_failure(&eof("tls handshake eof")).contains("certfiles"));
        assert_eq!(
            network_failure(&Error::Idna),
            "the server's name does not resolve (DNS has no address for it)"
        );
        assert_eq!(network_failure(&Error::Disconnected), "disconnected");
    }

    #[test]
    fn an_untrusted_certificate_is_a_config_error_and_the_network_is_retried() {
        let tls = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let f = refusal(&Error::Io(tls), &jid()).unwrap();
        assert_eq!(f.kind, FailureKind::BadInput);
        assert!(
            f.message.contains("not among the trusted roots") && f.message.contains("ca_file"),
            "{}",
            f.message
        );
        for (problem, says) in [
            (rustls::CertificateError::BadSignature, "does not verify"),
            (
                rustls::CertificateError::Other(rustls::OtherError(std::sync::Arc::new(
                    CaUsedAsEndEntity,
                ))),
                "basicConstraints CA:FALSE",
            ),
        ] {
            let tls = std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                rustls::Error::InvalidCertificate(problem),
            );
            let f = refusal(&Error::Io(tls), &jid()).unwrap();
            assert_eq!(f.kind, FailureKind::BadInput);
            assert!(
                f.message.contains(says) && f.message.contains("ca_file"),
                "{}",
                f.message
            );
        }
        let f = refusal(&Error::Protocol(ProtocolError::NoTls), &jid()).unwrap();
        assert_eq!(f.kind, FailureKind::BadInput);
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(refusal(&Error::Io(refused), &jid()), None);
        assert_eq!(refusal(&Error::Disconnected, &jid()), None);
    }
}
