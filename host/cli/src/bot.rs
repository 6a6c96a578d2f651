//! `bot --agent NAME`: the agent's room bot (the `session-switch-bot`
//! crate), run in this process until SIGTERM; `--once` joins the room,
//! asks Hermes's `/health`, leaves and prints what it found.

use crate::args::BotArgs;
use session_switch::runtime::contract::answers::{self, BotCheck};
use session_switch::{Bridge, Failure};
use session_switch_bot::{BotSettings, Health};
use std::sync::Arc;

/// Run the bot (logs on stderr, info by default), or with `--once` check
/// once and print the result (one line, JSON with `--json`).
///
/// Errors: the bot's settings (no password source, an unreadable password
/// file or `.env`, an unusable `ca_file`: kind `bad-input`); another bot of
/// the agent (kind `busy`, not for `--once`); a login the server refused
/// (kind `not-accepted`) or a certificate it is not trusted for (kind
/// `bad-input`); for `--once`, a failed check (kind `transport`, after the
/// result is printed).
pub fn run(bridge: Bridge, args: &BotArgs, json: bool) -> Result<(), Failure> {
    let home = session_switch_bot::settings::hermes_home();
    let settings = BotSettings::for_agent(bridge.config(), &args.agent, &home)?;
    if !args.once {
        return session_switch_bot::run(Arc::new(bridge), settings);
    }
    let health = session_switch_bot::check(settings)?;
    print(&health, json);
    if health.ok() {
        Ok(())
    } else {
        Err(Failure::transport(format!(
            "bot check of {} failed: {}",
            health.agent,
            problem(&health)
        )))
    }
}

fn problem(h: &Health) -> String {
    let mut what = Vec::new();
    if !h.joined {
        match &h.join_error {
            Some(why) => what.push(format!("could not join {}: {why}", h.room)),
            None => what.push(format!("could not join {}", h.room)),
        }
    }
    if let Some(e) = &h.hermes_error {
        what.push(format!("{e} (its URL and key: {})", h.api_source));
    }
    what.join("; ")
}

fn print(h: &Health, json: bool) {
    if json {
        let check = BotCheck {
            agent: &h.agent,
            room: &h.room,
            joined: h.joined,
            api_url: &h.api_url,
            hermes: h.hermes_error.as_deref().unwrap_or("ok"),
            ok: h.ok(),
        };
        println!("{}", answers::to_value(&check));
    } else {
        let hermes = match &h.hermes_error {
            Some(e) => format!("{e} (its URL and key: {})", h.api_source),
            None => format!(
                "Hermes API server {}: healthy (/health and /v1/models answered)",
                h.api_url
            ),
        };
        println!(
            "{}: {} {}; {hermes}",
            h.agent,
            if h.joined { "joined" } else { "could not join" },
            h.room,
        );
    }
}
