//! Unit tests of the loop guard: the rule on simulated rooms, its state
//! in JSON, `admit_message` over the fake host, and addressing.

use super::*;
use crate::samples::sample_settings;

fn msg<'a>(nick: &'a str, jid: Option<&'a str>, body: &'a str) -> RoomMessage<'a> {
    RoomMessage {
        nick,
        jid,
        body,
        delayed: false,
        human_origin: false,
        stanza_id: None,
        reply_to: None,
        caught_up: false,
    }
}

struct Room {
    settings: ValidSettings,
    states: Vec<GuardState<'static>>,
}

impl Room {
    fn new() -> Self {
        let settings = ValidSettings::new(sample_settings()).unwrap();
        let n = settings.agents().len();
        Self {
            settings,
            states: vec![GuardState::default(); n],
        }
    }
    /// Change the settings the room's agents decide by.
    fn set(&mut self, change: impl FnOnce(&mut crate::Settings)) {
        let mut settings = self.settings.settings().clone();
        change(&mut settings);
        self.settings = ValidSettings::new(settings).unwrap();
    }
    fn max_hops(&self) -> u32 {
        self.settings.loop_guard().max_hops
    }
    /// Every agent's decision on one message, in agent order.
    fn deliver(&mut self, m: &RoomMessage<'_>, now: f64) -> Vec<Admission> {
        let agents = self.settings.agents();
        (0..agents.len())
            .map(|i| admit(&self.settings, &agents[i], m, &mut self.states[i], now))
            .collect()
    }
}

#[test]
fn two_agents_answering_each_other_stop_at_max_hops() {
    let mut room = Room::new();
    let a = room.deliver(
        &msg("alice", Some("alice@example.org"), "hi mohe and zhiwei"),
        0.0,
    );
    assert!(a[0].reply && a[1].reply, "{a:?}");
    // mohe and zhiwei answer each other, naming the other.
    let mut agent_messages = 0;
    let mut speaker = ("mohe", "zhiwei");
    for t in 1..100 {
        let body = format!("{} turn {t}", speaker.1);
        let d = room.deliver(&msg(speaker.0, None, &body), f64::from(t) * 70.0);
        agent_messages += 1;
        let other = if speaker.1 == "mohe" { 0 } else { 1 };
        if !d[other].reply {
            assert_eq!(d[other].reason, AdmitReason::LoopGuard, "{d:?}");
            assert_eq!(d[other].hops, 6);
            break;
        }
        speaker = (speaker.1, speaker.0);
    }
    assert_eq!(agent_messages, 6, "(2 - 1) × max_hops, even 70 s apart");
}

#[test]
fn a_human_resets_and_a_delayed_human_does_not() {
    let mut room = Room::new();
    for t in 0..6 {
        room.deliver(&msg("zhiwei", None, &format!("mohe {t}")), f64::from(t));
    }
    assert_eq!(
        room.deliver(&msg("zhiwei", None, "mohe 7"), 7.0)[0].reason,
        AdmitReason::LoopGuard
    );
    let mut replay = msg("alice", None, "mohe wake up");
    replay.delayed = true;
    assert_eq!(room.deliver(&replay, 8.0)[0].reason, AdmitReason::Delayed);
    assert_eq!(
        room.deliver(&msg("zhiwei", None, "mohe 9"), 9.0)[0].reason,
        AdmitReason::LoopGuard
    );
    assert_eq!(
        room.deliver(&msg("alice", None, "mohe wake up"), 10.0)[0].reason,
        AdmitReason::Human
    );
    let d = room.deliver(&msg("zhiwei", None, "mohe 11"), 11.0);
    assert_eq!((d[0].reply, d[0].hops), (true, 1));
}

