//! The config turned into what the other parts take: the policy's
//! [`Settings`] (with the compression continuations the store finds) and
//! the ejabberd [`Transport`]. Each conversion is written here once; the
//! CLI, the Python binding and the tests use these.

use session_switch_config::{self as config, Config, MeetingOverridesConfig, TransportKind};
use session_switch_contract::ids::api_session_id_problem;
use session_switch_runtime::{
    Agent, AllowBots, Failure, LoopGuard, Meeting, MeetingOverrides, Settings,
};
use session_switch_store::HermesStore;
use session_switch_transport::{self as transport, EjabberdCtl, HttpApi, Transport};
use std::time::Duration;

/// The policy's settings from the config (docs/src/design/contracts.md: settings reach the
/// guest as data, never compiled in).
pub fn settings(config: &Config) -> Settings {
    Settings {
        room: config.xmpp.room.clone(),
        ttl_seconds: config.redirect.ttl_seconds,
        future_skew_seconds: config.redirect.future_skew_seconds,
        max_body_chars: config.xmpp.max_body_chars,
        legacy_agent: config.redirect.legacy_agent.clone(),
        agents: config
            .agents
            .iter()
            .map(|a| Agent {
                name: a.name.clone(),
                jid: a.jid.clone(),
                nick: a.nick.clone(),
                sessions: a.sessions.clone(),
                aliases: a.aliases.clone(),
                mention: a.mention.clone(),
                meeting: config
                    .bot
                    .agents
                    .get(&a.name)
                    .map_or_else(MeetingOverrides::none, |b| overrides(&b.meeting)),
            })
            .collect(),
        loop_guard: LoopGuard {
            max_hops: config.loop_guard.max_hops,
            window_messages: config.loop_guard.window_messages,
            window_seconds: config.loop_guard.window_seconds,
            duplicate_seconds: config.loop_guard.duplicate_seconds,
        },
        meeting: {
            let m = &config.bot.meeting;
            Meeting {
                require_mention: m.require_mention,
                free_response_rooms: m.free_response_rooms.clone(),
                mention_patterns: m.mention_patterns.clone(),
                allow_bots: allow_bots(m.allow_bots),
                stop_words: m.stop_words.clone(),
            }
        },
    }
}

fn overrides(own: &MeetingOverridesConfig) -> MeetingOverrides {
    MeetingOverrides {
        require_mention: own.require_mention,
        free_response_rooms: own.free_response_rooms.clone(),
        mention_patterns: own.mention_patterns.clone(),
        allow_bots: own.allow_bots.map(allow_bots),
    }
}

fn allow_bots(value: config::AllowBots) -> AllowBots {
    match value {
        config::AllowBots::None => AllowBots::None,
        config::AllowBots::Mentions => AllowBots::Mentions,
        config::AllowBots::All => AllowBots::All,
    }
}

/// The configured ejabberd transport. The HTTP API's password is read from
/// the variable `api_password_env` names; a missing variable is an error.
pub fn transport(config: &Config) -> Result<Box<dyn Transport>, Failure> {
    let x = &config.xmpp;
    let timeout = x.timeout_seconds.map(|s| Duration::from_secs(s.into()));
    Ok(match x.transport {
        TransportKind::Ejabberdctl => Box::new(EjabberdCtl::new(
            x.ejabberdctl.clone(),
            timeout.unwrap_or(transport::EJABBERDCTL_TIMEOUT),
        )?),
        TransportKind::Http => {
            let url = x
                .api_url
                .as_deref()
                .expect("validated: http transport has api_url");
            let credentials = match (&x.api_user, &x.api_password_env) {
                (Some(user), Some(var)) => {
                    let password = std::env::var(var).map_err(|_| {
                        Failure::bad_input(format!("api_password_env names {var}, which is not set: export it with the API password"))
                    })?;
                    Some((user.clone(), password))
                }
                _ => None,
            };
            Box::new(HttpApi::new(
                url,
                credentials,
                timeout.unwrap_or(transport::HTTP_TIMEOUT),
            )?)
        }
    })
}

/// `settings` with, for each agent, the compression continuations of its
/// configured XMPP sessions appended to its `sessions` (after the
/// configured ones, so the first stays the one sends name): a child of
/// `xmpp-mohe-v2` is mohe's XMPP session as `xmpp-mohe-v2` is (
/// docs/src/design/compression.md). A continuation already configured anywhere, or one the policy's
/// `configure` would refuse (an id Hermes's API server refuses), is left
/// out. Returns the `(configured, continuation)` pairs added.
pub fn add_continuations(
    store: &HermesStore,
    settings: &mut Settings,
) -> Result<Vec<(String, String)>, Failure> {
    let mut taken: Vec<String> = settings
        .agents
        .iter()
        .flat_map(|a| a.sessions.iter().cloned())
        .collect();
    let mut added = Vec::new();
    for agent in &mut settings.agents {
        let configured = agent.sessions.clone();
        for root in &configured {
            for child in store.compression_continuations(root)? {
                if taken.contains(&child)
                    || api_session_id_problem(&child).is_some()
                    || child.chars().any(char::is_control)
                {
                    continue;
                }
                taken.push(child.clone());
                agent.sessions.push(child.clone());
                added.push((root.clone(), child));
            }
        }
    }
    Ok(added)
}
