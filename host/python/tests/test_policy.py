"""The binding over hostile or broken policies (the test variants of
`make variants`) and hot swaps under threads: every failure is a
`SessionSwitchError` of kind `policy`, the process and the instance survive,
a bad file is refused and the old policy keeps serving, and 8 threads
calling while a 9th swaps the file see no failed call."""

import os
import shutil
import threading
import time
import unittest

from session_switch import Bridge, SessionSwitchError

from . import support

BASE = "session-switch-policy 0.1.0"


def replace(src, live):
    """Replace the live file atomically, as a deployment should."""
    tmp = live.with_suffix(".tmp")
    if isinstance(src, bytes):
        tmp.write_bytes(src)
    else:
        shutil.copyfile(src, tmp)
    os.replace(tmp, live)


class PolicyFailures(unittest.TestCase):
    def setUp(self):
        self.dir = support.tempdir(self)
        self.home = support.hermes_home(self.dir / "home", "hermes-latest.db")

    def bridge(self, variant):
        return Bridge(self.home, policy=support.variant(variant), watch=False)

    def test_a_trap_a_loop_and_a_memory_hog_are_policy_failures_and_the_instance_recovers(self):
        cases = {
            "panic": "panicked on purpose",
            "loop": "loops or works far too long",
            "alloc": "memory cap",
        }
        for variant, said in cases.items():
            with self.subTest(variant=variant):
                bridge = self.bridge(variant)
                for _ in range(2):  # the second call gets a fresh store
                    started = time.monotonic()
                    with self.assertRaises(SessionSwitchError) as caught:
                        bridge.resolve("mohe", "xmpp-mohe-v2")
                    self.assertEqual(caught.exception.kind, "policy")
                    self.assertIn(said, caught.exception.message)
                    self.assertIn("`resolve`", caught.exception.message)
                    self.assertLess(time.monotonic() - started, 10)
                # Exports the variant leaves alone still answer.
                self.assertEqual(bridge.is_own("mohe", "mohe"), True)

    def test_bad_edits_are_refused_by_the_host(self):
        bridge = self.bridge("bad-edits")
        with self.assertRaises(SessionSwitchError) as caught:
            bridge.context("mohe", "xmpp-mohe-v2")
        self.assertEqual(caught.exception.kind, "policy")
        self.assertIn("`context`", caught.exception.message)
        # The resolve of the same component is fine.
        self.assertEqual(bridge.resolve("mohe", "xmpp-mohe-v2")["session_id"], "xmpp-mohe-v2")

    def test_a_policy_that_fails_its_checks_is_not_loaded(self):
        for variant in ("bad-self-check", "other-interface", "wasi"):
            with self.subTest(variant=variant):
                with self.assertRaises(SessionSwitchError) as caught:
                    self.bridge(variant)
                self.assertEqual(caught.exception.kind, "policy", caught.exception.message)

    def test_reload_refuses_a_bad_file_and_keeps_the_old_policy(self):
        live = self.dir / "live.wasm"
        shutil.copyfile(support.variant("v2"), live)
        bridge = Bridge(self.home, policy=live, watch=False)
        self.assertEqual(bridge.version(), f"{BASE}-v2")
        self.assertIsNone(bridge.reload())  # unchanged bytes
        replace(b"\0asm garbage", live)
        with self.assertRaises(SessionSwitchError) as caught:
            bridge.reload()
        self.assertEqual(caught.exception.kind, "policy")
        self.assertEqual(bridge.version(), f"{BASE}-v2")
        self.assertEqual(bridge.reload(support.variant("v3")), f"{BASE}-v3")
        self.assertEqual(bridge.resolve("zhiwei", "xmpp-zhiwei")["reason"], "no-record")


class HotSwapUnderThreads(unittest.TestCase):
    def test_eight_callers_and_a_swapper_no_failed_call(self):
        d = support.tempdir(self)
        live = d / "policies" / "live.wasm"
        live.parent.mkdir()
        shutil.copyfile(support.component(), live)
        # The config names the file (relative to its folder); the binding watches it.
        home = support.hermes_home(d / "home", "hermes-0.19.0.db", policy="../policies/live.wasm")
        bridge = Bridge(home)
        self.addCleanup(bridge.close)
        self.assertEqual(str(bridge.policy_file), str(home / "../policies/live.wasm"))
        stop = threading.Event()
        failures, calls, versions = [], [0] * 8, set()

        def caller(n):
            while not stop.is_set():
                try:
                    d1 = bridge.resolve("mohe", "xmpp-mohe-v2")
                    c = bridge.context("zhiwei", "xmpp-zhiwei", 5)
                    assert d1["session_id"] == "xmpp-mohe-v2" and c["session_id"] == "xmpp-zhiwei", (d1, c)
                    versions.add(bridge.version())
                    calls[n] += 2
                except Exception as e:  # noqa: BLE001 - every failure counts
                    failures.append(repr(e))

        threads = [threading.Thread(target=caller, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        # The 9th thread: swap good and bad files while the callers run.
        swaps = [support.variant("v2"), b"\0asm garbage", support.variant("v3"),
                 support.variant("bad-self-check"), support.variant("v2"), support.component()]
        expected = [f"{BASE}-v2", f"{BASE}-v2", f"{BASE}-v3", f"{BASE}-v3", f"{BASE}-v2", BASE]
        try:
            for src, want in zip(swaps, expected):
                replace(src, live)
                deadline = time.monotonic() + 60
                while True:
                    stats = bridge.watch_stats()
                    if bridge.version() == want and (stats["swaps"] + stats["rejections"]) >= 1:
                        break
                    self.assertLess(time.monotonic(), deadline, f"no {want}: {stats}")
                    time.sleep(0.02)
                time.sleep(0.3)  # calls on this version
        finally:
            stop.set()
            for t in threads:
                t.join()
        stats = bridge.watch_stats()
        self.assertEqual(failures, [])
        self.assertTrue(all(c > 0 for c in calls), calls)
        self.assertEqual(stats["rejections"], 2, stats)
        self.assertGreaterEqual(stats["swaps"], 4, stats)
        self.assertTrue({f"{BASE}-v2", f"{BASE}-v3", BASE} <= versions, versions)


if __name__ == "__main__":
    unittest.main()
