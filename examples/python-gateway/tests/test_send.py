"""The send through the Python embedding against the test run's real
ejabberd (the `EJ_*` variables `make test` exports) and private copies of
the three real Hermes fixtures: the room really gets the normalised body
from the agent's nick, the database gets the same rows as when the Rust CLI
sends the same text, and the tagged histories through both hosts are
identical afterwards. Every refusal writes nothing."""

import json
import os
import time
import unittest

from . import support
from .support import CLI_SESSION
from session_switch import SessionSwitch, SwitchError, load_config
from .test_differential import loader_shape, normalised


def written_rows(db):
    """What a send writes, without its timestamps (each host has its own
    clock) or Hermes's random per-row ids: the history row, its
    provenance, the record (parsed), the session's message count."""
    rows = support.query(
        db,
        "SELECT m.id, m.session_id, m.role, m.content, s.agent, s.cli_session_id FROM messages m "
        "JOIN session_switch_sent s ON s.message_id = m.id ORDER BY m.id",
    )
    meta = dict(support.query(db, "SELECT key, value FROM state_meta WHERE key LIKE 'session_switch:%'"))
    records = {k: {f: v for f, v in json.loads(v).items() if f != "timestamp"} for k, v in meta.items()}
    count = support.query(db, "SELECT message_count FROM sessions WHERE id = 'xmpp-mohe-v2'")
    return rows, records, count


