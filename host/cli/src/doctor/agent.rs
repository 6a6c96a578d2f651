//! One agent's links, each checked as `bot --agent NAME` (and a `send` as
//! the agent) would meet it: its bot's config keys, its MUC/Sub
//! subscription, its login, a bot of it already running, its Hermes API
//! server with the key.

use super::report::Report;
use super::server::{Room, unreached_fix};
use session_switch::FailureKind;
use session_switch::config::Config;
use session_switch_bot::BotSettings;
use session_switch_bot::hermes::{HermesClient, TurnError};
use session_switch_bot::lock;
use std::path::Path;
use std::time::Duration;

/// An agent's links, in the order they are checked.
pub const LINKS: [&str; 5] = ["bot-config", "subscriber", "login", "lock", "hermes-api"];

/// How long the login may take, network retries included (tries after 1
/// and 3 s): a server that answers logs in within a second.
const LOGIN_LIMIT: Duration = Duration::from_secs(5);

/// How long the Hermes API server may take to answer `/health` and
/// `/v1/models`.
const HERMES_LIMIT: Duration = Duration::from_secs(10);

/// `agent`'s links; `home` is the Hermes home its bot would start with,
/// `room` what the shared links found.
pub fn links(
    config: &Config,
    path: &str,
    agent: &str,
    home: &Path,
    room: Room,
    report: &mut Report,
) {
    let a = config
        .agent(agent)
        .expect("the config link checked the agent");
    let section = format!("[bot.agents.{agent}]");
    let settings = match BotSettings::for_agent(config, agent, home) {
        Ok(s) => {
            report.ok(
                "bot-config",
                Some(agent),
                format!(
                    "{} as {}; its XMPP password read; Hermes API server {} ({})",
                    s.jid, s.nick, s.api_url, s.api_source
                ),
            );
            Some(s)
        }
        Err(e) => {
            let fix = if config
                .bot
                .agents
                .get(agent)
                .is_none_or(|b| b.password.is_none())
            {
                format!(
                    "add to {path}: {section} with password_file = \"/path/to/{agent}.password\" \
                     (or password_env = \"VARIABLE\")"
                )
            } else {
                format!("correct {section} in {path} as the line above says")
            };
            report.failed("bot-config", Some(agent), e.message, fix);
            None
        }
    };

    match room.unusable() {
        Some(because) => report.skipped("subscriber", Some(agent), because),
        None => match session_switch::server_checks::check_subscriber(config, &a.jid) {
            Ok(()) => report.ok(
                "subscriber",
                Some(agent),
                format!("{} is a MUC/Sub subscriber of {}", a.jid, config.xmpp.room),
            ),
            Err(e) if e.kind == FailureKind::NotAccepted => report.failed(
                "subscriber",
                Some(agent),
                e.message,
                format!(
                    "ejabberdctl subscribe_room {} {} {} urn:xmpp:mucsub:nodes:messages",
                    a.jid, a.nick, config.xmpp.room
                ),
            ),
            Err(e) => report.failed(
                "subscriber",
                Some(agent),
                e.message,
                unreached_fix(config, path),
            ),
        },
    }

    let because = "the bot's config keys could not be read";
    match &settings {
        None => report.skipped("login", Some(agent), because),
        Some(s) => login_link(s, path, report),
    }

    lock_link(agent, &a.jid, report);

    match &settings {
        None => report.skipped("hermes-api", Some(agent), because),
        Some(s) => hermes_link(config, s, home, report),
    }
}

/// The agent's login: one SASL exchange, then the stream closed.
fn login_link(s: &BotSettings, path: &str, report: &mut Report) {
    let agent = s.agent.as_str();
    let (local, domain) = s.jid.split_once('@').unwrap_or((&s.jid, ""));
    match session_switch_bot::check::login(s, LOGIN_LIMIT) {
        Ok(None) => report.ok(
            "login",
            Some(agent),
            format!(
                "logged in as {} ({}), then left",
                s.jid,
                s.server.as_deref().map_or(
                    "the server DNS names for its domain".to_owned(),
                    |server| format!("[bot] server {server}")
                )
            ),
        ),
        Ok(Some(why)) => report.failed(
            "login",
            Some(agent),
            why,
            format!(
                "start ejabberd, or set [bot] server in {path} to its client port with \
                 STARTTLS (host:5222)"
            ),
        ),
        Err(e) if e.kind == FailureKind::NotAccepted => report.failed(
            "login",
            Some(agent),
            e.message,
            format!(
                "give [bot.agents.{agent}] the account's password, or set the account's: \
                 ejabberdctl change_password {local} {domain} PASSWORD \
                 (ejabberdctl check_account {local} {domain} says whether it exists; \
                 ejabberdctl register {local} {domain} PASSWORD creates it)"
            ),
        ),
        Err(e) => report.failed(
            "login",
            Some(agent),
            e.message,
            "as the line above says ([bot] ca_file, tls, or ejabberd's certificate: \
             the book's ejabberd chapter, TLS)",
        ),
    }
}

