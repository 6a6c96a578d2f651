//! The one rule for whom a message addresses, for persons and agents
//! alike: an agent is addressed by its nick or `mention` as a whole word
//! ([`addresses`]), by one of its `mention_patterns`, or by an XEP-0461
//! reply to its message.

use super::message::RoomMessage;
use super::state::GuardState;
use super::text::addresses;
use crate::settings::AgentEntry;
use session_switch_contract::fold::fold_width;

/// Whom one message addresses, as the receiving agent sees it.
pub(super) struct Addressing<'a> {
    /// It addresses the receiver.
    pub here: bool,
    /// It addresses another agent.
    pub elsewhere: bool,
    /// It addresses any agent.
    pub anyone: bool,
    /// Every agent's nick and mention: what a stop may name.
    pub names: Vec<&'a str>,
}

impl<'a> Addressing<'a> {
    /// Whom `message` addresses among `agents`; `sender` is the agent who
    /// sent it, if one did (a message never addresses its own sender:
    /// `reply 3 from zhiwei` addresses nobody); `state` knows who said the
    /// messages a reply may name by id alone.
    pub fn of(
        agents: &'a [AgentEntry],
        receiver: &AgentEntry,
        sender: Option<&AgentEntry>,
        message: &RoomMessage<'_>,
        state: &GuardState<'_>,
    ) -> Self {
        let replied = replied_agent(agents, message, state);
        let mut here = false;
        let mut elsewhere = false;
        let from = sender.map(|a| a.agent.name.as_str());
        // Wake words match full-width forms as ASCII too (`ｚｗ` for `zw`),
        // as names do.
        let narrow: String = message.body.chars().map(fold_width).collect();
        for agent in agents
            .iter()
            .filter(|a| Some(a.agent.name.as_str()) != from)
        {
            if addresses_agent(agent, message.body, &narrow, replied) {
                if agent.agent.name == receiver.agent.name {
                    here = true;
                } else {
                    elsewhere = true;
                }
            }
        }
        let names = agents
            .iter()
            .flat_map(|a| [Some(a.agent.nick.as_str()), a.agent.mention.as_deref()])
            .flatten()
            .collect();
        Self {
            here,
            elsewhere,
            anyone: here || elsewhere,
            names,
        }
    }
}

/// Whether `body` (`narrow`: the same with full-width forms as ASCII), or
/// the reply to `replied`'s message, addresses `agent`.
fn addresses_agent(agent: &AgentEntry, body: &str, narrow: &str, replied: Option<&str>) -> bool {
    replied == Some(agent.agent.name.as_str())
        || addresses(body, &agent.agent.nick, agent.agent.mention.as_deref())
        || agent
            .meeting
            .patterns
            .iter()
            .any(|p| p.is_match(body) || p.is_match(narrow))
}

/// The name of the agent whose message `message` replies to: the reply's
/// nick when it is an agent's (exactly, as the room seats nicks), else the
/// agent the guard saw say the message of the reply's id.
fn replied_agent<'s>(
    agents: &'s [AgentEntry],
    message: &RoomMessage<'_>,
    state: &'s GuardState<'_>,
) -> Option<&'s str> {
    let reply = message.reply_to?;
    reply
        .nick
        .and_then(|nick| agents.iter().find(|a| a.agent.nick == nick))
        .map(|a| a.agent.name.as_str())
        .or_else(|| reply.id.and_then(|id| state.sayer_of(id)))
}
