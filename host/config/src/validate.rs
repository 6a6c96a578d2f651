//! From the file's shape to a [`Config`]: each section checked against the
//! rules docs/src/design/contracts.md and the policy's `configure` state, every error naming
//! the line.

use session_switch_contract::failure::Failure;
use session_switch_contract::limits::MAX_BODY_CHARS_LIMIT;
use std::path::PathBuf;
use toml::Spanned;

use super::raw::{RawConfig, RawPolicy, RawRedirect, RawXmpp};
use super::source::Source;
use super::types::{AgentConfig, Config, Redirect, TransportKind, Xmpp};
use super::value_checks::bare_jid;
use session_switch_contract::limits::DEFAULT_MAX_BODY_CHARS;

pub(super) fn validate(raw: RawConfig, src: &Source<'_>) -> Result<Config, Failure> {
    let xmpp = xmpp(raw.xmpp, src)?;
    let agents = super::agents::agents(raw.agents, src)?;
    let policy_path = policy_path(raw.policy, src)?;
    let redirect = redirect(raw.redirect, &agents, src)?;
    let loop_guard = super::loop_guard::loop_guard(raw.loop_guard, src)?;
    let bot = super::bot::bot(raw.bot, &agents, src)?;
    Ok(Config {
        path: None,
        xmpp,
        redirect,
        agents,
        policy_path,
        loop_guard,
        bot,
    })
}

/// `[xmpp]`.
fn xmpp(x: RawXmpp, src: &Source<'_>) -> Result<Xmpp, Failure> {
    let at = |span, msg: String| src.at(span, msg);
    let room = bare_jid(&x.room, "room", src)?;
    let transport = x.transport.unwrap_or_default();
    let ejabberdctl = match x.ejabberdctl {
        Some(argv) if argv.get_ref().is_empty() || argv.get_ref().iter().any(|a| a.is_empty()) => {
            return Err(at(
                argv.span(),
                "ejabberdctl must be a non-empty list of non-empty arguments".into(),
            ));
        }
        Some(argv) => argv.into_inner(),
        None => Xmpp::default_ejabberdctl(),
    };
    if let Some(url) = &x.api_url
        && !(url.get_ref().starts_with("http://") || url.get_ref().starts_with("https://"))
    {
        return Err(at(
            url.span(),
            format!(
                "api_url '{}' must start with http:// or https://",
                url.get_ref()
            ),
        ));
    }
    if transport == TransportKind::Http && x.api_url.is_none() {
        return Err(at(
            x.room.span(),
            "transport = \"http\" needs api_url in [xmpp]".into(),
        ));
    }
    match (&x.api_user, &x.api_password_env) {
        (Some(u), None) => {
            return Err(at(
                u.span(),
                "api_user needs api_password_env (the variable holding the password)".into(),
            ));
        }
        (None, Some(p)) => return Err(at(p.span(), "api_password_env needs api_user".into())),
        _ => {}
    }
    if let Some(t) = &x.timeout_seconds
        && *t.get_ref() == 0
    {
        return Err(at(t.span(), "timeout_seconds must be at least 1".into()));
    }
    let max_body_chars = match x.max_body_chars {
        Some(m) if *m.get_ref() == 0 => {
            return Err(at(m.span(), "max_body_chars must be at least 1".into()));
        }
        Some(m) if *m.get_ref() > MAX_BODY_CHARS_LIMIT => {
            return Err(at(
                m.span(),
                format!("max_body_chars must be at most {MAX_BODY_CHARS_LIMIT}"),
            ));
        }
        Some(m) => m.into_inner(),
        None => DEFAULT_MAX_BODY_CHARS,
    };
    Ok(Xmpp {
        room,
        transport,
        ejabberdctl,
        api_url: x
            .api_url
            .map(|u| u.into_inner().trim_end_matches('/').to_string()),
        api_user: x.api_user.map(Spanned::into_inner),
        api_password_env: x.api_password_env.map(Spanned::into_inner),
        timeout_seconds: x.timeout_seconds.map(Spanned::into_inner),
        max_body_chars,
    })
}

/// `[policy] path`, as written (made relative to the file by `Config::load`).
fn policy_path(policy: Option<RawPolicy>, src: &Source<'_>) -> Result<Option<PathBuf>, Failure> {
    match policy.and_then(|p| p.path) {
        Some(p) if p.get_ref().trim().is_empty() || p.get_ref().contains('\0') => Err(src.at(
            p.span(),
            "[policy] path must name a policy component file".into(),
        )),
        Some(p) => Ok(Some(PathBuf::from(p.into_inner()))),
        None => Ok(None),
    }
}

/// `[redirect]`; `legacy_agent` must be one of `agents`.
fn redirect(r: RawRedirect, agents: &[AgentConfig], src: &Source<'_>) -> Result<Redirect, Failure> {
    let defaults = Redirect::default();
    let ttl_seconds = match r.ttl_seconds {
        Some(t) if *t.get_ref() == 0 => {
            return Err(src.at(t.span(), "ttl_seconds must be at least 1".into()));
        }
        Some(t) => t.into_inner(),
        None => defaults.ttl_seconds,
    };
    let legacy_agent = match r.legacy_agent {
        Some(l) if !agents.iter().any(|a| &a.name == l.get_ref()) => {
            return Err(src.at(
                l.span(),
                format!("legacy_agent '{}' is not a configured agent", l.get_ref()),
            ));
        }
        Some(l) => Some(l.into_inner()),
        None => None,
    };
    Ok(Redirect {
        ttl_seconds,
        future_skew_seconds: r
            .future_skew_seconds
            .unwrap_or(defaults.future_skew_seconds),
        legacy_agent,
    })
}
