//! The host's checks of what the policy answers (docs/src/design/contracts.md): a decision
//! keeps its own rules and redirects only where a record of the agent
//! points, `context` read the history it decided on, a send's receipt is
//! the send the host performed, `clear` deleted what it reports. Each check
//! gives the sentence of the `policy` failure that refuses the answer.

use super::bindings::{Decision, Reason, Receipt, Sent};
use super::imports::{HistoryQuery, StoreData};
use crate::Failure;
use session_switch_contract::keys::{LEGACY_KEY, record_key};

/// A self-check's answer: `Ok` its summary; `Err` names the failing case.
pub(crate) fn self_check(answer: Result<String, String>) -> Result<String, String> {
    answer.map_err(|case| format!("self-check failed: {case}"))
}

/// A decision of `resolve` or `context` for `agent` about `asked`:
/// [`check_decision`], then [`check_redirect`] against the records in the
/// call's read snapshot (`data`; `legacy`: the agent is the configured
/// `legacy-agent`).
pub(crate) fn check_decided(
    decision: &Decision,
    asked: &str,
    agent: &str,
    legacy: bool,
    data: &mut StoreData,
) -> Result<(), String> {
    check_decision(decision, asked)?;
    check_redirect(&mut |key| data.record(key), agent, legacy, decision)
}

/// The checks of docs/src/design/contracts.md on a decision for `asked`.
pub(crate) fn check_decision(decision: &Decision, asked: &str) -> Result<(), String> {
    let says_redirected = decision.reason == Reason::Redirected;
    if decision.redirected != says_redirected {
        return Err(format!(
            "it answered redirected = {} with reason {:?}",
            decision.redirected, decision.reason
        ));
    }
    if decision.reason == Reason::PolicyError {
        return Err("it answered reason policy-error, which only the host gives".into());
    }
    if decision.reason == Reason::Superseded {
        return Err("it answered reason superseded, which only active gives".into());
    }
    if decision.redirected {
        if decision.session_id.is_empty() {
            return Err("it redirected to an empty session id".into());
        }
    } else if decision.session_id != asked {
        return Err(format!(
            "it did not redirect, yet named session '{}' instead of '{asked}'",
            decision.session_id
        ));
    }
    Ok(())
}

/// The host's own check of a redirect (docs/src/security.md, "What a hostile policy can
/// still do"): a decision that redirects `agent` is honoured only when one of
/// the agent's records — `session_switch:active:<agent>`, and the legacy
/// `xmpp_session_bridge.py`'s `active_xmpp_sender_session` when `legacy` (the
/// configured `legacy-agent` only, docs/src/design/contracts.md) — is a JSON object whose
/// `session_id` is the decision's target. A decision that does not redirect
/// passes.
///
/// This does not repeat the policy's rules (TTL, skew, target session):
/// it only stops a policy from sending a bot to a session no record names.
/// `Err` holds the sentence of the `policy` failure, also when a record
/// cannot be read (nothing is then honoured). `read` gives a key's value
/// in the call's snapshot ([`StoreData::record`]: what the policy was
/// answered, so a redirect usually costs no extra read).
pub(crate) fn check_redirect(
    read: &mut dyn FnMut(&str) -> Result<Option<String>, Failure>,
    agent: &str,
    legacy: bool,
    decision: &Decision,
) -> Result<(), String> {
    if !decision.redirected {
        return Ok(());
    }
    let target = decision.session_id.as_str();
    let mut keys = vec![record_key(agent)];
    if legacy {
        keys.push(LEGACY_KEY.to_owned());
    }
    for key in &keys {
        let value = read(key).map_err(|failure| {
            format!(
                "it redirected '{agent}' to session '{target}', and the host could not read \
                 record '{key}' to check that: {}",
                failure.message
            )
        })?;
        let names_target = value
            .and_then(|v| serde_json::from_str::<serde_json::Value>(&v).ok())
            .is_some_and(|json| json.get("session_id").and_then(|s| s.as_str()) == Some(target));
        if names_target {
            return Ok(());
        }
    }
    Err(format!(
        "it redirected '{agent}' to session '{target}', which no record of the agent names \
         (read: {})",
        keys.join(", ")
    ))
}

/// What `context` read against what it decided: the history of the
/// decided session, for `asked.agent` and `asked.limit`, read once.
pub(crate) fn check_history_read(
    read: Option<&HistoryQuery>,
    asked: &HistoryQuery,
) -> Result<(), String> {
    match read {
        None => Err("it answered without reading the history".to_owned()),
        Some(read) if read != asked => Err(format!(
            "it read the history of '{}' for '{}' (limit {:?}) but decided on '{}' \
             for '{}' (limit {:?})",
            read.session_id, read.agent, read.limit, asked.session_id, asked.agent, asked.limit
        )),
        Some(_) => Ok(()),
    }
}

/// A send's receipt against the send the host performed in that call.
pub(crate) fn check_receipt(receipt: &Receipt, sent: Option<&Sent>) -> Result<(), String> {
    match sent {
        None => Err("it reported a send that the host never performed".to_owned()),
        Some(sent) if sent.message_id != receipt.message_id || sent.room != receipt.room => {
            Err(format!(
                "it reported message {} in room {} but the host sent message {} to {}",
                receipt.message_id, receipt.room, sent.message_id, sent.room
            ))
        }
        Some(_) => Ok(()),
    }
}

