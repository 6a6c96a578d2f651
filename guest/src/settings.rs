//! The settings the host passes to `configure` (WIT `settings`), validated
//! once, with what the rules look up on every call precomputed: each agent's
//! names for tagging, which agent owns which XMPP session, and the prefix
//! length to ask `host.history` for. What a valid session id, name or JID is,
//! field by field, is `settings/field_checks.rs`.

use std::collections::BTreeMap;

use crate::failure::{bad_input, unknown_agent};
use crate::{Agent, Failure, Settings};

mod field_checks;
mod meeting;

use field_checks::{check_bare_jid, check_text};
pub use meeting::{AgentMeeting, Pattern};

pub use field_checks::check_session_id;
pub use session_switch_contract::limits::MAX_SESSION_ID_CHARS;
pub use session_switch_contract::marker::{MARKER_NAME, YOU_TAG as TAG};

/// How many stacked `[YOU] ` markers the history prefix must still see
/// through to find the name behind them. Rows with more markers than this are
/// treated as not the agent's own (they are untagged): the safe side.
pub const MARKER_BUDGET: usize = 8;

/// One configured agent and the names it signs its lines with.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentEntry {
    /// The agent as configured.
    pub agent: Agent,
    /// Names that mark a line as the agent's own (docs/src/design/rules.md#tagging): its
    /// nick, JID local part, name and aliases, without duplicates
    /// (ASCII-case-insensitive), in that order.
    pub names: Vec<String>,
    /// Who it answers: the room's meeting settings with its own over them.
    pub meeting: AgentMeeting,
}

impl AgentEntry {
    /// Whether `session_id` is one of this agent's XMPP sessions.
    pub fn owns_session(&self, session_id: &str) -> bool {
        self.agent.sessions.iter().any(|s| s == session_id)
    }

    /// The agent's first XMPP session: the one a send writes its
    /// `[YOU] ` rows to (WIT `agent.sessions`).
    pub fn history_session(&self) -> &str {
        // Validation guarantees at least one session.
        &self.agent.sessions[0]
    }
}

/// Settings that passed [`ValidSettings::new`]; the rules take only these.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidSettings {
    settings: Settings,
    agents: Vec<AgentEntry>,
    /// XMPP session id → index of the agent that owns it.
    session_owner: BTreeMap<String, usize>,
    prefix_chars: u32,
    /// The stop words as the stop rule compares them (folded).
    stop_words: Vec<String>,
}

