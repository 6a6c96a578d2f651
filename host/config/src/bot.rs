//! `[bot]` and `[bot.agents.NAME]` checked: what the agents' room bots
//! (`xmpp-session-bridge bot --agent NAME`) need beyond the agents
//! themselves — how to reach ejabberd's client port, the XMPP password,
//! the agent's Hermes API server, and who answers what (the meeting keys,
//! `meeting.rs`). Every key is optional; a bot whose
//! agent has no password source refuses to start (the bot says which keys
//! would do), the other commands never read this section.
//!
//! Nothing is read from disk or the environment here: the password file,
//! the password variable and Hermes's `.env` are read when a bot starts,
//! so a config that loads for `send` does not need the bots' secrets.

use schemars::JsonSchema;
use serde::Deserialize;
use session_switch_contract::failure::Failure;
use std::collections::BTreeMap;
use std::path::PathBuf;
use toml::Spanned;

use super::meeting::{RawMeeting, overrides, room_meeting};
use super::raw::default;
use super::source::Source;
use super::types::{
    AgentConfig, AllowBots, BotAgent, BotConfig, BotTls, MAX_CATCH_UP_LINES, PasswordSource,
};

/// `[bot]`: every key optional.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBot {
    /// ejabberd's client port as `host:port`, e.g. `127.0.0.1:5222`. Unset:
    /// the JID's domain (SRV `_xmpp-client._tcp`, then port 5222).
    #[schemars(with = "Option<String>")]
    server: Option<Spanned<String>>,
    /// How the connection is secured: `starttls` (required, the server's
    /// certificate checked) or `insecure-plaintext` (the password and every
    /// message in the clear; only for a server on loopback, such as the
    /// test ejabberd).
    #[schemars(default = "default::tls")]
    tls: Option<BotTls>,
    /// A PEM file of CA certificates trusted besides the system's roots for
    /// the server's certificate (an ejabberd with a certificate of its
    /// operator's own CA); needs `tls = "starttls"`; a relative path is
    /// taken from the config file's folder.
    #[schemars(with = "Option<String>")]
    ca_file: Option<Spanned<String>>,
    /// How long one Hermes turn may take, in seconds (at least 1): past it
    /// the bot posts nothing and logs the time-out.
    #[schemars(
        with = "Option<u32>",
        default = "default::turn_timeout_seconds",
        range(min = 1)
    )]
    turn_timeout_seconds: Option<Spanned<u32>>,
    /// At most how many messages the room said while a bot was away it
    /// catches up on its return (0: none; at most 1000); beyond, they are
    /// logged as skipped.
    #[schemars(
        with = "Option<u32>",
        default = "default::catch_up_lines",
        range(max = 1000)
    )]
    catch_up_lines: Option<Spanned<u32>>,
    /// A person's message is answered only by the agents it addresses
    /// (Hermes's `require_mention`); for every agent without its own.
    #[schemars(default = "default::require_mention")]
    require_mention: Option<bool>,
    /// Room JIDs where `require_mention` is off: every agent answers a
    /// person who addresses nobody.
    #[schemars(with = "Option<Vec<String>>", default = "default::free_response_rooms")]
    free_response_rooms: Option<Vec<Spanned<String>>>,
    /// Extra wake words, Rust `regex` syntax, matched case-insensitively
    /// anywhere in a body, e.g. `["^team[,:]"]`.
    #[schemars(with = "Option<Vec<String>>", default = "default::mention_patterns")]
    mention_patterns: Option<Vec<Spanned<String>>>,
    /// Which agents' messages are answered (Hermes's `allow_bots`): `none`;
    /// `mentions`, one that addresses this agent; `all`, any that addresses
    /// no other agent; always within the loop guard.
    #[schemars(with = "Option<AllowBots>", default = "default::allow_bots")]
    allow_bots: Option<Spanned<String>>,
    /// A person's message that is one of these stops the agents (the
    /// room's only, not an agent's).
    #[schemars(with = "Option<Vec<String>>", default = "default::stop_words")]
    stop_words: Option<Vec<Spanned<String>>>,
    /// Each agent's own bot settings, by agent name (configured agents
    /// only): the agent's XMPP password, its Hermes API server, and its own
    /// values of `[bot]`'s meeting keys (unset: `[bot]`'s). At most one of
    /// `password`, `password_file`, `password_env`; a bot whose agent has
    /// none refuses to start.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, RawBotAgent>")]
    agents: BTreeMap<String, Spanned<RawBotAgent>>,
}

