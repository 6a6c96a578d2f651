//! `old-version`: a component of our package at its previous version
//! (`agentsmeeting:session-switch@0.2.0`), importing that version's `host`
//! and exporting its `policy`; a host of this version must refuse it with a
//! message that names both versions. It uses none of the shared glue.

wit_bindgen::generate!({
    inline: "package agentsmeeting:session-switch@0.2.0;
             interface host { now: func() -> f64; }
             interface policy { version: func() -> string; }
             world session-switch { import host; export policy; }",
});

pub struct Old;

impl exports::agentsmeeting::session_switch::policy::Guest for Old {
    fn version() -> String {
        format!(
            "session-switch-policy 0.1.0 at {}",
            agentsmeeting::session_switch::host::now()
        )
    }
}

#[cfg(target_arch = "wasm32")]
export!(Old);
