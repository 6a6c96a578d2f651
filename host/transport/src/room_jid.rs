//! A bare room JID as ejabberd's room commands take it: name and service.

use session_switch_contract::failure::Failure;

/// A bare room JID split at the `@` into the room's name (its local part)
/// and its MUC service (e.g. `conference.example.org`): the two arguments
/// of ejabberd's room commands (`get_subscribers NAME SERVICE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoomJid<'a> {
    /// The room's local part, e.g. `coregroup`.
    pub name: &'a str,
    /// The MUC service's domain, e.g. `conference.meeting.localhost`.
    pub service: &'a str,
}

impl<'a> RoomJid<'a> {
    /// Split `room` (`name@service`). Errors (`bad-input`): no `@`, an empty
    /// part, a resource (`/nick`: that addresses an occupant, and the room
    /// drops such a groupchat message), whitespace or control characters.
    pub fn parse(room: &'a str) -> Result<Self, Failure> {
        let bad = |why: &str| {
            Failure::bad_input(format!(
                "room JID {room:?} {why}; set [xmpp] room to the bare room JID, \
                 e.g. coregroup@conference.example.org"
            ))
        };
        if room.contains('/') {
            return Err(bad(
                "has a resource (/…); a groupchat goes to the bare room JID",
            ));
        }
        if room.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("contains whitespace or control characters"));
        }
        match room.split_once('@') {
            Some((name, service))
                if !name.is_empty() && !service.is_empty() && !service.contains('@') =>
            {
                Ok(Self { name, service })
            }
            _ => Err(bad("is not of the form name@service")),
        }
    }
}
