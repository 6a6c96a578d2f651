//! TEST-ONLY behaviours of the component, each behind its own cargo feature
//! and built by `make variants` into `target/policy/variants/`. They let the
//! host's tests see a trap, a runaway loop, unbounded allocation, a failing
//! self-check, invalid edits and a foreign interface. The shipped component
//! (`make component`, no features) contains none of this code.

/// `variant-panic` / `variant-loop` / `variant-alloc`: what `resolve` does
/// instead of resolving.
#[cfg(any(
    feature = "variant-panic",
    feature = "variant-loop",
    feature = "variant-alloc"
))]
pub fn in_resolve() {
    #[cfg(feature = "variant-panic")]
    panic!("variant-panic: resolve panicked on purpose (test build)");
    #[cfg(feature = "variant-loop")]
    {
        let mut n = 0u64;
        loop {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }
    #[cfg(feature = "variant-alloc")]
    {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(vec![1u8; 1 << 20]);
            std::hint::black_box(&hoard);
        }
    }
}

/// `variant-bad-self-check`: refuse, as a broken build would.
#[cfg(feature = "variant-bad-self-check")]
pub fn self_check() -> Result<String, String> {
    Err("variant-bad-self-check: self-check fails on purpose (test build)".to_string())
}

/// `variant-bad-edits`: add an edit whose index is out of range (`len` is
/// the number of rows, or `u32::MAX` when unknown).
#[cfg(feature = "variant-bad-edits")]
pub fn bad_edits(mut edits: Vec<crate::RowEdit>, len: usize) -> Vec<crate::RowEdit> {
    edits.push(crate::RowEdit {
        index: u32::try_from(len).unwrap_or(u32::MAX),
        action: crate::EditAction::Tag,
    });
    edits
}

/// `variant-other-interface`: a component that exports another world
/// (`test:other`) instead of ours; a host must refuse to load it.
#[cfg(feature = "variant-other-interface")]
mod other {
    wit_bindgen::generate!({
        inline: "package test:other; world other { export run: func() -> u32; }",
    });

    struct Other;

    impl Guest for Other {
        fn run() -> u32 {
            42
        }
    }

    #[cfg(target_arch = "wasm32")]
    export!(Other);
}
