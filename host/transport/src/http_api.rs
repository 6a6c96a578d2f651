//! The HTTP transport: ejabberd's `mod_http_api`, `POST {api_url}/{command}`
//! with the command's arguments as a JSON object: one request to the running
//! server (no Erlang VM to boot, unlike `ejabberdctl`), no locale problem, the
//! same FROM rules as `ejabberdctl`.
//!
//! Answers verified on ejabberd 23.01: `send_stanza` (like `send_message`)
//! → 200 with body `0` (also when the room drops the message); `get_subscribers` → 200 with a
//! JSON list of bare JIDs, 400 `"The room does not exist"`; a missing key or
//! a bad JID → 400 with the reason; an unknown command → 404; a command the
//! `api_permissions` deny → 403.

use std::collections::BTreeMap;
use std::io;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};
use ureq::Agent;
use ureq::http::Uri;
use ureq::{Error, Timeout};

use super::{RoomJid, Transport};
use session_switch_contract::failure::{Failure, FailureKind};

/// At most this much of an error answer is quoted in a message.
const QUOTE_CHARS: usize = 300;

/// `mod_http_api` at `api_url` (e.g. `http://127.0.0.1:5280/api`), with
/// optional HTTP basic credentials (ejabberd's are a JID and its password).
#[derive(Clone)]
pub struct HttpApi {
    /// Without a trailing `/`; each command is `{api_url}/{command}`.
    api_url: String,
    /// `Basic …` when credentials were given.
    authorization: Option<String>,
    timeout: Duration,
    agent: Agent,
}

/// Credentials stay out of logs.
impl std::fmt::Debug for HttpApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpApi")
            .field("api_url", &self.api_url)
            .field("credentials", &self.authorization.as_ref().map(|_| "…"))
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// How a request ended without a usable answer.
enum Unanswered {
    /// The request did not reach the server (DNS, connection refused,
    /// time-out while connecting or sending the headers), or the client
    /// could not even form it.
    NotSent(String),
    /// The request may have reached the server: time-out or broken
    /// connection after the headers went out.
    MaybeSent(String),
}

