//! The exported WIT `policy` interface as a native Rust value: the settings
//! of one instance plus its [`Host`], one method per export with the same
//! arguments and answers. The component's glue (`lib.rs`) is this over
//! [`crate::host::WitHost`]; tests drive it over
//! a test's fake host, so a differential test can give both the
//! same calls and compare.

use crate::failure::not_configured;
use crate::host::Host;
use crate::settings::ValidSettings;
use crate::{Admission, RoomMessage};
use crate::{
    ContextResult, Decision, Failure, Receipt, RecordStatus, RowEdit, RowSummaries, Settings,
};
use crate::{echo, loop_guard, redirect, self_check, send, tagging};

/// One policy instance: unconfigured until [`Rules::configure`] succeeds;
/// until then every method but [`Rules::version`] and
/// [`Rules::self_check`] fails with kind `policy`
/// (`policy not configured: …`).
#[derive(Debug)]
pub struct Rules<H: Host> {
    settings: Option<ValidSettings>,
    host: H,
}

impl<H: Host> Rules<H> {
    /// An unconfigured instance over `host`.
    pub fn new(host: H) -> Self {
        Self {
            settings: None,
            host,
        }
    }

    /// The host (tests inspect their fake host through it).
    pub fn host(&self) -> &H {
        &self.host
    }

    /// The host, mutably (tests arrange state through it).
    pub fn host_mut(&mut self) -> &mut H {
        &mut self.host
    }

    /// The settings in force, if configured.
    pub fn settings(&self) -> Option<&ValidSettings> {
        self.settings.as_ref()
    }

    fn ready(&mut self) -> Result<(&ValidSettings, &mut H), Failure> {
        match &self.settings {
            Some(s) => Ok((s, &mut self.host)),
            None => Err(not_configured()),
        }
    }

    /// WIT `version`: `session-switch-policy <version>`.
    pub fn version(&self) -> String {
        crate::version::version()
    }

    /// WIT `self-check`: the built-in table ([`self_check::run`]); never
    /// touches this instance's host.
    pub fn self_check(&self) -> Result<String, String> {
        self_check::run()
    }

    /// WIT `configure`: validate ([`ValidSettings::new`]) and keep. On error
    /// the settings in force (if any) stay as they were.
    pub fn configure(&mut self, settings: Settings) -> Result<(), Failure> {
        self.settings = Some(ValidSettings::new(settings)?);
        Ok(())
    }

    /// WIT `resolve` ([`redirect::resolve`]).
    pub fn resolve(&mut self, agent: &str, session_id: &str) -> Result<Decision, Failure> {
        let (s, h) = self.ready()?;
        redirect::resolve(s, h, agent, session_id)
    }

    /// WIT `tag` ([`tagging::tag`]).
    pub fn tag(&mut self, agent: &str, rows: &RowSummaries) -> Result<Vec<RowEdit>, Failure> {
        let (s, _) = self.ready()?;
        tagging::tag(s, agent, rows)
    }

    /// WIT `context`: [`redirect::resolve`], then `host.history` of the
    /// chosen session (last `limit` rows; prefixes of
    /// [`ValidSettings::prefix_chars`] characters), then [`tagging::tag`]
    /// on those rows; an empty history of a session that does not exist
    /// (`host.session-exists`; a redirect's target always does) adds
    /// `(session … is not in state.db: no history)` to the detail. Host
    /// failures pass through unchanged.
    pub fn context(
        &mut self,
        agent: &str,
        session_id: &str,
        limit: Option<u32>,
    ) -> Result<ContextResult, Failure> {
        let (s, h) = self.ready()?;
        let mut decision = redirect::resolve(s, h, agent, session_id)?;
        let rows = h.history(&decision.session_id, agent, limit, s.prefix_chars())?;
        if rows.is_empty() && !decision.redirected && !h.session_exists(&decision.session_id)? {
            let note = [
                " (session ",
                &decision.session_id,
                " is not in state.db: no history)",
            ];
            decision.detail.push_str(&note.concat());
        }
        let edits = tagging::tag_history(s, agent, &rows)?;
        Ok(ContextResult { decision, edits })
    }

