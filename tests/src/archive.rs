//! The room's message archive (MAM, XEP-0313), read by a real XMPP client
//! (`tests/ejabberd/muc_probe.py mam`): what the room really kept, also
//! across a restart of ejabberd (the archive lives in Mnesia on disk),
//! where a live observer would have been disconnected.

use crate::room_observer::RoomMessage;
use crate::xmpp::Ejabberd;
use crate::{venv_python, workspace_root};
use std::process::Command;

/// Every groupchat message of `ej`'s room archive, oldest first, read as
/// `admin`.
///
/// # Panics
/// When the venv is missing (`make venv`), or the probe fails or does not
/// finish the archive (its output and stderr in the message).
pub fn read_archive(ej: &Ejabberd) -> Vec<RoomMessage> {
    let root = workspace_root();
    let python = venv_python();
    let out = Command::new(&python)
        .arg(root.join("tests/ejabberd/muc_probe.py"))
        .args([
            "mam",
            "--jid",
            &ej.jid("admin"),
            "--password",
            &ej.password("admin"),
        ])
        .args(["--room", &ej.room, "--host", &ej.c2s_host])
        .args(["--port", &ej.c2s_port.to_string(), "--timeout", "120"])
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", python.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut messages = Vec::new();
    let mut done = None;
    for line in stdout.lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        match event["event"].as_str() {
            Some("mam") if event["type"] == "groupchat" => messages.push(RoomMessage {
                nick: event["nick"].as_str().unwrap_or_default().to_owned(),
                body: event["body"].as_str().unwrap_or_default().to_owned(),
                ..RoomMessage::default()
            }),
            Some("mam_done") => done = event["count"].as_u64(),
            _ => {}
        }
    }
    assert!(
        out.status.success() && done.is_some(),
        "muc_probe.py mam did not finish ({}): {stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    messages
}
