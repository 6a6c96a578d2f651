//! The ejabberd transports against the real ejabberd of the test run
//! (`tests/ejabberd/with-ejabberd.sh`, started once by `make test`), with a
//! real XMPP occupant (`muc_probe.py`) checking what the room broadcast.
//!
//! Failure cases that need a misbehaving server use stand-ins, each named as
//! such: a dead node (a copy of the instance's ctl config naming a node that
//! is not running), an unused port, a command that never answers, and a TCP
//! listener that never answers HTTP.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use session_switch::{Failure, FailureKind};
use session_switch_tests::room_observer::RoomObserver;
use session_switch_tests::workspace_root;
use session_switch_tests::xmpp::{Ejabberd, REQUIRE_ENV, unused_port};
use session_switch_transport::{
    EJABBERDCTL_TIMEOUT, EjabberdCtl, HTTP_TIMEOUT, HttpApi, Transport,
};

/// How long a posted body may take to reach the observer (measured: well
/// under a second; the margin absorbs a loaded 2-core machine).
const DELIVERY: Duration = Duration::from_secs(20);

/// Slack over a time limit for killing, reaping and scheduling.
const SLACK: Duration = Duration::from_secs(3);

/// A tag no other test or run uses, so an observer that sees the whole
/// room's traffic matches only this test's bodies.
fn tag() -> String {
    static COUNT: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .subsec_nanos();
    format!(
        "#t{}-{}-{nanos}",
        std::process::id(),
        COUNT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Bodies a shell, an argv parser, JSON or the Erlang VM's locale could
/// mangle. Each must arrive byte-identical.
fn tricky_bodies(tag: &str) -> Vec<String> {
    vec![
        format!("中文消息：你好，世界。{tag}"),
        format!("emoji 🚀👍🏽 and a ZWJ sequence 👩‍💻 {tag}"),
        format!("\"double\" and 'single' quotes, `backticks` {tag}"),
        format!(r"back\slash, \n stays two characters, \\ two, C:\path {tag}"),
        format!("line one\nline two\n\nline four after a blank, a\ttab {tag}"),
        format!("$(id) `id` $HOME ${{PATH}}; rm -rf / && echo pwned {tag}"),
        format!("-x a leading dash {tag}"),
        format!("--help a leading double dash {tag}"),
        format!("x\", \"y {tag}"),
        format!("the bot said [YOU] inside the text {tag}"),
        format!("<b>tag</b> &amp; & ]]> {tag}"),
        format!("  leading and trailing spaces {tag}  "),
    ]
}

fn ctl(argv: Vec<String>, timeout: Duration) -> EjabberdCtl {
    EjabberdCtl::new(argv, timeout).expect("valid ejabberdctl argv")
}

fn http(url: &str, timeout: Duration) -> HttpApi {
    HttpApi::new(url, None, timeout).expect("valid API URL")
}

/// Check `sender`, post every tricky body, and see each arrive from
/// `sender`'s nick exactly as posted.
fn assert_delivers_tricky_bodies(t: &dyn Transport, ej: &Ejabberd, sender: &str) {
    let observer = RoomObserver::join(ej);
    let from = ej.jid(sender);
    t.check_sender(&from, &ej.room)
        .unwrap_or_else(|f| panic!("{}: check_sender({from}): {f}", t.name()));
    let tag = tag();
    let bodies = tricky_bodies(&tag);
    for body in &bodies {
        t.post(&from, &ej.room, body)
            .unwrap_or_else(|f| panic!("{}: post {body:?}: {f}", t.name()));
    }
    for body in &bodies {
        let nick = observer.wait_for_body(body, DELIVERY);
        let mine: Vec<_> = observer
            .messages()
            .into_iter()
            .filter(|m| m.body.contains(&tag))
            .collect();
        assert_eq!(
            nick.as_deref(),
            Some(sender),
            "{}: {body:?} did not arrive byte-identical from {sender}; this test's messages \
             in the room: {mine:?}",
            t.name()
        );
        // A person's post (docs/src/design/loop-guard.md): the human-origin marker, a stanza
        // id and the same XEP-0359 origin-id, unique per post.
        let got = mine.iter().find(|m| &m.body == body).unwrap();
        assert!(got.human_origin, "{}: no marker on {got:?}", t.name());
        let id = got.id.as_deref().unwrap_or_default();
        assert!(id.starts_with("ssw-") && id.len() == 36, "{got:?}");
        assert_eq!(got.origin_id.as_deref(), Some(id), "{got:?}");
    }
    let ids: std::collections::HashSet<_> = observer
        .messages()
        .into_iter()
        .filter(|m| m.body.contains(&tag))
        .map(|m| m.id)
        .collect();
    assert_eq!(ids.len(), bodies.len(), "one id per post");
}

/// Assert `result` failed with `kind` (and so the CLI's exit status of
/// docs/src/design/contracts.md) and a message holding every one of `parts`.
fn assert_fails(result: Result<(), Failure>, kind: FailureKind, parts: &[&str]) -> Failure {
    let failure = result.expect_err("expected a failure");
    assert_eq!(failure.kind, kind, "wrong kind for: {}", failure.message);
    let exit = match kind {
        FailureKind::BadInput
        | FailureKind::UnknownAgent
        | FailureKind::NotAccepted
        | FailureKind::Busy => 2,
        FailureKind::UnknownOutcome => 3,
        _ => 1,
    };
    assert_eq!(failure.exit_status(), exit, "{}", failure.message);
    for part in parts {
        assert!(
            failure.message.contains(part),
            "message lacks {part:?}: {}",
            failure.message
        );
    }
    assert!(
        !failure.message.contains('\n'),
        "not one line: {}",
        failure.message
    );
    failure
}

/// Run `f`, returning its result and how long it took.
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let value = f();
    (value, start.elapsed())
}

// ---------------------------------------------------------------- delivery

#[test]
fn ejabberdctl_delivers_every_body_byte_identical() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    let t = ctl(ej.ctl_argv(), EJABBERDCTL_TIMEOUT);
    assert_delivers_tricky_bodies(&t, &ej, "mohe");
}

