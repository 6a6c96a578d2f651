//! A MUC room of one test's own on the test ejabberd: non-anonymous (the
//! bots see real JIDs, as the human-origin rule needs), the given agents
//! MUC/Sub subscribers (the bridge's sender check); destroyed on drop.

use crate::xmpp::Ejabberd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// The room; `ej` is the instance with `room` and `room_name` this room's.
pub struct OwnRoom {
    pub ej: Ejabberd,
}

impl OwnRoom {
    /// Create `<prefix><pid>x<n>` on `ej`'s MUC service with `agents`
    /// subscribed.
    ///
    /// # Panics
    /// When an `ejabberdctl` command fails (its output in the message).
    pub fn new(ej: &Ejabberd, prefix: &str, agents: &[&str]) -> OwnRoom {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "{prefix}{}x{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let ctl = |args: &[&str]| {
            let out = Command::new(&ej.ctl)
                .args(args)
                .env("LC_ALL", "C.UTF-8")
                .output()
                .unwrap();
            assert!(out.status.success(), "ejabberdctl {args:?}: {out:?}");
        };
        ctl(&["create_room", &name, &ej.muc_service, &ej.domain]);
        for (option, value) in [("anonymous", "false"), ("allow_subscription", "true")] {
            ctl(&["change_room_option", &name, &ej.muc_service, option, value]);
        }
        let room = format!("{name}@{}", ej.muc_service);
        for agent in agents {
            ctl(&[
                "subscribe_room",
                &ej.jid(agent),
                agent,
                &room,
                "urn:xmpp:mucsub:nodes:messages",
            ]);
        }
        let mut own = ej.clone();
        own.room = room;
        own.room_name = name;
        OwnRoom { ej: own }
    }
}

impl Drop for OwnRoom {
    fn drop(&mut self) {
        let _ = Command::new(&self.ej.ctl)
            .args(["destroy_room", &self.ej.room_name, &self.ej.muc_service])
            .output();
    }
}
