//! The `xmpp-session-bridge` binary: the command line of
//! [`session_switch_cli`].

use std::process::ExitCode;

/// Each history row a `context` reads becomes a message with its own
/// allocations, freed when the answer is printed: mimalloc's small-object
/// path costs less than glibc's (docs/src/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    ExitCode::from(session_switch_cli::run_from_args(
        std::env::args_os(),
        session_switch_cli::Launch::default(),
    ))
}
