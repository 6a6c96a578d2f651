//! The embedded component precompiled at build time, for the build machine's
//! CPU or for the architecture's baseline CPU (`make component` runs
//! `examples/precompile.rs`, `build.rs` embeds its output; `make deb` makes
//! the baseline one): a cold start of the embedded policy deserializes it
//! instead of compiling (docs/src/performance.md: compiling is nearly all
//! of a cold CLI run). Used only when it is exactly ours: made from the very
//! component bytes being loaded (SHA-256), by an engine of this engine's
//! compatibility key (wasmtime version, settings, this CPU's features) or of
//! the same engine with the baseline CPU, payload intact (SHA-256).
//! Anything else — a build without the artifact, an artifact of an older
//! component, a CPU without the features it was made for, an engine
//! without signal traps — falls back to compiling the component. Only
//! [`ComponentSource::Embedded`] uses it: a policy file is compiled.
//!
//! Trust: the artifact is native code made by this crate's own program at
//! build time, from the component the binary embeds, and it lives inside
//! the binary; it is exactly as trusted as the binary (docs/src/security.md).

use super::artifact_layout::{ARTIFACT_HEADER_LEN, ARTIFACT_MAGIC, HeaderDigest, digest};
use super::engine_config::{Cpu, compatibility_key, config, encode_artifact, for_cpu};
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use wasmtime::Engine;
use wasmtime::component::Component;

/// What `build.rs` embedded: header and payload
/// (`engine_config::encode_artifact`) as `examples/precompile.rs` wrote
/// them, or nothing when the build had no artifact.
const EMBEDDED_PRECOMPILED: &[u8] = include_bytes!(env!("SESSION_SWITCH_POLICY_CWASM"));

/// The same for an engine without signal traps (`disable_signal_traps`,
/// the Python binding's): its code checks bounds itself, so it is other
/// code, with another compatibility key.
const EMBEDDED_PRECOMPILED_WITHOUT_SIGNALS: &[u8] =
    include_bytes!(env!("SESSION_SWITCH_POLICY_CWASM_WITHOUT_SIGNALS"));

/// Whether [`load`] checks the payload's SHA-256 against the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Payload {
    /// Check it: an artifact from anywhere but this binary's build.
    Verify,
    /// `build.rs` checked it when it embedded the artifact (and refuses a
    /// damaged one): hashing the artifact at every start was a noticeable part
    /// of a CLI run.
    CheckedAtBuild,
}

/// Why the embedded artifact was not used.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unusable {
    /// This build has none (cross-compiled, or precompiling was turned off).
    Absent,
    /// Made for another component or another engine (settings, wasmtime,
    /// CPU): expected on another machine; compiling is correct.
    Mismatch(String),
    /// Bad magic, short, or a payload checksum mismatch: the binary itself
    /// is damaged. Never deserialized.
    Corrupt(String),
}

/// Compile `bytes` (SHA-256 `sha256`) for `engine`: the embedded
/// precompiled artifact of the engine's signal setting when `embedded` is
/// `Some(signal_traps)` (the source is the embedded component,
/// `ComponentSource::Embedded`) and the artifact is usable (`true`: nothing
/// compiled), else the component compiled (`false`).
///
/// Errors: the bytes are not a valid component; an unusable artifact is logged (`debug`, `warn` when
/// corrupt) and compiled around, never an error.
pub(crate) fn compile(
    engine: &Engine,
    bytes: &[u8],
    sha256: &[u8; 32],
    embedded: Option<bool>,
) -> wasmtime::Result<(Component, bool)> {
    if let Some(signal_traps) = embedded {
        let (artifact, payload) = artifact(signal_traps);
        match load(engine, sha256, &artifact, payload) {
            Ok(component) => {
                tracing::debug!(
                    target: "session_switch::runtime",
                    "the embedded policy: precompiled in the host binary, nothing compiled"
                );
                return Ok((component, true));
            }
            Err(Unusable::Corrupt(why)) => tracing::warn!(
                target: "session_switch::runtime",
                "the host's precompiled policy is damaged ({why}); compiling the component"
            ),
            Err(why) => tracing::debug!(
                target: "session_switch::runtime",
                "the host's precompiled policy is not used ({why:?}); compiling the component"
            ),
        }
    }
    Ok((Component::new(engine, bytes)?, false))
}

