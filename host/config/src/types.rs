//! The validated config as the rest of session-switch reads it: the room and
//! the transport, the redirect settings, the agents, the loop guard's
//! bounds and the room bots' settings. Made only by `Config::parse` and
//! `Config::load` (`load.rs`), so every value here passed the checks.
//!
//! Each key's default is here, beside the type it belongs to (the
//! sections' `Default`, [`Xmpp::default_ejabberdctl`]): validation fills
//! an absent key from it, and the config's JSON Schema and reference page
//! (`raw.rs`, `schema.rs`) show it, one source for both.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The legacy `xmpp_session_bridge.py`'s TTL of a record: one hour.
pub const DEFAULT_TTL_SECONDS: u32 = 3600;

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
    /// `[loop_guard]`: the loop guard's bounds (docs/src/design/loop-guard.md).
    pub loop_guard: LoopGuardConfig,
    /// `[bot]`: the room bots' connection, passwords and Hermes API servers.
    /// [`Config::load`] makes relative `password_file` and `hermes_env`
    /// paths relative to the config file's folder.
    pub bot: BotConfig,
}

/// `[loop_guard]` (docs/src/design/loop-guard.md): when agents stop answering each other.
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

impl Default for LoopGuardConfig {
    fn default() -> Self {
        Self {
            max_hops: 6,
            window_messages: 20,
            window_seconds: 300,
            duplicate_seconds: 600,
        }
    }
}

/// `[xmpp]`: where and how to post.
#[derive(Clone, Debug, PartialEq)]
pub struct Xmpp {
    /// Bare JID of the MUC room.
    pub room: String,
    pub transport: TransportKind,
    /// Argument list of the ejabberdctl command, run without a shell (default
    /// `["ejabberdctl"]`; the legacy tool's deployment uses `["docker",
    /// "exec", "ejabberd", "ejabberdctl"]`).
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

impl Xmpp {
    /// `ejabberdctl` when absent: the command on the `PATH`. (`room` has no
    /// default, so `[xmpp]`'s other defaults are [`TransportKind`]'s and
    /// [`DEFAULT_MAX_BODY_CHARS`](session_switch_contract::limits::DEFAULT_MAX_BODY_CHARS).)
    pub fn default_ejabberdctl() -> Vec<String> {
        vec!["ejabberdctl".to_string()]
    }
}

/// How a send reaches ejabberd.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// `ejabberdctl send_message …` (slow: each call boots an Erlang VM;
    /// the default).
    #[default]
    Ejabberdctl,
    /// `POST {api_url}/send_message` (`mod_http_api`: one HTTP request to the
    /// running server, no VM to boot).
    Http,
}

/// `[redirect]`: the rules' parameters (docs/src/design/rules.md).
#[derive(Clone, Debug, PartialEq)]
pub struct Redirect {
    /// A record redirects while younger than this, in seconds.
    pub ttl_seconds: u32,
    /// How far in the future a record's timestamp may lie, in seconds.
    pub future_skew_seconds: u32,
    /// The agent that owned the legacy tool's fixed key `active_xmpp_sender_session`.
    pub legacy_agent: Option<String>,
}

impl Default for Redirect {
    fn default() -> Self {
        Self {
            ttl_seconds: DEFAULT_TTL_SECONDS,
            future_skew_seconds: session_switch_contract::limits::DEFAULT_FUTURE_SKEW_SECONDS,
            legacy_agent: None,
        }
    }
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
    /// The legacy tool's per-agent ports, kept for the gateway.
    pub http_port: Option<u16>,
    pub gateway_port: Option<u16>,
    /// How other agents address it in the room, e.g. `@mohe`: the loop
    /// guard's "addressed" rule (its nick always counts too).
    pub mention: Option<String>,
}

impl Config {
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

/// How the bot's XMPP connection is secured.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum BotTls {
    /// STARTTLS, required, the server's certificate checked against the
    /// system's roots (the default).
    #[default]
    Starttls,
    /// Plain TCP, no TLS: the password and every message cross the network
    /// in the clear. Only for a server on loopback, such as the test
    /// ejabberd (`tests/ejabberd/ejabberd.yml` offers no TLS).
    InsecurePlaintext,
}

/// `[bot]`: the settings every bot shares, and each agent's own.
#[derive(Clone, Debug, PartialEq)]
pub struct BotConfig {
    /// ejabberd's client port as `host:port`; `None`: the JID's domain
    /// (SRV `_xmpp-client._tcp`, then port 5222).
    pub server: Option<String>,
    pub tls: BotTls,
    /// A PEM file of CA certificates trusted besides the system's roots for
    /// the server's certificate (an ejabberd with a certificate of its
    /// operator's own CA); relative paths are taken from the config file's
    /// folder by `Config::load`.
    pub ca_file: Option<PathBuf>,
    /// How long one Hermes turn may take, in seconds (default 300): past
    /// it the bot posts nothing and logs the time-out.
    pub turn_timeout_seconds: u32,
    /// At most how many messages the room said while a bot was away it
    /// catches up on its return (default 50; 0: none); beyond, they are
    /// logged as skipped.
    pub catch_up_lines: u32,
    /// Each agent's bot settings, by agent name (only configured agents).
    pub agents: BTreeMap<String, BotAgent>,
    /// Who answers what in the room, for every agent without its own.
    pub meeting: MeetingConfig,
}