/// `[bot.agents.NAME]`: one agent's bot settings.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBotAgent {
    /// The XMPP password inline (readable by whoever reads this file).
    #[schemars(with = "Option<String>")]
    password: Option<Spanned<String>>,
    /// A file whose first line is the XMPP password; a relative path is
    /// taken from the config file's folder.
    #[schemars(with = "Option<String>")]
    password_file: Option<Spanned<String>>,
    /// An environment variable holding the XMPP password.
    #[schemars(with = "Option<String>")]
    password_env: Option<Spanned<String>>,
    /// Hermes's `.env` of this agent (`API_SERVER_KEY`, `API_SERVER_PORT`,
    /// `API_SERVER_HOST`); a relative path is taken from the config file's
    /// folder. Unset: `$HERMES_HOME/.env`.
    #[schemars(with = "Option<String>")]
    hermes_env: Option<Spanned<String>>,
    /// The Hermes API server's base URL, e.g. `http://127.0.0.1:8642`.
    /// Unset: from the `.env` (host, port), else the agent's
    /// `gateway_port`, else Hermes's default port 8642, on 127.0.0.1.
    #[schemars(with = "Option<String>")]
    api_url: Option<Spanned<String>>,
    /// An environment variable holding the API server's key. Unset:
    /// `API_SERVER_KEY` of the `.env`.
    #[schemars(with = "Option<String>")]
    api_key_env: Option<Spanned<String>>,
    /// The agent's own `require_mention`.
    require_mention: Option<bool>,
    /// The agent's own `free_response_rooms`.
    #[schemars(with = "Option<Vec<String>>")]
    free_response_rooms: Option<Vec<Spanned<String>>>,
    /// The agent's own `mention_patterns`.
    #[schemars(with = "Option<Vec<String>>")]
    mention_patterns: Option<Vec<Spanned<String>>>,
    /// The agent's own `allow_bots`.
    #[schemars(with = "Option<AllowBots>")]
    allow_bots: Option<Spanned<String>>,
}

/// `[bot]` checked: `server` is `host:port`, `ca_file` goes with STARTTLS,
/// the agents are configured ones, at most one password source each, URLs
/// are http(s), no value is empty.
pub(super) fn bot(
    raw: Option<RawBot>,
    agents: &[AgentConfig],
    src: &Source<'_>,
) -> Result<BotConfig, Failure> {
    let defaults = BotConfig::default();
    let Some(raw) = raw else {
        return Ok(defaults);
    };
    let meeting = room_meeting(
        RawMeeting {
            require_mention: raw.require_mention,
            free_response_rooms: raw.free_response_rooms,
            mention_patterns: raw.mention_patterns,
            allow_bots: raw.allow_bots,
        },
        raw.stop_words,
        src,
    )?;
    let server = match raw.server {
        Some(s) if !is_host_port(s.get_ref()) => {
            return Err(src.at(
                s.span(),
                format!(
                    "[bot] server {:?} must be host:port, e.g. 127.0.0.1:5222",
                    s.get_ref()
                ),
            ));
        }
        Some(s) => Some(s.into_inner()),
        None => None,
    };
    let turn_timeout_seconds = match raw.turn_timeout_seconds {
        Some(t) if *t.get_ref() == 0 => {
            return Err(src.at(
                t.span(),
                "[bot] turn_timeout_seconds must be at least 1".into(),
            ));
        }
        Some(t) => t.into_inner(),
        None => defaults.turn_timeout_seconds,
    };
    let tls = raw.tls.unwrap_or(defaults.tls);
    let ca_file = match raw.ca_file {
        Some(f) if f.get_ref().trim().is_empty() || f.get_ref().contains('\0') => {
            return Err(src.at(f.span(), "[bot] ca_file must not be empty".into()));
        }
        // Extra roots for a connection without TLS would be silently unused.
        Some(f) if tls != BotTls::Starttls => {
            return Err(src.at(
                f.span(),
                "[bot] ca_file needs tls = \"starttls\" (it adds CA certificates for the \
                 server's certificate)"
                    .into(),
            ));
        }
        Some(f) => Some(PathBuf::from(f.into_inner())),
        None => None,
    };
    let catch_up_lines = match raw.catch_up_lines {
        Some(n) if *n.get_ref() > MAX_CATCH_UP_LINES => {
            return Err(src.at(
                n.span(),
                format!("[bot] catch_up_lines must be at most {MAX_CATCH_UP_LINES}"),
            ));
        }
        Some(n) => n.into_inner(),
        None => defaults.catch_up_lines,
    };
    let mut out = BTreeMap::new();
    for (name, table) in raw.agents {
        let span = table.span();
        if !agents.iter().any(|a| a.name == name) {
            return Err(src.at(
                span,
                format!("[bot.agents.{name}]: {name:?} is not a configured agent"),
            ));
        }
        out.insert(name.clone(), bot_agent(&name, table.into_inner(), src)?);
    }
    Ok(BotConfig {
        server,
        tls,
        ca_file,
        turn_timeout_seconds,
        catch_up_lines,
        agents: out,
        meeting,
    })
}

