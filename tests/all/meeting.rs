//! The room as a meeting, end to end: three `xmpp-session-bridge
//! bot` processes in a room of the test's own on the real ejabberd, the
//! real Hermes API server against the fake LLM, and a person posting
//! through a real XMPP client. Who answers is read from the room (a real
//! occupant records what it broadcast) and from each bot's log.

use session_switch_tests::fake_llm::LOOP;
use session_switch_tests::hermes_world;
use session_switch_tests::room_bot::{ANSWER, BotProcess, BotWorld, quiet, unique, wait_from};
use session_switch_tests::room_observer::RoomObserver;
use std::time::{Duration, Instant};

const AGENTS: [&str; 3] = ["mohe", "zhiwei", "xiaoguo"];

/// The agents that posted in the room after its first `after` messages.
fn posters(observer: &RoomObserver, after: usize) -> Vec<String> {
    let mut who: Vec<String> = observer
        .messages()
        .iter()
        .skip(after)
        .filter(|m| AGENTS.contains(&m.nick.as_str()))
        .map(|m| m.nick.clone())
        .collect();
    who.sort();
    who.dedup();
    who
}

/// The index of the room's last reflection of `body` (posted by a person;
/// a reply's ends with it, after its quote).
fn position(observer: &RoomObserver, body: &str) -> usize {
    let deadline = Instant::now() + ANSWER;
    loop {
        if let Some(at) = observer
            .messages()
            .iter()
            .rposition(|m| m.nick == "anna" && m.body.ends_with(body))
        {
            return at;
        }
        assert!(Instant::now() < deadline, "the room never showed {body:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether `bot` logged a reply after it heard anna's first stop and
/// before its decision on anna's next message.
fn replied_after_the_stop(bot: &BotProcess) -> bool {
    let log = bot.log();
    let Some(at) = log.find("not answering anna: stopped") else {
        panic!("{} never heard the stop:\n{log}", bot.agent)
    };
    let rest = &log[at..];
    let rest = rest.split_once('\n').map_or("", |(_, r)| r);
    let rest = rest.find("answering anna").map_or(rest, |end| &rest[..end]);
    rest.lines().any(|l| l.contains("replied to"))
}

#[test]
fn a_person_addresses_agents_replies_and_stops_them() {
    let _world = hermes_world();
    let Some(world) = BotWorld::new(6) else {
        return;
    };
    let observer = world.observer();
    let bots: Vec<BotProcess> = AGENTS.iter().map(|a| world.bot(a)).collect();
    let still = Duration::from_secs(6);

    // `@zhiwei …`: zhiwei alone answers; the others heard it.
    let ask = unique("@zhiwei what is the plan?");
    world.say("anna", &ask);
    let at = position(&observer, &ask);
    assert!(wait_from(&observer, "zhiwei", at + 1, ANSWER).is_some());
    quiet(&observer, still);
    assert_eq!(posters(&observer, at), ["zhiwei"]);
    for bot in [&bots[0], &bots[2]] {
        assert!(
            bot.log().contains("addressed-elsewhere"),
            "{}:\n{}",
            bot.agent,
            bot.log()
        );
    }

    // An unaddressed line: nobody answers; mohe's next turn carries it.
    let aside = unique("the budget is 300 euros");
    world.say("anna", &aside);
    let at = position(&observer, &aside);
    quiet(&observer, still);
    assert!(posters(&observer, at).is_empty(), "nobody answers");
    let ask = unique("@mohe what did I say about the budget?");
    world.say("anna", &ask);
    let at = position(&observer, &ask);
    assert!(wait_from(&observer, "mohe", at + 1, ANSWER).is_some());
    let turn = world
        .llm
        .turn_messages()
        .into_iter()
        .find(|t| t.contains(&ask))
        .expect("mohe's turn");
    assert!(
        turn.contains(&format!("anna: {aside}")),
        "the heard line reaches the turn: {turn}"
    );
    quiet(&observer, still);
    assert_eq!(posters(&observer, at), ["mohe"]);

    // A reply to zhiwei's message is answered by zhiwei; the quoted
    // `@mohe` in its fallback addresses nobody.
    let answer = unique("go on please");
    world.reply("anna", &answer, "zhiwei", "@mohe said the plan is fine");
    let at = position(&observer, &answer);
    assert!(wait_from(&observer, "zhiwei", at + 1, ANSWER).is_some());
    quiet(&observer, still);
    assert_eq!(posters(&observer, at), ["zhiwei"]);

    // A chain of agents, then `stop`: no bot posts after it heard the stop.
    world.llm.set_delay(Duration::from_millis(1500));
    let start = unique(&format!("@zhiwei @mohe discuss {LOOP}"));
    world.say("anna", &start);
    let at = position(&observer, &start);
    let deadline = Instant::now() + ANSWER;
    while observer.messages().len() < at + 4 {
        assert!(Instant::now() < deadline, "no chain started");
        std::thread::sleep(Duration::from_millis(100));
    }
    world.say("anna", "stop");
    let stopped_at = position(&observer, "stop");
    let settled = quiet(&observer, Duration::from_secs(8));
    let after_stop = settled - stopped_at - 1;
    assert!(
        after_stop <= AGENTS.len(),
        "at most the replies already on their way: {after_stop}"
    );
    for bot in &bots {
        assert!(
            !replied_after_the_stop(bot),
            "{} posted after the stop:\n{}",
            bot.agent,
            bot.log()
        );
    }
    // The chain had replies under way or queued: they were dropped.
    let dropped: usize = bots
        .iter()
        .map(|b| b.count("not posted") + b.count("dropped"))
        .sum();
    assert!(dropped > 0, "nothing was under way at the stop");
    world.llm.set_delay(Duration::ZERO);

    // The person writes again: mohe answers.
    let again = unique("@mohe and now, a summary");
    world.say("anna", &again);
    let at = position(&observer, &again);
    assert!(wait_from(&observer, "mohe", at + 1, ANSWER).is_some());
    // Its turn carried the chain it heard, so the chain may resume; a
    // stop ends it again before the next step.
    quiet(&observer, still);
    world.say("anna", "stop!");
    quiet(&observer, still);

    // `@zhiwei stop` quiets zhiwei only: mohe and xiaoguo talk on, their
    // replies naming zhiwei too, and zhiwei posts nothing.
    world.say("anna", "@zhiwei stop");
    let at = position(&observer, "@zhiwei stop");
    let go = unique(&format!("@mohe @xiaoguo go on {LOOP}"));
    world.say("anna", &go);
    quiet(&observer, still);
    let talked = posters(&observer, at);
    assert!(
        talked.contains(&"mohe".into()) && talked.contains(&"xiaoguo".into()),
        "{talked:?}"
    );
    assert!(!talked.contains(&"zhiwei".into()), "{talked:?}");
    assert!(
        bots[1]
            .log()
            .contains("a person's stop holds until a person addresses it again")
    );
    world.say("anna", "stop");
    let settled = quiet(&observer, still);
    let back = unique("@zhiwei back to you");
    world.say("anna", &back);
    assert!(wait_from(&observer, "zhiwei", settled, ANSWER).is_some());
    quiet(&observer, still);
    drop(bots);

    // A free-response room: every bot answers a person who addresses
    // nobody. The lines the bots heard wait in state.db across their
    // restart, and the earlier chain's lines among them make the fake
    // LLM's replies name every agent, so the agents may answer each other
    // after that; a stop ends it.
    let config = world.config_with_bot_keys(
        "free.toml",
        &format!("free_response_rooms = [\"{}\"]", world.ej.room),
    );
    let bots: Vec<BotProcess> = AGENTS.iter().map(|a| world.bot_with(a, &config)).collect();
    let open = unique("a question for anyone");
    world.say("anna", &open);
    let at = position(&observer, &open);
    for (agent, bot) in AGENTS.iter().zip(&bots) {
        assert!(
            wait_from(&observer, agent, at + 1, ANSWER).is_some(),
            "{agent} answers in a free-response room:\n{}",
            bot.log()
        );
        assert!(
            bot.log().contains("answering anna (free-response)"),
            "{}",
            bot.log()
        );
    }
    world.say("anna", "stop");
    quiet(&observer, still);
    drop(bots);
}
