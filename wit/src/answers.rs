//! The JSON answers of the host's calls: what the CLI prints with
//! `--json`, and the Python binding returns as dicts and lists. One type
//! per answer, so their shapes are written once and their reference page
//! is generated from them (`docs/src/reference/json.md`).
//!
//! Each is serialised through a `serde_json::Value`, whose object keys are
//! in alphabetical order; an absent value is `null`, never a missing key.

use schemars::JsonSchema;
use serde::Serialize;
use std::path::Path;

/// `resolve`: the session the agent's bot should load, and why.
#[derive(Serialize, JsonSchema)]
pub struct Resolved<'a> {
    /// The session to load: the recorded CLI session when `redirected`,
    /// else the session asked about.
    pub session_id: &'a str,
    /// The bot loads the CLI session instead of the one it asked about.
    pub redirected: bool,
    /// Why: a case of the WIT `reason` enum, kebab-case (`redirected`,
    /// `no-record`, `expired`, `unknown-session`, …).
    pub reason: &'a str,
    /// One sentence for a person; it names times, never ages.
    pub detail: &'a str,
    /// Until when this answer holds, Unix seconds; `null` when the clock
    /// does not enter into it (no record, a malformed one).
    pub valid_until: Option<f64>,
}

/// `context`: `resolve`'s keys and the history the agent's model sees.
#[derive(Serialize, JsonSchema)]
pub struct Context<'a> {
    #[serde(flatten)]
    pub decision: Resolved<'a>,
    /// The session's messages as Hermes's loader returns them (its keys
    /// and values: `role`, `content`, and `tool_calls`, `tool_call_id`,
    /// `tool_name` when set), with the `[YOU] ` tags applied.
    pub messages: Vec<serde_json::Map<String, serde_json::Value>>,
}

/// `admit`: whether the agent's bot answers one room message (the loop
/// guard and the meeting settings).
#[derive(Serialize, JsonSchema)]
pub struct Admitted<'a> {
    /// The bot answers the message.
    pub reply: bool,
    /// Why: a case of the WIT `admit-reason` enum, kebab-case (`human`,
    /// `addressed`, `not-addressed`, `loop-guard`, `duplicate`, …).
    pub reason: &'a str,
    /// The message is a person's stop for this agent.
    pub stop: bool,
    /// The line reaches the agent's next turn as context.
    pub heard: bool,
    /// The hop counter after this message.
    pub hops: u32,
    /// One line for a person (the counts behind a `loop-guard`).
    pub detail: &'a str,
}

/// `send`: what the room got and what was recorded.
#[derive(Serialize, JsonSchema)]
pub struct Sent<'a> {
    /// Always `true`: a send that did not reach the room is an error.
    pub delivered: bool,
    /// The room's bare JID.
    pub room: &'a str,
    /// The normalised body the room got (the history row has `[YOU] `
    /// before it).
    pub body: &'a str,
    /// `messages.id` of the `[YOU] ` row written into the history.
    pub message_id: i64,
    /// The `state_meta` key of the agent's record.
    pub record_key: &'a str,
    /// The record now names this CLI session; `false` when a newer send's
    /// record was already stored and kept.
    pub record_replaced: bool,
    /// The XMPP session whose history got the `[YOU] ` row.
    pub history_session_id: &'a str,
}

/// One entry of `active`: a record, or a send not (yet) in the history.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ActiveEntry<'a> {
    Record(RecordState<'a>),
    PendingSend(PendingSend<'a>),
}

/// An agent's record as `active` shows it.
#[derive(Serialize, JsonSchema)]
pub struct RecordState<'a> {
    /// The agent's name.
    pub agent: &'a str,
    /// The `state_meta` key the record was read from.
    pub key: &'a str,
    /// The recorded session; `null` when the record has none readable.
    pub session_id: Option<&'a str>,
    /// The recorded Unix time; `null` when the record has none.
    pub timestamp: Option<f64>,
    /// `now - timestamp`, in seconds.
    pub age_seconds: Option<f64>,
    /// `ttl - age`, in seconds (negative once expired).
    pub remaining_seconds: Option<f64>,
    /// The record would redirect the agent's bot now (then `reason` is
    /// `redirected`); true for at most one record per agent.
    pub valid: bool,
    /// A case of the WIT `reason` enum, kebab-case, as `resolve`'s.
    pub reason: &'a str,
    /// One sentence for a person.
    pub detail: &'a str,
}

