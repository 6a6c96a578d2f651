//! The bot's XMPP resource: fixed per machine, `session-switch-bot-HOST`.
//! A bot restarted on the same machine binds the same full JID, and the
//! server closes the old session bound to it (ejabberd's default
//! `resource_conflict`, RFC 6120 §7.7.2.2), so a seat left behind by a
//! killed bot is replaced rather than fought.

/// What every bot resource starts with; a seat of the agent under another
/// resource is another bot or a client of the same account.
pub const RESOURCE_PREFIX: &str = "session-switch-bot-";

/// Overrides the host part of the resource: for containers whose host
/// name changes at every start (the stale seat would then not be
/// replaced), or two "machines" on one host in a test.
pub const HOST_ENV: &str = "SESSION_SWITCH_BOT_HOST";

/// The resource for a bot on `host`: blanks and `/` (which a resource may
/// hold but a reader would take for a separator) become `-`; an empty
/// host name becomes `unknown`.
pub fn resource_for(host: &str) -> String {
    let host: String = host
        .trim()
        .chars()
        .map(|c| {
            if c.is_whitespace() || c == '/' || c.is_control() {
                '-'
            } else {
                c
            }
        })
        .collect();
    let host = if host.is_empty() { "unknown" } else { &host };
    format!("{RESOURCE_PREFIX}{host}")
}

/// This machine's bot resource: [`HOST_ENV`] when set, else the host name.
pub fn resource() -> String {
    let host = match std::env::var(HOST_ENV) {
        Ok(host) if !host.trim().is_empty() => host,
        _ => nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    resource_for(&host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resource_names_the_host() {
        assert_eq!(resource_for("box1"), "session-switch-bot-box1");
        assert_eq!(
            resource_for(" a b/c.example.org\n"),
            "session-switch-bot-a-b-c.example.org"
        );
        assert_eq!(resource_for(""), "session-switch-bot-unknown");
        assert!(resource().starts_with(RESOURCE_PREFIX));
    }
}
