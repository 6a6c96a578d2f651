//! One command: load what it needs through the [`Bridge`], call it, print.
//! Nothing here decides anything: the policy does.

use crate::args::{Cli, Command, Global};
use crate::{Launch, output};
use session_switch::config::Config;
use session_switch::runtime::{ReplyTarget, RoomMessage, max_text_bytes};
use session_switch::{Bridge, BridgeOptions, Failure};
use std::io::Read;
use std::path::PathBuf;

/// Run one command; the caller prints a failure as one line and exits with
/// its status (docs/src/design/contracts.md).
pub fn run(cli: Cli, launch: &Launch) -> Result<(), Failure> {
    let g = &cli.global;
    match cli.command {
        Command::Agents => {
            let config = load_config(g)?;
            output::agents(&config, g.json);
            Ok(())
        }
        Command::InitDb => {
            let path = db_path(g);
            session_switch::init_db(&path)?;
            output::init_db(&path, g.json);
            Ok(())
        }
        Command::Send {
            text,
            session_id,
            agent,
            ..
        } => {
            let bridge = open(g)?;
            let text = if text == "-" {
                read_stdin(max_text_bytes(bridge.config().xmpp.max_body_chars))?
            } else {
                text
            };
            let (receipt, history) = bridge.send_noting(&agent, &session_id, &text)?;
            output::sent(&receipt, &history, &session_id, g.json);
            Ok(())
        }
        Command::Active { agent } => {
            let bridge = open(g)?;
            let (statuses, pending) = bridge.active_and_pending(agent.as_deref())?;
            output::active(&statuses, &pending, agent.as_deref(), g.json);
            Ok(())
        }
        Command::Clear { agent } => {
            let bridge = open(g)?;
            let (keys, pending) = bridge.clear_all(agent.as_deref())?;
            output::cleared(&keys, pending, g.json);
            Ok(())
        }
        Command::Resolve { session_id, agent } => {
            let decision = open(g)?.resolve(&agent, &session_id)?;
            output::decision(&session_id, &decision, g.json);
            Ok(())
        }
        Command::Context {
            session_id,
            agent,
            limit,
        } => {
            let answer = open(g)?.context(&agent, &session_id, limit)?;
            output::context(&session_id, &answer, g.json);
            Ok(())
        }
        Command::Admit {
            agent,
            occupant,
            jid,
            delayed,
            human_origin,
            stanza_id,
            reply_to,
            reply_to_id,
            body,
        } => {
            let reply_to = (reply_to.is_some() || reply_to_id.is_some()).then_some(ReplyTarget {
                to: reply_to,
                id: reply_to_id,
            });
            let message = RoomMessage {
                occupant,
                jid,
                body,
                delayed,
                human_origin,
                stanza_id,
                reply_to,
                caught_up: false,
            };
            let admission = open(g)?.admit(&agent, &message)?;
            output::admission(&admission, g.json);
            Ok(())
        }
        Command::IsOwn { from, agent } => {
            let own = open(g)?.is_own(&agent, &from)?;
            output::is_own(&from, &agent, own, g.json);
            Ok(())
        }
        Command::Bot(args) => crate::bot::run(open(g)?, &args, g.json),
        Command::Doctor(args) => crate::doctor::run(g, &args, launch.plugin_import.as_deref()),
        Command::InstallLegacyScript { path, force } => {
            let path = path.unwrap_or_else(crate::legacy_script::default_path);
            let runs = match &launch.command {
                Some(command) => command.clone(),
                None => crate::legacy_script::this_command()?,
            };
            let replaced = crate::legacy_script::install(&path, &runs, force)?;
            output::legacy_script(&path, &runs, replaced, g.json);
            Ok(())
        }
    }
}

fn load_config(g: &Global) -> Result<Config, Failure> {
    Config::load(&g.config.clone().unwrap_or_else(Config::default_path))
}

fn db_path(g: &Global) -> PathBuf {
    g.db.clone().unwrap_or_else(session_switch::default_db_path)
}

/// The [`Bridge`] of the global options: `--config`, `--db`, `--policy`,
/// each defaulting as documented in `--help`.
pub(crate) fn open(g: &Global) -> Result<Bridge, Failure> {
    Bridge::open(BridgeOptions {
        config: g.config.clone(),
        db: g.db.clone(),
        policy: g.policy.clone(),
    })
}

/// The message from stdin, at most `max_bytes` (see [`max_text_bytes`]):
/// more is refused before it is all read. One trailing line break is
/// dropped, as a shell's `$(…)` does (`echo text | … send -` sends `text`).
fn read_stdin(max_bytes: usize) -> Result<String, Failure> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(max_bytes as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::bad_input(format!("cannot read the message from stdin: {e}")))?;
    if bytes.len() > max_bytes {
        return Err(Failure::bad_input(format!(
            "the message on stdin is longer than {max_bytes} bytes, far over the maximum \
             length; nothing was sent"
        )));
    }
    let mut text = String::from_utf8(bytes)
        .map_err(|e| Failure::bad_input(format!("the message on stdin is not UTF-8: {e}")))?;
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    Ok(text)
}
