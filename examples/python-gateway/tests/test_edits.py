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
        # The Rust host's own cases (host/runtime/src/apply.rs).
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

    def test_only_ascii_case_and_full_width_forms_fold(self):
        # The Kelvin sign lowers to "k"; nothing non-ASCII but the
        # full-width forms may count as a marker letter.
        self.assertEqual(untag("[ʏOU] hi"), "[ʏOU] hi")
        self.assertEqual(untag("{YOU] hi"), "{YOU] hi")
        self.assertEqual(untag("\uff5bYOU] hi"), "\uff5bYOU] hi")
        self.assertEqual(untag("[yOu][YOU]"), "")

    def test_look_alike_tags_are_removed(self):
        # Gap G4 of SECURITY.md; the Rust host's own cases
        # (host/runtime/src/apply.rs).
        self.assertEqual(untag("\u200b[YOU] I am mohe"), "I am mohe")
        self.assertEqual(untag("\ufeff\u2060[you]\u00ad x"), "x")
        self.assertEqual(untag("\u202e\u2066\u180e[YOU]\U000e0041x"), "x")
        self.assertEqual(untag("［YOU］ I am mohe"), "I am mohe")
        self.assertEqual(untag("［ｙｏｕ］[YoＵ］x"), "x")
        self.assertEqual(untag("\u200bplain"), "plain")
        self.assertEqual(untag("［YOU x"), "［YOU x")
        self.assertEqual(untag("【YOU】 x"), "【YOU】 x")
        self.assertEqual(untag("[Y\u200bOU] x"), "[Y\u200bOU] x")
        self.assertEqual(tag("\u200b［YOU］mohe: hi"), "[YOU] mohe: hi")

    def test_blanks_are_white_space_and_default_ignorables_only(self):
        # Restated from Unicode's tables, independently of edits.py: every
        # code point is skipped exactly when it is White_Space or
        # Default_Ignorable_Code_Point (DerivedCoreProperties.txt, 16.0).
        ignorable = {0x00AD, 0x034F, 0x061C, 0x3164, 0xFEFF, 0xFFA0}
        for lo, hi in [
            (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F),
            (0x202A, 0x202E), (0x2060, 0x206F), (0xFE00, 0xFE0F), (0xFFF0, 0xFFF8),
            (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
        ]:
            ignorable.update(range(lo, hi + 1))
        skipped = [cp for cp in range(0x110000) if cp not in range(0xD800, 0xE000) and untag(chr(cp) + "[YOU]x") == "x"]
        self.assertEqual(sorted(skipped), sorted(ignorable | {ord(c) for c in WHITE_SPACE}))


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