impl ValidSettings {
    /// Validate `settings` (the `configure` rules):
    /// - at least one agent;
    /// - every name, nick, JID, session id and alias non-empty, without
    ///   control characters and without surrounding whitespace;
    /// - names, nicks and JIDs unique among agents, ASCII case ignored (JIDs
    ///   compare case-folded, RFC 7622; for nicks this is stricter than the
    ///   room, which seats `MoHe` beside `mohe`: no two agents may differ
    ///   only in case, while every comparison with a room nick is exact);
    ///   session ids unique across all agents (exact: Hermes ids are
    ///   case-sensitive), each at most 256 characters;
    /// - each JID (and the room) a bare JID: `local@domain`, no resource;
    /// - no tagging name (nick, JID local part, name, alias) shared by two
    ///   agents (ASCII case ignored; one agent may list case variants, each
    ///   signing exactly), and none equal to `YOU` in any case (the tag
    ///   itself), so a signed line belongs to at most one agent;
    /// - `legacy-agent`, when given, names a configured agent;
    /// - `ttl-seconds > 0` and `max-body-chars > 0`;
    /// - every `mention-patterns` entry (the room's and each agent's) a
    ///   pattern that compiles, every free-response room a bare JID, every
    ///   stop word non-empty once folded and without control characters.
    ///
    /// Errors: kind `bad-input`, `invalid settings: <what and where>`.
    pub fn new(settings: Settings) -> Result<Self, Failure> {
        let invalid = |what: String| bad_input(format!("invalid settings: {what}"));
        if settings.agents.is_empty() {
            return Err(invalid(
                "no agents configured (at least one is needed)".into(),
            ));
        }
        if settings.ttl_seconds == 0 {
            return Err(invalid(
                "ttl-seconds is 0; it must be > 0 (the legacy tool used 3600)".into(),
            ));
        }
        if settings.max_body_chars == 0 {
            return Err(invalid(
                "max-body-chars is 0; it must be > 0 (default 10000)".into(),
            ));
        }
        check_bare_jid("room", &settings.room).map_err(invalid)?;

        let mut agents = Vec::with_capacity(settings.agents.len());
        let mut session_owner = BTreeMap::new();
        // Case-folded name / nick / JID / tagging name → agent that has it.
        let mut seen_names: BTreeMap<String, String> = BTreeMap::new();
        let mut seen_nicks: BTreeMap<String, String> = BTreeMap::new();
        let mut seen_jids: BTreeMap<String, String> = BTreeMap::new();
        let mut seen_signs: BTreeMap<String, String> = BTreeMap::new();

        let guard = &settings.loop_guard;
        for (field, value) in [
            ("max_hops", guard.max_hops),
            ("window_messages", guard.window_messages),
            ("window_seconds", guard.window_seconds),
        ] {
            if value == 0 {
                return Err(invalid(format!("loop guard {field} must be at least 1")));
            }
        }

        for (i, agent) in settings.agents.iter().enumerate() {
            let who = if agent.name.is_empty() {
                format!("agent #{}", i + 1)
            } else {
                format!("agent '{}'", agent.name)
            };
            check_text(&format!("name of {who}"), &agent.name).map_err(invalid)?;
            let name = &agent.name;
            check_text(&format!("nick of {who}"), &agent.nick).map_err(invalid)?;
            check_bare_jid(&format!("JID of {who}"), &agent.jid).map_err(invalid)?;
            if let Some(mention) = &agent.mention {
                check_text(&format!("mention of {who}"), mention).map_err(invalid)?;
            }
            for (field, value, seen) in [
                ("name", name, &mut seen_names),
                ("nick", &agent.nick, &mut seen_nicks),
                ("JID", &agent.jid, &mut seen_jids),
            ] {
                if let Some(other) = seen.insert(value.to_ascii_lowercase(), name.clone()) {
                    return Err(invalid(format!(
                        "{field} '{value}' is used by both '{other}' and '{name}'"
                    )));
                }
            }
            if agent.sessions.is_empty() {
                return Err(invalid(format!("{who} has no XMPP sessions")));
            }
            for session in &agent.sessions {
                check_session_id(session)
                    .map_err(|e| invalid(format!("XMPP session of {who}: {e}")))?;
                if let Some(&owner) = session_owner.get(session) {
                    let other: &Agent = &settings.agents[owner];
                    return Err(invalid(format!(
                        "session '{session}' is listed for both '{}' and '{name}'",
                        other.name
                    )));
                }
                session_owner.insert(session.clone(), i);
            }
            for alias in &agent.aliases {
                check_text(&format!("alias of {who}"), alias).map_err(invalid)?;
            }

            let local = agent.jid.split('@').next().unwrap_or_default();
            let mut names: Vec<String> = Vec::new();
            for candidate in [&agent.nick, &local.to_string(), name]
                .into_iter()
                .chain(&agent.aliases)
            {
                if !names.contains(candidate) {
                    names.push(candidate.clone());
                }
            }
            for sign in &names {
                if sign.eq_ignore_ascii_case(MARKER_NAME) {
                    return Err(invalid(format!(
                        "{who} signs as '{sign}', which is the [YOU] tag itself"
                    )));
                }
                // Across agents case is ignored (two agents signing `mohe`
                // and `Mohe` would confuse a reader); one agent may sign
                // with several case variants.
                if let Some(other) = seen_signs.insert(sign.to_ascii_lowercase(), name.clone())
                    && &other != name
                {
                    return Err(invalid(format!(
                        "'{sign}' is a name of both '{other}' and '{name}': \
                         tagging could not tell their lines apart"
                    )));
                }
            }
            let meeting = meeting::resolve(&who, &settings.room, &settings.meeting, &agent.meeting)
                .map_err(invalid)?;
            agents.push(AgentEntry {
                agent: agent.clone(),
                names,
                meeting,
            });
        }

        if let Some(legacy) = &settings.legacy_agent
            && !agents.iter().any(|a| &a.agent.name == legacy)
        {
            let names: Vec<&str> = agents.iter().map(|a| a.agent.name.as_str()).collect();
            return Err(invalid(format!(
                "legacy-agent '{legacy}' is not a configured agent (configured: {})",
                names.join(", ")
            )));
        }

        // The room's own patterns are checked even when every agent has
        // its own: a config that names a broken pattern is refused.
        for pattern in &settings.meeting.mention_patterns {
            meeting::compile("the room", pattern).map_err(invalid)?;
        }
        let mut stop_words = Vec::with_capacity(settings.meeting.stop_words.len());
        for word in &settings.meeting.stop_words {
            let folded = crate::loop_guard::stop_form(word);
            if folded.is_empty() || word.chars().any(char::is_control) {
                return Err(invalid(format!(
                    "stop word {word:?} is empty once blanks and a final stop mark are \
                     removed, or holds a control character"
                )));
            }
            stop_words.push(folded);
        }

        let longest_name = agents
            .iter()
            .flat_map(|a| &a.names)
            .map(|n| n.chars().count())
            .max()
            .unwrap_or(0);
        let prefix_chars = prefix_chars_for(longest_name);
        Ok(Self {
            settings,
            agents,
            session_owner,
            prefix_chars,
            stop_words,
        })
    }

