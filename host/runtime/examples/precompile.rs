//! `make component`'s last step: the policy component precompiled for this
//! machine as the host embeds it (`src/precompiled.rs`, `build.rs`), so a
//! cold start need not compile it.
//!
//! Usage: `precompile COMPONENT.wasm OUT.cwasm`. Writes `OUT.cwasm` only
//! when its bytes change: `build.rs` watches it, and an unchanged artifact
//! must not rebuild the host. Exit status 1 with one line on stderr when
//! the component cannot be read or compiled, 2 on bad arguments.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let [component, out] = args.as_slice() else {
        eprintln!("usage: precompile COMPONENT.wasm OUT.cwasm");
        return ExitCode::from(2);
    };
    match run(Path::new(component), Path::new(out)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("precompile: {why}");
            ExitCode::FAILURE
        }
    }
}

fn run(component: &Path, out: &Path) -> Result<(), String> {
    let bytes = std::fs::read(component)
        .map_err(|e| format!("cannot read {}: {e}", component.display()))?;
    let artifact = session_switch_runtime::precompile_artifact(&bytes).map_err(|f| f.message)?;
    if std::fs::read(out).ok().as_deref() == Some(artifact.as_slice()) {
        return Ok(());
    }
    let tmp = out.with_extension("cwasm.tmp");
    std::fs::write(&tmp, &artifact)
        .and_then(|()| std::fs::rename(&tmp, out))
        .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    println!(
        "precompiled {} -> {} ({} bytes)",
        component.display(),
        out.display(),
        artifact.len()
    );
    Ok(())
}
