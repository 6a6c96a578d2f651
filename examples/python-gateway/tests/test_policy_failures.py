"""A policy that traps, loops, hoards memory or breaks the contract, and
components that must not load: clear exceptions, safe fallbacks, and the
instance thrown away (the next call works). Over a real fixture copy."""

import json
import sqlite3
import time
import unittest

from . import support
from session_switch import Decision, PolicyError, SessionSwitch, SwitchError, check_redirect, load_config


class Failures(unittest.TestCase):
    def setUp(self):
        self.dir = support.tempdir(self)
        self.db = support.fixture_copy("hermes-latest.db", self.dir)
        self.config = load_config(support.write_config(self.dir, None))

    def switch(self, component, **options):
        s = SessionSwitch(component, self.db, self.config, watch_interval=None, **options)
        self.addCleanup(s.close)
        return s

    def test_a_panic_is_a_clear_exception_and_a_safe_fallback(self):
        before = support.table_snapshot(self.db)
        s = self.switch(support.variant("panic"))
        # Without fallback: the exception names the version, the call, the
        # trap and the panic message the guest logged.
        with self.assertRaises(PolicyError) as caught:
            s.resolve("mohe", "xmpp-mohe-v2", fallback=False)
        message = str(caught.exception)
        self.assertEqual(caught.exception.kind, "policy")
        self.assertTrue(
            message.startswith(f"policy `{s.version}` failed in `resolve`: wasm trap: wasm `unreachable`"),
            message,
        )
        self.assertNotIn("memory cap", message)
        self.assertIn("variant-panic: resolve panicked on purpose", message)
        self.assertTrue(message.endswith("Fix or replace the policy component"), message)
        self.assertNotIn("\n", message)
        # With fallback (the default): the session asked about, no redirect.
        d = s.resolve("mohe", "xmpp-mohe-v2")
        self.assertEqual((d.session_id, d.redirected, d.reason), ("xmpp-mohe-v2", False, "policy-error"))
        self.assertTrue(d.detail.startswith("no redirect: policy `"), d.detail)
        self.assertIn("panicked on purpose", d.detail)
        # The trapped store is gone; the next call gets a fresh instance.
        self.assertTrue(s.is_own_message("mohe", "mohe", fallback=False))
        c = s.context("mohe", "xmpp-mohe-v2", fallback=False)
        self.assertEqual(c.messages[0]["content"], "[YOU] mohe: 大家好，今天的会议改到下午三点。")
        self.assertEqual(support.table_snapshot(self.db), before)

    def test_a_loop_runs_out_of_fuel_quickly(self):
        s = self.switch(support.variant("loop"))
        started = time.monotonic()
        with self.assertRaises(PolicyError) as caught:
            s.resolve("mohe", "xmpp-mohe-v2", fallback=False)
        self.assertLess(time.monotonic() - started, 10)
        self.assertIn("it ran out of fuel (2000000000 units per call): it loops", str(caught.exception))
        self.assertEqual(s.last_call_fuel, 2_000_000_000)
        self.assertEqual(s.resolve("mohe", "xmpp-mohe-v2").reason, "policy-error")
        # A smaller budget stops it sooner, and still leaves the rest working.
        small = self.switch(support.variant("loop"), fuel_per_call=5_000_000)
        with self.assertRaises(PolicyError) as caught:
            small.resolve("mohe", "xmpp-mohe-v2", fallback=False)
        self.assertIn("(5000000 units per call)", str(caught.exception))
        self.assertEqual(small.context("mohe", "xmpp-mohe-v2").decision.reason, "expired")

    def test_hoarding_memory_stops_at_the_cap(self):
        s = self.switch(support.variant("alloc"), memory_bytes=16 << 20)
        with self.assertRaises(PolicyError) as caught:
            s.resolve("mohe", "xmpp-mohe-v2", fallback=False)
        message = str(caught.exception)
        self.assertIn("with no panic message: most likely it went past its memory cap of 16 MiB", message)
        self.assertNotIn("it said", message)
        self.assertEqual(s.context("mohe", "xmpp-mohe-v2").decision.reason, "expired")

    def test_bad_edits_are_refused_and_context_falls_back_to_untagged_rows(self):
        s = self.switch(support.variant("bad-edits"))
        with self.assertRaises(PolicyError) as caught:
            s.context("mohe", "xmpp-mohe-v2", fallback=False)
        self.assertIn(
            "failed in `context`: edit index 4294967295 is out of range: the history has 8 rows",
            str(caught.exception),
        )
        c = s.context("mohe", "xmpp-mohe-v2")
        self.assertEqual(c.decision.reason, "policy-error")
        stored = support.query(
            self.db,
            "SELECT role, content FROM messages WHERE session_id = 'xmpp-mohe-v2' AND active = 1 ORDER BY id",
        )
        self.assertEqual([(m["role"], m["content"]) for m in c.messages], stored)
        self.assertEqual(c.messages[0]["content"], "mohe: 大家好，今天的会议改到下午三点。")

    def test_a_failure_of_meta_get_reaches_the_caller_with_its_kind(self):
        # hermes-latest.db is in DELETE mode: an exclusive lock blocks readers.
        s = self.switch(support.component(), busy_timeout=0.05)
        blocker = sqlite3.connect(self.db, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")
        try:
            with self.assertRaises(SwitchError) as caught:
                s.resolve("mohe", "xmpp-mohe-v2", fallback=False)
            self.assertEqual(caught.exception.kind, "busy")
            self.assertIn("stayed locked by another connection", str(caught.exception))
            d = s.resolve("mohe", "xmpp-mohe-v2")
            self.assertEqual((d.reason, d.session_id), ("policy-error", "xmpp-mohe-v2"))
            # The fallback's own read fails too: that error is raised.
            with self.assertRaises(SwitchError) as caught:
                s.context("mohe", "xmpp-mohe-v2")
            self.assertEqual(caught.exception.kind, "busy")
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        self.assertEqual(s.resolve("mohe", "xmpp-mohe-v2", fallback=False).reason, "expired")

    def test_a_python_error_inside_a_call_is_a_policy_failure_with_a_fallback(self):
        from unittest import mock

        from session_switch import component, imports

        s = self.switch(support.component())
        # A bug in the host's glue (here: a summary whose prefix is not a
        # string, which cannot be lowered) must not escape as a bare
        # Python error: it is a failed call, with the usual fallback.
        broken = component.RowSummaries([(1, "user", 42, False)])
        with mock.patch.object(imports, "summaries", return_value=broken):
            with self.assertRaises(PolicyError) as caught:
                s.context("zhiwei", "xmpp-zhiwei", fallback=False)
            self.assertIn(
                "failed in `context`: the host failed while running it (AttributeError: ",
                str(caught.exception),
            )
            c = s.context("zhiwei", "xmpp-zhiwei")
        self.assertEqual(c.decision.reason, "policy-error")
        # The fallback's rows are as stored: no tag.
        self.assertEqual(c.messages[0]["content"], "zhiwei: Can you remind me about the 3pm meeting?")
        again = s.context("zhiwei", "xmpp-zhiwei", fallback=False)
        self.assertEqual(again.decision.reason, "no-record")
        self.assertEqual(
            again.messages[0]["content"], "[YOU] zhiwei: Can you remind me about the 3pm meeting?"
        )

    def test_content_that_is_not_text_is_a_store_failure(self):
        # rusqlite refuses it in the Rust store; Hermes never writes one.
        s = self.switch(support.component())
        support.execute(
            self.db,
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('xmpp-zhiwei', 'user', X'00ff', 1)",
        )
        for fallback in (False, True):
            with self.assertRaises(SwitchError) as caught:
                s.context("zhiwei", "xmpp-zhiwei", fallback=fallback)
            self.assertEqual(caught.exception.kind, "store")
            self.assertIn("messages.content of row", str(caught.exception))
            self.assertIn("holds bytes (b'\\x00\\xff'), not text", str(caught.exception))

    def test_failures_the_policy_returns_keep_their_kind(self):
        s = self.switch(support.component())
        with self.assertRaises(SwitchError) as caught:
            s.resolve("nobody", "xmpp-mohe-v2", fallback=False)
        self.assertEqual((caught.exception.kind, caught.exception.exit_status), ("unknown-agent", 2))
        self.assertNotIsInstance(caught.exception, PolicyError)
        with self.assertRaises(SwitchError) as caught:
            s.resolve("mohe", 42)
        self.assertEqual(caught.exception.kind, "bad-input")

    def test_components_that_must_not_load_are_refused_with_the_reason(self):
        garbage = self.dir / "garbage.wasm"
        garbage.write_bytes(b"\0asm not really")
        cases = [
            (support.variant("wasi"), "it imports `wasi:"),
            (
                support.variant("other-interface"),
                "does not export `agentsmeeting:session-switch/policy@0.1.0`",
            ),
            (support.variant("bad-self-check"), "self-check failed: variant-bad-self-check"),
            (garbage, "it is not a valid WebAssembly component"),
        ]
        for path, why in cases:
            with self.subTest(path.name):
                with self.assertRaises(PolicyError) as caught:
                    SessionSwitch(path, self.db, self.config, watch_interval=None)
                self.assertIn(f"refusing policy component {path}", str(caught.exception))
                self.assertIn(why, str(caught.exception))
        with self.assertRaises(SwitchError) as caught:
            SessionSwitch(self.dir / "missing.wasm", self.db, self.config, watch_interval=None)
        self.assertEqual(caught.exception.kind, "bad-input")
        self.assertIn("cannot read policy component", str(caught.exception))

    def test_a_missing_or_foreign_database_is_a_clear_error(self):
        with self.assertRaises(SwitchError) as caught:
            SessionSwitch(
                support.component(), self.dir / "nope" / "state.db", self.config, watch_interval=None
            )
        self.assertEqual(caught.exception.kind, "store")
        self.assertIn("no Hermes database at", str(caught.exception))
        self.assertIn("does not exist", str(caught.exception))
        other = self.dir / "other.db"
        support.execute(other, "CREATE TABLE t (x)")
        with self.assertRaises(SwitchError) as caught:
            SessionSwitch(support.component(), other, self.config, watch_interval=None)
        self.assertIn("is a SQLite database but not Hermes's", str(caught.exception))


if __name__ == "__main__":
    unittest.main()


HIJACKED = "20260619_193000_a1b2c3"
CLI_A = "20260619_190821_7c0afe"


class Hijack(unittest.TestCase):
    """SECURITY.md H1: a policy that redirects a bot to a session no record
    of the agent names (the `hijack` variant: always another person's CLI
    session, with a well-formed decision) is refused; a redirect a record
    names is honoured. The Rust host's test: tests/all/sandbox.rs."""

    def setUp(self):
        self.dir = support.tempdir(self)
        self.db = support.fixture_copy("hermes-latest.db", self.dir)
        self.config = load_config(support.write_config(self.dir, None))

    def set_record(self, key, session_id):
        value = json.dumps({"session_id": session_id, "timestamp": time.time() - 60, "source": "cli"})
        with sqlite3.connect(self.db) as c:
            c.execute(
                "INSERT INTO state_meta (key, value) VALUES (?1, ?2) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
            )
        c.close()

    def test_a_redirect_no_record_names_is_refused(self):
        before = support.table_snapshot(self.db)
        s = SessionSwitch(support.variant("hijack"), self.db, self.config, watch_interval=None)
        self.addCleanup(s.close)
        want = (
            f"failed in `resolve`: it redirected 'mohe' to session '{HIJACKED}', which no record of "
            "the agent names (read: session_switch:active:mohe, active_xmpp_sender_session). "
            "Fix or replace the policy component"
        )
        with self.assertRaises(PolicyError) as caught:
            s.resolve("mohe", "xmpp-mohe-v2", fallback=False)
        self.assertTrue(str(caught.exception).endswith(want), str(caught.exception))
        d = s.resolve("mohe", "xmpp-mohe-v2")
        self.assertEqual((d.session_id, d.redirected, d.reason), ("xmpp-mohe-v2", False, "policy-error"))
        with self.assertRaises(PolicyError) as caught:
            s.context("mohe", "xmpp-mohe-v2", fallback=False)
        self.assertTrue(str(caught.exception).endswith(want.replace("`resolve`", "`context`")))
        c = s.context("mohe", "xmpp-mohe-v2")
        self.assertEqual(c.decision.reason, "policy-error")
        self.assertEqual(c.messages[0]["content"], "mohe: 大家好，今天的会议改到下午三点。")
        with self.assertRaises(PolicyError) as caught:
            s.resolve("zhiwei", "xmpp-zhiwei", fallback=False)
        self.assertIn("(read: session_switch:active:zhiwei).", str(caught.exception))
        self.assertEqual(support.table_snapshot(self.db), before)
        # A valid record of mohe for another session, zhiwei's for the
        # target: still refused.
        self.set_record("session_switch:active:mohe", CLI_A)
        self.set_record("session_switch:active:zhiwei", HIJACKED)
        with self.assertRaises(PolicyError):
            s.resolve("mohe", "xmpp-mohe-v2", fallback=False)
        # The seed's key counts for the legacy agent; then mohe's own key.
        self.set_record("active_xmpp_sender_session", HIJACKED)
        d = s.resolve("mohe", "xmpp-mohe-v2", fallback=False)
        self.assertEqual((d.session_id, d.redirected), (HIJACKED, True))
        with sqlite3.connect(self.db) as conn:
            conn.execute("DELETE FROM state_meta WHERE key = 'active_xmpp_sender_session'")
        conn.close()
        self.set_record("session_switch:active:mohe", HIJACKED)
        c = s.context("mohe", "xmpp-mohe-v2", fallback=False)
        self.assertEqual((c.decision.session_id, c.decision.redirected), (HIJACKED, True))

    def test_check_redirect_reads_only_the_agents_records(self):
        records = {
            "session_switch:active:mohe": json.dumps({"session_id": CLI_A}),
            "active_xmpp_sender_session": json.dumps({"session_id": HIJACKED}),
            "session_switch:active:zhiwei": "not json",
        }
        read = []

        def meta_get(key):
            read.append(key)
            return records.get(key)

        to = lambda target: Decision(session_id=target, redirected=True, reason="redirected", detail="")
        self.assertIsNone(check_redirect(meta_get, "mohe", False, to(CLI_A)))
        self.assertEqual(read, ["session_switch:active:mohe"])
        self.assertIsNone(check_redirect(meta_get, "mohe", True, to(HIJACKED)))
        self.assertEqual(
            check_redirect(meta_get, "mohe", False, to(HIJACKED)),
            f"it redirected 'mohe' to session '{HIJACKED}', which no record of the agent names "
            "(read: session_switch:active:mohe)",
        )
        self.assertIn("which no record", check_redirect(meta_get, "zhiwei", False, to(CLI_A)))
        read.clear()
        stay = Decision(session_id="xmpp-mohe-v2", redirected=False, reason="no-record", detail="")
        self.assertIsNone(check_redirect(meta_get, "mohe", True, stay))
        self.assertEqual(read, [])