#[test]
fn http_api_delivers_every_body_byte_identical() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    let t = http(&ej.api_url, HTTP_TIMEOUT);
    assert_delivers_tricky_bodies(&t, &ej, "zhiwei");
}

#[test]
fn docker_exec_form_delivers_every_body_byte_identical() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    if !ej.docker_on_path() {
        let why = format!(
            "`docker` on PATH is not the stand-in in {} (with-ejabberd.sh puts it first)",
            ej.bin_dir.display()
        );
        assert!(std::env::var(REQUIRE_ENV).as_deref() != Ok("1"), "{why}");
        eprintln!("SKIPPED: {why}");
        return;
    }
    let t = ctl(Ejabberd::docker_argv(), EJABBERDCTL_TIMEOUT);
    assert_eq!(
        t.argv(),
        [
            "docker",
            "exec",
            "-e",
            "LC_ALL=C.UTF-8",
            "ejabberd",
            "ejabberdctl"
        ]
    );
    assert_delivers_tricky_bodies(&t, &ej, "xiaoguo");
}

/// Why `-e LC_ALL=C.UTF-8` is inserted: the stand-in, like real docker,
/// does not pass the caller's environment, and without the locale the
/// Erlang VM decodes argv as Latin-1. This also shows the stand-in is
/// faithful (a stand-in that leaked our LC_ALL would deliver it intact).
#[test]
fn docker_exec_without_the_locale_double_encodes() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    let observer = RoomObserver::join(&ej);
    let body = format!("中文 without the locale {}", tag());
    let out = Command::new(ej.bin_dir.join("docker"))
        .args([
            "exec",
            "ejabberd",
            "ejabberdctl",
            "send_message",
            "groupchat",
        ])
        .args([&ej.jid("mohe"), &ej.room, "", &body])
        .env("LC_ALL", "C.UTF-8")
        .output()
        .expect("run the docker stand-in");
    assert!(out.status.success(), "{out:?}");
    let mangled: String = body.bytes().map(char::from).collect();
    assert_ne!(mangled, body);
    assert_eq!(
        observer.wait_for_body(&mangled, DELIVERY).as_deref(),
        Some("mohe"),
        "expected the double-encoded form; got {:?}",
        observer.messages()
    );
}

