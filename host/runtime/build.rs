//! Find the policy component the host embeds (`EMBEDDED_COMPONENT`):
//! `$SESSION_SWITCH_POLICY_WASM`, else `target/policy/session_switch.wasm`
//! of the workspace (what `make component` writes, DESIGN §8). Fails with
//! what to run when it is missing; rebuilds the host when it changes.

use std::path::PathBuf;

fn main() {
    const VAR: &str = "SESSION_SWITCH_POLICY_WASM";
    println!("cargo::rerun-if-env-changed={VAR}");
    let path = match std::env::var_os(VAR) {
        Some(path) => PathBuf::from(path),
        None => {
            let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap());
            manifest.join("../../target/policy/session_switch.wasm")
        }
    };
    // Watch the path even while it is missing, so `make component` triggers
    // a rebuild.
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
}
