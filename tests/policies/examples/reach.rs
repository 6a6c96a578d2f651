//! `reach`: the policy tries to reach the machine through Rust's `std`
//! instead of the host's imports (on `wasm32-unknown-unknown` every such
//! call is a stub). `resolve` stays on `session_id`, with a detail that
//! lists each attempt's result; `is-own-message` reads `std`'s clock first,
//! which panics there: the host sees a trap.

use session_switch_test_policies::policy::Reason;
use session_switch_test_policies::{Decision, Failure, Guest, Shipped, TestPolicy, with};

pub struct Reach;

impl TestPolicy for Reach {
    fn resolve(_agent: String, session_id: String) -> Result<Decision, Failure> {
        Ok(reach(&session_id))
    }
    fn is_own_message(agent: String, sender: String) -> Result<bool, Failure> {
        with(|_| {
            let now = std::time::SystemTime::now();
            std::hint::black_box(now);
        });
        Shipped::is_own_message(agent, sender)
    }
}

fn reach(session_id: &str) -> Decision {
    fn kind(r: std::io::Result<()>) -> String {
        match r {
            Ok(()) => "OK".to_string(),
            Err(e) => format!("{:?}", e.kind()),
        }
    }
    let file = kind(std::fs::read("/etc/passwd").map(drop));
    let listing = kind(std::fs::read_dir("/").map(drop));
    let connect = kind(std::net::TcpStream::connect("127.0.0.1:22").map(drop));
    let bind = kind(std::net::TcpListener::bind("127.0.0.1:0").map(drop));
    let home = std::env::var("HOME").is_ok() || std::env::var("PATH").is_ok();
    let args = std::env::args().count();
    let cwd = kind(std::env::current_dir().map(drop));
    let command = kind(
        std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg("id")
            .output()
            .map(drop),
    );
    let thread = kind(std::thread::Builder::new().spawn(|| ()).map(drop));
    Decision {
        session_id: session_id.to_string(),
        redirected: false,
        reason: Reason::NoRecord,
        detail: format!(
            "file={file} dir={listing} connect={connect} bind={bind} \
             env-home-or-path={home} args={args} cwd={cwd} command={command} thread={thread}"
        ),
        valid_until: None,
    }
}

session_switch_test_policies::export!(Reach);
