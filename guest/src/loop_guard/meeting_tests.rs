//! Unit tests of the meeting rules: whom a message addresses (the docs'
//! example table), `require_mention`, free-response rooms,
//! `mention_patterns`, `allow_bots`, replies, and a person's stop; then
//! properties of addressing and the stop matcher over arbitrary text.

use super::*;
use crate::samples::sample_settings;
use proptest::prelude::*;

const ALICE: &str = "alice@example.org";

struct Room {
    settings: ValidSettings,
    states: Vec<GuardState<'static>>,
    now: f64,
}

impl Room {
    fn with(change: impl FnOnce(&mut crate::Settings)) -> Self {
        let mut settings = sample_settings();
        change(&mut settings);
        let settings = ValidSettings::new(settings).unwrap();
        let n = settings.agents().len();
        Self {
            settings,
            states: vec![GuardState::default(); n],
            now: 1000.0,
        }
    }

    fn new() -> Self {
        Self::with(|_| {})
    }

    /// Every agent's decision on `m`, by agent name order (mohe, zhiwei,
    /// xiaoguo).
    fn deliver(&mut self, m: &RoomMessage<'_>) -> Vec<Admission> {
        self.now += 1.0;
        let agents = self.settings.agents();
        (0..agents.len())
            .map(|i| admit(&self.settings, &agents[i], m, &mut self.states[i], self.now))
            .collect()
    }

    /// Who answers a person's `body`: the agents whose decision replies.
    fn answering(&mut self, body: &str) -> Vec<&'static str> {
        let d = self.deliver(&person(body));
        who(&d)
    }
}

fn who(d: &[Admission]) -> Vec<&'static str> {
    ["mohe", "zhiwei", "xiaoguo"]
        .into_iter()
        .zip(d)
        .filter(|(_, a)| a.reply)
        .map(|(n, _)| n)
        .collect()
}

fn person(body: &str) -> RoomMessage<'_> {
    RoomMessage {
        nick: "alice",
        jid: Some(ALICE),
        body,
        delayed: false,
        human_origin: false,
        stanza_id: None,
        reply_to: None,
        caught_up: false,
    }
}

fn agent<'a>(nick: &'a str, body: &'a str, id: Option<&'a str>) -> RoomMessage<'a> {
    RoomMessage {
        nick,
        jid: None,
        body,
        delayed: false,
        human_origin: false,
        stanza_id: id,
        reply_to: None,
        caught_up: false,
    }
}

/// The docs' table: each body and whether it addresses zhiwei.
const EXAMPLES: [(&str, bool); 9] = [
    ("@zhiwei hi", true),
    ("zhiwei: hi", true),
    ("zhiwei，你好", true),
    ("I agree with zhiwei", true),
    ("zhiwei2", false),
    ("＠ｚｈｉｗｅｉ", true),
    ("ZHIWEI, please", true),
    ("zhiweis idea", false),
    ("nobody here", false),
];

#[test]
fn the_example_table() {
    for (body, addressed) in EXAMPLES {
        let mut room = Room::new();
        let d = room.deliver(&person(body));
        assert_eq!(d[1].reply, addressed, "{body:?}: {:?}", d[1]);
        let expected = if addressed {
            AdmitReason::Human
        } else {
            AdmitReason::NotAddressed
        };
        assert_eq!(d[1].reason, expected, "{body:?}");
        // The others were not addressed: zhiwei was, or nobody was.
        let others = if addressed {
            AdmitReason::AddressedElsewhere
        } else {
            AdmitReason::NotAddressed
        };
        assert_eq!((d[0].reason, d[2].reason), (others, others), "{body:?}");
        assert!(!d[0].reply && !d[2].reply && d[0].heard && d[2].heard);
    }
}

#[test]
fn a_person_is_answered_by_whom_they_address_and_nobody_else() {
    let mut room = Room::new();
    assert_eq!(room.answering("@zhiwei what do you think?"), ["zhiwei"]);
    assert_eq!(room.answering("mohe and xiaoguo, go"), ["mohe", "xiaoguo"]);
    assert_eq!(
        room.answering("what does everyone think?"),
        Vec::<&str>::new()
    );
    // Off for everyone: a person who addresses nobody is answered by all,
    // and one who addresses someone still only by them.
    let mut room = Room::with(|s| s.meeting.require_mention = false);
    assert_eq!(
        room.answering("what does everyone think?"),
        ["mohe", "zhiwei", "xiaoguo"]
    );
    let d = room.deliver(&person("what does everyone think, again?"));
    assert_eq!(d[0].reason, AdmitReason::FreeResponse);
    assert_eq!(room.answering("@zhiwei only you"), ["zhiwei"]);
}

