//! One live room message as the loop guard reads it: the WIT
//! `room-message` with its occupant parsed and its texts borrowed.

/// One live room message as the receiving bot sees it.
#[derive(Clone, Copy, Debug)]
pub struct RoomMessage<'a> {
    /// The sender's nick in the room (the resource of its occupant JID
    /// `room/nick`, XEP-0045).
    pub nick: &'a str,
    /// The sender's real bare JID, where the room exposes it (non-anonymous
    /// rooms, XEP-0045 §7.2.3).
    pub jid: Option<&'a str>,
    /// The body, without an XEP-0461 reply's quoted fallback.
    pub body: &'a str,
    /// Delayed delivery (XEP-0203): history the room replays on join.
    pub delayed: bool,
    /// The stanza carries the human-origin marker of a person's send.
    pub human_origin: bool,
    /// The room's XEP-0359 stanza-id of this message.
    pub stanza_id: Option<&'a str>,
    /// The message this one replies to (XEP-0461).
    pub reply_to: Option<ReplyTo<'a>>,
    /// Said while the bot was away, caught up on its return: heard, never
    /// answered, never a hop.
    pub caught_up: bool,
}

/// The message a reply answers: its sender's nick and its stanza-id,
/// either of which may be missing.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReplyTo<'a> {
    pub nick: Option<&'a str>,
    pub id: Option<&'a str>,
}
