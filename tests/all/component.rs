//! Loading real policy components: the one `make component` builds (and
//! the host embeds), and the broken variants `make variants` builds. Each
//! bad one is refused with a message that says what is wrong; the
//! precompiled cache is used on the second load and survives corruption;
//! the embedded policy starts from the artifact precompiled into the host
//! (its fallbacks are unit tests of `host/runtime/src/precompiled.rs`).

use session_switch::FailureKind;
use session_switch::runtime::*;
use session_switch_tests::{component_path, variant_path};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Instant;

/// Options with a private cache directory per test (no shared state).
fn options_in(cache: &Path) -> PolicyOptions {
    PolicyOptions {
        cache: CacheMode::Dir(cache.to_owned()),
        ..PolicyOptions::default()
    }
}

fn no_cache() -> PolicyOptions {
    PolicyOptions {
        cache: CacheMode::Off,
        ..PolicyOptions::default()
    }
}

#[test]
fn the_real_component_imports_only_our_interfaces_and_exports_the_policy() {
    let policy = Policy::load(component_path(), no_cache()).expect("the real component loads");
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
    assert_eq!(info.cache, CacheUse::Off);
    assert_eq!(
        info.size as u64,
        std::fs::metadata(component_path()).unwrap().len()
    );
    assert_eq!(info.source, ComponentSource::File(component_path()));
}

#[test]
fn the_embedded_component_is_the_built_one_and_answers_version() {
    let policy = Policy::embedded(no_cache()).expect("the embedded component loads");
    let info = policy.info();
    assert_eq!(info.source, ComponentSource::Embedded);
    let on_disk = std::fs::read(component_path()).unwrap();
    assert_eq!(
        EMBEDDED_COMPONENT, on_disk,
        "the host embeds target/policy/session_switch.wasm (rebuilt when it changes)"
    );
    let file = Policy::load(component_path(), no_cache()).unwrap();
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
    let err = Policy::load(variant_path("wasi"), no_cache()).unwrap_err();
    assert_eq!(err.kind, FailureKind::Policy);
    assert!(err.message.contains("wasi.wasm"), "{}", err.message);
    assert!(err.message.contains("it imports `wasi:"), "{}", err.message);
    assert!(err.message.contains("no WASI"), "{}", err.message);
}

#[test]
fn a_component_of_another_interface_is_refused() {
    let err = Policy::load(variant_path("other-interface"), no_cache()).unwrap_err();
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
    let err = Policy::load(variant_path("old-version"), no_cache()).unwrap_err();
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
    let err = Policy::load(&garbage, options_in(&dir.path().join("cache"))).unwrap_err();
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
    let err = Policy::load(&core, no_cache()).unwrap_err();
    assert_eq!(err.kind, FailureKind::Policy);
    assert!(err.message.contains("core.wasm"), "{}", err.message);

    let missing = dir.path().join("missing.wasm");
    let err = Policy::load(&missing, no_cache()).unwrap_err();
    assert_eq!(err.kind, FailureKind::BadInput);
    assert!(err.message.contains("missing.wasm"), "{}", err.message);
    assert_eq!(err.exit_status(), 2);
}

#[test]
fn a_component_failing_its_self_check_is_refused_unless_the_check_is_skipped() {
    let err = Policy::load(variant_path("bad-self-check"), no_cache()).unwrap_err();
    assert_eq!(err.kind, FailureKind::Policy);
    assert!(err.message.contains("self-check failed"), "{}", err.message);
    assert!(
        err.message.contains("bad-self-check.wasm"),
        "{}",
        err.message
    );

    let options = PolicyOptions {
        self_check: false,
        ..no_cache()
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
fn the_precompiled_cache_is_used_on_the_second_load() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("nested/session-switch");

    let started = Instant::now();
    let first = Policy::load(component_path(), options_in(&cache)).unwrap();
    let first_time = started.elapsed();
    assert_eq!(first.info().cache, CacheUse::Stored);

    let meta = std::fs::metadata(&cache).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o700, "the cache directory is private");
    let entries: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        entries.len(),
        1,
        "one entry, no temp files left: {entries:?}"
    );
    assert_eq!(
        std::fs::metadata(&entries[0]).unwrap().mode() & 0o777,
        0o600
    );

    let started = Instant::now();
    let second = Policy::load(component_path(), options_in(&cache)).unwrap();
    let second_time = started.elapsed();
    assert_eq!(second.info().cache, CacheUse::Hit);
    assert!(second.info().cache.is_hit());
    assert_eq!(second.version(), first.version());
    eprintln!(
        "load with compile: {first_time:?} (compile {:?}); load from cache: {second_time:?} \
         (deserialize {:?})",
        first.info().compile_time,
        second.info().compile_time
    );
    assert!(
        second.info().compile_time < first.info().compile_time,
        "a cache hit is faster than compiling"
    );

    // The embedded component is the same bytes, but it does not read the
    // cache: the host carries it precompiled.
    let embedded = Policy::embedded(options_in(&cache)).unwrap();
    assert_eq!(embedded.info().cache, CacheUse::Embedded);
    // Given as bytes, the same component takes the same entry.
    let bytes = Policy::from_bytes(EMBEDDED_COMPONENT, options_in(&cache)).unwrap();
    assert_eq!(bytes.info().cache, CacheUse::Hit);
}

