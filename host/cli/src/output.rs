//! What the CLI prints: text for a person, or with `--json` the shapes of
//! docs/src/design/contracts.md (one JSON document on stdout).

use serde_json::Value;
use session_switch::config::Config;
use session_switch::json;
use session_switch::runtime::contract::answers::{self, Agent, Created, IsOwn, LegacyScript};
use session_switch::runtime::contract::marker::is_blank;
use session_switch::runtime::{Admission, ContextAnswer, Decision, Receipt, RecordStatus};
use session_switch::{PendingReport, PendingStatus};
use std::path::Path;

fn print_json(value: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).expect("JSON values serialise")
    );
}

pub fn decision(asked: &str, d: &Decision, json: bool) {
    if json {
        return print_json(&json::decision(d));
    }
    if d.redirected {
        println!(
            "{asked} -> {} ({}: {})",
            d.session_id,
            d.reason.as_str(),
            d.detail
        );
    } else {
        println!("{} ({}: {})", d.session_id, d.reason.as_str(), d.detail);
    }
}

pub fn context(asked: &str, answer: &ContextAnswer, json: bool) {
    if json {
        return print_json(&json::context(answer));
    }
    decision(asked, &answer.decision, false);
    for row in &answer.messages {
        let mut text = row.content.replace('\n', "\n    ");
        if let Some(name) = &row.tool_name {
            text = format!("[{name}] {text}");
        }
        if let Some(calls) = &row.tool_calls {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(&tool_calls_text(calls));
        }
        println!("  {:>9}: {text}", row.role);
    }
}