#[test]
fn a_free_response_room_is_the_configured_one_and_an_agents_own_value_wins() {
    let mut room = Room::with(|s| {
        s.meeting.free_response_rooms = vec!["coregroup@conference.example.org".into()];
        s.agents[2].meeting.require_mention = Some(true);
        s.agents[2].meeting.free_response_rooms = Some(vec![]);
    });
    assert_eq!(room.answering("anyone?"), ["mohe", "zhiwei"]);
    assert_eq!(room.answering("@xiaoguo you?"), ["xiaoguo"]);
    let mut room = Room::with(|s| {
        s.meeting.free_response_rooms = vec!["elsewhere@conference.example.org".into()];
    });
    assert_eq!(room.answering("anyone?"), Vec::<&str>::new());
}

#[test]
fn mention_patterns_are_wake_words() {
    let mut room = Room::with(|s| {
        s.agents[1].meeting.mention_patterns = Some(vec![r"\bzw\b".into(), "^team".into()]);
    });
    assert_eq!(room.answering("zw, your turn"), ["zhiwei"]);
    assert_eq!(room.answering("Team: status?"), ["zhiwei"]);
    assert_eq!(room.answering("zwx is not it"), Vec::<&str>::new());
    assert_eq!(room.answering("ＺＷ, full width"), ["zhiwei"]);
    // The room's patterns serve the agents without their own.
    let mut room = Room::with(|s| s.meeting.mention_patterns = vec!["^all:".into()]);
    assert_eq!(
        room.answering("all: stand-up"),
        ["mohe", "zhiwei", "xiaoguo"]
    );
}

#[test]
fn a_reply_addresses_the_author_of_the_message_by_nick_or_by_id() {
    let mut room = Room::new();
    // zhiwei says something; its id is remembered by every bot.
    room.deliver(&agent("zhiwei", "here is my plan", Some("s-1")));
    let mut reply = person("sounds good, go ahead");
    reply.reply_to = Some(ReplyTo {
        nick: Some("zhiwei"),
        id: None,
    });
    assert_eq!(who(&room.deliver(&reply)), ["zhiwei"]);
    reply.body = "sounds good, one more thing";
    reply.reply_to = Some(ReplyTo {
        nick: None,
        id: Some("s-1"),
    });
    assert_eq!(who(&room.deliver(&reply)), ["zhiwei"]);
    // A reply to a person's message addresses nobody by itself.
    reply.body = "agreed";
    reply.reply_to = Some(ReplyTo {
        nick: Some("bob"),
        id: Some("s-unknown"),
    });
    assert_eq!(who(&room.deliver(&reply)), Vec::<&str>::new());
    // The nick compares exactly, as the room seats nicks.
    reply.body = "agreed again";
    reply.reply_to = Some(ReplyTo {
        nick: Some("Zhiwei"),
        id: None,
    });
    assert_eq!(who(&room.deliver(&reply)), Vec::<&str>::new());
}

#[test]
fn allow_bots_none_mentions_and_all() {
    // mohe addresses zhiwei; xiaoguo is not addressed.
    let body = "zhiwei, your view?";
    let mut room = Room::new();
    room.answering("@mohe start");
    let d = room.deliver(&agent("mohe", body, None));
    assert_eq!(who(&d), ["zhiwei"]);
    assert_eq!(d[2].reason, AdmitReason::AddressedElsewhere);

    let mut room = Room::with(|s| s.meeting.allow_bots = AllowBots::None);
    room.answering("@mohe start");
    let d = room.deliver(&agent("mohe", body, None));
    assert_eq!(who(&d), Vec::<&str>::new());
    assert_eq!(d[1].reason, AdmitReason::BotsNotAllowed);
    assert!(d[1].heard);

    let mut room = Room::with(|s| s.meeting.allow_bots = AllowBots::All);
    room.answering("@mohe start");
    let d = room.deliver(&agent("mohe", body, None));
    // Addressing another agent still keeps xiaoguo quiet…
    assert_eq!(who(&d), ["zhiwei"]);
    // …and a message that addresses nobody is answered by all but mohe.
    let d = room.deliver(&agent("mohe", "done for today", None));
    assert_eq!(who(&d), ["zhiwei", "xiaoguo"]);
    assert_eq!(d[1].reason, AdmitReason::FreeResponse);
    // Still bounded by the loop guard.
    let mut n = 0;
    while !who(&room.deliver(&agent("zhiwei", &format!("more {n}"), None))).is_empty() {
        n += 1;
        assert!(n < 100, "allow_bots all escaped the bound");
    }
}

