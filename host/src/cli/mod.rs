//! The CLI: parse, load the config, the database and the policy, call it,
//! print. Nothing here decides anything: the policy does.

pub mod args;
mod output;

use crate::Failure;
use crate::bridge::{self, HermesBackend};
use crate::config::Config;
use crate::runtime::{CacheMode, Policy, PolicyOptions, Session, max_text_bytes};
use crate::store::HermesStore;
use args::{Cli, Command, Global};
use std::io::Read;
use std::path::PathBuf;

/// Run one command; the caller prints a failure as one line and exits with
/// its status (DESIGN §8).
pub fn run(cli: Cli) -> Result<(), Failure> {
    let g = &cli.global;
    match cli.command {
        Command::Agents => {
            let config = load_config(g)?;
            output::agents(&config, g.json);
            Ok(())
        }
        Command::InitDb => {
            let path = db_path(g);
            HermesStore::init(&path)?;
            output::init_db(&path, g.json);
            Ok(())
        }
        Command::Send {
            text,
            session_id,
            agent,
            ..
        } => {
            let config = load_config(g)?;
            let text = if text == "-" {
                read_stdin(max_text_bytes(config.xmpp.max_body_chars))?
            } else {
                text
            };
            let transport = bridge::transport(&config)?;
            let mut session = open_session(g, &config, Some(transport))?;
            let receipt = session.send(&agent, &session_id, &text)?;
            output::sent(&receipt, &session_id, g.json);
            Ok(())
        }
        Command::Active { agent } => {
            let config = load_config(g)?;
            let statuses = open_session(g, &config, None)?.active(agent.as_deref())?;
            output::active(&statuses, agent.as_deref(), g.json);
            Ok(())
        }
        Command::Clear { agent } => {
            let config = load_config(g)?;
            let keys = open_session(g, &config, None)?.clear(agent.as_deref())?;
            output::cleared(&keys, g.json);
            Ok(())
        }
        Command::Resolve { session_id, agent } => {
            let config = load_config(g)?;
            let decision = open_session(g, &config, None)?.resolve(&agent, &session_id)?;
            output::decision(&session_id, &decision, g.json);
            Ok(())
        }
        Command::Context {
            session_id,
            agent,
            limit,
        } => {
            let config = load_config(g)?;
            let answer = open_session(g, &config, None)?.context(&agent, &session_id, limit)?;
            output::context(&session_id, &answer, g.json);
            Ok(())
        }
        Command::IsOwn { from, agent } => {
            let config = load_config(g)?;
            let own = open_session(g, &config, None)?.is_own_message(&agent, &from)?;
            output::is_own(&from, &agent, own, g.json);
            Ok(())
        }
    }
}

fn load_config(g: &Global) -> Result<Config, Failure> {
    Config::load(&g.config.clone().unwrap_or_else(Config::default_path))
}

fn db_path(g: &Global) -> PathBuf {
    g.db.clone().unwrap_or_else(HermesStore::default_path)
}

/// The policy (embedded, or `--policy`) in a session over the database.
fn open_session(
    g: &Global,
    config: &Config,
    transport: Option<Box<dyn crate::transport::Transport>>,
) -> Result<Session, Failure> {
    let store = HermesStore::open(&db_path(g))?;
    let options = PolicyOptions {
        cache: g
            .cache_dir
            .clone()
            .map_or(CacheMode::Default, CacheMode::Dir),
        ..PolicyOptions::default()
    };
    let policy = match &g.policy {
        Some(path) => Policy::load(path, options)?,
        None => Policy::embedded(options)?,
    };
    let backend = HermesBackend::new(store, transport, config.xmpp.room.clone());
    Ok(policy.session(backend, bridge::settings(config)))
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