// ------------------------------------------------------ who may post where

#[test]
fn outsider_is_not_accepted_by_either_transport() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    let outsider = ej.jid(ej.outsider());
    let fix = format!(
        "ejabberdctl subscribe_room {outsider} {} {} urn:xmpp:mucsub:nodes:messages",
        ej.outsider(),
        ej.room
    );
    let transports: [Box<dyn Transport>; 2] = [
        Box::new(ctl(ej.ctl_argv(), EJABBERDCTL_TIMEOUT)),
        Box::new(http(&ej.api_url, HTTP_TIMEOUT)),
    ];
    for t in &transports {
        assert_fails(
            t.check_sender(&outsider, &ej.room),
            FailureKind::NotAccepted,
            &["is not a MUC/Sub subscriber of room", &ej.room, &fix],
        );
        // A resource or another case does not change who the sender is.
        t.check_sender(&format!("{}/cli", ej.jid("MOHE")), &ej.room)
            .unwrap_or_else(|f| panic!("{}: {f}", t.name()));
    }
}

/// The reason `check_sender` exists: the room drops an outsider's message
/// and both transports still report success. A subscriber's marker posted
/// afterwards arrives; the outsider's body, posted first, never does.
#[test]
fn outsider_post_is_dropped_yet_reported_as_success() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    let observer = RoomObserver::join(&ej);
    let transports: [Box<dyn Transport>; 2] = [
        Box::new(ctl(ej.ctl_argv(), EJABBERDCTL_TIMEOUT)),
        Box::new(http(&ej.api_url, HTTP_TIMEOUT)),
    ];
    for t in &transports {
        let tag = tag();
        let dropped = format!("from the outsider via {} {tag}", t.name());
        let marker = format!("marker via {} {tag}", t.name());
        t.post(&ej.jid(ej.outsider()), &ej.room, &dropped)
            .unwrap_or_else(|f| panic!("{}: the server did not report success: {f}", t.name()));
        t.post(&ej.jid("mohe"), &ej.room, &marker)
            .unwrap_or_else(|f| panic!("{}: {f}", t.name()));
        assert_eq!(
            observer.wait_for_body(&marker, DELIVERY).as_deref(),
            Some("mohe")
        );
        assert!(
            !observer.messages().iter().any(|m| m.body == dropped),
            "{}: the room broadcast the outsider's message",
            t.name()
        );
    }
}

#[test]
fn a_room_that_does_not_exist_is_not_accepted() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    let no_room = format!("nosuchroom@{}", ej.muc_service);
    let no_service = format!("{}@conference.nowhere.invalid", ej.room_name);
    let transports: [Box<dyn Transport>; 2] = [
        Box::new(ctl(ej.ctl_argv(), EJABBERDCTL_TIMEOUT)),
        Box::new(http(&ej.api_url, HTTP_TIMEOUT)),
    ];
    for t in &transports {
        for room in [&no_room, &no_service] {
            assert_fails(
                t.check_sender(&ej.jid("mohe"), room),
                FailureKind::NotAccepted,
                &[
                    &format!("room {room} does not exist"),
                    "The room does not exist",
                ],
            );
        }
    }
}

#[test]
fn both_transports_read_the_room_options_and_a_missing_room_has_none() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    let transports: [Box<dyn Transport>; 2] = [
        Box::new(ctl(ej.ctl_argv(), EJABBERDCTL_TIMEOUT)),
        Box::new(http(&ej.api_url, HTTP_TIMEOUT)),
    ];
    let mut seen = Vec::new();
    for t in &transports {
        let options = t
            .room_options(&ej.room)
            .unwrap()
            .unwrap_or_else(|| panic!("{}: the test room has no options", t.name()));
        // start.sh's room: persistent, archived, with subscriptions; the
        // values as ejabberd prints them, the same over either transport.
        for (key, value) in [
            ("persistent", "true"),
            ("mam", "true"),
            ("allow_subscription", "true"),
        ] {
            assert_eq!(
                options.get(key).map(String::as_str),
                Some(value),
                "{}: {key}",
                t.name()
            );
        }
        assert!(
            options.contains_key("anonymous"),
            "{}: {options:?}",
            t.name()
        );
        seen.push(options);
        let no_room = format!("nosuchroom@{}", ej.muc_service);
        assert_eq!(t.room_options(&no_room).unwrap(), None, "{}", t.name());
    }
    assert_eq!(seen[0], seen[1], "both transports read the same options");
    for t in unreachable_transports() {
        assert_fails(
            t.room_options(&ej.room).map(drop),
            FailureKind::Transport,
            &["get_room_options"],
        );
    }
}

