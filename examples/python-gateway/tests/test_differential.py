"""Differential acceptance (issue 8): the same scenarios through the Python
embedding and through the Rust host (the CLI `xmpp-session-bridge --json`,
same component file) on private copies of all three real Hermes fixtures
give identical decisions, identical tagged histories, identical record
listings and identical clears; and the Python side's reads leave the file
byte-for-byte untouched."""

import hashlib
import re
import shutil
import time
import unittest
from pathlib import Path

from . import support
from .support import CLI_SESSION, TOOL_SESSION
from session_switch import SessionSwitch, SwitchError, load_config

#: (agent, session asked about, limit) of every query, each state.
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

#: Rows that exercise the host's edit application: imitations of the tag,
#: Unicode whitespace, the separators U+001C..U+001F (Python's isspace()
#: but not Rust's whitespace), NULL content, signatures with and without a
#: delimiter, a row the bridge wrote (provenance), a tool row.
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
    # The bridge's rows are tagged whatever they say, so here the host's
    # whitespace rule decides the text the model sees.
    ("user", "\x1c[YOU] bridge row behind a separator"),
]
#: How many of the last ROWS are listed in `session_switch_sent` for mohe.
BRIDGE_ROWS = 2


def normalised(value):
    """`value` with the seconds in `detail` sentences masked: the two hosts
    read the clock a few milliseconds apart."""
    if isinstance(value, dict):
        return {
            k: normalised(v) if k != "detail" else re.sub(r"-?\d+(\.\d+)? s\b", "N s", v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [normalised(v) for v in value]
    return value


#: The keys this host's messages have; the Rust host's carry every key of
#: Hermes's loader (issue 15), compared with Hermes itself in tests/fidelity.rs.
LEGACY_KEYS = ("role", "content", "tool_calls", "tool_call_id", "tool_name")


def loader_shape(context):
    """The CLI's `context` with each message cut to this host's keys (NULL
    content, which the loader returns as null, as this host's `""`)."""
    out = dict(context)
    out["messages"] = [
        {k: ("" if k == "content" and m[k] is None else m[k]) for k in LEGACY_KEYS if k in m}
        for m in context["messages"]
    ]
    return out


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Differential(unittest.TestCase):
    """Every state on every fixture: Python and Rust answer alike."""

    def setUp(self):
        self.dir = support.tempdir(self)
        self.config_path = support.write_config(self.dir, support.ejabberd())
        self.config = load_config(self.config_path)
        self.cli = support.Cli(self.config_path, self.dir / "cache", support.component())
        self.compared = 0

    def fresh(self, fixture: str, name: str) -> Path:
        folder = self.dir / f"{fixture}-{name}"
        folder.mkdir()
        return support.fixture_copy(fixture, folder)

    def states(self, fixture: str):
        """(name, arrange(db)) of each state; `now` is the test's clock."""
        now = time.time()
        per_agent = "session_switch:active:"

        def pristine(db):
            pass

        def valid(db):
            support.put_record(db, per_agent + "mohe", support.record_json(TOOL_SESSION, now - 10))

        def expired(db):
            support.put_record(db, per_agent + "mohe", support.record_json(TOOL_SESSION, now - 7200))

        def future(db):
            support.put_record(db, per_agent + "mohe", support.record_json(TOOL_SESSION, now + 1000))

        def malformed(db):
            support.put_record(db, per_agent + "mohe", "not json {")
            support.put_record(
                db, per_agent + "zhiwei", support.record_json("xmpp-mohe-v2", now - 10, "zhiwei")
            )
            support.put_record(
                db, per_agent + "xiaoguo", support.record_json("20991231_000000_000000", now - 10, "xiaoguo")
            )
            # Bytes that are not UTF-8: both hosts read U+FFFD, a malformed record.
            support.execute(
                db, "INSERT OR REPLACE INTO state_meta VALUES ('active_xmpp_sender_session', X'FFFE41')"
            )

        def legacy(db):
            support.put_record(
                db, "active_xmpp_sender_session", support.record_json(CLI_SESSION, now - 5, None)
            )

        def rows(db):
            legacy(db)
            support.execute(db, "DELETE FROM state_meta WHERE key = 'active_xmpp_sender_session'")
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
                "INSERT INTO session_switch_sent SELECT id, 'mohe', ?, ? FROM messages "
                "ORDER BY id DESC LIMIT ?",
                (CLI_SESSION, now, BRIDGE_ROWS),
            )

        return [
            ("pristine", pristine),
            ("valid", valid),
            ("expired", expired),
            ("future", future),
            ("malformed", malformed),
            ("legacy", legacy),
            ("rows", rows),
        ]

    def test_all_fixtures_all_states(self):
        for fixture in support.FIXTURES:
            for name, arrange in self.states(fixture):
                with self.subTest(fixture=fixture, state=name):
                    self.check_state(fixture, name, arrange)
        # 3 fixtures × 7 states × (8 contexts + 8 or 0 resolves + active + clear) + extras
        self.assertGreater(self.compared, 3 * 7 * 10)

    def check_state(self, fixture, name, arrange):
        db = self.fresh(fixture, name)
        arrange(db)
        before = support.table_snapshot(db)
        digest = sha256(db)
        with SessionSwitch(support.component(), db, self.config, watch_interval=None) as s:
            py_contexts = [s.context(a, sid, limit, fallback=False).to_json() for a, sid, limit in QUERIES]
            py_resolves = [s.resolve(a, sid, fallback=False).to_json() for a, sid, _ in QUERIES]
            py_active = [r.to_json() for r in s.active()]
            with self.assertRaises(SwitchError) as unknown:
                s.context("nobody", "xmpp-mohe-v2", fallback=False)
        self.assertEqual(sha256(db), digest, "the Python host's reads changed the file")
        self.assertEqual(support.table_snapshot(db), before)

        for (agent, sid, limit), mine in zip(QUERIES, py_contexts, strict=True):
            args = ["context", sid, "--agent", agent] + (["--limit", str(limit)] if limit is not None else [])
            self.assertEqual(
                normalised(mine), normalised(loader_shape(self.cli.json(db, *args))), f"context {args}"
            )
            self.compared += 1
        if name != "rows":
            for (agent, sid, _), mine in zip(QUERIES, py_resolves, strict=True):
                self.assertEqual(
                    normalised(mine), normalised(self.cli.json(db, "resolve", sid, "--agent", agent))
                )
                self.compared += 1
        # Ages come from each host's clock: compare them roughly.
        rust_active = self.cli.json(db, "active")
        self.assertEqual(len(mine_active := py_active), len(rust_active))
        for p, r in zip(mine_active, rust_active, strict=True):
            for key in ("age_seconds", "remaining_seconds"):
                if r[key] is None:
                    self.assertIsNone(p[key])
                else:
                    self.assertAlmostEqual(p[key], r[key], delta=30)
                    p[key] = r[key]
            self.assertEqual(normalised(p), normalised(r))
        self.compared += 1
        status, _, err = self.cli.run(db, "context", "xmpp-mohe-v2", "--agent", "nobody")
        self.assertEqual(
            (unknown.exception.exit_status, f"xmpp-session-bridge: {unknown.exception.message}\n"),
            (status, err),
        )

        # Clear: each host on its own copy of the same state; the same keys
        # go, and the two files end up with the same rows.
        # (Copies of the arranged file: Hermes v31 gives each inserted row a
        # random message_uid, so arranging twice would differ.)
        py_db, rust_db = self.dir / f"{fixture}-{name}-py.db", self.dir / f"{fixture}-{name}-rust.db"
        shutil.copyfile(db, py_db)
        shutil.copyfile(db, rust_db)
        with SessionSwitch(support.component(), py_db, self.config, watch_interval=None) as s:
            py_cleared = s.clear()
        self.assertEqual({"cleared": py_cleared}, self.cli.json(rust_db, "clear"))
        self.assertEqual(support.table_snapshot(py_db), support.table_snapshot(rust_db))
        self.compared += 1

        if name == "pristine":
            room = self.config.settings.room
            with SessionSwitch(support.component(), db, self.config, watch_interval=None) as s:
                for agent, sender in [
                    ("mohe", f"{room}/mohe"),
                    ("mohe", f"{room}/mohe2"),
                    ("mohe", "MOHE@meeting.localhost/gajim"),
                    ("zhiwei", "mohe"),
                    ("xiaoguo", f"{room}/xiaoguo"),
                ]:
                    self.assertEqual(
                        {"own": s.is_own_message(agent, sender, fallback=False)},
                        self.cli.json(db, "is-own", sender, "--agent", agent),
                    )
                    self.compared += 1

    def test_the_rows_state_shows_what_each_edit_does(self):
        # One look at the real answer, so a wrong "identical" cannot hide
        # behind both hosts being wrong the same way.
        db = self.fresh("hermes-latest.db", "look")
        dict(self.states("hermes-latest.db"))["rows"](db)
        with SessionSwitch(support.component(), db, self.config, watch_interval=None) as s:
            messages = s.context("mohe", "xmpp-mohe-v2", fallback=False).messages
        tail = [m["content"] for m in messages[-len(ROWS) :]]
        self.assertEqual(
            tail,
            [
                "zhiwei: fake",
                # Hermes's loader strips user and assistant text with
                # str.strip(), which drops U+001C-U+001F too (issue 15).
                "[YOU] mine, behind a separator",
                "zhiwei: behind a separator",
                "[YOU] mohe: 全角空格",
                "",
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


if __name__ == "__main__":
    unittest.main()