/// A send not (yet) in the history.
#[derive(Serialize, JsonSchema)]
pub struct PendingSend<'a> {
    /// The agent it was sent as.
    pub agent: &'a str,
    /// Always `true`: tells this entry from a record.
    pub pending_send: bool,
    /// Its `state_meta` key, `session_switch:pending:<agent>:<token>`.
    pub key: &'a str,
    /// `posting` (being posted, or interrupted when `in_progress` is
    /// false), `unknown` (the post timed out), `delivered` (the room took
    /// it, the row waits for the database) or `malformed`.
    pub state: &'a str,
    /// `state` is `delivered`.
    pub delivered: bool,
    /// The process that is posting it still runs.
    pub in_progress: bool,
    /// Unix seconds of the send; `null` when `malformed`.
    pub timestamp: Option<f64>,
    /// The CLI session that sent it; `null` when `malformed`.
    pub cli_session_id: Option<&'a str>,
    /// The history row's content; `null` when `malformed`.
    pub body: Option<&'a str>,
}

/// `clear`: what was removed.
#[derive(Serialize, JsonSchema)]
pub struct Cleared<'a> {
    /// The record keys deleted.
    pub cleared: &'a [String],
    /// How many pending sends (interrupted, or of unknown outcome) were
    /// forgotten.
    pub pending_sends_cleared: usize,
}

/// `is-own`: whether a room message is the agent's own, reflected.
#[derive(Serialize, JsonSchema)]
pub struct IsOwn {
    /// The message came from the agent itself (its nick, JID or name).
    pub own: bool,
}

/// One entry of `agents`: a configured agent.
#[derive(Serialize, JsonSchema)]
pub struct Agent<'a> {
    /// The name `--agent NAME` takes.
    pub name: &'a str,
    /// The bare JID it posts as.
    pub jid: &'a str,
    /// Its nick in the room.
    pub nick: &'a str,
    /// Its XMPP session ids; the first receives the `[YOU] ` rows.
    pub sessions: &'a [String],
    /// More names its lines are signed with.
    pub aliases: &'a [String],
    /// The legacy tool's HTTP port of the agent.
    pub http_port: Option<u16>,
    /// Its Hermes gateway (API server) port.
    pub gateway_port: Option<u16>,
    /// How other agents address it, e.g. `@mohe`.
    pub mention: Option<&'a str>,
}

/// `init-db`: the database created.
#[derive(Serialize, JsonSchema)]
pub struct Created<'a> {
    /// Its path.
    pub created: &'a Path,
}

/// `install-legacy-script`: the script written.
#[derive(Serialize, JsonSchema)]
pub struct LegacyScript<'a> {
    /// Its path.
    pub written: &'a Path,
    /// The command it runs.
    pub runs: &'a Path,
    /// A file was there before (a script like it, or any file with `--force`).
    pub replaced: bool,
}

/// `bot --once`: the bot's check (printed on one line).
#[derive(Serialize, JsonSchema)]
pub struct BotCheck<'a> {
    /// The agent whose bot was checked.
    pub agent: &'a str,
    /// The room's bare JID.
    pub room: &'a str,
    /// The bot joined the room.
    pub joined: bool,
    /// The Hermes API server it asked.
    pub api_url: &'a str,
    /// `ok`, or why the API server's `/health` failed.
    pub hermes: &'a str,
    /// Both worked: `joined`, and `hermes` is `ok`.
    pub ok: bool,
}

/// `doctor`: each link of the chain checked, in order, and whether all
/// passed.
#[derive(Serialize, JsonSchema)]
pub struct Doctor<'a> {
    /// No link failed (a skipped link is no failure).
    pub ok: bool,
    /// The links in the order they were checked: the config, the policy, `state.db`,
    /// ejabberd, the room, then each agent's (`bot-config`, `subscriber`,
    /// `login`, `lock`, `hermes-api`), then the plugin's.
    pub links: Vec<DoctorLink<'a>>,
}

/// `doctor`: one link of the chain.
#[derive(Serialize, JsonSchema)]
pub struct DoctorLink<'a> {
    /// Which: `config`, `policy`, `state-db`, `ejabberd`, `room`, `bot-config`,
    /// `subscriber`, `login`, `lock`, `hermes-api`, `plugin-listed`,
    /// `plugin-imports`.
    pub link: &'a str,
    /// The agent it was checked for; `null` for a link all agents share.
    pub agent: Option<&'a str>,
    /// `ok`, `failed` or `skipped`.
    pub status: &'a str,
    /// What was found (`ok`), what is wrong (`failed`), or why it was not
    /// checked (`skipped`: `because …`, the link it depends on).
    pub detail: &'a str,
    /// For a failed link, the command or config line that fixes it; else
    /// `null`.
    pub fix: Option<&'a str>,
}

/// `value` as the JSON the CLI prints: through a `serde_json::Value`, so
/// an object's keys come in alphabetical order.
pub fn to_value(value: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(value).expect("an answer serialises")
}
