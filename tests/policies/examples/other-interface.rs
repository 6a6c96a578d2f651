//! `other-interface`: a component that exports another world (`test:other`)
//! instead of ours; a host must refuse to load it. It uses none of the
//! shared glue: nothing of our world gets into it.

wit_bindgen::generate!({
    inline: "package test:other; world other { export run: func() -> u32; }",
});

pub struct Other;

impl Guest for Other {
    fn run() -> u32 {
        42
    }
}

#[cfg(target_arch = "wasm32")]
export!(Other);