fn bot_agent(name: &str, raw: RawBotAgent, src: &Source<'_>) -> Result<BotAgent, Failure> {
    let section = format!("[bot.agents.{name}]");
    let text = |value: Option<Spanned<String>>, key: &str| -> Result<Option<String>, Failure> {
        match value {
            Some(v) if v.get_ref().trim().is_empty() || v.get_ref().contains('\0') => {
                Err(src.at(v.span(), format!("{section} {key} must not be empty")))
            }
            Some(v) => Ok(Some(v.into_inner())),
            None => Ok(None),
        }
    };
    let sources: Vec<_> = [&raw.password, &raw.password_file, &raw.password_env]
        .into_iter()
        .flatten()
        .collect();
    if sources.len() > 1 {
        return Err(src.at(
            sources[1].span(),
            format!("{section} takes one of password, password_file, password_env"),
        ));
    }
    let password = if let Some(p) = text(raw.password_file, "password_file")? {
        Some(PasswordSource::File(PathBuf::from(p)))
    } else if let Some(e) = text(raw.password_env, "password_env")? {
        Some(PasswordSource::Env(e))
    } else {
        // An inline password may have any characters, blanks included.
        raw.password.map(|p| PasswordSource::Inline(p.into_inner()))
    };
    let api_url = match raw.api_url {
        Some(u) if !(u.get_ref().starts_with("http://") || u.get_ref().starts_with("https://")) => {
            return Err(src.at(
                u.span(),
                format!(
                    "{section} api_url {:?} must start with http:// or https://",
                    u.get_ref()
                ),
            ));
        }
        Some(u) => Some(u.into_inner().trim_end_matches('/').to_string()),
        None => None,
    };
    let meeting = overrides(
        RawMeeting {
            require_mention: raw.require_mention,
            free_response_rooms: raw.free_response_rooms,
            mention_patterns: raw.mention_patterns,
            allow_bots: raw.allow_bots,
        },
        &section,
        src,
    )?;
    Ok(BotAgent {
        password,
        hermes_env: text(raw.hermes_env, "hermes_env")?.map(PathBuf::from),
        api_url,
        api_key_env: text(raw.api_key_env, "api_key_env")?,
        meeting,
    })
}

