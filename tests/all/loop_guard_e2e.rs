//! The loop guard end to end: the real ejabberd, a room of its
//! own per test (non-anonymous, so every occupant sees the real JIDs the
//! guard's marker rule needs), and scripted bots that are real XMPP
//! clients (`tests/ejabberd/guard_bot.py`, slixmpp) answering every
//! message the guard lets through, each deciding with `xmpp-session-bridge
//! admit`. People and forgers post through the same script's `say`; CLI
//! sends go through `xmpp-session-bridge send` (the human-origin marker).
//! A real occupant (`muc_probe.py`) counts what the room broadcast.
//!
//! Time is the test clock (`SESSION_SWITCH_TEST_CLOCK_FILE`, read by every
//! `admit` and `send`): fixed unless a test moves it, so the room window
//! (20 agent messages per 300 s) only matters where a test says so.

use serde_json::Value;
use session_switch_tests::own_room::OwnRoom;
use session_switch_tests::room_observer::{RoomMessage, RoomObserver};
use session_switch_tests::sample::SAMPLE_CLI;
use session_switch_tests::xmpp::Ejabberd;
use session_switch_tests::{bin_path, fixture_copy, hermes_world, venv_python, workspace_root};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const AGENTS: [&str; 3] = ["mohe", "zhiwei", "xiaoguo"];
const T0: f64 = 1_800_000_000.0;

/// The test's files: a fixture copy, the config (the three agents and
/// `dalang`, an agent whose bot never runs: a forger can take its nick),
/// and the test clock.
struct World {
    _dir: tempfile::TempDir,
    db: PathBuf,
    config: PathBuf,
    clock: PathBuf,
    room: OwnRoom,
}

impl World {
    fn new() -> Option<World> {
        World::with_config("")
    }

    /// [`World::new`] with `more` (e.g. a `[loop_guard]` section) at the
    /// end of the config.
    fn with_config(more: &str) -> Option<World> {
        let ej = Ejabberd::from_env()?;
        let (dir, db) = fixture_copy("hermes-latest.db")?;
        let room = OwnRoom::new(&ej, "guard", &AGENTS);
        let ej = &room.ej;
        let config = dir.path().join("session-switch.toml");
        let mut text = format!(
            "[xmpp]\nroom = \"{}\"\ntransport = \"http\"\napi_url = \"{}\"\n",
            ej.room, ej.api_url
        );
        for (agent, session) in AGENTS
            .iter()
            .map(|a| (*a, format!("xmpp-{a}")))
            .chain([("dalang", "xmpp-dalang".to_string())])
        {
            let session = if agent == "mohe" {
                "xmpp-mohe-v2".into()
            } else {
                session
            };
            text.push_str(&format!(
                "\n[[agents]]\nname = \"{agent}\"\njid = \"{}\"\nsessions = [\"{session}\"]\n",
                ej.jid(agent)
            ));
        }
        text.push_str(more);
        std::fs::write(&config, text).unwrap();
        let clock = dir.path().join("clock");
        std::fs::write(&clock, format!("{T0}")).unwrap();
        Some(World {
            db,
            config,
            clock,
            room,
            _dir: dir,
        })
    }

    fn ej(&self) -> &Ejabberd {
        &self.room.ej
    }

