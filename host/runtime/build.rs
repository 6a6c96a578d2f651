//! Find the policy component the host embeds (`EMBEDDED_COMPONENT`):
//! `$SESSION_SWITCH_POLICY_WASM`, else `target/policy/session_switch.wasm`
//! of the workspace (what `make component` writes, docs/src/design/contracts.md). Fails with
//! what to run when it is missing; rebuilds the host when it changes.
//!
//! Then the same component precompiled for this machine, when there is one
//! (`EMBEDDED_PRECOMPILED`, `src/precompiled.rs`): `$SESSION_SWITCH_POLICY_CWASM`,
//! else `target/policy/session_switch.cwasm` beside the default component
//! (`make component` writes it with `examples/precompile.rs`). Compiling the
//! component is most of a cold CLI start (docs/src/performance.md). The
//! artifact is made by a program of this crate rather than here, so that
//! wasmtime is not a build-dependency (Cargo would compile it a second
//! time). Without one, an empty artifact is embedded and the host compiles
//! at run time, as it also does when the artifact is for another component,
//! engine or CPU (checked at run time). `make deb` sets
//! `$SESSION_SWITCH_POLICY_CWASM` to an artifact for the architecture's
//! baseline CPU (`engine_config::Cpu::Baseline`), which any CPU of it loads.
//!
//! Both SHA-256 digests a cold start needs are taken here, once per build,
//! rather than at every start (hashing the component was a noticeable part of
//! a CLI run, docs/src/performance.md): the component's (`component.sha256` in
//! `OUT_DIR`), and the artifact payload's, checked against its header: an
//! artifact whose payload does not match is damaged and fails the build; one
//! made from another component (stale) is not embedded.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

// The artifact's layout, shared with the runtime (`EngineKey` is only read there).
#[allow(dead_code)]
#[path = "src/artifact_layout.rs"]
mod artifact_layout;

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

    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    let component_sha: [u8; 32] =
        Sha256::digest(std::fs::read(&path).expect("read the component")).into();
    std::fs::write(out_dir.join("component.sha256"), component_sha)
        .expect("write the component's digest");

    let embedded = match artifact {
        Some(artifact) => {
            println!("cargo::rerun-if-changed={}", artifact.display());
            artifact
                .is_file()
                .then(|| artifact.canonicalize().unwrap())
                .filter(|artifact| made_from(artifact, &component_sha))
        }
        None => None,
    };
    let embedded = embedded.unwrap_or_else(|| {
        let empty = out_dir.join("none.cwasm");
        std::fs::write(&empty, b"").expect("write an empty artifact");
        empty
    });
    println!("cargo::rustc-env={CWASM}={}", embedded.display());
    // The baseline engine (`engine_config::Cpu::Baseline`) names the target
    // explicitly, and this is the one the runtime is compiled for.
    println!(
        "cargo::rustc-env=SESSION_SWITCH_HOST_TARGET={}",
        std::env::var("TARGET").unwrap()
    );
}

/// Whether the artifact at `path` was made from the component of digest
/// `component_sha` (its layout: `src/artifact_layout.rs`). Panics when its
/// payload does not match its own digest: a damaged file.
fn made_from(path: &Path, component_sha: &[u8; 32]) -> bool {
    use artifact_layout::{ARTIFACT_HEADER_LEN, ARTIFACT_MAGIC, HeaderDigest, digest};
    let bytes = std::fs::read(path).expect("read the precompiled artifact");
    if bytes.len() < ARTIFACT_HEADER_LEN
        || !bytes.starts_with(ARTIFACT_MAGIC)
        || digest(&bytes, HeaderDigest::Component) != component_sha
    {
        // Stale: `make component` builds the precompiler (and so runs this
        // script) before it writes the new artifact; the next build embeds it.
        return false;
    }
    let (header, payload) = bytes.split_at(ARTIFACT_HEADER_LEN);
    if Sha256::digest(payload).as_slice() != digest(header, HeaderDigest::Payload) {
        panic!(
            "the precompiled artifact {} is damaged (payload checksum mismatch): run `make component`",
            path.display()
        );
    }
    true
}