#[test]
fn a_room_wide_stop_holds_until_a_person_writes_again() {
    let mut room = Room::new();
    room.answering("@mohe @zhiwei discuss");
    assert_eq!(
        who(&room.deliver(&agent("mohe", "zhiwei?", None))),
        ["zhiwei"]
    );
    let d = room.deliver(&person("stop"));
    assert!(
        d.iter()
            .all(|a| !a.reply && a.stop && a.reason == AdmitReason::Stopped)
    );
    // The chain goes on in the room, and nobody answers it.
    for body in ["zhiwei, as I said", "mohe, yes", "xiaoguo?"] {
        let d = room.deliver(&agent("mohe", body, None));
        assert_eq!(who(&d), Vec::<&str>::new(), "{body}");
        assert!(
            d.iter()
                .skip(1)
                .all(|a| a.reason == AdmitReason::Stopped && !a.stop)
        );
    }
    // The stop survives a restart: the state is stored as JSON.
    room.states = room
        .states
        .iter()
        .map(|s| GuardState::from_json(&s.to_json()).unwrap().into_owned())
        .collect();
    assert_eq!(
        who(&room.deliver(&agent("zhiwei", "mohe!", None))),
        Vec::<&str>::new()
    );
    // A person's next message that is not a stop lifts it.
    assert_eq!(room.answering("@mohe @zhiwei go on"), ["mohe", "zhiwei"]);
    assert_eq!(
        who(&room.deliver(&agent("mohe", "zhiwei, go", None))),
        ["zhiwei"]
    );
}

#[test]
fn a_stop_that_addresses_agents_quiets_only_them() {
    let mut room = Room::new();
    room.answering("@mohe @zhiwei @xiaoguo discuss");
    let d = room.deliver(&person("@zhiwei stop"));
    assert_eq!(
        d.iter().map(|a| a.stop).collect::<Vec<_>>(),
        [false, true, false]
    );
    assert_eq!(
        d.iter().map(|a| a.reason).collect::<Vec<_>>(),
        [
            AdmitReason::AddressedElsewhere,
            AdmitReason::Stopped,
            AdmitReason::AddressedElsewhere
        ]
    );
    assert!(d.iter().all(|a| !a.reply));
    // mohe and xiaoguo talk on; zhiwei is quiet even when addressed.
    assert_eq!(
        who(&room.deliver(&agent("mohe", "zhiwei, xiaoguo: next", None))),
        ["xiaoguo"]
    );
    // A person's message to others does not wake zhiwei; one to zhiwei does.
    assert_eq!(room.answering("@xiaoguo and you?"), ["xiaoguo"]);
    let d = room.deliver(&person("anyone at all?"));
    assert_eq!(d[1].reason, AdmitReason::Stopped);
    assert_eq!(room.answering("@zhiwei back to you"), ["zhiwei"]);
    assert_eq!(
        who(&room.deliver(&agent("mohe", "zhiwei?", None))),
        ["zhiwei"]
    );
}

#[test]
fn after_a_stop_a_person_may_say_again_what_they_said_before() {
    let mut room = Room::new();
    assert_eq!(room.answering("@zhiwei go on"), ["zhiwei"]);
    room.deliver(&person("stop"));
    assert_eq!(room.answering("@zhiwei go on"), ["zhiwei"]);
    // The stop is lifted: agents are answered again.
    assert_eq!(
        who(&room.deliver(&agent("zhiwei", "mohe, your turn", None))),
        ["mohe"]
    );
}