#[test]
fn the_marker_counts_only_from_an_agents_real_jid() {
    let mut room = Room::new();
    for t in 0..6 {
        room.deliver(&msg("zhiwei", None, &format!("mohe {t}")), f64::from(t));
    }
    let mut forged = msg(
        "zhiwei",
        Some("mallory@example.org"),
        "mohe: a person typed this",
    );
    forged.human_origin = true;
    let d = room.deliver(&forged, 7.0);
    assert_eq!(d[0].reason, AdmitReason::LoopGuard, "{d:?}");
    let mut real = msg(
        "zhiwei",
        Some("zhiwei@example.org/bridge"),
        "mohe: a person typed that",
    );
    real.human_origin = true;
    let d = room.deliver(&real, 8.0);
    assert_eq!((d[0].reason, d[0].hops), (AdmitReason::Human, 0));
    assert_eq!(
        d[1].reason,
        AdmitReason::OwnMessage,
        "the sender's own bot never answers"
    );
    assert_eq!(d[1].hops, 0, "but its chain is reset too");
}

/// ejabberd seats `MoHe`, `mohe ` and ` mohe` beside `mohe` (its
/// resourceprep keeps case and blanks): each is a person to every bot, not
/// mohe (nicks compare exactly).
#[test]
fn a_nick_in_another_case_is_another_occupant() {
    let mut room = Room::new();
    for t in 0..6 {
        room.deliver(&msg("zhiwei", None, &format!("mohe {t}")), f64::from(t));
    }
    for (t, nick) in [
        (7.0, "MoHe"),
        (8.0, "MOHE"),
        (9.0, "ｍｏｈｅ"),
        (10.0, "mohe "),
        (11.0, " mohe"),
    ] {
        let d = room.deliver(
            &msg(nick, None, &format!("mohe and zhiwei, {nick} here")),
            t,
        );
        assert_eq!(
            (d[0].reason, d[0].reply),
            (AdmitReason::Human, true),
            "{nick}: {d:?}"
        );
        assert_eq!(
            (d[1].reason, d[1].hops),
            (AdmitReason::Human, 0),
            "{nick}: {d:?}"
        );
    }
}

#[test]
fn own_and_unaddressed_messages_still_count() {
    let mut room = Room::new();
    let d = room.deliver(&msg("mohe", None, "just thinking aloud"), 0.0);
    assert_eq!(d[0].reason, AdmitReason::OwnMessage);
    assert_eq!(d[1].reason, AdmitReason::NotAddressed);
    assert!(d.iter().all(|a| a.hops == 1), "{d:?}");
}

#[test]
fn the_same_body_twice_is_answered_once() {
    let mut room = Room::new();
    assert!(room.deliver(&msg("alice", None, "Hello  mohe"), 0.0)[0].reply);
    let d = room.deliver(&msg("alice", None, "hello mohe "), 60.0);
    assert_eq!(d[0].reason, AdmitReason::Duplicate);
    assert!(
        room.deliver(&msg("alice", None, "hello mohe"), 700.0)[0].reply,
        "after the window"
    );
    // A refused repeat does not restart the window: "@mohe ping" every
    // 500 s is answered every other time.
    let mut room = Room::new();
    let answered: Vec<bool> = [0.0, 500.0, 1000.0, 1500.0]
        .iter()
        .map(|&t| room.deliver(&msg("alice", None, "@mohe ping"), t)[0].reply)
        .collect();
    assert_eq!(answered, [true, false, true, false]);
}

/// The window keeps its newest `window_messages + 1` times: the same
/// decisions as every time, in a state that stays small (a day-long window
/// of every time would grow past `admit`'s memory cap).
#[test]
fn the_room_window_keeps_no_more_than_decides() {
    let mut room = Room::new();
    room.set(|s| s.loop_guard.max_hops = 100_000);
    room.set(|s| s.loop_guard.window_seconds = 86_400);
    let mut refused_from = None;
    for t in 0..1000 {
        let d = room.deliver(&msg("zhiwei", None, &format!("mohe {t}")), f64::from(t));
        if !d[0].reply && refused_from.is_none() {
            refused_from = Some(t);
        }
        if refused_from.is_some() {
            assert_eq!(d[0].reason, AdmitReason::LoopGuard, "{t}");
        }
    }
    assert_eq!(refused_from, Some(20));
    let limit = room.settings.loop_guard().window_messages as usize + 1;
    assert!(room.states.iter().all(|s| s.window.len() <= limit));
    // A person still gets through; agents after the window passes.
    assert!(room.deliver(&msg("alice", None, "mohe?"), 1000.0)[0].reply);
    assert!(room.deliver(&msg("zhiwei", None, "mohe again"), 1000.0 + 86_400.0)[0].reply);
}

