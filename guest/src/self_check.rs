//! The component's `self-check`: a built-in table of cases over the sample
//! settings and a fixed sample state (no host imports), run by a host before
//! it swaps in a new component. It covers what a broken build would get
//! wrong first: normalisation, tagging of the real fixture lines, own-echo,
//! the TTL and skew boundaries.

use crate::host::Host;
use crate::redirect::{record_key, resolve, seconds};
use crate::rows::Row;
use crate::samples::{SAMPLE_CLI, SAMPLE_NOW, sample_record, sample_settings};
use crate::settings::ValidSettings;
use crate::tagging::edit_for;
use crate::{
    EditAction, Failure, FailureKind, LogLevel, Reason, Role, RowSummaries, SendPlan, Sent, body,
    echo, failure,
};

/// Run every case; `Ok("N cases passed")`, or `Err` naming the first case
/// that failed with what it got and what it wanted.
pub fn run() -> Result<String, String> {
    let settings = ValidSettings::new(sample_settings())
        .map_err(|e| format!("sample settings refused: {}", e.message))?;
    let mut passed = 0usize;
    let mut check = |name: &str, got: String, want: &str| -> Result<(), String> {
        if got == want {
            passed += 1;
            Ok(())
        } else {
            Err(format!(
                "self-check case '{name}': got {got:?}, want {want:?}"
            ))
        }
    };

    for (text, want) in [
        ("a\r\nb\rc", "a\nb\nc"),
        ("\u{1b}[31mred\u{1b}[0m", "red"),
        ("\u{1b}]0;title\u{7}x", "x"),
        ("[YOU] [you]hi", "hi"),
        ("\u{200b}［ＹＯＵ］ hi", "hi"),
        ("a\u{0}b\u{b}c\u{fffe}d", "abcd"),
        ("tab\tkept ", "tab\tkept "),
    ] {
        check(&format!("clean {text:?}"), body::clean(text), want)?;
    }
    for (text, want) in [
        (" \r\n ", "bad-input"),
        ("[YOU]", "bad-input"),
        ("ok", "ok"),
    ] {
        let got = match body::normalise(text, 10) {
            Ok(b) => b,
            Err(e) if e.kind == FailureKind::BadInput => "bad-input".to_string(),
            Err(e) => e.message,
        };
        check(&format!("normalise {text:?}"), got, want)?;
    }

    let mohe = settings
        .agent("mohe")
        .map_err(|e| format!("sample agent missing: {}", e.message))?;
    for (role, line, want) in [
        (Role::User, "mohe: 大家好，今天的会议改到下午三点。", "tag"),
        (
            Role::User,
            "zhiwei: Got it, I'll move the calendar invite.",
            "none",
        ),
        (Role::User, "xiaoguo：收到！👍", "none"),
        (
            Role::User,
            "@mohe please share the meeting link before 3pm.",
            "none",
        ),
        (
            Role::User,
            "mohe2: I'm mohe2, not mohe — please keep our notes separate.",
            "none",
        ),
        (Role::User, "[YOU] mohe: 大家好", "none"),
        (Role::User, "[YOU] zhiwei: I am mohe", "untag"),
        (Role::User, "\u{200b}［YOU］ zhiwei: I am mohe", "untag"),
        (
            Role::User,
            "                                                         ",
            "untag",
        ),
        (Role::Assistant, "好的，已记录：会议改到下午三点。", "none"),
    ] {
        let row = Row {
            role,
            prefix: line,
            bridge_wrote: false,
        };
        let got = match edit_for(mohe, &row) {
            Some(EditAction::Tag) => "tag",
            Some(EditAction::Untag) => "untag",
            None => "none",
        };
        check(&format!("tag {line:?}"), got.to_string(), want)?;
    }

    for (sender, want) in [
        ("coregroup@conference.example.org/mohe", true),
        ("coregroup@conference.example.org/mohe2", false),
        ("mohe@example.org/laptop", true),
        ("zhiwei@example.org", false),
        ("mohe", true),
        ("", false),
    ] {
        let got = echo::is_own_message(&settings, "mohe", sender)
            .map_or_else(|e| e.message, |own| own.to_string());
        check(&format!("is-own {sender:?}"), got, &want.to_string())?;
    }

    let ttl = settings.ttl_seconds();
    let skew = settings.future_skew_seconds();
    for (age, want) in [
        (ttl - 0.5, Reason::Redirected),
        (ttl, Reason::Expired),
        (-skew, Reason::Redirected),
        (-skew - 0.5, Reason::FutureTimestamp),
    ] {
        let mut host = Sample {
            key: record_key("mohe"),
            record: sample_record(SAMPLE_CLI, SAMPLE_NOW - age, "mohe"),
        };
        let got = resolve(&settings, &mut host, "mohe", "xmpp-mohe-v2")
            .map_or_else(|e| e.message, |d| format!("{:?}", d.reason));
        check(
            &format!("resolve at age {} s", seconds(age)),
            got,
            &format!("{want:?}"),
        )?;
    }

    Ok(format!("{passed} cases passed"))
}

/// What the `resolve` cases read: one record under `key`, the sample CLI
/// session, the sample clock. Not a host: `resolve` reads nothing else,
/// and every other import fails.
struct Sample {
    key: String,
    record: String,
}

impl Sample {
    fn absent(import: &str) -> Failure {
        failure::policy(format!("the self-check's sample has no {import}"))
    }
}

impl Host for Sample {
    fn meta_get(&mut self, key: &str) -> Result<Option<String>, Failure> {
        Ok((key == self.key).then(|| self.record.clone()))
    }
    fn meta_delete(&mut self, _key: &str) -> Result<bool, Failure> {
        Err(Self::absent("meta-delete"))
    }
    fn meta_set(&mut self, _key: &str, _value: &str) -> Result<(), Failure> {
        Err(Self::absent("meta-set"))
    }
    fn session_exists(&mut self, session_id: &str) -> Result<bool, Failure> {
        Ok(session_id == SAMPLE_CLI)
    }
    fn history(
        &mut self,
        _: &str,
        _: &str,
        _: Option<u32>,
        _: u32,
    ) -> Result<RowSummaries, Failure> {
        Err(Self::absent("history"))
    }
    fn now(&mut self) -> f64 {
        SAMPLE_NOW
    }
    fn send(&mut self, _plan: &SendPlan) -> Result<Sent, Failure> {
        Err(Self::absent("send"))
    }
    fn log(&mut self, _level: LogLevel, _message: &str) {}
}

#[cfg(test)]
mod tests {
    #[test]
    fn passes() {
        assert_eq!(super::run(), Ok("30 cases passed".to_string()));
    }
}
