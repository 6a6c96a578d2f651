//! The agent's Hermes API server, as the bot drives it: one turn in a
//! session (`POST /v1/chat/completions` with `X-Hermes-Session-Id`, which
//! loads the session's history with Hermes's own loader, stores the turn
//! there and creates a session Hermes has not seen), and `GET /health`
//! for `--once`.
//!
//! Not `POST /api/sessions/{id}/chat`: on 0.19.0 and the v31 line it
//! answers a failed turn (the LLM unreachable, credits exhausted) with
//! HTTP 200 and Hermes's error text as the assistant's message, which the
//! bot would post to the room; chat completions flag it
//! (`finish_reason: "error"`, `hermes.failed`). Both are public routes:
//! no private seam of Hermes's is used. With the session-switch plugin
//! loaded, its `_run_agent` wrapper applies the policy's `[YOU]` edits to
//! the history of an XMPP session.
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
    /// Hermes ran the turn and it failed (its error, e.g. the LLM
    /// unreachable); Hermes may have stored its error text in the session.
    Failed(String),
    /// Hermes answered 200 with something that is not a turn's reply.
    BadAnswer(String),
}

impl TurnError {
    /// Whether Hermes has the turn's line in the session anyway: a failed
    /// turn stores the user's message (Hermes persists it before the LLM
    /// call), and a timed-out one is still running there. Otherwise the
    /// line never reached Hermes.
    pub fn line_stored(&self) -> bool {
        matches!(self, TurnError::Failed(_) | TurnError::TimedOut(_))
    }
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
            TurnError::Failed(why) => write!(f, "Hermes's turn failed: {why}"),
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
    /// assistant's reply text (Hermes stores both in the session, creating
    /// it when it has none of that id).
    ///
    /// Errors: [`TurnError`]; a reply Hermes flags as failed is
    /// [`TurnError::Failed`], an empty one [`TurnError::BadAnswer`].
    pub fn turn(&self, session_id: &str, message: &str) -> Result<String, TurnError> {
        let url = format!("{}/v1/chat/completions", self.base);
        let body = json!({
            "model": "hermes-agent",
            "stream": false,
            "messages": [{"role": "user", "content": message}],
        });
        let mut request = self
            .agent
            .post(&url)
            .header("X-Hermes-Session-Id", session_id);
        if let Some(auth) = &self.authorization {
            request = request.header("Authorization", auth);
        }
        let mut response = request.send_json(&body).map_err(|e| self.unanswered(e))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| self.unanswered(e))?;
        if status != 200 {
            return Err(TurnError::Status(status, quote(&text)));
        }
        let answer: Value = serde_json::from_str(&text)
            .map_err(|e| TurnError::BadAnswer(format!("not JSON ({e}): {}", quote(&text))))?;
        reply_of(&answer)
    }

    /// `GET /health`, then `GET /v1/models` with the key: `Ok` when both
    /// answer 200, else why not. The health route asks for no key; the
    /// models route checks it as a turn does, so a wrong key shows here
    /// (HTTP 401) rather than at the first turn.
    pub fn health(&self) -> Result<(), TurnError> {
        self.get_ok("/health")?;
        self.get_ok("/v1/models")
    }

    fn get_ok(&self, path: &str) -> Result<(), TurnError> {
        let mut request = self.agent.get(&format!("{}{path}", self.base));
        if let Some(auth) = &self.authorization {
            request = request.header("Authorization", auth);
        }
        let mut response = request.call().map_err(|e| self.unanswered(e))?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        match status {
            200 => Ok(()),
            401 | 403 => Err(TurnError::Status(
                status,
                format!("{path} refused the API server key: {}", quote(&text)),
            )),
            _ => Err(TurnError::Status(
                status,
                format!("{path}: {}", quote(&text)),
            )),
        }
    }

    fn unanswered(&self, error: ureq::Error) -> TurnError {
        match error {
            ureq::Error::Timeout(_) => TurnError::TimedOut(self.turn_timeout),
            other => TurnError::Unreachable(format!("{} ({other})", self.base)),
        }
    }
}

/// The reply of a chat completion, or why it is none.
fn reply_of(answer: &Value) -> Result<String, TurnError> {
    let choice = &answer["choices"][0];
    let content = choice["message"]["content"].as_str();
    if choice["finish_reason"] == "error" || answer["hermes"]["failed"] == true {
        let why = answer["hermes"]["error"]
            .as_str()
            .or(content)
            .unwrap_or("no reason given");
        return Err(TurnError::Failed(quote(why)));
    }
    match content {
        Some(reply) if !reply.trim().is_empty() => Ok(reply.to_owned()),
        Some(_) => Err(TurnError::BadAnswer("the reply is empty".into())),
        None => Err(TurnError::BadAnswer(format!(
            "no choices[0].message.content: {}",
            quote(&answer.to_string())
        ))),
    }
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
    fn a_failed_turn_is_no_reply() {
        let failed = json!({"choices": [{"message": {"role": "assistant",
            "content": "API call failed after 3 retries: Connection error."},
            "finish_reason": "error"}],
            "hermes": {"failed": true, "error": "Connection error."}});
        assert_eq!(
            reply_of(&failed),
            Err(TurnError::Failed("Connection error.".into()))
        );
        let ok = json!({"choices": [{"message": {"role": "assistant", "content": "hi"},
            "finish_reason": "stop"}]});
        assert_eq!(reply_of(&ok), Ok("hi".into()));
        let empty = json!({"choices": [{"message": {"content": " "}, "finish_reason": "stop"}]});
        assert!(matches!(reply_of(&empty), Err(TurnError::BadAnswer(_))));
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
        match client.turn("xmpp-mohe", "hi") {
            Err(TurnError::Unreachable(why)) => assert!(why.contains("127.0.0.1"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
