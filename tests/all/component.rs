//! Loading real policy components: the one `make component` builds (and
//! the host embeds), and the broken variants `make variants` builds. Each
//! bad one is refused with a message that says what is wrong; the
//! embedded policy starts from the artifact precompiled into the host (its
//! fallbacks are unit tests of `host/runtime/src/precompiled.rs`) and a
//! policy file is compiled.

use session_switch::FailureKind;
use session_switch::runtime::*;
use session_switch_tests::{component_path, variant_path};

#[test]
fn the_real_component_imports_only_our_interfaces_and_exports_the_policy() {
    let policy =
        Policy::load(component_path(), PolicyOptions::default()).expect("the real component loads");
    let info = policy.info();
    let mut imports = info.imports.clone();
    imports.sort();
    assert_eq!(imports, [HOST_INTERFACE, TYPES_INTERFACE]);
    assert_eq!(info.exports, [POLICY_INTERFACE]);
    assert!(
        info.version.starts_with("session-switch-policy "),
        "version: {}",
        info.version
    );
    assert!(!info.precompiled, "a policy file is compiled");
    assert_eq!(
        info.size as u64,
        std::fs::metadata(component_path()).unwrap().len()
    );
    assert_eq!(info.source, ComponentSource::File(component_path()));
}

#[test]
fn the_embedded_component_is_the_built_one_and_answers_version() {
    let policy = Policy::embedded(PolicyOptions::default()).expect("the embedded component loads");
    let info = policy.info();
    assert_eq!(info.source, ComponentSource::Embedded);
    let on_disk = std::fs::read(component_path()).unwrap();
    assert_eq!(
        EMBEDDED_COMPONENT, on_disk,
        "the host embeds target/policy/session_switch.wasm (rebuilt when it changes)"
    );
    let file = Policy::load(component_path(), PolicyOptions::default()).unwrap();
    assert_eq!(info.sha256, file.info().sha256);
    assert_eq!(info.version, file.version());

    // `version` also answers through a session, without settings problems.
    let backend = session_switch_tests::fake_host::FakeHost::default();
    let settings = session_switch_tests::sample::sample_settings();
    let mut session = policy.instance(backend, settings);
    assert_eq!(session.version().unwrap(), info.version);
    assert!(session.self_check().unwrap().contains("passed"));
}

#[test]
fn a_component_importing_wasi_is_refused_naming_the_import() {
    let err = Policy::load(variant_path("wasi"), PolicyOptions::default()).unwrap_err();
    assert_eq!(err.kind, FailureKind::Policy);
    assert!(err.message.contains("wasi.wasm"), "{}", err.message);
    assert!(err.message.contains("it imports `wasi:"), "{}", err.message);
    assert!(err.message.contains("no WASI"), "{}", err.message);
}

#[test]
fn a_component_of_another_interface_is_refused() {
    let err = Policy::load(variant_path("other-interface"), PolicyOptions::default()).unwrap_err();
    assert_eq!(err.kind, FailureKind::Policy);
    assert!(
        err.message
            .contains("does not export `agentsmeeting:session-switch/policy@0.3.0`"),
        "{}",
        err.message
    );
    assert!(
        err.message.contains("other-interface.wasm"),
        "{}",
        err.message
    );
}

#[test]
fn a_component_of_the_previous_wit_version_is_refused_naming_both_versions() {
    let err = Policy::load(variant_path("old-version"), PolicyOptions::default()).unwrap_err();
    assert_eq!(err.kind, FailureKind::Policy);
    assert!(err.message.contains("old-version.wasm"), "{}", err.message);
    assert!(
        err.message.contains(
            "it was built for `agentsmeeting:session-switch@0.2.0`, but this host speaks \
             `agentsmeeting:session-switch@0.3.0`"
        ),
        "{}",
        err.message
    );
    assert!(err.message.contains("make component"), "{}", err.message);
}

#[test]
fn garbage_and_missing_files_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.wasm");
    std::fs::write(&garbage, b"this is not WebAssembly at all").unwrap();
    let err = Policy::load(&garbage, PolicyOptions::default()).unwrap_err();
    assert_eq!(err.kind, FailureKind::Policy);
    assert!(
        err.message.contains("is not a valid WebAssembly component"),
        "{}",
        err.message
    );
    assert!(err.message.contains("garbage.wasm"), "{}", err.message);

    // A core module is WebAssembly but not a component.
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let err = Policy::load(&core, PolicyOptions::default()).unwrap_err();
    assert_eq!(err.kind, FailureKind::Policy);
    assert!(err.message.contains("core.wasm"), "{}", err.message);

    let missing = dir.path().join("missing.wasm");
    let err = Policy::load(&missing, PolicyOptions::default()).unwrap_err();
    assert_eq!(err.kind, FailureKind::BadInput);
    assert!(err.message.contains("missing.wasm"), "{}", err.message);
    assert_eq!(err.exit_status(), 2);
}

#[test]
fn a_component_failing_its_self_check_is_refused_unless_the_check_is_skipped() {
    let err = Policy::load(variant_path("bad-self-check"), PolicyOptions::default()).unwrap_err();
    assert_eq!(err.kind, FailureKind::Policy);
    assert!(err.message.contains("self-check failed"), "{}", err.message);
    assert!(
        err.message.contains("bad-self-check.wasm"),
        "{}",
        err.message
    );

    let options = PolicyOptions {
        self_check: false,
        ..PolicyOptions::default()
    };
    let policy = Policy::load(variant_path("bad-self-check"), options).expect("loads unchecked");
    let backend = session_switch_tests::fake_host::FakeHost::default();
    let settings = session_switch_tests::sample::sample_settings();
    let mut session = policy.instance(backend, settings);
    let err = session.self_check().unwrap_err();
    assert_eq!(err.kind, FailureKind::Policy);
    assert!(err.message.contains("self-check failed"), "{}", err.message);
}

#[test]
fn the_embedded_policy_starts_cold_from_the_hosts_precompiled_artifact() {
    for signal_traps in [true, false] {
        assert!(
            embedded_precompiled(signal_traps),
            "`make component` precompiled the component (signal traps: {signal_traps}) and the \
             host embeds it (host/runtime/build.rs)"
        );
    }
    let embedded = Policy::embedded(PolicyOptions::default()).unwrap();
    assert!(embedded.info().precompiled, "nothing compiled");
    assert_eq!(embedded.info().source, ComponentSource::Embedded);

    // The same component compiled from its bytes answers the same, through
    // the probe and through an instance.
    let compiled = Policy::from_bytes(EMBEDDED_COMPONENT, PolicyOptions::default()).unwrap();
    assert!(!compiled.info().precompiled, "bytes are compiled");
    assert_eq!(compiled.info().sha256, embedded.info().sha256);
    assert_eq!(compiled.version(), embedded.version());
    assert!(embedded.version().starts_with("session-switch-policy "));
    for policy in [&embedded, &compiled] {
        let backend = session_switch_tests::fake_host::FakeHost::default();
        let settings = session_switch_tests::sample::sample_settings();
        let mut session = policy.instance(backend, settings);
        assert_eq!(session.version().unwrap(), embedded.version());
        assert!(session.self_check().unwrap().contains("passed"));
    }

    // A policy file is compiled, even with the embedded component's bytes.
    let file = Policy::load(component_path(), PolicyOptions::default()).unwrap();
    assert!(!file.info().precompiled);
    assert_eq!(file.info().sha256, embedded.info().sha256);
}
