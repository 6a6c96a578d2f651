//! The Hermes plugin's links: `session-switch` in `plugins.enabled` of
//! Hermes's `config.yaml` (Hermes loads no other plugin), and, where the
//! caller runs inside Hermes's venv, the plugin's import.

use super::PluginProbe;
use super::report::Report;
use std::path::Path;
use yaml_rust2::{Yaml, YamlLoader};

/// The plugin's name in `plugins.enabled` (its entry point's name).
const PLUGIN: &str = "session-switch";

/// What `pip install` of the wheel into Hermes's venv fixes.
const INSTALL: &str = "install the wheel into the venv Hermes runs: \
                       /path/to/hermes-venv/bin/python -m pip install session_switch-*.whl";

/// The `plugin-listed` and `plugin-imports` links for the Hermes home
/// `home`.
pub fn links(home: &Path, probe: Option<PluginProbe>, report: &mut Report) {
    let path = home.join("config.yaml");
    let shown = path.display();
    let add = format!(
        "add session-switch to plugins.enabled in {shown} (plugins: {{enabled: \
         [session-switch]}}), then restart the gateway"
    );
    match std::fs::read_to_string(&path) {
        Err(e) => report.failed(
            "plugin-listed",
            None,
            format!("cannot read {shown}: {e} (is HERMES_HOME the agent's Hermes home?)"),
            format!("run with HERMES_HOME set to the agent's Hermes home; there, {add}"),
        ),
        Ok(text) => match enabled_plugins(&text) {
            Err(why) => report.failed(
                "plugin-listed",
                None,
                format!("{shown} is not YAML Hermes can read: {why}"),
                format!("correct {shown}, then {add}"),
            ),
            // Hermes: an explicit disable wins over the enabled list.
            Ok(_) if plugin_names(&text, "disabled").is_ok_and(|d| d.iter().any(|p| p == PLUGIN)) => {
                report.failed(
                    "plugin-listed",
                    None,
                    format!(
                        "{shown} lists {PLUGIN} in plugins.disabled, which wins over                          plugins.enabled: Hermes does not load it"
                    ),
                    format!("remove {PLUGIN} from plugins.disabled in {shown}, then restart the gateway"),
                )
            }
            Ok(enabled) if enabled.iter().any(|p| p == PLUGIN) => report.ok(
                "plugin-listed",
                None,
                format!("{shown} lists {PLUGIN} in plugins.enabled"),
            ),
            Ok(enabled) => report.failed(
                "plugin-listed",
                None,
                format!(
                    "{shown} does not list {PLUGIN} in plugins.enabled ({}): Hermes loads \
                     only the plugins listed there",
                    if enabled.is_empty() {
                        "none listed".to_owned()
                    } else {
                        format!("it lists {}", enabled.join(", "))
                    }
                ),
                add,
            ),
        },
    }
    match probe {
        None => report.skipped(
            "plugin-imports",
            None,
            "this command does not run from the wheel (the xmpp-session-bridge that pip \
             installs with the plugin into Hermes's venv tries the import)",
        ),
        Some(probe) => match probe() {
            Ok(imported) => report.ok("plugin-imports", None, imported),
            Err(why) => report.failed("plugin-imports", None, why, INSTALL),
        },
    }
}

/// `plugins.enabled` of Hermes's `config.yaml`: a list of names, or one
/// name; empty when the file has no such key.
fn enabled_plugins(text: &str) -> Result<Vec<String>, String> {
    plugin_names(text, "enabled")
}

