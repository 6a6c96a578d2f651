//! The agent's room bot end to end: `xmpp-session-bridge bot`
//! processes in a room of the test's own on the real ejabberd, the real
//! Hermes API server (hermes-agent 0.19.0 from the registry) on a copy of
//! a real Hermes database, the fake LLM, a person posting through a real
//! XMPP client and a real occupant (`RoomObserver`) counting what the room
//! broadcast.
//!
//! Each test starts a Hermes world of its own (a Hermes gateway, Python
//! clients): they take [`hermes_world`], so few run at once.

use session_switch_tests::fake_llm::{LOOP, REPLY};
use session_switch_tests::hermes_world;
use session_switch_tests::instance::OwnEjabberd;
use session_switch_tests::room_bot::{ANSWER, BotWorld, quiet, unique, wait_from};
use session_switch_tests::sample::SAMPLE_CLI;
use session_switch_tests::xmpp::Ejabberd;
use std::time::{Duration, Instant};

#[test]
fn a_person_is_answered_in_the_session_resolve_chose_and_own_lines_are_ignored() {
    let _world = hermes_world();
    let Some(world) = BotWorld::new(6) else {
        return;
    };
    answered_redirected_and_stopped(&world);
}

#[test]
fn on_the_v31_line_too() {
    let _world = hermes_world();
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    let Some(world) = BotWorld::with_hermes(&ej, "v31", "hermes-latest.db", 6) else {
        return;
    };
    answered_redirected_and_stopped(&world);
}

#[test]
fn on_the_axisrow_line_too() {
    let _world = hermes_world();
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    let Some(world) = BotWorld::with_hermes(&ej, "axisrow", "hermes-0.19.0.db", 6) else {
        return;
    };
    answered_redirected_and_stopped(&world);
}

/// A person answered in the agent's XMPP session, a CLI send moving the
/// next turn to the CLI session, the bot's own lines not answered, SIGTERM.
fn answered_redirected_and_stopped(world: &BotWorld) {
    let observer = world.observer();
    let mut bot = world.bot("mohe");

    let first = unique("hello mohe, first");
    world.say("anna", &first);
    let reply = wait_from(&observer, "mohe", 0, ANSWER)
        .unwrap_or_else(|| panic!("no reply from mohe:\n{}", bot.log()));
    assert!(reply.body.starts_with(REPLY), "{reply:?}");
    assert!(!reply.human_origin, "a bot's reply is an agent message");
    assert!(reply.origin_id.is_some(), "the reply has an origin-id");
    // The turn ran in mohe's XMPP session (no record): the room's line
    // with the sender's nick, then the reply, both stored by Hermes.
    let rows = world.rows("xmpp-mohe-v2");
    let tail = &rows[rows.len() - 2..];
    assert_eq!(tail[0], ("user".into(), format!("anna: {first}")));
    assert_eq!(tail[1], ("assistant".into(), reply.body.clone()));

    // A CLI send redirects the next turn to the CLI session; the bot's own
    // reflection of that send is not answered.
    let cli = unique("from mohe's CLI");
    let out = world
        .cli()
        .args(["send", &cli, SAMPLE_CLI, "--agent", "mohe"])
        .output()
        .unwrap();
    assert!(out.status.success(), "send: {out:?}");
    assert!(observer.wait_for_body(&cli, ANSWER).is_some());
    let seen = observer.messages().len();
    let second = unique("@mohe and a second question");
    world.say("anna", &second);
    let reply2 = wait_from(&observer, "mohe", seen, ANSWER)
        .unwrap_or_else(|| panic!("no second reply:\n{}", bot.log()));
    let cli_rows = world.rows(SAMPLE_CLI);
    let tail = &cli_rows[cli_rows.len() - 2..];
    assert_eq!(tail[0], ("user".into(), format!("anna: {second}")));
    assert_eq!(tail[1], ("assistant".into(), reply2.body.clone()));
    assert!(
        !world
            .rows("xmpp-mohe-v2")
            .iter()
            .any(|(_, c)| c.contains(&second)),
        "the redirected turn stays out of the XMPP session"
    );
    assert!(bot.log().contains("redirected"), "{}", bot.log());

    // Two turns, no more: neither the replies' echoes nor the CLI send
    // woke the bot.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(world.llm.turn_messages().len(), 2, "{}", bot.log());
    let from_mohe = observer.count_from("mohe");
    assert_eq!(from_mohe, 3, "two replies and the CLI send");

    // SIGTERM: a clean stop.
    assert!(bot.stop(), "the bot exits 0 on SIGTERM:\n{}", bot.log());
    assert!(bot.log().contains("stopped"), "{}", bot.log());
}

