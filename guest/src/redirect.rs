//! The redirect rule (docs/src/design/rules.md#redirect, docs/src/design/contracts.md#records): which session an
//! agent's bot loads, the `active` view of the records, and `clear`.
//!
//! Each agent has its own record, `session_switch:active:<agent>`; the legacy
//! `xmpp_session_bridge.py`'s fixed key `active_xmpp_sender_session` is read
//! (and cleared) only for the `legacy-agent`, so one agent's send never moves
//! another's bot.

use crate::failure::policy;
use crate::host::Host;
use crate::settings::{AgentEntry, ValidSettings};
use crate::{Decision, Failure, FailureKind, Reason, RecordStatus};
use sentence::concat;

pub use session_switch_contract::keys::{LEGACY_KEY, OUR_KEY_PREFIX as KEY_PREFIX, record_key};

/// The keys `agent`'s records may live under: its own, then the legacy tool's
/// key when it is the legacy agent.
pub fn record_keys(settings: &ValidSettings, agent: &str) -> Vec<String> {
    let mut keys = vec![record_key(agent)];
    if settings.is_legacy(agent) {
        keys.push(LEGACY_KEY.to_string());
    }
    keys
}

/// The host's clock, refused when it is not a finite number (every age
/// would compare false and an expired record would pass).
fn clock<H: Host>(host: &mut H) -> Result<f64, Failure> {
    let now = host.now();
    if now.is_finite() {
        Ok(now)
    } else {
        Err(policy(format!(
            "the host's clock returned {}, not a Unix time in seconds",
            non_finite(now)
        )))
    }
}

/// The records of `agent` that exist, assessed at `now`: its own key first,
/// then the legacy tool's key for the legacy agent. Host failures pass
/// through.
fn read_records<H: Host>(
    settings: &ValidSettings,
    host: &mut H,
    agent: &AgentEntry,
) -> Result<Vec<(String, String)>, Failure> {
    let mut found = Vec::new();
    for key in record_keys(settings, &agent.agent.name) {
        if let Some(value) = host.meta_get(&key)? {
            found.push((key, value));
        }
    }
    Ok(found)
}

/// The index of the record `resolve` uses among `assessed` (in the order of
/// [`read_records`]: the per-agent key first): of those valid by
/// [`assess`], the newer timestamp, the per-agent key on a tie.
fn winner(assessed: &[Assessment]) -> Option<usize> {
    // `max_by` keeps the last maximum, so it must see the per-agent key last.
    assessed
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, a)| a.reason == Reason::Redirected)
        .max_by(|(_, a), (_, b)| {
            let ta = a.readable.timestamp.unwrap_or(f64::MIN);
            let tb = b.readable.timestamp.unwrap_or(f64::MIN);
            ta.total_cmp(&tb)
        })
        .map(|(i, _)| i)
}

/// Until when the clock leaves a decision on `assessed` unchanged (WIT
/// `decision.valid-until`): the earliest [`Assessment::changes_at`] of the records,
/// a millisecond early so that float rounding never stretches it past the
/// moment a comparison in [`assess`] flips. `None` when no record changes
/// with time.
pub fn valid_until(assessed: &[Assessment]) -> Option<f64> {
    assessed
        .iter()
        .filter_map(|a| a.changes_at)
        .min_by(f64::total_cmp)
        .map(|t| t - 0.001)
}

/// The session `agent`'s bot should load when about to load `session_id`
/// (WIT `policy.resolve`):
/// 1. unknown agent → `Err(unknown-agent)`;
/// 2. `session_id` not one of the agent's XMPP sessions → `not-agent-session`,
///    unchanged;
/// 3. read the agent's record, and for the legacy agent the legacy tool's key too;
///    none → `no-record`;
/// 4. [`assess`] each (shape, then age, then target); of the
///    valid ones the newer timestamp wins (the per-agent key on a tie); none
///    valid → the per-agent record's reason if it exists, else the legacy tool
///    key's;
/// 5. the winner's target must exist (`host.session-exists`) → `redirected`,
///    else `unknown-session`.
///
/// Host failures are returned unchanged. `detail` is one sentence that
/// names times, not ages; `valid_until` ([`valid_until`]) says how long the
/// clock leaves the decision as it is.
pub fn resolve<H: Host>(
    settings: &ValidSettings,
    host: &mut H,
    agent: &str,
    session_id: &str,
) -> Result<Decision, Failure> {
    let entry = settings.agent(agent)?;
    let stay = |reason: Reason, detail: String, valid_until: Option<f64>| Decision {
        session_id: session_id.to_string(),
        redirected: false,
        reason,
        detail,
        valid_until,
    };
    if !entry.owns_session(session_id) {
        let whose = match settings.session_owner(session_id) {
            Some(other) => format!("an XMPP session of {}", other.agent.name),
            None => "not an XMPP session".to_string(),
        };
        return Ok(stay(
            Reason::NotAgentSession,
            format!(
                "session {session_id} is {whose}, not one of {agent}'s ({}): loading it unchanged",
                entry.agent.sessions.join(", ")
            ),
            None,
        ));
    }
    let records = read_records(settings, host, entry)?;
    if records.is_empty() {
        let keys = record_keys(settings, agent).join(", ");
        return Ok(stay(
            Reason::NoRecord,
            concat(&[agent, " has no record (", &keys, "): loading ", session_id]),
            None,
        ));
    }
    let now = clock(host)?;
    let assessed: Vec<Assessment> = records
        .iter()
        .map(|(key, value)| assess(settings, entry, key, value, now))
        .collect();
    let valid_until = valid_until(&assessed);
    let Some(winner) = winner(&assessed).map(|i| &assessed[i]) else {
        let first = &assessed[0];
        return Ok(stay(
            first.reason,
            concat(&[&first.detail, ": loading ", session_id]),
            valid_until,
        ));
    };
    let target = winner.readable.session_id.clone().unwrap_or_default();
    match check_target(host, &target)? {
        Target::Exists => Ok(Decision {
            detail: concat(&[
                &winner.detail,
                ": loading CLI session ",
                &target,
                " instead of ",
                session_id,
            ]),
            session_id: target,
            redirected: true,
            reason: Reason::Redirected,
            valid_until,
        }),
        Target::Missing => Ok(stay(
            Reason::UnknownSession,
            format!(
                "record {} names session {target}, which is not in state.db: loading {session_id}",
                winner.key
            ),
            valid_until,
        )),
        Target::Refused(why) => Ok(stay(
            Reason::MalformedRecord,
            format!("record {}: {why}: loading {session_id}", winner.key),
            valid_until,
        )),
    }
}