/// `plugins.KEY` of Hermes's `config.yaml` (`enabled`, `disabled`).
fn plugin_names(text: &str, key: &str) -> Result<Vec<String>, String> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| e.to_string())?;
    let Some(doc) = docs.first() else {
        return Ok(Vec::new());
    };
    Ok(match &doc["plugins"][key] {
        Yaml::Array(names) => names
            .iter()
            .filter_map(|n| n.as_str().map(str::to_owned))
            .collect(),
        Yaml::String(name) => vec![name.clone()],
        _ => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::report::Outcome;

    #[test]
    fn plugins_enabled_is_read_in_either_yaml_form() {
        let flow = "model:\n  default: m\nplugins:\n  enabled: [other, session-switch]\n";
        assert_eq!(enabled_plugins(flow).unwrap(), ["other", "session-switch"]);
        let block = "plugins:\n  enabled:\n    - session-switch\n";
        assert_eq!(enabled_plugins(block).unwrap(), ["session-switch"]);
        assert!(
            enabled_plugins("model:\n  default: m\n")
                .unwrap()
                .is_empty()
        );
        assert!(enabled_plugins("").unwrap().is_empty());
        // A name elsewhere (a disabled list, a comment) is not enabled.
        let elsewhere = "plugins:\n  disabled: [session-switch]\n# enabled: [session-switch]\n";
        assert!(enabled_plugins(elsewhere).unwrap().is_empty());
        assert!(enabled_plugins("plugins: [unclosed\n").is_err());
        assert_eq!(
            plugin_names(elsewhere, "disabled").unwrap(),
            ["session-switch"]
        );
    }

    #[test]
    fn a_plugin_listed_and_disabled_is_not_loaded() {
        let home = std::env::temp_dir().join(format!("ss-doctor-disabled-{}", std::process::id()));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            home.join("config.yaml"),
            "plugins:\n  enabled: [session-switch]\n  disabled: [session-switch]\n",
        )
        .unwrap();
        let mut report = Report::default();
        links(&home, None, &mut report);
        std::fs::remove_dir_all(&home).unwrap();
        let listed = &report.links[0];
        assert_eq!(listed.link, "plugin-listed");
        assert_eq!(listed.outcome, Outcome::Failed);
        assert!(
            listed.detail.contains("plugins.disabled"),
            "{}",
            listed.detail
        );
        assert!(
            listed
                .fix
                .as_deref()
                .unwrap()
                .starts_with("remove session-switch from plugins.disabled"),
            "{:?}",
            listed.fix
        );
    }

    #[test]
    fn the_import_is_tried_only_through_the_callers_probe() {
        let home = std::env::temp_dir().join(format!("ss-doctor-plugin-{}", std::process::id()));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            home.join("config.yaml"),
            "plugins:\n  enabled: [session-switch]\n",
        )
        .unwrap();
        let imports = |probe: Option<PluginProbe>| {
            let mut report = Report::default();
            links(&home, probe, &mut report);
            assert_eq!(report.links[0].link, "plugin-listed");
            assert_eq!(report.links[0].outcome, Outcome::Ok);
            report.links.pop().unwrap()
        };
        let none = imports(None);
        assert_eq!(none.outcome, Outcome::Skipped);
        assert!(
            none.detail
                .starts_with("because this command does not run from the wheel")
        );
        let imported = || Ok("session_switch 0.1.0 from /venv/site-packages".to_owned());
        let ok = imports(Some(&imported));
        assert_eq!(
            (ok.outcome, ok.detail.as_str()),
            (Outcome::Ok, "session_switch 0.1.0 from /venv/site-packages")
        );
        let refused = || Err("ModuleNotFoundError: No module named 'session_switch'".to_owned());
        let failed = imports(Some(&refused));
        assert_eq!(failed.outcome, Outcome::Failed);
        assert!(
            failed.detail.contains("No module named"),
            "{}",
            failed.detail
        );
        assert!(failed.fix.unwrap().contains("pip install session_switch-"));
        std::fs::remove_dir_all(home).unwrap();
    }

    #[test]
    fn a_missing_or_unreadable_config_yaml_says_so() {
        let home = std::env::temp_dir().join(format!("ss-doctor-yaml-{}", std::process::id()));
        std::fs::create_dir_all(&home).unwrap();
        let listed = |home: &Path| {
            let mut report = Report::default();
            links(home, None, &mut report);
            report.links.remove(0)
        };
        let missing = listed(&home);
        assert_eq!(missing.outcome, Outcome::Failed);
        assert!(
            missing.detail.starts_with("cannot read "),
            "{}",
            missing.detail
        );
        assert!(missing.fix.unwrap().contains("HERMES_HOME"));
        std::fs::write(home.join("config.yaml"), "plugins: [unclosed\n").unwrap();
        let broken = listed(&home);
        assert_eq!(broken.outcome, Outcome::Failed);
        assert!(
            broken.detail.contains("is not YAML Hermes can read"),
            "{}",
            broken.detail
        );
        std::fs::remove_dir_all(home).unwrap();
    }
}
