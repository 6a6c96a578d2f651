"""Hot swap while a gateway keeps calling: the watcher picks up a new
component file, rejects bad ones (the old one keeps serving), and swaps
to a policy that traps without the caller ever failing (fallback)."""

import os
import shutil
import time
import unittest

from . import support
from session_switch import PolicyError, SessionSwitch, SwitchError, load_config

BASE = "session-switch-policy 0.1.0"


def replace(src, live):
    """Replace the live file atomically, as a deployment should."""
    tmp = live.with_suffix(".tmp")
    if isinstance(src, bytes):
        tmp.write_bytes(src)
    else:
        shutil.copyfile(src, tmp)
    os.replace(tmp, live)


class HotSwap(unittest.TestCase):
    def setUp(self):
        self.dir = support.tempdir(self)
        self.db = support.fixture_copy("hermes-0.19.0.db", self.dir)
        self.config = load_config(support.write_config(self.dir, None))
        self.live = self.dir / "live.wasm"
        shutil.copyfile(support.component(), self.live)

    def test_swaps_during_a_loop_of_calls(self):
        s = SessionSwitch(self.live, self.db, self.config, watch_interval=0.02)
        self.addCleanup(s.close)
        self.assertEqual(s.version, BASE)
        # (what to put in place, what must serve afterwards, swaps, rejections)
        phases = [
            (support.variant("v2"), f"{BASE}-v2", 1, 0),
            (b"\0asm garbage", f"{BASE}-v2", 1, 1),
            (support.variant("other-interface"), f"{BASE}-v2", 1, 2),
            (support.variant("bad-self-check"), f"{BASE}-v2", 1, 3),
            (support.variant("v3"), f"{BASE}-v3", 2, 3),
            (support.variant("panic"), BASE, 3, 3),
            (support.variant("v2"), f"{BASE}-v2", 4, 3),
        ]
        calls, fallbacks, served = 0, 0, []
        deadline = time.monotonic() + 120
        for src, want, swaps, rejections in phases:
            replace(src, self.live)
            while True:
                self.assertLess(time.monotonic(), deadline, f"no swap to {want} (stats {s.watch_stats})")
                version = s.version
                strict_ok = "panic" not in str(src)
                d = s.resolve("zhiwei", "xmpp-zhiwei")
                c = s.context("mohe", "xmpp-mohe-v2")
                calls += 2
                if d.reason == "policy-error":
                    fallbacks += 1
                    self.assertFalse(strict_ok and version != BASE, d.detail)
                    self.assertIn("panicked on purpose", d.detail)
                else:
                    self.assertEqual(
                        (d.session_id, d.redirected, d.reason), ("xmpp-zhiwei", False, "no-record")
                    )
                # context never traps in the panic variant: always tagged.
                self.assertEqual(c.decision.reason, "expired")
                self.assertEqual(c.messages[0]["content"], "[YOU] mohe: 大家好，今天的会议改到下午三点。")
                if not served or served[-1] != version:
                    served.append(version)
                stats = s.watch_stats
                if version == want and (stats.swaps, stats.rejections) == (swaps, rejections):
                    break
                time.sleep(0.005)
            if want == BASE:
                # The swapped-in policy traps in resolve: a clear exception,
                # a safe fallback, and the gateway goes on.
                with self.assertRaises(PolicyError) as caught:
                    s.resolve("zhiwei", "xmpp-zhiwei", fallback=False)
                self.assertIn("failed in `resolve`: wasm trap", str(caught.exception))
                self.assertEqual(s.resolve("zhiwei", "xmpp-zhiwei").reason, "policy-error")
        self.assertEqual(served, [BASE, f"{BASE}-v2", f"{BASE}-v3", BASE, f"{BASE}-v2"])
        stats = s.watch_stats
        self.assertIn("refusing policy component", stats.last_rejection)
        self.assertIn("self-check failed", stats.last_rejection)
        self.assertGreater(fallbacks, 0)
        self.assertGreater(calls, 2 * len(phases))
        self.assertLess(stats.last_swap.pause_seconds, 0.05)

    def test_reload_by_hand(self):
        s = SessionSwitch(self.live, self.db, self.config, watch_interval=None)
        self.addCleanup(s.close)
        self.assertIsNone(s.reload(), "unchanged bytes are not swapped")
        replace(b"not wasm", self.live)
        with self.assertRaises(PolicyError) as caught:
            s.reload()
        self.assertIn("is not a valid WebAssembly component", str(caught.exception))
        self.assertEqual(s.version, BASE)
        self.assertEqual(s.resolve("zhiwei", "xmpp-zhiwei", fallback=False).reason, "no-record")
        os.remove(self.live)
        with self.assertRaises(SwitchError) as caught:
            s.reload()
        self.assertEqual(caught.exception.kind, "bad-input")
        replace(support.variant("v3"), self.live)
        report = s.reload()
        self.assertEqual(report.info.version, f"{BASE}-v3")
        self.assertEqual(s.version, f"{BASE}-v3")
        self.assertGreater(report.prepare_seconds, 0)
        self.assertEqual(s.resolve("zhiwei", "xmpp-zhiwei", fallback=False).reason, "no-record")

    def test_a_component_that_refuses_the_settings_is_not_swapped_in(self):
        # Settings the policy refuses (a TTL of 0) can only reach it through a
        # swap's configure check: loading does not configure.
        bad = load_config(support.write_config(self.dir, None))
        bad = type(bad)(
            bad.path, type(bad.settings)(**{**bad.settings.__dict__, "ttl_seconds": 0}), bad.http_api
        )
        s = SessionSwitch(self.live, self.db, bad, watch_interval=None)
        self.addCleanup(s.close)
        with self.assertRaises(SwitchError) as caught:
            s.resolve("mohe", "xmpp-mohe-v2", fallback=False)
        self.assertEqual(caught.exception.kind, "bad-input")
        replace(support.variant("v2"), self.live)
        with self.assertRaises(PolicyError) as caught:
            s.reload()
        self.assertIn("it does not accept the current settings", str(caught.exception))
        self.assertEqual(s.version, BASE)


if __name__ == "__main__":
    unittest.main()
