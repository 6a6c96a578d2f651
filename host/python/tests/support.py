"""Shared helpers of the binding's and the plugin's tests: where the
workspace's built parts are (the component, its test variants, the CLI),
Hermes homes made of private copies of the real Hermes fixtures, the test
ejabberd of `make test` (`EJ_*`), the Rust CLI as the reference, snapshots
of a database, and a real XMPP occupant of the room (`muc_probe.py`).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path
from typing import Dict, List, Optional, Tuple

#: The workspace root (host/python/tests → ../../..).
ROOT = Path(__file__).resolve().parents[3]

#: The three fixture files, oldest schema first.
FIXTURES = ("hermes-early.db", "hermes-0.19.0.db", "hermes-latest.db")
CLI_SESSION = "20260619_190821_7c0afe"
TOOL_SESSION = "20260619_193000_a1b2c3"
#: Set to `1` by `make test`: a missing ejabberd fails instead of skipping.
REQUIRE_ENV = "SESSION_SWITCH_REQUIRE_EJABBERD"


def component() -> Path:
    """The policy component `make component` writes."""
    path = ROOT / "target/policy/session_switch.wasm"
    assert path.is_file(), f"{path} is missing: run `make component`"
    return path


def variant(name: str) -> Path:
    """A test variant of the policy built by `make variants` (e.g. `panic`)."""
    path = ROOT / f"target/policy/variants/{name}.wasm"
    assert path.is_file(), f"{path} is missing: run `make variants`"
    return path


def fixtures_dir() -> Path:
    """`$HERMES_FIXTURES`, else `../shared/fixtures/hermes`; skips the test
    when missing (`.ci/run` fails before that, so CI never skips)."""
    d = Path(os.environ.get("HERMES_FIXTURES") or ROOT.parent / "shared/fixtures/hermes")
    if not (d / "hermes-latest.db").is_file():
        raise unittest.SkipTest(f"SKIPPED: Hermes fixtures not found at {d} (set HERMES_FIXTURES)")
    return d


def fixture_copy(name: str, folder: Path, as_name: str = "state.db") -> Path:
    """A private copy of fixture `name` in `folder` (never opened in place:
    CI's shared/ is read-only, and SQLite writes -wal/-shm beside a WAL file)."""
    dst = folder / as_name
    shutil.copyfile(fixtures_dir() / name, dst)
    return dst


def cli() -> Path:
    """The `xmpp-session-bridge` binary: `$XSB_BIN`, else target/debug."""
    path = Path(os.environ.get("XSB_BIN") or ROOT / "target/debug/xmpp-session-bridge")
    assert path.is_file(), f"{path} is missing: run `make build`"
    return path


class Ejabberd:
    """The isolated ejabberd of the test run (`tests/ejabberd/start.sh`'s
    `EJ_*` variables)."""

    def __init__(self, env: Dict[str, str]):
        self.domain = env["EJ_DOMAIN"]
        self.room = env["EJ_ROOM"]
        self.api_url = env["EJ_API_URL"]
        self.c2s_host = env["EJ_C2S_HOST"]
        self.c2s_port = int(env["EJ_C2S_PORT"])
        self.outsiders = env.get("EJ_OUTSIDERS", "").split()
        self.password_prefix = env["EJ_PASSWORD_PREFIX"]

    def jid(self, user: str) -> str:
        return f"{user}@{self.domain}"

    def password(self, user: str) -> str:
        return self.password_prefix + user


def ejabberd() -> Optional[Ejabberd]:
    """The test ejabberd, or `None` when not exported. Under `make test`
    (`SESSION_SWITCH_REQUIRE_EJABBERD=1`) a missing one is a failure."""
    if "EJ_HOME" not in os.environ:
        if os.environ.get(REQUIRE_ENV) == "1":
            raise AssertionError(
                f"{REQUIRE_ENV}=1 but no ejabberd is exported (EJ_HOME unset): run through "
                "tests/ejabberd/with-ejabberd.sh (make test)"
            )
        return None
    return Ejabberd(os.environ)


def require_ejabberd() -> Ejabberd:
    ej = ejabberd()
    if ej is None:
        raise unittest.SkipTest("SKIPPED: no ejabberd (run through make test)")
    return ej


def write_config(folder: Path, ej: Optional[Ejabberd], mohe_jid: Optional[str] = None) -> Path:
    """A config for both hosts: the three agents of the legacy
    `xmpp_session_bridge.py`, `mohe` the legacy agent, the HTTP transport of the test ejabberd (or a port nobody
    listens on when there is none: reads never post)."""
    domain = ej.domain if ej else "meeting.localhost"
    room = ej.room if ej else f"coregroup@conference.{domain}"
    api_url = ej.api_url if ej else "http://127.0.0.1:9/api"
    path = folder / "session-switch.toml"
    path.write_text(
        f"""[xmpp]
room = "{room}"
transport = "http"
api_url = "{api_url}"
timeout_seconds = 10

[redirect]
ttl_seconds = 3600
future_skew_seconds = 120
legacy_agent = "mohe"

[[agents]]
name = "mohe"
jid = "{mohe_jid or f"mohe@{domain}"}"
nick = "mohe"
sessions = ["xmpp-mohe-v2", "xmpp-mohe"]

[[agents]]
name = "zhiwei"
jid = "zhiwei@{domain}"
sessions = ["xmpp-zhiwei"]

[[agents]]
name = "xiaoguo"
jid = "xiaoguo@{domain}"
sessions = ["xmpp-xiaoguo"]
""",
        encoding="utf-8",
    )
    return path


class Cli:
    """The Rust host as the reference: `xmpp-session-bridge --json` with
    the CLI's own defaults (`HERMES_HOME=home`: its session-switch.toml,
    state.db and the embedded policy or the config's `[policy] path`)."""

    def __init__(self, home: Path):
        self.home = home

    def run(self, *args: str) -> Tuple[int, object, str]:
        """`(exit status, parsed stdout or None, stderr)`."""
        argv = [str(cli()), "--json", *args]
        env = dict(os.environ, HERMES_HOME=str(self.home))
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
        out = json.loads(done.stdout) if done.stdout.strip() else None
        return done.returncode, out, done.stderr

    def json(self, *args: str) -> object:
        status, out, err = self.run(*args)
        assert status == 0, f"{args}: exit {status}: {err}"
        return out


def hermes_home(folder: Path, fixture: str, ej: Optional[Ejabberd] = None, policy: Optional[str] = None) -> Path:
    """A Hermes home in `folder`: a copy of `fixture` as state.db and the
    config of `write_config` (with `[policy] path` when given)."""
    folder.mkdir(parents=True, exist_ok=True)
    fixture_copy(fixture, folder)
    config = write_config(folder, ej)
    if policy is not None:
        config.write_text(f'[policy]\npath = "{policy}"\n\n' + config.read_text(encoding="utf-8"), encoding="utf-8")
    return folder


def table_snapshot(path: Path) -> Dict[str, List[str]]:
    """Every row of every table (FTS shadow tables and sqlite_master
    included, virtual tables excluded), each table's rows sorted, read
    through a separate read-only connection. Equal snapshots: no row changed."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL TABLE%'"
            )
        ] + ["sqlite_master"]
        return {n: sorted(repr(r) for r in conn.execute(f'SELECT * FROM "{n}"')) for n in names}
    finally:
        conn.close()


def execute(path: Path, sql: str, params: tuple = ()) -> None:
    """Arrange a database's state as Hermes (or a person) would: one
    statement in its own transaction."""
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.execute(sql, params)
    finally:
        conn.close()


def query(path: Path, sql: str, params: tuple = ()) -> list:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def put_record(path: Path, key: str, value: str) -> None:
    """Write a `state_meta` record (creating the table where early Hermes
    has none, with Hermes's DDL)."""
    execute(path, "CREATE TABLE IF NOT EXISTS state_meta (key TEXT PRIMARY KEY, value TEXT)")
    execute(path, "INSERT OR REPLACE INTO state_meta (key, value) VALUES (?, ?)", (key, value))


def record_json(session_id: str, timestamp: float, agent: Optional[str] = "mohe") -> str:
    r = {"session_id": session_id, "timestamp": timestamp, "source": "cli"}
    if agent is not None:
        r["agent"] = agent
    return json.dumps(r)


class RoomListener:
    """A real XMPP occupant of the room (`tests/ejabberd/muc_probe.py
    listen`, slixmpp from the same venv) waiting for one body: proves what
    the room really broadcast, since `send_message` answers 200 even when
    the room drops the message."""

    def __init__(self, ej: Ejabberd, body: str, nick: str):
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "tests/ejabberd/muc_probe.py"),
                "listen",
                "--jid",
                ej.jid("admin"),
                "--password",
                ej.password("admin"),
                "--room",
                ej.room,
                "--nick",
                nick,
                "--host",
                ej.c2s_host,
                "--port",
                str(ej.c2s_port),
                "--until-body",
                body,
                "--timeout",
                "30",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        if '"READY"' not in line:
            self.proc.kill()
            raise AssertionError(f"muc_probe.py did not join {ej.room}: {line} {self.proc.stderr.read()}")

    def wait(self) -> List[dict]:
        """The live messages seen until the body came (or the time-out)."""
        out, err = self.proc.communicate(timeout=60)
        events = [json.loads(line) for line in out.splitlines() if line.strip()]
        return [e for e in events if e.get("event") == "message" and not e.get("history")]


def unique(text: str) -> str:
    """A body no other test sends."""
    unique.n = getattr(unique, "n", 0) + 1
    return f"{text} #{os.getpid()}-{unique.n}-{time.time_ns() % 10**6}"


def tempdir(test: unittest.TestCase) -> Path:
    d = tempfile.TemporaryDirectory(prefix="ss-py-")
    test.addCleanup(d.cleanup)
    return Path(d.name)
