//! The `ejabberdctl` transport: run ejabberd's command line, directly or
//! through `docker exec`, with no shell and a time limit.
//!
//! Facts it rests on (docs/src/design/ejabberd-facts.md, verified on Debian's ejabberd 23.01):
//! - the Erlang VM decodes argv by the locale: without `LC_ALL=C.UTF-8`
//!   non-ASCII text arrives double-encoded (`中文` → `ä¸­æ`), and `docker
//!   exec` does not pass the caller's environment, hence `-e LC_ALL=C.UTF-8`;
//! - errors are printed on stdout; exit 1 = command error (bad JID, usage),
//!   3 = node down, 7 = wrong OS user (Debian's script runs only as root or
//!   `ejabberd`); 126/127 come from the shell wrapper (not executable or an
//!   argument over 128 KiB / command not found);
//! - each call boots an Erlang VM through `su` → `sh` → `erl`, so a time-out
//!   must kill the whole process group, not just the direct child.

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use wait_timeout::ChildExt;

use super::{RoomJid, Transport};
use session_switch_contract::failure::{Failure, FailureKind};

/// The locale the child runs under; see the module docs.
const LOCALE: &str = "LC_ALL=C.UTF-8";

/// Linux's limit on one argv string, NUL included (`MAX_ARG_STRLEN`, 32
/// pages): a longer body fails at exec with E2BIG (docs/src/design/ejabberd-facts.md: "one argument
/// is limited to 128 KiB").
const MAX_ARG_BYTES: usize = 128 * 1024 - 1;

/// How much of each output stream is kept for error messages; the rest is
/// read and dropped so the child never blocks on a full pipe.
const KEEP_OUTPUT_BYTES: u64 = 1 << 20;

/// `ejabberdctl` as an argument list from the config (`[xmpp] ejabberdctl`):
/// `["ejabberdctl"]`, a path, or the legacy `xmpp_session_bridge.py`'s
/// production form `["docker", "exec", "ejabberd", "ejabberdctl"]`. Never run
/// through a shell.
#[derive(Clone, Debug)]
pub struct EjabberdCtl {
    /// The command prefix as run (with `-e LC_ALL=C.UTF-8` after `exec` for
    /// docker/podman); ejabberd's command and its arguments follow it.
    argv: Vec<String>,
    timeout: Duration,
}

/// What one finished call printed, and how it ended.
struct Finished {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Why a call gave no answer.
enum NoAnswer {
    /// The command could not be started at all (nothing was run).
    Spawn(io::Error),
    /// No exit within the time limit; the process group was killed.
    TimedOut,
}

impl EjabberdCtl {
    /// A transport running `argv` followed by ejabberd's command. `timeout`
    /// bounds each call, output included (default [`super::EJABBERDCTL_TIMEOUT`],
    /// 15 s). When `argv` is `docker exec …` or `podman exec …` (by the file
    /// name of `argv[0]`), `-e LC_ALL=C.UTF-8` is inserted right after
    /// `exec`: the container runtime does not pass our environment.
    ///
    /// Errors (`bad-input`): an empty `argv`, an empty `argv[0]`, a zero
    /// `timeout`.
    pub fn new(argv: Vec<String>, timeout: Duration) -> Result<Self, Failure> {
        if argv.first().is_none_or(|program| program.trim().is_empty()) {
            return Err(Failure::bad_input(
                "[xmpp] ejabberdctl is empty; give the command as a list, e.g. [\"ejabberdctl\"] \
                 or [\"docker\", \"exec\", \"ejabberd\", \"ejabberdctl\"]",
            ));
        }
        if timeout.is_zero() {
            return Err(Failure::bad_input(
                "the ejabberdctl time limit is zero; give it in seconds, e.g. 15",
            ));
        }
        let mut argv = argv;
        let runtime = argv[0].rsplit('/').next().unwrap_or_default();
        if matches!(runtime, "docker" | "podman") && argv.get(1).is_some_and(|a| a == "exec") {
            argv.splice(2..2, ["-e".to_owned(), LOCALE.to_owned()]);
        }
        Ok(Self { argv, timeout })
    }

    /// The command prefix as it is run (after the `-e` insertion).
    pub fn argv(&self) -> &[String] {
        &self.argv
    }

    /// The time limit of one call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// `argv` + `command` for messages: the configured prefix and the
    /// ejabberd command, never the body.
    fn describe(&self, command: &str) -> String {
        format!("`{} {command}`", self.argv.join(" "))
    }