impl HttpApi {
    /// A transport for `mod_http_api` at `api_url` (`http://` or `https://`,
    /// a trailing `/` is ignored). `credentials`: `(user, password)` for
    /// HTTP basic authentication, ejabberd's user being a JID. `timeout`
    /// bounds each request from DNS to the end of the answer (default
    /// [`super::HTTP_TIMEOUT`], 5 s); resolving, connecting and sending the
    /// headers get a quarter of it each, so a time-out before the request
    /// went out is told apart from one after it.
    ///
    /// Errors (`bad-input`): a URL that is not absolute http(s), has a query,
    /// or carries credentials (`user:pw@`: give them as `credentials`, which
    /// handles a JID's `@`); a user containing `:` (RFC 7617 forbids it);
    /// a zero `timeout`.
    pub fn new(
        api_url: &str,
        credentials: Option<(String, String)>,
        timeout: Duration,
    ) -> Result<Self, Failure> {
        let api_url = api_url.trim().trim_end_matches('/').to_owned();
        let bad = |why: &str| {
            Failure::bad_input(format!(
                "[xmpp] api_url {api_url:?} {why}; give the mod_http_api base, e.g. \
                 http://127.0.0.1:5280/api"
            ))
        };
        let uri: Uri = api_url
            .parse()
            .map_err(|e| bad(&format!("is not a URL ({e})")))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err(bad("is not an http:// or https:// URL"));
        }
        let Some(authority) = uri.authority() else {
            return Err(bad("has no host"));
        };
        if authority.as_str().contains('@') {
            return Err(bad(
                "holds credentials; use api_user and api_password_env instead",
            ));
        }
        if uri.query().is_some() {
            return Err(bad("has a query (?…)"));
        }
        if timeout.is_zero() {
            return Err(Failure::bad_input(
                "the HTTP time limit is zero; give it in seconds, e.g. 5",
            ));
        }
        let authorization = match credentials {
            Some((user, _)) if user.contains(':') => {
                return Err(Failure::bad_input(format!(
                    "the HTTP API user {user:?} contains ':', which basic authentication \
                     cannot carry (RFC 7617)"
                )));
            }
            Some((user, password)) => Some(format!(
                "Basic {}",
                BASE64.encode(format!("{user}:{password}"))
            )),
            None => None,
        };
        let phase = timeout / 4;
        let agent = Agent::config_builder()
            .timeout_global(Some(timeout))
            .timeout_resolve(Some(phase))
            .timeout_connect(Some(phase))
            .timeout_send_request(Some(phase))
            // Answers like 400/404 carry ejabberd's reason: read them.
            .http_status_as_error(false)
            // A redirected POST could be sent twice; an API never redirects.
            .max_redirects(0)
            .build()
            .into();
        Ok(Self {
            api_url,
            authorization,
            timeout,
            agent,
        })
    }

    /// The API's base URL, without a trailing `/`.
    pub fn api_url(&self) -> &str {
        &self.api_url
    }

    /// The time limit of one request.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// `POST {api_url}/{command}` with `args` as JSON. Returns the status
    /// and the answer's text (any status: the caller decides).
    fn call(&self, command: &str, args: &Value) -> Result<(u16, String), Unanswered> {
        let url = format!("{}/{command}", self.api_url);
        let mut request = self.agent.post(&url);
        if let Some(auth) = &self.authorization {
            request = request.header("Authorization", auth);
        }
        let mut response = request
            .send_json(args)
            .map_err(|e| self.unanswered(&url, e))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| self.unanswered(&url, e))?;
        Ok((status, text))
    }

    /// Classify a ureq error by whether the request can have reached the
    /// server, with a message naming the URL.
    fn unanswered(&self, url: &str, error: Error) -> Unanswered {
        let limit = self.timeout.as_secs_f64();
        match error {
            Error::Timeout(Timeout::Resolve | Timeout::Connect | Timeout::SendRequest) => {
                Unanswered::NotSent(format!(
                    "cannot reach POST {url} within {} s (connecting timed out)",
                    limit / 4.0
                ))
            }
            Error::Timeout(_) => {
                Unanswered::MaybeSent(format!("no answer from POST {url} within {limit} s"))
            }
            Error::HostNotFound => Unanswered::NotSent(format!("cannot resolve the host of {url}")),
            Error::ConnectionFailed => Unanswered::NotSent(format!("cannot connect to {url}")),
            Error::Io(e) if broke_after_connecting(&e) => Unanswered::MaybeSent(format!(
                "the connection to POST {url} broke before an answer came ({e})"
            )),
            Error::Io(e) => Unanswered::NotSent(format!("cannot connect to {url}: {e}")),
            other => Unanswered::NotSent(format!("POST {url} failed: {other}")),
        }
    }

    /// The failure for a non-200 answer of `command`.
    fn refused(&self, command: &str, status: u16, text: &str) -> Failure {
        let url = format!("{}/{command}", self.api_url);
        let said = super::server_answers::one_line(text, QUOTE_CHARS);
        let message = match status {
            404 => format!(
                "POST {url} answered 404 ({said}); check [xmpp] api_url: it is the base the \
                 mod_http_api handler is mounted on (e.g. http://127.0.0.1:5280/api)"
            ),
            401 | 403 => format!(
                "POST {url} answered {status} ({said}); the API refused this client: set \
                 api_user / api_password_env, or allow {command} in ejabberd's api_permissions"
            ),
            _ => format!("POST {url} answered HTTP {status}: {said}"),
        };
        Failure::transport(message)
    }
}

/// I/O errors of a connection that was made: the request (or part of it)
/// may have reached the server. Everything else (refused, unreachable, a
/// name that does not resolve) happens before a byte is sent.
fn broke_after_connecting(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof
            | io::ErrorKind::WriteZero
            | io::ErrorKind::TimedOut
    )
}

impl Transport for HttpApi {
    /// `POST {api_url}/get_subscribers {"name", "service"}` → a JSON list of
    /// bare JIDs.
    fn check_sender(&self, from: &str, room: &str) -> Result<(), Failure> {
        let jid = RoomJid::parse(room)?;
        if from.trim().is_empty() {
            return Err(Failure::bad_input(
                "the sender JID is empty; set the agent's jid in the config",
            ));
        }
        let args = json!({"name": jid.name, "service": jid.service});
        let (status, text) = self.call("get_subscribers", &args).map_err(|u| {
            let (Unanswered::NotSent(m) | Unanswered::MaybeSent(m)) = u;
            Failure::transport(format!("{m}; is ejabberd running at [xmpp] api_url?"))
        })?;
        if status == 400 && super::server_answers::says_no_such_room(&text) {
            return Err(super::server_answers::no_such_room(
                room,
                &super::server_answers::one_line(&text, QUOTE_CHARS),
            ));
        }
        if status != 200 {
            return Err(self.refused("get_subscribers", status, &text));
        }
        let subscribers: Vec<String> = serde_json::from_str(&text).map_err(|e| {
            Failure::transport(format!(
                "POST {}/get_subscribers answered 200 but not a JSON list of JIDs ({e}): {}",
                self.api_url,
                super::server_answers::one_line(&text, QUOTE_CHARS)
            ))
        })?;
        if super::server_answers::is_subscriber(from, subscribers.iter().map(String::as_str)) {
            Ok(())
        } else {
            Err(super::server_answers::not_subscriber(from, room))
        }
    }

