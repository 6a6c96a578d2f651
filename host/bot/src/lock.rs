//! One bot per agent on one machine: an exclusive `flock` on a file named
//! after the agent's bare JID, held for the life of the process, as
//! Hermes's gateway takes a scoped lock per credential. The kernel drops
//! the lock when the process dies, however it dies, so no stale lock needs
//! cleaning; the holder's PID is written into the file for the refusal.

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use session_switch::{Failure, FailureKind};
use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The held lock; dropping it (or the process ending) releases it.
#[derive(Debug)]
pub struct BotLock {
    _file: Flock<File>,
    pub path: PathBuf,
}

/// The folder of the bots' lock files: Hermes's own folder of machine-local
/// gateway locks, by Hermes's rule — `HERMES_GATEWAY_LOCK_DIR`, else
/// `$XDG_STATE_HOME/hermes/gateway-locks` (an absolute `XDG_STATE_HOME`
/// only), else `~/.local/state/hermes/gateway-locks`. One folder per OS
/// user whatever the session, `HERMES_HOME` or service, so a bot started
/// from a shell and one started by systemd find each other's lock, as two
/// Hermes gateways of one credential do. `None` without any of them.
pub fn lock_dir(
    gateway_lock_dir: Option<&OsStr>,
    xdg_state_home: Option<&OsStr>,
    home: Option<&Path>,
) -> Option<PathBuf> {
    if let Some(dir) = gateway_lock_dir.filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let state_home = match xdg_state_home.map(Path::new) {
        Some(dir) if dir.is_absolute() => dir.to_path_buf(),
        _ => home?.join(".local").join("state"),
    };
    Some(state_home.join("hermes").join("gateway-locks"))
}

/// [`lock_dir`] of this process's environment.
///
/// Errors: no variable names a folder and the user has no home (kind
/// `bad-input`).
pub fn lock_dir_here() -> Result<PathBuf, Failure> {
    lock_dir(
        std::env::var_os("HERMES_GATEWAY_LOCK_DIR").as_deref(),
        std::env::var_os("XDG_STATE_HOME").as_deref(),
        std::env::home_dir().as_deref(),
    )
    .ok_or_else(|| {
        Failure::bad_input(
            "no folder for the bot's lock: the user has no home folder; set \
             HERMES_GATEWAY_LOCK_DIR (as for Hermes's gateway)",
        )
    })
}

/// The lock file of the agent whose bare JID is `jid`:
/// `session-switch-bot-JID.lock`, the JID in lower case (XMPP compares
/// local parts and domains without case), so two spellings of one account
/// share one lock.
pub fn lock_path(dir: &Path, jid: &str) -> PathBuf {
    dir.join(format!("session-switch-bot-{}.lock", jid.to_lowercase()))
}

/// Take `agent`'s lock at `path`, creating the file and its folder, and
/// write this process's PID into it.
///
/// Errors: another process holds it (kind `busy`, naming its PID); the
/// folder or file cannot be made or locked (kind `transport`).
pub fn take(path: &Path, agent: &str) -> Result<BotLock, Failure> {
    let cannot = |what: &str, e: &dyn std::fmt::Display| {
        Failure::transport(format!(
            "cannot {what} the bot's lock {}: {e}",
            path.display()
        ))
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| cannot("make the folder of", &e))?;
    }
    // Not truncated on open: the holder's PID must stay readable to the
    // process that is refused.
    let file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| cannot("open", &e))?;
    let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => lock,
        Err((mut file, Errno::EWOULDBLOCK)) => return Err(held(&mut file, path, agent)),
        Err((_, e)) => return Err(cannot("take", &e)),
    };
    file.set_len(0).map_err(|e| cannot("write", &e))?;
    file.rewind().map_err(|e| cannot("write", &e))?;
    writeln!(file, "{}", std::process::id()).map_err(|e| cannot("write", &e))?;
    Ok(BotLock {
        _file: file,
        path: path.to_path_buf(),
    })
}

/// Whether a bot of `agent` holds its lock at `path` now, without taking
/// it for longer than the look: `Ok(())` when no process holds it (or
/// there is no lock file yet). Nothing is written.
///
/// Errors: another process holds it (kind `busy`, naming its PID, as
/// [`take`] says it); the file cannot be opened or locked (kind
/// `transport`).
pub fn check(path: &Path, agent: &str) -> Result<(), Failure> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(Failure::transport(format!(
                "cannot open the bot's lock {}: {e}",
                path.display()
            )));
        }
    };
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(_released_on_drop) => Ok(()),
        Err((mut file, Errno::EWOULDBLOCK)) => Err(held(&mut file, path, agent)),
        Err((_, e)) => Err(Failure::transport(format!(
            "cannot look at the bot's lock {}: {e}",
            path.display()
        ))),
    }
}

/// The refusal for a lock another process holds, naming the PID it wrote.
fn held(file: &mut File, path: &Path, agent: &str) -> Failure {
    let mut text = String::new();
    let _ = file.read_to_string(&mut text);
    let holder = match text.trim().parse::<u32>() {
        Ok(pid) => format!("PID {pid}"),
        Err(_) => "a process that has not written its PID yet".to_owned(),
    };
    Failure::new(
        FailureKind::Busy,
        format!(
            "another bot of {agent} runs on this machine: {holder} holds {} \
             (stop it first; one bot per agent)",
            path.display()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_lives_where_hermes_keeps_its_gateway_locks_named_by_the_jid() {
        let home = Some(Path::new("/home/a"));
        let os = |s: &'static str| Some(OsStr::new(s));
        assert_eq!(
            lock_dir(os("/locks"), os("/state"), home),
            Some(PathBuf::from("/locks"))
        );
        assert_eq!(
            lock_dir(os(""), os("/state"), home),
            Some(PathBuf::from("/state/hermes/gateway-locks"))
        );
        // A relative XDG_STATE_HOME is invalid by the XDG spec: ignored.
        assert_eq!(
            lock_dir(None, os("state"), home),
            Some(PathBuf::from("/home/a/.local/state/hermes/gateway-locks"))
        );
        assert_eq!(
            lock_dir(None, None, home),
            Some(PathBuf::from("/home/a/.local/state/hermes/gateway-locks"))
        );
        assert_eq!(lock_dir(None, None, None), None);
        assert_eq!(
            lock_path(Path::new("/l"), "MoHe@Example.org"),
            PathBuf::from("/l/session-switch-bot-mohe@example.org.lock")
        );
    }

    #[test]
    fn no_lock_file_is_no_bot() {
        check(Path::new("/nonexistent/bot-mohe@example.org.lock"), "mohe").unwrap();
    }

    #[test]
    fn a_second_lock_is_refused_naming_the_holders_pid_and_freed_on_drop() {
        let dir = std::env::temp_dir().join(format!("ss-bot-lock-{}", std::process::id()));
        let path = lock_path(&dir.join("sub"), "mohe@example.org");
        let held = take(&path, "mohe").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("{}\n", std::process::id()));
        // flock locks belong to the open file description: a second open
        // in the same process is refused as another process would be.
        let refused = take(&path, "mohe").unwrap_err();
        assert_eq!(refused.kind, FailureKind::Busy);
        assert_eq!(refused.exit_status(), 2);
        assert!(
            refused
                .message
                .contains(&format!("PID {} holds", std::process::id())),
            "{}",
            refused.message
        );
        let looked = check(&path, "mohe").unwrap_err();
        assert_eq!(looked.kind, FailureKind::Busy);
        assert_eq!(looked.message, refused.message);
        drop(held);
        check(&path, "mohe").unwrap();
        let again = take(&path, "mohe").unwrap();
        drop(again);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
