//! `[[agents]]`: names, JIDs, nicks and sessions unique across agents, and
//! the names an agent's lines are recognised by (docs/src/design/rules.md#tagging; the
//! policy's `configure` rules) each belonging to one agent only.

use session_switch_contract::failure::Failure;
use session_switch_contract::ids::api_session_id_problem;
use session_switch_contract::limits::MAX_SESSION_ID_CHARS;
use std::collections::HashMap;
use toml::Spanned;

use super::raw::RawAgent;
use super::source::{Source, Span};
use super::types::AgentConfig;
use super::value_checks::{bare_jid, name_like, non_empty, unique};

/// The name no agent may sign with: the tag itself (`[YOU]` without its
/// brackets), ASCII case ignored, as the policy's `configure` rules.
const TAG_NAME: &str = session_switch_contract::marker::MARKER_NAME;

/// What earlier agents took, for the uniqueness checks (keys lower-cased as
/// the policy compares them; values are the first use's offset or owner).
#[derive(Default)]
struct Taken {
    names: HashMap<String, usize>,
    /// Tagging name → (agent, offset of its first use).
    signs: HashMap<String, (String, usize)>,
    jids: HashMap<String, usize>,
    nicks: HashMap<String, usize>,
    /// Session id → owning agent.
    sessions: HashMap<String, String>,
}

/// Every agent, in file order; at least one.
pub(super) fn agents(raw: Vec<RawAgent>, src: &Source<'_>) -> Result<Vec<AgentConfig>, Failure> {
    let mut taken = Taken::default();
    let agents = raw
        .into_iter()
        .map(|a| agent(a, &mut taken, src))
        .collect::<Result<Vec<_>, _>>()?;
    if agents.is_empty() {
        return Err(src.at(0..0, "no [[agents]]: configure at least one agent".into()));
    }
    Ok(agents)
}

fn agent(a: RawAgent, taken: &mut Taken, src: &Source<'_>) -> Result<AgentConfig, Failure> {
    let name = non_empty(&a.name, "agent name", src)?;
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
    {
        return Err(src.at(
            a.name.span(),
            format!(
                "agent name '{name}' may use only letters, digits, '_', '.', '-' (it is part of a state_meta key)"
            ),
        ));
    }
    unique(
        &mut taken.names,
        name.to_ascii_lowercase(),
        name,
        a.name.span(),
        "agent name",
        src,
    )?;
    let jid = bare_jid(&a.jid, &format!("jid of agent '{name}'"), src)?;
    unique(
        &mut taken.jids,
        jid.to_lowercase(),
        &jid,
        a.jid.span(),
        "jid",
        src,
    )?;
    let nick = match &a.nick {
        Some(n) => name_like(n, "nick", src)?.to_string(),
        None => name.to_string(),
    };
    let nick_span = a.nick.as_ref().map_or(a.name.span(), Spanned::span);
    seated_as_written(&nick, nick_span.clone(), src)?;
    unique(
        &mut taken.nicks,
        nick.to_lowercase(),
        &nick,
        nick_span.clone(),
        "nick",
        src,
    )?;
    let sessions = sessions(&a.sessions, name, taken, src)?;
    let mut aliases = Vec::new();
    for alias in &a.aliases {
        aliases.push(name_like(alias, "alias", src)?.to_string());
    }
    let local = jid.split('@').next().unwrap_or_default().to_string();
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
    signs(sign_fields, name, taken, src)?;
    Ok(AgentConfig {
        name: name.to_string(),
        jid,
        nick,
        sessions,
        aliases,
        http_port: a.http_port,
        gateway_port: a.gateway_port,
        mention: match &a.mention {
            Some(m) => Some(name_like(m, "mention", src)?.to_string()),
            None => None,
        },
    })
}

