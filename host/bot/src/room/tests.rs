use super::*;

fn room() -> BareJid {
    BareJid::new("coregroup@conference.example.org").unwrap()
}

fn parse(xml: &str) -> Stanza {
    let elem: Element = xml.parse().unwrap();
    match elem.name() {
        "message" => Stanza::Message(Message::try_from(elem).unwrap()),
        _ => Stanza::Presence(Presence::try_from(elem).unwrap()),
    }
}

#[test]
fn a_live_message_carries_its_ids_marker_and_real_jid() {
    let jids = HashMap::from([("zhiwei".to_owned(), "zhiwei@example.org".to_owned())]);
    let stanza = parse(
        "<message xmlns='jabber:client' type='groupchat' id='m1' \
         from='coregroup@conference.example.org/zhiwei'><body>@mohe hi</body>\
         <origin-id xmlns='urn:xmpp:sid:0' id='o1'/>\
         <stanza-id xmlns='urn:xmpp:sid:0' id='s1' by='coregroup@conference.example.org'/>\
         <human-origin xmlns='urn:agentsmeeting:session-switch:0'/></message>",
    );
    let RoomEvent::Message(m) = classify(stanza, &room(), "mohe", &jids) else {
        panic!()
    };
    assert_eq!(m.occupant, "coregroup@conference.example.org/zhiwei");
    assert_eq!(m.jid.as_deref(), Some("zhiwei@example.org"));
    assert_eq!(m.body, "@mohe hi");
    assert!(m.human_origin && !m.delayed);
    assert_eq!(m.dedupe_key.as_deref(), Some("stanza-id:s1"));
}

#[test]
fn a_reply_names_its_target_and_loses_its_quoted_fallback() {
    let stanza = parse(
        "<message xmlns='jabber:client' type='groupchat' id='m2' \
         from='coregroup@conference.example.org/anna'>\
         <body>&gt; @mohe said hi\nzhiwei, agreed?</body>\
         <reply xmlns='urn:xmpp:reply:0' to='coregroup@conference.example.org/zhiwei' id='s9'/>\
         <fallback xmlns='urn:xmpp:fallback:0' for='urn:xmpp:reply:0'>\
         <body start='0' end='16'/></fallback>\
         <stanza-id xmlns='urn:xmpp:sid:0' id='s10' by='coregroup@conference.example.org'/>\
         </message>",
    );
    let RoomEvent::Message(m) = classify(stanza, &room(), "mohe", &HashMap::new()) else {
        panic!()
    };
    assert_eq!(m.body, "zhiwei, agreed?");
    assert_eq!(
        m.reply_to,
        Some((
            Some("coregroup@conference.example.org/zhiwei".into()),
            Some("s9".into())
        ))
    );
    assert_eq!(m.stanza_id.as_deref(), Some("s10"));
    // A fallback for something else is part of the body; one without a
    // range is the whole body.
    let other = parse(
        "<message xmlns='jabber:client' type='groupchat' \
         from='coregroup@conference.example.org/anna'><body>@mohe hi</body>\
         <reply xmlns='urn:xmpp:reply:0' id='s9'/>\
         <fallback xmlns='urn:xmpp:fallback:0' for='urn:xmpp:other:0'>\
         <body start='0' end='5'/></fallback></message>",
    );
    let RoomEvent::Message(m) = classify(other, &room(), "mohe", &HashMap::new()) else {
        panic!()
    };
    assert_eq!(m.body, "@mohe hi");
    assert_eq!(m.reply_to, Some((None, Some("s9".into()))));
    let whole = parse(
        "<message xmlns='jabber:client' type='groupchat' \
         from='coregroup@conference.example.org/anna'><body>&gt; @mohe</body>\
         <reply xmlns='urn:xmpp:reply:0' id='s9'/>\
         <fallback xmlns='urn:xmpp:fallback:0' for='urn:xmpp:reply:0'/></message>",
    );
    let RoomEvent::Message(m) = classify(whole, &room(), "mohe", &HashMap::new()) else {
        panic!()
    };
    assert_eq!(m.body, "");
}

