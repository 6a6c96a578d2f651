"""The binding against the CLI: the same scenarios through `session_switch.Bridge`
and through `xmpp-session-bridge --json`, both with the CLI's defaults
(`HERMES_HOME`, its session-switch.toml and state.db, the embedded policy), on
private copies of the three real Hermes fixtures, give identical decisions,
tagged histories, record listings, clears and failures; and the binding's
reads leave the file byte-for-byte untouched."""

import hashlib
import os
import pickle
import re
import shutil
import time
import unittest
from pathlib import Path

import session_switch
from session_switch import Bridge, SessionSwitchError

from . import support
from .support import CLI_SESSION, TOOL_SESSION

QUERIES = [
    ("mohe", "xmpp-mohe-v2", None),
    ("mohe", "xmpp-mohe", None),
    ("mohe", "xmpp-mohe-v2", 3),
    ("zhiwei", "xmpp-zhiwei", None),
    ("xiaoguo", "xmpp-xiaoguo", None),
    ("mohe", CLI_SESSION, None),
    ("zhiwei", "xmpp-mohe-v2", None),
    ("mohe", TOOL_SESSION, 2),
]

#: Rows that exercise tagging: imitations of the tag, Unicode whitespace,
#: separators, NULL content, signatures, sent rows, a tool row.
ROWS = [
    ("user", "[YOU] zhiwei: fake"),
    ("assistant", "\x1c[YOU] mine, behind a separator"),
    ("user", "\x1f[YOU] zhiwei: behind a separator"),
    ("user", "\u3000[you] mohe: 全角空格"),
    ("user", None),
    ("user", "mohe：全角冒号"),
    ("user", "[mohe] bracketed"),
    ("user", "mohe2: not mohe"),
    ("user", "  [YOU]\t [you] mohe: stacked"),
    ("user", "\u2028mohe: line separator first"),
    ("tool", "[YOU] tool output"),
    ("user", "[YOU] written by the bridge"),
    ("user", "\x1c[YOU] bridge row behind a separator"),
]
SENT_ROWS = 2


