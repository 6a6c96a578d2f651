//! The command line (clap), compatible with the legacy tool's
//! `xmpp_session_bridge.py send "text" "$HERMES_SESSION_ID" --agent mohe`.
//! Self-contained (clap and std only): xtask includes this file to write
//! the CLI's reference page and man page from the same definition.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Dynamic session switch for Hermes agents in an XMPP room: send as an
/// agent from a CLI session, and tell the agent's bot which session to load.
#[derive(Debug, Parser)]
#[command(name = "xmpp-session-bridge", version, max_term_width = 100)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Options of every command.
#[derive(Debug, Args)]
pub struct Global {
    /// Config file [default: $HERMES_HOME/session-switch.toml]
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Hermes database [default: $HERMES_HOME/state.db]
    #[arg(long, global = true, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Policy component to use instead of the embedded one
    #[arg(long, global = true, value_name = "PATH")]
    pub policy: Option<PathBuf>,
    /// Print one JSON document on stdout instead of text
    #[arg(long, global = true)]
    pub json: bool,
    /// Log what happens on stderr (repeat for more; or set RUST_LOG)
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Post TEXT to the room as the agent, from CLI session SESSION_ID
    ///
    /// The text also goes into the agent's XMPP history as "[YOU] TEXT", and
    /// SESSION_ID is recorded so the agent's bot loads that session while the
    /// record is valid. TEXT "-" reads stdin (one trailing line break
    /// dropped). A TEXT starting with "-" needs "--" after the options:
    /// send --agent NAME -- "-text" SESSION_ID
    // No `-h` here: a message like "-hmm" must be an error, not help
    // printed with exit 0 and nothing sent. `--help` still works.
    #[command(disable_help_flag = true)]
    Send {
        /// The message; "-" reads it from stdin
        text: String,
        /// The CLI session that sends (Hermes sets $HERMES_SESSION_ID)
        session_id: String,
        /// The agent to send as (a name from the config)
        #[arg(long, value_name = "NAME")]
        agent: String,
        /// Print help
        #[arg(long, action = clap::ArgAction::Help)]
        help: Option<bool>,
    },
    /// Show each agent's record: session, age and time left
    Active {
        /// Only this agent's record
        #[arg(long, value_name = "NAME")]
        agent: Option<String>,
    },
    /// Remove the record of one agent or of all
    Clear {
        /// Only this agent's record
        #[arg(long, value_name = "NAME")]
        agent: Option<String>,
    },
    /// The session the agent's bot should load instead of SESSION_ID, and why
    Resolve {
        /// The session the bot is about to load (one of the agent's XMPP sessions)
        session_id: String,
        /// The agent whose bot asks
        #[arg(long, value_name = "NAME")]
        agent: String,
    },
    /// The tagged history the agent's model would see for SESSION_ID
    Context {
        /// The session the bot is about to load (one of the agent's XMPP sessions)
        session_id: String,
        /// The agent whose bot asks
        #[arg(long, value_name = "NAME")]
        agent: String,
        /// Only the last N rows (0 or more)
        #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = row_count)]
        limit: Option<u32>,
    },
    /// Whether a room message from FROM is the agent's own, reflected by the room
    ///
    /// FROM is the occupant JID room/nick, a full or bare JID, or a nick.
    IsOwn {
        /// The room message's sender: occupant JID room/nick, a JID or a nick
        from: String,
        /// The agent whose bot got the message
        #[arg(long, value_name = "NAME")]
        agent: String,
    },
    /// Whether the agent's bot should answer one live room message (the loop guard)
    ///
    /// Prints the decision; exit 0 whether it replies or not. The guard's
    /// state (hop counter, room window, recent bodies) is kept in state.db.
    /// A BODY starting with "-" needs "--" before it.
    Admit {
        /// The agent whose bot got the message
        #[arg(long, value_name = "NAME")]
        agent: String,
        /// The sender as the room shows it: the occupant JID room/nick
        #[arg(long = "from", value_name = "OCCUPANT")]
        occupant: String,
        /// The sender's real JID, where the room exposes it
        #[arg(long, value_name = "BARE_JID")]
        jid: Option<String>,
        /// The message is delayed history (XEP-0203), not live
        #[arg(long)]
        delayed: bool,
        /// The stanza carries the human-origin marker of a person's send
        #[arg(long)]
        human_origin: bool,
        /// The room's XEP-0359 stanza-id of the message (a later reply may name it)
        #[arg(long, value_name = "ID")]
        stanza_id: Option<String>,
        /// The message replies (XEP-0461) to one by this sender: room/nick or a nick
        #[arg(long, value_name = "OCCUPANT_OR_NICK")]
        reply_to: Option<String>,
        /// The message replies (XEP-0461) to the message with this stanza-id
        #[arg(long, value_name = "ID")]
        reply_to_id: Option<String>,
        /// The message body (without a reply's quoted fallback)
        body: String,
    },
    /// List the configured agents
    Agents,
    /// Create a new, empty Hermes-compatible database at --db
    InitDb,
    /// Run the agent's room bot: join the room as the agent, answer through its Hermes API server
    Bot(BotArgs),
    /// Check each link of the chain, in order, and say what fixes a broken one
    ///
    /// The links: the config, state.db, ejabberd (through the configured transport), the room
    /// (it exists, is non-anonymous, archives or not), then for each agent its bot's config
    /// keys, its MUC/Sub subscription, its login (the SASL condition when refused), a bot of it
    /// already running (the lock) and its Hermes API server with the key, then the plugin in
    /// Hermes's config.yaml. Each is ok, failed (with what fixes it) or skipped (because a link
    /// it needs failed). Nothing is changed. Exit 0 when no link failed, 1 when one did.
    Doctor(DoctorArgs),
    /// Put a script at the legacy xmpp_session_bridge.py's path that runs this command
    ///
    /// Prompts and scripts that call `python3 ~/.hermes/scripts/xmpp_session_bridge.py send
    /// "text" "$HERMES_SESSION_ID" --agent mohe` (or `active`, `clear`) then run this command
    /// with the same arguments: its output and exit statuses. Another file at that path is left
    /// as it is unless --force.
    InstallLegacyScript {
        /// Where to write it [default: $HERMES_HOME/scripts/xmpp_session_bridge.py]
        #[arg(long, value_name = "PATH")]
        path: Option<PathBuf>,
        /// Replace a file there that is not such a script
        #[arg(long)]
        force: bool,
    },
}

/// `bot`'s arguments.
#[derive(Debug, Args)]
pub struct BotArgs {
    /// The agent whose bot this is (a name from the config)
    #[arg(long, value_name = "NAME")]
    pub agent: String,
    /// Join the room once, ask the Hermes API server's /health and, with the
    /// key, /v1/models, leave: exit 0 when all worked (for a service manager's
    /// check)
    #[arg(long)]
    pub once: bool,
}

/// `doctor`'s arguments.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Only this agent's links [default: every agent of the config, each as `bot --agent NAME`
    /// would run with this HERMES_HOME]
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
}

/// `--limit`: a number of rows, 0 or more; a negative or other text says so
/// (clap alone reads `-1` as an unknown option).
fn row_count(text: &str) -> Result<u32, String> {
    text.parse::<u32>()
        .map_err(|_| format!("'{text}' is not a number of rows (0 to {})", u32::MAX))
}
