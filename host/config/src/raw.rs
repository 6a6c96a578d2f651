//! The config file's shape as serde reads it: every value with its span,
//! so errors can name the line (`source.rs`).
//!
//! These types are also the config's JSON Schema and reference page
//! (`schema.rs`, `cargo run -p xtask -- docs`): each key's doc comment is
//! its description there, `schemars(with)` its type without the span, and
//! `schemars(default)` its default, read from the validated types'
//! defaults (`types.rs`) that validation fills absent keys from.

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use super::types::{LoopGuardConfig, Redirect, TransportKind, Xmpp};

/// session-switch's config file: the room and how to post to it, the
/// redirect, the agents, and optionally the policy, the loop guard and the
/// room bots.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "session-switch.toml")]
pub(super) struct RawConfig {
    /// The room and the ejabberd transport that posts to it.
    pub(super) xmpp: RawXmpp,
    /// How long a CLI session's record redirects the agent's bot.
    #[serde(default)]
    pub(super) redirect: RawRedirect,
    /// The agents, in order; at least one. Adding an agent is an entry
    /// here and nothing else.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub(super) agents: Vec<RawAgent>,
    /// The policy component, when not the embedded one.
    pub(super) policy: Option<RawPolicy>,
    /// When agents in the room stop answering each other.
    pub(super) loop_guard: Option<RawLoopGuard>,
    /// The agents' room bots (`xmpp-session-bridge bot --agent NAME`): the
    /// connection, who answers what, and each agent's password and Hermes
    /// API server. Only the bots read it.
    pub(super) bot: Option<super::bot::RawBot>,
}

/// `[loop_guard]`: every key optional.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLoopGuard {
    /// Agent messages since the last person's after which no agent replies
    /// (at least 1).
    #[schemars(with = "Option<u32>", default = "default::max_hops", range(min = 1))]
    pub(super) max_hops: Option<Spanned<u32>>,
    /// At most this many agent messages in the room window (at least 1)…
    #[schemars(
        with = "Option<u32>",
        default = "default::window_messages",
        range(min = 1)
    )]
    pub(super) window_messages: Option<Spanned<u32>>,
    /// …of this many seconds (at least 1).
    #[schemars(
        with = "Option<u32>",
        default = "default::window_seconds",
        range(min = 1)
    )]
    pub(super) window_seconds: Option<Spanned<u32>>,
    /// The same sender and normalised body within this many seconds is a
    /// duplicate and not answered (0 turns the rule off).
    #[schemars(default = "default::duplicate_seconds")]
    pub(super) duplicate_seconds: Option<u32>,
}

/// `[policy]`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    /// A policy component file to use instead of the embedded one
    /// (`--policy` overrides it); a relative path is taken from the config
    /// file's folder. Unset: the embedded policy.
    #[schemars(with = "Option<String>")]
    pub(super) path: Option<Spanned<String>>,
}

/// `[xmpp]`: where and how to post.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawXmpp {
    /// Bare JID of the MUC room the agents meet in, e.g.
    /// `room@conference.example.org`.
    #[schemars(with = "String")]
    pub(super) room: Spanned<String>,
    /// How a send reaches ejabberd: `ejabberdctl` (runs `ejabberdctl
    /// send_message`; each call boots an Erlang VM) or `http`
    /// (`mod_http_api`: one request to the running server; needs
    /// `api_url`).
    #[schemars(default = "default::transport")]
    pub(super) transport: Option<TransportKind>,
    /// The ejabberdctl command as a list of arguments, run without a shell
    /// (the legacy tool's deployment: `["docker", "exec", "ejabberd",
    /// "ejabberdctl"]`; `-e LC_ALL=C.UTF-8` is added after `exec`).
    #[schemars(
        with = "Option<Vec<String>>",
        default = "default::ejabberdctl",
        length(min = 1)
    )]
    pub(super) ejabberdctl: Option<Spanned<Vec<String>>>,
    /// Base URL of `mod_http_api`, e.g. `http://127.0.0.1:5280/api`;
    /// `transport = "http"` needs it.
    #[schemars(with = "Option<String>")]
    pub(super) api_url: Option<Spanned<String>>,
    /// Basic-auth user of a protected HTTP API, e.g. `admin@example.org`;
    /// needs `api_password_env`.
    #[schemars(with = "Option<String>")]
    pub(super) api_user: Option<Spanned<String>>,
    /// The environment variable holding `api_user`'s password, read when a
    /// request is made; needs `api_user`.
    #[schemars(with = "Option<String>")]
    pub(super) api_password_env: Option<Spanned<String>>,
    /// Time limit of one call to ejabberd, in seconds (at least 1). Unset:
    /// the transport's own.
    #[schemars(with = "Option<u32>", range(min = 1))]
    pub(super) timeout_seconds: Option<Spanned<u32>>,
    /// Longest body accepted, in characters (1 to 1,000,000).
    #[schemars(
        with = "Option<u32>",
        default = "default::max_body_chars",
        range(min = 1, max = 1_000_000)
    )]
    pub(super) max_body_chars: Option<Spanned<u32>>,
}