    fn now(&self) -> f64 {
        std::fs::read_to_string(&self.clock)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// Move the test clock on (replacing the file whole: a reader never
    /// sees it half written).
    fn advance(&self, seconds: f64) {
        let tmp = self.clock.with_extension("tmp");
        std::fs::write(&tmp, format!("{}", self.now() + seconds)).unwrap();
        std::fs::rename(&tmp, &self.clock).unwrap();
    }

    fn script(&self) -> Command {
        let mut cmd = Command::new(venv_python());
        cmd.arg(workspace_root().join("tests/ejabberd/guard_bot.py"))
            .env("SESSION_SWITCH_TEST_CLOCK_FILE", &self.clock);
        cmd
    }

    /// A bot of each agent, with no history and a still clock, each naming
    /// the others when `naming`.
    fn every_agent(&self, counter: &RoomObserver, naming: bool) -> Vec<Bot> {
        AGENTS
            .iter()
            .map(|a| {
                let others: Vec<&str> = AGENTS.iter().copied().filter(|o| o != a).collect();
                self.bot(counter, a, if naming { &others } else { &[] }, 0, 0.0)
            })
            .collect()
    }

    /// Start `agent`'s bot, naming `names` in every reply; `history`: how
    /// many past messages the room replays to it on joining.
    fn bot(
        &self,
        counter: &RoomObserver,
        agent: &str,
        names: &[&str],
        history: u32,
        clock_step: f64,
    ) -> Bot {
        let ej = self.ej();
        let mut cmd = self.script();
        cmd.args([
            "bot",
            "--jid",
            &ej.jid(agent),
            "--password",
            &ej.password(agent),
        ])
        .args(["--room", &ej.room, "--nick", agent, "--agent", agent])
        .args(["--port", &ej.c2s_port.to_string(), "--host", &ej.c2s_host])
        .args(["--history", &history.to_string()])
        .args(["--clock-step", &clock_step.to_string()])
        .arg("--clock-file")
        .arg(&self.clock)
        .arg("--bridge")
        .arg(bin_path())
        .arg("--config")
        .arg(&self.config)
        .arg("--db")
        .arg(&self.db);
        for name in names {
            cmd.args(["--name", name]);
        }
        let mut bot = Bot::spawn(cmd, agent);
        bot.seen_before = counter.messages().len();
        bot
    }

    /// A person (or a forger) posts `body` as `nick` from `user`'s account,
    /// with the marker when `marker`; returns once the room reflected it.
    fn say(&self, user: &str, nick: &str, body: &str, marker: bool) {
        let ej = self.ej();
        let mut cmd = self.script();
        cmd.args([
            "say",
            "--jid",
            &ej.jid(user),
            "--password",
            &ej.password(user),
        ])
        .args(["--room", &ej.room, "--nick", nick, "--body", body])
        .args(["--port", &ej.c2s_port.to_string(), "--timeout", "30"]);
        if marker {
            cmd.arg("--marker");
        }
        let out = cmd.output().unwrap();
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("\"said\""),
            "say {body:?}: {out:?}"
        );
    }

    /// A person typing through `agent`'s CLI: `xmpp-session-bridge send`.
    fn cli_send(&self, agent: &str, body: &str) {
        let out = Command::new(bin_path())
            .arg("--config")
            .arg(&self.config)
            .arg("--db")
            .arg(&self.db)
            .args(["send", body, SAMPLE_CLI, "--agent", agent])
            .env("SESSION_SWITCH_TEST_CLOCK_FILE", &self.clock)
            .output()
            .unwrap();
        assert!(out.status.success(), "send: {out:?}");
    }

    /// `xmpp-session-bridge --json is-own FROM --agent AGENT`.
    fn is_own(&self, from: &str, agent: &str) -> Value {
        let out = Command::new(bin_path())
            .arg("--config")
            .arg(&self.config)
            .arg("--db")
            .arg(&self.db)
            .args(["--json", "is-own", from, "--agent", agent])
            .output()
            .unwrap();
        assert!(out.status.success(), "is-own {from}: {out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn observer(&self) -> RoomObserver {
        RoomObserver::join_as(self.ej(), "admin", "counter")
    }
}

/// One bot process and its decisions; killed on drop.
struct Bot {
    child: Child,
    agent: String,
    /// Live messages the counter had seen when this bot joined.
    seen_before: usize,
    decisions: Arc<Mutex<Vec<Value>>>,
}

impl Bot {
    fn spawn(mut cmd: Command, agent: &str) -> Bot {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let decisions: Arc<Mutex<Vec<Value>>> = Arc::default();
        let ready = Arc::new(Mutex::new(false));
        let (shared, ready2) = (Arc::clone(&decisions), Arc::clone(&ready));
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                match v["event"].as_str() {
                    Some("READY") => *ready2.lock().unwrap() = true,
                    Some("decision") => shared.lock().unwrap().push(v),
                    _ => {}
                }
            }
        });
        let started = Instant::now();
        while !*ready.lock().unwrap() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{agent}'s bot did not join"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Bot {
            child,
            agent: agent.into(),
            seen_before: 0,
            decisions,
        }
    }

    fn decisions(&self) -> Vec<Value> {
        self.decisions.lock().unwrap().clone()
    }

    fn replies(&self) -> usize {
        self.decisions()
            .iter()
            .filter(|d| d["reply"] == true)
            .count()
    }
}