    /// Run `argv` + `args` under `LC_ALL=C.UTF-8` in a new process group,
    /// stdin closed, both outputs read on their own threads (no deadlock on
    /// a full pipe). On time-out the whole group gets SIGKILL: `ejabberdctl`
    /// runs `su` → `sh` → `erl`, and killing only the first would leave the
    /// VM running with our pipes open.
    fn run(&self, args: &[&str]) -> Result<Finished, NoAnswer> {
        let deadline = Instant::now() + self.timeout;
        let mut child = Command::new(&self.argv[0])
            .args(&self.argv[1..])
            .args(args)
            .env("LC_ALL", "C.UTF-8")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(NoAnswer::Spawn)?;
        // The child leads its own group, so its pid is the group id.
        let group = Pid::from_raw(child.id() as i32);
        let stdout = read_in_background(child.stdout.take());
        let stderr = read_in_background(child.stderr.take());

        let status = match child.wait_timeout(self.timeout) {
            Ok(Some(status)) => status,
            Ok(None) | Err(_) => return Err(kill_group(&mut child, group)),
        };
        // The leader's status is the answer. A member of its group still
        // holding the pipes open past the deadline (the group then still
        // exists, so its id cannot have been reused) is killed, and what
        // was read so far is kept.
        let left = || deadline.saturating_duration_since(Instant::now());
        let (out, err) = (stdout.recv_timeout(left()), stderr.recv_timeout(left()));
        let (out, err) = if out.is_ok() && err.is_ok() {
            (out, err)
        } else {
            let _ = killpg(group, Signal::SIGKILL);
            let grace = Duration::from_secs(1);
            (
                out.or_else(|_| stdout.recv_timeout(grace)),
                err.or_else(|_| stderr.recv_timeout(grace)),
            )
        };
        Ok(Finished {
            status,
            stdout: out.unwrap_or_default(),
            stderr: err.unwrap_or_default(),
        })
    }

    /// The failure for a call that gave no answer. `posting`: whether the
    /// call was `send_stanza`, whose time-out leaves the room's state
    /// unknown (the VM may have routed the message before it was killed).
    fn no_answer(&self, command: &str, why: NoAnswer, posting: bool) -> Failure {
        let what = self.describe(command);
        match why {
            NoAnswer::Spawn(e) => {
                let hint = match e.kind() {
                    io::ErrorKind::NotFound => "command not found",
                    io::ErrorKind::PermissionDenied => "permission denied (not executable?)",
                    _ => "could not start it",
                };
                Failure::transport(format!(
                    "cannot run {what}: {hint} ({e}); fix [xmpp] ejabberdctl in the config \
                     (e.g. [\"ejabberdctl\"] or [\"docker\", \"exec\", \"ejabberd\", \"ejabberdctl\"])"
                ))
            }
            NoAnswer::TimedOut if posting => Failure::new(
                FailureKind::UnknownOutcome,
                format!(
                    "no answer from {what} within {} s (the process was killed); the room may \
                     have the message: look before sending it again",
                    self.timeout.as_secs_f64()
                ),
            ),
            NoAnswer::TimedOut => Failure::transport(format!(
                "no answer from {what} within {} s (the process was killed); is the ejabberd \
                 node up, and does the command return?",
                self.timeout.as_secs_f64()
            )),
        }
    }

    /// The failure for a call that exited non-zero (or was killed by a
    /// signal not ours), from its status and what it printed.
    fn failed(&self, command: &str, done: &Finished) -> Failure {
        let what = self.describe(command);
        let said = server_text(done);
        let Some(code) = done.status.code() else {
            let signal = done.status.signal().unwrap_or_default();
            return Failure::transport(format!("{what} was killed by signal {signal}: {said}"));
        };
        let message = match code {
            3 => format!(
                "the ejabberd node is down or unreachable: {what} exited 3 ({said}); start \
                 ejabberd, or fix [xmpp] ejabberdctl to reach its node"
            ),
            7 => format!(
                "{what} refused to run as this OS user (exit 7: {said}); Debian's ejabberdctl \
                 runs only as root or as user ejabberd"
            ),
            126 => format!(
                "{what} could not execute ejabberdctl (exit 126: not executable, or an \
                 argument over 128 KiB): {said}"
            ),
            127 => format!(
                "{what}: command not found (exit 127: {said}); fix [xmpp] ejabberdctl in \
                 the config"
            ),
            _ => format!("{what} failed (exit {code}): {said}"),
        };
        Failure::transport(message)
    }
}

impl Transport for EjabberdCtl {
    /// `ejabberdctl get_subscribers NAME SERVICE`: one bare JID per line.
    fn check_sender(&self, from: &str, room: &str) -> Result<(), Failure> {
        let jid = RoomJid::parse(room)?;
        if from.trim().is_empty() {
            return Err(Failure::bad_input(
                "the sender JID is empty; set the agent's jid in the config",
            ));
        }
        let done = self
            .run(&["get_subscribers", jid.name, jid.service])
            .map_err(|why| self.no_answer("get_subscribers", why, false))?;
        if !done.status.success() {
            let said = server_text(&done);
            if done.status.code() == Some(1) && super::server_answers::says_no_such_room(&said) {
                return Err(super::server_answers::no_such_room(room, &said));
            }
            return Err(self.failed("get_subscribers", &done));
        }
        if super::server_answers::is_subscriber(from, done.stdout.lines()) {
            Ok(())
        } else {
            Err(super::server_answers::not_subscriber(from, room))
        }
    }

