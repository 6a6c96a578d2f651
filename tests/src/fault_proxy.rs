//! An HTTP proxy in front of ejabberd's `mod_http_api` that injects the
//! faults a bridge meets in production, for the soak test: ejabberd
//! unreachable (the port refuses connections), and a post (`send_stanza`,
//! or the legacy tool's `send_message`) whose
//! answer never comes — either after ejabberd accepted it (the room has the
//! message) or before it was passed on (the room never sees it). Every
//! `send_message` it handles is logged with its fate, so a test can explain
//! each exit status 3 and check the room against it.
//!
//! One request per connection: the proxy answers `Connection: close`, so a
//! client never reuses a connection the proxy is about to drop.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// What happened to one `send_message` request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Passed on, and ejabberd's answer (this HTTP status) passed back.
    Answered(u16),
    /// Passed on and answered by ejabberd (this status), but the answer
    /// was held back: the client times out, the room has the message.
    AnswerSwallowed(u16),
    /// Held back before ejabberd saw it: the client times out, the room
    /// never gets the message.
    RequestSwallowed,
    /// ejabberd could not be reached behind the proxy; the client's
    /// connection was closed without an answer.
    UpstreamDown,
}

/// One `send_message` the proxy handled.
#[derive(Clone, Debug)]
pub struct Posted {
    /// The `body` of the request.
    pub body: String,
    pub fate: Fate,
}

struct Shared {
    upstream: SocketAddr,
    /// Refuse connections (the listener is closed) while set.
    refusing: AtomicBool,
    /// Swallow the answers of this many coming `send_message`s.
    swallow_answers: AtomicU32,
    /// Swallow this many coming `send_message` requests.
    swallow_requests: AtomicU32,
    posted: Mutex<Vec<Posted>>,
    stop: AtomicBool,
}

/// The proxy; stops when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<thread::JoinHandle<()>>,
}

