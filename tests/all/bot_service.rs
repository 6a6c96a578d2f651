//! The room bot as a service, on the real ejabberd with the
//! real Hermes API server: one bot per agent on a machine (its lock), a
//! stale seat replaced by the restarted bot's fixed resource, a bot of the
//! same agent on another machine found by ping, a refused login and an
//! untrusted certificate that end the process with exit status 2, and
//! STARTTLS with the test CA through `[bot] ca_file`.
//!
//! A second "machine" is the same host with another lock folder
//! (`HERMES_GATEWAY_LOCK_DIR`) and another host name in the resource
//! (`SESSION_SWITCH_BOT_HOST`).

use session_switch_tests::hermes_world;
use session_switch_tests::room_bot::{BotProcess, BotWorld};
use session_switch_tests::tcp_relay::HoldingRelay;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What "promptly" means for a failure that no retry mends.
const PROMPT: Duration = Duration::from_secs(20);

/// The world's config with `from` replaced by `to`, written as `name`
/// beside it.
fn config_with(world: &BotWorld, name: &str, edits: &[(&str, &str)]) -> PathBuf {
    let mut text = std::fs::read_to_string(&world.config).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "{from:?} not in:\n{text}");
        text = text.replacen(from, to, 1);
    }
    let path = world.home.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn server_line(world: &BotWorld) -> String {
    format!("server = \"{}:{}\"", world.ej.c2s_host, world.ej.c2s_port)
}

/// Start `cmd`'s bot and wait for it to exit by itself within [`PROMPT`];
/// its exit status code and how long it took.
fn exits(world: &BotWorld, cmd: std::process::Command) -> (BotProcess, Option<i32>, Duration) {
    let started = Instant::now();
    let mut bot = world.spawn(cmd, "mohe");
    let status = bot.wait_exit(PROMPT + Duration::from_secs(5));
    (bot, status.and_then(|s| s.code()), started.elapsed())
}

/// mohe's bot on `config` (with `--once` when `once`), which the set-up
/// refuses: it must exit 2 within [`PROMPT`]; the last line of its log.
fn refused(world: &BotWorld, config: &Path, once: bool) -> String {
    let mut cmd = world.cli_with(config);
    cmd.args(["bot", "--agent", "mohe"]);
    if once {
        cmd.arg("--once");
    }
    let (bot, code, took) = exits(world, cmd);
    let log = bot.log();
    assert_eq!(code, Some(2), "--once {once}: exit 2:\n{log}");
    assert!(took < PROMPT, "--once {once}: {took:?}");
    log.lines().last().unwrap_or_default().to_owned()
}

/// The seats of `jid`'s account in the room (full JIDs).
fn seats_of(world: &BotWorld, jid: &str) -> Vec<String> {
    world
        .occupants()
        .into_iter()
        .map(|(j, _)| j)
        .filter(|j| j.split('/').next() == Some(jid))
        .collect()
}

#[test]
fn a_second_bot_of_an_agent_on_this_machine_is_refused_naming_the_holders_pid() {
    let _world = hermes_world();
    let Some(world) = BotWorld::new(6) else {
        return;
    };
    let mut first = world.bot("mohe");
    let mut cmd = world.cli();
    // Started as from a login shell beside a service: another runtime
    // folder and another HERMES_HOME do not move the lock.
    cmd.env("XDG_RUNTIME_DIR", world.home.join("shell-run"))
        .env("HERMES_HOME", world.home.join("other-profile"))
        .args(["bot", "--agent", "mohe"]);
    let (second, code, took) = exits(&world, cmd);
    let log = second.log();
    assert_eq!(code, Some(2), "the second bot exits 2:\n{log}");
    assert!(took < PROMPT, "{took:?}");
    let last = log.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("xmpp-session-bridge: another bot of mohe runs on this machine")
            && last.contains(&format!("PID {} holds", first.pid())),
        "one line naming the holder's PID: {last:?}"
    );
    assert!(first.running(), "the first bot runs on:\n{}", first.log());
    assert_eq!(seats_of(&world, &world.ej.jid("mohe")).len(), 1);
}

