//! A real XMPP occupant that watches a test's room.
//!
//! [`RoomObserver`] runs `tests/ejabberd/muc_probe.py listen` (slixmpp, in
//! the `target/venv` that `make venv` builds) as an occupant of the room of
//! an [`Ejabberd`], so a test sees what the room really broadcast:
//! `send_message` answers success even when the room drops the message
//! (docs/src/design/ejabberd-facts.md).

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::xmpp::Ejabberd;
use crate::{venv_python, workspace_root};

/// One live groupchat message the observer received.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoomMessage {
    /// The sender's room nick (the resource of `room@service/nick`).
    pub nick: String,
    /// The body exactly as received.
    pub body: String,
    /// The stanza's `id` attribute.
    pub id: Option<String>,
    /// Its XEP-0359 `<origin-id id='…'/>`.
    pub origin_id: Option<String>,
    /// Whether it carries the bridge's human-origin marker.
    pub human_origin: bool,
    /// The sender's real bare JID, when the room exposes it (non-anonymous).
    pub jid: Option<String>,
}

#[derive(Default)]
struct Seen {
    ready: bool,
    ended: bool,
    live: Vec<RoomMessage>,
    stderr: String,
}

/// A real XMPP occupant of the room (`muc_probe.py listen`, slixmpp) that
/// records every live groupchat message; killed on drop.
pub struct RoomObserver {
    child: Child,
    nick: String,
    seen: Arc<(Mutex<Seen>, Condvar)>,
}

/// How long joining may take: far above a join on loopback.
const JOIN_LIMIT: Duration = Duration::from_secs(30);

impl RoomObserver {
    /// Join the room as `admin` under a nick unique to this process and
    /// call, so parallel tests never collide. Returns once the probe printed
    /// READY (joined), at most 30 s.
    ///
    /// # Panics
    /// When the venv is missing (`make venv`), or the probe fails or does
    /// not join in time (with its stderr).
    pub fn join(ej: &Ejabberd) -> RoomObserver {
        static COUNT: AtomicU32 = AtomicU32::new(0);
        let nick = format!(
            "observer-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        );
        Self::join_as(ej, "admin", &nick)
    }

    /// Join the room as registered `user` with room nick `nick`.
    ///
    /// # Panics
    /// As [`RoomObserver::join`].
    pub fn join_as(ej: &Ejabberd, user: &str, nick: &str) -> RoomObserver {
        let root = workspace_root();
        let python = venv_python();
        let mut child = Command::new(&python)
            .arg(root.join("tests/ejabberd/muc_probe.py"))
            .args([
                "listen",
                "--jid",
                &ej.jid(user),
                "--password",
                &ej.password(user),
            ])
            .args(["--room", &ej.room, "--nick", nick, "--host", &ej.c2s_host])
            .args(["--port", &ej.c2s_port.to_string(), "--timeout", "900"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", python.display()));
        let seen: Arc<(Mutex<Seen>, Condvar)> = Arc::default();
        let stdout = child.stdout.take().expect("piped stdout");
        let shared = Arc::clone(&seen);
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) else {
                    continue;
                };
                let (lock, cvar) = &*shared;
                let mut seen = lock.lock().unwrap();
                match event["event"].as_str() {
                    Some("READY") => seen.ready = true,
                    Some("message") if event["history"] == false => seen.live.push(RoomMessage {
                        nick: event["nick"].as_str().unwrap_or_default().to_owned(),
                        body: event["body"].as_str().unwrap_or_default().to_owned(),
                        id: event["id"].as_str().map(str::to_owned),
                        origin_id: event["origin_id"].as_str().map(str::to_owned),
                        human_origin: event["human_origin"] == true,
                        jid: event["jid"].as_str().map(str::to_owned),
                    }),
                    _ => {}
                }
                cvar.notify_all();
            }
            let (lock, cvar) = &*shared;
            lock.lock().unwrap().ended = true;
            cvar.notify_all();
        });
        let stderr = child.stderr.take().expect("piped stderr");
        let shared = Arc::clone(&seen);
        thread::spawn(move || {
            let mut text = String::new();
            let _ = BufReader::new(stderr).read_to_string(&mut text);
            shared.0.lock().unwrap().stderr = text;
        });
        let observer = RoomObserver {
            child,
            nick: nick.to_owned(),
            seen,
        };
        let deadline = Instant::now() + JOIN_LIMIT;
        let (lock, cvar) = &*observer.seen;
        let mut state = lock.lock().unwrap();
        while !state.ready && !state.ended {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "muc_probe.py did not join {} within {JOIN_LIMIT:?}",
                ej.room
            );
            state = cvar.wait_timeout(state, left).unwrap().0;
        }
        if !state.ready {
            drop(state);
            // Give the stderr reader a moment to collect the probe's last words.
            thread::sleep(Duration::from_millis(200));
            let stderr = lock.lock().unwrap().stderr.clone();
            panic!("muc_probe.py exited before joining {}: {stderr}", ej.room);
        }
        drop(state);
        observer
    }

    /// This occupant's room nick.
    pub fn nick(&self) -> &str {
        &self.nick
    }

    /// Wait at most `within` for a live message whose body equals `body`
    /// exactly; the sender's nick, or `None` on time-out (or if the probe
    /// ended). Messages received before the call count too.
    pub fn wait_for_body(&self, body: &str, within: Duration) -> Option<String> {
        let deadline = Instant::now() + within;
        let (lock, cvar) = &*self.seen;
        let mut state = lock.lock().unwrap();
        loop {
            if let Some(m) = state.live.iter().find(|m| m.body == body) {
                return Some(m.nick.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || state.ended {
                return None;
            }
            state = cvar.wait_timeout(state, left).unwrap().0;
        }
    }

    /// Every live message received so far, in arrival order.
    pub fn messages(&self) -> Vec<RoomMessage> {
        self.seen.0.lock().unwrap().live.clone()
    }

    /// How many of the live messages so far are from `nick`.
    pub fn count_from(&self, nick: &str) -> usize {
        let seen = self.seen.0.lock().unwrap();
        seen.live.iter().filter(|m| m.nick == nick).count()
    }
}

impl Drop for RoomObserver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
