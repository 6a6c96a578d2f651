//! A MUC room of one test's own on the test ejabberd: non-anonymous (the
//! bots see real JIDs, as the human-origin rule needs), the given agents
//! MUC/Sub subscribers (the bridge's sender check); destroyed on drop.

use crate::xmpp::Ejabberd;
use serde_json::json;
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
    /// When ejabberd refuses a command (its answer in the message).
    pub fn new(ej: &Ejabberd, prefix: &str, agents: &[&str]) -> OwnRoom {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "{prefix}{}x{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        ej.api(
            "create_room",
            &json!({"name": name, "service": ej.muc_service, "host": ej.domain}),
        );
        let mut own = ej.clone();
        own.room = format!("{name}@{}", ej.muc_service);
        own.room_name = name;
        own.set_room_option("anonymous", "false");
        own.set_room_option("allow_subscription", "true");
        for agent in agents {
            own.api(
                "subscribe_room",
                &json!({
                    "user": own.jid(agent),
                    "nick": agent,
                    "room": own.room,
                    "nodes": ["urn:xmpp:mucsub:nodes:messages"],
                }),
            );
        }
        OwnRoom { ej: own }
    }
}

impl Drop for OwnRoom {
    fn drop(&mut self) {
        // A drop during a panic must not panic again.
        let _ = self.ej.try_api(
            "destroy_room",
            &json!({"name": self.ej.room_name, "service": self.ej.muc_service}),
        );
    }
}
