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

use serde::Deserialize;
use session_switch_contract::failure::Failure;
use session_switch_contract::limits::{MAX_BODY_CHARS_LIMIT, MAX_SESSION_ID_CHARS};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use toml::Spanned;

/// The seed's TTL of a record: one hour.
pub const DEFAULT_TTL_SECONDS: u32 = 3600;
/// Clock skew tolerated between the sender's and the gateway's clocks.
pub const DEFAULT_FUTURE_SKEW_SECONDS: u32 = 120;
pub use session_switch_contract::limits::DEFAULT_MAX_BODY_CHARS;
/// The name no agent may sign with: the tag itself (`[YOU]` without its
/// brackets), ASCII case ignored, as the policy's `configure` rules.
const TAG_NAME: &str = session_switch_contract::marker::MARKER_NAME;

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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
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
    /// The seed's per-agent ports and @mention format, kept for the gateway.
    pub http_port: Option<u16>,
    pub gateway_port: Option<u16>,
    pub mention: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    xmpp: RawXmpp,
    #[serde(default)]
    redirect: RawRedirect,
    #[serde(default)]
    agents: Vec<RawAgent>,
    policy: Option<RawPolicy>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    path: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawXmpp {
    room: Spanned<String>,
    transport: Option<TransportKind>,
    ejabberdctl: Option<Spanned<Vec<String>>>,
    api_url: Option<Spanned<String>>,
    api_user: Option<Spanned<String>>,
    api_password_env: Option<Spanned<String>>,
    timeout_seconds: Option<Spanned<u32>>,
    max_body_chars: Option<Spanned<u32>>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRedirect {
    ttl_seconds: Option<Spanned<u32>>,
    future_skew_seconds: Option<u32>,
    legacy_agent: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgent {
    name: Spanned<String>,
    jid: Spanned<String>,
    nick: Option<Spanned<String>>,
    sessions: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    aliases: Vec<Spanned<String>>,
    http_port: Option<u16>,
    gateway_port: Option<u16>,
    mention: Option<String>,
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
                " (copy examples/session-switch.toml there, or pass --config PATH)"
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
        validate(raw, &src)
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

/// The config text, for errors that name the line.
struct Source<'a> {
    text: &'a str,
    origin: &'a str,
}

type Span = std::ops::Range<usize>;

impl Source<'_> {
    fn line(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }
    fn at(&self, span: Span, msg: String) -> Failure {
        Failure::bad_input(format!(
            "config {}, line {}: {msg}",
            self.origin,
            self.line(span.start)
        ))
    }
}

fn validate(raw: RawConfig, src: &Source<'_>) -> Result<Config, Failure> {
    let at = |span: Span, msg: String| src.at(span, msg);
    let x = raw.xmpp;
    let room = bare_jid(&x.room, "room", src)?;
    let transport = x.transport.unwrap_or(TransportKind::Ejabberdctl);
    let ejabberdctl = match x.ejabberdctl {
        Some(argv) if argv.get_ref().is_empty() || argv.get_ref().iter().any(|a| a.is_empty()) => {
            return Err(at(
                argv.span(),
                "ejabberdctl must be a non-empty list of non-empty arguments".into(),
            ));
        }
        Some(argv) => argv.into_inner(),
        None => vec!["ejabberdctl".to_string()],
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

    let mut agents = Vec::with_capacity(raw.agents.len());
    // Keys are ASCII-lower-cased, as the policy compares names.
    let mut names: HashMap<String, usize> = HashMap::new();
    // Tagging name (ASCII-lower-cased) → (agent, offset of its first use).
    let mut signs: HashMap<String, (String, usize)> = HashMap::new();
    let mut jids: HashMap<String, usize> = HashMap::new();
    let mut nicks: HashMap<String, usize> = HashMap::new();
    let mut sessions: HashMap<String, String> = HashMap::new();
    for a in raw.agents {
        let name = non_empty(&a.name, "agent name", src)?;
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
        {
            return Err(at(
                a.name.span(),
                format!(
                    "agent name '{name}' may use only letters, digits, '_', '.', '-' (it is part of a state_meta key)"
                ),
            ));
        }
        unique(
            &mut names,
            name.to_ascii_lowercase(),
            a.name.span(),
            "agent name",
            src,
        )?;
        let jid = bare_jid(&a.jid, &format!("jid of agent '{name}'"), src)?;
        unique(&mut jids, jid.to_lowercase(), a.jid.span(), "jid", src)?;
        let nick = match &a.nick {
            Some(n) => name_like(n, "nick", src)?.to_string(),
            None => name.to_string(),
        };
        let nick_span = a.nick.as_ref().map_or(a.name.span(), Spanned::span);
        unique(
            &mut nicks,
            nick.to_lowercase(),
            nick_span.clone(),
            "nick",
            src,
        )?;
        if a.sessions.get_ref().is_empty() {
            return Err(at(
                a.sessions.span(),
                format!("agent '{name}' needs at least one XMPP session id in sessions"),
            ));
        }
        let mut own = Vec::new();
        for s in a.sessions.get_ref() {
            let id = non_empty(s, "session id", src)?;
            if id.chars().any(char::is_control) || id.trim() != id {
                return Err(at(
                    s.span(),
                    format!("session id {id:?} has control characters or surrounding spaces"),
                ));
            }
            let chars = id.chars().count();
            if chars > MAX_SESSION_ID_CHARS {
                return Err(at(
                    s.span(),
                    format!(
                        "session id is {chars} characters long, the maximum is \
                         {MAX_SESSION_ID_CHARS} (Hermes refuses longer ids)"
                    ),
                ));
            }
            if let Some(owner) = sessions.get(id) {
                return Err(at(
                    s.span(),
                    format!("session '{id}' is already a session of agent '{owner}'"),
                ));
            }
            sessions.insert(id.to_string(), name.to_string());
            own.push(id.to_string());
        }
        let mut aliases = Vec::new();
        for alias in &a.aliases {
            aliases.push(name_like(alias, "alias", src)?.to_string());
        }
        // The names the agent's lines are recognised by (DESIGN §3
        // "Tagging"; the policy's `configure` rules): nick, JID local part,
        // name, aliases. Each may belong to one agent only, and none may be
        // the tag itself, or tagging could not tell whose a line is.
        let local = jid.split('@').next().unwrap_or_default().to_string();
        let mut own_signs: Vec<String> = Vec::new();
        let sign_fields = [
            ("nick", nick.clone(), nick_span),
            ("JID local part", local, a.jid.span()),
            ("name", name.to_string(), a.name.span()),
        ]
        .into_iter()
        .chain(
            a.aliases
                .iter()
                .zip(&aliases)
                .map(|(spanned, alias)| ("alias", alias.clone(), spanned.span())),
        );
        for (field, sign, span) in sign_fields {
            let key = sign.to_ascii_lowercase();
            if own_signs.contains(&key) {
                continue;
            }
            if key.eq_ignore_ascii_case(TAG_NAME) {
                return Err(at(
                    span,
                    format!(
                        "{field} '{sign}' of agent '{name}' is the [YOU] tag itself; \
                         choose another (tagging would take any line for the agent's)"
                    ),
                ));
            }
            if let Some((other, first)) = signs.get(&key) {
                return Err(at(
                    span,
                    format!(
                        "{field} '{sign}' of agent '{name}' is already a name of agent \
                         '{other}' (first at line {}): tagging could not tell their lines apart",
                        src.line(*first)
                    ),
                ));
            }
            signs.insert(key.clone(), (name.to_string(), span.start));
            own_signs.push(key);
        }
        agents.push(AgentConfig {
            name: name.to_string(),
            jid,
            nick,
            sessions: own,
            aliases,
            http_port: a.http_port,
            gateway_port: a.gateway_port,
            mention: a.mention,
        });
    }
    if agents.is_empty() {
        return Err(at(
            0..0,
            "no [[agents]]: configure at least one agent".into(),
        ));
    }

    let policy_path = match raw.policy.and_then(|p| p.path) {
        Some(p) if p.get_ref().trim().is_empty() || p.get_ref().contains('\0') => {
            return Err(at(
                p.span(),
                "[policy] path must name a policy component file".into(),
            ));
        }
        Some(p) => Some(PathBuf::from(p.into_inner())),
        None => None,
    };

    let r = raw.redirect;
    let ttl_seconds = match r.ttl_seconds {
        Some(t) if *t.get_ref() == 0 => {
            return Err(at(t.span(), "ttl_seconds must be at least 1".into()));
        }
        Some(t) => t.into_inner(),
        None => DEFAULT_TTL_SECONDS,
    };
    let legacy_agent = match r.legacy_agent {
        Some(l) if !agents.iter().any(|a: &AgentConfig| &a.name == l.get_ref()) => {
            return Err(at(
                l.span(),
                format!("legacy_agent '{}' is not a configured agent", l.get_ref()),
            ));
        }
        Some(l) => Some(l.into_inner()),
        None => None,
    };

    Ok(Config {
        path: None,
        xmpp: Xmpp {
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
        },
        redirect: Redirect {
            ttl_seconds,
            future_skew_seconds: r.future_skew_seconds.unwrap_or(DEFAULT_FUTURE_SKEW_SECONDS),
            legacy_agent,
        },
        agents,
        policy_path,
    })
}

fn non_empty<'s>(
    value: &'s Spanned<String>,
    what: &str,
    src: &Source<'_>,
) -> Result<&'s str, Failure> {
    let v = value.get_ref();
    if v.trim().is_empty() {
        return Err(src.at(value.span(), format!("{what} must not be empty")));
    }
    Ok(v)
}

