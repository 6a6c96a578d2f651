//! The config's own tests, and the base config the sections' tests parse.

use super::Config;
use std::path::{Path, PathBuf};

/// A config of one agent, the sections' tests' base.
pub(crate) const BASE: &str = "[xmpp]\nroom = \"room@conference.example.org\"\n\n\
    [[agents]]\nname = \"mohe\"\njid = \"mohe@example.org\"\nsessions = [\"xmpp-mohe\"]\n";

/// [`BASE`] and `extra` parsed; the failure's message.
pub(crate) fn parse(extra: &str) -> Result<Config, String> {
    Config::parse(&format!("{BASE}{extra}"), "t").map_err(|f| f.message)
}

fn file(dir: &Path, extra: &str) -> PathBuf {
    let path = dir.join("session-switch.toml");
    std::fs::write(&path, format!("{BASE}{extra}")).unwrap();
    path
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ss-config-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn no_policy_section_means_the_embedded_policy() {
    let config = Config::parse(BASE, "t").unwrap();
    assert_eq!(config.policy_path, None);
}

#[test]
fn a_relative_policy_path_is_relative_to_the_config_folder() {
    let dir = temp_dir("relative");
    let config = Config::load(&file(&dir, "[policy]\npath = \"policies/p.wasm\"\n")).unwrap();
    assert_eq!(config.policy_path, Some(dir.join("policies/p.wasm")));
    // `parse` alone has no folder: the path stays as written.
    let parsed = Config::parse(&format!("{BASE}[policy]\npath = \"p.wasm\"\n"), "t").unwrap();
    assert_eq!(parsed.policy_path, Some(PathBuf::from("p.wasm")));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_relative_ca_file_is_relative_to_the_config_folder_and_an_absolute_one_kept() {
    let dir = temp_dir("ca-file");
    let config = Config::load(&file(&dir, "[bot]\nca_file = \"certs/ca.pem\"\n")).unwrap();
    assert_eq!(config.bot.ca_file, Some(dir.join("certs/ca.pem")));
    let config = Config::load(&file(&dir, "[bot]\nca_file = \"/etc/ssl/ca.pem\"\n")).unwrap();
    assert_eq!(config.bot.ca_file, Some(PathBuf::from("/etc/ssl/ca.pem")));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_absolute_policy_path_is_kept() {
    let dir = temp_dir("absolute");
    let config = Config::load(&file(&dir, "[policy]\npath = \"/srv/p.wasm\"\n")).unwrap();
    assert_eq!(config.policy_path, Some(PathBuf::from("/srv/p.wasm")));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_empty_policy_path_or_an_unknown_key_is_refused_with_its_line() {
    let empty = Config::parse(&format!("{BASE}[policy]\npath = \" \"\n"), "t").unwrap_err();
    assert_eq!(
        empty.message,
        "config t, line 9: [policy] path must name a policy component file"
    );
    let unknown = Config::parse(&format!("{BASE}[policy]\nfile = \"p.wasm\"\n"), "t")
        .unwrap_err()
        .message;
    assert!(
        unknown.starts_with("config t, line 9: unknown field `file`"),
        "{unknown}"
    );
}

/// Every key written with the default the schema shows reads as the key
/// left out: the schema's defaults (the reference page's) are the ones
/// validation fills.
#[test]
fn the_schema_shows_the_defaults_validation_fills() {
    use serde_json::{Map, Value, json};
    let schema = crate::schema();
    let defaults = |def: &str| -> Map<String, Value> {
        schema["$defs"][def]["properties"]
            .as_object()
            .unwrap()
            .iter()
            .filter_map(|(key, p)| p.get("default").map(|d| (key.clone(), d.clone())))
            .collect()
    };
    let mut xmpp = defaults("RawXmpp");
    xmpp.insert("room".into(), "room@conference.example.org".into());
    let mut agent = defaults("RawAgent");
    agent.extend([
        ("name".into(), json!("mohe")),
        ("jid".into(), json!("mohe@example.org")),
        ("sessions".into(), json!(["xmpp-mohe"])),
    ]);
    let written = toml::to_string(&json!({
        "xmpp": xmpp,
        "redirect": defaults("RawRedirect"),
        "loop_guard": defaults("RawLoopGuard"),
        "bot": defaults("RawBot"),
        "agents": [agent],
    }))
    .unwrap();
    assert!(written.contains("turn_timeout_seconds = 300"), "{written}");
    assert_eq!(
        Config::parse(&written, "t").unwrap(),
        Config::parse(BASE, "t").unwrap(),
        "{written}"
    );
}
