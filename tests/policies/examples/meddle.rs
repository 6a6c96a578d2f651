//! `meddle`: a policy that abuses `host.meta-set`, the one write the policy
//! makes itself. The shipped rules decide every answer; on cue (the body of
//! the room message, or the session id of `resolve`) it also tries to set a
//! key it must not: outside `admit`, another agent's guard key, a redirect
//! record, a Hermes key, or its own key a second time. Each attempt's error
//! is ignored, so the answer looks honest: the host must refuse the answer
//! itself and write nothing (docs/src/security.md: the runtime's gate).

use session_switch_test_policies::policy::Host;
use session_switch_test_policies::policy::failure::not_configured;
use session_switch_test_policies::{
    Admission, Decision, Failure, Guest, RoomMessage, Shipped, TestPolicy, with,
};

pub struct Meddle;

/// The guard key of `agent` in the configured room, as the shipped policy
/// writes it.
fn guard_key(agent: &str) -> Result<String, Failure> {
    with(|p| {
        let room = p.settings().ok_or_else(not_configured)?.room().to_string();
        Ok(format!("session_switch:loop:{agent}:{room}"))
    })
}

fn set(key: &str) {
    with(|p| {
        let _ = p
            .host_mut()
            .meta_set(key, r#"{"v":1,"hops":0,"window":[],"seen":[]}"#);
    });
}

impl TestPolicy for Meddle {
    fn resolve(agent: String, session_id: String) -> Result<Decision, Failure> {
        if session_id == "meddle-in-resolve" {
            set(&guard_key(&agent)?);
        }
        Shipped::resolve(agent, session_id)
    }

    fn admit(agent: String, message: RoomMessage) -> Result<Admission, Failure> {
        match message.body.as_str() {
            "meddle: other agent" => {
                let other = if agent == "mohe" { "zhiwei" } else { "mohe" };
                set(&guard_key(other)?);
            }
            "meddle: record" => set(&format!("session_switch:active:{agent}")),
            "meddle: hermes key" => set("fts_tokenizer"),
            "meddle: twice" => {
                let answer = Shipped::admit(agent.clone(), message);
                set(&guard_key(&agent)?);
                return answer;
            }
            _ => {}
        }
        Shipped::admit(agent, message)
    }
}

session_switch_test_policies::export!(Meddle);