#[test]
fn a_bot_killed_and_started_again_replaces_its_stale_seat_at_once() {
    let _world = hermes_world();
    let Some(world) = BotWorld::new(6) else {
        return;
    };
    // The first bot reaches ejabberd through a relay that keeps ejabberd's
    // side open after the bot dies: its session and seat stay.
    let relay = HoldingRelay::start(
        format!("{}:{}", world.ej.c2s_host, world.ej.c2s_port)
            .parse()
            .unwrap(),
    );
    let relayed = config_with(
        &world,
        "relayed.toml",
        &[(
            &server_line(&world),
            &format!("server = \"{}\"", relay.addr()),
        )],
    );
    let mut cmd = world.cli_with(&relayed);
    cmd.args(["bot", "--agent", "mohe"]);
    let mut first = world.seated(cmd, "mohe");
    first.kill();
    let jid = world.ej.jid("mohe");
    let stale = seats_of(&world, &jid);
    assert_eq!(stale.len(), 1, "the killed bot's seat stays: {stale:?}");
    let resource = format!("{jid}/session-switch-bot-{}", world.host());
    assert_eq!(stale[0], resource, "the bot's resource names its host");

    let started = Instant::now();
    let second = world.bot("mohe");
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "seated in {took:?}:\n{}",
        second.log()
    );
    assert_eq!(
        seats_of(&world, &jid),
        vec![resource],
        "one seat, the restarted bot's, in place of the stale one"
    );
    assert!(
        !second.log().contains("ping"),
        "the stale seat was replaced, not pinged:\n{}",
        second.log()
    );
    drop(relay);
}

#[test]
fn a_bot_of_the_agent_on_another_machine_is_found_by_ping_and_the_newer_one_exits() {
    let _world = hermes_world();
    let Some(world) = BotWorld::new(6) else {
        return;
    };
    let first = world.bot("mohe");
    let other_machine = |host: &str| {
        let mut cmd = world.cli();
        cmd.env(
            "HERMES_GATEWAY_LOCK_DIR",
            world.home.join(format!("run-{host}")),
        )
        .env("SESSION_SWITCH_BOT_HOST", host)
        .args(["bot", "--agent", "mohe"]);
        cmd
    };
    let jid = world.ej.jid("mohe");
    let first_seat = format!("{jid}/session-switch-bot-{}", world.host());
    let (second, code, _) = exits(&world, other_machine("second-machine"));
    let log = second.log();
    assert_eq!(code, Some(2), "the newer bot exits 2:\n{log}");
    let last = log.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("xmpp-session-bridge: another bot of mohe is seated in")
            && last.contains(&first_seat)
            && last.contains("answered a ping"),
        "one line naming the other bot: {last:?}"
    );
    assert!(!log.contains("semi-anonymous"), "{log}");
    assert!(first.log().contains("ping"), "{}", first.log());
    assert_eq!(seats_of(&world, &jid), vec![first_seat.clone()]);
    // The newer bot's seat under the same nick, come and gone, was not the
    // first bot's own.
    assert!(
        !first.log().contains("rejoining"),
        "the first bot was not disturbed:\n{}",
        first.log()
    );

    // A seat that does not answer is stale: the newer bot warns and stays.
    let relay = HoldingRelay::start(
        format!("{}:{}", world.ej.c2s_host, world.ej.c2s_port)
            .parse()
            .unwrap(),
    );
    drop(first);
    let relayed = config_with(
        &world,
        "relayed.toml",
        &[(
            &server_line(&world),
            &format!("server = \"{}\"", relay.addr()),
        )],
    );
    let mut cmd = world.cli_with(&relayed);
    cmd.env(
        "HERMES_GATEWAY_LOCK_DIR",
        world.home.join("run-dead-machine"),
    )
    .env("SESSION_SWITCH_BOT_HOST", "dead-machine")
    .args(["bot", "--agent", "mohe"]);
    let mut dead = world.seated(cmd, "mohe");
    // Killed once its check is done, its seat raised to the priority of a
    // seated bot.
    dead.expect_log("no other bot of mohe", 1, Duration::from_secs(10));
    dead.kill();
    let mut third = world.seated(other_machine("third-machine"), "mohe");
    // Both seats while the third bot's ping waits: the stale seat is
    // there to be found. After the ping has timed out ejabberd may drop
    // that silent seat at any moment, so only the third bot's is sure.
    let mut seats = seats_of(&world, &jid);
    seats.sort();
    let dead_seat = format!("{jid}/session-switch-bot-dead-machine");
    let third_seat = format!("{jid}/session-switch-bot-third-machine");
    assert_eq!(seats, vec![dead_seat, third_seat.clone()]);
    third.expect_log(
        "did not answer a ping within 10 s",
        1,
        Duration::from_secs(30),
    );
    std::thread::sleep(Duration::from_secs(1));
    assert!(third.running(), "the bot stays:\n{}", third.log());
    assert!(
        seats_of(&world, &jid).contains(&third_seat),
        "the third bot keeps its seat:\n{}",
        third.log()
    );
    drop(relay);
}