impl Default for BotConfig {
    fn default() -> Self {
        Self {
            server: None,
            tls: BotTls::default(),
            ca_file: None,
            turn_timeout_seconds: DEFAULT_TURN_TIMEOUT_SECONDS,
            catch_up_lines: DEFAULT_CATCH_UP_LINES,
            agents: BTreeMap::new(),
            meeting: MeetingConfig::default(),
        }
    }
}

/// Which agents' messages a bot may answer (Hermes's `allow_bots`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AllowBots {
    /// No agent's message.
    None,
    /// An agent message that addresses this agent, within the loop guard
    /// (the default: the room exists for agents to talk).
    #[default]
    Mentions,
    /// Any agent message that addresses no other agent, within the loop
    /// guard.
    All,
}

/// `[bot]`'s meeting keys, Hermes's names and defaults: who answers a
/// message, and what stops the agents.
#[derive(Clone, Debug, PartialEq)]
pub struct MeetingConfig {
    /// A person's message is answered only by the agents it addresses
    /// (default true).
    pub require_mention: bool,
    /// Room JIDs where `require_mention` is off (default none).
    pub free_response_rooms: Vec<String>,
    /// Extra wake words, Rust `regex` syntax, matched case-insensitively
    /// anywhere in a body (default none).
    pub mention_patterns: Vec<String>,
    /// Which agents' messages are answered (default `mentions`).
    pub allow_bots: AllowBots,
    /// A person's message that is one of these stops the agents (default
    /// `stop`, `/stop`, `停`, `停止`, `别说了`, `halt`).
    pub stop_words: Vec<String>,
}

impl Default for MeetingConfig {
    fn default() -> Self {
        use session_switch_contract::meeting::{DEFAULT_REQUIRE_MENTION, DEFAULT_STOP_WORDS};
        Self {
            require_mention: DEFAULT_REQUIRE_MENTION,
            free_response_rooms: Vec::new(),
            mention_patterns: Vec::new(),
            allow_bots: AllowBots::default(),
            stop_words: DEFAULT_STOP_WORDS.iter().map(|w| w.to_string()).collect(),
        }
    }
}

/// `[bot.agents.NAME]`'s meeting keys: the agent's own values, `None` for
/// the room's (`[bot]`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MeetingOverridesConfig {
    pub require_mention: Option<bool>,
    pub free_response_rooms: Option<Vec<String>>,
    pub mention_patterns: Option<Vec<String>>,
    pub allow_bots: Option<AllowBots>,
}

/// `[bot.agents.NAME]`: one agent's XMPP password and Hermes API server.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BotAgent {
    /// Where the XMPP password comes from (at most one source).
    pub password: Option<PasswordSource>,
    /// Hermes's `.env` of this agent (`API_SERVER_KEY`, `API_SERVER_PORT`,
    /// `API_SERVER_HOST`); `None`: `$HERMES_HOME/.env`.
    pub hermes_env: Option<PathBuf>,
    /// The API server's base URL, e.g. `http://127.0.0.1:8642`; `None`:
    /// from the `.env` (host, port), else the agent's `gateway_port`, else
    /// Hermes's default port 8642, on 127.0.0.1.
    pub api_url: Option<String>,
    /// A variable holding the API server's key; `None`: `API_SERVER_KEY`
    /// of the `.env`.
    pub api_key_env: Option<String>,
    /// The agent's own meeting settings over `[bot]`'s.
    pub meeting: MeetingOverridesConfig,
}

/// Where a bot reads its agent's XMPP password.
#[derive(Clone, Debug, PartialEq)]
pub enum PasswordSource {
    /// `password_file`: the file's first line (relative paths are taken
    /// from the config file's folder by `Config::load`).
    File(PathBuf),
    /// `password_env`: the variable's value.
    Env(String),
    /// `password`: inline in the config (readable by whoever reads it).
    Inline(String),
}

/// The default of `turn_timeout_seconds`: an agent turn with tools can take
/// minutes; a bot that waited forever would never answer again.
pub const DEFAULT_TURN_TIMEOUT_SECONDS: u32 = 300;

/// `[bot] catch_up_lines` when absent.
pub const DEFAULT_CATCH_UP_LINES: u32 = 50;

/// The most `[bot] catch_up_lines` may be: a turn carries at most
/// [`HEARD_CAP`](session_switch_contract::limits::HEARD_CAP) lines anyway.
pub const MAX_CATCH_UP_LINES: u32 = 1000;