#[test]
fn a_person_who_addresses_others_refuels_no_other_chain() {
    let mut room = Room::with(|s| s.loop_guard.max_hops = 3);
    room.answering("@mohe @zhiwei discuss");
    // mohe and zhiwei talk up to the bound.
    for n in 0..2 {
        room.deliver(&agent("mohe", &format!("zhiwei, point {n}"), None));
    }
    let d = room.deliver(&agent("zhiwei", "mohe, last point", None));
    assert_eq!(d[0].reason, AdmitReason::LoopGuard);
    // A person asks xiaoguo: mohe's counter stays where it was.
    let d = room.deliver(&person("@xiaoguo a quick question"));
    assert_eq!(who(&d), ["xiaoguo"]);
    assert_eq!(
        (d[0].reason, d[0].hops),
        (AdmitReason::AddressedElsewhere, 3)
    );
    assert_eq!(d[2].hops, 0);
    let d = room.deliver(&agent("zhiwei", "mohe, one more", None));
    assert_eq!(d[0].reason, AdmitReason::LoopGuard);
    // A person's message to nobody is for the whole room: it resets all.
    let d = room.deliver(&person("thanks, all of that helps"));
    assert!(d.iter().all(|a| a.hops == 0), "{d:?}");
}

#[test]
fn a_stop_repeated_in_the_duplicate_window_still_stops() {
    let mut room = Room::new();
    room.deliver(&person("stop"));
    room.answering("@mohe go on");
    let d = room.deliver(&person("stop"));
    assert!(d.iter().all(|a| a.stop), "{d:?}");
}

#[test]
fn a_message_never_addresses_its_own_sender() {
    let mut room = Room::with(|s| s.meeting.allow_bots = AllowBots::All);
    room.answering("@mohe start");
    // Under `all`, a reply that names only its sender addresses nobody, so
    // every other agent may answer it.
    let d = room.deliver(&agent("zhiwei", "reply 1 from zhiwei", None));
    assert_eq!(who(&d), ["mohe", "xiaoguo"]);
    let mut room = Room::new();
    room.answering("@mohe start");
    let d = room.deliver(&agent("zhiwei", "zhiwei here", None));
    assert_eq!(d[0].reason, AdmitReason::NotAddressed);
}

