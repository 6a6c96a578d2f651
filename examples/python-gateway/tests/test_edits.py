"""The host's edit application and answer checks (edits.py, switch.py):
the same text and the same verdicts as the Rust host's apply.rs and
session.rs, including where Python's own whitespace differs from Rust's."""

import unittest

from . import support  # noqa: F401  (puts the package on sys.path)
from session_switch import Decision, WHITE_SPACE, check_decision, edits, tag, untag
from session_switch.switch import fallback_decision
from session_switch.failure import PolicyError


class Untag(unittest.TestCase):
    def test_drops_every_leading_marker_and_whitespace(self):
        # The Rust host's own cases (host/src/runtime/apply.rs).
        self.assertEqual(untag("[YOU] hi"), "hi")
        self.assertEqual(untag("  [you]\t[YoU]  hi [YOU] there"), "hi [YOU] there")
        self.assertEqual(untag("[YOU]"), "")
        self.assertEqual(untag("\u3000[YOU]x"), "x")
        self.assertEqual(untag("[YO] hi"), "[YO] hi")
        self.assertEqual(untag("hi"), "hi")
        self.assertEqual(untag("   "), "")

    def test_tag_is_idempotent(self):
        self.assertEqual(tag("mohe: hi"), "[YOU] mohe: hi")
        self.assertEqual(tag(tag("mohe: hi")), "[YOU] mohe: hi")
        self.assertEqual(tag("[you]   [YOU]x"), "[YOU] x")

    def test_whitespace_is_unicode_white_space_not_str_isspace(self):
        # Python's isspace() = White_Space + U+001C..U+001F; Rust's
        # trim_start (char::is_whitespace) = White_Space only.
        python_only = [c for c in map(chr, range(0x110000)) if c.isspace() and c not in WHITE_SPACE]
        self.assertEqual(python_only, ["\x1c", "\x1d", "\x1e", "\x1f"])
        self.assertTrue(all(c.isspace() for c in WHITE_SPACE))
        self.assertEqual(len(WHITE_SPACE), 25)
        for sep in python_only:
            text = f"{sep}[YOU] hi"
            # What a bare lstrip() would have done, and what Rust does.
            self.assertEqual(text.lstrip(), "[YOU] hi")
            self.assertEqual(untag(text), text)
            self.assertEqual(tag(text), "[YOU] " + text)
        for ws in WHITE_SPACE:
            self.assertEqual(untag(f"{ws}[YOU]{ws}hi"), "hi")

    def test_only_ascii_case_folds(self):
        # The Kelvin sign lowers to "k"; nothing non-ASCII may count as a
        # marker letter.
        self.assertEqual(untag("[ＹOU] hi"), "[ＹOU] hi")
        self.assertEqual(untag("[yOu][YOU]"), "")


class Edits(unittest.TestCase):
    def test_out_of_range_or_twice_is_refused_and_changes_nothing(self):
        rows = ["mohe: a", "[YOU] b"]
        self.assertEqual(
            edits.apply_edits(rows, [(0, "tag"), (2, "tag")]),
            "edit index 2 is out of range: the history has 2 rows",
        )
        self.assertEqual(edits.apply_edits(rows, [(1, "untag"), (1, "tag")]), "row 1 is edited twice")
        self.assertEqual(rows, ["mohe: a", "[YOU] b"])
        self.assertIsNone(edits.apply_edits(rows, [(0, "tag"), (1, "untag")]))
        self.assertEqual(rows, ["[YOU] mohe: a", "b"])

    def test_roles_and_prefixes(self):
        self.assertEqual(
            [edits.role_of(r) for r in ("user", "assistant", "tool", "system", "session_meta", "User", None)],
            ["user", "assistant", "tool", "system", "other", "other", "other"],
        )
        self.assertEqual(edits.prefix("大家好，今天", 3), "大家好")
        self.assertEqual(edits.prefix("👍x", 1), "👍")
        self.assertEqual(edits.prefix("abc", 0), "")


class Decisions(unittest.TestCase):
    def d(self, session_id, redirected, reason):
        return Decision(session_id, redirected, reason, "")

    def test_decisions_that_break_the_contract_are_refused(self):
        asked, cli = "xmpp-mohe-v2", "20260619_190821_7c0afe"
        self.assertIsNone(check_decision(self.d(cli, True, "redirected"), asked))
        self.assertIsNone(check_decision(self.d(asked, False, "expired"), asked))
        self.assertIsNone(check_decision(self.d(asked, False, "not-agent-session"), asked))
        for d, why in [
            (self.d(cli, True, "expired"), "redirected = true with reason expired"),
            (self.d(cli, False, "redirected"), "redirected = false"),
            (self.d("", True, "redirected"), "empty session id"),
            (self.d(cli, False, "no-record"), "named session '20260619_190821_7c0afe'"),
            (self.d(asked, False, "policy-error"), "only the host gives"),
            (self.d(asked, False, "superseded"), "only active gives"),
            (self.d(asked, False, "sideways"), "unknown reason"),
        ]:
            self.assertIn(why, check_decision(d, asked))

    def test_the_fallback_loads_the_session_asked_about(self):
        d = fallback_decision("xmpp-mohe-v2", PolicyError("policy `x` failed in `resolve`: boom"))
        self.assertEqual(
            d,
            Decision(
                "xmpp-mohe-v2", False, "policy-error", "no redirect: policy `x` failed in `resolve`: boom"
            ),
        )


if __name__ == "__main__":
    unittest.main()
