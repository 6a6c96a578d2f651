//! One record's value against the rules (docs/src/design/rules.md#redirect, docs/src/design/contracts.md
//! "Records"): its shape (JSON object, `session_id`, numeric `timestamp`,
//! the agent), its age against the TTL and the future skew, its target;
//! when that assessment next changes; and how its times read in a sentence.

use super::record::{self, Field, Top};
use super::sentence::concat;
use crate::Reason;
use crate::settings::{AgentEntry, ValidSettings, check_session_id};
use session_switch_contract::ids::api_session_id_problem;
use session_switch_contract::keys::LEGACY_KEY;

/// The fields of a record that could be read, even when it is not valid.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Readable {
    pub session_id: Option<String>,
    pub timestamp: Option<f64>,
}

/// A record checked against every rule except the target's existence (a
/// host call, made last).
#[derive(Clone, Debug, PartialEq)]
pub struct Assessment {
    /// The `state_meta` key it was read from.
    pub key: String,
    pub readable: Readable,
    /// `now - timestamp`, when the timestamp is readable.
    pub age: Option<f64>,
    /// `Redirected` when every rule but existence holds; else why not.
    pub reason: Reason,
    /// What is wrong (or right) with the record, a sentence without the
    /// consequence, e.g. `record session_switch:active:mohe, written
    /// 2026-12-01T19:00:00Z, holds until 2026-12-01T20:00:00Z (TTL 3600 s)`.
    /// It names times, not ages: it stays true until [`Self::changes_at`].
    pub detail: String,
    /// The first Unix time after `now` at which the clock alone would
    /// change `reason` or `detail`: the end of the future skew, then the end
    /// of the TTL. `None`: never (a malformed or expired record: the clock
    /// only moves on).
    pub changes_at: Option<f64>,
}

/// Seconds for a person: whole numbers without decimals, else up to three
/// (rounded to the millisecond), e.g. `12`, `3599.999`, `-0.5`. Integer
/// arithmetic: it keeps float formatting, a large part of a small component,
/// out of it.
pub fn seconds(s: f64) -> String {
    // `as` saturates: absurd ages still print, just clamped.
    let ms = (s * 1000.0).round() as i64;
    let (whole, frac) = (ms.unsigned_abs() / 1000, ms.unsigned_abs() % 1000);
    // Digits by hand rather than `format!`: this runs twice per `resolve`.
    let mut out = String::with_capacity(24);
    if ms < 0 {
        out.push('-');
    }
    out.push_str(&whole.to_string());
    if frac != 0 {
        out.push('.');
        let digits = [frac / 100, frac / 10 % 10, frac % 10];
        let keep = if digits[2] != 0 {
            3
        } else if digits[1] != 0 {
            2
        } else {
            1
        };
        for d in &digits[..keep] {
            out.push(char::from(b'0' + *d as u8));
        }
    }
    out
}

/// The shape rules of a record value (WIT `reason.malformed-record`): a JSON
/// object; `session_id` a session id ([`check_session_id`]) that Hermes's API
/// server takes (`api_session_id_problem`: no `..`, `/`, `\`, no leading `X:`;
/// 0.19.0 `gateway/platforms/api_server.py`); `timestamp` a finite JSON number
/// (Unix seconds, integer or float); when `agent` is `Some`, an `agent` field,
/// if present, must equal it. Extra fields are ignored (the legacy
/// `xmpp_session_bridge.py` writes `source`). `Err` says what is wrong, e.g.
/// `timestamp is a string`; the readable fields come back either way.
pub fn parse_record(value: &str, agent: Option<&str>) -> (Readable, Result<(String, f64), String>) {
    let fields = match record::parse(value) {
        // JSON allows `1e400`; serde_json (and Python's float) cannot hold it.
        Err(e) if e.to_string().starts_with("number out of range") => {
            return (
                Readable::default(),
                Err("a number in it is out of range (beyond ±1.8e308)".into()),
            );
        }
        Err(_) => return (Readable::default(), Err("not JSON".into())),
        Ok(Top::Not(kind)) => {
            return (
                Readable::default(),
                Err(format!("not a JSON object but {kind}")),
            );
        }
        Ok(Top::Object(fields)) => fields,
    };
    let readable = Readable {
        session_id: match &fields.session_id {
            Some(Field::Str(s)) => Some(s.clone()),
            _ => None,
        },
        timestamp: match &fields.timestamp {
            Some(Field::Num(n)) => n.as_f64().filter(|t| t.is_finite()),
            _ => None,
        },
    };
    let session_id = match fields.session_id {
        None => Err("session_id is missing".to_string()),
        Some(Field::Str(s)) => check_session_id(&s)
            .map_err(|e| e.replacen("session id", "session_id", 1))
            .and_then(|()| match api_session_id_problem(&s) {
                // Never a target: Hermes's API server would not continue it.
                Some(problem) => Err(format!(
                    "session_id {s:?} {problem}, which Hermes's API server refuses"
                )),
                None => Ok(s),
            }),
        Some(other) => Err(format!("session_id is {}", other.kind())),
    };
    let timestamp = match &fields.timestamp {
        None => Err("timestamp is missing".to_string()),
        Some(Field::Num(n)) => match readable.timestamp {
            Some(t) => Ok(t),
            None => Err(format!("timestamp {n} is not a finite number")),
        },
        Some(other) => Err(format!("timestamp is {}", other.kind())),
    };
    let owner = match (agent, &fields.agent) {
        (Some(want), Some(Field::Str(got))) if got != want => {
            Err(format!("agent is '{got}', not '{want}'"))
        }
        (None, _) | (_, None) | (_, Some(Field::Str(_))) => Ok(()),
        (Some(_), Some(other)) => Err(format!("agent is {}", other.kind())),
    };
    let result = session_id.and_then(|s| timestamp.and_then(|t| owner.map(|()| (s, t))));
    (readable, result)
}

