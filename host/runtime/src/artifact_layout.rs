//! The layout of an embedded precompiled artifact: [`MAGIC`], then three
//! SHA-256 digests ([`HeaderDigest`]), then wasmtime's `precompile_component`
//! output (the payload). Shared by the runtime (`engine_config.rs` writes
//! it, `precompiled.rs` reads it) and by `build.rs`, which checks an
//! artifact before it embeds it and so includes this file by path: it has
//! no dependencies.

/// The first bytes of an embedded precompiled artifact.
pub const ARTIFACT_MAGIC: &[u8; 16] = b"ssw-precompiled1";

/// Bytes before the payload: the magic and the three digests.
pub const ARTIFACT_HEADER_LEN: usize = ARTIFACT_MAGIC.len() + 3 * 32;

/// The header's digests, in their order.
#[derive(Clone, Copy, Debug)]
pub enum HeaderDigest {
    /// SHA-256 of the component the payload was compiled from.
    Component,
    /// The compiling engine's compatibility key (`engine_config.rs`).
    EngineKey,
    /// SHA-256 of the payload.
    Payload,
}

/// Digest `which` of `header` (the artifact's first
/// [`ARTIFACT_HEADER_LEN`] bytes, or more).
pub fn digest(header: &[u8], which: HeaderDigest) -> &[u8] {
    let at = ARTIFACT_MAGIC.len() + 32 * which as usize;
    &header[at..at + 32]
}
