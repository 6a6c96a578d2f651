"""The wheel's command: `pip install` of the wheel into a Hermes venv gives
`xmpp-session-bridge`, a console script that runs the Rust command line in
the extension. Run here with no Rust toolchain on PATH, against the test
ejabberd and Hermes 0.19.0's API server, beside the binary as the reference:
the same output and exit statuses (`--version`, `send`, a refused send,
`active`, `bot --once`), a serving bot that leaves on SIGTERM and on Ctrl-C
with exit 0 and no Python traceback, and a legacy script that runs it."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import unittest
from pathlib import Path

from . import support
from .support import CLI_SESSION
from .test_hermes import FakeLlm, Gateway, hermes_venv

VERSION = "0.19.0"


class ConsoleScript(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ej = support.require_ejabberd()
        cls.venv = hermes_venv(VERSION)
        cls.command = cls.venv / "bin" / "xmpp-session-bridge"
        if not cls.command.is_file():
            raise AssertionError(f"the wheel installed no command at {cls.command}")
        # Hermes's venv and the system, nothing of the Rust toolchain.
        cls.path = f"{cls.venv / 'bin'}:/usr/bin:/bin"
        for tool in ("cargo", "rustc", "maturin"):
            assert shutil.which(tool, path=cls.path) is None, f"{tool} is on the test's PATH"

    def setUp(self):
        self.dir = support.tempdir(self)
        self.home = support.hermes_home(self.dir / "home", "hermes-0.19.0.db", self.ej)
        config = self.home / "session-switch.toml"
        config.write_text(
            config.read_text(encoding="utf-8")
            + f'\n[bot]\nserver = "{self.ej.c2s_host}:{self.ej.c2s_port}"\ntls = "insecure-plaintext"\n'
            f'\n[bot.agents.mohe]\npassword = "{self.ej.password("mohe")}"\n',
            encoding="utf-8",
        )
        (self.home / "run").mkdir()

    def env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("VIRTUAL_ENV")}
        env.update(
            PATH=self.path,
            HERMES_HOME=str(self.home),
            HERMES_GATEWAY_LOCK_DIR=str(self.home / "run"),
            SESSION_SWITCH_BOT_HOST=f"console-script-{os.getpid()}",
        )
        return env

    def run_with(self, program: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        argv = [str(program), *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=self.env(),
                              stdin=subprocess.DEVNULL)

    def both(self, *args: str) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
        """The console script's run and the binary's, in that order."""
        return self.run_with(self.command, *args), self.run_with(support.cli(), *args)

    def assert_same(self, script: subprocess.CompletedProcess, binary: subprocess.CompletedProcess,
                    varies: str | None = None):
        """The same status, stdout and stderr, but for the text matching
        `varies` (what differs from run to run: an age, a resource)."""
        def seen(done):
            out, err = done.stdout, done.stderr
            if varies:
                out, err = re.sub(varies, "…", out), re.sub(varies, "…", err)
            return done.returncode, out, err
        self.assertEqual(seen(script), seen(binary))

    def test_version_and_a_refused_send_are_the_binarys(self):
        script, binary = self.both("--version")
        self.assert_same(script, binary)
        self.assertEqual(script.returncode, 0)
        self.assertIn("xmpp-session-bridge", script.stdout)
        script, binary = self.both("send", "hello", CLI_SESSION, "--agent", "nobody")
        self.assert_same(script, binary)
        self.assertEqual(script.returncode, 2)
        self.assertTrue(script.stderr.startswith("xmpp-session-bridge: "), script.stderr)
        self.assertIn("nobody", script.stderr)
        self.assertEqual(script.stderr.count("\n"), 1, script.stderr)
        # Bad arguments: clap's error on one line, as the binary prints it.
        script, binary = self.both("send", "--agent")
        self.assert_same(script, binary)
        self.assertEqual(script.returncode, 2)

    def test_send_then_active_answer_as_the_binary_does(self):
        text = support.unique("from the console script")
        listener = support.RoomListener(self.ej, text, "console-listener")
        sent = self.run_with(self.command, "--json", "send", text, CLI_SESSION, "--agent", "mohe")
        self.assertEqual(sent.returncode, 0, sent.stderr)
        heard = [m["body"] for m in listener.wait()]
        self.assertIn(text, heard)
        answer = json.loads(sent.stdout)
        rows = support.query(self.home / "state.db",
                             "SELECT content FROM messages WHERE content = ?", (f"[YOU] {text}",))
        self.assertEqual(len(rows), 1)
        # The binary's send answers with the same fields.
        reference = self.run_with(support.cli(), "--json", "send", support.unique("binary"), CLI_SESSION,
                                  "--agent", "mohe")
        self.assertEqual(reference.returncode, 0, reference.stderr)
        self.assertEqual(sorted(answer), sorted(json.loads(reference.stdout)))
        script, binary = self.both("--json", "active", "--agent", "mohe")
        self.assert_same(script, binary, varies=r'[0-9]+\.[0-9]+')
        active = json.loads(script.stdout)
        # mohe is the legacy agent: its record under both keys.
        self.assertEqual({(a["agent"], a["session_id"]) for a in active}, {("mohe", CLI_SESSION)})

    def test_bot_once_is_the_binarys_and_a_bot_leaves_on_sigterm_and_ctrl_c(self):
        llm = FakeLlm()
        self.addCleanup(llm.stop)
        gateway = Gateway(self.venv, self.home, llm, plugin=False)
        self.addCleanup(gateway.stop)
        script, binary = self.both("bot", "--agent", "mohe", "--once")
        # The bot's resource is new at each login.
        self.assert_same(script, binary, varies=r"mohe@[^/ ]+/[0-9]+")
        self.assertEqual(script.returncode, 0, script.stderr)
        self.assertIn(f"mohe: joined {self.ej.room}", script.stdout)
        self.assertIn("healthy", script.stdout)
        for sig, name in ((signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "SIGINT")):
            with self.subTest(signal=name):
                status, log = self.serve_until(sig)
                self.assertEqual(status, 0, log)
                self.assertIn(f"{name}: stopping", log)
                self.assertNotIn("Traceback", log)
                self.assertNotIn("KeyboardInterrupt", log)

    def serve_until(self, sig: signal.Signals) -> tuple[int, str]:
        """Run the console script's bot until it has joined, send it `sig`:
        its exit status and its log."""
        log_path = self.dir / f"bot-{sig.name}.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [str(self.command), "bot", "--agent", "mohe"],
                env=self.env(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                deadline = time.monotonic() + 60
                while "joined" not in log_path.read_text(errors="replace"):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise AssertionError(f"the bot did not join: {log_path.read_text(errors='replace')}")
                    time.sleep(0.1)
                proc.send_signal(sig)
                status = proc.wait(timeout=30)
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        return status, log_path.read_text(errors="replace")

    def test_doctor_tries_the_plugins_import_only_from_the_wheel(self):
        (self.home / "config.yaml").write_text("plugins:\n  enabled: [session-switch]\n", encoding="utf-8")

        def plugin_imports(program: Path) -> dict:
            done = self.run_with(program, "--json", "doctor", "--agent", "mohe")
            links = [link for link in json.loads(done.stdout)["links"] if link["link"] == "plugin-imports"]
            self.assertEqual(len(links), 1, done.stdout)
            return links[0]

        found = plugin_imports(self.command)
        self.assertEqual(found["status"], "ok", found)
        self.assertIn(str(self.venv), found["detail"])
        found = plugin_imports(support.cli())
        self.assertEqual(found["status"], "skipped", found)
        # The wheel in a venv without Hermes: the tests' own (`make python-test` installs it there).
        elsewhere = support.ROOT / "target/venv/bin/xmpp-session-bridge"
        self.assertTrue(elsewhere.is_file(), f"{elsewhere}: the wheel is not installed in the tests' venv")
        found = plugin_imports(elsewhere)
        self.assertEqual(found["status"], "failed", found)
        self.assertIn("no Hermes", found["detail"])
        self.assertIn("pip install", found["fix"])

    def test_the_legacy_script_runs_the_console_script(self):
        path = self.dir / "scripts" / "xmpp_session_bridge.py"
        done = self.run_with(self.command, "install-legacy-script", "--path", str(path))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn(json.dumps(str(self.command)), path.read_text(encoding="utf-8"))
        legacy = subprocess.run(["python3", str(path), "send", "hello", CLI_SESSION, "--agent", "nobody"],
                                capture_output=True, text=True, timeout=60, env=self.env())
        direct = self.run_with(self.command, "send", "hello", CLI_SESSION, "--agent", "nobody")
        self.assertEqual(legacy.returncode, 2)
        self.assertEqual(legacy.stderr, direct.stderr)


if __name__ == "__main__":
    unittest.main()
