//! The TOML config of DESIGN §8: the room, the ejabberd transport, the
//! redirect settings and the agents. Adding an agent is a config edit only
//! (the seed needed code changes in two places).
//!
//! Default location: `$HERMES_HOME/session-switch.toml` (`HERMES_HOME`
//! defaults to `~/.hermes`), overridden by `--config`. Every error names the
//! file and the line. Validation includes the policy's `configure` rules
//! (names a signature could be confused by, control characters, id
//! lengths), so a config this accepts is never refused by the policy with
//! a message that lacks the line (gap G3 of SECURITY.md).

mod agents;
mod bot;
mod fields;
mod loop_guard;
mod raw;
mod validate;

use session_switch_contract::failure::Failure;
use std::path::{Path, PathBuf};

use raw::{RawConfig, Source};

pub use bot::{BotAgent, BotConfig, BotTls, DEFAULT_TURN_TIMEOUT_SECONDS, PasswordSource};

/// The seed's TTL of a record: one hour.
pub const DEFAULT_TTL_SECONDS: u32 = 3600;
pub use session_switch_contract::limits::{DEFAULT_FUTURE_SKEW_SECONDS, DEFAULT_MAX_BODY_CHARS};

/// A validated config.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Where it was read from (`None` when parsed from a string).
    pub path: Option<PathBuf>,
    pub xmpp: Xmpp,
    pub redirect: Redirect,
    /// In file order; names, JIDs, nicks and sessions are unique.
    pub agents: Vec<AgentConfig>,
    /// `[policy] path`: a policy component file to use instead of the
    /// embedded one (`--policy` overrides it). [`Config::load`] makes a
    /// relative path relative to the config file's folder; [`Config::parse`]
    /// keeps it as written.
    pub policy_path: Option<PathBuf>,
    /// `[loop_guard]`: the loop guard's bounds (DESIGN §9.3).
    pub loop_guard: LoopGuardConfig,
    /// `[bot]`: the room bots' connection, passwords and Hermes API servers.
    /// [`Config::load`] makes relative `password_file` and `hermes_env`
    /// paths relative to the config file's folder.
    pub bot: BotConfig,
}

/// `[loop_guard]` (DESIGN §9.3): when agents stop answering each other.
/// Defaults: 6 hops, 20 agent messages per 300 s, duplicates within 600 s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopGuardConfig {
    /// Agent messages since the last human one after which no agent
    /// replies (default 6, at least 1).
    pub max_hops: u32,
    /// At most this many agent messages in the room window (default 20,
    /// at least 1)…
    pub window_messages: u32,
    /// …of this many seconds (default 300, at least 1).
    pub window_seconds: u32,
    /// The same sender and normalised body within this many seconds is a
    /// duplicate (default 600; 0 turns the rule off).
    pub duplicate_seconds: u32,
}

/// `[xmpp]`: where and how to post.
#[derive(Clone, Debug, PartialEq)]
pub struct Xmpp {
    /// Bare JID of the MUC room.
    pub room: String,
    pub transport: TransportKind,
    /// Argument list of the ejabberdctl command, run without a shell
    /// (default `["ejabberdctl"]`; the seed's deployment uses
    /// `["docker", "exec", "ejabberd", "ejabberdctl"]`).
    pub ejabberdctl: Vec<String>,
    /// Base URL of `mod_http_api`, e.g. `http://127.0.0.1:5280/api`.
    pub api_url: Option<String>,
    /// Basic-auth user of the HTTP API; its password is read from the
    /// environment variable `api_password_env` when a request is made.
    pub api_user: Option<String>,
    pub api_password_env: Option<String>,
    /// Time limit of one call to ejabberd, in seconds (default: the
    /// transport's own).
    pub timeout_seconds: Option<u32>,
    /// Longest body accepted, in characters (default 10,000).
    pub max_body_chars: u32,
}

/// How the bridge talks to ejabberd.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// `ejabberdctl send_message …` (~0.5 s a call: each boots an Erlang VM).
    Ejabberdctl,
    /// `POST {api_url}/send_message` (`mod_http_api`, ~10–20 ms).
    Http,
}

/// `[redirect]`: the rules' parameters (DESIGN §3).
#[derive(Clone, Debug, PartialEq)]
pub struct Redirect {
    /// A record redirects while younger than this, in seconds.
    pub ttl_seconds: u32,
    /// How far in the future a record's timestamp may lie, in seconds.
    pub future_skew_seconds: u32,
    /// The agent that owned the seed's fixed key `active_xmpp_sender_session`.
    pub legacy_agent: Option<String>,
}

