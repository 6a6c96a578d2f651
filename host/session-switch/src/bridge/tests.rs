use super::*;
use std::path::Path;

fn variant(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../target/policy/variants/{name}.wasm"))
}

fn home(name: &str, policy: Option<&str>) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ss-bridge-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let section = policy.map_or(String::new(), |p| format!("[policy]\npath = \"{p}\"\n"));
    std::fs::write(
        dir.join("session-switch.toml"),
        format!(
            "[xmpp]\nroom = \"room@conference.example.org\"\n{section}\n[[agents]]\n\
             name = \"mohe\"\njid = \"mohe@example.org\"\nsessions = [\"xmpp-mohe\"]\n"
        ),
    )
    .unwrap();
    dir
}

fn open(dir: &Path, policy: Option<PathBuf>) -> Result<Bridge, Failure> {
    Bridge::open(BridgeOptions {
        config: Some(dir.join("session-switch.toml")),
        policy,
        ..BridgeOptions::default()
    })
}

#[test]
fn the_config_policy_path_is_used_and_the_option_overrides_it() {
    let dir = home("path", None);
    std::fs::copy(variant("v2"), dir.join("v2.wasm")).unwrap();
    std::fs::write(
        dir.join("session-switch.toml"),
        std::fs::read_to_string(dir.join("session-switch.toml"))
            .unwrap()
            .replacen("[xmpp]", "[policy]\npath = \"v2.wasm\"\n\n[xmpp]", 1),
    )
    .unwrap();
    let bridge = open(&dir, None).unwrap();
    assert!(
        bridge.policy().version().ends_with("-v2"),
        "{}",
        bridge.policy().version()
    );
    assert_eq!(bridge.policy_file(), Some(dir.join("v2.wasm").as_path()));

    let bridge = open(&dir, Some(variant("v3"))).unwrap();
    assert!(
        bridge.policy().version().ends_with("-v3"),
        "{}",
        bridge.policy().version()
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn no_policy_path_is_the_embedded_policy_and_a_missing_file_fails_open() {
    let dir = home("embedded", None);
    let bridge = open(&dir, None).unwrap();
    assert_eq!(bridge.policy_file(), None);
    assert!(
        !bridge.policy().version().contains("-v"),
        "{}",
        bridge.policy().version()
    );
    std::fs::remove_dir_all(&dir).unwrap();

    let dir = home("missing", Some("nowhere.wasm"));
    let failure = open(&dir, None)
        .err()
        .expect("a missing policy file is refused");
    assert!(
        failure.message.contains("nowhere.wasm"),
        "{}",
        failure.message
    );
    std::fs::remove_dir_all(dir).unwrap();
}
