//! Find the policy component the host embeds (`EMBEDDED_COMPONENT`):
//! `$SESSION_SWITCH_POLICY_WASM`, else `target/policy/session_switch.wasm`
//! of the workspace (what `make component` writes, DESIGN §8). Fails with
//! what to run when it is missing; rebuilds the host when it changes.
//!
//! Then the same component precompiled for this machine, when there is one
//! (`EMBEDDED_PRECOMPILED`, `src/precompiled.rs`): `$SESSION_SWITCH_POLICY_CWASM`,
//! else `target/policy/session_switch.cwasm` beside the default component
//! (`make component` writes it with `examples/precompile.rs`). Compiling the
//! component is most of a cold CLI start (README "Performance"). The
//! artifact is made by a program of this crate rather than here, so that
//! wasmtime is not a build-dependency (Cargo would compile it a second
//! time). Without one, an empty artifact is embedded and the host compiles
//! at run time, as it also does when the artifact is for another component,
//! engine or CPU (checked at run time).

use std::path::PathBuf;

fn main() {
    const VAR: &str = "SESSION_SWITCH_POLICY_WASM";
    const CWASM: &str = "SESSION_SWITCH_POLICY_CWASM";
    println!("cargo::rerun-if-env-changed={VAR}");
    println!("cargo::rerun-if-env-changed={CWASM}");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let policy_dir = manifest.join("../../target/policy");
    let (path, artifact) = match std::env::var_os(VAR) {
        Some(path) => (
            PathBuf::from(path),
            std::env::var_os(CWASM).map(PathBuf::from),
        ),
        None => (
            policy_dir.join("session_switch.wasm"),
            Some(
                std::env::var_os(CWASM)
                    .map(PathBuf::from)
                    .unwrap_or_else(|| policy_dir.join("session_switch.cwasm")),
            ),
        ),
    };
    // Watch the paths even while they are missing, so `make component`
    // triggers a rebuild.
    println!("cargo::rerun-if-changed={}", path.display());
    if !path.is_file() {
        panic!(
            "the policy component {} is missing: run `make component` first \
             (or set {VAR} to a built component)",
            path.display()
        );
    }
    let path = path
        .canonicalize()
        .expect("canonical path of the component");
    println!("cargo::rustc-env={VAR}={}", path.display());

    let embedded = match artifact {
        Some(artifact) => {
            println!("cargo::rerun-if-changed={}", artifact.display());
            artifact.is_file().then(|| artifact.canonicalize().unwrap())
        }
        None => None,
    };
    let embedded = embedded.unwrap_or_else(|| {
        let empty = PathBuf::from(std::env::var_os("OUT_DIR").unwrap()).join("none.cwasm");
        std::fs::write(&empty, b"").expect("write an empty artifact");
        empty
    });
    println!("cargo::rustc-env={CWASM}={}", embedded.display());
}
