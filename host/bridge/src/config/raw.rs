//! The config file's shape as serde reads it (every value with its span,
//! so errors can name the line), and the text those spans point into.

use serde::Deserialize;
use session_switch_contract::failure::Failure;
use toml::Spanned;

use super::TransportKind;

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

/// The config text, for errors that name the line.
pub(super) struct Source<'a> {
    pub(super) text: &'a str,
    pub(super) origin: &'a str,
}

pub(super) type Span = std::ops::Range<usize>;

impl Source<'_> {
    pub(super) fn line(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }
    pub(super) fn at(&self, span: Span, msg: String) -> Failure {
        Failure::bad_input(format!(
            "config {}, line {}: {msg}",
            self.origin,
            self.line(span.start)
        ))
    }
}
