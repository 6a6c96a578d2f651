//! The room bot across a restart: the lines waiting for the
//! agent's next turn survive it, and what the room said while the bot was
//! away is caught up (the room's archive, XEP-0313, or its history since
//! the cursor where the room archives nothing), heard and never answered,
//! with the loop guard's state updated as live messages would update it.
//! Each case runs with the room's archive on and off, on the real
//! ejabberd and the real Hermes API server (hermes-agent 0.19.0) with the
//! fake LLM.

use session_switch_tests::fake_llm::{LOOP, REPLY};
use session_switch_tests::hermes_world;
use session_switch_tests::room_bot::{ANSWER, BotWorld, unique, wait_from};
use std::time::Duration;

/// A world whose room archives (`mam`) or not.
fn world(mam: bool) -> Option<BotWorld> {
    let world = BotWorld::new(6)?;
    world
        .ej
        .set_room_option("mam", if mam { "true" } else { "false" });
    Some(world)
}

/// The hop counter of `agent`'s loop-guard state in the world's room.
fn hops(world: &BotWorld, agent: &str) -> u64 {
    let conn = rusqlite::Connection::open(&world.db).unwrap();
    let key = format!("session_switch:loop:{agent}:{}", world.ej.room);
    let value: String = conn
        .query_row("SELECT value FROM state_meta WHERE key = ?1", [&key], |r| {
            r.get(0)
        })
        .unwrap();
    let state: serde_json::Value = serde_json::from_str(&value).unwrap();
    state["hops"].as_u64().unwrap()
}

/// The turns the fake LLM got whose last user message holds `line`.
fn turns_with(world: &BotWorld, line: &str) -> Vec<String> {
    world
        .llm
        .turn_messages()
        .into_iter()
        .filter(|t| t.contains(line))
        .collect()
}

fn lines_survive_a_restart_with_hermes_down(mam: bool) {
    let _world = hermes_world();
    let Some(mut world) = world(mam) else {
        return;
    };
    let observer = world.observer();
    let mut bot = world.bot("mohe");
    world.gateway.stop();
    let one = unique("@mohe first while Hermes is down");
    let two = unique("@mohe second while Hermes is down");
    for (n, line) in [&one, &two].into_iter().enumerate() {
        world.say("anna", line);
        bot.expect_log(
            "no reply to anna: Hermes API server unreachable",
            n + 1,
            ANSWER,
        );
    }
    assert!(bot.stop(), "SIGTERM: {}", bot.log());
    let bot = world.bot("mohe");
    bot.expect_log("2 lines from before wait for the next turn", 1, ANSWER);
    world.gateway.restart();
    let back = unique("@mohe Hermes is back");
    world.say("anna", &back);
    let reply = wait_from(&observer, "mohe", 0, ANSWER)
        .unwrap_or_else(|| panic!("no reply once Hermes is back:\n{}", bot.log()));
    assert!(reply.body.starts_with(REPLY), "{reply:?}");
    // Both lines once each, in order, and the two decided before the
    // restart are not caught up again.
    assert_eq!(
        world.llm.turn_messages(),
        vec![format!("anna: {one}\nanna: {two}\nanna: {back}")],
        "{}",
        bot.log()
    );
    std::thread::sleep(Duration::from_secs(2));
    let replies = observer.count_from("mohe");
    assert_eq!(replies, 1, "the lines heard before are never answered");
    let conn = rusqlite::Connection::open(&world.db).unwrap();
    let left: i64 = conn
        .query_row("SELECT COUNT(*) FROM session_switch_heard", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(left, 0, "Hermes took them: none is left waiting");
}

#[test]
fn heard_lines_survive_a_restart_with_hermes_down_archive_on() {
    lines_survive_a_restart_with_hermes_down(true);
}

#[test]
fn heard_lines_survive_a_restart_with_hermes_down_archive_off() {
    lines_survive_a_restart_with_hermes_down(false);
}

fn away_bot_hears_what_was_said(mam: bool) {
    let _world = hermes_world();
    let Some(world) = world(mam) else {
        return;
    };
    let observer = world.observer();
    let mut mohe = world.bot("mohe");
    let zhiwei = world.bot("zhiwei");
    // Decided just before the restart: answered once, never caught up.
    let before = unique("@mohe before you go");
    world.say("anna", &before);
    wait_from(&observer, "mohe", 0, ANSWER)
        .unwrap_or_else(|| panic!("mohe did not answer:\n{}", mohe.log()));
    assert!(mohe.stop(), "SIGTERM: {}", mohe.log());
    let seen = observer.messages().len();

    let to_mohe = unique("@mohe are you there");
    world.say("anna", &to_mohe);
    let to_zhiwei = unique("@zhiwei what do you think");
    world.say("anna", &to_zhiwei);
    let answer = wait_from(&observer, "zhiwei", seen, ANSWER)
        .unwrap_or_else(|| panic!("zhiwei did not answer:\n{}", zhiwei.log()));
    std::thread::sleep(Duration::from_secs(1));

    let mohe = world.bot("mohe");
    mohe.expect_log("not answering zhiwei: caught-up", 1, ANSWER);
    mohe.expect_log("not answering anna: caught-up", 1, ANSWER);
    mohe.expect_log("not answering anna: addressed-elsewhere", 1, ANSWER);
    // The persons' lines reset the counter, as live ones; zhiwei's line
    // after them is not counted (live, it would make 1).
    assert_eq!(hops(&world, "mohe"), 0, "{}", mohe.log());
    let now = observer.messages().len();
    let hello = unique("@mohe hello again");
    world.say("anna", &hello);
    let reply = wait_from(&observer, "mohe", now, ANSWER)
        .unwrap_or_else(|| panic!("mohe did not answer after its return:\n{}", mohe.log()));
    assert!(reply.body.starts_with(REPLY), "{reply:?}");
    let turn = turns_with(&world, &hello);
    assert_eq!(
        turn,
        vec![format!(
            "anna: {to_mohe}\nanna: {to_zhiwei}\nzhiwei: {}\nanna: {hello}",
            answer.body
        )],
        "the lines said while mohe was away, once each, and not the line it decided \
         before it went:\n{}",
        mohe.log()
    );
    std::thread::sleep(Duration::from_secs(2));
    let replies = observer.count_from("mohe");
    assert_eq!(replies, 2, "no caught-up line is answered:\n{}", mohe.log());
}

#[test]
fn a_bot_away_hears_what_was_said_meanwhile_archive_on() {
    away_bot_hears_what_was_said(true);
}

#[test]
fn a_bot_away_hears_what_was_said_meanwhile_archive_off() {
    away_bot_hears_what_was_said(false);
}

fn stop_said_while_away_holds(mam: bool) {
    let _world = hermes_world();
    let Some(world) = world(mam) else {
        return;
    };
    let observer = world.observer();
    let mut mohe = world.bot("mohe");
    let zhiwei = world.bot("zhiwei");
    // mohe decides a message before it goes: it has a cursor to catch up
    // from (a first start catches nothing up).
    world.say("anna", &unique("@zhiwei hi"));
    wait_from(&observer, "zhiwei", 0, ANSWER)
        .unwrap_or_else(|| panic!("zhiwei did not answer:\n{}", zhiwei.log()));
    mohe.expect_log("not answering zhiwei", 1, ANSWER);
    assert!(mohe.stop(), "SIGTERM: {}", mohe.log());
    world.say("anna", "@mohe stop");
    let mohe = world.bot("mohe");
    mohe.expect_log("not answering anna: stopped", 1, ANSWER);
    // zhiwei's reply names mohe: the stop holds, as no person addressed
    // mohe since.
    let seen = observer.messages().len();
    world.say("anna", &unique(&format!("@zhiwei go on {LOOP}")));
    let answer = wait_from(&observer, "zhiwei", seen, ANSWER)
        .unwrap_or_else(|| panic!("zhiwei did not answer:\n{}", zhiwei.log()));
    assert!(answer.body.contains("mohe"), "{answer:?}");
    mohe.expect_log("not answering zhiwei: stopped", 1, ANSWER);
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        wait_from(&observer, "mohe", seen, Duration::from_millis(10)).is_none(),
        "{}",
        mohe.log()
    );
}

