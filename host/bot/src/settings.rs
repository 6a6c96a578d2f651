//! What one agent's bot runs with, gathered once at start from the
//! config (`[xmpp] room`, the agent, `[bot]`), the password source and
//! Hermes's own `.env`. Every error says which key or file would fix it.

use session_switch::Failure;
use session_switch::config::{BotTls, Config, PasswordSource};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Hermes's default `API_SERVER_PORT`.
pub const HERMES_DEFAULT_PORT: u16 = 8642;

/// One agent's bot, ready to connect.
#[derive(Clone)]
pub struct BotSettings {
    /// The agent's name in the config.
    pub agent: String,
    /// Its bare JID (the account the bot logs in as).
    pub jid: String,
    pub password: String,
    /// Its room nick.
    pub nick: String,
    /// The room's bare JID.
    pub room: String,
    /// The agent's XMPP sessions (the first is its default one).
    pub sessions: Vec<String>,
    /// `host:port` of ejabberd's client port, or `None` for DNS.
    pub server: Option<String>,
    pub tls: BotTls,
    /// Extra CA certificates for the server's certificate (`[bot] ca_file`).
    pub ca_file: Option<PathBuf>,
    /// The Hermes API server's base URL.
    pub api_url: String,
    /// Its bearer key, if any.
    pub api_key: Option<String>,
    /// Where the key and URL came from, for the start-up log line.
    pub api_source: String,
    /// One turn's time limit.
    pub turn_timeout: Duration,
    /// The longest body the room takes (`[xmpp] max_body_chars`).
    pub max_body_chars: usize,
    /// At most how many messages from while the bot was away it catches up.
    pub catch_up_lines: u32,
}

impl std::fmt::Debug for BotSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password or the key.
        f.debug_struct("BotSettings")
            .field("agent", &self.agent)
            .field("jid", &self.jid)
            .field("room", &self.room)
            .field("api_url", &self.api_url)
            .finish_non_exhaustive()
    }
}

impl BotSettings {
    /// The settings of `agent`'s bot; `hermes_home` is where Hermes's
    /// `.env` is looked for when `[bot.agents.NAME] hermes_env` is unset.
    ///
    /// Errors (kind `bad-input`): an unknown agent, no password source, a
    /// password file or variable that cannot be read or is empty, a
    /// `hermes_env` file named in the config that cannot be read, an
    /// `api_key_env` that is unset.
    pub fn for_agent(config: &Config, agent: &str, hermes_home: &Path) -> Result<Self, Failure> {
        let Some(a) = config.agent(agent) else {
            return Err(Failure::bad_input(format!(
                "unknown agent {agent:?} (configured: {})",
                config.agent_names()
            )));
        };
        let own = config.bot.agents.get(agent).cloned().unwrap_or_default();
        let section = format!("[bot.agents.{agent}]");
        let password = match &own.password {
            Some(source) => read_password(source, &section)?,
            None => {
                return Err(Failure::bad_input(format!(
                    "no XMPP password for {agent}: set password_file, password_env or password \
                     in {section} of the config"
                )));
            }
        };
        let (env_path, named) = match &own.hermes_env {
            Some(path) => (path.clone(), true),
            None => (hermes_home.join(".env"), false),
        };
        // A missing `.env` is no error (a home may configure nothing), but
        // the start line says so: the defaults below then come from nowhere.
        let mut no_env = String::new();
        let env = match std::fs::read_to_string(&env_path) {
            Ok(text) => parse_env(&text),
            Err(e) if named || e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Failure::bad_input(format!(
                    "cannot read Hermes's .env {} ({section} hermes_env): {e}",
                    env_path.display()
                )));
            }
            Err(_) => {
                no_env = format!("; there is no {}", env_path.display());
                HashMap::new()
            }
        };
        let (api_url, url_from) = match &own.api_url {
            Some(url) => (url.clone(), format!("{section} api_url")),
            None => {
                let host = match env.get("API_SERVER_HOST").map(String::as_str) {
                    // A server listening on every address is reached on loopback.
                    None | Some("" | "0.0.0.0" | "::") => "127.0.0.1".to_owned(),
                    Some(h) if h.contains(':') => format!("[{h}]"),
                    Some(h) => h.to_owned(),
                };
                match env
                    .get("API_SERVER_PORT")
                    .and_then(|p| p.parse::<u16>().ok())
                {
                    Some(port) => (
                        format!("http://{host}:{port}"),
                        format!("API_SERVER_PORT of {}", env_path.display()),
                    ),
                    None => match a.gateway_port {
                        Some(port) => (
                            format!("http://{host}:{port}"),
                            format!("gateway_port of agent {agent}"),
                        ),
                        None => (
                            format!("http://{host}:{HERMES_DEFAULT_PORT}"),
                            "Hermes's default port".to_owned(),
                        ),
                    },
                }
            }
        };
        let (api_key, key_from) = match &own.api_key_env {
            Some(var) => match std::env::var(var) {
                Ok(key) if !key.is_empty() => (Some(key), format!("${var}")),
                _ => {
                    return Err(Failure::bad_input(format!(
                        "{section} api_key_env names {var}, which is unset or empty"
                    )));
                }
            },
            None => match env.get("API_SERVER_KEY") {
                Some(key) if !key.is_empty() => (
                    Some(key.clone()),
                    format!("API_SERVER_KEY of {}", env_path.display()),
                ),
                _ => (None, "no key".to_owned()),
            },
        };
        Ok(Self {
            agent: a.name.clone(),
            jid: a.jid.clone(),
            password,
            nick: a.nick.clone(),
            room: config.xmpp.room.clone(),
            sessions: a.sessions.clone(),
            server: config.bot.server.clone(),
            tls: config.bot.tls,
            ca_file: config.bot.ca_file.clone(),
            api_url,
            api_key,
            api_source: format!("{url_from}, {key_from}{no_env}"),
            turn_timeout: Duration::from_secs(u64::from(config.bot.turn_timeout_seconds)),
            max_body_chars: config.xmpp.max_body_chars as usize,
            catch_up_lines: config.bot.catch_up_lines,
        })
    }
}

