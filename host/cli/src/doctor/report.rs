//! The doctor's report: each link checked, in order, with its outcome,
//! printed as lines for a person or as one JSON document.

use session_switch::runtime::contract::answers::{self, Doctor, DoctorLink};

/// How one link came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Failed,
    /// Not checked: a link it needs failed.
    Skipped,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed => "failed",
            Outcome::Skipped => "skipped",
        }
    }
}

/// One link of the chain.
#[derive(Clone, Debug)]
pub struct Link {
    /// Its name in JSON (`state-db`, `login`, …).
    pub link: &'static str,
    /// The agent it was checked for; `None` for a link all agents share.
    pub agent: Option<String>,
    pub outcome: Outcome,
    /// What was found, what is wrong, or why it was skipped.
    pub detail: String,
    /// For a failed link, what fixes it.
    pub fix: Option<String>,
}

/// The links in the order they were checked.
#[derive(Default)]
pub struct Report {
    pub links: Vec<Link>,
}

impl Report {
    pub fn ok(&mut self, link: &'static str, agent: Option<&str>, detail: impl Into<String>) {
        self.push(link, agent, Outcome::Ok, detail.into(), None);
    }

    pub fn failed(
        &mut self,
        link: &'static str,
        agent: Option<&str>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) {
        self.push(
            link,
            agent,
            Outcome::Failed,
            detail.into(),
            Some(fix.into()),
        );
    }

    /// `because` names the link that failed (`because ejabberd was not
    /// reached`).
    pub fn skipped(&mut self, link: &'static str, agent: Option<&str>, because: &str) {
        self.push(
            link,
            agent,
            Outcome::Skipped,
            format!("because {because}"),
            None,
        );
    }

    fn push(
        &mut self,
        link: &'static str,
        agent: Option<&str>,
        outcome: Outcome,
        detail: String,
        fix: Option<String>,
    ) {
        self.links.push(Link {
            link,
            agent: agent.map(str::to_owned),
            outcome,
            detail,
            fix,
        });
    }

    /// The failed links, as `login (mohe)`.
    pub fn failures(&self) -> Vec<String> {
        self.links
            .iter()
            .filter(|l| l.outcome == Outcome::Failed)
            .map(label)
            .collect()
    }

    /// One JSON document (`--json`), or a line per link with the fix of a
    /// failed one under it, and a last line that sums them up.
    pub fn print(&self, json: bool) {
        if json {
            let doctor = Doctor {
                ok: self.failures().is_empty(),
                links: self
                    .links
                    .iter()
                    .map(|l| DoctorLink {
                        link: l.link,
                        agent: l.agent.as_deref(),
                        status: l.outcome.as_str(),
                        detail: &l.detail,
                        fix: l.fix.as_deref(),
                    })
                    .collect(),
            };
            println!(
                "{}",
                serde_json::to_string_pretty(&answers::to_value(&doctor))
                    .expect("a JSON value prints")
            );
            return;
        }
        for l in &self.links {
            let status = match l.outcome {
                Outcome::Ok => "ok",
                Outcome::Failed => "FAILED",
                Outcome::Skipped => "skipped",
            };
            println!("{status:<8} {}: {}", label(l), l.detail);
            if let Some(fix) = &l.fix {
                println!("{:<8}   fix: {fix}", "");
            }
        }
        let count = |o: Outcome| self.links.iter().filter(|l| l.outcome == o).count();
        let (failed, skipped) = (count(Outcome::Failed), count(Outcome::Skipped));
        if failed == 0 {
            println!(
                "no link failed ({} ok, {skipped} skipped)",
                count(Outcome::Ok)
            );
        } else {
            println!("{failed} failed, {skipped} skipped: fix the first failed one first");
        }
    }
}

/// `login (mohe)`, or `room` for a link all agents share.
fn label(l: &Link) -> String {
    match &l.agent {
        Some(agent) => format!("{} ({agent})", l.link),
        None => l.link.to_owned(),
    }
}