/// The component in `artifact`, when it was made from the component of
/// SHA-256 `component_sha256` by an engine compatible with `engine` (or by
/// `engine`'s settings for the baseline CPU) and is intact (its payload's
/// digest checked here unless `payload` says the build did). Cheap checks
/// first: only an artifact that passes all three is handed to wasmtime,
/// which checks compatibility once more itself, the CPU features the code
/// uses against this CPU's included.
pub(crate) fn load(
    engine: &Engine,
    component_sha256: &[u8; 32],
    artifact: &[u8],
    payload_check: Payload,
) -> Result<Component, Unusable> {
    if artifact.is_empty() {
        return Err(Unusable::Absent);
    }
    if artifact.len() < ARTIFACT_HEADER_LEN || !artifact.starts_with(ARTIFACT_MAGIC) {
        return Err(Unusable::Corrupt(format!(
            "no artifact header in {} bytes",
            artifact.len()
        )));
    }
    let (header, payload) = artifact.split_at(ARTIFACT_HEADER_LEN);
    if digest(header, HeaderDigest::Component) != component_sha256 {
        return Err(Unusable::Mismatch(
            "made from another component than the one embedded".into(),
        ));
    }
    let key = digest(header, HeaderDigest::EngineKey);
    if key != compatibility_key(engine) && key != baseline_key(engine).as_slice() {
        return Err(Unusable::Mismatch(
            "made by an engine of other settings, wasmtime version or CPU features".into(),
        ));
    }
    if payload_check == Payload::Verify
        && Sha256::digest(payload).as_slice() != digest(header, HeaderDigest::Payload)
    {
        return Err(Unusable::Corrupt("payload checksum mismatch".into()));
    }
    // SAFETY: the payload is native code `examples/precompile.rs` made at build time
    // as this binary, from the component it embeds (SHA-256 checked above),
    // with this engine's settings (compatibility key checked above); its
    // checksum is intact (checked here or by build.rs). It is as trusted as the binary. wasmtime checks
    // version and settings once more and refuses a mismatch.
    unsafe { Component::deserialize(engine, payload) }
        .map_err(|e| Unusable::Mismatch(format!("refused by wasmtime: {e}")))
}

/// The compatibility key of `engine`'s settings with the baseline CPU
/// ([`Cpu::Baseline`]): wasmtime runs code made for fewer CPU features than
/// this CPU has. Only asked when the artifact is not of `engine` itself, so a
/// binary precompiled for its own machine sets up no second engine.
fn baseline_key(engine: &Engine) -> [u8; 32] {
    match Engine::new(&for_cpu(engine.config(), Cpu::Baseline)) {
        Ok(baseline) => compatibility_key(&baseline),
        // A key no artifact has: it is compiled around, as one for another CPU.
        Err(_) => [0; 32],
    }
}

/// The embedded artifact, or the one a unit test put in its place (whose
/// payload nobody checked yet).
fn artifact(signal_traps: bool) -> (Cow<'static, [u8]>, Payload) {
    #[cfg(test)]
    if let Some(bytes) = tests::REPLACED.with(|r| r.borrow().clone()) {
        return (Cow::Owned(bytes), Payload::Verify);
    }
    (
        Cow::Borrowed(embedded(signal_traps)),
        Payload::CheckedAtBuild,
    )
}

fn embedded(signal_traps: bool) -> &'static [u8] {
    if signal_traps {
        EMBEDDED_PRECOMPILED
    } else {
        EMBEDDED_PRECOMPILED_WITHOUT_SIGNALS
    }
}

/// Whether this build carries a precompiled artifact for an engine with
/// signal traps (`true`) or without (`false`): `make component` made it
/// before the host was built.
pub fn embedded_precompiled(signal_traps: bool) -> bool {
    !embedded(signal_traps).is_empty()
}