#[test]
fn the_room_window_caps_a_burst() {
    let mut room = Room::new();
    room.set(|s| s.loop_guard.max_hops = 1000);
    let mut refused = None;
    for t in 0..30 {
        let d = room.deliver(&msg("zhiwei", None, &format!("mohe {t}")), f64::from(t));
        if !d[0].reply {
            refused = Some((t, d[0].detail.clone()));
            break;
        }
    }
    let (t, detail) = refused.unwrap();
    assert_eq!(t, 20, "the 21st agent message in 300 s");
    assert!(detail.contains("in the last 300 s"), "{detail}");
}

/// A capped window, then a person addresses mohe: mohe answers, and the
/// agents' chain that follows is bounded again (the window starts
/// afresh), not refused at once.
#[test]
fn a_person_resets_the_room_window() {
    let mut room = Room::new();
    room.set(|s| s.loop_guard.max_hops = 1000);
    // Agent messages until the window refuses one: the 21st in 300 s.
    let chain = |room: &mut Room, start: f64| {
        (0..30)
            .find(|&i| {
                let body = format!("mohe {start} {i}");
                let d = room.deliver(&msg("zhiwei", None, &body), start + f64::from(i));
                !d[0].reply
            })
            .map(|i| (i, room.states[0].window.len()))
    };
    assert_eq!(chain(&mut room, 0.0), Some((20, 21)));
    let d = room.deliver(&msg("alice", None, "@mohe are you there?"), 30.0);
    assert_eq!(
        (d[0].reply, d[0].reason, d[0].hops),
        (true, AdmitReason::Human, 0),
        "{d:?}"
    );
    // The window of the agent the person addressed.
    assert!(room.states[0].window.is_empty());
    assert_eq!(chain(&mut room, 31.0), Some((20, 21)), "bounded again");
}

#[test]
fn state_round_trips_through_json_and_refuses_foreign_text() {
    let mut room = Room::new();
    for t in 0..3 {
        room.deliver(&msg("zhiwei", None, &format!("mohe {t}")), f64::from(t));
    }
    let text = room.states[0].to_json();
    assert_eq!(GuardState::from_json(&text).as_ref(), Some(&room.states[0]));
    for bad in [
        "",
        "{}",
        "[1]",
        r#"{"v":2,"hops":1,"window":[],"seen":[]}"#,
        r#"{"v":1,"hops":-1,"window":[],"seen":[]}"#,
    ] {
        assert_eq!(GuardState::from_json(bad), None, "{bad}");
    }
}