#[test]
fn after_a_lost_connection_the_bot_rejoins_and_answers_nothing_twice() {
    let _world = hermes_world();
    let Some(world) = BotWorld::new(6) else {
        return;
    };
    let observer = world.observer();
    let bot = world.bot("mohe");
    let first = unique("@mohe before the cut");
    world.say("anna", &first);
    wait_from(&observer, "mohe", 0, ANSWER).unwrap_or_else(|| panic!("no reply:\n{}", bot.log()));

    // The server ends every session of mohe's account (as a restart or a
    // network cut would): the bot reconnects and rejoins by itself.
    world.ej.api(
        "kick_user",
        &serde_json::json!({"user": "mohe", "host": world.ej.domain}),
    );
    bot.expect_log("reconnected", 1, ANSWER);
    bot.expect_log("joined", 2, ANSWER);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        world.llm.turn_messages().len(),
        1,
        "nothing is answered again after the rejoin:\n{}",
        bot.log()
    );

    let seen = observer.messages().len();
    let after = unique("@mohe after the cut");
    world.say("anna", &after);
    wait_from(&observer, "mohe", seen, ANSWER)
        .unwrap_or_else(|| panic!("no reply after the rejoin:\n{}", bot.log()));
    assert_eq!(
        world.llm.turn_messages(),
        vec![format!("anna: {first}"), format!("anna: {after}")]
    );
}

#[test]
fn with_hermes_down_nothing_is_posted_and_the_line_reaches_the_next_turn() {
    let _world = hermes_world();
    let Some(mut world) = BotWorld::new(6) else {
        return;
    };
    let observer = world.observer();
    let bot = world.bot("mohe");
    world.gateway.stop();

    let once = world
        .cli()
        .args(["--json", "bot", "--agent", "mohe", "--once"])
        .output()
        .unwrap();
    assert!(!once.status.success(), "--once with Hermes down: {once:?}");
    let health: serde_json::Value = serde_json::from_slice(&once.stdout).unwrap();
    assert_eq!(health["joined"], true, "{health}");
    assert_ne!(health["hermes"], "ok", "{health}");
    // The error line says where the API server's URL and key came from.
    let stderr = String::from_utf8_lossy(&once.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains("(its URL and key: API_SERVER_PORT of ")
            && last.contains("API_SERVER_KEY of "),
        "{stderr}"
    );

    let lost = unique("@mohe while Hermes is down");
    world.say("anna", &lost);
    bot.expect_log("no reply to anna: Hermes API server unreachable", 1, ANSWER);
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        observer.count_from("mohe") == 0,
        "nothing is posted while Hermes is down"
    );

    world.gateway.restart();
    let once = world
        .cli()
        .args(["bot", "--agent", "mohe", "--once"])
        .output()
        .unwrap();
    assert!(once.status.success(), "--once with Hermes back: {once:?}");
    // A check, not the service: its log lines carry no time.
    let stderr = String::from_utf8_lossy(&once.stderr);
    assert!(stderr.contains("joined"), "{stderr}");
    assert!(
        stderr.lines().all(|l| {
            let first = l.split_whitespace().next().unwrap_or("");
            chrono::DateTime::parse_from_rfc3339(first).is_err()
        }),
        "--once logged a line with a time:\n{stderr}"
    );
    let back = unique("@mohe Hermes is back");
    world.say("anna", &back);
    let reply = wait_from(&observer, "mohe", 0, ANSWER)
        .unwrap_or_else(|| panic!("no reply once Hermes is back:\n{}", bot.log()));
    assert!(reply.body.starts_with(REPLY), "{reply:?}");
    assert_eq!(
        world.llm.turn_messages(),
        vec![format!("anna: {lost}\nanna: {back}")],
        "the line Hermes missed goes with the next turn into the same session"
    );
}