    /// The stop words, folded as [`crate::loop_guard::stop_form`] reads a
    /// body.
    pub fn stop_words(&self) -> &[String] {
        &self.stop_words
    }

    /// The settings as given to `configure`.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// All agents, in configuration order.
    pub fn agents(&self) -> &[AgentEntry] {
        &self.agents
    }

    /// The agent named `name` (exact match). Errors: `unknown-agent`,
    /// `unknown agent 'x' (configured: a, b)`.
    pub fn agent(&self, name: &str) -> Result<&AgentEntry, Failure> {
        self.agents
            .iter()
            .find(|a| a.agent.name == name)
            .ok_or_else(|| unknown_agent(name, self.agents.iter().map(|a| a.agent.name.as_str())))
    }

    /// The agents `agent` selects: all when `None`, else the one named
    /// (errors as [`ValidSettings::agent`]).
    pub fn select(&self, agent: Option<&str>) -> Result<Vec<&AgentEntry>, Failure> {
        match agent {
            None => Ok(self.agents.iter().collect()),
            Some(name) => Ok(vec![self.agent(name)?]),
        }
    }

    /// The agent whose XMPP session `session_id` is, if any.
    pub fn session_owner(&self, session_id: &str) -> Option<&AgentEntry> {
        self.session_owner.get(session_id).map(|&i| &self.agents[i])
    }

    /// Whether `agent` is the `legacy-agent` (the one that may read the legacy
    /// `xmpp_session_bridge.py`'s fixed key, docs/src/design/contracts.md#records).
    pub fn is_legacy(&self, agent: &str) -> bool {
        self.settings.legacy_agent.as_deref() == Some(agent)
    }

    /// Bare JID of the MUC room.
    pub fn room(&self) -> &str {
        &self.settings.room
    }

    /// The loop guard's bounds (WIT `settings.loop-guard`).
    pub fn loop_guard(&self) -> &crate::LoopGuard {
        &self.settings.loop_guard
    }

    /// Record lifetime in seconds (WIT `settings.ttl-seconds`).
    pub fn ttl_seconds(&self) -> f64 {
        f64::from(self.settings.ttl_seconds)
    }

    /// Allowed future skew of a record's timestamp, in seconds.
    pub fn future_skew_seconds(&self) -> f64 {
        f64::from(self.settings.future_skew_seconds)
    }

    /// Longest accepted body after normalisation, in characters.
    pub fn max_body_chars(&self) -> u32 {
        self.settings.max_body_chars
    }

    /// The `prefix-chars` to request from `host.history`: see
    /// [`prefix_chars_for`].
    pub fn prefix_chars(&self) -> u32 {
        self.prefix_chars
    }
}

/// How many characters of each row the tagging rules need, for names of at
/// most `longest_name` characters: `MARKER_BUDGET × len("[YOU] ") +
/// longest_name + 2`, i.e. room for eight stacked `[YOU] ` markers, then the
/// longest name with its delimiter (`name:`) or brackets (`[name]`). 57 for
/// the legacy tool's agents (`xiaoguo`). Larger prefixes cost boundary
/// crossings on every row (docs/src/design/where-the-time-goes.md).
pub fn prefix_chars_for(longest_name: usize) -> u32 {
    let chars = MARKER_BUDGET * TAG.chars().count() + longest_name + 2;
    u32::try_from(chars).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests;
