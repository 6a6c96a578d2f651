//! A fake OpenAI-compatible LLM on loopback for the real Hermes API server
//! (the project's own): records
//! the `messages` of every chat completion and answers `FAKE-REPLY N`,
//! streamed or not, N counting the agent turns from 1. A last user message
//! whose last line contains [`LOOP`] gets a reply that names every agent of
//! [`FakeLlm::start`] (`@mohe @zhiwei …`), so bots that answer each other
//! keep going until the loop guard stops them.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// The word that makes a reply name every agent.
pub const LOOP: &str = "LOOP-PLEASE";

/// The start of every reply.
pub const REPLY: &str = "FAKE-REPLY";

#[derive(Default)]
struct State {
    turns: Vec<Value>,
    failing: bool,
    /// How long an agent turn's answer waits after the request came.
    delay: Duration,
}

/// The fake LLM; its thread ends with the process (the listener is leaked
/// on purpose: a test's gateway may call it until the test's last line).
pub struct FakeLlm {
    /// The loopback port it listens on.
    pub port: u16,
    state: Arc<Mutex<State>>,
}

impl FakeLlm {
    /// Listen on a free loopback port; `agents`: the names a [`LOOP`] reply
    /// mentions.
    pub fn start(agents: &[&str]) -> FakeLlm {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake LLM");
        let port = listener.local_addr().unwrap().port();
        let state: Arc<Mutex<State>> = Arc::default();
        let shared = Arc::clone(&state);
        let mentions: String = agents.iter().map(|a| format!(" @{a}")).collect();
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let shared = Arc::clone(&shared);
                let mentions = mentions.clone();
                thread::spawn(move || {
                    let _ = serve(stream, &shared, &mentions);
                });
            }
        });
        FakeLlm { port, state }
    }

    /// The agent turns so far (Hermes streams every agent turn): each
    /// request's body.
    pub fn turns(&self) -> Vec<Value> {
        self.state.lock().unwrap().turns.clone()
    }

    /// While `failing`, every chat completion is answered HTTP 500 (and not
    /// counted as a turn): Hermes's turn fails after its retries.
    pub fn set_failing(&self, failing: bool) {
        self.state.lock().unwrap().failing = failing;
    }

    /// Answer each agent turn `delay` after its request came (a model
    /// thinking): a test can act while Hermes waits for it.
    pub fn set_delay(&self, delay: Duration) {
        self.state.lock().unwrap().delay = delay;
    }

    /// The last user message of each agent turn so far, as text.
    pub fn turn_messages(&self) -> Vec<String> {
        self.turns().iter().map(last_user_text).collect()
    }
}

/// The text of the last user message of a request body.
pub fn last_user_text(body: &Value) -> String {
    let Some(messages) = body["messages"].as_array() else {
        return String::new();
    };
    let Some(last) = messages.iter().rev().find(|m| m["role"] == "user") else {
        return String::new();
    };
    match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn serve(stream: TcpStream, state: &Mutex<State>, mentions: &str) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line)? == 0 {
            return Ok(());
        }
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            reader.read_line(&mut header)?;
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        if request_line.starts_with("GET") {
            let models = json!({"object": "list", "data": [
                {"id": "fake-model", "object": "model", "context_length": 131072}]});
            respond_json(&mut writer, &models)?;
            continue;
        }
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if state.lock().unwrap().failing {
            let error = json!({"error": {"message": "fake LLM failing", "type": "server_error"}});
            let data = error.to_string();
            write!(
                writer,
                "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\n\r\n{data}",
                data.len()
            )?;
            writer.flush()?;
            continue;
        }
        let stream_reply = body["stream"] == true;
        let text = if stream_reply {
            let (n, delay) = {
                let mut s = state.lock().unwrap();
                s.turns.push(body.clone());
                (s.turns.len(), s.delay)
            };
            thread::sleep(delay);
            // The line answered is the last one: lines heard earlier (a
            // bot passes them with its turn) ask for nothing.
            let answered = last_user_text(&body);
            if answered.lines().last().unwrap_or("").contains(LOOP) {
                format!("{REPLY} {n} {LOOP}{mentions}")
            } else {
                format!("{REPLY} {n}")
            }
        } else {
            // Auxiliary calls (titles, summaries) are not agent turns.
            "fake auxiliary answer".to_owned()
        };
        let usage = json!({"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14});
        if !stream_reply {
            respond_json(
                &mut writer,
                &json!({"id": "c1", "object": "chat.completion", "created": 0,
                    "model": "fake-model", "usage": usage,
                    "choices": [{"index": 0, "finish_reason": "stop",
                        "message": {"role": "assistant", "content": text}}]}),
            )?;
            continue;
        }
        write!(
            writer,
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        )?;
        for (delta, finish) in [
            (json!({"role": "assistant", "content": ""}), Value::Null),
            (json!({"content": text}), Value::Null),
            (json!({}), json!("stop")),
        ] {
            let mut event = json!({"id": "c1", "object": "chat.completion.chunk", "created": 0,
                "model": "fake-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
            if finish != Value::Null {
                event["usage"] = usage.clone();
            }
            write!(writer, "data: {event}\n\n")?;
        }
        write!(writer, "data: [DONE]\n\n")?;
        writer.flush()?;
        return Ok(());
    }
}

fn respond_json(writer: &mut TcpStream, value: &Value) -> std::io::Result<()> {
    let data = value.to_string();
    write!(
        writer,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{data}",
        data.len()
    )?;
    writer.flush()
}
