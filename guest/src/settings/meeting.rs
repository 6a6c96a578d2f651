//! The meeting settings of one agent: the room's defaults (WIT `meeting`)
//! with the agent's own values over them (WIT `meeting-overrides`), its
//! wake-word patterns compiled once, at `configure`.

use regex_lite::{Regex, RegexBuilder};

use super::field_checks::check_bare_jid;
use crate::{AllowBots, Meeting, MeetingOverrides};

/// A compiled `mention_patterns` entry; two compare equal when written
/// alike (a compiled regex has no equality of its own).
#[derive(Clone, Debug)]
pub struct Pattern(Regex);

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

impl Pattern {
    /// Whether the pattern matches anywhere in `text`.
    pub fn is_match(&self, text: &str) -> bool {
        self.0.is_match(text)
    }
}

/// What decides whether one agent answers a message (its `[bot]`
/// settings, its own values first).
#[derive(Clone, Debug, PartialEq)]
pub struct AgentMeeting {
    /// `require_mention`, off in a free-response room: a person's message
    /// that addresses nobody is answered only when this is false.
    pub require_mention: bool,
    /// The wake words of `mention_patterns`.
    pub patterns: Vec<Pattern>,
    pub allow_bots: AllowBots,
}

/// The longest pattern accepted, in characters: a wake word, not a program.
const MAX_PATTERN_CHARS: usize = 512;

/// Compile `pattern` case-insensitively, as Hermes compiles its wake words.
/// Errors name the pattern and what is wrong with it.
pub fn compile(who: &str, pattern: &str) -> Result<Pattern, String> {
    if pattern.is_empty() {
        return Err(format!(
            "mention_patterns of {who} has an empty pattern (it would match every message)"
        ));
    }
    if pattern.chars().count() > MAX_PATTERN_CHARS {
        return Err(format!(
            "mention_patterns of {who}: {pattern:?} is longer than {MAX_PATTERN_CHARS} characters"
        ));
    }
    RegexBuilder::new(pattern)
        .case_insensitive(true)
        .build()
        .map(Pattern)
        .map_err(|e| {
            let why = e.to_string().replace('\n', " ");
            format!("mention_patterns of {who}: {pattern:?} is not a valid pattern: {why}")
        })
}

/// `room`'s meeting for the agent `who`: each of `own` over `defaults`.
/// Errors (in words, the caller says where): a free-response room that is
/// not a bare JID, a pattern that does not compile.
pub fn resolve(
    who: &str,
    room: &str,
    defaults: &Meeting,
    own: &MeetingOverrides,
) -> Result<AgentMeeting, String> {
    let rooms = own
        .free_response_rooms
        .as_ref()
        .unwrap_or(&defaults.free_response_rooms);
    for listed in rooms {
        check_bare_jid(&format!("free_response_rooms entry of {who}"), listed)?;
    }
    let free = rooms.iter().any(|r| r.eq_ignore_ascii_case(room));
    let patterns = own
        .mention_patterns
        .as_ref()
        .unwrap_or(&defaults.mention_patterns)
        .iter()
        .map(|p| compile(who, p))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(AgentMeeting {
        require_mention: own.require_mention.unwrap_or(defaults.require_mention) && !free,
        patterns,
        allow_bots: own.allow_bots.unwrap_or(defaults.allow_bots),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> Meeting {
        Meeting {
            require_mention: true,
            free_response_rooms: vec![],
            mention_patterns: vec!["^hey team".into()],
            allow_bots: AllowBots::Mentions,
            stop_words: vec![],
        }
    }

    fn no_overrides() -> MeetingOverrides {
        MeetingOverrides {
            require_mention: None,
            free_response_rooms: None,
            mention_patterns: None,
            allow_bots: None,
        }
    }

    const ROOM: &str = "coregroup@conference.example.org";

    #[test]
    fn an_agents_own_value_wins_and_the_room_default_fills_the_rest() {
        let m = resolve("mohe", ROOM, &defaults(), &no_overrides()).unwrap();
        assert!(m.require_mention);
        assert_eq!(m.allow_bots, AllowBots::Mentions);
        assert!(m.patterns[0].is_match("Hey team, look"));
        let own = MeetingOverrides {
            require_mention: Some(false),
            mention_patterns: Some(vec![]),
            allow_bots: Some(AllowBots::None),
            ..no_overrides()
        };
        let m = resolve("mohe", ROOM, &defaults(), &own).unwrap();
        assert!(!m.require_mention);
        assert!(
            m.patterns.is_empty(),
            "an empty own list replaces the room's"
        );
        assert_eq!(m.allow_bots, AllowBots::None);
    }

    #[test]
    fn a_free_response_room_turns_require_mention_off_there_only() {
        let mut d = defaults();
        d.free_response_rooms = vec!["CoreGroup@conference.example.org".into()];
        assert!(
            !resolve("mohe", ROOM, &d, &no_overrides())
                .unwrap()
                .require_mention
        );
        d.free_response_rooms = vec!["other@conference.example.org".into()];
        assert!(
            resolve("mohe", ROOM, &d, &no_overrides())
                .unwrap()
                .require_mention
        );
        let own = MeetingOverrides {
            free_response_rooms: Some(vec![ROOM.into()]),
            ..no_overrides()
        };
        assert!(!resolve("mohe", ROOM, &d, &own).unwrap().require_mention);
    }

    #[test]
    fn a_bad_pattern_or_room_is_named() {
        let own = MeetingOverrides {
            mention_patterns: Some(vec!["(unclosed".into()]),
            ..no_overrides()
        };
        let e = resolve("agent 'mohe'", ROOM, &defaults(), &own).unwrap_err();
        assert!(
            e.starts_with("mention_patterns of agent 'mohe': \"(unclosed\" is not a valid pattern"),
            "{e}"
        );
        let own = MeetingOverrides {
            mention_patterns: Some(vec![String::new()]),
            ..no_overrides()
        };
        assert!(
            resolve("mohe", ROOM, &defaults(), &own)
                .unwrap_err()
                .contains("empty pattern")
        );
        let own = MeetingOverrides {
            free_response_rooms: Some(vec!["room/with-resource@x".into()]),
            ..no_overrides()
        };
        assert!(
            resolve("mohe", ROOM, &defaults(), &own)
                .unwrap_err()
                .contains("free_response_rooms")
        );
    }
}
