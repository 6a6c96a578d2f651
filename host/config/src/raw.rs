//! The config file's shape as serde reads it: every value with its span,
//! so errors can name the line (`source.rs`).

use serde::Deserialize;
use toml::Spanned;

use super::types::TransportKind;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(super) xmpp: RawXmpp,
    #[serde(default)]
    pub(super) redirect: RawRedirect,
    #[serde(default)]
    pub(super) agents: Vec<RawAgent>,
    pub(super) policy: Option<RawPolicy>,
    pub(super) loop_guard: Option<RawLoopGuard>,
    pub(super) bot: Option<super::bot::RawBot>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLoopGuard {
    pub(super) max_hops: Option<Spanned<u32>>,
    pub(super) window_messages: Option<Spanned<u32>>,
    pub(super) window_seconds: Option<Spanned<u32>>,
    pub(super) duplicate_seconds: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    pub(super) path: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawXmpp {
    pub(super) room: Spanned<String>,
    pub(super) transport: Option<TransportKind>,
    pub(super) ejabberdctl: Option<Spanned<Vec<String>>>,
    pub(super) api_url: Option<Spanned<String>>,
    pub(super) api_user: Option<Spanned<String>>,
    pub(super) api_password_env: Option<Spanned<String>>,
    pub(super) timeout_seconds: Option<Spanned<u32>>,
    pub(super) max_body_chars: Option<Spanned<u32>>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRedirect {
    pub(super) ttl_seconds: Option<Spanned<u32>>,
    pub(super) future_skew_seconds: Option<u32>,
    pub(super) legacy_agent: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAgent {
    pub(super) name: Spanned<String>,
    pub(super) jid: Spanned<String>,
    pub(super) nick: Option<Spanned<String>>,
    pub(super) sessions: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    pub(super) aliases: Vec<Spanned<String>>,
    pub(super) http_port: Option<u16>,
    pub(super) gateway_port: Option<u16>,
    pub(super) mention: Option<Spanned<String>>,
}
