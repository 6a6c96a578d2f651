//! A person's message (or a send the CLI made for one): a stop, or a
//! message that resets the counters of the agents it is for and is
//! answered by whom it addresses.

use super::address::Addressing;
use super::message::RoomMessage;
use super::state::GuardState;
use super::stop::is_stop;
use super::text::digest;
use super::verdict::Verdict;
use crate::AdmitReason;
use crate::settings::{AgentEntry, ValidSettings};

/// A person's message (or a send the CLI made for one): a stop, or
/// a message that resets the counter and is answered by whom it addresses.
#[allow(clippy::too_many_arguments)]
pub(super) fn person(
    settings: &ValidSettings,
    receiver: &AgentEntry,
    message: &RoomMessage<'_>,
    state: &mut GuardState<'_>,
    now: f64,
    sender: &str,
    own: bool,
    to: &Addressing,
) -> Verdict {
    let name = &receiver.agent.name;
    // A stop comes before the duplicate rule: "stop", "go on", "stop"
    // within the window must stop twice. It resets nothing: a stop is no
    // invitation to go on.
    if is_stop(message.body, settings.stop_words(), &to.names) {
        let applies = to.here || !to.anyone;
        if !applies {
            return Verdict::heard(
                AdmitReason::AddressedElsewhere,
                format!("'{sender}' stopped other agents, not '{name}'"),
            );
        }
        if to.anyone {
            state.quiet = true;
        } else {
            state.stopped = true;
        }
        // What a person says after a stop is new: "go on" said before it
        // must not be refused as a repeat and leave the stop in place.
        state.seen.clear();
        let detail = if to.anyone {
            format!("'{sender}' stopped '{name}' until a person addresses it again")
        } else {
            format!("'{sender}' stopped every agent until a person writes again")
        };
        return Verdict {
            stop: true,
            ..Verdict::heard(AdmitReason::Stopped, detail)
        };
    }
    let guard = settings.loop_guard();
    if state.repeated(sender, digest(message.body), now) {
        return Verdict::ignored(
            AdmitReason::Duplicate,
            format!("'{sender}' said this within {} s", guard.duplicate_seconds),
        );
    }
    // A person resets both bounds (Hermes's own bot loop guard resets its
    // window when a human speaks), for the agents the message is for (and
    // for the agent whose person sent it through its bridge): one that
    // addresses only others gives this agent's chain no new turns. The
    // window caps agent-origin messages only, so a person is never kept
    // waiting for it.
    state.stopped = false;
    if to.here {
        state.quiet = false;
    }
    if to.here || !to.anyone || own {
        state.hops = 0;
        state.window.clear();
    } else if !own {
        return Verdict::heard(
            AdmitReason::AddressedElsewhere,
            format!("a person addressed other agents, not '{name}'"),
        );
    }
    let reset = "the hop counter and the room window are reset";
    if own {
        return Verdict::ignored(
            AdmitReason::OwnMessage,
            format!("the agent's own send for a person: {reset}"),
        );
    }
    if to.here {
        Verdict::answer(
            AdmitReason::Human,
            format!("a person addressed '{name}': {reset}"),
        )
    } else if state.quiet {
        Verdict::heard(
            AdmitReason::Stopped,
            format!("'{name}' is stopped until a person addresses it again; {reset}"),
        )
    } else if !receiver.meeting.require_mention {
        Verdict::answer(
            AdmitReason::FreeResponse,
            format!(
                "a person addressed nobody and '{name}' answers all (require_mention off \
                 or a free-response room); {reset}"
            ),
        )
    } else {
        Verdict::heard(
            AdmitReason::NotAddressed,
            format!("a person addressed nobody (require_mention); {reset}"),
        )
    }
}
