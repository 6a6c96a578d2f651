//! The room soak (`make soak`; skipped unless `ROOM_SOAK` is
//! set): three real bots in a room of an ejabberd of its own, the real
//! Hermes API server with the fake LLM, and a person who posts
//! `ROOM_SOAK_MESSAGES` (default 500) messages, each addressing one agent
//! in turn, while faults are injected: a bot SIGKILLed and restarted,
//! ejabberd stopped and started, Hermes restarted, a bot stopped
//! (SIGSTOP) for `ROOM_SOAK_PAUSE_SECONDS` (default 30). Then each message
//! is accounted for from the fake LLM's turns (each reply `FAKE-REPLY N`
//! names its turn N, whose last line is the message it answers):
//!
//! - answered once, twice, never (the log of the bots says why);
//! - heard lines lost: a person's line that reached none of an agent's
//!   turns (each agent's turns are those whose last line addresses it; a
//!   final message addresses all three, so every line has a next turn),
//!   apart from those the 20-line cap dropped, which the bot logged and
//!   which are counted on their own;
//! - the longest wait between a message and its answer in the room.
//!
//! The figures are printed and written to `target/room-soak-report.json`;
//! the goal, asserted, is 0 answered twice and 0 lost.

use serde_json::json;
use session_switch_tests::heavy;
use session_switch_tests::instance::OwnEjabberd;
use session_switch_tests::room_bot::{AGENTS, BotProcess, BotWorld};
use session_switch_tests::room_observer::RoomObserver;
use session_switch_tests::workspace_root;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Post `body` as the person, retrying while the server is away.
fn say(world: &BotWorld, body: &str) {
    let deadline = Instant::now() + Duration::from_secs(180);
    while !world.try_say("anna", body) {
        assert!(
            Instant::now() < deadline,
            "could not post {body:?} for 180 s"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn room_soak() {
    if std::env::var_os("ROOM_SOAK").is_none() {
        return;
    }
    let _heavy = heavy();
    let total = env_number("ROOM_SOAK_MESSAGES", 500);
    let pause = Duration::from_secs(env_number("ROOM_SOAK_PAUSE_SECONDS", 30) as u64);
    let mut own = OwnEjabberd::start_fresh("roomsoak");
    let Some(mut world) = BotWorld::on(own.ejabberd(), 6) else {
        return;
    };
    let names: Vec<&str> = AGENTS.iter().map(|(a, _)| *a).collect();
    let mut bots: HashMap<&str, BotProcess> = names.iter().map(|a| (*a, world.bot(a))).collect();
    let mut logs: Vec<(String, String)> = Vec::new();

    // When each reply first reached the room (a real occupant's view).
    let seen: Arc<Mutex<HashMap<usize, Instant>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let observer = Arc::new(Mutex::new(RoomObserver::join(&world.ej)));
    let watcher = {
        let seen = Arc::clone(&seen);
        let done = Arc::clone(&done);
        let observer = Arc::clone(&observer);
        std::thread::spawn(move || {
            let mut counted = 0;
            while !done.load(Ordering::Acquire) {
                let messages = observer.lock().unwrap().messages();
                if messages.len() < counted {
                    counted = 0;
                }
                for m in &messages[counted..] {
                    if let Some(n) = m
                        .body
                        .strip_prefix("FAKE-REPLY ")
                        .and_then(|t| t.split_whitespace().next())
                        .and_then(|t| t.parse::<usize>().ok())
                    {
                        seen.lock().unwrap().entry(n).or_insert_with(Instant::now);
                    }
                }
                counted = messages.len();
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };

    let mut said: Vec<(String, &str, Instant)> = Vec::new();
    let tag = std::process::id();
    let mut faults = Vec::new();
    let mut paused: Option<Instant> = None;
    // The message after which the killed bot, and the stopped Hermes,
    // come back.
    let mut mohe_back: Option<usize> = None;
    let mut hermes_back: Option<usize> = None;
    for i in 0..total {
        let agent = names[i % names.len()];
        let body = format!("@{agent} soak {i} of {tag}");
        match ((i * 5) / total.max(1), faults.len()) {
            (1, 0) => {
                bots["mohe"].signal("KILL");
                mohe_back = Some(i + 5);
                faults.push(format!(
                    "message {i}: mohe's bot SIGKILLed, restarted 5 messages later"
                ));
            }
            (2, 1) => {
                own.stop();
                std::thread::sleep(Duration::from_secs(2));
                own.start();
                // The observer's seat went with the server.
                *observer.lock().unwrap() = RoomObserver::join(&world.ej);
                faults.push(format!("message {i}: ejabberd stopped 2 s and started"));
            }
            (3, 2) => {
                world.gateway.stop();
                hermes_back = Some(i + 5);
                faults.push(format!(
                    "message {i}: Hermes stopped, restarted 5 messages later"
                ));
            }
            (4, 3) => {
                bots["zhiwei"].signal("STOP");
                paused = Some(Instant::now());
                faults.push(format!(
                    "message {i}: zhiwei's bot stopped (SIGSTOP) for {} s",
                    pause.as_secs()
                ));
            }
            _ => {}
        }
        if mohe_back == Some(i) {
            logs.push(("mohe".into(), bots.remove("mohe").unwrap().log()));
            bots.insert("mohe", world.bot("mohe"));
            mohe_back = None;
        }
        if hermes_back == Some(i) {
            world.gateway.restart();
            hermes_back = None;
        }
        if let Some(at) = paused
            && at.elapsed() >= pause
        {
            bots["zhiwei"].signal("CONT");
            paused = None;
        }
        say(&world, &body);
        said.push((body, agent, Instant::now()));
    }
    if paused.is_some() {
        bots["zhiwei"].signal("CONT");
    }
    let last = format!("@mohe @zhiwei @xiaoguo that was all, {tag}");
    say(&world, &last);
    // Let every bot finish: quiet for 20 s.
    let mut turns = world.llm.turns().len();
    let mut still = Instant::now();
    let started = Instant::now();
    while still.elapsed() < Duration::from_secs(20) && started.elapsed() < Duration::from_secs(600)
    {
        std::thread::sleep(Duration::from_secs(1));
        let now = world.llm.turns().len();
        if now != turns {
            turns = now;
            still = Instant::now();
        }
    }
    std::thread::sleep(Duration::from_secs(5));
    done.store(true, Ordering::Release);
    let _ = watcher.join();

    for (agent, bot) in &bots {
        logs.push(((*agent).to_owned(), bot.log()));
    }
    // The lines each bot's cap dropped, as its log quotes them.
    let capped: std::collections::HashSet<(String, String)> = logs
        .iter()
        .flat_map(|(agent, log)| {
            log.lines().filter_map(move |l| {
                let quoted = l.split("the oldest is dropped (\"").nth(1)?;
                Some((agent.clone(), quoted.strip_suffix("\")")?.to_owned()))
            })
        })
        .collect();
    let turn_texts = world.llm.turn_messages();
    let seen = seen.lock().unwrap().clone();
    let mut answered: HashMap<&str, Vec<usize>> = HashMap::new();
    for (n, text) in turn_texts.iter().enumerate() {
        let Some(last) = text.lines().last() else {
            continue;
        };
        if let Some((body, ..)) = said.iter().find(|(b, ..)| last == format!("anna: {b}")) {
            // A turn whose reply reached the room answered its message.
            if seen.contains_key(&(n + 1)) {
                answered.entry(body.as_str()).or_default().push(n + 1);
            }
        }
    }
    let (mut once, mut twice, mut never, mut lost, mut dropped) = (0, 0, Vec::new(), 0, 0);
    let mut longest = Duration::ZERO;
    for (body, agent, at) in &said {
        match answered.get(body.as_str()).map_or(0, Vec::len) {
            0 => never.push(body.clone()),
            1 => once += 1,
            _ => twice += 1,
        }
        if let Some(first) = answered
            .get(body.as_str())
            .and_then(|ns| ns.iter().filter_map(|n| seen.get(n)).min())
        {
            longest = longest.max(first.saturating_duration_since(*at));
        }
        let line = format!("anna: {body}");
        for other in &names {
            let heard = turn_texts.iter().any(|t| {
                t.lines()
                    .last()
                    .is_some_and(|l| l.contains(&format!("@{other}")))
                    && t.lines().any(|l| l == line)
            });
            if !heard && capped.contains(&((*other).to_owned(), line.clone())) {
                dropped += 1;
            } else if !heard {
                lost += 1;
                eprintln!("{other} never got {line:?} (addressed to {agent})");
            }
        }
    }
    let report = json!({
        "messages": said.len(),
        "answered_once": once,
        "answered_twice": twice,
        "never_answered": never.len(),
        "heard_lines_lost": lost,
        "heard_lines_dropped_by_the_cap_logged": dropped,
        "longest_wait_seconds": longest.as_secs_f64(),
        "faults": faults,
        "never_answered_bodies": never,
    });
    let text = serde_json::to_string_pretty(&report).unwrap();
    println!("{text}");
    std::fs::write(workspace_root().join("target/room-soak-report.json"), &text).unwrap();
    let mut replies: Vec<usize> = seen.keys().copied().collect();
    replies.sort_unstable();
    std::fs::write(
        workspace_root().join("target/room-soak-turns.json"),
        serde_json::to_string_pretty(&json!({"turns": turn_texts, "replies_seen": replies}))
            .unwrap(),
    )
    .unwrap();
    std::fs::write(
        workspace_root().join("target/room-soak-bots.log"),
        logs.iter()
            .map(|(a, l)| format!("==== {a}\n{l}"))
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    assert_eq!(twice, 0, "{text}");
    assert_eq!(lost, 0, "{text}");
}