/// One `[[agents]]` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentConfig {
    pub name: String,
    /// Bare JID, the sender of the agent's room messages.
    pub jid: String,
    /// Nick in the room.
    pub nick: String,
    /// XMPP session ids; the first receives the `[YOU] ` rows.
    pub sessions: Vec<String>,
    pub aliases: Vec<String>,
    /// The seed's per-agent ports, kept for the gateway.
    pub http_port: Option<u16>,
    pub gateway_port: Option<u16>,
    /// How other agents address it in the room, e.g. `@mohe`: the loop
    /// guard's "addressed" rule (its nick always counts too).
    pub mention: Option<String>,
}

impl Config {
    /// `$HERMES_HOME/session-switch.toml`, `HERMES_HOME` defaulting to `~/.hermes`.
    pub fn default_path() -> PathBuf {
        crate::store::hermes_home().join("session-switch.toml")
    }

    /// Read and validate the config at `path`. Errors (kind `bad-input`) name
    /// the file and, for content errors, the line.
    pub fn load(path: &Path) -> Result<Config, Failure> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                " (copy examples/session-switch.toml there, or name another file: \
                 `--config PATH` on the CLI, `Bridge(home, config=PATH)` in Python)"
            } else {
                ""
            };
            Failure::bad_input(format!("cannot read config {}: {e}{hint}", path.display()))
        })?;
        let mut config = Self::parse(&text, &path.display().to_string())?;
        if let Some(policy) = &config.policy_path
            && policy.is_relative()
        {
            let folder = path.parent().unwrap_or(Path::new(""));
            config.policy_path = Some(folder.join(policy));
        }
        let folder = path.parent().unwrap_or(Path::new(""));
        for agent in config.bot.agents.values_mut() {
            if let Some(PasswordSource::File(file)) = &mut agent.password
                && file.is_relative()
            {
                *file = folder.join(&*file);
            }
            if let Some(env) = &mut agent.hermes_env
                && env.is_relative()
            {
                *env = folder.join(&*env);
            }
        }
        config.path = Some(path.to_path_buf());
        Ok(config)
    }

    /// Parse and validate config text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Config, Failure> {
        let src = Source { text, origin };
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let msg = e.message().trim_end().to_string();
            match e.span() {
                Some(span) => src.at(span, msg),
                None => Failure::bad_input(format!("config {origin}: {msg}")),
            }
        })?;
        validate::validate(raw, &src)
    }

    /// The agent called `name`.
    pub fn agent(&self, name: &str) -> Option<&AgentConfig> {
        self.agents.iter().find(|a| a.name == name)
    }

    /// The configured names, for messages like "configured: mohe, zhiwei".
    pub fn agent_names(&self) -> String {
        self.agents
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A config of one agent, the sections' tests' base.
    pub(crate) const BASE: &str = "[xmpp]\nroom = \"room@conference.example.org\"\n\n\
        [[agents]]\nname = \"mohe\"\njid = \"mohe@example.org\"\nsessions = [\"xmpp-mohe\"]\n";

    /// [`BASE`] and `extra` parsed; the failure's message.
    pub(crate) fn parse(extra: &str) -> Result<Config, String> {
        Config::parse(&format!("{BASE}{extra}"), "t").map_err(|f| f.message)
    }

    fn file(dir: &Path, extra: &str) -> PathBuf {
        let path = dir.join("session-switch.toml");
        std::fs::write(&path, format!("{BASE}{extra}")).unwrap();
        path
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ss-config-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn no_policy_section_means_the_embedded_policy() {
        let config = Config::parse(BASE, "t").unwrap();
        assert_eq!(config.policy_path, None);
    }

    #[test]
    fn a_relative_policy_path_is_relative_to_the_config_folder() {
        let dir = temp_dir("relative");
        let config = Config::load(&file(&dir, "[policy]\npath = \"policies/p.wasm\"\n")).unwrap();
        assert_eq!(config.policy_path, Some(dir.join("policies/p.wasm")));
        // `parse` alone has no folder: the path stays as written.
        let parsed = Config::parse(&format!("{BASE}[policy]\npath = \"p.wasm\"\n"), "t").unwrap();
        assert_eq!(parsed.policy_path, Some(PathBuf::from("p.wasm")));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_absolute_policy_path_is_kept() {
        let dir = temp_dir("absolute");
        let config = Config::load(&file(&dir, "[policy]\npath = \"/srv/p.wasm\"\n")).unwrap();
        assert_eq!(config.policy_path, Some(PathBuf::from("/srv/p.wasm")));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_empty_policy_path_or_an_unknown_key_is_refused_with_its_line() {
        let empty = Config::parse(&format!("{BASE}[policy]\npath = \" \"\n"), "t").unwrap_err();
        assert_eq!(
            empty.message,
            "config t, line 9: [policy] path must name a policy component file"
        );
        let unknown = Config::parse(&format!("{BASE}[policy]\nfile = \"p.wasm\"\n"), "t")
            .unwrap_err()
            .message;
        assert!(
            unknown.starts_with("config t, line 9: unknown field `file`"),
            "{unknown}"
        );
    }
}