/// A nick or alias (the policy's `configure` rules): non-empty, no control
/// characters (a nick travels in stanzas and log lines), no surrounding
/// whitespace (a signature is matched from the line's first character).
fn name_like<'s>(
    value: &'s Spanned<String>,
    what: &str,
    src: &Source<'_>,
) -> Result<&'s str, Failure> {
    let v = non_empty(value, what, src)?;
    if v.chars().any(char::is_control) {
        return Err(src.at(
            value.span(),
            format!("{what} {v:?} contains a control character"),
        ));
    }
    if v.trim() != v {
        return Err(src.at(
            value.span(),
            format!("{what} {v:?} has leading or trailing whitespace"),
        ));
    }
    Ok(v)
}

/// A bare JID per RFC 7622 (the `jid` crate of xmpp-rs): local part, domain,
/// no resource. Returned as written. Its nodeprep and IDNA checks also
/// refuse what the policy's `configure` refuses in a JID (whitespace,
/// control characters, a second `@`; `tests/config.rs`).
fn bare_jid(value: &Spanned<String>, what: &str, src: &Source<'_>) -> Result<String, Failure> {
    let v = value.get_ref();
    let parsed = jid::Jid::from_str(v).map_err(|e| {
        src.at(
            value.span(),
            format!("{what} '{v}' is not a valid JID: {e}"),
        )
    })?;
    if parsed.resource().is_some() {
        return Err(src.at(
            value.span(),
            format!("{what} '{v}' must be a bare JID (no /resource)"),
        ));
    }
    if parsed.node().is_none() {
        return Err(src.at(
            value.span(),
            format!("{what} '{v}' needs a local part (name@domain)"),
        ));
    }
    Ok(v.clone())
}

/// Record `key` as seen at `span`; a second sighting is an error naming both lines.
fn unique(
    seen: &mut HashMap<String, usize>,
    key: String,
    span: Span,
    what: &str,
    src: &Source<'_>,
) -> Result<(), Failure> {
    if let Some(&first) = seen.get(&key) {
        let msg = format!(
            "duplicate {what} '{key}' (first at line {})",
            src.line(first)
        );
        return Err(src.at(span, msg));
    }
    seen.insert(key, span.start);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "[xmpp]\nroom = \"room@conference.example.org\"\n\n\
        [[agents]]\nname = \"mohe\"\njid = \"mohe@example.org\"\nsessions = [\"xmpp-mohe\"]\n";

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