/// Both transports, pointed where neither a command nor a server exists:
/// reaching them would be a `transport` failure, so a `bad-input` one
/// proves nothing was attempted.
fn unreachable_transports() -> [Box<dyn Transport>; 2] {
    [
        Box::new(ctl(
            vec!["/nonexistent/ejabberdctl".into()],
            EJABBERDCTL_TIMEOUT,
        )),
        Box::new(http(
            &format!("http://127.0.0.1:{}/api", unused_port()),
            HTTP_TIMEOUT,
        )),
    ]
}

#[test]
fn a_room_jid_that_is_not_bare_is_refused_before_anything_runs() {
    for t in &unreachable_transports() {
        for room in ["coregroup", "coregroup@conference.x/mohe"] {
            assert_fails(
                t.check_sender("mohe@x", room),
                FailureKind::BadInput,
                &[&format!("room JID {room:?}")],
            );
            assert_fails(
                t.post("mohe@x", room, "hi"),
                FailureKind::BadInput,
                &["room JID"],
            );
        }
    }
}

// -------------------------------------------------------------- bad bodies

#[test]
fn xml_illegal_characters_are_refused_before_anything_runs() {
    for t in &unreachable_transports() {
        for (body, code) in [("bell\u{7}", "U+0007"), ("esc \u{1b}[31m red", "U+001B")] {
            assert_fails(
                t.post("mohe@x", "room@conference.x", body),
                FailureKind::BadInput,
                &[code, "XML 1.0 forbids", "nothing was posted"],
            );
        }
        assert_fails(
            t.post("mohe@x", "room@conference.x", ""),
            FailureKind::BadInput,
            &["body is empty"],
        );
    }
}

#[test]
fn a_body_over_one_argument_s_limit_is_refused_by_ejabberdctl() {
    let t = ctl(vec!["/nonexistent/ejabberdctl".into()], EJABBERDCTL_TIMEOUT);
    let body = "a".repeat(140_000);
    assert_fails(
        t.post("mohe@x", "room@conference.x", &body),
        FailureKind::BadInput,
        &["140000 bytes", "MAX_ARG_STRLEN", "transport = \"http\""],
    );
}

// ------------------------------------------------- the server's own errors

#[test]
fn a_bad_sender_jid_gives_the_server_s_text() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    let bad = "not a jid@@";
    assert_fails(
        ctl(ej.ctl_argv(), EJABBERDCTL_TIMEOUT).post(bad, &ej.room, "hi"),
        FailureKind::Transport,
        &["send_stanza` failed (exit 1)", "JID malformed"],
    );
    assert_fails(
        http(&ej.api_url, HTTP_TIMEOUT).post(bad, &ej.room, "hi"),
        FailureKind::Transport,
        &["/send_stanza answered HTTP 400", "JID malformed"],
    );
}

#[test]
fn ejabberdctl_refusing_the_os_user_is_explained() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    // Debian's ejabberdctl refuses any user but root and ejabberd (exit 7).
    let mut argv: Vec<String> = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ]
    .map(str::to_owned)
    .to_vec();
    argv.extend(ej.ctl_argv());
    assert_fails(
        ctl(argv, EJABBERDCTL_TIMEOUT).check_sender(&ej.jid("mohe"), &ej.room),
        FailureKind::Transport,
        &[
            "refused to run as this OS user (exit 7",
            "root or as user ejabberd",
        ],
    );
}