impl Drop for Bot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Wait until the room is silent: every bot decided on every live message
/// the counter saw, and nothing new came for 2 s (at most 120 s). Returns
/// the messages since `from` (an index into the counter's messages).
fn settle(counter: &RoomObserver, bots: &[&Bot], from: usize) -> Vec<RoomMessage> {
    let started = Instant::now();
    let mut last = (usize::MAX, Instant::now());
    loop {
        let seen = counter.messages().len();
        let done = bots.iter().all(|b| {
            b.decisions()
                .iter()
                .filter(|d| d["delayed"] == false)
                .count()
                + b.seen_before
                >= seen
        });
        if seen != last.0 {
            last = (seen, Instant::now());
        } else if done && last.1.elapsed() > Duration::from_secs(2) {
            return counter.messages()[from..].to_vec();
        }
        for b in bots {
            for d in b.decisions() {
                assert_ne!(d["reason"], "error", "{}: {d}", b.agent);
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the room never fell silent: {seen} messages"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn by_agents(messages: &[RoomMessage]) -> usize {
    messages
        .iter()
        .filter(|m| AGENTS.contains(&m.nick.as_str()))
        .count()
}

/// No bot answered an agent message at or past the cap, and the chain
/// ended because the guard refused (not because the bots stopped).
fn stopped_by_the_guard(bots: &[&Bot], max_hops: u64) {
    for b in bots {
        for d in b.decisions() {
            if d["reply"] == true && d["reason"] == "addressed" {
                assert!(d["hops"].as_u64().unwrap() < max_hops, "{}: {d}", b.agent);
            }
        }
    }
    assert!(
        bots.iter()
            .any(|b| b.decisions().iter().any(|d| d["reason"] == "loop-guard")),
        "no loop-guard decision"
    );
}

/// The last decision of `bot` on a live message of someone else.
fn last_live(bot: &Bot) -> Value {
    bot.decisions()
        .into_iter()
        .rev()
        .find(|d| d["delayed"] == false && d["nick"] != bot.agent.as_str())
        .unwrap()
}

/// The main story, with the figure: three bots that answer each
/// other; one CLI send ends in silence after exactly `(n − 1) × max_hops`
/// = 12 agent messages (no bot more than `max_hops` = 6 replies, the last
/// decisions `loop-guard`); a forged marker (a non-agent JID under an
/// agent's nick) does not reopen the chain; a person in the room does,
/// for `(n − 1) × max_hops + 1` = 13; a CLI send through another agent's
/// bridge resets it for every agent, again 12.
#[test]
fn a_cli_send_falls_silent_within_the_bound_and_only_people_restart_it() {
    let _world = hermes_world();
    let Some(w) = World::new() else {
        return;
    };
    let counter = w.observer();
    let bots = w.every_agent(&counter, true);
    let all: Vec<&Bot> = bots.iter().collect();

    // The marker is on the stanza, and the room exposes mohe's real JID.
    w.cli_send("mohe", "zhiwei, xiaoguo: what do you think?");
    let chain = settle(&counter, &all, 0);
    let send = &chain[0];
    assert!(
        send.human_origin && send.id.is_some() && send.id == send.origin_id,
        "{send:?}"
    );
    assert_eq!(send.jid.as_deref(), Some(w.ej().jid("mohe").as_str()));
    let first = by_agents(&chain[1..]);
    eprintln!("agent messages after one CLI send: {first}");
    assert_eq!(first, 12, "{chain:#?}");
    for b in &bots {
        assert!(b.replies() <= 6, "{}: {} replies", b.agent, b.replies());
    }
    stopped_by_the_guard(&all, 6);
    assert_eq!(bots[0].decisions()[0]["reason"], "own-message");
    assert_eq!(
        bots[0].decisions()[0]["hops"],
        0,
        "mohe's chain reset by its person"
    );

    // A forger takes the nick of dalang (an agent whose bot is away) and
    // adds the marker: its JID is not dalang's, so it counts as an agent.
    let at = counter.messages().len();
    w.say(
        w.ej().outsider(),
        "dalang",
        "mohe, zhiwei, xiaoguo: a person says hi",
        true,
    );
    let forged = settle(&counter, &all, at);
    assert_eq!(forged.len(), 1, "{forged:#?}");
    assert!(forged[0].human_origin);
    for b in &bots {
        let d = last_live(b);
        assert_eq!(
            (d["reply"].clone(), d["reason"].clone()),
            (false.into(), "loop-guard".into()),
            "{}",
            b.agent
        );
    }

    // A person in the room restarts the conversation (past the window).
    w.advance(1000.0);
    let at = counter.messages().len();
    w.say(
        w.ej().outsider(),
        "alice",
        "mohe zhiwei xiaoguo: please go on",
        false,
    );
    let second = by_agents(&settle(&counter, &all, at));
    eprintln!("agent messages after one person's message: {second}");
    assert_eq!(second, 13);

    // A CLI send through xiaoguo's bridge resets every agent's chain.
    w.advance(1000.0);
    let at = counter.messages().len();
    w.cli_send("xiaoguo", "mohe and zhiwei, once more");
    let third = by_agents(&settle(&counter, &all, at)[1..]);
    assert_eq!(third, 12);
}

/// The bounds under each `allow_bots`, after one CLI send through mohe that
/// addresses zhiwei and xiaoguo: with replies that address nobody,
/// `mentions` (the default) ends at the two answers to the person, `all`
/// lets every agent answer every agent up to the bound, `(n − 1) ×
/// max_hops` = 12; `none` ends at two even when every reply addresses the
/// others.
#[test]
fn the_bounds_under_each_allow_bots() {
    let _world = hermes_world();
    // (allow_bots, replies address the others, agent messages after the send)
    let cases = [
        ("mentions", false, 2),
        ("all", false, 12),
        ("none", true, 2),
    ];
    for (allow_bots, naming, expected) in cases {
        let Some(w) = World::with_config(&format!("\n[bot]\nallow_bots = \"{allow_bots}\"\n"))
        else {
            return;
        };
        let counter = w.observer();
        let bots = w.every_agent(&counter, naming);
        let all: Vec<&Bot> = bots.iter().collect();
        w.cli_send("mohe", "zhiwei, xiaoguo: what do you think?");
        let chain = settle(&counter, &all, 0);
        let count = by_agents(&chain[1..]);
        eprintln!("allow_bots {allow_bots}: {count} agent messages after one CLI send");
        assert_eq!(count, expected, "allow_bots {allow_bots}: {chain:#?}");
    }
}

/// Interleaved turns of two agents, each seeing its own reflections
/// between (A, B, A, B …), still reach the cap: 2 answers to the person +
/// 5 = `(n − 1) × max_hops + 1` = 7. A three-agent cycle (each names only
/// the next) stops at the cap too: 3 + 5 = 8. A slow loop, replies 70 s
/// apart, stops exactly like a fast one: time never resets the count.
#[test]
fn interleaved_cyclic_and_slow_loops_all_stop_at_the_cap() {
    let _world = hermes_world();
    let Some(w) = World::new() else {
        return;
    };
    let counter = w.observer();
    {
        let mohe = w.bot(&counter, "mohe", &["zhiwei"], 0, 0.0);
        let zhiwei = w.bot(&counter, "zhiwei", &["mohe"], 0, 0.0);
        w.say(w.ej().outsider(), "alice", "mohe, zhiwei: talk", false);
        let chain = settle(&counter, &[&mohe, &zhiwei], 0);
        assert_eq!(by_agents(&chain), 7, "{chain:#?}");
        // Their own reflections were counted between the turns.
        assert!(
            mohe.decisions()
                .iter()
                .any(|d| d["reason"] == "own-message" && d["hops"].as_u64() > Some(1))
        );
        stopped_by_the_guard(&[&mohe, &zhiwei], 6);
    }
    w.advance(1000.0);
    {
        let bots = [
            w.bot(&counter, "mohe", &["zhiwei"], 0, 0.0),
            w.bot(&counter, "zhiwei", &["xiaoguo"], 0, 0.0),
            w.bot(&counter, "xiaoguo", &["mohe"], 0, 0.0),
        ];
        let all: Vec<&Bot> = bots.iter().collect();
        let at = counter.messages().len();
        w.say(
            w.ej().outsider(),
            "alice",
            "mohe zhiwei xiaoguo: round",
            false,
        );
        let chain = settle(&counter, &all, at);
        assert_eq!(by_agents(&chain), 8, "{chain:#?}");
        stopped_by_the_guard(&all, 6);
    }
    w.advance(1000.0);
    {
        let step = 70.0;
        let bots = [
            w.bot(&counter, "mohe", &["zhiwei", "xiaoguo"], 0, step),
            w.bot(&counter, "zhiwei", &["mohe", "xiaoguo"], 0, step),
            w.bot(&counter, "xiaoguo", &["mohe", "zhiwei"], 0, step),
        ];
        let all: Vec<&Bot> = bots.iter().collect();
        let before = w.now();
        let at = counter.messages().len();
        w.say(
            w.ej().outsider(),
            "alice",
            "mohe, zhiwei, xiaoguo: slowly",
            false,
        );
        let chain = by_agents(&settle(&counter, &all, at));
        assert_eq!(chain, 13);
        stopped_by_the_guard(&all, 6);
        let spent = w.now() - before;
        assert_eq!(spent, 13.0 * step, "each reply 70 s after the one before");
    }
}

/// The counter survives a gateway restart: after a capped chain, mohe's
/// and xiaoguo's bots restart and the room replays its history to them
/// (delayed: neither counted nor answered, the person's line included); a
/// new agent message is still refused. The same body twice from one
/// person is answered once; a new live person's line resets.
#[test]
fn the_counter_survives_a_restart_replays_do_not_reset_and_duplicates_are_answered_once() {
    let _world = hermes_world();
    let Some(w) = World::new() else {
        return;
    };
    let counter = w.observer();
    let names =
        |a: &str| -> Vec<&'static str> { AGENTS.iter().copied().filter(|o| *o != a).collect() };
    {
        let bots: Vec<Bot> = AGENTS
            .iter()
            .map(|a| w.bot(&counter, a, &names(a), 0, 0.0))
            .collect();
        let all: Vec<&Bot> = bots.iter().collect();
        w.say(w.ej().outsider(), "alice", "mohe zhiwei xiaoguo: go", false);
        assert_eq!(by_agents(&settle(&counter, &all, 0)), 13);
    }
    // Restarted, with the room's history replayed on joining.
    let mohe = w.bot(&counter, "mohe", &names("mohe"), 50, 0.0);
    let xiaoguo = w.bot(&counter, "xiaoguo", &names("xiaoguo"), 50, 0.0);
    std::thread::sleep(Duration::from_secs(2));
    let replayed = mohe.decisions();
    assert!(replayed.len() >= 10, "{replayed:?}");
    assert!(
        replayed
            .iter()
            .all(|d| d["delayed"] == true && d["reason"] == "delayed" && d["reply"] == false),
        "{replayed:?}"
    );
    let at = counter.messages().len();
    w.say(
        "zhiwei",
        "zhiwei",
        "mohe and xiaoguo: are you still there?",
        false,
    );
    let after = settle(&counter, &[&mohe, &xiaoguo], at);
    assert_eq!(after.len(), 1, "nobody answered: {after:#?}");
    for b in [&mohe, &xiaoguo] {
        let d = last_live(b);
        assert_eq!(d["reason"], "loop-guard", "{}: {d}", b.agent);
        assert!(d["hops"].as_u64() > Some(6), "{d}");
    }
    drop((mohe, xiaoguo));

    // mohe alone: the same body twice from alice is answered once.
    w.advance(1000.0);
    let mohe = w.bot(&counter, "mohe", &["alice"], 0, 0.0);
    let at = counter.messages().len();
    w.say(w.ej().outsider(), "alice", "mohe, status?", false);
    w.say(w.ej().outsider(), "alice", "mohe, status?", false);
    let got = settle(&counter, &[&mohe], at);
    assert_eq!(by_agents(&got), 1, "{got:#?}");
    let mut reasons: Vec<String> = mohe
        .decisions()
        .iter()
        .map(|d| d["reason"].as_str().unwrap().to_owned())
        .collect();
    reasons.sort();
    assert_eq!(
        reasons,
        ["duplicate", "human", "own-message"],
        "{reasons:?}"
    );
}

/// The decisions `bot` took from its decision on the first live message
/// from `nick` on: that one, then the rest.
fn from_nick(bot: &Bot, nick: &str) -> (Value, Vec<Value>) {
    let all = bot.decisions();
    let at = all
        .iter()
        .position(|d| d["delayed"] == false && d["nick"] == nick)
        .unwrap_or_else(|| panic!("{} saw nothing from {nick}: {all:?}", bot.agent));
    (all[at].clone(), all[at + 1..].to_vec())
}

/// Issue 37: ejabberd keeps a nick's case and its blanks, so it seats an
/// outsider as `MoHe`, `mohe ` or ` mohe` beside the agent `mohe`. To
/// every bot each such occupant is a person: mohe's bot answers it (it is
/// no reflection of mohe's own), and every bot resets its chain on it
/// instead of counting a hop of mohe's (each counter stood at 2, or at 3
/// after the last lookalike's replies, then counts the three replies from
/// 1). `is-own` tells those occupants from `ROOM/mohe`; JIDs still compare
/// ignoring case.
#[test]
fn an_outsider_seated_as_a_lookalike_of_mohe_is_a_person_to_every_bot() {
    let _world = hermes_world();
    let Some(w) = World::new() else {
        return;
    };
    let counter = w.observer();
    // Replies name alice, who is not in the room: no agent is addressed,
    // so the replies to a person make no chain.
    let bots: Vec<Bot> = AGENTS
        .iter()
        .map(|a| w.bot(&counter, a, &["alice"], 0, 0.0))
        .collect();
    let all: Vec<&Bot> = bots.iter().collect();
    w.cli_send("zhiwei", "mohe, xiaoguo: where are we?");
    let opening = settle(&counter, &all, 0);
    assert_eq!(by_agents(&opening[1..]), 2, "{opening:#?}");
    for b in &bots {
        let last = b.decisions().last().cloned().unwrap();
        assert_eq!(last["hops"], 2, "{}: {last}", b.agent);
    }

    let outsider = w.ej().outsider();
    // Bodies that differ after normalisation: one sender's repeat would
    // meet the duplicate rule.
    for (nick, body) in [
        ("MoHe", "mohe zhiwei xiaoguo, MoHe here: who are you?"),
        (
            "mohe ",
            "mohe zhiwei xiaoguo, a second one here: are you real?",
        ),
        (
            " mohe",
            "mohe zhiwei xiaoguo, and a third: which of us is you?",
        ),
    ] {
        let at = counter.messages().len();
        w.say(outsider, nick, body, false);
        let after = settle(&counter, &all, at);
        assert_eq!(
            (after[0].nick.as_str(), after[0].jid.clone()),
            (nick, Some(w.ej().jid(outsider))),
            "{after:#?}"
        );
        // Every bot answered, mohe's from the nick `mohe` it holds beside
        // the lookalike.
        let mut answered: Vec<&str> = after[1..].iter().map(|m| m.nick.as_str()).collect();
        answered.sort_unstable();
        assert_eq!(
            answered,
            ["mohe", "xiaoguo", "zhiwei"],
            "{nick:?}: {after:#?} {:?}",
            bots.iter().map(|b| b.decisions()).collect::<Vec<_>>()
        );
        for b in &bots {
            let (d, rest) = from_nick(b, nick);
            assert_eq!(
                (d["reply"].clone(), d["reason"].clone(), d["hops"].clone()),
                (true.into(), "human".into(), 0.into()),
                "{} on {nick:?}: {d}",
                b.agent
            );
            let hops: Vec<u64> = rest.iter().map(|d| d["hops"].as_u64().unwrap()).collect();
            assert_eq!(hops, [1, 2, 3], "{} on {nick:?}: {rest:?}", b.agent);
        }
    }

    let room = &w.ej().room;
    for (from, own) in [
        (format!("{room}/MoHe"), false),
        (format!("{room}/MOHE"), false),
        (format!("{room}/mohe "), false),
        (format!("{room}/ mohe"), false),
        (format!("{room}/mohe"), true),
        (w.ej().jid("MoHe"), true),
    ] {
        assert_eq!(
            w.is_own(&from, "mohe"),
            serde_json::json!({"own": own}),
            "{from:?}"
        );
    }
}

/// Issue 41: a person's message resets the room window as it resets the
/// hops. With `max_hops = 100` and `window_messages = 5` the window is
/// what caps a chain: a CLI send through mohe ends after `(n − 1) × 6` =
/// 12 agent messages, every refusal naming the window; then a person
/// addresses mohe in the same 300 s, mohe answers, and the chain that
/// follows is bounded by the window again rather than refused at once:
/// `(n − 1) × 6 + 1` = 13, as after a person's message with the default
/// hop cap.
#[test]
fn a_person_after_a_capped_room_window_is_answered_and_the_next_chain_is_bounded_again() {
    let _world = hermes_world();
    let Some(w) = World::with_config("\n[loop_guard]\nmax_hops = 100\nwindow_messages = 5\n")
    else {
        return;
    };
    let counter = w.observer();
    let bots = w.every_agent(&counter, true);
    let all: Vec<&Bot> = bots.iter().collect();
    let by_window = |bots: &[&Bot], from: &[usize]| {
        let mut refused = 0;
        for (b, &from) in bots.iter().zip(from) {
            for d in &b.decisions()[from..] {
                if d["reason"] == "loop-guard" {
                    refused += 1;
                    let detail = d["detail"].as_str().unwrap();
                    assert!(
                        detail
                            == "more than 5 agent messages in the last 300 s (the room window's bound)",
                        "{}: {d}",
                        b.agent
                    );
                }
            }
        }
        refused
    };

    w.cli_send("mohe", "zhiwei, xiaoguo: let us begin");
    let first = settle(&counter, &all, 0);
    assert_eq!(by_agents(&first[1..]), 12, "{first:#?}");
    assert!(
        by_window(&all, &[0, 0, 0]) > 0,
        "the window capped the chain"
    );

    let seen: Vec<usize> = bots.iter().map(|b| b.decisions().len()).collect();
    let at = counter.messages().len();
    w.say(
        w.ej().outsider(),
        "alice",
        "@mohe @zhiwei @xiaoguo are you still there?",
        false,
    );
    let second = settle(&counter, &all, at);
    let (d, _) = from_nick(&bots[0], "alice");
    assert_eq!(
        (d["reply"].clone(), d["reason"].clone(), d["hops"].clone()),
        (true.into(), "human".into(), 0.into()),
        "{d}"
    );
    assert!(
        second[1..].iter().any(|m| m.nick == "mohe"),
        "mohe answered: {second:#?}"
    );
    assert_eq!(by_agents(&second), 13, "{second:#?}");
    assert!(by_window(&all, &seen) > 0, "the window capped it again");
}