/// The agent's Hermes API server: `/health`, and `/v1/models` with the key,
/// as `bot --once` asks them; a bot without a key fails too (Hermes
/// refuses a turn in a named session without one).
fn hermes_link(config: &Config, s: &BotSettings, home: &Path, report: &mut Report) {
    let agent = s.agent.as_str();
    let env = config
        .bot
        .agents
        .get(agent)
        .and_then(|b| b.hermes_env.clone())
        .unwrap_or_else(|| home.join(".env"));
    let env = env.display();
    let client = HermesClient::new(&s.api_url, s.api_key.as_deref(), HERMES_LIMIT);
    match client.health() {
        Ok(()) if s.api_key.is_none() => report.failed(
            "hermes-api",
            Some(agent),
            format!(
                "{} answers, but the bot has no API server key ({}): Hermes refuses a turn \
                 in a named session without one",
                s.api_url, s.api_source
            ),
            format!(
                "set API_SERVER_KEY in {env} to the key the gateway runs with, or name a \
                 variable holding it in [bot.agents.{agent}] api_key_env"
            ),
        ),
        Ok(()) => report.ok(
            "hermes-api",
            Some(agent),
            format!(
                "{} answered /health, and /v1/models with the key ({})",
                s.api_url, s.api_source
            ),
        ),
        Err(e) => {
            let fix = match &e {
                TurnError::Status(401 | 403, _) => format!(
                    "make API_SERVER_KEY in {env} the key the gateway runs with (restart the \
                     gateway after changing its .env)"
                ),
                TurnError::Unreachable(_) | TurnError::TimedOut(_) => format!(
                    "start the agent's Hermes gateway (HERMES_HOME={} hermes gateway run) with \
                     API_SERVER_ENABLED=true in {env}, or point [bot.agents.{agent}] api_url \
                     at it",
                    home.display()
                ),
                _ => format!("read the gateway's log, {}/logs/agent.log", home.display()),
            };
            report.failed(
                "hermes-api",
                Some(agent),
                format!("{e} (its URL and key: {})", s.api_source),
                fix,
            );
        }
    }
}

/// The `lock` link: whether a bot of `agent` runs on this machine. A bot
/// that runs passes (doctor is run beside a working bot); the link fails
/// only when the lock cannot be looked at.
fn lock_link(agent: &str, jid: &str, report: &mut Report) {
    let dir = match lock::lock_dir_here() {
        Ok(dir) => dir,
        Err(e) => {
            return report.failed(
                "lock",
                Some(agent),
                e.message,
                "set HERMES_GATEWAY_LOCK_DIR to a folder the bot's user can write".to_owned(),
            );
        }
    };
    let lock_path = lock::lock_path(&dir, jid);
    match lock::check(&lock_path, agent) {
        Ok(()) => report.ok(
            "lock",
            Some(agent),
            format!(
                "no bot of {agent} runs on this machine ({} is free)",
                lock_path.display()
            ),
        ),
        Err(e) if e.kind == FailureKind::Busy => report.ok(
            "lock",
            Some(agent),
            format!(
                "{}: a second `bot --agent {agent}` would be refused (`bot --agent {agent} \
                 --once` checks the chain beside it)",
                e.message
            ),
        ),
        Err(e) => report.failed(
            "lock",
            Some(agent),
            e.message,
            format!(
                "let the user the bot runs as create and lock files in {} (or set \
                 HERMES_GATEWAY_LOCK_DIR)",
                dir.display()
            ),
        ),
    }
}