#[test]
fn a_missing_command_or_container_is_a_transport_failure() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    let mohe = ej.jid("mohe");
    assert_fails(
        ctl(vec!["/nonexistent/ejabberdctl".into()], EJABBERDCTL_TIMEOUT)
            .post(&mohe, &ej.room, "hi"),
        FailureKind::Transport,
        &[
            "cannot run `/nonexistent/ejabberdctl send_stanza`",
            "command not found",
        ],
    );
    if !ej.docker_on_path() {
        return; // the docker cases need the stand-in (see the docker test)
    }
    let wrong_container = ["docker", "exec", "nosuch", "ejabberdctl"].map(str::to_owned);
    assert_fails(
        ctl(wrong_container.to_vec(), EJABBERDCTL_TIMEOUT).post(&mohe, &ej.room, "hi"),
        FailureKind::Transport,
        &["failed (exit 1)", "No such container: nosuch"],
    );
    let wrong_command = ["docker", "exec", "ejabberd", "ejabberdctI"].map(str::to_owned);
    assert_fails(
        ctl(wrong_command.to_vec(), EJABBERDCTL_TIMEOUT).check_sender(&mohe, &ej.room),
        FailureKind::Transport,
        &["command not found (exit 127", "ejabberdctI"],
    );
}

/// Basic credentials reach ejabberd: its user is a JID (with an `@`, which
/// a `user:pw@host` URL could not carry), and a wrong password is refused.
#[test]
fn http_credentials_are_sent_and_checked_by_ejabberd() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    let admin = ej.jid("admin");
    let good = HttpApi::new(
        &ej.api_url,
        Some((admin.clone(), ej.password("admin"))),
        HTTP_TIMEOUT,
    )
    .expect("valid API");
    let observer = RoomObserver::join(&ej);
    let body = format!("with credentials {}", tag());
    good.check_sender(&ej.jid("mohe"), &ej.room)
        .expect("check with credentials");
    good.post(&ej.jid("mohe"), &ej.room, &body)
        .expect("post with credentials");
    assert_eq!(
        observer.wait_for_body(&body, DELIVERY).as_deref(),
        Some("mohe")
    );
    let wrong =
        HttpApi::new(&ej.api_url, Some((admin, "wrong".into())), HTTP_TIMEOUT).expect("valid API");
    assert_fails(
        wrong.check_sender(&ej.jid("mohe"), &ej.room),
        FailureKind::Transport,
        &[
            "/get_subscribers answered 401",
            "not authorized",
            "api_password_env",
        ],
    );
    assert_fails(
        wrong.post(&ej.jid("mohe"), &ej.room, "hi"),
        FailureKind::Transport,
        &["/send_stanza answered 401", "not authorized"],
    );
}

// ------------------------------------------------------- server not there

#[test]
fn ejabberdctl_to_a_node_that_is_not_running_fails_fast() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let t = ctl(ej.dead_node_ctl(dir.path()), EJABBERDCTL_TIMEOUT);
    for (what, result) in [
        ("check", timed(|| t.check_sender(&ej.jid("mohe"), &ej.room))),
        ("post", timed(|| t.post(&ej.jid("mohe"), &ej.room, "hi"))),
    ] {
        let (result, took) = result;
        assert_fails(
            result,
            FailureKind::Transport,
            &[
                "ejabberd node is down or unreachable",
                "exited 3",
                "nodedown",
            ],
        );
        assert!(took < EJABBERDCTL_TIMEOUT, "{what} took {took:?}");
    }
}

#[test]
fn http_to_a_port_nobody_listens_on_fails_fast() {
    let url = format!("http://127.0.0.1:{}/api", unused_port());
    let t = http(&url, HTTP_TIMEOUT);
    let (result, took) = timed(|| t.check_sender("mohe@x", "room@conference.x"));
    assert_fails(
        result,
        FailureKind::Transport,
        &[
            &format!("cannot connect to {url}/get_subscribers"),
            "is ejabberd running",
        ],
    );
    assert!(took < HTTP_TIMEOUT, "took {took:?}");
    let (result, took) = timed(|| t.post("mohe@x", "room@conference.x", "hi"));
    assert_fails(
        result,
        FailureKind::Transport,
        &[
            &format!("cannot connect to {url}/send_stanza"),
            "nothing was posted",
        ],
    );
    assert!(took < HTTP_TIMEOUT, "took {took:?}");
}

