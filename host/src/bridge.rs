//! The host imports over the real parts: Hermes's `state.db` ([`HermesStore`])
//! and an ejabberd [`Transport`], joined in the one place that needs both,
//! the atomic send of DESIGN §8. Also turns the config into the policy's
//! settings and transport. The CLI and a Rust gateway use this backend.

use crate::config::{Config, TransportKind};
use crate::runtime::{Agent, Backend, SendPlan, Sent, Settings};
use crate::store::{HermesStore, HistoryRow, SendWrite};
use crate::transport::{EjabberdCtl, HttpApi, Transport};
use crate::{Failure, transport};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// [`Backend`] over a Hermes database and, for sends, an ejabberd transport.
pub struct HermesBackend {
    store: HermesStore,
    /// `None` for callers that never send (resolve, context, active, clear).
    transport: Option<Box<dyn Transport>>,
    /// Bare JID of the room sends go to.
    room: String,
    /// A read snapshot of ours is open ([`Backend::begin_read`]).
    reading: bool,
}

impl HermesBackend {
    /// A backend that reads and writes `store` and posts through `transport`
    /// (`None`: a send fails with kind `transport`).
    pub fn new(
        store: HermesStore,
        transport: Option<Box<dyn Transport>>,
        room: impl Into<String>,
    ) -> Self {
        Self {
            store,
            transport,
            room: room.into(),
            reading: false,
        }
    }

    pub fn store(&self) -> &HermesStore {
        &self.store
    }
}

impl Backend for HermesBackend {
    fn meta_get(&mut self, key: &str) -> Result<Option<String>, Failure> {
        self.store.meta_get(key)
    }

    fn meta_delete(&mut self, key: &str) -> Result<bool, Failure> {
        self.store.meta_delete(key)
    }

    fn session_exists(&mut self, id: &str) -> Result<bool, Failure> {
        self.store.session_exists(id)
    }

    fn history(
        &mut self,
        session_id: &str,
        agent: &str,
        limit: Option<u32>,
    ) -> Result<Vec<HistoryRow>, Failure> {
        self.store.history(session_id, agent, limit)
    }

    /// One `BEGIN` … `COMMIT` read transaction around the call
    /// ([`HermesStore::begin_read`]); if it cannot be opened, each read runs
    /// on its own (logged), as without a snapshot.
    fn begin_read(&mut self) {
        match self.store.begin_read() {
            Ok(opened) => self.reading = opened,
            Err(failure) => tracing::warn!(
                target: "session_switch::bridge",
                "reading without a snapshot: {}",
                failure.message
            ),
        }
    }

    fn end_read(&mut self) {
        if std::mem::take(&mut self.reading)
            && let Err(failure) = self.store.end_read()
        {
            tracing::warn!(target: "session_switch::bridge", "{}", failure.message);
        }
    }

    fn now(&mut self) -> f64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    }

    /// DESIGN §8 "Send": ask ejabberd whether the agent's JID may post
    /// (before the database is locked: that call can take ~0.5 s), then
    /// write row + provenance + record inside `BEGIN EXCLUSIVE`, post, and
    /// commit only if the post succeeded.
    fn send(&mut self, plan: &SendPlan) -> Result<Sent, Failure> {
        let transport = self.transport.as_deref().ok_or_else(|| {
            Failure::transport("no ejabberd transport is configured for this caller")
        })?;
        transport.check_sender(&plan.from_jid, &self.room)?;
        let write = SendWrite {
            agent: &plan.agent,
            history_session_id: &plan.history_session_id,
            history_content: &plan.history_content,
            cli_session_id: &plan.cli_session_id,
            record_key: &plan.record_key,
            record_value: &plan.record_value,
            timestamp: plan.timestamp,
        };
        let room = &self.room;
        let (written, ()) = self.store.send_write(&write, || {
            transport.post(&plan.from_jid, room, &plan.room_body)
        })?;
        Ok(Sent {
            message_id: written.message_id,
            room: self.room.clone(),
            record_replaced: written.record_replaced,
        })
    }
}

/// The policy's settings from the config (DESIGN §8: settings reach the
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
            })
            .collect(),
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