/// Three agents that answer everything, naming the others, with a
/// random delivery order per bot (deciding apart from posting): each
/// agent replies at most `max_hops` times per human message and the room
/// stays within `n × max_hops`; with one order for all, within
/// `(n - 1) × max_hops + 1`.
#[test]
fn flooding_agents_stay_within_the_bound_in_any_delivery_order() {
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..300 {
        let same_order = round % 3 == 0;
        let mut room = Room::new();
        room.set(|s| s.loop_guard.max_hops = 2 + (next() % 6) as u32);
        let max_hops = room.max_hops() as usize;
        let agents: Vec<String> = room
            .settings
            .agents()
            .iter()
            .map(|a| a.agent.nick.clone())
            .collect();
        let n = agents.len();
        // Each bot's inbox: (sender index or None for the person, body).
        let mut log: Vec<(Option<usize>, String)> =
            vec![(None, "hello mohe zhiwei xiaoguo".into())];
        let mut read = vec![0usize; n];
        let mut replies = vec![0usize; n];
        let mut now = 0.0;
        loop {
            // A bot with unread messages, chosen at random (or in turn).
            let pending: Vec<usize> = (0..n).filter(|&i| read[i] < log.len()).collect();
            if pending.is_empty() {
                break;
            }
            let i = if same_order {
                pending[0]
            } else {
                pending[(next() % pending.len() as u64) as usize]
            };
            let (from, body) = log[read[i]].clone();
            read[i] += 1;
            now += 1.0 + (next() % 100) as f64;
            let nick = from.map_or("alice", |f| agents[f].as_str());
            let agents_all = room.settings.agents();
            let d = admit(
                &room.settings,
                &agents_all[i],
                &msg(nick, None, &body),
                &mut room.states[i],
                now,
            );
            if d.reply {
                replies[i] += 1;
                let others: Vec<&str> = (0..n)
                    .filter(|&j| j != i)
                    .map(|j| agents[j].as_str())
                    .collect();
                log.push((
                    Some(i),
                    format!(
                        "{} reply {} from {}",
                        others.join(" "),
                        replies[i],
                        agents[i]
                    ),
                ));
            }
            assert!(log.len() < 10_000, "the room never fell silent");
        }
        let total = log.len() - 1;
        assert!(
            replies.iter().all(|&r| r <= max_hops),
            "round {round}: {replies:?}, max_hops {max_hops}"
        );
        assert!(
            total <= n * max_hops,
            "round {round}: {total} > {n} × {max_hops}"
        );
        if same_order {
            assert!(
                total <= (n - 1) * max_hops + 1,
                "round {round}: {total}, max_hops {max_hops}"
            );
        }
    }
}

fn wit(occupant: &str, jid: Option<&str>, body: &str) -> WitMessage {
    WitMessage {
        occupant: occupant.into(),
        jid: jid.map(Into::into),
        body: body.into(),
        delayed: false,
        human_origin: false,
        stanza_id: None,
        reply_to: None,
        caught_up: false,
    }
}

const ROOM: &str = "coregroup@conference.example.org";

#[test]
fn admit_message_keeps_the_state_under_the_agents_key() {
    let settings = ValidSettings::new(sample_settings()).unwrap();
    let mut host = crate::fake_host::at(1000.0, ROOM);
    let d = admit_message(
        &settings,
        &mut host,
        "mohe",
        &wit(&format!("{ROOM}/zhiwei"), None, "mohe, over to you"),
    )
    .unwrap();
    assert_eq!(
        (d.reply, d.reason, d.hops),
        (true, AdmitReason::Addressed, 1)
    );
    let key = format!("session_switch:loop:mohe:{ROOM}");
    let snapshot = host.snapshot();
    let stored = GuardState::from_json(&snapshot.meta[&key]).unwrap();
    assert_eq!(stored.hops, 1);
    assert_eq!(snapshot.meta.len(), 1, "{:?}", snapshot.meta);
    // Delayed history changes nothing: nothing is written.
    host.state().meta.insert(key.clone(), "kept".into());
    let mut replay = wit(&format!("{ROOM}/alice"), None, "hello");
    replay.delayed = true;
    let d = admit_message(&settings, &mut host, "mohe", &replay);
    // "kept" is malformed: read as capped, and rewritten even so.
    assert_eq!(d.unwrap().reason, AdmitReason::Delayed);
    assert!(GuardState::from_json(&host.snapshot().meta[&key]).is_some());
}

