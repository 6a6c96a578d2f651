//! `xmpp-session-bridge`: the command line of session-switch. It only
//! parses ([`args`]), calls the [`session_switch::Bridge`] ([`run`]) and
//! prints ([`output`]). The binary (`main.rs`) and the Python package's
//! console script both call [`run_from_args`], so both give the same
//! output and exit statuses.
//! Exit status (docs/src/design/contracts.md): 0 done; 2 refused before posting (bad input,
//! unknown agent, sender not accepted, database busy); 3 the room's answer
//! is unknown; 1 any other error. A non-zero exit prints one line on stderr.

use clap::Parser;
mod args;
mod bot;
mod doctor;
mod legacy_script;
mod output;
mod run;

use args::Cli;
use std::ffi::OsString;
use std::path::PathBuf;

/// How the command was started, for what depends on it.
#[derive(Default)]
pub struct Launch {
    /// The command a legacy script runs (`install-legacy-script`): the
    /// console script's path when started through Python, whose own
    /// executable is the interpreter; `None` is this executable.
    pub command: Option<PathBuf>,
    /// `doctor`'s `plugin-imports` link: tries whether the Python this
    /// command runs in imports the Hermes plugin (the console script, in
    /// Hermes's venv, can; `Ok` says what was imported, `Err` why not);
    /// `None`, the binary, skips that link.
    pub plugin_import: Option<PluginImport>,
}

/// A try of the plugin's import (see [`Launch::plugin_import`]); `Send`,
/// as the console script runs the command with the GIL released.
pub type PluginImport = Box<dyn Fn() -> Result<String, String> + Send + Sync>;

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("command", &self.command)
            .field("plugin_import", &self.plugin_import.as_ref().map(|_| "…"))
            .finish()
    }
}

/// Run the command line `args` (the program's name first), print its
/// answer or its one line of failure, and return the exit status.
pub fn run_from_args(args: impl IntoIterator<Item = OsString>, launch: Launch) -> u8 {
    restore_sigpipe();
    let args: Vec<OsString> = args.into_iter().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help, --version
            let _ = e.print();
            return 0;
        }
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                    | clap::error::ErrorKind::MissingSubcommand
            ) =>
        {
            eprintln!("xmpp-session-bridge: no command given (see --help for the commands)");
            return 2;
        }
        Err(e) => {
            // clap's text is several lines (what is wrong, a tip, usage,
            // "For more information"): keep what is wrong, on one line.
            // Its tip about "--" is dropped: for `send` the "--" must come
            // after the options, which `send --help` says.
            let text = e.to_string();
            let what = text
                .split("\n\nUsage:")
                .next()
                .unwrap_or(&text)
                .lines()
                .map(str::trim)
                .filter(|l| !l.starts_with("tip:") && !l.starts_with("For more information"))
                .collect::<Vec<_>>()
                .join(" ");
            let what = what
                .trim_start_matches("error: ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            // Only `send` and `admit` take a message, so only they get the
            // hint about one that starts with '-'. `args_os`: an argument
            // that is not UTF-8 (the very error clap may be reporting)
            // would make `args` panic.
            let command = args.iter().skip(1).find(|a| *a == "send" || *a == "admit");
            // The argument clap did not expect: one that starts with '-'
            // is a message read as an option; any other, a message's
            // second word outside quotes.
            let dash = match e.get(clap::error::ContextKind::InvalidArg) {
                Some(clap::error::ContextValue::String(arg)) => arg.starts_with('-'),
                _ => true,
            };
            let hint = match (e.kind(), command.as_ref().and_then(|c| c.to_str())) {
                (clap::error::ErrorKind::UnknownArgument, Some("send")) if !dash => {
                    "a message of several words goes in quotes: \
                     send \"TEXT\" SESSION_ID --agent NAME; see --help"
                }
                (clap::error::ErrorKind::UnknownArgument, Some("admit")) if !dash => {
                    "a message of several words goes in quotes, after '--': \
                     admit --agent NAME --from OCCUPANT -- \"BODY\"; see --help"
                }
                (clap::error::ErrorKind::UnknownArgument, Some("send")) => {
                    "a message starting with '-' goes after the options and '--': \
                     send --agent NAME -- TEXT SESSION_ID; see --help"
                }
                (clap::error::ErrorKind::UnknownArgument, Some(_)) => {
                    "a message starting with '-' goes after the options and '--': \
                     admit --agent NAME --from OCCUPANT -- BODY; see --help"
                }
                _ => "see --help",
            };
            eprintln!("xmpp-session-bridge: {what} ({hint})");
            return 2;
        }
    };
    // A bot's log is its output: info unless asked for more.
    let verbose = match cli.command {
        args::Command::Bot(_) => cli.global.verbose.max(1),
        _ => cli.global.verbose,
    };
    let serving = matches!(&cli.command, args::Command::Bot(bot) if !bot.once);
    init_logging(verbose, serving);
    match run::run(cli, &launch) {
        Ok(()) => 0,
        Err(failure) => {
            eprintln!(
                "xmpp-session-bridge: {}",
                failure.message.replace('\n', " ")
            );
            failure.exit_status()
        }
    }
}

/// Logs go to stderr, off by default (a failure is the one line above);
/// `-v` shows warnings and info, `-vv` debug; `RUST_LOG` overrides.
/// `timed`: each line starts with its UTC time (RFC 3339), for the room
/// bot while it serves, a service whose log is read after the fact; a
/// one-shot command's lines (the bot's `--once` check too) belong to the
/// run that printed them.
fn init_logging(verbose: u8, timed: bool) {
    let default = match verbose {
        0 => "off",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let log = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only for a terminal: a log piped to a file or a
        // supervisor would carry escape sequences.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    // `try_init`: a second command in one Python process keeps the first
    // one's log rather than panic.
    let _ = if timed {
        log.try_init()
    } else {
        log.without_time().try_init()
    };
}

/// Rust ignores SIGPIPE, and so does Python, so `println!` panics when
/// stdout is a closed pipe (`xmpp-session-bridge --json active | head -1`).
/// Restore the default, as other Unix tools behave: the process ends
/// quietly. The process is the command's alone, also through Python.
fn restore_sigpipe() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    // SAFETY: SIG_DFL installs no handler code; the binary calls this
    // before any thread exists, the console script before the command
    // starts one.
    unsafe {
        let _ = signal(Signal::SIGPIPE, SigHandler::SigDfl);
    }
}