/// `[redirect]`: the redirect rules' parameters.
#[derive(Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRedirect {
    /// A CLI session's record redirects the agent's bot while younger than
    /// this, in seconds (at least 1; the legacy tool's hour).
    #[schemars(with = "Option<u32>", default = "default::ttl_seconds", range(min = 1))]
    pub(super) ttl_seconds: Option<Spanned<u32>>,
    /// How far in the future a record's timestamp may lie (another
    /// machine's clock), in seconds.
    #[schemars(default = "default::future_skew_seconds")]
    pub(super) future_skew_seconds: Option<u32>,
    /// The agent whose bot read the legacy tool's fixed key
    /// `active_xmpp_sender_session` (migration only; that key is never
    /// written); a configured agent's name. Unset: the key is ignored.
    #[schemars(with = "Option<String>")]
    pub(super) legacy_agent: Option<Spanned<String>>,
}

/// One `[[agents]]` entry.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAgent {
    /// The agent's name, as `--agent NAME` says it: letters, digits, `_`,
    /// `.`, `-` (it is part of a `state_meta` key); unique, case ignored.
    #[schemars(with = "String")]
    pub(super) name: Spanned<String>,
    /// Bare JID the agent posts as, e.g. `mohe@example.org`; unique.
    #[schemars(with = "String")]
    pub(super) jid: Spanned<String>,
    /// Nick in the room, as the room seats it (ejabberd's resourceprep
    /// leaves it unchanged); unique. Unset: the name.
    #[schemars(with = "Option<String>")]
    pub(super) nick: Option<Spanned<String>>,
    /// The agent's XMPP session ids (the Hermes sessions its bot loads), at
    /// least one, none another agent's; the first receives the `[YOU] `
    /// rows of a send.
    #[schemars(with = "Vec<String>", length(min = 1))]
    pub(super) sessions: Spanned<Vec<Spanned<String>>>,
    /// More names the agent's lines are signed with, besides its nick, its
    /// JID's local part and its name (tagging); none may be another
    /// agent's.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub(super) aliases: Vec<Spanned<String>>,
    /// The legacy tool's HTTP port of the agent, kept for the gateway.
    pub(super) http_port: Option<u16>,
    /// The agent's Hermes gateway (API server) port: the bot's Hermes API
    /// server when neither `[bot.agents.NAME] api_url` nor the agent's
    /// `.env` names one.
    pub(super) gateway_port: Option<u16>,
    /// How other agents address it in the room, e.g. `@mohe`: the loop
    /// guard's "addressed" rule (its nick always counts too).
    #[schemars(with = "Option<String>")]
    pub(super) mention: Option<Spanned<String>>,
}

/// The defaults the schema shows, each read from the validated types' own
/// (`types.rs`), the values validation fills in.
pub(super) mod default {
    use super::{LoopGuardConfig, Redirect, TransportKind, Xmpp};
    use crate::types::{BotConfig, MeetingConfig};

    pub(crate) fn transport() -> TransportKind {
        TransportKind::default()
    }
    pub(crate) fn ejabberdctl() -> Vec<String> {
        Xmpp::default_ejabberdctl()
    }
    pub(crate) fn max_body_chars() -> u32 {
        session_switch_contract::limits::DEFAULT_MAX_BODY_CHARS
    }
    pub(crate) fn ttl_seconds() -> u32 {
        Redirect::default().ttl_seconds
    }
    pub(crate) fn future_skew_seconds() -> u32 {
        Redirect::default().future_skew_seconds
    }
    pub(crate) fn max_hops() -> u32 {
        LoopGuardConfig::default().max_hops
    }
    pub(crate) fn window_messages() -> u32 {
        LoopGuardConfig::default().window_messages
    }
    pub(crate) fn window_seconds() -> u32 {
        LoopGuardConfig::default().window_seconds
    }
    pub(crate) fn duplicate_seconds() -> u32 {
        LoopGuardConfig::default().duplicate_seconds
    }
    pub(crate) fn tls() -> crate::BotTls {
        BotConfig::default().tls
    }
    pub(crate) fn turn_timeout_seconds() -> u32 {
        BotConfig::default().turn_timeout_seconds
    }
    pub(crate) fn catch_up_lines() -> u32 {
        BotConfig::default().catch_up_lines
    }
    pub(crate) fn require_mention() -> bool {
        MeetingConfig::default().require_mention
    }
    pub(crate) fn free_response_rooms() -> Vec<String> {
        MeetingConfig::default().free_response_rooms
    }
    pub(crate) fn mention_patterns() -> Vec<String> {
        MeetingConfig::default().mention_patterns
    }
    pub(crate) fn allow_bots() -> crate::AllowBots {
        MeetingConfig::default().allow_bots
    }
    pub(crate) fn stop_words() -> Vec<String> {
        MeetingConfig::default().stop_words
    }
}