/// What the host says of a record's target session.
enum Target {
    Exists,
    /// Not in `state.db`.
    Missing,
    /// The host refuses it as a target (the failure's message): WIT
    /// `session-exists` failing with kind `bad-input`, e.g. a compressed
    /// session with two live continuations (docs/src/design/compression.md). Not redirecting
    /// is an answer a bot can act on, so `resolve` and `active` report it
    /// instead of failing; `send` fails on it.
    Refused(String),
}

/// [`Target`] of `target`; failures other than `bad-input` (the store's,
/// `busy`) propagate.
fn check_target<H: Host>(host: &mut H, target: &str) -> Result<Target, Failure> {
    match host.session_exists(target) {
        Ok(true) => Ok(Target::Exists),
        Ok(false) => Ok(Target::Missing),
        Err(f) if f.kind == FailureKind::BadInput => Ok(Target::Refused(f.message)),
        Err(f) => Err(f),
    }
}

/// The records of every agent (or of `agent` only) that has one (WIT
/// `policy.active`): one status per existing key (the legacy agent may have
/// two), in configuration order. `valid` means the record would redirect
/// now by the rules of [`resolve`], the target's existence included, so at
/// most one record per agent is valid, exactly when `resolve` redirects.
/// A record that is valid on its own but loses to a newer one is
/// `superseded` (its detail names the winner).
/// Errors: `unknown-agent`; host failures unchanged.
pub fn active<H: Host>(
    settings: &ValidSettings,
    host: &mut H,
    agent: Option<&str>,
) -> Result<Vec<RecordStatus>, Failure> {
    let agents = settings.select(agent)?;
    let mut found = Vec::new();
    for entry in agents {
        let records = read_records(settings, host, entry)?;
        if !records.is_empty() {
            found.push((entry, records));
        }
    }
    if found.is_empty() {
        return Ok(Vec::new());
    }
    let now = clock(host)?;
    let ttl = settings.ttl_seconds();
    let mut out = Vec::new();
    for (entry, records) in found {
        let assessed: Vec<Assessment> = records
            .iter()
            .map(|(key, value)| assess(settings, entry, key, value, now))
            .collect();
        let won = winner(&assessed);
        for (i, a) in assessed.iter().enumerate() {
            let (valid, reason, detail) = match won {
                Some(w) if w == i => {
                    let target = a.readable.session_id.as_deref().unwrap_or_default();
                    match check_target(host, target)? {
                        Target::Exists => {
                            let detail =
                                format!("{}: would redirect to CLI session {target}", a.detail);
                            (true, Reason::Redirected, detail)
                        }
                        Target::Missing => {
                            let detail = format!(
                                "record {} names session {target}, which is not in state.db",
                                a.key
                            );
                            (false, Reason::UnknownSession, detail)
                        }
                        Target::Refused(why) => {
                            let detail =
                                format!("record {}: {why}; resolve does not redirect", a.key);
                            (false, Reason::MalformedRecord, detail)
                        }
                    }
                }
                Some(w) if a.reason == Reason::Redirected => {
                    let detail = format!(
                        "{}, but the newer record {} is the one resolve uses",
                        a.detail, assessed[w].key
                    );
                    (false, Reason::Superseded, detail)
                }
                _ => (false, a.reason, a.detail.clone()),
            };
            out.push(RecordStatus {
                agent: entry.agent.name.clone(),
                key: a.key.clone(),
                session_id: a.readable.session_id.clone(),
                timestamp: a.readable.timestamp,
                age_seconds: a.age,
                remaining_seconds: a.age.map(|age| ttl - age),
                valid,
                reason,
                detail,
            });
        }
    }
    Ok(out)
}

/// Delete the record of every agent (or of `agent` only), and the legacy
/// tool's key for the legacy agent (WIT `policy.clear`); returns the keys a
/// row was actually removed from. Errors: `unknown-agent`; host failures
/// unchanged (keys deleted before the failure stay deleted).
pub fn clear<H: Host>(
    settings: &ValidSettings,
    host: &mut H,
    agent: Option<&str>,
) -> Result<Vec<String>, Failure> {
    let mut deleted = Vec::new();
    for entry in settings.select(agent)? {
        for key in record_keys(settings, &entry.agent.name) {
            if host.meta_delete(&key)? {
                deleted.push(key);
            }
        }
    }
    Ok(deleted)
}

mod assess;
mod record;
mod sentence;

pub(crate) use assess::non_finite;
pub use assess::{Assessment, Readable, assess, parse_record, seconds, utc};

#[cfg(test)]
mod tests;