impl FaultProxy {
    /// A proxy on a free loopback port in front of the HTTP server at
    /// `upstream` (`host:port`).
    ///
    /// # Panics
    /// When it cannot bind a port.
    pub fn start(upstream: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        let shared = Arc::new(Shared {
            upstream,
            refusing: AtomicBool::new(false),
            swallow_answers: AtomicU32::new(0),
            swallow_requests: AtomicU32::new(0),
            posted: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let accept = {
            let shared = shared.clone();
            thread::spawn(move || accept_loop(listener, addr, &shared))
        };
        FaultProxy {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// The `mod_http_api` base URL through the proxy (`http://127.0.0.1:PORT/api`).
    pub fn api_url(&self) -> String {
        format!("http://{}/api", self.addr)
    }

    /// Close the port (connections are refused, as when ejabberd is down)
    /// or open it again.
    pub fn set_refusing(&self, refusing: bool) {
        self.shared.refusing.store(refusing, Ordering::SeqCst);
    }

    /// Hold back the answers of the next `n` `send_message` requests (they
    /// reach ejabberd).
    pub fn swallow_answers(&self, n: u32) {
        self.shared.swallow_answers.fetch_add(n, Ordering::SeqCst);
    }

    /// Hold back the next `n` `send_message` requests (ejabberd never sees
    /// them).
    pub fn swallow_requests(&self, n: u32) {
        self.shared.swallow_requests.fetch_add(n, Ordering::SeqCst);
    }

    /// Every `send_message` handled so far, in arrival order.
    pub fn posted(&self) -> Vec<Posted> {
        self.shared
            .posted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// Accept connections until stopped; while refusing, the listener is
/// closed (the kernel refuses), and bound again on the same port after.
fn accept_loop(listener: TcpListener, addr: SocketAddr, shared: &Arc<Shared>) {
    let mut listener = Some(listener);
    while !shared.stop.load(Ordering::SeqCst) {
        if shared.refusing.load(Ordering::SeqCst) {
            listener = None;
            thread::sleep(Duration::from_millis(10));
            continue;
        }
        let Some(open) = &listener else {
            // Port reuse: std sets SO_REUSEADDR, so TIME_WAIT does not block.
            listener = TcpListener::bind(addr).ok();
            if listener.is_none() {
                thread::sleep(Duration::from_millis(10));
            }
            continue;
        };
        open.set_nonblocking(true).expect("non-blocking listener");
        match open.accept() {
            Ok((client, _)) => {
                let shared = shared.clone();
                thread::spawn(move || {
                    let _ = serve(client, &shared);
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(2));
            }
            Err(_) => thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Take one from `counter` if it is above zero.
fn take(counter: &AtomicU32) -> bool {
    counter
        .try_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

/// Read one request (head and `Content-Length` body).
fn read_request(reader: &mut BufReader<TcpStream>) -> std::io::Result<(Vec<String>, Vec<u8>)> {
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let line = line.trim_end_matches(['\r', '\n']).to_owned();
        if line.is_empty() {
            break;
        }
        head.push(line);
    }
    let length = head
        .iter()
        .find_map(|h| {
            let (name, value) = h.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok((head, body))
}

/// The text of a stanza's `<body>`, unescaped as the bridge escapes it
/// (`&amp;`, `&lt;`, `&gt;`, `&#13;`).
fn stanza_body(stanza: &str) -> String {
    let inner = stanza
        .split_once("<body>")
        .and_then(|(_, rest)| rest.split_once("</body>"))
        .map_or("", |(body, _)| body);
    inner
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#13;", "\r")
        .replace("&amp;", "&")
}

/// Serve one client connection: one request, one answer (or none).
fn serve(client: TcpStream, shared: &Shared) -> std::io::Result<()> {
    client.set_nonblocking(false)?;
    client.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut reader = BufReader::new(client.try_clone()?);
    let (head, body) = read_request(&mut reader)?;
    let path = head
        .first()
        .and_then(|line| line.split_whitespace().nth(1))
        .unwrap_or_default()
        .to_owned();
    // A post: the legacy tool's `send_message` (its `body`) or the bridge's
    // `send_stanza` (the `<body>` of its stanza).
    let message = (path.ends_with("/send_message") || path.ends_with("/send_stanza")).then(|| {
        let v = serde_json::from_slice::<serde_json::Value>(&body).unwrap_or_default();
        match (v["body"].as_str(), v["stanza"].as_str()) {
            (Some(body), _) => body.to_owned(),
            (None, Some(stanza)) => stanza_body(stanza),
            _ => String::new(),
        }
    });
    let log = |fate: Fate| {
        if let Some(body) = &message {
            shared
                .posted
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Posted {
                    body: body.clone(),
                    fate,
                });
        }
    };
    if message.is_some() && take(&shared.swallow_requests) {
        log(Fate::RequestSwallowed);
        return hold(reader);
    }
    let answer = match forward(shared.upstream, &head, &body) {
        Ok(answer) => answer,
        Err(_) => {
            log(Fate::UpstreamDown);
            return Ok(());
        }
    };
    let status = answer
        .split(|&b| b == b'\n')
        .next()
        .and_then(|line| std::str::from_utf8(line).ok())
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    if message.is_some() && take(&shared.swallow_answers) {
        log(Fate::AnswerSwallowed(status));
        return hold(reader);
    }
    log(Fate::Answered(status));
    let mut client = reader.into_inner();
    client.write_all(&answer)?;
    client.flush()
}

/// Keep the client's connection open without answering, until it gives up.
fn hold(mut reader: BufReader<TcpStream>) -> std::io::Result<()> {
    let mut sink = [0u8; 512];
    while reader.read(&mut sink)? > 0 {}
    Ok(())
}

/// Pass one request to `upstream` with `Connection: close`, and return
/// its whole answer with `Connection: close` too.
fn forward(upstream: SocketAddr, head: &[String], body: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut server = TcpStream::connect_timeout(&upstream, Duration::from_secs(2))?;
    server.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut request = String::new();
    for line in head {
        let name = line.split(':').next().unwrap_or_default();
        if !name.eq_ignore_ascii_case("connection") {
            request.push_str(line);
            request.push_str("\r\n");
        }
    }
    request.push_str("Connection: close\r\n\r\n");
    server.write_all(request.as_bytes())?;
    server.write_all(body)?;
    let mut answer = Vec::new();
    server.read_to_end(&mut answer)?;
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or(std::io::ErrorKind::InvalidData)?;
    let (answer_head, rest) = answer.split_at(split);
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(answer_head).split("\r\n") {
        let name = line.split(':').next().unwrap_or_default();
        if !name.eq_ignore_ascii_case("connection") {
            out.extend_from_slice(line.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(b"Connection: close");
    out.extend_from_slice(rest);
    Ok(out)
}