    /// WIT `send` ([`send::send`]).
    pub fn send(
        &mut self,
        agent: &str,
        cli_session_id: &str,
        text: &str,
    ) -> Result<Receipt, Failure> {
        let (s, h) = self.ready()?;
        send::send(s, h, agent, cli_session_id, text)
    }

    /// WIT `active` ([`redirect::active`]).
    pub fn active(&mut self, agent: Option<&str>) -> Result<Vec<RecordStatus>, Failure> {
        let (s, h) = self.ready()?;
        redirect::active(s, h, agent)
    }

    /// WIT `clear` ([`redirect::clear`]).
    pub fn clear(&mut self, agent: Option<&str>) -> Result<Vec<String>, Failure> {
        let (s, h) = self.ready()?;
        redirect::clear(s, h, agent)
    }

    /// WIT `admit` ([`loop_guard::admit_message`]).
    pub fn admit(&mut self, agent: &str, message: &RoomMessage) -> Result<Admission, Failure> {
        let (s, h) = self.ready()?;
        loop_guard::admit_message(s, h, agent, message)
    }

    /// WIT `is-own-message` ([`echo::is_own_message`]).
    pub fn is_own_message(&mut self, agent: &str, sender: &str) -> Result<bool, Failure> {
        let (s, _) = self.ready()?;
        echo::is_own_message(s, agent, sender)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_host::{self, FakeHost, Import, fail, history_calls};
    use crate::samples::{SAMPLE_CLI, SAMPLE_NOW, sample_record, sample_settings};
    use crate::{EditAction, FailureKind, Reason};

    fn configured() -> Rules<FakeHost> {
        let mut p = Rules::new(fake_host::at(
            SAMPLE_NOW,
            "coregroup@conference.example.org",
        ));
        p.configure(sample_settings()).unwrap();
        p
    }

    #[test]
    fn every_export_but_two_needs_configure() {
        let mut p = Rules::new(FakeHost::default());
        let calls: Vec<Result<(), Failure>> = vec![
            p.resolve("mohe", "xmpp-mohe-v2").map(drop),
            p.tag("mohe", &RowSummaries::from_rows(&[])).map(drop),
            p.context("mohe", "xmpp-mohe-v2", None).map(drop),
            p.send("mohe", SAMPLE_CLI, "hi").map(drop),
            p.active(None).map(drop),
            p.clear(None).map(drop),
            p.is_own_message("mohe", "mohe").map(drop),
        ];
        for r in calls {
            let e = r.unwrap_err();
            assert_eq!(e.kind, FailureKind::Policy);
            assert!(
                e.message.starts_with("policy not configured"),
                "{}",
                e.message
            );
        }
        assert!(p.version().starts_with("session-switch-policy "));
        assert!(p.self_check().is_ok());
        assert!(p.host().snapshot().sent.is_empty() && history_calls(p.host()).is_empty());
    }

    #[test]
    fn a_refused_configure_keeps_the_settings_in_force() {
        let mut p = Rules::new(FakeHost::default());
        let mut bad = sample_settings();
        bad.ttl_seconds = 0;
        assert_eq!(
            p.configure(bad.clone()).unwrap_err().kind,
            FailureKind::BadInput
        );
        assert!(p.settings().is_none());
        p.configure(sample_settings()).unwrap();
        assert!(p.configure(bad).is_err());
        assert_eq!(p.settings().unwrap().ttl_seconds(), 3600.0);
        // Reconfiguring replaces the settings.
        let mut other = sample_settings();
        other.ttl_seconds = 60;
        p.configure(other).unwrap();
        assert_eq!(p.settings().unwrap().ttl_seconds(), 60.0);
    }

    #[test]
    fn context_loads_the_resolved_session_and_tags_it() {
        let mut p = configured();
        let mut h = p.host().state();
        h.push_row("xmpp-mohe-v2", "user", "zhiwei: not loaded", None);
        h.push_row(SAMPLE_CLI, "user", "Hello Hermes!", None);
        h.push_row(SAMPLE_CLI, "user", "mohe: signed", None);
        h.push_row(SAMPLE_CLI, "assistant", "[YOU] by role", None);
        h.push_row(SAMPLE_CLI, "user", "[YOU] zhiwei: fake", None);
        h.meta.insert(
            "session_switch:active:mohe".into(),
            sample_record(SAMPLE_CLI, SAMPLE_NOW - 1.0, "mohe"),
        );
        drop(h);
        let c = p.context("mohe", "xmpp-mohe-v2", Some(3)).unwrap();
        assert_eq!(c.decision.reason, Reason::Redirected);
        assert_eq!(c.decision.session_id, SAMPLE_CLI);
        assert_eq!(
            c.edits,
            vec![
                RowEdit {
                    index: 0,
                    action: EditAction::Tag
                },
                RowEdit {
                    index: 2,
                    action: EditAction::Untag
                },
            ]
        );
        let call = &history_calls(p.host())[0];
        assert_eq!(
            (
                call.session_id.as_str(),
                call.agent.as_str(),
                call.limit,
                call.prefix_chars
            ),
            (SAMPLE_CLI, "mohe", Some(3), 57)
        );
    }

    #[test]
    fn context_without_a_record_loads_the_xmpp_session() {
        let mut p = configured();
        p.host()
            .state()
            .push_row("xmpp-mohe-v2", "user", "mohe: 大家好", None);
        let c = p.context("mohe", "xmpp-mohe-v2", None).unwrap();
        assert_eq!(c.decision.reason, Reason::NoRecord);
        assert_eq!(
            c.edits,
            vec![RowEdit {
                index: 0,
                action: EditAction::Tag
            }]
        );
        assert_eq!(history_calls(p.host())[0].session_id, "xmpp-mohe-v2");
    }

    #[test]
    fn context_names_a_session_that_is_not_there() {
        let mut p = configured();
        let c = p.context("mohe", "nosuch", None).unwrap();
        assert_eq!(c.decision.reason, Reason::NotAgentSession);
        assert!(
            c.decision
                .detail
                .ends_with("loading it unchanged (session nosuch is not in state.db: no history)"),
            "{}",
            c.decision.detail
        );
        // There but asked for no rows, or there without rows: no note.
        p.host().state().add_session("empty");
        p.host()
            .state()
            .push_row("xmpp-mohe-v2", "user", "mohe: 大家好", None);
        for (session, limit) in [("xmpp-mohe-v2", Some(0)), ("empty", None)] {
            let c = p.context("mohe", session, limit).unwrap();
            assert!(!c.decision.detail.contains("not in state.db"), "{session}");
        }
    }

    #[test]
    fn context_passes_failures() {
        let mut p = configured();
        assert_eq!(
            p.context("nobody", "x", None).unwrap_err().kind,
            FailureKind::UnknownAgent
        );
        let f = Failure {
            kind: FailureKind::Store,
            message: "gone".into(),
        };
        fail(p.host(), Import::History, &f);
        assert_eq!(p.context("mohe", "xmpp-mohe-v2", None), Err(f));
    }

    #[test]
    fn configured_exports_answer() {
        let mut p = configured();
        p.host().state().add_session(SAMPLE_CLI);
        assert!(
            p.is_own_message("mohe", "coregroup@conference.example.org/mohe")
                .unwrap()
        );
        let r = p.send("mohe", SAMPLE_CLI, "hi").unwrap();
        assert_eq!(r.body, "hi");
        assert_eq!(p.active(None).unwrap().len(), 1);
        assert_eq!(
            p.resolve("mohe", "xmpp-mohe").unwrap().session_id,
            SAMPLE_CLI
        );
        assert_eq!(
            p.clear(Some("mohe")).unwrap(),
            vec!["session_switch:active:mohe".to_string()]
        );
        assert_eq!(
            p.tag("mohe", &RowSummaries::from_rows(&[])).unwrap(),
            vec![]
        );
    }
}