#[test]
fn history_is_marked_delayed_and_other_stanzas_are_not_messages() {
    let delayed = parse(
        "<message xmlns='jabber:client' type='groupchat' \
         from='coregroup@conference.example.org/anna'><body>old</body>\
         <delay xmlns='urn:xmpp:delay' stamp='2026-01-01T00:00:00Z'/></message>",
    );
    let RoomEvent::Message(m) = classify(delayed, &room(), "mohe", &HashMap::new()) else {
        panic!()
    };
    assert!(m.delayed);
    assert_eq!(m.dedupe_key, None);
    let subject = parse(
        "<message xmlns='jabber:client' type='groupchat' \
         from='coregroup@conference.example.org'><subject>s</subject></message>",
    );
    assert_eq!(
        classify(subject, &room(), "mohe", &HashMap::new()),
        RoomEvent::Other
    );
    let other_room = parse(
        "<message xmlns='jabber:client' type='groupchat' \
         from='elsewhere@conference.example.org/anna'><body>x</body></message>",
    );
    assert_eq!(
        classify(other_room, &room(), "mohe", &HashMap::new()),
        RoomEvent::Other
    );
}

#[test]
fn own_presence_means_joined_or_left_and_others_tell_their_jid() {
    let joined = parse(
        "<presence xmlns='jabber:client' from='coregroup@conference.example.org/mohe'>\
         <x xmlns='http://jabber.org/protocol/muc#user'><item affiliation='none' \
         role='participant'/><status code='110'/></x></presence>",
    );
    assert_eq!(
        classify(joined, &room(), "mohe", &HashMap::new()),
        RoomEvent::Joined { jid: None }
    );
    // A non-anonymous room shows the bot its own real JID too.
    let joined = parse(
        "<presence xmlns='jabber:client' from='coregroup@conference.example.org/mohe'>\
         <x xmlns='http://jabber.org/protocol/muc#user'><item affiliation='member' \
         role='participant' jid='mohe@example.org/bot'/><status code='100'/>\
         <status code='110'/></x></presence>",
    );
    assert_eq!(
        classify(joined, &room(), "mohe", &HashMap::new()),
        RoomEvent::Joined {
            jid: Some("mohe@example.org".into())
        }
    );
    // A room that did not exist: the join created it (201).
    let created = parse(
        "<presence xmlns='jabber:client' from='coregroup@conference.example.org/mohe'>\
         <x xmlns='http://jabber.org/protocol/muc#user'><item affiliation='owner' \
         role='moderator'/><status code='110'/><status code='201'/></x></presence>",
    );
    assert_eq!(
        classify(created, &room(), "mohe", &HashMap::new()),
        RoomEvent::Created
    );
    let kicked = parse(
        "<presence xmlns='jabber:client' type='unavailable' \
         from='coregroup@conference.example.org/mohe'>\
         <x xmlns='http://jabber.org/protocol/muc#user'><item affiliation='none' \
         role='none'/><status code='110'/><status code='307'/></x></presence>",
    );
    assert_eq!(
        classify(kicked, &room(), "mohe", &HashMap::new()),
        RoomEvent::Left("kicked (307)".into())
    );
    let other = parse(
        "<presence xmlns='jabber:client' from='coregroup@conference.example.org/zhiwei'>\
         <x xmlns='http://jabber.org/protocol/muc#user'><item affiliation='none' \
         role='participant' jid='zhiwei@example.org/bot'/></x></presence>",
    );
    assert_eq!(
        classify(other, &room(), "mohe", &HashMap::new()),
        RoomEvent::Occupant {
            nick: "zhiwei".into(),
            jid: Some("zhiwei@example.org".into())
        }
    );
}

#[test]
fn the_join_asks_for_no_history_and_the_reply_has_an_origin_id() {
    let join: Element = join(&room(), "mohe").unwrap().into();
    let xml = String::from(&join);
    assert!(
        xml.contains("maxstanzas=\"0\"") || xml.contains("maxstanzas='0'"),
        "{xml}"
    );
    assert!(
        xml.contains("coregroup@conference.example.org/mohe"),
        "{xml}"
    );
    let reply: Element = reply(&room(), "ok", "r1").into();
    let xml = String::from(&reply);
    assert!(xml.contains("origin-id") && xml.contains("r1"), "{xml}");
    assert!(!xml.contains("human-origin"), "{xml}");
}
