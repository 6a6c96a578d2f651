//! `doctor`: each link of the chain a `send` and a bot go through, checked
//! in order by the code the commands themselves run (the config's
//! validation, the store's open, the transport's questions to ejabberd,
//! the bot's login probe, lock and Hermes client), each said ok, failed
//! with what fixes it, or skipped because a link it needs failed. Nothing
//! is changed: no room joined, no lock kept, nothing written.
//!
//! The links, and what each needs: the config (everything but `state.db`
//! and the plugin needs it); the policy; `state.db`; ejabberd through the configured
//! transport, then the room (the subscriptions need both); per agent its
//! bot's config keys (the login and the Hermes API server need them), its
//! subscription, its login, its lock, its Hermes API server; the plugin in
//! Hermes's `config.yaml`, and its import where the caller can try it.

mod agent;
mod plugin;
mod report;
mod server;

use crate::args::{DoctorArgs, Global};
use report::Report;
use session_switch::Failure;
use session_switch::config::Config;
use std::path::Path;

/// Whether Hermes's Python imports the plugin ([`crate::Launch::plugin_import`]):
/// `Ok` says what was imported, `Err` why it failed.
pub type PluginProbe<'a> = &'a (dyn Fn() -> Result<String, String> + Send + Sync);

/// Check every link, print the report (JSON with `--json`), and fail when
/// a link failed.
///
/// Errors: a link failed (kind `transport`, exit 1, naming the failed
/// links; the report is printed first).
pub fn run(g: &Global, args: &DoctorArgs, probe: Option<PluginProbe>) -> Result<(), Failure> {
    let home = session_switch::hermes_home();
    let mut report = Report::default();
    let loaded = config_link(g, args, &mut report);
    if loaded.is_some() {
        policy_link(g, &mut report);
    } else {
        report.skipped("policy", None, "the config did not load");
    }
    db_link(g, &home, &mut report);
    match &loaded {
        Some((config, path, agents)) => {
            let room = server::links(config, path, &mut report);
            for agent in agents {
                agent::links(config, path, agent, &home, room, &mut report);
            }
            if let (true, Some(name)) = (agents.is_empty(), &args.agent) {
                let because = format!("the config has no agent {name:?}");
                for link in agent::LINKS {
                    report.skipped(link, Some(name), &because);
                }
            }
        }
        None => {
            let because = "the config did not load";
            report.skipped("ejabberd", None, because);
            report.skipped("room", None, because);
            for link in agent::LINKS {
                report.skipped(link, args.agent.as_deref(), because);
            }
        }
    }
    plugin::links(&home, probe, &mut report);
    report.print(g.json);
    let failed = report.failures();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Failure::transport(format!(
            "doctor: {} failed ({}); what fixes each is said under it",
            if failed.len() == 1 {
                "1 link".to_owned()
            } else {
                format!("{} links", failed.len())
            },
            failed.join(", ")
        )))
    }
}

/// The config and `--agent`: the config, its path and the agents to check
/// (none when `--agent` names one the config does not have: the shared
/// links are still checked).
fn config_link(
    g: &Global,
    args: &DoctorArgs,
    report: &mut Report,
) -> Option<(Config, String, Vec<String>)> {
    let path = g.config.clone().unwrap_or_else(Config::default_path);
    let shown = path.display().to_string();
    let config = match Config::load(&path) {
        Ok(config) => config,
        Err(e) => {
            let fix = if path.exists() {
                format!(
                    "correct what the line above names in {shown} (every key: \
                     the book's configuration reference)"
                )
            } else {
                format!(
                    "write {shown} (examples/session-switch.toml shows every key), or name \
                     the config with --config (default $HERMES_HOME/session-switch.toml)"
                )
            };
            report.failed("config", None, e.message, fix);
            return None;
        }
    };
    let agents: Vec<String> = match &args.agent {
        Some(name) if config.agent(name).is_none() => {
            report.failed(
                "config",
                None,
                format!(
                    "{shown} has no agent {name:?} (configured: {})",
                    config.agent_names()
                ),
                format!(
                    "pass --agent with one of {}, or add an [[agents]] entry named {name:?}",
                    config.agent_names()
                ),
            );
            return Some((config, shown, Vec::new()));
        }
        Some(name) => vec![name.clone()],
        None => config.agents.iter().map(|a| a.name.clone()).collect(),
    };
    report.ok(
        "config",
        None,
        format!(
            "{shown}: room {}, agents {}",
            config.xmpp.room,
            config.agent_names()
        ),
    );
    Some((config, shown, agents))
}

/// The policy every command loads: the embedded one, or the component
/// `--policy` or `[policy] path` names (a file that does not load stops
/// every command, and leaves the plugin inert).
fn policy_link(g: &Global, report: &mut Report) {
    match crate::run::open(g) {
        Ok(bridge) => {
            let version = bridge.policy().version();
            let detail = match bridge.policy_file() {
                Some(path) => format!("{}: {version}", path.display()),
                None => format!("the embedded policy: {version}"),
            };
            report.ok("policy", None, detail);
        }
        Err(e) => report.failed(
            "policy",
            None,
            e.message,
            "name a policy component built for this version with --policy or [policy] path              in the config, or drop [policy] path to use the embedded policy",
        ),
    }
}

/// Hermes's `state.db`, opened as every command opens it.
fn db_link(g: &Global, home: &Path, report: &mut Report) {
    let path = g.db.clone().unwrap_or_else(session_switch::default_db_path);
    let shown = path.display();
    match session_switch::db_schema(&path) {
        Ok(Some(version)) => report.ok(
            "state-db",
            None,
            format!("{shown}: Hermes schema {version}"),
        ),
        Ok(None) => report.ok(
            "state-db",
            None,
            format!("{shown}: Hermes's tables, no schema_version (an early Hermes)"),
        ),
        Err(e) if !path.exists() => report.failed(
            "state-db",
            None,
            e.message,
            format!(
                "name Hermes's state.db with --db, or run with HERMES_HOME set to the agent's \
                 Hermes home (now {}); Hermes creates it at its first start",
                home.display()
            ),
        ),
        Err(e) => report.failed(
            "state-db",
            None,
            e.message,
            "name Hermes's own state.db with --db (or HERMES_HOME): this file is not one a \
             command can use",
        ),
    }
}