/// Check the record `value` stored under `key` for `agent` at time `now`
/// against the rules of `resolve` in order (docs/src/design/rules.md): shape
/// ([`parse_record`]; the `agent` field is checked on the per-agent key only),
/// then age (`age < -future-skew` → `future-timestamp`; `age >= ttl` →
/// `expired`: a record exactly TTL old is expired, as the legacy tool keeps it
/// only while `age < 3600`), then the target (any agent's XMPP session →
/// `malformed-record`). Existence is not checked here.
pub fn assess(
    settings: &ValidSettings,
    agent: &AgentEntry,
    key: &str,
    value: &str,
    now: f64,
) -> Assessment {
    let per_agent = key != LEGACY_KEY;
    let (readable, parsed) = parse_record(value, per_agent.then_some(agent.agent.name.as_str()));
    let age = readable.timestamp.map(|t| now - t);
    let mut out = Assessment {
        key: key.to_string(),
        readable,
        age,
        reason: Reason::Redirected,
        detail: String::new(),
        changes_at: None,
    };
    let (target, timestamp) = match parsed {
        Ok(parsed) => parsed,
        Err(what) => {
            out.reason = Reason::MalformedRecord;
            out.detail = format!("record {key} is malformed ({what})");
            return out;
        }
    };
    let age = now - timestamp;
    let ttl = settings.ttl_seconds();
    let skew = settings.future_skew_seconds();
    let written = utc(timestamp);
    if age < -skew {
        out.reason = Reason::FutureTimestamp;
        out.changes_at = Some(timestamp - skew);
        out.detail = concat(&[
            "record ",
            key,
            " is dated ",
            &written,
            ", beyond the allowed skew (",
            &seconds(skew),
            " s) ahead of the clock",
        ]);
        return out;
    }
    let ends = utc(timestamp + ttl);
    if age >= ttl {
        out.reason = Reason::Expired;
        out.detail = lifetime(key, &written, ", expired at ", &ends, ttl);
        return out;
    }
    // Valid but for its target: from here on only the TTL's end changes it.
    out.changes_at = Some(timestamp + ttl);
    if let Some(owner) = settings.session_owner(&target) {
        out.reason = Reason::MalformedRecord;
        out.detail = format!(
            "record {key} names {target}, an XMPP session of {}, which is never a target",
            owner.agent.name
        );
    } else {
        out.detail = lifetime(key, &written, ", holds until ", &ends, ttl);
    }
    out
}

/// `record <key>, written <written><how><ends> (TTL <ttl> s)`: the
/// sentence of a record inside or past its TTL.
fn lifetime(key: &str, written: &str, how: &str, ends: &str, ttl: f64) -> String {
    let ttl = seconds(ttl);
    concat(&[
        "record ",
        key,
        ", written ",
        written,
        how,
        ends,
        " (TTL ",
        &ttl,
        " s)",
    ])
}

/// Unix time `t` as a UTC date, ISO 8601, to the millisecond (digits
/// shown only when not zero), e.g. `2026-12-01T19:00:00Z`,
/// `2026-12-01T19:00:00.250Z`; outside the years 0000–9999, `Unix time
/// <seconds>`. Integer arithmetic (the civil-from-days algorithm of
/// H. Hinnant, "chrono-Compatible Low-Level Date Algorithms"): no date
/// crate or float formatting in the component.
pub fn utc(t: f64) -> String {
    // `as` saturates: absurd times land outside the years and say so.
    let ms = (t * 1000.0).round() as i64;
    let (days, ms_of_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    if !(0..=9999).contains(&year) {
        return concat(&["Unix time ", &seconds(t)]);
    }
    let mut out = String::with_capacity(24);
    pad(&mut out, year, 4);
    for (sep, n) in [
        ('-', month),
        ('-', day),
        ('T', ms_of_day / 3_600_000),
        (':', ms_of_day / 60_000 % 60),
        (':', ms_of_day / 1000 % 60),
    ] {
        out.push(sep);
        pad(&mut out, n, 2);
    }
    if ms_of_day % 1000 != 0 {
        out.push('.');
        pad(&mut out, ms_of_day % 1000, 3);
    }
    out.push('Z');
    out
}

/// `n` (0 ≤ n < 10^width) in decimal, zero-padded to `width` digits. By
/// hand, not `to_string`: `core::fmt` is a large cost in the component,
/// and this runs fourteen times per redirecting `resolve`.
fn pad(out: &mut String, n: i64, width: u32) {
    for place in (0..width).rev() {
        let digit = (n / 10_i64.pow(place)) % 10;
        out.push(char::from(b'0' + digit as u8));
    }
}

/// How a person reads a non-finite `f64` (without float formatting).
pub(crate) fn non_finite(x: f64) -> &'static str {
    if x.is_nan() {
        "NaN"
    } else if x > 0.0 {
        "+infinity"
    } else {
        "-infinity"
    }
}