/// `[calls terminal {"command": …}]` for each OpenAI-style tool call; the
/// raw text when it is not that JSON.
fn tool_calls_text(calls: &str) -> String {
    let Ok(Value::Array(list)) = serde_json::from_str::<Value>(calls) else {
        return format!("[tool calls {calls}]");
    };
    list.iter()
        .map(|c| {
            let f = &c["function"];
            let name = f["name"].as_str().unwrap_or("?");
            let args = f["arguments"].as_str().unwrap_or_default();
            format!("[calls {name} {args}]")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn sent(r: &Receipt, history_session: &str, cli_session: &str, json: bool) {
    if json {
        return print_json(&json::receipt(r, history_session));
    }
    println!("sent to {}: {}", r.room, r.body);
    if r.record_replaced {
        println!(
            "history row {} written into {history_session}; {} -> CLI session {cli_session}",
            r.message_id, r.record_key
        );
    } else {
        println!(
            "history row {} written into {history_session}; {} kept: a newer send's \
             record was already stored (CLI session {cli_session} not recorded)",
            r.message_id, r.record_key
        );
    }
}

/// The records, then any send not yet in the history (docs/src/design/send.md#a-send-never-locks-hermes-out); in
/// JSON the latter as objects with `"pending_send": true`.
pub fn active(
    statuses: &[RecordStatus],
    pending: &[PendingReport],
    agent: Option<&str>,
    json: bool,
) {
    if json {
        return print_json(&json::active(statuses, pending));
    }
    for p in pending {
        let what = match p.state {
            PendingStatus::Delivered => {
                "reached the room and waits for state.db (written by \
                                        the next send, active or clear)"
            }
            PendingStatus::Posting if p.process_alive => "is being posted right now",
            PendingStatus::Posting => {
                "was interrupted during the post (its process ended before it \
                                      knew the outcome): the room may have it, the history \
                                      does not; clear forgets it"
            }
            PendingStatus::Unknown => {
                "has an unknown outcome (the post timed out after the request \
                                      went out, or the sender check beside it failed): the room \
                                      may have it, the history does not; clear forgets it"
            }
            // Its fields are unreadable: only the key says which it is.
            PendingStatus::Malformed => {
                println!(
                    "{}: {} is not a send of ours (unreadable as an intent); clear removes it",
                    p.agent, p.key
                );
                continue;
            }
        };
        println!(
            "{}: a send from {} {what}: {}",
            p.agent,
            shown_id(&p.cli_session_id),
            p.body
        );
    }
    if statuses.is_empty() {
        match agent {
            Some(a) => println!("no record for {a}: its bot loads its XMPP session"),
            None => println!("no records: every bot loads its XMPP session"),
        }
    }
    for s in statuses {
        // A record unreadable as a whole (e.g. `1e400` in it) names no session.
        let session = s
            .session_id
            .as_deref()
            .map_or_else(|| "(no session readable)".into(), shown_id);
        if s.valid {
            let age = s.age_seconds.unwrap_or_default();
            let left = s.remaining_seconds.unwrap_or_default();
            // A record stamped ahead of this clock, within the allowed
            // skew (another machine's clock): said so, not as a negative age.
            let age = if age < 0.0 {
                format!("written {:.0} s ahead of this clock", -age)
            } else {
                format!("age {age:.0} s")
            };
            // The detail ends with the session a redirect loads; said only
            // when that is not the recorded one (a compressed session's tip).
            let elsewhere = !s
                .detail
                .ends_with(&format!("would redirect to CLI session {session}"));
            let detail = if elsewhere {
                format!(": {}", s.detail)
            } else {
                String::new()
            };
            println!(
                "{}: {session} (valid: {age}, {left:.0} s left; key {}){detail}",
                s.agent, s.key
            );
        } else {
            println!(
                "{}: {session} ({}: {})",
                s.agent,
                s.reason.as_str(),
                s.detail
            );
        }
    }
}

pub fn cleared(keys: &[String], pending: usize, json: bool) {
    if json {
        return print_json(&json::cleared(keys, pending));
    }
    if pending > 0 {
        println!(
            "forgot {pending} pending send(s) (interrupted, or of unknown outcome; the room may have them)"
        );
    }
    if keys.is_empty() && pending == 0 {
        println!("nothing to clear");
    }
    for k in keys {
        println!("cleared {k}");
    }
}

/// `admit`: `{"reply", "reason", "stop", "heard", "hops", "detail"}`.
pub fn admission(a: &Admission, json: bool) {
    if json {
        return print_json(&json::admission(a));
    }
    let verdict = match (a.reply, a.stop) {
        (true, _) => "reply",
        (false, true) => "stop",
        (false, false) => "do not reply",
    };
    let heard = if a.heard { ", heard" } else { "" };
    println!(
        "{verdict} ({}, hops {}{heard}): {}",
        a.reason.as_str(),
        a.hops,
        a.detail
    );
}

pub fn is_own(from: &str, agent: &str, own: bool, json: bool) {
    if json {
        return print_json(&answers::to_value(&IsOwn { own }));
    }
    let verdict = if own { "is" } else { "is not" };
    println!("{from} {verdict} {agent}'s own message");
}

pub fn agents(config: &Config, json: bool) {
    if json {
        let agents: Vec<Agent<'_>> = config
            .agents
            .iter()
            .map(|a| Agent {
                name: &a.name,
                jid: &a.jid,
                nick: &a.nick,
                sessions: &a.sessions,
                aliases: &a.aliases,
                http_port: a.http_port,
                gateway_port: a.gateway_port,
                mention: a.mention.as_deref(),
            })
            .collect();
        return print_json(&answers::to_value(&agents));
    }
    for a in &config.agents {
        println!(
            "{}: jid {}, nick {}, sessions {}",
            a.name,
            a.jid,
            a.nick,
            a.sessions.join(", ")
        );
    }
}

pub fn legacy_script(written: &Path, runs: &Path, replaced: bool, json: bool) {
    if json {
        return print_json(&answers::to_value(&LegacyScript {
            written,
            runs,
            replaced,
        }));
    }
    println!(
        "{} {}: it runs {} with the same arguments",
        if replaced { "replaced" } else { "wrote" },
        written.display(),
        runs.display()
    );
}

pub fn init_db(path: &Path, json: bool) {
    if json {
        return print_json(&answers::to_value(&Created { created: path }));
    }
    println!("created an empty Hermes database at {}", path.display());
}

/// A session id as a line of text shows it: as it is when it is plain
/// (not empty; no control character, blank or invisible format character
/// such as U+202E or U+2028, the contract's `is_blank`), else quoted with
/// escapes, so that a record's value cannot blank a field, break or
/// reorder the line, or reach the terminal as a control sequence.
fn shown_id(id: &str) -> std::borrow::Cow<'_, str> {
    let plain = !id.is_empty() && !id.chars().any(|c| c.is_control() || is_blank(c));
    if plain {
        id.into()
    } else {
        format!("{id:?}").into()
    }
}