/// Hermes killed while a turn waits for its model: the connection breaks
/// after Hermes stored the person's line, so the bot posts nothing, finds
/// the line in the session and does not pass it again with the next turn
/// (the model would see it twice); the session holds it once.
#[test]
fn a_line_hermes_stored_before_it_was_killed_is_not_passed_again() {
    let _world = hermes_world();
    let Some(mut world) = BotWorld::new(6) else {
        return;
    };
    let observer = world.observer();
    let bot = world.bot("mohe");
    world.llm.set_delay(Duration::from_secs(30));
    let first = unique("@mohe while Hermes thinks");
    world.say("anna", &first);
    let started = Instant::now();
    while world.llm.turn_messages().is_empty() {
        assert!(
            started.elapsed() < ANSWER,
            "Hermes never asked the model:\n{}",
            bot.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    world.gateway.kill();
    bot.expect_log(
        "Hermes had stored the line in session xmpp-mohe-v2",
        1,
        ANSWER,
    );
    world.llm.set_delay(Duration::ZERO);
    world.gateway.restart();
    let second = unique("@mohe after the restart");
    world.say("anna", &second);
    let reply = wait_from(&observer, "mohe", 0, ANSWER)
        .unwrap_or_else(|| panic!("no reply after the restart:\n{}", bot.log()));
    assert!(reply.body.starts_with(REPLY), "{reply:?}");
    // Hermes merges the stored line (no reply followed it) with the new
    // one into the model's last message: the first line appears there
    // once, from the session, not a second time from the bot.
    let turns = world.llm.turn_messages();
    let last = turns.last().cloned().unwrap_or_default();
    assert_eq!(last.matches(&first).count(), 1, "{turns:?}");
    assert!(last.ends_with(&format!("anna: {second}")), "{turns:?}");
    let stored = world
        .rows("xmpp-mohe-v2")
        .iter()
        .filter(|(role, content)| role == "user" && content.contains(&first))
        .count();
    assert_eq!(stored, 1, "the first line is in the session once");
}

/// `--once` fails where the bot could not work: a room that does not
/// exist (the join would create it: the bot destroys it again, so no room
/// is left that a later `send` would find) and an API server key that
/// Hermes refuses (its `/health` asks for none).
#[test]
fn once_fails_on_a_room_that_does_not_exist_and_on_a_refused_api_key() {
    let _world = hermes_world();
    let Some(world) = BotWorld::new(6) else {
        return;
    };
    let text = std::fs::read_to_string(&world.config).unwrap();
    let (name, service) = world.ej.room.split_once('@').unwrap();
    let missing = format!("{name}-missing@{service}");
    let bad_room = world.home.join("missing-room.toml");
    let room_line = format!("room = \"{}\"", world.ej.room);
    assert!(text.contains(&room_line), "{text}");
    std::fs::write(
        &bad_room,
        text.replace(&room_line, &format!("room = \"{missing}\"")),
    )
    .unwrap();
    let once = world
        .cli_with(&bad_room)
        .args(["--json", "bot", "--agent", "mohe", "--once"])
        .output()
        .unwrap();
    assert!(!once.status.success(), "--once in a missing room: {once:?}");
    let health: serde_json::Value = serde_json::from_slice(&once.stdout).unwrap();
    assert_eq!(health["joined"], false, "{health}");
    let stderr = String::from_utf8_lossy(&once.stderr);
    assert!(stderr.contains("does not exist"), "{stderr}");
    let rooms = std::process::Command::new(&world.ej.ctl_argv()[0])
        .args(["muc_online_rooms", "global"])
        .env("LC_ALL", "C.UTF-8")
        .output()
        .unwrap();
    let rooms = String::from_utf8_lossy(&rooms.stdout);
    assert!(
        rooms.contains(&world.ej.room),
        "the test's own room is listed: {rooms}"
    );
    assert!(
        !rooms.contains(&missing),
        "the room the join created is gone: {rooms}"
    );

    // Hermes's key: a wrong one in the agent's `.env`.
    let home = world.home.join("wrong-key");
    std::fs::create_dir_all(&home).unwrap();
    let env = std::fs::read_to_string(world.home.join(".env")).unwrap();
    let wrong: String = env
        .lines()
        .map(|l| match l.split_once('=') {
            Some(("API_SERVER_KEY", _)) => "API_SERVER_KEY=sk-wrong-0123456789abcdef\n".to_owned(),
            _ => format!("{l}\n"),
        })
        .collect();
    assert_ne!(wrong, env, "the .env has a key to get wrong");
    std::fs::write(home.join(".env"), wrong).unwrap();
    let once = world
        .cli()
        .env("HERMES_HOME", &home)
        .args(["--json", "bot", "--agent", "mohe", "--once"])
        .output()
        .unwrap();
    assert!(
        !once.status.success(),
        "--once with a refused key: {once:?}"
    );
    let health: serde_json::Value = serde_json::from_slice(&once.stdout).unwrap();
    assert_eq!(health["joined"], true, "{health}");
    let hermes = health["hermes"].as_str().unwrap_or_default();
    assert!(
        hermes.contains("401") && hermes.contains("refused the API server key"),
        "{health}"
    );

    // A `[bot] server` nobody listens on: the last line says where it tried.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let server_line = format!("server = \"{}:{}\"", world.ej.c2s_host, world.ej.c2s_port);
    assert!(text.contains(&server_line), "{text}");
    let nowhere = world.home.join("nowhere.toml");
    std::fs::write(
        &nowhere,
        text.replace(&server_line, &format!("server = \"{closed}\"")),
    )
    .unwrap();
    let once = world
        .cli_with(&nowhere)
        .args(["bot", "--agent", "mohe", "--once"])
        .output()
        .unwrap();
    assert!(!once.status.success(), "--once with no server: {once:?}");
    let stderr = String::from_utf8_lossy(&once.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains("could not join") && last.contains(&format!("tried [bot] server {closed}")),
        "{stderr}"
    );
}

/// Three bots whose replies name each other stop at `max_hops`; a CLI send
/// through mohe resets every counter (mohe's own from its reflection) and
/// the next chain stops at the bound again; a person's message is
/// answered after it.
#[test]
fn three_bots_that_address_each_other_stop_at_the_loop_bound() {
    let _world = hermes_world();
    let max_hops = 3;
    let Some(world) = BotWorld::new(max_hops) else {
        return;
    };
    let observer = world.observer();
    let bots: Vec<_> = ["mohe", "zhiwei", "xiaoguo"]
        .into_iter()
        .map(|a| world.bot(a))
        .collect();
    // Every reply names all three agents, so each bot is addressed by the
    // others' replies until its hop counter reaches the bound.
    world.say("anna", &unique(&format!("@zhiwei start {LOOP}")));
    // The chain's first reply first: on a loaded machine it can take longer
    // than the silence that ends the chain.
    let first = wait_from(&observer, "zhiwei", 0, ANSWER);
    assert!(
        first.is_some(),
        "zhiwei answers the person:\n{}",
        bots[1].log()
    );
    // The chain ends when every bot's guard has refused a hop: wait for
    // that rather than for a silence, which one slow turn can fake.
    for bot in &bots {
        assert!(
            bot.wait_log("loop-guard", 1, ANSWER),
            "{}'s guard never refused:\n{}",
            bot.agent,
            bot.log()
        );
    }
    quiet(&observer, Duration::from_secs(8));
    let agent_lines = |from: usize| {
        observer
            .messages()
            .iter()
            .skip(from)
            .filter(|m| m.nick != "anna")
            .count()
    };
    let chain = agent_lines(0);
    assert!(chain >= 2, "the bots answered each other: {chain}");
    // Each bot answers at most `max_hops` agent messages after the person's.
    assert!(chain <= 1 + 3 * max_hops as usize, "{chain} agent lines");

    // A CLI send through mohe resets every counter, mohe's own too: its
    // bot sees its reflection with the human-origin marker, from mohe's
    // own real JID, which the guard trusts. So mohe answers the replies
    // that name it again, and the chain stops at the bound again.
    let send = unique(&format!("@zhiwei over to you {LOOP}"));
    let out = world
        .cli()
        .args(["send", &send, SAMPLE_CLI, "--agent", "mohe"])
        .output()
        .unwrap();
    assert!(out.status.success(), "send: {out:?}");
    assert!(observer.wait_for_body(&send, ANSWER).is_some());
    let sent_at = observer
        .messages()
        .iter()
        .position(|m| m.body == send)
        .unwrap();
    let answer = wait_from(&observer, "mohe", sent_at + 1, ANSWER);
    assert!(
        answer.is_some(),
        "mohe answers after its own CLI send:\n{}",
        bots[0].log()
    );
    let total = quiet(&observer, Duration::from_secs(8));
    let chain = agent_lines(sent_at + 1);
    assert!(
        chain <= 3 * max_hops as usize,
        "{chain} agent lines after the send"
    );

    // A person's message resets the bound: mohe answers again.
    world.say("anna", &unique("@mohe a new question"));
    let reply = wait_from(&observer, "mohe", total, ANSWER);
    assert!(reply.is_some(), "{}", bots[0].log());
}

/// A bot whose server went away stops at once on SIGTERM, as a service
/// manager expects within its stop time-out (a stanza waiting on the lost
/// connection gives up when the stop is asked).
#[test]
fn a_bot_that_lost_its_server_stops_at_once_on_sigterm() {
    let _world = hermes_world();
    if Ejabberd::from_env().is_none() {
        return;
    }
    let mut own = OwnEjabberd::start_fresh("stop");
    let Some(world) = BotWorld::on(own.ejabberd(), 6) else {
        return;
    };
    let mut mohe = world.bot("mohe");
    own.stop();
    // The client sees the stream end and queues its rejoin, which then
    // waits on the lost connection.
    mohe.expect_log("rejoining", 1, Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(3));
    let asked = std::time::Instant::now();
    mohe.signal("TERM");
    let status = mohe
        .wait_exit(Duration::from_secs(20))
        .unwrap_or_else(|| panic!("still running 20 s after SIGTERM:\n{}", mohe.log()));
    let took = asked.elapsed();
    let log = mohe.log();
    assert!(status.success(), "{status:?}\n{log}");
    assert!(
        took < Duration::from_secs(8),
        "stopped after {took:?}:\n{log}"
    );
    assert!(log.contains("SIGTERM: stopping"), "{log}");
    assert!(log.contains("stopped"), "{log}");
}

#[test]
fn after_an_ejabberd_restart_every_bot_rejoins_and_nothing_is_answered_twice() {
    let _world = hermes_world();
    // An instance of this test's own: the run's shared one serves the
    // other tests meanwhile.
    if Ejabberd::from_env().is_none() {
        return;
    }
    let mut own = OwnEjabberd::start_fresh("bots");
    let Some(world) = BotWorld::on(own.ejabberd(), 6) else {
        return;
    };
    let bots: Vec<_> = ["mohe", "zhiwei", "xiaoguo"]
        .into_iter()
        .map(|a| world.bot(a))
        .collect();
    let observer = world.observer();
    let before = unique("@mohe @zhiwei @xiaoguo before the restart");
    world.say("anna", &before);
    // A person's line that addresses every agent is answered by each (reason `human`).
    for bot in &bots {
        wait_from(&observer, &bot.agent, 0, ANSWER)
            .unwrap_or_else(|| panic!("no reply from {}:\n{}", bot.agent, bot.log()));
    }
    let answered = world.llm.turn_messages();
    assert_eq!(answered, vec![format!("anna: {before}"); 3]);
    drop(observer);

    own.stop();
    std::thread::sleep(Duration::from_secs(2));
    own.start();
    for bot in &bots {
        assert!(
            bot.wait_log("joined", 2, Duration::from_secs(90)),
            "{} did not rejoin:\n{}",
            bot.agent,
            bot.log()
        );
        assert!(bot.log().contains("reconnected"), "{}", bot.log());
    }
    let observer = world.observer();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        world.llm.turn_messages(),
        answered,
        "no line is answered again after the restart"
    );
    let after = unique("@mohe @zhiwei @xiaoguo after the restart");
    world.say("anna", &after);
    for bot in &bots {
        wait_from(&observer, &bot.agent, 0, ANSWER)
            .unwrap_or_else(|| panic!("no reply after the restart:\n{}", bot.log()));
    }
    // Each bot's turn also carries the two other bots' replies it heard
    // and did not answer (not addressed), and nothing from before.
    let turns = world.llm.turn_messages();
    assert_eq!(turns.len(), 6, "{turns:?}");
    for turn in &turns[3..] {
        assert!(turn.ends_with(&format!("anna: {after}")), "{turn}");
        assert_eq!(turn.matches(&format!(": {REPLY}")).count(), 2, "{turn}");
        assert!(!turn.contains(&before), "{turn}");
    }
}

#[test]
fn a_turn_hermes_reports_failed_is_not_posted_and_the_line_stays_in_the_session() {
    let _world = hermes_world();
    let Some(world) = BotWorld::new(6) else {
        return;
    };
    let observer = world.observer();
    let bot = world.bot("mohe");
    world.llm.set_failing(true);
    let failed = unique("@mohe while the LLM fails");
    world.say("anna", &failed);
    // Hermes retries the LLM before it gives up (about 20 s).
    bot.expect_log(
        "no reply to anna: Hermes's turn failed",
        1,
        Duration::from_secs(120),
    );
    assert!(
        observer.count_from("mohe") == 0,
        "Hermes's error text is not posted to the room"
    );
    assert!(
        world
            .rows("xmpp-mohe-v2")
            .contains(&("user".into(), format!("anna: {failed}"))),
        "Hermes stored the line of the failed turn"
    );

    world.llm.set_failing(false);
    let next = unique("@mohe the LLM answers again");
    world.say("anna", &next);
    wait_from(&observer, "mohe", 0, ANSWER)
        .unwrap_or_else(|| panic!("no reply once the LLM answers:\n{}", bot.log()));
    // The LLM sees the failed turn's line once, from the session (Hermes
    // joins the two user rows in a row into one message).
    let turns = world.llm.turn_messages();
    assert_eq!(turns.len(), 1, "{turns:?}");
    assert_eq!(turns[0].matches(&failed).count(), 1, "{turns:?}");
    assert_eq!(turns[0].matches(&next).count(), 1, "{turns:?}");
}

#[test]
fn a_banned_bot_keeps_asking_and_takes_its_seat_again_once_let_in() {
    let _world = hermes_world();
    let Some(world) = BotWorld::new(6) else {
        return;
    };
    let bot = world.bot("mohe");
    let affiliation = |what: &str| {
        world.ej.api(
            "set_room_affiliation",
            &serde_json::json!({
                "name": world.ej.room_name,
                "service": world.ej.muc_service,
                "jid": world.ej.jid("mohe"),
                "affiliation": what,
            }),
        );
    };
    affiliation("outcast");
    bot.expect_log("banned (301)", 1, ANSWER);
    // The bot asks again and is refused.
    bot.expect_log("the room refused", 1, ANSWER);
    // Back as a member: ejabberd 23.01 seats a JID whose ban was lifted to
    // `none` as a visitor, whom a moderated room does not let speak (the
    // bot logs "refused the bot's message: forbidden").
    affiliation("member");
    // The bot takes its seat again.
    bot.expect_log("joined", 2, ANSWER);
    let observer = world.observer();
    let back = unique("@mohe welcome back");
    world.say("anna", &back);
    wait_from(&observer, "mohe", 0, ANSWER)
        .unwrap_or_else(|| panic!("no reply after the rejoin:\n{}", bot.log()));
    assert_eq!(world.llm.turn_messages(), vec![format!("anna: {back}")]);
}
