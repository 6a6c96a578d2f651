//! An ejabberd instance of a test's own (`tests/ejabberd/start.sh` in a
//! fresh folder on free loopback ports), for a test that stops and restarts
//! ejabberd: the run's shared instance must keep serving the other tests.
//! Stopped and removed when dropped, also when the test panics.

use crate::workspace_root;
use crate::xmpp::Ejabberd;
use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A running (or stopped, between [`OwnEjabberd::stop`] and
/// [`OwnEjabberd::start`]) instance in its own folder.
pub struct OwnEjabberd {
    dir: PathBuf,
    ej: Ejabberd,
    running: bool,
}

/// Four distinct loopback ports that can be bound now, from below Linux's
/// ephemeral range (as with-ejabberd.sh picks them).
fn free_ports() -> [u16; 4] {
    let mut ports = Vec::new();
    let mut held = Vec::new();
    let mut seed = std::process::id() as u64 ^ 0x9e37_79b9;
    while ports.len() < 4 {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let port = 20_000 + (seed >> 33) as u16 % 12_000;
        if ports.contains(&port) {
            continue;
        }
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) {
            held.push(listener);
            ports.push(port);
        }
    }
    [ports[0], ports[1], ports[2], ports[3]]
}

fn script(name: &str) -> PathBuf {
    workspace_root().join("tests/ejabberd").join(name)
}

/// `export NAME='value'` lines of start.sh as a map.
fn parse_exports(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|line| line.strip_prefix("export "))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.trim_matches('\'').to_owned()))
        .collect()
}

impl OwnEjabberd {
    /// Start a fresh instance (installs nothing new if the Debian package
    /// is there; about 3–6 s). Its node name starts with `soak`.
    ///
    /// # Panics
    /// When start.sh fails (with its stderr).
    pub fn start_fresh(tag: &str) -> OwnEjabberd {
        let dir = tempfile::Builder::new()
            .prefix(&format!("session-switch-{tag}."))
            .tempdir_in("/tmp")
            .expect("temp dir")
            .keep();
        let [c2s, http, dist, tls] = free_ports();
        let node = format!(
            "{tag}{}@localhost",
            dir.extension().and_then(|e| e.to_str()).unwrap_or("x")
        );
        let out = Command::new("bash")
            .arg(script("start.sh"))
            .arg(&dir)
            .env("EJ_C2S_PORT", c2s.to_string())
            .env("EJ_C2S_TLS_PORT", tls.to_string())
            .env("EJ_HTTP_PORT", http.to_string())
            .env("EJ_DIST_PORT", dist.to_string())
            .env("EJ_NODE", &node)
            .output()
            .expect("run start.sh");
        if !out.status.success() {
            let _ = Command::new("bash")
                .arg(script("stop.sh"))
                .arg(&dir)
                .arg("--rm")
                .output();
            panic!(
                "start.sh {} failed ({}): {}",
                dir.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let ej = Ejabberd::from_vars(&parse_exports(&String::from_utf8_lossy(&out.stdout)));
        OwnEjabberd {
            dir,
            ej,
            running: true,
        }
    }

    /// The instance's coordinates (room, API URL, c2s port, …).
    pub fn ejabberd(&self) -> &Ejabberd {
        &self.ej
    }

    /// Its folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stop the node (stop.sh, about 2.5 s); the folder and its Mnesia
    /// database (accounts, room, subscriptions, archive) stay. Returns how
    /// long it took.
    ///
    /// # Panics
    /// When stop.sh fails.
    pub fn stop(&mut self) -> Duration {
        let started = Instant::now();
        let out = Command::new("bash")
            .arg(script("stop.sh"))
            .arg(&self.dir)
            .output()
            .expect("run stop.sh");
        assert!(
            out.status.success(),
            "stop.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.running = false;
        started.elapsed()
    }

    /// Start the stopped node again on the same folder and ports, and wait
    /// until it serves. Returns how long it took.
    ///
    /// # Panics
    /// When start.sh fails.
    pub fn start(&mut self) -> Duration {
        let started = Instant::now();
        let out = Command::new("bash")
            .arg(script("start.sh"))
            .arg(&self.dir)
            .output()
            .expect("run start.sh");
        assert!(
            out.status.success(),
            "restarting in {} failed: {}",
            self.dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        self.running = true;
        started.elapsed()
    }
}

impl Drop for OwnEjabberd {
    fn drop(&mut self) {
        let out = Command::new("bash")
            .arg(script("stop.sh"))
            .arg(&self.dir)
            .arg("--rm")
            .output();
        if !matches!(&out, Ok(o) if o.status.success()) {
            eprintln!(
                "could not stop and remove the ejabberd in {}: {out:?}",
                self.dir.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::script;
    use std::process::Command;

    fn stop(args: &[&std::ffi::OsStr]) -> std::process::Output {
        Command::new("bash")
            .arg(script("stop.sh"))
            .args(args)
            .output()
            .expect("run stop.sh")
    }

    /// `stop.sh DIR [--rm]` refuses anything else: `stop.sh --rm DIR` once
    /// looked for a folder named `--rm`, said "nothing to stop" and left
    /// the instance running.
    #[test]
    fn stop_refuses_an_option_out_of_place() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().as_os_str();
        for args in [["--rm".as_ref(), dir], [dir, "--bogus".as_ref()]] {
            let out = stop(&args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{args:?}: {stderr}");
            assert!(
                stderr.contains("usage: stop.sh INSTANCE_DIR [--rm]"),
                "{args:?}: {stderr}"
            );
        }
        // A folder with no instance is still nothing to stop.
        let none = std::path::Path::new(dir).join("none");
        let out = stop(&[none.as_os_str(), "--rm".as_ref()]);
        assert!(out.status.success(), "{out:?}");
    }
}