/// Refuse a nick that ejabberd would seat under another form: it prepares
/// a nick with resourceprep (RFC 6122 §A: NFKC, characters mapped to
/// nothing removed), so `ｍｏｈｅ` and `mo\u{200b}he` take the seat `mohe`,
/// and the agent's reflection would come from a nick the policy, which
/// compares nicks exactly, does not know as the agent's.
fn seated_as_written(nick: &str, span: Span, src: &Source<'_>) -> Result<(), Failure> {
    match jid::ResourcePart::new(nick) {
        Ok(seated) if seated.as_str() == nick => Ok(()),
        Ok(seated) => {
            let seated = seated.as_str();
            Err(src.at(
                span,
                format!(
                    "nick {nick:?} is not the nick the room would seat: ejabberd prepares it \
                     (resourceprep) to {seated:?}, so the agent's own lines would come back \
                     from another nick; write nick = {seated:?}"
                ),
            ))
        }
        Err(e) => Err(src.at(
            span,
            format!("nick {nick:?} is not a nick a room accepts ({e})"),
        )),
    }
}

/// The agent's XMPP session ids: at least one, each a valid Hermes id that
/// no other agent claims.
fn sessions(
    raw: &Spanned<Vec<Spanned<String>>>,
    name: &str,
    taken: &mut Taken,
    src: &Source<'_>,
) -> Result<Vec<String>, Failure> {
    if raw.get_ref().is_empty() {
        return Err(src.at(
            raw.span(),
            format!("agent '{name}' needs at least one XMPP session id in sessions"),
        ));
    }
    let mut own = Vec::new();
    for s in raw.get_ref() {
        let id = non_empty(s, "session id", src)?;
        if id.chars().any(char::is_control) || id.trim() != id {
            return Err(src.at(
                s.span(),
                format!("session id {id:?} has control characters or surrounding spaces"),
            ));
        }
        let chars = id.chars().count();
        if chars > MAX_SESSION_ID_CHARS {
            return Err(src.at(
                s.span(),
                format!(
                    "session id is {chars} characters long, the maximum is \
                     {MAX_SESSION_ID_CHARS} (Hermes refuses longer ids)"
                ),
            ));
        }
        if let Some(problem) = api_session_id_problem(id) {
            return Err(src.at(
                s.span(),
                format!(
                    "session id {id:?} {problem}: Hermes's API server refuses it, \
                     so no gateway turn could run on it"
                ),
            ));
        }
        if let Some(owner) = taken.sessions.get(id) {
            return Err(src.at(
                s.span(),
                format!("session '{id}' is already a session of agent '{owner}'"),
            ));
        }
        taken.sessions.insert(id.to_string(), name.to_string());
        own.push(id.to_string());
    }
    Ok(own)
}

/// The names the agent's lines are recognised by (nick, JID local part,
/// name, aliases): none may be the tag itself or another agent's, or
/// tagging could not tell whose a line is.
fn signs(
    fields: impl Iterator<Item = (&'static str, String, Span)>,
    name: &str,
    taken: &mut Taken,
    src: &Source<'_>,
) -> Result<(), Failure> {
    // Signs compare exactly (as the room compares nicks), so one agent may
    // list case variants; across agents case is ignored, so no two agents
    // differ only in case.
    let mut own_signs: Vec<String> = Vec::new();
    for (field, sign, span) in fields {
        if own_signs.contains(&sign) {
            continue;
        }
        let key = sign.to_ascii_lowercase();
        if key.eq_ignore_ascii_case(TAG_NAME) {
            return Err(src.at(
                span,
                format!(
                    "{field} '{sign}' of agent '{name}' is the [YOU] tag itself; \
                     choose another (tagging would take any line for the agent's)"
                ),
            ));
        }
        if let Some((other, first)) = taken.signs.get(&key).filter(|(o, _)| o != name) {
            return Err(src.at(
                span,
                format!(
                    "{field} '{sign}' of agent '{name}' is already a name of agent \
                     '{other}' (first at line {}): tagging could not tell their lines apart",
                    src.line(*first)
                ),
            ));
        }
        taken
            .signs
            .entry(key)
            .or_insert((name.to_string(), span.start));
        own_signs.push(sign);
    }
    Ok(())
}
