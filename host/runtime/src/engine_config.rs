//! The wasmtime settings of every engine the host runs policies on, and the
//! header this engine writes on a precompiled artifact (its layout is
//! `artifact_layout.rs`'s). Used by the runtime
//! (`engine.rs`, `precompiled.rs`) and by
//! `precompiled::precompile_artifact`, which `examples/precompile.rs` runs
//! at build time: a precompiled artifact is only usable by an engine of the
//! same settings and wasmtime version, so both take them from here. (If an
//! artifact's settings differ anyway, its compatibility key below differs
//! and the host compiles instead.)

use super::artifact_layout::{ARTIFACT_HEADER_LEN, ARTIFACT_MAGIC};
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};

/// The engine configuration: fuel metering and epoch interruption on (the
/// guards of every call; both are part of the compatibility key).
/// `signal_traps`: false for a host embedded in a process with signal
/// handlers of its own (see `disable_signal_traps`): generated code then
/// checks bounds explicitly.
pub fn config(signal_traps: bool) -> wasmtime::Config {
    let mut config = wasmtime::Config::new();
    config.consume_fuel(true);
    config.epoch_interruption(true);
    // `perf` names the policy's functions only from a map wasmtime writes
    // (/tmp/perf-PID.map); off by default, for profiling a running host.
    if std::env::var_os("SESSION_SWITCH_PERF_MAP").is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    if !signal_traps {
        config.signals_based_traps(false);
        // SAFETY: both are documented Cranelift settings; wasmtime requires
        // them off without signals-based traps (its spectre guards fault on
        // purpose).
        unsafe {
            config.cranelift_flag_set("enable_heap_access_spectre_mitigation", "false");
            config.cranelift_flag_set("enable_table_access_spectre_mitigation", "false");
        }
    }
    config
}

/// The CPU a precompiled artifact is made for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cpu {
    /// The CPU it is made on, its features detected by wasmtime: the fastest
    /// code there, and an artifact that CPUs without those features refuse.
    Native,
    /// The baseline of this architecture (x86-64: SSE2; aarch64: ARMv8.0), no
    /// feature detected: an artifact every CPU of the architecture can load,
    /// for a binary meant for other machines (`make deb`).
    Baseline,
}

/// The target triple this crate is compiled for, from `build.rs`.
const HOST_TARGET: &str = env!("SESSION_SWITCH_HOST_TARGET");

/// `config` compiling for `cpu`. An explicit target, even the host's own, is
/// how wasmtime turns its CPU feature detection off.
pub fn for_cpu(config: &wasmtime::Config, cpu: Cpu) -> wasmtime::Config {
    let mut config = config.clone();
    if cpu == Cpu::Baseline {
        config
            .target(HOST_TARGET)
            .expect("the host's own target triple is one wasmtime knows");
    }
    config
}

/// A `Hasher` that feeds SHA-256, to turn wasmtime's compatibility hash
/// (only `impl Hash`) into stable bytes; `std`'s hashers promise no
/// stability across Rust releases.
pub struct ShaHasher(pub Sha256);

impl Hasher for ShaHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    fn finish(&self) -> u64 {
        unreachable!("only the SHA-256 state is read")
    }
}

/// 32 bytes naming `engine`'s compatibility
/// (`Engine::precompile_compatibility_hash`: wasmtime version, target,
/// Cranelift and ISA flags — the CPU features detected on this machine, or
/// none for [`Cpu::Baseline`] —, tunables, wasm features). Equal keys: an
/// artifact of one engine loads in the other.
pub fn compatibility_key(engine: &wasmtime::Engine) -> [u8; 32] {
    let mut hasher = ShaHasher(Sha256::new());
    hasher.write(b"session-switch engine compatibility v1\0");
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.0.finalize().into()
}

/// An embedded artifact (`artifact_layout.rs`): the header (the magic, then
/// SHA-256 of the component it was compiled from, the engine's
/// [`compatibility_key`], SHA-256 of the payload), then wasmtime's
/// `precompile_component` output (`payload`).
pub fn encode_artifact(component_sha256: &[u8; 32], key: &[u8; 32], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ARTIFACT_HEADER_LEN + payload.len());
    out.extend_from_slice(ARTIFACT_MAGIC);
    out.extend_from_slice(component_sha256);
    out.extend_from_slice(key);
    out.extend_from_slice(&Sha256::digest(payload));
    out.extend_from_slice(payload);
    out
}