#[test]
fn the_embedded_policy_starts_cold_from_the_hosts_precompiled_artifact() {
    assert!(
        embedded_precompiled(),
        "`make component` precompiled the component and the host embeds it (host/runtime/build.rs)"
    );
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cold");
    let embedded = Policy::embedded(options_in(&cache)).unwrap();
    assert_eq!(embedded.info().cache, CacheUse::Embedded);
    assert!(!embedded.info().cache.compiled());
    assert_eq!(embedded.info().source, ComponentSource::Embedded);
    assert!(
        !cache.exists(),
        "nothing compiled, nothing written: the cache directory is not even made"
    );

    // The same component compiled from its bytes (cold cache: compiled and
    // stored) answers the same, through the probe and through an instance.
    let compiled = Policy::from_bytes(EMBEDDED_COMPONENT, options_in(&cache)).unwrap();
    assert_eq!(compiled.info().cache, CacheUse::Stored);
    assert!(compiled.info().cache.compiled());
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

    // A policy file goes through the cache as before, even with the
    // embedded component's bytes.
    let file = Policy::load(component_path(), options_in(&cache)).unwrap();
    assert_eq!(file.info().cache, CacheUse::Hit);
    // With the cache off, the embedded policy still needs no compiling.
    assert_eq!(
        Policy::embedded(no_cache()).unwrap().info().cache,
        CacheUse::Embedded
    );
}

#[test]
fn a_corrupted_cache_entry_is_recompiled_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    Policy::load(component_path(), options_in(&cache)).unwrap();
    let entry = std::fs::read_dir(&cache)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();

    // Flip bytes in the middle of the native code.
    let mut bytes = std::fs::read(&entry).unwrap();
    let middle = bytes.len() / 2;
    for b in &mut bytes[middle..middle + 64] {
        *b ^= 0xA5;
    }
    std::fs::write(&entry, &bytes).unwrap();
    let policy = Policy::load(component_path(), options_in(&cache)).unwrap();
    match policy.info().cache {
        CacheUse::Replaced(why) => assert!(why.contains("corrupted"), "{why}"),
        other => panic!("expected a replaced entry, got {other:?}"),
    }
    let backend = session_switch_tests::fake_host::FakeHost::default();
    let settings = session_switch_tests::sample::sample_settings();
    assert!(policy.instance(backend, settings).version().is_ok());

    // Truncated to nothing: recompiled; then the rewritten entry is a hit
    // again. (An entry with a valid checksum that wasmtime refuses is
    // covered by the unit tests of `host/runtime/src/cache.rs`.)
    std::fs::write(&entry, b"").unwrap();
    let policy = Policy::load(component_path(), options_in(&cache)).unwrap();
    assert!(
        matches!(policy.info().cache, CacheUse::Replaced(ref why) if why.contains("truncated")),
        "{:?}",
        policy.info().cache
    );
    let policy = Policy::load(component_path(), options_in(&cache)).unwrap();
    assert_eq!(policy.info().cache, CacheUse::Hit);
}

#[test]
fn a_cache_directory_others_may_write_is_made_private_or_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let policy = Policy::load(component_path(), options_in(&open)).unwrap();
    assert_eq!(policy.info().cache, CacheUse::Stored);
    assert_eq!(std::fs::metadata(&open).unwrap().mode() & 0o777, 0o700);

    // A directory owned by someone else is never trusted (we run as root
    // in CI; as another user the chown fails and this part is moot).
    let foreign = dir.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    if std::os::unix::fs::chown(&foreign, Some(65534), None).is_ok() {
        let policy = Policy::load(component_path(), options_in(&foreign)).unwrap();
        match policy.info().cache {
            CacheUse::Unavailable(why) => assert!(why.contains("not to us"), "{why}"),
            other => panic!("expected the cache to be refused, got {other:?}"),
        }
        assert_eq!(std::fs::read_dir(&foreign).unwrap().count(), 0);
    }
}

#[test]
fn the_default_cache_directory_follows_xdg_cache_home() {
    // Read only: the variable is set by the environment of the test run.
    let dir = default_cache_dir().expect("a cache directory");
    match std::env::var_os("XDG_CACHE_HOME") {
        Some(xdg) if Path::new(&xdg).is_absolute() => {
            assert_eq!(dir, Path::new(&xdg).join("session-switch"))
        }
        _ => assert!(dir.ends_with(".cache/session-switch"), "{}", dir.display()),
    }
}
