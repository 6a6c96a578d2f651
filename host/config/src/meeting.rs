//! `[bot]`'s meeting keys and an agent's own in `[bot.agents.NAME]`:
//! `require_mention`, `free_response_rooms`, `mention_patterns`,
//! `allow_bots` (both), `stop_words` (the room's only). Hermes's names and
//! defaults; the policy applies them, this checks them with their line.

use serde::Deserialize;
use session_switch_contract::failure::Failure;
use toml::Spanned;

use super::source::Source;
use super::types::{AllowBots, MeetingConfig, MeetingOverridesConfig};
use super::value_checks::bare_jid;

/// The meeting keys as serde reads them, in `[bot]` or an agent's table.
#[derive(Default, Deserialize)]
pub(super) struct RawMeeting {
    pub(super) require_mention: Option<bool>,
    pub(super) free_response_rooms: Option<Vec<Spanned<String>>>,
    pub(super) mention_patterns: Option<Vec<Spanned<String>>>,
    pub(super) allow_bots: Option<Spanned<String>>,
}

/// `[bot]`'s meeting keys with their defaults; `stop_words` is `[bot]`'s
/// own key (a stop is the room's).
pub(super) fn room_meeting(
    raw: RawMeeting,
    stop_words: Option<Vec<Spanned<String>>>,
    src: &Source<'_>,
) -> Result<MeetingConfig, Failure> {
    let own = overrides(raw, "[bot]", src)?;
    let defaults = MeetingConfig::default();
    let stop_words = match stop_words {
        None => defaults.stop_words,
        Some(words) => words
            .into_iter()
            .map(|w| {
                let word = w.get_ref();
                if word.trim().is_empty() || word.chars().any(char::is_control) {
                    Err(src.at(
                        w.span(),
                        format!(
                            "[bot] stop_words: {word:?} must be a word, not empty or with \
                             control characters"
                        ),
                    ))
                } else {
                    Ok(w.into_inner())
                }
            })
            .collect::<Result<_, _>>()?,
    };
    Ok(MeetingConfig {
        require_mention: own.require_mention.unwrap_or(defaults.require_mention),
        free_response_rooms: own
            .free_response_rooms
            .unwrap_or(defaults.free_response_rooms),
        mention_patterns: own.mention_patterns.unwrap_or(defaults.mention_patterns),
        allow_bots: own.allow_bots.unwrap_or(defaults.allow_bots),
        stop_words,
    })
}

/// The meeting keys of `section` as given: each room a bare JID, each
/// pattern one that compiles.
pub(super) fn overrides(
    raw: RawMeeting,
    section: &str,
    src: &Source<'_>,
) -> Result<MeetingOverridesConfig, Failure> {
    let free_response_rooms = raw
        .free_response_rooms
        .map(|rooms| {
            rooms
                .iter()
                .map(|r| bare_jid(r, &format!("{section} free_response_rooms entry"), src))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    let mention_patterns = raw
        .mention_patterns
        .map(|patterns| {
            patterns
                .into_iter()
                .map(|p| {
                    check_pattern(p.get_ref())
                        .map_err(|why| {
                            src.at(p.span(), format!("{section} mention_patterns: {why}"))
                        })
                        .map(|()| p.into_inner())
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    let allow_bots = raw
        .allow_bots
        .map(|v| match v.get_ref().as_str() {
            "none" => Ok(AllowBots::None),
            "mentions" => Ok(AllowBots::Mentions),
            "all" => Ok(AllowBots::All),
            other => Err(src.at(
                v.span(),
                format!(
                    "{section} allow_bots {other:?} must be one of \"none\", \"mentions\", \"all\""
                ),
            )),
        })
        .transpose()?;
    Ok(MeetingOverridesConfig {
        require_mention: raw.require_mention,
        free_response_rooms,
        mention_patterns,
        allow_bots,
    })
}

/// Whether `pattern` compiles as the policy compiles it (the same engine,
/// `regex-lite`, case-insensitive); the error names the pattern.
fn check_pattern(pattern: &str) -> Result<(), String> {
    if pattern.is_empty() {
        return Err("an empty pattern would match every message".into());
    }
    regex_lite::RegexBuilder::new(pattern)
        .case_insensitive(true)
        .build()
        .map(drop)
        .map_err(|e| {
            format!(
                "{pattern:?} is not a valid pattern: {}",
                e.to_string().replace('\n', " ")
            )
        })
}

#[cfg(test)]
mod tests {
    use crate::tests::parse;
    use crate::{AllowBots, MeetingConfig, MeetingOverridesConfig};

    #[test]
    fn no_keys_mean_hermes_defaults_and_allow_bots_mentions() {
        let config = parse("").unwrap();
        assert_eq!(config.bot.meeting, MeetingConfig::default());
        assert!(config.bot.meeting.require_mention);
        assert_eq!(config.bot.meeting.allow_bots, AllowBots::Mentions);
        assert_eq!(
            config.bot.meeting.stop_words,
            ["stop", "/stop", "停", "停止", "别说了", "halt"]
        );
    }

    #[test]
    fn the_room_and_an_agent_each_have_their_own_keys() {
        let config = parse(
            "[bot]\nrequire_mention = false\nfree_response_rooms = [\"Lounge@Conference.example.org\"]\n\
             mention_patterns = [\"^all:\"]\nallow_bots = \"all\"\nstop_words = [\"enough\"]\n\n\
             [bot.agents.mohe]\nrequire_mention = true\nmention_patterns = []\nallow_bots = \"none\"\n",
        )
        .unwrap();
        let room = &config.bot.meeting;
        assert!(!room.require_mention);
        assert_eq!(room.free_response_rooms, ["lounge@conference.example.org"]);
        assert_eq!(room.mention_patterns, ["^all:"]);
        assert_eq!(room.allow_bots, AllowBots::All);
        assert_eq!(room.stop_words, ["enough"]);
        assert_eq!(
            config.bot.agents["mohe"].meeting,
            MeetingOverridesConfig {
                require_mention: Some(true),
                free_response_rooms: None,
                mention_patterns: Some(vec![]),
                allow_bots: Some(AllowBots::None),
            }
        );
    }

    #[test]
    fn mistakes_are_refused_with_their_line() {
        let pattern =
            parse("[bot.agents.mohe]\nmention_patterns = [\"ok\", \"(open\"]\n").unwrap_err();
        assert!(
            pattern.starts_with(
                "config t, line 9: [bot.agents.mohe] mention_patterns: \"(open\" is not a valid pattern"
            ),
            "{pattern}"
        );
        let empty = parse("[bot]\nmention_patterns = [\"\"]\n").unwrap_err();
        assert!(empty.contains("an empty pattern"), "{empty}");
        let room = parse("[bot]\nfree_response_rooms = [\"room/nick\"]\n").unwrap_err();
        assert!(
            room.starts_with("config t, line 9: [bot] free_response_rooms entry"),
            "{room}"
        );
        let bots = parse("[bot]\nallow_bots = \"some\"\n").unwrap_err();
        assert_eq!(
            bots,
            "config t, line 9: [bot] allow_bots \"some\" must be one of \"none\", \"mentions\", \"all\""
        );
        let stop = parse("[bot]\nstop_words = [\"stop\", \" \"]\n").unwrap_err();
        assert!(stop.contains("[bot] stop_words"), "{stop}");
        let agent_stop = parse("[bot.agents.mohe]\nstop_words = [\"x\"]\n").unwrap_err();
        assert!(agent_stop.contains("stop_words"), "{agent_stop}");
    }
}
