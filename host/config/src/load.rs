//! Reading a config: its default place, the file (relative paths in it
//! taken from its folder), the text parsed and validated.

use session_switch_contract::failure::Failure;
use std::path::{Path, PathBuf};

use super::raw::RawConfig;
use super::source::Source;
use super::types::{Config, PasswordSource};
use super::validate;

impl Config {
    /// `$HERMES_HOME/session-switch.toml`, `HERMES_HOME` defaulting to `~/.hermes`.
    pub fn default_path() -> PathBuf {
        session_switch_contract::home::hermes_home().join("session-switch.toml")
    }

    /// Read and validate the config at `path`. Errors (kind `bad-input`) name
    /// the file and, for content errors, the line.
    pub fn load(path: &Path) -> Result<Config, Failure> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                " (copy examples/session-switch.toml there, or name another file: \
                 `--config PATH` on the CLI, `Bridge(home, config=PATH)` in Python)"
            } else {
                ""
            };
            Failure::bad_input(format!("cannot read config {}: {e}{hint}", path.display()))
        })?;
        let mut config = Self::parse(&text, &path.display().to_string())?;
        if let Some(policy) = &config.policy_path
            && policy.is_relative()
        {
            let folder = path.parent().unwrap_or(Path::new(""));
            config.policy_path = Some(folder.join(policy));
        }
        let folder = path.parent().unwrap_or(Path::new(""));
        if let Some(ca) = &mut config.bot.ca_file
            && ca.is_relative()
        {
            *ca = folder.join(&*ca);
        }
        for agent in config.bot.agents.values_mut() {
            if let Some(PasswordSource::File(file)) = &mut agent.password
                && file.is_relative()
            {
                *file = folder.join(&*file);
            }
            if let Some(env) = &mut agent.hermes_env
                && env.is_relative()
            {
                *env = folder.join(&*env);
            }
        }
        config.path = Some(path.to_path_buf());
        Ok(config)
    }

    /// Parse and validate config text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Config, Failure> {
        let src = Source { text, origin };
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let msg = e.message().trim_end().to_string();
            match e.span() {
                Some(span) => src.at(span, msg),
                None => Failure::bad_input(format!("config {origin}: {msg}")),
            }
        })?;
        validate::validate(raw, &src)
    }
}