#[test]
fn a_wrong_api_url_names_the_url() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    // The right server, the wrong path: mod_http_api is mounted on /api.
    let wrong = ej.api_url.replace("/api", "/apx");
    let t = http(&wrong, HTTP_TIMEOUT);
    assert_fails(
        t.check_sender(&ej.jid("mohe"), &ej.room),
        FailureKind::Transport,
        &[
            &format!("POST {wrong}/get_subscribers answered 404"),
            "check [xmpp] api_url",
        ],
    );
    assert_fails(
        t.post(&ej.jid("mohe"), &ej.room, "hi"),
        FailureKind::Transport,
        &[&format!("POST {wrong}/send_stanza answered 404")],
    );
    // A host that does not resolve (RFC 2606 reserves .invalid).
    let t = http("http://ejabberd.invalid/api", HTTP_TIMEOUT);
    let (result, took) = timed(|| t.post(&ej.jid("mohe"), &ej.room, "hi"));
    assert_fails(
        result,
        FailureKind::Transport,
        &[
            "http://ejabberd.invalid/api/send_stanza",
            "nothing was posted",
        ],
    );
    assert!(took < HTTP_TIMEOUT + SLACK, "took {took:?}");
}

// ------------------------------------------------------- no answer at all

/// Whether `pid` is gone (a zombie waiting for its reaper counts as gone).
fn is_gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

#[test]
fn a_hanging_ejabberdctl_is_killed_with_its_children_at_the_time_limit() {
    let dir = tempfile::tempdir().expect("temp dir");
    let limit = Duration::from_secs(1);
    for posting in [true, false] {
        let pidfile = dir.path().join(format!("pids-{posting}"));
        let script = workspace_root().join("tests/ejabberd/hanging-ejabberdctl.sh");
        let t = ctl(
            vec![
                "bash".into(),
                script.display().to_string(),
                pidfile.display().to_string(),
            ],
            limit,
        );
        let (result, took) = timed(|| {
            if posting {
                t.post("mohe@x", "room@conference.x", "hi")
            } else {
                t.check_sender("mohe@x", "room@conference.x")
            }
        });
        if posting {
            assert_fails(
                result,
                FailureKind::UnknownOutcome,
                &[
                    "no answer from `bash",
                    "within 1 s",
                    "the room may have the message",
                ],
            );
        } else {
            assert_fails(
                result,
                FailureKind::Transport,
                &["no answer from `bash", "get_subscribers` within 1 s"],
            );
        }
        assert!(took >= limit && took < limit + SLACK, "took {took:?}");
        let pids = std::fs::read_to_string(&pidfile).expect("the stand-in wrote its pids");
        let deadline = Instant::now() + SLACK;
        for pid in pids.split_whitespace() {
            while !is_gone(pid) && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(50));
            }
            assert!(is_gone(pid), "pid {pid} of the hanging stand-in survived");
        }
    }
}

/// The exit status is the answer: a command that exits 0 but leaves a
/// child holding its output open is a success once the time limit has
/// ended the wait for output, and the straggler is killed.
#[test]
fn a_straggler_holding_the_output_open_is_killed_and_the_exit_status_kept() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pidfile = dir.path().join("pid");
    let script = format!("sleep 600 & echo $! > '{}'; exit 0", pidfile.display());
    let limit = Duration::from_secs(1);
    let t = ctl(vec!["bash".into(), "-c".into(), script], limit);
    let (result, took) = timed(|| t.post("mohe@x", "room@conference.x", "hi"));
    result.expect("exit 0 is success");
    assert!(took >= limit && took < limit + SLACK, "took {took:?}");
    let pid = std::fs::read_to_string(&pidfile).expect("the script wrote its child's pid");
    let deadline = Instant::now() + SLACK;
    while !is_gone(pid.trim()) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    assert!(is_gone(pid.trim()), "the straggler {pid} survived");
}

/// A stand-in HTTP server on a free loopback port: it reads each whole
/// request, then either keeps the connection open without answering
/// (`hang`) or closes it without answering.
fn silent_http_server(hang: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    thread::spawn(move || {
        let mut held: Vec<TcpStream> = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            read_request(&mut stream);
            if hang {
                held.push(stream);
            } else {
                let _ = stream.flush();
                drop(stream);
            }
        }
    });
    format!("http://127.0.0.1:{port}/api")
}

