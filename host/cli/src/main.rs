//! `xmpp-session-bridge`: the command line of session-switch. It only
//! parses ([`args`]), calls the [`session_switch::Bridge`] ([`run`]) and
//! prints ([`output`]).
//! Exit status (docs/src/design/contracts.md): 0 done; 2 refused before posting (bad input,
//! unknown agent, sender not accepted, database busy); 3 the room's answer
//! is unknown; 1 any other error. A non-zero exit prints one line on stderr.

use clap::Parser;
mod args;
mod bot;
mod legacy_script;
mod output;
mod run;

use args::Cli;
use std::process::ExitCode;

/// Each history row a `context` reads becomes a message with its own
/// allocations, freed when the answer is printed: mimalloc's small-object
/// path costs less than glibc's (docs/src/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    restore_sigpipe();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help, --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                    | clap::error::ErrorKind::MissingSubcommand
            ) =>
        {
            eprintln!("xmpp-session-bridge: no command given (see --help for the commands)");
            return ExitCode::from(2);
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
            let command = std::env::args_os()
                .skip(1)
                .find(|a| a == "send" || a == "admit");
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
            return ExitCode::from(2);
        }
    };
    // A bot's log is its output: info unless asked for more.
    let verbose = match cli.command {
        args::Command::Bot(_) => cli.global.verbose.max(1),
        _ => cli.global.verbose,
    };
    let serving = matches!(&cli.command, args::Command::Bot(bot) if !bot.once);
    init_logging(verbose, serving);
    match run::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!(
                "xmpp-session-bridge: {}",
                failure.message.replace('\n', " ")
            );
            ExitCode::from(failure.exit_status())
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
    if timed {
        log.init();
    } else {
        log.without_time().init();
    }
}

/// Rust ignores SIGPIPE, so `println!` panics when stdout is a closed pipe
/// (`xmpp-session-bridge --json active | head -1`). Restore the default,
/// as other Unix tools behave: the process ends quietly.
fn restore_sigpipe() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    // SAFETY: at the start of main, before any thread exists; SIG_DFL
    // installs no handler code.
    unsafe {
        let _ = signal(Signal::SIGPIPE, SigHandler::SigDfl);
    }
}
