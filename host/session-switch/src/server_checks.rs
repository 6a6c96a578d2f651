//! What the server says about the room, asked through the configured
//! transport without changing anything: the room's options and whether an
//! agent is among its MUC/Sub subscribers (`doctor` asks both).

use crate::from_config;
use session_switch_config::Config;
use session_switch_runtime::Failure;
use std::collections::BTreeMap;

/// The options of `[xmpp] room` as ejabberd lists them (`anonymous`,
/// `mam`, …); `Ok(None)` when the room does not exist.
///
/// Errors: the transport's config (an unset `api_password_env`: kind
/// `bad-input`); ejabberd not reached through it, or the command refused
/// (kind `transport`).
pub fn room_options(config: &Config) -> Result<Option<BTreeMap<String, String>>, Failure> {
    from_config::transport(config)?.room_options(&config.xmpp.room)
}

/// Whether `jid` may post to `[xmpp] room` as a `send` does: a MUC/Sub
/// subscriber (the same check a `send` makes before it writes anything).
///
/// Errors: not a subscriber, or the room does not exist (kind
/// `not-accepted`, naming the command that fixes it); as
/// [`room_options`] otherwise.
pub fn check_subscriber(config: &Config, jid: &str) -> Result<(), Failure> {
    from_config::transport(config)?.check_sender(jid, &config.xmpp.room)
}