#[test]
fn a_stop_said_while_the_bot_was_away_holds_archive_on() {
    stop_said_while_away_holds(true);
}

#[test]
fn a_stop_said_while_the_bot_was_away_holds_archive_off() {
    stop_said_while_away_holds(false);
}

/// Killed while a turn ran and another was decided and waiting: after the
/// restart the waiting one is answered once, the one Hermes had taken is
/// not answered again.
#[test]
fn a_turn_decided_before_a_kill_is_answered_after_the_restart() {
    let _world = hermes_world();
    let Some(world) = world(true) else {
        return;
    };
    let observer = world.observer();
    let mut mohe = world.bot("mohe");
    world.llm.set_delay(Duration::from_secs(6));
    world.say("anna", &unique("@mohe zero"));
    mohe.expect_log("answering anna", 1, ANSWER);
    let one = unique("@mohe one");
    let two = unique("@mohe two");
    world.say("anna", &one);
    world.say("anna", &two);
    // Turn zero ends, both are decided, turn one starts: killed once
    // Hermes has stored its line, which the restarted bot must find.
    mohe.expect_log("answering anna", 2, ANSWER);
    let deadline = std::time::Instant::now() + ANSWER;
    while !hermes_stored(&world, &one) {
        assert!(
            std::time::Instant::now() < deadline,
            "Hermes never stored turn one's line:\n{}",
            mohe.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    mohe.kill();
    let before = observer.messages().len();
    world.llm.set_delay(Duration::ZERO);
    let mohe = world.bot("mohe");
    mohe.expect_log("not answering anna again", 1, ANSWER);
    let reply = wait_from(&observer, "mohe", before, ANSWER)
        .unwrap_or_else(|| panic!("the waiting turn was not answered:\n{}", mohe.log()));
    assert!(reply.body.starts_with(REPLY), "{reply:?}");
    std::thread::sleep(Duration::from_secs(3));
    let after: Vec<_> = observer.messages()[before..]
        .iter()
        .filter(|m| m.nick == "mohe")
        .cloned()
        .collect();
    assert_eq!(after.len(), 1, "{after:?}\n{}", mohe.log());
    let ends_with = |line: &str| {
        world
            .llm
            .turn_messages()
            .iter()
            .filter(|t| t.ends_with(&format!("anna: {line}")))
            .count()
    };
    assert_eq!((ends_with(&one), ends_with(&two)), (1, 1), "{}", mohe.log());
}

/// Whether Hermes has stored a user row ending with `line` in any session.
fn hermes_stored(world: &BotWorld, line: &str) -> bool {
    let conn = rusqlite::Connection::open(&world.db).unwrap();
    conn.busy_timeout(Duration::from_millis(200)).unwrap();
    conn.query_row(
        "SELECT COUNT(*) FROM messages WHERE role = 'user' AND substr(content, -length(?1)) = ?1",
        [line],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
    .unwrap_or(false)
}
