//! The samples every test starts from, once: the legacy tool's three agents in
//! their room as a config file ([`sample_config_text`]), that file parsed
//! ([`sample_config`]) and turned into the policy's settings the one way
//! the product does it (`session_switch::from_config::settings`), a record as
//! the bridge writes it, and the clock.
//!
//! The same sample exists for the guest's native side
//! (`session_switch_policy::samples`); `tests/all/config.rs` checks that the
//! two agree.

use session_switch::config::Config;
use session_switch::runtime::{RoomMessage, Settings};
use session_switch::{Bridge, BridgeOptions};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// The samples' room (the legacy tool's `coregroup`).
pub const ROOM: &str = "coregroup@conference.example.org";
/// The domain of the samples' agent JIDs.
pub const DOMAIN: &str = "example.org";
/// The legacy tool's agents, in config order; mohe is the legacy agent.
pub const AGENTS: [&str; 3] = ["mohe", "zhiwei", "xiaoguo"];

pub use session_switch_policy::samples::{SAMPLE_CLI, SAMPLE_NOW};

/// The legacy tool's agents as a config file, in `room`, each agent's JID from
/// `jid` (its name → its JID): mohe (sessions `xmpp-mohe-v2`, `xmpp-mohe`;
/// alias `墨河`), zhiwei (`xmpp-zhiwei`), xiaoguo (`xmpp-xiaoguo`). `xmpp`
/// holds more lines of `[xmpp]` (transport, timeouts, …) and `redirect`
/// the lines of `[redirect]` (TTL, `legacy_agent`, …), each line ending in
/// a line break.
pub fn sample_config_text(
    room: &str,
    jid: &dyn Fn(&str) -> String,
    xmpp: &str,
    redirect: &str,
) -> String {
    format!(
        r#"[xmpp]
room = "{room}"
{xmpp}
[redirect]
{redirect}
[[agents]]
name = "mohe"
jid = "{mohe}"
nick = "mohe"
sessions = ["xmpp-mohe-v2", "xmpp-mohe"]
aliases = ["墨河"]

[[agents]]
name = "zhiwei"
jid = "{zhiwei}"
sessions = ["xmpp-zhiwei"]

[[agents]]
name = "xiaoguo"
jid = "{xiaoguo}"
sessions = ["xmpp-xiaoguo"]
"#,
        mohe = jid("mohe"),
        zhiwei = jid("zhiwei"),
        xiaoguo = jid("xiaoguo"),
    )
}

/// The sample config in `room` with JIDs at `domain`, defaults for the
/// rest (TTL 3600 s, skew 120 s, 10,000 characters), mohe the legacy agent
/// when `legacy`; parsed.
///
/// # Panics
/// When the product refuses it.
pub fn sample_config_in(room: &str, domain: &str, legacy: bool) -> Config {
    let redirect = if legacy {
        "legacy_agent = \"mohe\"\n"
    } else {
        ""
    };
    let text = sample_config_text(room, &|name| format!("{name}@{domain}"), "", redirect);
    Config::parse(&text, "sample.toml").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// A [`Bridge`] on `db` with the sample config written beside it, and
/// `policy` instead of the embedded one when given.
///
/// # Panics
/// When the config cannot be written or the bridge does not open.
pub fn sample_bridge(db: &Path, policy: Option<&Path>) -> Bridge {
    let config = db.with_file_name("session-switch.toml");
    let text = sample_config_text(ROOM, &|n| format!("{n}@{DOMAIN}"), "", "");
    std::fs::write(&config, text).unwrap();
    Bridge::open(BridgeOptions {
        config: Some(config),
        db: Some(db.to_path_buf()),
        policy: policy.map(Path::to_path_buf),
    })
    .unwrap()
}

/// The sample config: [`ROOM`], JIDs at [`DOMAIN`], mohe the legacy agent.
pub fn sample_config() -> Config {
    sample_config_in(ROOM, DOMAIN, true)
}

/// The sample config's settings, as the bridge hands them to the policy.
pub fn sample_settings() -> Settings {
    session_switch::from_config::settings(&sample_config())
}

/// [`sample_config_in`]'s settings.
pub fn sample_settings_in(room: &str, domain: &str, legacy: bool) -> Settings {
    session_switch::from_config::settings(&sample_config_in(room, domain, legacy))
}

/// The clock now, Unix seconds with fractions.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_secs_f64()
}

/// A record value as the bridge writes it (docs/src/design/contracts.md#records); `agent`
/// `None` leaves the field out (the legacy tool's records had none).
pub fn record(session_id: &str, timestamp: f64, agent: Option<&str>) -> String {
    let mut value = serde_json::json!({
        "session_id": session_id,
        "timestamp": timestamp,
        "source": "cli",
    });
    if let Some(agent) = agent {
        value["agent"] = agent.into();
    }
    value.to_string()
}

/// A live room message in the samples' room from the occupant `nick`
/// (`jid` where the room shows it), nothing else set.
pub fn room_message(nick: &str, jid: Option<&str>, body: &str) -> RoomMessage {
    RoomMessage {
        occupant: format!("{ROOM}/{nick}"),
        jid: jid.map(Into::into),
        body: body.into(),
        delayed: false,
        human_origin: false,
        stanza_id: None,
        reply_to: None,
        caught_up: false,
    }
}
