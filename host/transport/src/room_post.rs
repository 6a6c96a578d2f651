//! The post-to-room half of the send (docs/src/design/contracts.md) as a trait both
//! transports implement, and their default time limits.

use std::collections::BTreeMap;
use std::time::Duration;

use session_switch_contract::failure::Failure;

/// Default time limit of one `ejabberdctl` call: 15 s. Each call boots an
/// Erlang VM (docs/src/design/ejabberd-facts.md) and `docker exec` adds
/// the container runtime's start-up, so the limit is generous; it only has
/// to end a hung call.
pub const EJABBERDCTL_TIMEOUT: Duration = Duration::from_secs(15);

/// Default time limit of one HTTP API request: 5 s, connection included. A
/// post over `mod_http_api` is one short request to a running server, so the
/// limit is far above a healthy post.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(5);

/// The post-to-room half of the send (docs/src/design/contracts.md). Implementations hold no
/// connection state that a failed call could poison: every call stands
/// alone, so one value may serve many sends and threads, and a check may
/// run on one thread while another posts.
pub trait Transport: Send + Sync {
    /// Ask the server whether `from` (a bare JID; a resource is ignored, as
    /// ejabberd does for subscribers) may post to `room` (a bare room JID,
    /// `name@service`). `Ok(())` when
    /// the JID is a MUC/Sub subscriber of the room (ejabberd's
    /// `get_subscribers`, compared case-insensitively).
    ///
    /// Errors: not a subscriber → `not-accepted`, saying how to fix it (the
    /// `subscribe_room` command); the room does not exist → `not-accepted`
    /// saying so; a room JID that is not `name@service` → `bad-input`; server
    /// unreachable, node down, time-out → `transport`.
    ///
    /// A MUC service admin could also post, but the API cannot tell who is
    /// one, so the deployment subscribes the agents explicitly (the legacy
    /// `xmpp_session_bridge.py`'s agents are room members, not admins).
    fn check_sender(&self, from: &str, room: &str) -> Result<(), Failure>;

    /// `send_stanza FROM ROOM STANZA` with the [`human_stanza`](super::human_stanza) of `body`
    /// (a groupchat message with the human-origin marker, a fresh stanza
    /// `id` and the same XEP-0359 `origin-id`). `Ok(())` when the server
    /// answered success; that alone does not prove delivery, hence
    /// [`Transport::check_sender`].
    ///
    /// Errors: an empty body, or one holding a character XML 1.0 forbids
    /// (it would break the stream of every client in the room) →
    /// `bad-input`, and nothing is posted; no answer within the time limit
    /// after the request went out → `unknown-outcome` ("the room may have
    /// the message"); any other failure → `transport` with the server's text.
    fn post(&self, from: &str, room: &str, body: &str) -> Result<(), Failure>;

    /// `get_room_options NAME SERVICE` (`mod_muc_admin`): the room's
    /// options as ejabberd names them (`anonymous`, `mam`,
    /// `allow_subscription`, …), each value as ejabberd prints it
    /// (`true`, `false`, …). `Ok(None)`: the room does not exist (ejabberd
    /// then answers an empty list, not an error). Nothing is changed.
    ///
    /// Errors: a room JID that is not `name@service` → `bad-input`; server
    /// unreachable, node down, time-out, the command refused (an HTTP
    /// API's `api_permissions`) → `transport`.
    fn room_options(&self, room: &str) -> Result<Option<BTreeMap<String, String>>, Failure>;

    /// Short name for messages and logs: `ejabberdctl` or `http`.
    fn name(&self) -> &'static str;
}