#[test]
fn a_refused_login_ends_the_bot_and_the_check_with_the_sasl_condition() {
    let _world = hermes_world();
    let Some(world) = BotWorld::new(6) else {
        return;
    };
    std::fs::write(world.home.join("wrong.password"), "not-mohes-password\n").unwrap();
    let wrong = config_with(
        &world,
        "wrong-password.toml",
        &[(
            "password_file = \"mohe.password\"",
            "password_file = \"wrong.password\"",
        )],
    );
    for once in [false, true] {
        let last = refused(&world, &wrong, once);
        assert!(
            last.starts_with(&format!(
                "xmpp-session-bridge: the server refused the login of {}: SASL not-authorized",
                world.ej.jid("mohe")
            )),
            "--once {once}: {last:?}"
        );
    }
}

#[test]
fn starttls_with_the_operators_ca_through_ca_file_and_a_certificate_error_without_it() {
    let _world = hermes_world();
    let Some(world) = BotWorld::new(6) else {
        return;
    };
    std::fs::create_dir_all(world.home.join("certs")).unwrap();
    std::fs::copy(&world.ej.ca_file, world.home.join("certs/test-ca.pem")).unwrap();
    let tls_server = format!(
        "server = \"{}:{}\"",
        world.ej.c2s_host, world.ej.c2s_tls_port
    );
    let with_ca = config_with(
        &world,
        "tls.toml",
        &[
            (&server_line(&world), &tls_server),
            (
                "tls = \"insecure-plaintext\"",
                "tls = \"starttls\"\nca_file = \"certs/test-ca.pem\"",
            ),
        ],
    );
    let once = world
        .cli_with(&with_ca)
        .args(["--json", "bot", "--agent", "mohe", "--once"])
        .output()
        .unwrap();
    assert!(once.status.success(), "--once over STARTTLS: {once:?}");
    let health: serde_json::Value = serde_json::from_slice(&once.stdout).unwrap();
    assert_eq!(health["joined"], true, "{health}");
    // The bot itself, seated over STARTTLS.
    let mut cmd = world.cli_with(&with_ca);
    cmd.args(["bot", "--agent", "mohe"]);
    let mut bot = world.seated(cmd, "mohe");
    assert!(bot.stop(), "{}", bot.log());

    let without_ca = config_with(
        &world,
        "tls-no-ca.toml",
        &[
            (&server_line(&world), &tls_server),
            ("tls = \"insecure-plaintext\"", "tls = \"starttls\""),
        ],
    );
    // STARTTLS asked of the plain port, which offers none: a config error.
    let no_starttls = config_with(
        &world,
        "tls-plain-port.toml",
        &[("tls = \"insecure-plaintext\"", "tls = \"starttls\"")],
    );
    let last = refused(&world, &no_starttls, true);
    assert!(
        last.starts_with("xmpp-session-bridge: the server offers no STARTTLS"),
        "{last:?}"
    );

    for once in [true, false] {
        let last = refused(&world, &without_ca, once);
        assert!(
            last.starts_with("xmpp-session-bridge: the server's certificate is not trusted: signed by a CA that is not among the trusted roots")
                && last.contains("ca_file"),
            "--once {once}: {last:?}"
        );
    }
}

#[test]
fn in_a_semi_anonymous_room_the_check_for_another_bot_is_skipped_with_a_warning() {
    let _world = hermes_world();
    let Some(world) = BotWorld::new(6) else {
        return;
    };
    world.ej.set_room_option("anonymous", "true");
    let bot = world.bot("mohe");
    bot.expect_log("does not show real JIDs", 1, Duration::from_secs(10));
    assert!(!bot.log().contains("no other bot"), "{}", bot.log());
}
