use super::*;

fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[test]
fn docker_exec_gets_the_locale_right_after_exec() {
    let ctl = EjabberdCtl::new(
        strings(&["docker", "exec", "ejabberd", "ejabberdctl"]),
        Duration::from_secs(1),
    )
    .unwrap();
    assert_eq!(
        ctl.argv(),
        strings(&[
            "docker",
            "exec",
            "-e",
            "LC_ALL=C.UTF-8",
            "ejabberd",
            "ejabberdctl"
        ])
    );
    let ctl = EjabberdCtl::new(
        strings(&["/usr/bin/podman", "exec", "-i", "ej", "ejabberdctl"]),
        Duration::from_secs(1),
    )
    .unwrap();
    assert_eq!(ctl.argv()[1..4], strings(&["exec", "-e", "LC_ALL=C.UTF-8"]));
}

#[test]
fn plain_ejabberdctl_is_left_alone() {
    for argv in [
        strings(&["ejabberdctl"]),
        strings(&["/usr/sbin/ejabberdctl", "--config-dir", "/x/etc"]),
        strings(&["docker", "run", "ej"]),
        strings(&["mydocker", "exec"]),
    ] {
        let ctl = EjabberdCtl::new(argv.clone(), Duration::from_secs(1)).unwrap();
        assert_eq!(ctl.argv(), argv);
    }
}

#[test]
fn empty_argv_or_zero_timeout_is_refused() {
    for argv in [vec![], strings(&[""]), strings(&[" "])] {
        let err = EjabberdCtl::new(argv, Duration::from_secs(1)).unwrap_err();
        assert_eq!(err.kind, FailureKind::BadInput);
        assert!(err.message.contains("[xmpp] ejabberdctl is empty"));
    }
    let err = EjabberdCtl::new(strings(&["ejabberdctl"]), Duration::ZERO).unwrap_err();
    assert_eq!(err.kind, FailureKind::BadInput);
    assert!(err.message.contains("time limit is zero"));
}

fn finished(code: i32, stdout: &str, stderr: &str) -> Finished {
    Finished {
        status: ExitStatus::from_raw(code << 8),
        stdout: stdout.to_owned(),
        stderr: stderr.to_owned(),
    }
}

#[test]
fn server_text_prefers_error_lines_over_usage() {
    let done = finished(
        1,
        "Error: error\nError: <<\"Bad value of attribute 'from'\">>\n  Command Name: x\n",
        "",
    );
    assert_eq!(
        server_text(&done),
        "Error: error Error: <<\"Bad value of attribute 'from'\">>"
    );
    let done = finished(
        3,
        "Failed RPC connection to the node a@b: nodedown\n\nCommands to start\n",
        "",
    );
    assert_eq!(
        server_text(&done),
        "Failed RPC connection to the node a@b: nodedown"
    );
    assert_eq!(server_text(&finished(1, "", "")), "it printed nothing");
    assert_eq!(server_text(&finished(1, "out", "boom\nmore")), "boom more");
}