/// The component `bytes` precompiled for `cpu` (this machine's, or the
/// architecture's baseline) with the engine settings a
/// [`Policy`](crate::Policy) uses, with signal traps (the default) or
/// without (after `disable_signal_traps`), header included (`engine_config::encode_artifact`): what
/// `examples/precompile.rs` writes for `build.rs` to embed. Errors (kind
/// `policy`): wasmtime cannot be set up, or `bytes` is not a valid
/// component.
pub fn precompile_artifact(
    bytes: &[u8],
    cpu: Cpu,
    signal_traps: bool,
) -> Result<Vec<u8>, crate::Failure> {
    let engine = Engine::new(&for_cpu(&config(signal_traps), cpu))
        .map_err(|e| crate::Failure::policy(format!("cannot set up wasmtime: {e}")))?;
    let payload = engine
        .precompile_component(bytes)
        .map_err(|e| crate::Failure::policy(format!("not a valid component: {e}")))?;
    let sha: [u8; 32] = Sha256::digest(bytes).into();
    Ok(encode_artifact(&sha, &compatibility_key(&engine), &payload))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::component::EMBEDDED_COMPONENT;
    use crate::{ComponentSource, Policy, PolicyOptions};
    use std::cell::RefCell;

    thread_local! {
        /// An artifact in place of the embedded one, for this test's thread.
        pub(super) static REPLACED: RefCell<Option<Vec<u8>>> = const { RefCell::new(None) };
    }

    fn replaced<R>(artifact: Vec<u8>, f: impl FnOnce() -> R) -> R {
        REPLACED.with(|r| *r.borrow_mut() = Some(artifact));
        let out = f();
        REPLACED.with(|r| *r.borrow_mut() = None);
        out
    }

    fn sha() -> [u8; 32] {
        Sha256::digest(EMBEDDED_COMPONENT).into()
    }

    /// The version the component answers when compiled from its bytes.
    fn compiled_version() -> String {
        let policy = Policy::from_bytes(EMBEDDED_COMPONENT, PolicyOptions::default()).unwrap();
        assert!(!policy.info().precompiled, "compiled");
        policy.version()
    }

    /// An engine without signal traps (the Python binding's) takes its own
    /// artifact, and nothing is compiled; the other artifact is refused.
    #[test]
    fn an_engine_without_signal_traps_loads_its_own_embedded_artifact() {
        assert!(
            embedded_precompiled(false),
            "no artifact without signal traps was embedded"
        );
        let engine = Engine::new(&config(false)).unwrap();
        let (_, precompiled) = compile(&engine, EMBEDDED_COMPONENT, &sha(), Some(false)).unwrap();
        assert!(precompiled, "nothing compiled");
        assert!(matches!(
            load(&engine, &sha(), EMBEDDED_PRECOMPILED, Payload::Verify).unwrap_err(),
            Unusable::Mismatch(why) if why.contains("other settings")
        ));
        assert!(
            load(
                &engine,
                &sha(),
                EMBEDDED_PRECOMPILED_WITHOUT_SIGNALS,
                Payload::Verify
            )
            .is_ok()
        );
    }

    #[test]
    fn the_digests_taken_at_build_time_are_those_of_the_embedded_bytes() {
        assert_eq!(crate::component::EMBEDDED_SHA256, sha());
        let (header, payload) = EMBEDDED_PRECOMPILED.split_at(ARTIFACT_HEADER_LEN);
        assert_eq!(
            digest(header, HeaderDigest::Payload),
            Sha256::digest(payload).as_slice()
        );
    }

    #[test]
    fn a_native_build_embeds_an_artifact_for_this_engine() {
        // `make component` precompiled it before `cargo test` built the host.
        assert!(embedded_precompiled(true), "no artifact was embedded");
        let engine = Engine::new(&config(true)).unwrap();
        assert!(load(&engine, &sha(), EMBEDDED_PRECOMPILED, Payload::Verify).is_ok());
        let policy = Policy::embedded(PolicyOptions::default()).unwrap();
        assert!(policy.info().precompiled);
        assert!(policy.info().version.starts_with("session-switch-policy "));
        assert_eq!(policy.version(), compiled_version());
    }

    #[test]
    fn an_empty_or_damaged_artifact_is_never_deserialized() {
        let engine = Engine::new(&config(true)).unwrap();
        assert_eq!(
            load(&engine, &sha(), b"", Payload::Verify).unwrap_err(),
            Unusable::Absent
        );
        assert_eq!(
            load(&engine, &sha(), b"garbage", Payload::Verify).unwrap_err(),
            Unusable::Corrupt("no artifact header in 7 bytes".into())
        );
        let mut flipped = EMBEDDED_PRECOMPILED.to_vec();
        let middle = ARTIFACT_HEADER_LEN + (flipped.len() - ARTIFACT_HEADER_LEN) / 2;
        flipped[middle] ^= 0xA5;
        assert_eq!(
            load(&engine, &sha(), &flipped, Payload::Verify).unwrap_err(),
            Unusable::Corrupt("payload checksum mismatch".into())
        );
        assert!(matches!(
            load(&engine, &[0; 32], EMBEDDED_PRECOMPILED, Payload::Verify).unwrap_err(),
            Unusable::Mismatch(why) if why.contains("another component")
        ));
    }

    #[test]
    fn an_artifact_of_other_engine_settings_is_not_used() {
        let ours = Engine::new(&config(true)).unwrap();
        // Without signal traps: what `disable_signal_traps` gives.
        let other = Engine::new(&config(false)).unwrap();
        assert_ne!(compatibility_key(&ours), compatibility_key(&other));
        let payload = other.precompile_component(EMBEDDED_COMPONENT).unwrap();
        let theirs = encode_artifact(&sha(), &compatibility_key(&other), &payload);
        assert!(matches!(
            load(&ours, &sha(), &theirs, Payload::Verify).unwrap_err(),
            Unusable::Mismatch(why) if why.contains("other settings")
        ));
        // A header claiming our key over their payload: wasmtime refuses.
        let lying = encode_artifact(&sha(), &compatibility_key(&ours), &payload);
        assert!(matches!(
            load(&ours, &sha(), &lying, Payload::Verify).unwrap_err(),
            Unusable::Mismatch(why) if why.contains("refused by wasmtime")
        ));
    }

    #[test]
    fn a_baseline_artifact_loads_into_this_cpus_engine_and_answers_the_same() {
        let want = compiled_version();
        let baseline = precompile_artifact(EMBEDDED_COMPONENT, Cpu::Baseline, true).unwrap();
        let ours = Engine::new(&config(true)).unwrap();
        assert!(load(&ours, &sha(), &baseline, Payload::Verify).is_ok());
        let policy = replaced(baseline, || Policy::embedded(PolicyOptions::default())).unwrap();
        assert!(policy.info().precompiled, "nothing compiled");
        assert_eq!(policy.version(), want);
        // Baseline with other settings: compiled around, as any other engine's.
        let other = Engine::new(&for_cpu(&config(false), Cpu::Baseline)).unwrap();
        let theirs = encode_artifact(
            &sha(),
            &compatibility_key(&other),
            &other.precompile_component(EMBEDDED_COMPONENT).unwrap(),
        );
        assert!(matches!(
            load(&ours, &sha(), &theirs, Payload::Verify).unwrap_err(),
            Unusable::Mismatch(why) if why.contains("other settings")
        ));
    }

    #[test]
    fn the_baseline_engine_of_a_policy_is_the_one_precompile_uses() {
        let made = Engine::new(&for_cpu(&config(true), Cpu::Baseline)).unwrap();
        let policy_engine = Engine::new(&config(true)).unwrap();
        assert_eq!(baseline_key(&policy_engine), compatibility_key(&made));
    }

    #[test]
    fn an_unusable_artifact_falls_back_to_compiling_and_answers_the_same() {
        let want = compiled_version();
        let mut flipped = EMBEDDED_PRECOMPILED.to_vec();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        let other = Engine::new(&config(false)).unwrap();
        let theirs = encode_artifact(
            &sha(),
            &compatibility_key(&other),
            &other.precompile_component(EMBEDDED_COMPONENT).unwrap(),
        );
        for artifact in [Vec::new(), flipped, theirs] {
            let policy = replaced(artifact, || Policy::embedded(PolicyOptions::default())).unwrap();
            assert!(!policy.info().precompiled, "compiled");
            assert_eq!(policy.info().source, ComponentSource::Embedded);
            assert_eq!(policy.version(), want);
        }
    }
}
