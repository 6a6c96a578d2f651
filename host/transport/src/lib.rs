//! ejabberd transports: post a body to the MUC room, and ask the server
//! beforehand whether the room accepts the sender.
//!
//! Two ways to reach the same ejabberd command (`send_stanza`, from
//! `mod_admin_extra`): [`EjabberdCtl`] runs the `ejabberdctl` command line (as
//! the legacy `xmpp_session_bridge.py` does, possibly through `docker exec`),
//! [`HttpApi`] calls `mod_http_api`. Every post is a person's (the CLI's
//! `send`), so the stanza carries the human-origin marker, a stanza `id` and
//! an XEP-0359 `origin-id` ([`human_stanza`]); `send_stanza` routes it exactly
//! as `send_message` routed the legacy tool's bare body (same senders
//! accepted, same silent drop of the others: verified on ejabberd 23.01). Both
//! implement [`Transport`], the post-to-room half of the send (docs/src/design/contracts.md): the
//! host calls [`Transport::check_sender`] before it writes anything (for an
//! agent that posted before, on another thread beside the post) and
//! [`Transport::post`] with no transaction open.
//!
//! Why the check exists (docs/src/design/ejabberd-facts.md, verified on ejabberd 23.01): the room
//! silently drops a groupchat message whose FROM is not a MUC/Sub subscriber,
//! a MUC service admin or an online occupant, and `send_message` still
//! answers success (exit 0, HTTP 200). Only the server can say whether a
//! sender is accepted, and only before the post.

mod ejabberdctl;
mod http_api;
mod room_jid;
mod room_post;
mod server_answers;
mod stanza;
#[cfg(test)]
mod tests;

pub use ejabberdctl::EjabberdCtl;
pub use http_api::HttpApi;
pub use room_jid::RoomJid;
pub use room_post::{EJABBERDCTL_TIMEOUT, HTTP_TIMEOUT, Transport};
pub use server_answers::is_no_such_room;
pub use stanza::{human_stanza, new_stanza_id};
