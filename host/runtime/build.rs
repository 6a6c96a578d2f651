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
//! A second artifact for an engine without signal traps (the Python
//! binding's, `disable_signal_traps`): `$SESSION_SWITCH_POLICY_CWASM_WITHOUT_SIGNALS`,
//! else `target/policy/session_switch.without-signals.cwasm` when neither
//! variable above is set (`make component` writes it too); none otherwise.
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
    const WITHOUT_SIGNALS: &str = "SESSION_SWITCH_POLICY_CWASM_WITHOUT_SIGNALS";
    for var in [VAR, CWASM, WITHOUT_SIGNALS] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let policy_dir = manifest.join("../../target/policy");
    let given = |var: &str| std::env::var_os(var).map(PathBuf::from);
    let (path, artifact, without_signals) = match given(VAR) {
        Some(path) => (path, given(CWASM), given(WITHOUT_SIGNALS)),
        None => (
            policy_dir.join("session_switch.wasm"),
            Some(given(CWASM).unwrap_or_else(|| policy_dir.join("session_switch.cwasm"))),
            given(WITHOUT_SIGNALS).or_else(|| {
                given(CWASM)
                    .is_none()
                    .then(|| policy_dir.join("session_switch.without-signals.cwasm"))
            }),
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

    for (var, artifact) in [(CWASM, artifact), (WITHOUT_SIGNALS, without_signals)] {
        let embedded = embed(artifact, &component_sha, &out_dir);
        println!("cargo::rustc-env={var}={}", embedded.display());
    }
    // The baseline engine (`engine_config::Cpu::Baseline`) names the target
    // explicitly, and this is the one the runtime is compiled for.
    println!(
        "cargo::rustc-env=SESSION_SWITCH_HOST_TARGET={}",
        std::env::var("TARGET").unwrap()
    );
}

/// The artifact to embed: `artifact` when it is there and made from the
/// component of digest `component_sha`, else an empty file (the host then
/// compiles at run time).
fn embed(artifact: Option<PathBuf>, component_sha: &[u8; 32], out_dir: &Path) -> PathBuf {
    let usable = artifact.and_then(|artifact| {
        println!("cargo::rerun-if-changed={}", artifact.display());
        artifact
            .is_file()
            .then(|| artifact.canonicalize().unwrap())
            .filter(|artifact| made_from(artifact, component_sha))
    });
    usable.unwrap_or_else(|| {
        let empty = out_dir.join("none.cwasm");
        std::fs::write(&empty, b"").expect("write an empty artifact");
        empty
    })
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