/// `m` as caught up on a bot's return.
fn caught_up(m: RoomMessage<'_>) -> RoomMessage<'_> {
    RoomMessage {
        caught_up: true,
        ..m
    }
}

#[test]
fn a_caught_up_line_is_heard_never_answered_never_a_hop() {
    let mut room = Room::new();
    room.deliver(&agent("zhiwei", "@mohe what now?", Some("z1")));
    let hops: Vec<u32> = room.states.iter().map(|s| s.hops).collect();
    // An agent's line from while the bot was away: heard, not counted.
    let d = room.deliver(&caught_up(agent("xiaoguo", "@mohe agreed", Some("x1"))));
    assert!(
        !d[0].reply && d[0].heard && d[0].reason == AdmitReason::CaughtUp,
        "{d:?}"
    );
    assert_eq!(room.states.iter().map(|s| s.hops).collect::<Vec<_>>(), hops);
    assert_eq!(d[2].reason, AdmitReason::OwnMessage);
    // It is remembered for replies, as a live one.
    assert_eq!(room.states[0].sayer_of("x1"), Some("xiaoguo"));
    // A person's line addressing mohe: heard, not answered, and it resets
    // mohe's counter as a live one does.
    let d = room.deliver(&caught_up(person("@mohe and you?")));
    assert!(d.iter().all(|a| !a.reply && a.heard), "{d:?}");
    assert_eq!(d[0].reason, AdmitReason::CaughtUp);
    assert_eq!(room.states[0].hops, 0);
}

#[test]
fn a_stop_caught_up_holds_after_the_return() {
    let mut room = Room::new();
    let d = room.deliver(&caught_up(person("stop")));
    assert!(d.iter().all(|a| a.stop && !a.reply), "{d:?}");
    let d = room.deliver(&agent("zhiwei", "@mohe go on", None));
    assert_eq!(d[0].reason, AdmitReason::Stopped, "{d:?}");
    assert!(!d[0].reply);
    // A person's caught-up message lifts it, as a live one does, and is
    // still not answered itself.
    let d = room.deliver(&caught_up(person("@mohe hello")));
    assert!(!d[0].reply && d[0].reason == AdmitReason::CaughtUp);
    assert!(room.deliver(&person("@mohe hello again"))[0].reply);
}

#[test]
fn an_agents_stop_is_just_a_message() {
    let mut room = Room::new();
    room.answering("@mohe @zhiwei discuss");
    let d = room.deliver(&agent("mohe", "zhiwei stop", None));
    assert!(d.iter().all(|a| !a.stop));
    assert_eq!(who(&d), ["zhiwei"]);
}

proptest! {
    /// A name with a letter, digit or `_` glued to it is another word: it
    /// never addresses the agent, whatever surrounds it.
    #[test]
    fn a_name_inside_a_longer_word_never_addresses(
        before in "[a-z0-9_]{0,3}",
        after in "[a-z0-9_]{0,3}",
        left in "[ ,.!?a-z]{0,12}",
        right in "[ ,.!?a-z]{0,12}",
    ) {
        prop_assume!(!before.is_empty() || !after.is_empty());
        let body = format!("{left} {before}zhiwei{after} {right}");
        prop_assume!(!left.contains("zhiwei") && !right.contains("zhiwei"));
        prop_assert!(!addresses(&body, "zhiwei", None), "{body:?}");
    }

    /// A name standing alone between blanks or punctuation addresses.
    #[test]
    fn a_whole_name_addresses(
        left in "[ ,.!?a-z]{0,12}",
        right in "[ ,.!?a-z]{0,12}",
        sep_l in "[ ,.:!?]",
        sep_r in "[ ,.:!?]",
        upper in any::<bool>(),
    ) {
        let name = if upper { "ZhiWei" } else { "zhiwei" };
        let body = format!("{left}{sep_l}{name}{sep_r}{right}");
        prop_assert!(addresses(&body, "zhiwei", None), "{body:?}");
    }

    /// A stop word stays a stop with any blanks, case and one final mark;
    /// with any other word beside it, it is no stop.
    #[test]
    fn the_stop_matcher(
        word in prop::sample::select(&session_switch_contract::meeting::DEFAULT_STOP_WORDS[..]),
        pad in "[ \t\u{3000}]{0,3}",
        mark in prop::sample::select(&["", ".", "!", "。", "！"][..]),
        extra in "[a-z]{1,6}",
        upper in any::<bool>(),
    ) {
        let words: Vec<String> = session_switch_contract::meeting::DEFAULT_STOP_WORDS
            .iter().map(|w| stop_form(w)).collect();
        let shown = if upper { word.to_uppercase() } else { word.to_string() };
        let body = format!("{pad}{shown}{mark}{pad}");
        prop_assert!(is_stop(&body, &words, &["zhiwei"]), "{body:?}");
        let named = format!("@zhiwei {shown}{mark}");
        prop_assert!(is_stop(&named, &words, &["zhiwei"]), "{named:?}");
        let longer = format!("{shown} {extra}");
        prop_assert!(!is_stop(&longer, &words, &["zhiwei"]), "{longer:?}");
    }

    /// An agent's own value of a setting wins over the room's; without one
    /// the room's serves, whatever the two are.
    #[test]
    fn an_agents_own_setting_wins(
        room_require in any::<bool>(),
        own_require in prop::option::of(any::<bool>()),
        room_bots in 0u8..3,
        own_bots in prop::option::of(0u8..3),
    ) {
        let bots = |n: u8| [AllowBots::None, AllowBots::Mentions, AllowBots::All][n as usize];
        let mut s = sample_settings();
        s.meeting.require_mention = room_require;
        s.meeting.allow_bots = bots(room_bots);
        s.agents[0].meeting.require_mention = own_require;
        s.agents[0].meeting.allow_bots = own_bots.map(bots);
        let v = ValidSettings::new(s).unwrap();
        let mohe = &v.agents()[0].meeting;
        prop_assert_eq!(mohe.require_mention, own_require.unwrap_or(room_require));
        prop_assert_eq!(mohe.allow_bots, bots(own_bots.unwrap_or(room_bots)));
        let zhiwei = &v.agents()[1].meeting;
        prop_assert_eq!(zhiwei.require_mention, room_require);
        prop_assert_eq!(zhiwei.allow_bots, bots(room_bots));
    }
}
