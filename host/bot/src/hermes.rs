//! The agent's Hermes API server, as the bot drives it: one turn in a
//! stored session (`POST /api/sessions/{id}/chat`, Hermes 0.17 and later,
//! 0.19.0 and the v31 line alike), creating the agent's own XMPP session
//! first when Hermes has never seen it (`POST /api/sessions`), and
//! `GET /health` for `--once`.
//!
//! That route needs no private seam of Hermes's: the API server loads the
//! session's history with its own loader and stores the turn there. With
//! the session-switch plugin loaded, its `_run_agent` wrapper still
//! applies the policy's `[YOU]` edits to the history of an XMPP session.
//!
//! Blocking (ureq): the bot calls it from its decision thread, never from
//! the XMPP task.

use serde_json::{Value, json};
use std::fmt;
use std::time::Duration;
use ureq::Agent;

/// At most this much of an error answer is quoted in a log line.
const QUOTE_CHARS: usize = 200;

/// How long connecting to the API server may take: it is on this machine
/// or near it; a turn's own time limit is the config's.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A turn that produced no reply, for one log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnError {
    /// Nothing listens at the URL, or the connection broke: Hermes is down.
    Unreachable(String),
    /// No answer within the turn's time limit.
    TimedOut(Duration),
    /// Hermes answered with an error status (the status and the start of
    /// its answer).
    Status(u16, String),
    /// Hermes answered 200 with something that is not a turn's reply.
    BadAnswer(String),
}

impl fmt::Display for TurnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TurnError::Unreachable(why) => write!(f, "Hermes API server unreachable: {why}"),
            TurnError::TimedOut(limit) => {
                write!(f, "Hermes gave no answer within {} s", limit.as_secs())
            }
            TurnError::Status(status, text) => {
                write!(f, "Hermes answered HTTP {status}: {text}")
            }
            TurnError::BadAnswer(why) => write!(f, "Hermes's answer is not a reply: {why}"),
        }
    }
}

/// A client of one agent's Hermes API server.
#[derive(Clone)]
pub struct HermesClient {
    base: String,
    authorization: Option<String>,
    turn_timeout: Duration,
    agent: Agent,
}

impl HermesClient {
    /// A client for the API server at `base` (`http://host:port`, no
    /// trailing `/`), sending `key` as a bearer token when given; each
    /// request may take at most `turn_timeout` from connecting to the last
    /// byte of the answer.
    pub fn new(base: &str, key: Option<&str>, turn_timeout: Duration) -> Self {
        let agent = Agent::config_builder()
            .timeout_global(Some(turn_timeout))
            .timeout_connect(Some(CONNECT_TIMEOUT.min(turn_timeout)))
            // Error answers carry Hermes's reason: read them.
            .http_status_as_error(false)
            // A redirected POST could run the turn twice.
            .max_redirects(0)
            .build()
            .into();
        Self {
            base: base.trim_end_matches('/').to_owned(),
            authorization: key.map(|k| format!("Bearer {k}")),
            turn_timeout,
            agent,
        }
    }

    /// The API server's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Run one turn: `message` as the user's line in `session_id`; the
    /// assistant's reply text (Hermes stores both in the session). When
    /// Hermes does not have the session and `create` is set (the agent's
    /// own XMPP session, which Hermes has not seen yet), it is created
    /// empty first and the turn asked again once.
    ///
    /// Errors: [`TurnError`]; an empty reply is [`TurnError::BadAnswer`].
    pub fn turn(&self, session_id: &str, message: &str, create: bool) -> Result<String, TurnError> {
        let url = format!("{}/api/sessions/{}/chat", self.base, encode(session_id));
        let body = json!({ "message": message });
        let (status, text) = self.post(&url, &body)?;
        let (status, text) = if status == 404 && create && not_found(&text) {
            self.create(session_id)?;
            self.post(&url, &body)?
        } else {
            (status, text)
        };
        if status != 200 {
            return Err(TurnError::Status(status, quote(&text)));
        }
        let answer: Value = serde_json::from_str(&text)
            .map_err(|e| TurnError::BadAnswer(format!("not JSON ({e}): {}", quote(&text))))?;
        match answer["message"]["content"].as_str() {
            Some(reply) if !reply.trim().is_empty() => Ok(reply.to_owned()),
            Some(_) => Err(TurnError::BadAnswer("the reply is empty".into())),
            None => Err(TurnError::BadAnswer(format!(
                "no message.content: {}",
                quote(&text)
            ))),
        }
    }

    /// `GET /health`: `Ok` on 200, else why not.
    pub fn health(&self) -> Result<(), TurnError> {
        let url = format!("{}/health", self.base);
        let mut response = self
            .agent
            .get(&url)
            .call()
            .map_err(|e| self.unanswered(e))?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        match status {
            200 => Ok(()),
            _ => Err(TurnError::Status(status, quote(&text))),
        }
    }

    /// `POST /api/sessions {"id": session_id}`; 409 (created meanwhile) is
    /// success too.
    fn create(&self, session_id: &str) -> Result<(), TurnError> {
        let url = format!("{}/api/sessions", self.base);
        let (status, text) = self.post(&url, &json!({ "id": session_id }))?;
        match status {
            200 | 201 | 409 => Ok(()),
            _ => Err(TurnError::Status(status, quote(&text))),
        }
    }

    fn post(&self, url: &str, body: &Value) -> Result<(u16, String), TurnError> {
        let mut request = self.agent.post(url);
        if let Some(auth) = &self.authorization {
            request = request.header("Authorization", auth);
        }
        let mut response = request.send_json(body).map_err(|e| self.unanswered(e))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| self.unanswered(e))?;
        Ok((status, text))
    }

    fn unanswered(&self, error: ureq::Error) -> TurnError {
        match error {
            ureq::Error::Timeout(_) => TurnError::TimedOut(self.turn_timeout),
            other => TurnError::Unreachable(format!("{} ({other})", self.base)),
        }
    }
}

/// Hermes's 404 for a session it does not have (`session_not_found`), not
/// a route it lacks (an API server before 0.17).
fn not_found(text: &str) -> bool {
    serde_json::from_str::<Value>(text)
        .map(|v| v["error"]["code"] == "session_not_found")
        .unwrap_or(false)
}

/// A path segment: every byte but RFC 3986's unreserved ones
/// percent-encoded (session ids may hold `:`, `#`, `?`, spaces).
fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The start of an answer, on one line.
fn quote(text: &str) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(QUOTE_CHARS)
        .collect();
    if text.chars().count() > QUOTE_CHARS {
        format!("{one_line}…")
    } else {
        one_line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_one_path_segment() {
        assert_eq!(encode("xmpp-mohe-v2"), "xmpp-mohe-v2");
        assert_eq!(encode("20260619_190821_7c0afe"), "20260619_190821_7c0afe");
        assert_eq!(encode("a b/c?d#é"), "a%20b%2Fc%3Fd%23%C3%A9");
    }

    #[test]
    fn only_a_missing_session_is_created() {
        assert!(not_found(
            r#"{"error": {"message": "Session not found: x", "code": "session_not_found"}}"#
        ));
        assert!(!not_found("404: Not Found"));
    }

    #[test]
    fn a_server_that_is_down_is_unreachable() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let client = HermesClient::new(
            &format!("http://127.0.0.1:{port}"),
            None,
            Duration::from_secs(2),
        );
        match client.turn("xmpp-mohe", "hi", true) {
            Err(TurnError::Unreachable(why)) => assert!(why.contains("127.0.0.1"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
