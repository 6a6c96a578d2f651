//! `xmpp-session-bridge`: the command line of session-switch.
fn main() {}
