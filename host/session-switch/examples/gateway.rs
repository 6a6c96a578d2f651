//! How a Rust gateway embeds the policy: load it from a file it may replace
//! at any time (hot swap), then, for each room message its bot handles, ask
//! which session to load and get that session's tagged history.
//!
//! `cargo run -p session-switch --example gateway -- POLICY.wasm AGENT XMPP_SESSION`
//! reads one room message per stdin line (`SENDER<TAB>BODY`, SENDER as the
//! room JID `room/nick`) and prints what the bot would do. Uses
//! `$HERMES_HOME/session-switch.toml` and `$HERMES_HOME/state.db`.

use session_switch::{Bridge, BridgeOptions};
use std::io::BufRead;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [policy_file, agent, xmpp_session] = args.as_slice() else {
        return Err("usage: gateway POLICY.wasm AGENT XMPP_SESSION".into());
    };
    // The config, database and policy of $HERMES_HOME, wired as the CLI does.
    let bridge = Bridge::open(BridgeOptions {
        policy: Some(policy_file.into()),
        ..BridgeOptions::default()
    })?;
    // Replace the file (write a temp file, then rename): the watcher
    // compiles, type-checks and self-checks the new component off the hot
    // path and swaps it in; a bad file is rejected and the old one serves.
    let _watcher = bridge.watch_policy();

    // One PolicyInstance per thread; it follows the swaps.
    let mut policy = bridge.instance(false)?;

    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let Some((sender, body)) = line.split_once('\t') else {
            eprintln!("skipped {line:?}: expected SENDER<TAB>BODY");
            continue;
        };
        // Never answer ourselves: the room reflects our own messages.
        if policy.is_own_message_or_fallback(agent, sender) {
            println!("{sender}: own reflection, skipped");
            continue;
        }
        // Never fails: on a policy failure, no redirect (reason policy-error).
        let decision = policy.resolve_or_fallback(agent, xmpp_session);
        let history = policy.context_or_fallback(agent, xmpp_session, Some(20))?;
        println!(
            "{sender}: {body:?} -> load {} ({:?}), {} rows for the model",
            decision.session_id,
            decision.reason,
            history.messages.len()
        );
    }
    Ok(())
}