/// `host:port` with a non-empty host and a port number (an IPv6 host in
/// brackets).
fn is_host_port(text: &str) -> bool {
    match text.rsplit_once(':') {
        Some((host, port)) => {
            !host.is_empty() && !host.contains(char::is_whitespace) && port.parse::<u16>().is_ok()
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::parse;
    use crate::types::{DEFAULT_CATCH_UP_LINES, DEFAULT_TURN_TIMEOUT_SECONDS};

    #[test]
    fn no_section_means_starttls_the_default_timeout_and_no_agents() {
        let bot = parse("").unwrap().bot;
        assert_eq!(bot.tls, BotTls::Starttls);
        assert_eq!(bot.turn_timeout_seconds, DEFAULT_TURN_TIMEOUT_SECONDS);
        assert_eq!(bot.catch_up_lines, DEFAULT_CATCH_UP_LINES);
        assert_eq!(bot.server, None);
        assert_eq!(bot.ca_file, None);
        assert!(bot.agents.is_empty());
    }

    #[test]
    fn ca_file_is_read_with_starttls_and_refused_without_it() {
        let bot = parse("[bot]\nca_file = \"certs/ca.pem\"\n").unwrap().bot;
        assert_eq!(bot.ca_file, Some(PathBuf::from("certs/ca.pem")));
        let plain = parse("[bot]\ntls = \"insecure-plaintext\"\nca_file = \"ca.pem\"\n");
        assert_eq!(
            plain.unwrap_err(),
            "config t, line 10: [bot] ca_file needs tls = \"starttls\" (it adds CA \
             certificates for the server's certificate)"
        );
        let empty = parse("[bot]\nca_file = \" \"\n").unwrap_err();
        assert_eq!(empty, "config t, line 9: [bot] ca_file must not be empty");
    }

    #[test]
    fn every_key_is_read() {
        let bot = parse(
            "[bot]\nserver = \"127.0.0.1:25222\"\ntls = \"insecure-plaintext\"\n\
             turn_timeout_seconds = 30\ncatch_up_lines = 7\n\n[bot.agents.mohe]\npassword_env = \"MOHE_PW\"\n\
             hermes_env = \"/srv/mohe/.env\"\napi_url = \"http://127.0.0.1:8642/\"\n\
             api_key_env = \"MOHE_KEY\"\n",
        )
        .unwrap()
        .bot;
        assert_eq!(bot.server.as_deref(), Some("127.0.0.1:25222"));
        assert_eq!(bot.tls, BotTls::InsecurePlaintext);
        assert_eq!(bot.turn_timeout_seconds, 30);
        assert_eq!(bot.catch_up_lines, 7);
        let mohe = &bot.agents["mohe"];
        assert_eq!(mohe.password, Some(PasswordSource::Env("MOHE_PW".into())));
        assert_eq!(mohe.hermes_env, Some(PathBuf::from("/srv/mohe/.env")));
        assert_eq!(mohe.api_url.as_deref(), Some("http://127.0.0.1:8642"));
        assert_eq!(mohe.api_key_env.as_deref(), Some("MOHE_KEY"));
    }

    #[test]
    fn mistakes_are_refused_with_their_line() {
        let two = parse("[bot.agents.mohe]\npassword = \"x\"\npassword_file = \"pw\"\n");
        assert_eq!(
            two.unwrap_err(),
            "config t, line 10: [bot.agents.mohe] takes one of password, password_file, \
             password_env"
        );
        let unknown = parse("[bot.agents.nobody]\npassword = \"x\"\n").unwrap_err();
        assert!(
            unknown.contains("\"nobody\" is not a configured agent"),
            "{unknown}"
        );
        let server = parse("[bot]\nserver = \"localhost\"\n").unwrap_err();
        assert!(
            server.starts_with("config t, line 9: [bot] server"),
            "{server}"
        );
        let tls = parse("[bot]\ntls = \"off\"\n").unwrap_err();
        assert!(tls.starts_with("config t, line 9: "), "{tls}");
        let url = parse("[bot.agents.mohe]\napi_url = \"127.0.0.1:8642\"\n").unwrap_err();
        assert!(url.contains("must start with http://"), "{url}");
        let many = parse("[bot]\ncatch_up_lines = 1001\n").unwrap_err();
        assert!(
            many.starts_with("config t, line 9: [bot] catch_up_lines must be at most 1000"),
            "{many}"
        );
        assert_eq!(
            parse("[bot]\ncatch_up_lines = 0\n")
                .unwrap()
                .bot
                .catch_up_lines,
            0
        );
        let zero = parse("[bot]\nturn_timeout_seconds = 0\n").unwrap_err();
        assert!(zero.contains("at least 1"), "{zero}");
    }
}