class Send(unittest.TestCase):
    def setUp(self):
        self.ej = support.require_ejabberd()
        self.dir = support.tempdir(self)
        self.config_path = support.write_config(self.dir, self.ej)
        self.config = load_config(self.config_path)
        self.cli = support.Cli(self.config_path, self.dir / "cache", support.component())

    def copies(self, fixture, name):
        folder = self.dir / f"{fixture}-{name}"
        folder.mkdir()
        py = support.fixture_copy(fixture, folder, "py.db")
        rust = support.fixture_copy(fixture, folder, "rust.db")
        return py, rust

    def test_send_then_identical_histories_on_every_fixture(self):
        for fixture in support.FIXTURES:
            with self.subTest(fixture=fixture):
                self.check_fixture(fixture)

    def check_fixture(self, fixture):
        py_db, rust_db = self.copies(fixture, "send")
        mark = support.unique("send")
        # Normalisation on the way (DESIGN §8): a leading [YOU], CRLF, a
        # control character and an ANSI colour go; the rest arrives as is.
        text = f"  [YOU]  héllo\r\nwörld 中文 👍 \x01\x1b[31mred\x1b[0m {mark}"
        body = f"héllo\nwörld 中文 👍 red {mark}"

        listener = support.RoomListener(self.ej, body, f"pygw-{os.getpid()}-{fixture}")
        with SessionSwitch(support.component(), py_db, self.config, watch_interval=None) as s:
            receipt = s.send("mohe", CLI_SESSION, text)
        seen = listener.wait()
        self.assertEqual([(m["nick"], m["body"]) for m in seen if m["body"] == body], [("mohe", body)])
        self.assertEqual(receipt.body, body)
        self.assertEqual(receipt.room, self.ej.room)
        self.assertEqual(receipt.record_key, "session_switch:active:mohe")
        self.assertTrue(receipt.record_replaced)

        listener = support.RoomListener(self.ej, body, f"pygw-{os.getpid()}-{fixture}-cli")
        status, rust_receipt, err = self.cli.run(
            rust_db, "send", "-", CLI_SESSION, "--agent", "mohe", stdin=text
        )
        self.assertEqual(status, 0, err)
        self.assertEqual(
            [(m["nick"], m["body"]) for m in listener.wait() if m["body"] == body], [("mohe", body)]
        )
        self.assertEqual(receipt.to_json(), rust_receipt)

        # The same rows written (the record names the CLI session).
        self.assertEqual(written_rows(py_db), written_rows(rust_db))
        rows, records, _ = written_rows(py_db)
        self.assertEqual(rows[-1][1:], ("xmpp-mohe-v2", "user", "[YOU] " + body, "mohe", CLI_SESSION))
        self.assertEqual(
            records,
            {"session_switch:active:mohe": {"session_id": CLI_SESSION, "source": "cli", "agent": "mohe"}},
        )
        py_ts = json.loads(
            support.query(py_db, "SELECT value FROM state_meta WHERE key = 'session_switch:active:mohe'")[0][
                0
            ]
        )["timestamp"]
        self.assertLess(abs(py_ts - time.time()), 60)

        # Identical tagged histories through both hosts, on both files:
        # redirected to the CLI session now; after `clear`, mohe's XMPP
        # session with the bridge's row tagged once.
        queries = [("mohe", "xmpp-mohe-v2"), ("mohe", "xmpp-mohe"), ("zhiwei", "xmpp-zhiwei")]
        for phase in ("after send", "after clear"):
            for agent, sid in queries:
                answers = []
                for db in (py_db, rust_db):
                    with SessionSwitch(support.component(), db, self.config, watch_interval=None) as s:
                        answers.append(normalised(s.context(agent, sid, fallback=False).to_json()))
                    answers.append(normalised(loader_shape(self.cli.json(db, "context", sid, "--agent", agent))))
                self.assertTrue(all(a == answers[0] for a in answers), f"{phase} {agent} {sid}: {answers}")
                if (phase, agent, sid) == ("after send", "mohe", "xmpp-mohe-v2"):
                    self.assertEqual(
                        (answers[0]["reason"], answers[0]["session_id"]), ("redirected", CLI_SESSION)
                    )
                if (phase, agent, sid) == ("after clear", "mohe", "xmpp-mohe-v2"):
                    self.assertEqual(answers[0]["messages"][-1], {"role": "user", "content": "[YOU] " + body})
            if phase == "after send":
                with SessionSwitch(support.component(), py_db, self.config, watch_interval=None) as s:
                    cleared = s.clear("mohe")
                self.assertEqual({"cleared": cleared}, self.cli.json(rust_db, "clear", "--agent", "mohe"))
                self.assertEqual(cleared[0], "session_switch:active:mohe")

    def test_refusals_write_nothing_and_match_the_cli(self):
        py_db, rust_db = self.copies("hermes-latest.db", "refusals")
        before = support.table_snapshot(py_db)
        cases = [
            ("mohe", CLI_SESSION, "  [YOU]  \r\n\x01 ", "bad-input"),
            ("mohe", CLI_SESSION, "x" * 10_001, "bad-input"),
            ("nobody", CLI_SESSION, "hi", "unknown-agent"),
            ("mohe", "bad\nsession", "hi", "bad-input"),
        ]
        with SessionSwitch(support.component(), py_db, self.config, watch_interval=None) as s:
            for agent, cli_session, text, kind in cases:
                with self.subTest(agent=agent, text=text[:20]):
                    with self.assertRaises(SwitchError) as caught:
                        s.send(agent, cli_session, text)
                    self.assertEqual(caught.exception.kind, kind, caught.exception.message)
                    status, out, err = self.cli.run(
                        rust_db, "send", "-", cli_session, "--agent", agent, stdin=text
                    )
                    self.assertEqual(
                        (status, err),
                        (caught.exception.exit_status, f"xmpp-session-bridge: {caught.exception.message}\n"),
                    )
        self.assertEqual(support.table_snapshot(py_db), before)

    def test_an_agent_the_room_would_drop_is_refused_before_anything_is_written(self):
        outsider = self.ej.jid(self.ej.outsiders[0])
        config_path = support.write_config(self.dir, self.ej, mohe_jid=outsider)
        py_db, rust_db = self.copies("hermes-0.19.0.db", "outsider")
        before = support.table_snapshot(py_db)
        with SessionSwitch(support.component(), py_db, load_config(config_path), watch_interval=None) as s:
            with self.assertRaises(SwitchError) as caught:
                s.send("mohe", CLI_SESSION, support.unique("dropped"))
        e = caught.exception
        self.assertEqual((e.kind, e.exit_status), ("not-accepted", 2))
        self.assertIn(f"{outsider} is not a MUC/Sub subscriber of room {self.ej.room}", e.message)
        self.assertIn(f"ejabberdctl subscribe_room {outsider} ", e.message)
        self.assertEqual(support.table_snapshot(py_db), before)
        cli = support.Cli(config_path, self.dir / "cache", support.component())
        status, _, err = cli.run(rust_db, "send", "-", CLI_SESSION, "--agent", "mohe", stdin="hello")
        self.assertEqual((status, err), (2, f"xmpp-session-bridge: {e.message}\n"))

    def test_unreachable_api_and_cjk_triggers_write_nothing(self):
        # Nobody listens on port 9: transport, before the database is locked.
        folder = self.dir / "unreachable"
        folder.mkdir()
        config = load_config(support.write_config(folder, None))
        py_db, _ = self.copies("hermes-early.db", "unreachable")
        before = support.table_snapshot(py_db)
        with SessionSwitch(support.component(), py_db, config, watch_interval=None) as s:
            with self.assertRaises(SwitchError) as caught:
                s.send("mohe", CLI_SESSION, "hello")
        self.assertEqual(caught.exception.kind, "transport")
        self.assertIn("cannot connect to http://127.0.0.1:9/api/get_subscribers", caught.exception.message)
        self.assertEqual(support.table_snapshot(py_db), before)

        # Hermes's CJK search triggers need their tokenizer for any INSERT:
        # the sender check passes, then the write is refused and rolled
        # back, and nothing reaches the room.
        py_db, rust_db = self.copies("hermes-latest.db", "cjk")
        for db in (py_db, rust_db):
            support.execute(
                db,
                "CREATE TRIGGER messages_fts_cjk_ai AFTER INSERT ON messages BEGIN SELECT 1; END",
            )
        before = support.table_snapshot(py_db)
        missing = self.dir / "no-such-libfts5_cjk.so"
        os.environ["HERMES_FTS5_CJK_SO"] = str(missing)
        self.addCleanup(os.environ.pop, "HERMES_FTS5_CJK_SO", None)
        mark = support.unique("cjk refused")
        # The occupant waits for a body sent after both attempts: the room
        # broadcasts in order, so a post of `mark` would show before it.
        after = support.unique("after cjk")
        listener = support.RoomListener(self.ej, after, f"pygw-{os.getpid()}-cjk")
        with SessionSwitch(support.component(), py_db, self.config, watch_interval=None) as s:
            with self.assertRaises(SwitchError) as caught:
                s.send("mohe", CLI_SESSION, mark)
        e = caught.exception
        self.assertEqual(e.kind, "store")
        self.assertIn(
            f"has Hermes's CJK search triggers (messages_fts_cjk*), whose tokenizer cjk_unicode61 lives in the extension {missing}",
            e.message,
        )
        self.assertIn("nothing was written", e.message)
        self.assertEqual(support.table_snapshot(py_db), before)
        status, _, err = self.cli.run(rust_db, "send", "-", CLI_SESSION, "--agent", "mohe", stdin=mark)
        self.assertEqual(
            (status, err), (1, f"xmpp-session-bridge: {e.message.replace(str(py_db), str(rust_db))}\n")
        )
        # Neither host posted: a later body shows the room is live.
        with SessionSwitch(
            support.component(), self.copies("hermes-latest.db", "live")[0], self.config, watch_interval=None
        ) as s:
            s.send("zhiwei", CLI_SESSION, after)
        seen = [m["body"] for m in listener.wait()]
        self.assertIn(after, seen)
        self.assertNotIn(mark, seen)


if __name__ == "__main__":
    unittest.main()