/// Read one request's headers and its `Content-Length` body.
fn read_request(stream: &mut TcpStream) {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let Ok(n) = stream.read(&mut buf) else { return };
        if n == 0 {
            return;
        }
        data.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&data);
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                return;
            }
        }
    }
}

#[test]
fn an_http_server_that_never_answers_gives_unknown_outcome_for_post() {
    let url = silent_http_server(true);
    let limit = Duration::from_secs(1);
    let t = http(&url, limit);
    let (result, took) = timed(|| t.post("mohe@x", "room@conference.x", "hi"));
    assert_fails(
        result,
        FailureKind::UnknownOutcome,
        &[
            &format!("no answer from POST {url}/send_stanza within 1 s"),
            "may have the message",
        ],
    );
    assert!(took >= limit && took < limit + SLACK, "took {took:?}");
    let (result, took) = timed(|| t.check_sender("mohe@x", "room@conference.x"));
    assert_fails(
        result,
        FailureKind::Transport,
        &[&format!(
            "no answer from POST {url}/get_subscribers within 1 s"
        )],
    );
    assert!(took >= limit && took < limit + SLACK, "took {took:?}");
}

#[test]
fn an_http_connection_closed_without_answer_gives_unknown_outcome_for_post() {
    let url = silent_http_server(false);
    let t = http(&url, HTTP_TIMEOUT);
    let (result, took) = timed(|| t.post("mohe@x", "room@conference.x", "hi"));
    assert_fails(
        result,
        FailureKind::UnknownOutcome,
        &[&format!("POST {url}/send_stanza"), "may have the message"],
    );
    assert!(took < HTTP_TIMEOUT, "took {took:?}");
}

// ---------------------------------------------------------------- timing

/// One send (check + post) per transport, repeated; run by hand:
/// `tests/ejabberd/with-ejabberd.sh cargo test -p session-switch-tests
/// --test all transport::measure -- --ignored --nocapture` (`SSW_ROUNDS`, default 21).
/// Every timed body is then seen in the room, so no dropped post is timed.
#[test]
#[ignore = "timing; run by hand (see docs/src/concepts/transports.md)"]
fn measure_one_send_per_transport() {
    let Some(ej) = Ejabberd::from_env() else {
        return;
    };
    let rounds: usize = std::env::var("SSW_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(21);
    let observer = RoomObserver::join(&ej);
    let from = ej.jid("mohe");
    let mut transports: Vec<(&str, Box<dyn Transport>)> = vec![
        (
            "ejabberdctl",
            Box::new(ctl(ej.ctl_argv(), EJABBERDCTL_TIMEOUT)),
        ),
        ("http", Box::new(http(&ej.api_url, HTTP_TIMEOUT))),
    ];
    if ej.docker_on_path() {
        transports.push((
            "docker exec stand-in",
            Box::new(ctl(Ejabberd::docker_argv(), EJABBERDCTL_TIMEOUT)),
        ));
    }
    for (label, t) in &transports {
        let mut check_ms = Vec::new();
        let mut send_ms = Vec::new();
        let mut bodies = Vec::new();
        for round in 0..=rounds {
            let body = format!("timing {label} {round} {}", tag());
            let start = Instant::now();
            t.check_sender(&from, &ej.room).expect("check");
            let checked = start.elapsed();
            t.post(&from, &ej.room, &body).expect("post");
            let sent = start.elapsed();
            if round > 0 {
                // round 0 warms caches and connections
                check_ms.push(checked.as_secs_f64() * 1e3);
                send_ms.push(sent.as_secs_f64() * 1e3);
            }
            bodies.push(body);
        }
        for body in &bodies {
            assert!(
                observer.wait_for_body(body, DELIVERY).is_some(),
                "{body} lost"
            );
        }
        println!(
            "{label:>22}: check {} | check + post {}  ({rounds} rounds, ms)",
            stats(&mut check_ms),
            stats(&mut send_ms)
        );
    }
}

/// `median m (min a, max b)` of `values`, in ms.
fn stats(values: &mut [f64]) -> String {
    values.sort_by(f64::total_cmp);
    let median = values[values.len() / 2];
    format!(
        "median {median:.1} (min {:.1}, max {:.1})",
        values[0],
        values[values.len() - 1]
    )
}