fn read_password(source: &PasswordSource, section: &str) -> Result<String, Failure> {
    let password = match source {
        PasswordSource::Inline(p) => p.clone(),
        PasswordSource::Env(var) => std::env::var(var).map_err(|_| {
            Failure::bad_input(format!(
                "{section} password_env names {var}, which is unset"
            ))
        })?,
        PasswordSource::File(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Failure::bad_input(format!(
                    "cannot read the password file {} ({section} password_file): {e}",
                    path.display()
                ))
            })?;
            text.lines().next().unwrap_or_default().to_owned()
        }
    };
    if password.is_empty() {
        return Err(Failure::bad_input(format!(
            "the XMPP password from {section} is empty"
        )));
    }
    Ok(password)
}

/// `KEY=VALUE` lines as Hermes's `.env` holds them, read by `dotenvy` (the
/// dotenv format python-dotenv, which Hermes uses, reads: `export KEY=…`,
/// `#` comments, single or double quotes). A line it cannot read is left
/// out, as python-dotenv skips it.
pub fn parse_env(text: &str) -> HashMap<String, String> {
    dotenvy::from_read_iter(text.as_bytes())
        .filter_map(Result::ok)
        .collect()
}

/// `$HERMES_HOME` as Hermes reads it (default `~/.hermes`).
pub fn hermes_home() -> PathBuf {
    session_switch::hermes_home()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hermes_env_lines_are_read_as_dotenv_does() {
        let env = parse_env(
            "# Hermes\nAPI_SERVER_ENABLED=true\nexport API_SERVER_KEY=\"sk-a b\"\n\
             API_SERVER_PORT=8650 # ours\nAPI_SERVER_HOST='127.0.0.1'\nbroken line\n",
        );
        assert_eq!(env["API_SERVER_KEY"], "sk-a b");
        assert_eq!(env["API_SERVER_PORT"], "8650");
        assert_eq!(env["API_SERVER_HOST"], "127.0.0.1");
        assert_eq!(env.len(), 4);
    }

    fn config(extra: &str) -> Config {
        Config::parse(
            &format!(
                "[xmpp]\nroom = \"room@conference.example.org\"\n\n[[agents]]\nname = \"mohe\"\n\
                 jid = \"mohe@example.org\"\nsessions = [\"xmpp-mohe\"]\ngateway_port = 8700\n\
                 {extra}"
            ),
            "t",
        )
        .unwrap()
    }

    #[test]
    fn the_api_server_comes_from_hermes_env_else_the_gateway_port() {
        let home = std::env::temp_dir().join(format!("ss-bot-settings-{}", std::process::id()));
        std::fs::create_dir_all(&home).unwrap();
        let c = config("\n[bot.agents.mohe]\npassword = \"pw\"\n");
        let s = BotSettings::for_agent(&c, "mohe", &home).unwrap();
        assert_eq!(s.api_url, "http://127.0.0.1:8700");
        assert_eq!(s.api_key, None);
        let missing = format!("there is no {}", home.join(".env").display());
        assert!(s.api_source.ends_with(&missing), "{}", s.api_source);
        std::fs::write(
            home.join(".env"),
            "API_SERVER_KEY=sk-0123456789abcdef\nAPI_SERVER_PORT=8650\nAPI_SERVER_HOST=0.0.0.0\n",
        )
        .unwrap();
        let s = BotSettings::for_agent(&c, "mohe", &home).unwrap();
        assert_eq!(s.api_url, "http://127.0.0.1:8650");
        assert_eq!(s.api_key.as_deref(), Some("sk-0123456789abcdef"));
        assert!(!s.api_source.contains("there is no"), "{}", s.api_source);
        assert_eq!(s.password, "pw");
        assert!(!format!("{s:?}").contains("pw\""), "{s:?}");
        std::fs::remove_dir_all(home).unwrap();
    }

    #[test]
    fn no_password_says_which_keys_would_do() {
        let e = BotSettings::for_agent(&config(""), "mohe", Path::new("/nonexistent")).unwrap_err();
        assert!(e.message.contains("password_file"), "{}", e.message);
        let e = BotSettings::for_agent(&config(""), "zhiwei", Path::new("/x")).unwrap_err();
        assert!(e.message.contains("unknown agent"), "{}", e.message);
    }
}
