//! `make component`'s last step: the policy component precompiled for this
//! machine as the host embeds it (`src/precompiled.rs`, `build.rs`), so a
//! cold start need not compile it; `make deb` runs it with `--cpu baseline`
//! for a binary meant for other machines.
//!
//! Usage: `precompile [--cpu native|baseline] [--without-signal-traps]
//! COMPONENT.wasm OUT.cwasm` (default `native`: this machine's CPU
//! features; `baseline`: the architecture's baseline, which every CPU of it
//! runs; `--without-signal-traps`: for an engine after
//! `disable_signal_traps`, the Python binding's). Writes `OUT.cwasm`
//! only when its bytes change: `build.rs` watches it, and an unchanged
//! artifact must not rebuild the host. Exit status 1 with one line on
//! stderr when the component cannot be read or compiled, 2 on bad
//! arguments.

use session_switch_runtime::Cpu;
use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

const USAGE: &str =
    "usage: precompile [--cpu native|baseline] [--without-signal-traps] COMPONENT.wasm OUT.cwasm";

fn main() -> ExitCode {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let Some((cpu, signal_traps, component, out)) = parse(&args) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    match run(cpu, signal_traps, Path::new(component), Path::new(out)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("precompile: {why}");
            ExitCode::FAILURE
        }
    }
}

fn parse(args: &[OsString]) -> Option<(Cpu, bool, &OsString, &OsString)> {
    let (cpu, rest) = match args {
        [flag, cpu, rest @ ..] if flag == "--cpu" => match cpu.to_str()? {
            "native" => (Cpu::Native, rest),
            "baseline" => (Cpu::Baseline, rest),
            _ => return None,
        },
        rest => (Cpu::Native, rest),
    };
    let (signal_traps, rest) = match rest {
        [flag, rest @ ..] if flag == "--without-signal-traps" => (false, rest),
        rest => (true, rest),
    };
    match rest {
        [component, out] => Some((cpu, signal_traps, component, out)),
        _ => None,
    }
}

fn run(cpu: Cpu, signal_traps: bool, component: &Path, out: &Path) -> Result<(), String> {
    let bytes = std::fs::read(component)
        .map_err(|e| format!("cannot read {}: {e}", component.display()))?;
    let artifact = session_switch_runtime::precompile_artifact(&bytes, cpu, signal_traps)
        .map_err(|f| f.message)?;
    if std::fs::read(out).ok().as_deref() == Some(artifact.as_slice()) {
        return Ok(());
    }
    let tmp = out.with_extension("cwasm.tmp");
    std::fs::write(&tmp, &artifact)
        .and_then(|()| std::fs::rename(&tmp, out))
        .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    println!(
        "precompiled {} for the {} CPU{} -> {} ({} bytes)",
        component.display(),
        format!("{cpu:?}").to_lowercase(),
        if signal_traps {
            ""
        } else {
            ", without signal traps"
        },
        out.display(),
        artifact.len()
    );
    Ok(())
}