/// The keys `clear` reports against the keys it deleted in that call.
pub(crate) fn check_cleared(reported: &[String], deleted: &[String]) -> Result<(), String> {
    match reported.iter().find(|key| !deleted.contains(key)) {
        Some(key) => Err(format!(
            "it reported key '{key}' as deleted, but did not delete it"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(session_id: &str, redirected: bool, reason: Reason) -> Decision {
        Decision {
            session_id: session_id.into(),
            redirected,
            reason,
            detail: String::new(),
            valid_until: None,
        }
    }

    #[test]
    fn decisions_that_break_the_contract_are_refused() {
        let asked = "xmpp-mohe-v2";
        let cli = "20260619_190821_7c0afe";
        assert!(check_decision(&decision(cli, true, Reason::Redirected), asked).is_ok());
        assert!(check_decision(&decision(asked, false, Reason::Expired), asked).is_ok());
        assert!(check_decision(&decision(asked, false, Reason::NotAgentSession), asked).is_ok());

        let bad = [
            (
                decision(cli, true, Reason::Expired),
                "redirected = true with reason Reason::Expired",
            ),
            (
                decision(cli, false, Reason::Redirected),
                "redirected = false",
            ),
            (decision("", true, Reason::Redirected), "empty session id"),
            (
                decision(cli, false, Reason::NoRecord),
                "named session '20260619_190821_7c0afe'",
            ),
            (
                decision(asked, false, Reason::PolicyError),
                "only the host gives",
            ),
            (
                decision(asked, false, Reason::Superseded),
                "only active gives",
            ),
        ];
        for (d, why) in bad {
            let err = check_decision(&d, asked).unwrap_err();
            assert!(err.contains(why), "{err} / {why}");
        }
    }

    /// `state_meta` in memory (records, the keys read so far): enough for
    /// [`check_redirect`], which only reads records. Record
    /// `session_switch:active:broken` cannot be read (a locked `state.db`).
    struct Meta(Vec<(&'static str, &'static str)>, Vec<String>);

    impl Meta {
        fn meta_get(&mut self, key: &str) -> Result<Option<String>, Failure> {
            self.1.push(key.to_owned());
            if key == "session_switch:active:broken" {
                return Err(Failure::store("state.db is locked"));
            }
            Ok(self
                .0
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| (*v).to_owned()))
        }
    }

    #[test]
    fn a_redirect_is_honoured_only_when_a_record_of_the_agent_names_its_target() {
        let cli = "20260619_190821_7c0afe";
        let other = "20260619_193000_a1b2c3";
        let to = |target: &str| decision(target, true, Reason::Redirected);
        let own = r#"{"session_id": "20260619_190821_7c0afe", "timestamp": 1.0, "source": "cli", "agent": "mohe"}"#;
        let legacy =
            r#"{"session_id": "20260619_193000_a1b2c3", "timestamp": 1.0, "source": "cli"}"#;
        let mut meta = Meta(
            vec![
                ("session_switch:active:mohe", own),
                ("active_xmpp_sender_session", legacy),
                ("session_switch:active:zhiwei", "not json"),
                ("session_switch:active:xiaoguo", r#"{"session_id": 7}"#),
            ],
            vec![],
        );
        assert_eq!(
            check_redirect(&mut |k| meta.meta_get(k), "mohe", false, &to(cli)),
            Ok(())
        );
        assert_eq!(
            meta.1,
            ["session_switch:active:mohe"],
            "one read when the own record names it"
        );
        // The legacy tool's key counts for the legacy agent only.
        assert_eq!(
            check_redirect(&mut |k| meta.meta_get(k), "mohe", true, &to(other)),
            Ok(())
        );
        assert_eq!(
            check_redirect(&mut |k| meta.meta_get(k), "mohe", false, &to(other)).unwrap_err(),
            "it redirected 'mohe' to session '20260619_193000_a1b2c3', which no record of \
             the agent names (read: session_switch:active:mohe)"
        );
        // Another agent's record never vouches for this agent's redirect.
        let e = check_redirect(&mut |k| meta.meta_get(k), "xiaoguo", false, &to(cli)).unwrap_err();
        assert!(
            e.contains("which no record of the agent names (read: session_switch:active:xiaoguo)"),
            "{e}"
        );
        // Not JSON, no record at all.
        for agent in ["zhiwei", "nobody"] {
            let e = check_redirect(&mut |k| meta.meta_get(k), agent, false, &to(cli)).unwrap_err();
            assert!(
                e.ends_with(&format!("names (read: session_switch:active:{agent})")),
                "{e}"
            );
        }
        // A record that cannot be read honours nothing.
        let e = check_redirect(&mut |k| meta.meta_get(k), "broken", false, &to(cli)).unwrap_err();
        assert_eq!(
            e,
            "it redirected 'broken' to session '20260619_190821_7c0afe', and the host could \
             not read record 'session_switch:active:broken' to check that: state.db is locked"
        );
        // No redirect, no read.
        meta.1.clear();
        let stay = decision("xmpp-mohe-v2", false, Reason::NoRecord);
        assert_eq!(
            check_redirect(&mut |k| meta.meta_get(k), "mohe", true, &stay),
            Ok(())
        );
        assert!(meta.1.is_empty());
    }
}
