//! The room-as-a-meeting defaults both sides use: the host's config shows
//! them as the defaults of `[bot]` and the policy applies them (WIT
//! `meeting`). The names and defaults are Hermes's own group settings but
//! for `allow_bots`, whose default here lets agents that address each
//! other talk (the loop guard bounds them).

/// `require_mention`: a person's message is answered only by the agents it
/// addresses, as Hermes's Discord, Slack, Matrix, Mattermost and Feishu
/// adapters do by default.
pub const DEFAULT_REQUIRE_MENTION: bool = true;

/// `stop_words`: a person's message that is one of these stops the agents.
pub const DEFAULT_STOP_WORDS: [&str; 6] = ["stop", "/stop", "停", "停止", "别说了", "halt"];

/// `allow_bots`'s values as the config spells them, the default first.
pub const ALLOW_BOTS_VALUES: [&str; 3] = ["mentions", "none", "all"];