#[test]
fn a_malformed_state_fails_closed_for_agents_and_open_for_people() {
    let settings = ValidSettings::new(sample_settings()).unwrap();
    let key = format!("session_switch:loop:mohe:{ROOM}");
    // "": what the host hands over for a value too long to be ours.
    for bad in [
        "",
        "{not json",
        "[]",
        r#"{"v":1,"hops":"3","window":[],"seen":[]}"#,
    ] {
        let mut host = crate::fake_host::at(1000.0, ROOM);
        host.state().meta.insert(key.clone(), bad.into());
        let d = admit_message(
            &settings,
            &mut host,
            "mohe",
            &wit(&format!("{ROOM}/zhiwei"), None, "mohe?"),
        )
        .unwrap();
        assert_eq!(
            (d.reply, d.reason, d.hops),
            (false, AdmitReason::LoopGuard, 7),
            "{bad}"
        );
        assert!(
            d.detail.contains("was not valid: read as 6 hops"),
            "{}",
            d.detail
        );
        assert!(
            host.guest()
                .logs
                .iter()
                .any(|(_, l)| l.contains("is not a state of ours")),
            "{:?}",
            host.guest().logs
        );
        let snapshot = host.snapshot();
        let stored = GuardState::from_json(&snapshot.meta[&key]).expect("rewritten whole");
        assert_eq!(stored.hops, 7);
        let d = admit_message(
            &settings,
            &mut host,
            "mohe",
            &wit(&format!("{ROOM}/alice"), Some("alice@example.org"), "mohe?"),
        )
        .unwrap();
        assert_eq!((d.reply, d.reason, d.hops), (true, AdmitReason::Human, 0));
    }
}

#[test]
fn admit_message_refuses_bad_occupants_unknown_agents_and_a_broken_clock() {
    let settings = ValidSettings::new(sample_settings()).unwrap();
    let mut host = crate::fake_host::at(1000.0, ROOM);
    for occupant in [
        "zhiwei",
        "other@conference.example.org/zhiwei",
        &format!("{ROOM}/"),
    ] {
        let e = admit_message(&settings, &mut host, "mohe", &wit(occupant, None, "x")).unwrap_err();
        assert_eq!(e.kind, crate::FailureKind::BadInput, "{occupant}");
        assert!(e.message.contains("is not `room/nick`"), "{}", e.message);
    }
    let e = admit_message(
        &settings,
        &mut host,
        "nobody",
        &wit(&format!("{ROOM}/a"), None, "x"),
    )
    .unwrap_err();
    assert_eq!(e.kind, crate::FailureKind::UnknownAgent);
    host.state().now = f64::NAN;
    let e = admit_message(
        &settings,
        &mut host,
        "mohe",
        &wit(&format!("{ROOM}/a"), None, "x"),
    )
    .unwrap_err();
    assert_eq!(e.kind, crate::FailureKind::Policy);
    assert!(e.message.contains("not a Unix time"), "{}", e.message);
    assert!(
        host.snapshot().meta.is_empty(),
        "nothing written: {:?}",
        host.snapshot().meta
    );
}

#[test]
fn addressing_is_by_whole_word() {
    assert!(addresses("mohe, could you", "mohe", None));
    assert!(addresses("Thanks MOHE!", "mohe", None));
    assert!(addresses("＠ｍｏｈｅ ｐｌｅａｓｅ", "mohe", Some("@mohe")));
    assert!(addresses("Ｍｏｈｅ，好", "mohe", None));
    assert!(!addresses("ｍｏｈｅ２ said so", "mohe", None));
    assert!(addresses("ping @mohe", "mohe", Some("@mohe")));
    assert!(!addresses("mohe2 said so", "mohe", None));
    assert!(!addresses("nothing here", "mohe", Some("@mohe")));
    assert!(addresses("墨河 mohe：好", "mohe", None));
    // Scripts without spaces between words.
    for body in [
        "@mohe你好",
        "mohe你好",
        "你好mohe",
        "请mohe看一下",
        "mohe는",
    ] {
        assert!(addresses(body, "mohe", Some("@mohe")), "{body}");
    }
    assert!(addresses("我是墨河啊", "墨河", None));
    // A combining mark makes another word, as the precomposed letter does.
    assert!(!addresses("mohe\u{301} said", "mohe", None));
    assert!(!addresses("mohé said", "mohe", None));
    assert!(!addresses("mohe_bot said", "mohe", None));
}
