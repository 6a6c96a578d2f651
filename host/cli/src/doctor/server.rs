//! The links all agents share on the server: ejabberd reached through the
//! configured transport, and the room (it exists, is non-anonymous, and
//! archives or not), from one `get_room_options`.

use super::report::Report;
use session_switch::FailureKind;
use session_switch::config::{Config, TransportKind};

/// What the agents' subscription links can rely on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Room {
    /// The room exists (anonymous or not): its subscribers can be asked.
    Exists,
    /// ejabberd was not reached through the transport, or did not answer
    /// it (a wrong URL, a refused account).
    NotReached,
    /// ejabberd answered that the room does not exist.
    Missing,
}

impl Room {
    /// Why a subscription is not checked; `None` when it can be.
    pub fn unusable(self) -> Option<&'static str> {
        match self {
            Room::Exists => None,
            Room::NotReached => Some("the ejabberd link failed"),
            Room::Missing => Some("the room does not exist"),
        }
    }
}

/// The `ejabberd` and `room` links of `config` (read from `path`).
pub fn links(config: &Config, path: &str, report: &mut Report) -> Room {
    let room = &config.xmpp.room;
    let options = match session_switch::server_checks::room_options(config) {
        Ok(options) => {
            report.ok(
                "ejabberd",
                None,
                format!("reached through {}", transport(config)),
            );
            options
        }
        Err(e) => {
            let fix = if e.kind == FailureKind::BadInput {
                format!("correct [xmpp] in {path} as the line above says")
            } else {
                unreached_fix(config, path)
            };
            report.failed("ejabberd", None, e.message, fix);
            report.skipped("room", None, "the ejabberd link failed");
            return Room::NotReached;
        }
    };
    let (name, service) = room.split_once('@').unwrap_or((room, ""));
    let change = |option: &str, value: &str| {
        format!("ejabberdctl change_room_option {name} {service} {option} {value}")
    };
    let Some(options) = options else {
        // The virtual host the room belongs to: the agents' domain (a
        // validated config has an agent, and its JID a domain).
        let host = config
            .agents
            .first()
            .and_then(|a| a.jid.split_once('@'))
            .map_or("HOST", |(_, domain)| domain);
        report.failed(
            "room",
            None,
            format!("room {room} does not exist on the server"),
            format!(
                "create it: ejabberdctl create_room {name} {service} {host}, then {}, \
                 {}, {} and {}; or correct \
                 [xmpp] room in {path}",
                change("persistent", "true"),
                change("anonymous", "false"),
                change("allow_subscription", "true"),
                change("mam", "true"),
            ),
        );
        return Room::Missing;
    };
    let option = |key: &str| options.get(key).map(String::as_str).unwrap_or("unset");
    let archive = if option("mam") == "true" {
        "archives (mam true): a bot back from a restart catches up on what it missed".to_owned()
    } else {
        format!(
            "does not archive (mam {}): a bot back from a restart cannot catch up on what it \
             missed (to archive: {})",
            option("mam"),
            change("mam", "true")
        )
    };
    if option("anonymous") == "false" {
        report.ok(
            "room",
            None,
            format!("{room} exists, is non-anonymous, {archive}"),
        );
    } else {
        report.failed(
            "room",
            None,
            format!(
                "{room} is semi-anonymous (anonymous {}): the bots see no real JIDs, so they \
                 do not trust the human-origin marker of a person's send, which then does not \
                 reset the agents' loop guard; it {archive}",
                option("anonymous")
            ),
            change("anonymous", "false"),
        );
    }
    Room::Exists
}

/// The transport as the config names it, for a line.
fn transport(config: &Config) -> String {
    match config.xmpp.transport {
        TransportKind::Http => format!(
            "the HTTP API at {}",
            config.xmpp.api_url.as_deref().unwrap_or_default()
        ),
        TransportKind::Ejabberdctl => format!("`{}`", config.xmpp.ejabberdctl.join(" ")),
    }
}

/// What makes ejabberd reachable through the configured transport.
pub fn unreached_fix(config: &Config, path: &str) -> String {
    match config.xmpp.transport {
        TransportKind::Http => format!(
            "start ejabberd, or set [xmpp] api_url in {path} to its mod_http_api (e.g. \
             http://127.0.0.1:5280/api) and allow get_room_options, get_subscribers and \
             send_stanza from this host in its api_permissions"
        ),
        TransportKind::Ejabberdctl => format!(
            "start ejabberd, or set [xmpp] ejabberdctl in {path} to a command that reaches its \
             node (Debian's ejabberdctl runs as root or the ejabberd user; [\"docker\", \"exec\", \
             \"ejabberd\", \"ejabberdctl\"] for a container), or use transport = \"http\""
        ),
    }
}
