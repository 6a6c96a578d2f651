//! Own-echo recognition (docs/src/design/rules.md#own-echo): the room reflects the
//! agent's message back to its own bot; the bot must recognise it by the
//! sender's identity, never by the text, so it neither stores it twice nor
//! answers itself.

use crate::Failure;
use crate::settings::ValidSettings;

/// Whether a room message from `sender` is `agent`'s own (WIT
/// `policy.is-own-message`). `sender` is split at the first `/` into a bare
/// part (blanks around it ignored: a JID has none) and a resource (kept
/// exactly: a nick's blanks are part of it):
/// - bare part = the room's JID → own iff the resource is the agent's nick
///   (an occupant JID `room/nick`, XEP-0045);
/// - else a bare part with `@` → own iff it is the agent's bare JID (any
///   resource: the agent's client sent it);
/// - else, with no `/` at all, a bare nick → own iff it is the agent's nick
///   (exactly, blanks included);
/// - anything else (empty, a domain, `domain/resource`) → not own.
///
/// JIDs compare ASCII-case-insensitively (RFC 7622 case-folds the local part
/// and domain); nicks compare exactly, as ejabberd seats them: its
/// resourceprep keeps case and blanks, so `MoHe`, `mohe ` and ` mohe` are
/// other occupants than `mohe`.
/// Errors: `unknown-agent`.
pub fn is_own_message(
    settings: &ValidSettings,
    agent: &str,
    sender: &str,
) -> Result<bool, Failure> {
    let entry = settings.agent(agent)?;
    let nick = &entry.agent.nick;
    let (bare, resource) = match sender.split_once('/') {
        Some((bare, resource)) => (bare.trim(), Some(resource)),
        None => (sender, None),
    };
    Ok(if bare.eq_ignore_ascii_case(settings.room()) {
        resource.is_some_and(|r| r == nick)
    } else if bare.contains('@') {
        bare.trim().eq_ignore_ascii_case(&entry.agent.jid)
    } else {
        resource.is_none() && bare == nick
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FailureKind;
    use crate::samples::sample_settings;

    #[test]
    fn identity_table() {
        let s = ValidSettings::new(sample_settings()).unwrap();
        let cases = [
            ("coregroup@conference.example.org/mohe", true),
            ("  CoreGroup@Conference.Example.org/mohe", true),
            ("coregroup@conference.example.org/ mohe ", false),
            ("coregroup@conference.example.org/mohe ", false),
            ("coregroup@conference.example.org/ mohe", false),
            ("coregroup@conference.example.org/mohe\u{200b}", false),
            ("coregroup@conference.example.org/MOHE", false),
            ("coregroup@conference.example.org/MoHe", false),
            ("coregroup@conference.example.org/ｍｏｈｅ", false),
            ("coregroup@conference.example.org/mohe2", false),
            ("coregroup@conference.example.org/zhiwei", false),
            ("coregroup@conference.example.org", false),
            ("coregroup@conference.example.org/", false),
            ("coregroup@conference.example.org/mohe/x", false),
            ("mohe@example.org", true),
            ("Mohe@Example.ORG/laptop", true),
            ("mohe@example.org/", true),
            ("zhiwei@example.org/mohe", false),
            ("mohe@example.org.evil", false),
            ("mohe2@example.org", false),
            ("mohe", true),
            (" mohe ", false),
            ("mohe ", false),
            (" mohe@example.org ", true),
            ("MOHE", false),
            ("Mohe", false),
            ("mohe2", false),
            ("zhiwei", false),
            ("example.org/mohe", false),
            ("墨河", false),
            ("", false),
            ("   ", false),
        ];
        for (sender, want) in cases {
            assert_eq!(is_own_message(&s, "mohe", sender), Ok(want), "{sender:?}");
        }
        assert_eq!(
            is_own_message(&s, "zhiwei", "coregroup@conference.example.org/zhiwei"),
            Ok(true)
        );
        let e = is_own_message(&s, "nobody", "mohe").unwrap_err();
        assert_eq!(e.kind, FailureKind::UnknownAgent);
    }
}