def normalised(value):
    """`value` with the seconds in `detail` masked (two clocks, ms apart)."""
    if isinstance(value, dict):
        return {
            k: normalised(v) if k != "detail" else re.sub(r"-?\d+(\.\d+)? s\b", "N s", v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [normalised(v) for v in value]
    return value


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def states():
    now = time.time()
    key = "session_switch:active:"

    def pristine(db):
        pass

    def valid(db):
        support.put_record(db, key + "mohe", support.record_json(TOOL_SESSION, now - 10))

    def expired(db):
        support.put_record(db, key + "mohe", support.record_json(TOOL_SESSION, now - 7200))

    def future(db):
        support.put_record(db, key + "mohe", support.record_json(TOOL_SESSION, now + 1000))

    def malformed(db):
        support.put_record(db, key + "mohe", "not json {")
        support.put_record(db, key + "zhiwei", support.record_json("xmpp-mohe-v2", now - 10, "zhiwei"))
        support.put_record(db, key + "xiaoguo", support.record_json("20991231_000000_000000", now - 10, "xiaoguo"))
        support.execute(db, "INSERT OR REPLACE INTO state_meta VALUES ('active_xmpp_sender_session', X'FFFE41')")

    def legacy(db):
        support.put_record(db, "active_xmpp_sender_session", support.record_json(CLI_SESSION, now - 5, None))

    def rows(db):
        for i, (role, content) in enumerate(ROWS):
            support.execute(
                db,
                "INSERT INTO messages (session_id, role, content, timestamp, tool_call_id) VALUES (?, ?, ?, ?, ?)",
                ("xmpp-mohe-v2", role, content, now + i, "call_x" if role == "tool" else None),
            )
        support.execute(
            db,
            "CREATE TABLE IF NOT EXISTS session_switch_sent (message_id INTEGER PRIMARY KEY, "
            "agent TEXT NOT NULL, cli_session_id TEXT NOT NULL, sent_at REAL NOT NULL)",
        )
        support.execute(
            db,
            "INSERT INTO session_switch_sent SELECT id, 'mohe', ?, ? FROM messages ORDER BY id DESC LIMIT ?",
            (CLI_SESSION, now, SENT_ROWS),
        )

    return [("pristine", pristine), ("valid", valid), ("expired", expired), ("future", future),
            ("malformed", malformed), ("legacy", legacy), ("rows", rows)]


class Differential(unittest.TestCase):
    def setUp(self):
        self.dir = support.tempdir(self)
        self.compared = 0

    def home(self, fixture, name):
        return support.hermes_home(self.dir / f"{fixture}-{name}", fixture, support.ejabberd())

    def test_all_fixtures_all_states(self):
        for fixture in support.FIXTURES:
            for name, arrange in states():
                with self.subTest(fixture=fixture, state=name):
                    self.check_state(fixture, name, arrange)
        self.assertGreater(self.compared, 3 * 7 * 10)

    def check_state(self, fixture, name, arrange):
        home = self.home(fixture, name)
        db = home / "state.db"
        arrange(db)
        before, digest = support.table_snapshot(db), sha256(db)
        cli = support.Cli(home)
        bridge = Bridge(home)
        mine = [bridge.context(a, s, limit) for a, s, limit in QUERIES]
        resolves = [bridge.resolve(a, s) for a, s, _ in QUERIES]
        active = bridge.active()
        with self.assertRaises(SessionSwitchError) as unknown:
            bridge.context("nobody", "xmpp-mohe-v2")
        self.assertEqual(sha256(db), digest, "the binding's reads changed the file")
        self.assertEqual(support.table_snapshot(db), before)

        for (agent, sid, limit), got in zip(QUERIES, mine):
            args = ["context", sid, "--agent", agent] + (["--limit", str(limit)] if limit is not None else [])
            self.assertEqual(normalised(got), normalised(cli.json(*args)), f"context {args}")
            self.compared += 1
        for (agent, sid, _), got in zip(QUERIES, resolves):
            self.assertEqual(normalised(got), normalised(cli.json("resolve", sid, "--agent", agent)))
            self.compared += 1
        rust_active = cli.json("active")
        self.assertEqual(len(active), len(rust_active))
        for p, r in zip(active, rust_active):
            for key in ("age_seconds", "remaining_seconds"):
                if r[key] is None:
                    self.assertIsNone(p[key])
                else:
                    self.assertAlmostEqual(p[key], r[key], delta=30)
                    p[key] = r[key]
            self.assertEqual(normalised(p), normalised(r))
        self.compared += 1
        status, _, err = cli.run("context", "xmpp-mohe-v2", "--agent", "nobody")
        self.assertEqual(unknown.exception.kind, "unknown-agent")
        self.assertEqual((status, f"xmpp-session-bridge: {unknown.exception.message}\n"), (2, err))

        # Clear on two copies of the same state: the same keys go, the same rows stay.
        py_home, rust_home = self.dir / f"{fixture}-{name}-py", self.dir / f"{fixture}-{name}-rust"
        for h in (py_home, rust_home):
            shutil.copytree(home, h)
        cleared = Bridge(py_home).clear()
        self.assertEqual(cleared, support.Cli(rust_home).json("clear"))
        self.assertEqual(support.table_snapshot(py_home / "state.db"), support.table_snapshot(rust_home / "state.db"))
        self.compared += 1

        if name == "pristine":
            room = "coregroup@conference." + (support.ejabberd().domain if support.ejabberd() else "meeting.localhost")
            room = support.ejabberd().room if support.ejabberd() else room
            for agent, sender in [("mohe", f"{room}/mohe"), ("mohe", f"{room}/mohe2"),
                                  ("mohe", "MOHE@meeting.localhost/gajim"), ("zhiwei", "mohe"),
                                  ("xiaoguo", f"{room}/xiaoguo")]:
                self.assertEqual({"own": bridge.is_own(agent, sender)}, cli.json("is-own", sender, "--agent", agent))
                self.compared += 1

    def test_the_rows_state_shows_what_each_edit_does(self):
        home = self.home("hermes-latest.db", "look")
        dict(states())["rows"](home / "state.db")
        messages = Bridge(home).context("mohe", "xmpp-mohe-v2")["messages"]
        self.assertEqual(
            [m["content"] for m in messages[-len(ROWS):]],
            # Hermes's loader strips user and assistant text with Python's
            # whitespace (U+001C-U+001F included) and keeps a NULL content
            # as None: the separators are gone before tagging.
            [
                "zhiwei: fake",
                "[YOU] mine, behind a separator",
                "zhiwei: behind a separator",
                "[YOU] mohe: 全角空格",
                None,
                "[YOU] mohe：全角冒号",
                "[YOU] [mohe] bracketed",
                "mohe2: not mohe",
                "[YOU] mohe: stacked",
                "[YOU] mohe: line separator first",
                "[YOU] tool output",
                "[YOU] written by the bridge",
                "[YOU] bridge row behind a separator",
            ],
        )

    def test_defaults_follow_hermes_home_and_the_extension_uses_the_process_sqlite(self):
        import os
        import sqlite3
        home = self.home("hermes-0.19.0.db", "env")
        old = os.environ.get("HERMES_HOME")
        os.environ["HERMES_HOME"] = str(home)
        try:
            bridge = Bridge()
        finally:
            if old is None:
                del os.environ["HERMES_HOME"]
            else:
                os.environ["HERMES_HOME"] = old
        self.assertEqual(str(bridge.db_path), str(home / "state.db"))
        self.assertEqual(str(bridge.config_path), str(home / "session-switch.toml"))
        self.assertIsNone(bridge.policy_file)
        self.assertEqual(bridge.version(), support.Cli(home).json("resolve", "x", "--agent", "mohe") and bridge.version())
        self.assertTrue(bridge.version().startswith("session-switch-policy "))
        info = session_switch.build_info()
        self.assertEqual(info["sqlite_version"], sqlite3.sqlite_version)
        self.assertEqual(info["version"], session_switch.__version__)
        # The extension defines no SQLite symbol: the process's libsqlite3 serves it.
        import subprocess
        out = subprocess.run(["nm", "-D", "--defined-only", session_switch._native.__file__],
                             capture_output=True, text=True, check=True).stdout
        self.assertNotIn(" sqlite3_", out)
        needed = subprocess.run(["ldd", session_switch._native.__file__], capture_output=True, text=True).stdout
        self.assertIn("libsqlite3.so.0", needed)

    def test_failures_carry_their_kind(self):
        home = self.home("hermes-latest.db", "kinds")
        bridge = Bridge(home)
        cases = [
            (lambda: bridge.resolve("nobody", "x"), "unknown-agent"),
            (lambda: Bridge(self.dir / "nowhere"), "bad-input"),
            (lambda: Bridge(home, db=self.dir / "missing.db").resolve("mohe", "xmpp-mohe-v2"), "store"),
            (lambda: bridge.send("mohe", CLI_SESSION, "   "), "bad-input"),
            # Ids Hermes's API server refuses, as the CLI refuses them (exit 2).
            (lambda: bridge.resolve("mohe", ""), "bad-input"),
            (lambda: bridge.context("mohe", "../etc"), "bad-input"),
            (lambda: Bridge(home, policy=self.dir / "none.wasm"), None),
            # Limits the CLI's --limit refuses, not Python's OverflowError.
            (lambda: bridge.context("mohe", "xmpp-mohe-v2", limit=-1), "bad-input"),
            (lambda: bridge.context("mohe", "xmpp-mohe-v2", limit=2**70), "bad-input"),
            # A str with a lone surrogate is not UTF-8 (the CLI's exit 2).
            (lambda: bridge.resolve("mohe", "xmpp-\ud800"), "bad-input"),
            (lambda: bridge.is_own("mohe", "coregroup@conference.meeting.localhost/\udcff"), "bad-input"),
            (lambda: bridge.send("\ud83d", CLI_SESSION, "hi"), "bad-input"),
            # A path Python cannot encode for the file system: no panic.
            (lambda: Bridge(home, policy="x\ud800.wasm"), "bad-input"),
            (lambda: bridge.reload("x\ud800"), "bad-input"),
            # A bool is an int to Python, not a number of rows.
            (lambda: bridge.context("mohe", "xmpp-mohe-v2", limit=True), "bad-input"),
        ]
        for call, kind in cases:
            with self.assertRaises(SessionSwitchError) as caught:
                call()
            if kind is not None:
                self.assertEqual(caught.exception.kind, kind, caught.exception.message)
            self.assertTrue(caught.exception.message)
        self.assertEqual(len(bridge.context("mohe", "xmpp-mohe-v2", limit=2)["messages"]), 2)
        with self.assertRaisesRegex(TypeError, "session_id"):
            bridge.resolve("mohe", 3)
        with self.assertRaisesRegex(TypeError, "db"):
            Bridge(home, db=3)
        # A path as bytes, as os.fsencode gives it, is a path.
        self.assertEqual(Bridge(os.fsencode(home)).resolve("mohe", "xmpp-mohe-v2")["session_id"],
                         bridge.resolve("mohe", "xmpp-mohe-v2")["session_id"])
        # tag_messages refuses the ids resolve refuses, and edits nothing.
        messages = [{"role": "user", "content": "mohe: hi"}]
        with self.assertRaises(SessionSwitchError) as caught:
            bridge.tag_messages("mohe", "../etc", messages)
        self.assertEqual(caught.exception.kind, "bad-input")
        self.assertEqual(messages, [{"role": "user", "content": "mohe: hi"}])
        self.assertEqual(bridge.tag_messages("mohe", "xmpp-mohe-v2", messages), 1)

    def test_a_failure_pickles_with_its_kind(self):
        # As a process pool passes it back to its caller.
        bridge = Bridge(self.home("hermes-latest.db", "pickle"))
        with self.assertRaises(SessionSwitchError) as caught:
            bridge.resolve("nobody", "x")
        self.assertEqual(SessionSwitchError.__module__, "session_switch")
        back = pickle.loads(pickle.dumps(caught.exception))
        self.assertIs(type(back), SessionSwitchError)
        self.assertEqual((back.kind, back.message), ("unknown-agent", caught.exception.message))
        self.assertEqual(str(back), str(caught.exception))


if __name__ == "__main__":
    unittest.main()