    /// `ejabberdctl send_stanza FROM ROOM STANZA` ([`super::human_stanza`]):
    /// each one argv entry, so the stanza reaches ejabberd verbatim (no
    /// shell; ejabberdctl parses options only before the command name), and
    /// the body inside it is escaped for XML, so the room gets it byte for
    /// byte.
    fn post(&self, from: &str, room: &str, body: &str) -> Result<(), Failure> {
        RoomJid::parse(room)?;
        super::stanza::refuse_unpostable(from, body)?;
        let stanza = super::stanza::human_stanza(body, &super::stanza::new_stanza_id());
        if stanza.len() > MAX_ARG_BYTES {
            return Err(Failure::bad_input(format!(
                "the message body is {} bytes ({} as an XML stanza), but one ejabberdctl \
                 argument can hold at most {MAX_ARG_BYTES} (Linux MAX_ARG_STRLEN); nothing was \
                 posted: shorten it or use transport = \"http\"",
                body.len(),
                stanza.len()
            )));
        }
        let done = self
            .run(&["send_stanza", from, room, &stanza])
            .map_err(|why| self.no_answer("send_stanza", why, true))?;
        if done.status.success() {
            Ok(())
        } else {
            Err(self.failed("send_stanza", &done))
        }
    }

    /// `ejabberdctl get_room_options NAME SERVICE`: one `name<TAB>value`
    /// line per option, none for a room that does not exist.
    fn room_options(&self, room: &str) -> Result<Option<BTreeMap<String, String>>, Failure> {
        let jid = RoomJid::parse(room)?;
        let done = self
            .run(&["get_room_options", jid.name, jid.service])
            .map_err(|why| self.no_answer("get_room_options", why, false))?;
        if !done.status.success() {
            return Err(self.failed("get_room_options", &done));
        }
        let options: BTreeMap<String, String> = done
            .stdout
            .lines()
            .filter_map(|line| line.split_once('\t'))
            .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
            .collect();
        Ok((!options.is_empty()).then_some(options))
    }

    fn name(&self) -> &'static str {
        "ejabberdctl"
    }
}

/// Read `pipe` to its end on a new thread; the text (lossy UTF-8, at most
/// [`KEEP_OUTPUT_BYTES`]) arrives on the returned channel.
fn read_in_background(pipe: Option<impl Read + Send + 'static>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut kept = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.by_ref().take(KEEP_OUTPUT_BYTES).read_to_end(&mut kept);
            let _ = io::copy(&mut pipe, &mut io::sink());
        }
        let _ = tx.send(String::from_utf8_lossy(&kept).into_owned());
    });
    rx
}

/// SIGKILL the child's whole group, then reap the child.
fn kill_group(child: &mut Child, group: Pid) -> NoAnswer {
    let _ = killpg(group, Signal::SIGKILL);
    let _ = child.kill();
    let _ = child.wait();
    NoAnswer::TimedOut
}

/// The part of a failed call's output that says what went wrong, on one
/// line: ejabberdctl prints `Error: …` / `Failed RPC connection …` lines
/// (on stdout) followed by a long usage text, so those lines win; else the
/// first lines of stderr, then of stdout.
fn server_text(done: &Finished) -> String {
    let is_error = |line: &&str| {
        let line = line.trim_start();
        ["Error", "ERROR", "Failed", "{error"]
            .iter()
            .any(|p| line.starts_with(p))
    };
    let errors: Vec<&str> = done
        .stdout
        .lines()
        .chain(done.stderr.lines())
        .filter(is_error)
        .collect();
    let text = if !errors.is_empty() {
        errors.join(" ")
    } else {
        let first = |s: &str| {
            s.lines()
                .filter(|l| !l.trim().is_empty())
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        };
        match (first(&done.stderr), first(&done.stdout)) {
            (e, _) if !e.is_empty() => e,
            (_, o) if !o.is_empty() => o,
            _ => "it printed nothing".to_owned(),
        }
    };
    super::server_answers::one_line(&text, 300)
}

#[cfg(test)]
mod tests;
