//! STARTTLS with the roots the operator trusts: the system's, plus the CA
//! certificates of `[bot] ca_file` (an ejabberd whose certificate its
//! operator's own CA signed).
//!
//! tokio-xmpp 6's `StartTlsServerConnector` builds its rustls roots inside
//! the connection and takes none from the caller, so [`StartTls`] is the
//! same STARTTLS exchange (RFC 6120 §5) through tokio-xmpp's own stream
//! parts, with a rustls config built once from those roots.

use futures::{SinkExt, StreamExt};
use session_switch::Failure;
use std::borrow::Cow;
use std::io;
use std::path::Path;
use std::sync::Arc;
use tokio::io::BufStream;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_xmpp::connect::{DnsConfig, ServerConnector};
use tokio_xmpp::error::{Error, ProtocolError};
use tokio_xmpp::jid::Jid;
use tokio_xmpp::parsers::starttls::{Nonza, Request};
use tokio_xmpp::rustls::pki_types::pem::PemObject;
use tokio_xmpp::rustls::pki_types::{CertificateDer, ServerName};
use tokio_xmpp::rustls::{ClientConfig, RootCertStore};
use tokio_xmpp::xmlstream::{
    PendingFeaturesRecv, ReadError, StreamHeader, Timeouts, XmppStream, XmppStreamElement,
    initiate_stream,
};

/// The roots for the server's certificate: the system's, and each
/// certificate of `ca_file`.
///
/// Errors (kind `bad-input`): `ca_file` cannot be read, is not PEM, holds
/// no certificate, or holds one rustls refuses as a root.
pub fn roots(ca_file: Option<&Path>) -> Result<RootCertStore, Failure> {
    let mut roots = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for e in &native.errors {
        tracing::debug!("a system certificate could not be read: {e}");
    }
    roots.add_parsable_certificates(native.certs);
    let Some(path) = ca_file else {
        return Ok(roots);
    };
    let bad =
        |what: String| Failure::bad_input(format!("[bot] ca_file {}: {what}", path.display()));
    let pem = std::fs::read(path).map_err(|e| bad(format!("cannot be read: {e}")))?;
    let mut added = 0;
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| bad(format!("not a PEM file of certificates: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| bad(format!("a certificate rustls refuses as a CA: {e}")))?;
        added += 1;
    }
    if added == 0 {
        return Err(bad("holds no PEM certificate (BEGIN CERTIFICATE)".into()));
    }
    Ok(roots)
}

/// STARTTLS, required, checked against the given roots.
#[derive(Clone, Debug)]
pub struct StartTls {
    dns: DnsConfig,
    config: Arc<ClientConfig>,
}

impl StartTls {
    pub fn new(dns: DnsConfig, roots: RootCertStore) -> Self {
        let config = ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        Self {
            dns,
            config: Arc::new(config),
        }
    }
}

fn header(jid: &Jid) -> StreamHeader<'_> {
    StreamHeader {
        to: Some(Cow::Borrowed(jid.domain().as_str())),
        from: None,
        id: None,
    }
}

impl ServerConnector for StartTls {
    type Stream = BufStream<TlsStream<TcpStream>>;

    async fn connect(
        &self,
        jid: &Jid,
        ns: &'static str,
        timeouts: Timeouts,
    ) -> Result<
        (
            PendingFeaturesRecv<Self::Stream>,
            sasl::common::ChannelBinding,
        ),
        Error,
    > {
        let tcp = BufStream::new(self.dns.resolve().await?);
        let stream = initiate_stream(tcp, ns, header(jid), timeouts).await?;
        let (features, mut stream): (_, XmppStream<_>) = stream.recv_features().await?;
        if !features.can_starttls() {
            return Err(ProtocolError::NoTls.into());
        }
        stream
            .send(&XmppStreamElement::Starttls(Nonza::Request(Request)))
            .await?;
        loop {
            match stream
                .next()
                .await
                .map(|v| v.and_then(|v| v.into_read_error()))
            {
                Some(Ok(XmppStreamElement::Starttls(Nonza::Proceed(_)))) => break,
                Some(Ok(_)) | Some(Err(ReadError::SoftTimeout)) => {}
                Some(Err(ReadError::HardError(e))) => return Err(e.into()),
                Some(Err(ReadError::ParseError(e))) => {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, e).into());
                }
                None | Some(Err(ReadError::StreamFooterReceived)) => {
                    return Err(Error::Disconnected);
                }
            }
        }
        let tcp = stream.into_inner().into_inner();
        let name = ServerName::try_from(jid.domain().as_str().to_owned()).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the domain is not a DNS name: {e}"),
            )
        })?;
        let tls = TlsConnector::from(Arc::clone(&self.config))
            .connect(name, tcp)
            .await?;
        // No channel binding: given the TLS 1.3 exporter (as tokio-xmpp's
        // own connector gives it), the sasl crate logs in with SCRAM-*-PLUS
        // and `tls-exporter` (RFC 9266), which ejabberd 23.01 refuses as
        // not-authorized with the right password.
        let binding = sasl::common::ChannelBinding::None;
        let stream = initiate_stream(BufStream::new(tls), ns, header(jid), timeouts).await?;
        Ok((stream, binding))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_that_is_missing_empty_or_not_pem_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("ss-bot-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = roots(Some(&dir.join("missing.pem"))).unwrap_err();
        assert!(
            missing.message.starts_with("[bot] ca_file ")
                && missing.message.contains("cannot be read"),
            "{}",
            missing.message
        );
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "# no certificate here\n").unwrap();
        let e = roots(Some(&empty)).unwrap_err();
        assert!(
            e.message.contains("holds no PEM certificate"),
            "{}",
            e.message
        );
        let broken = dir.join("broken.pem");
        std::fs::write(
            &broken,
            "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let e = roots(Some(&broken)).unwrap_err();
        assert!(e.message.contains("not a PEM file"), "{}", e.message);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