    /// `POST {api_url}/send_stanza {"from", "to", "stanza"}` with the
    /// [`super::human_stanza`] of `body` (JSON carries the stanza text as
    /// is: no locale, no argument limit).
    fn post(&self, from: &str, room: &str, body: &str) -> Result<(), Failure> {
        RoomJid::parse(room)?;
        super::stanza::refuse_unpostable(from, body)?;
        let stanza = super::stanza::human_stanza(body, &super::stanza::new_stanza_id());
        let args = json!({
            "from": from,
            "to": room,
            "stanza": stanza,
        });
        let (status, text) = self.call("send_stanza", &args).map_err(|u| match u {
            Unanswered::NotSent(m) => {
                Failure::transport(format!("{m}; nothing was posted: is ejabberd running?"))
            }
            Unanswered::MaybeSent(m) => Failure::new(
                FailureKind::UnknownOutcome,
                format!("{m}; the room may have the message: look before sending it again"),
            ),
        })?;
        if status == 200 {
            Ok(())
        } else {
            Err(self.refused("send_stanza", status, &text))
        }
    }

    /// `POST {api_url}/get_room_options {"name", "service"}` → a JSON
    /// object of option names and values, `{}` for a room that does not
    /// exist.
    fn room_options(&self, room: &str) -> Result<Option<BTreeMap<String, String>>, Failure> {
        let jid = RoomJid::parse(room)?;
        let args = json!({"name": jid.name, "service": jid.service});
        let (status, text) = self.call("get_room_options", &args).map_err(|u| {
            let (Unanswered::NotSent(m) | Unanswered::MaybeSent(m)) = u;
            Failure::transport(format!("{m}; is ejabberd running at [xmpp] api_url?"))
        })?;
        if status != 200 {
            return Err(self.refused("get_room_options", status, &text));
        }
        let options: BTreeMap<String, Value> = serde_json::from_str(&text).map_err(|e| {
            Failure::transport(format!(
                "POST {}/get_room_options answered 200 but not a JSON object of options \
                 ({e}): {}",
                self.api_url,
                super::server_answers::one_line(&text, QUOTE_CHARS)
            ))
        })?;
        let options: BTreeMap<String, String> = options
            .into_iter()
            .map(|(name, value)| {
                let value = match value {
                    Value::String(text) => text,
                    other => other.to_string(),
                };
                (name, value)
            })
            .collect();
        Ok((!options.is_empty()).then_some(options))
    }

    fn name(&self) -> &'static str {
        "http"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(url: &str) -> Result<HttpApi, Failure> {
        HttpApi::new(url, None, Duration::from_secs(5))
    }

    #[test]
    fn trailing_slash_is_dropped() {
        assert_eq!(
            api("http://127.0.0.1:5280/api/").unwrap().api_url(),
            "http://127.0.0.1:5280/api"
        );
        assert_eq!(
            api(" https://x.org/api ").unwrap().api_url(),
            "https://x.org/api"
        );
    }

    #[test]
    fn bad_urls_are_refused_with_the_reason() {
        for (url, part) in [
            ("", "is not a URL"),
            ("127.0.0.1:5280/api", "is not a URL"),
            ("ftp://x.org/api", "not an http:// or https:// URL"),
            ("/api", "not an http:// or https:// URL"),
            ("http://admin:pw@x.org/api", "holds credentials"),
            ("http://x.org/api?x=1", "has a query"),
        ] {
            let err = api(url).unwrap_err();
            assert_eq!(err.kind, FailureKind::BadInput, "{url}");
            assert!(err.message.contains(part), "{url}: {}", err.message);
        }
    }

    #[test]
    fn credentials_become_a_basic_header() {
        let a = HttpApi::new(
            "http://127.0.0.1:5280/api",
            Some(("admin@meeting.localhost".into(), "pw:ä".into())),
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(
            a.authorization.as_deref(),
            Some(format!("Basic {}", BASE64.encode("admin@meeting.localhost:pw:ä")).as_str())
        );
        assert!(!format!("{a:?}").contains("Basic"));
        let err = HttpApi::new(
            "http://x/api",
            Some(("a:b".into(), "pw".into())),
            Duration::from_secs(5),
        )
        .unwrap_err();
        assert!(err.message.contains("RFC 7617"));
    }

    #[test]
    fn zero_timeout_is_refused() {
        let err = HttpApi::new("http://x/api", None, Duration::ZERO).unwrap_err();
        assert_eq!(err.kind, FailureKind::BadInput);
        assert!(err.message.contains("time limit is zero"));
    }
}
