"""The gateway side under load: the real Hermes API server with
the plugin, on each Hermes line, answering concurrent chat completions
on mohe's XMPP session while, at the same time, CLI sends and clears run,
the policy file is swapped (a new version, garbage, a trapping policy, the
real one again), a Hermes-style writer holds `state.db`'s write lock, and
ejabberd's HTTP API goes away and comes back (a proxy in front of it that
refuses connections while "down").

What must hold, checked after the run:
- no chat completion fails, and each answers with the client's session id;
- every turn is stored exactly once, in the session its decision named (the
  history the fake LLM received tells which: the CLI session or mohe's own);
- every CLI send that exited 0 has exactly one `[YOU]` row; a failed one at
  most one (a send the room took whose record was pending is completed by
  the next call), and none is left pending at the end;
- `PRAGMA integrity_check`, `foreign_key_check` and the FTS5
  `integrity-check`s pass.

`SOAK_SECONDS` (default 15) is the load's length per Hermes version; `make
test` runs the short one, `make soak` a long one (`SOAK_SECONDS`, 240).
"""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
import time
import unittest
from pathlib import Path

from . import support
from .support import CLI_SESSION
from .test_hermes import CLI_MARK, CLI_ROWS, VERSIONS, XMPP, FakeLlm, Gateway, hermes_venv, sent_text
from .test_policy import replace

SECONDS = float(os.environ.get("SOAK_SECONDS") or 15)
WARM_UP = "soak warm-up: the gateway's first request"


class OutageProxy:
    """A TCP forwarder to ejabberd's HTTP API that can be taken down: while
    down it closes every new connection at once (as a stopped ejabberd's
    port would refuse it)."""

    def __init__(self, host: str, port: int):
        self.target = (host, port)
        self.up = threading.Event()
        self.up.set()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.stopping = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopping:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if not self.up.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def stop(self):
        self.stopping = True
        self.server.close()


def user_rows_with(db: Path, text: str) -> list[str]:
    """The sessions of the user rows whose content contains `text`."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        rows = conn.execute(
            "SELECT session_id FROM messages WHERE role = 'user' AND instr(content, ?) > 0 ORDER BY id", (text,)
        ).fetchall()
        return [r[0] for r in rows]
    finally:
        conn.close()


def database_checks(db: Path) -> list[str]:
    """Problems found by SQLite's integrity, foreign-key and FTS5 checks."""
    problems = []
    conn = sqlite3.connect(db, timeout=10)
    try:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        if integrity != "ok":
            problems.append(f"integrity_check: {integrity}")
        fk = conn.execute("PRAGMA foreign_key_check").fetchall()
        if fk:
            problems.append(f"foreign_key_check: {fk[:5]}")
        fts = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%'")]
        for table in fts:
            try:
                conn.execute(f'INSERT INTO "{table}"("{table}") VALUES (\'integrity-check\')')
            except sqlite3.DatabaseError as e:
                problems.append(f"FTS5 integrity-check of {table}: {e}")
    finally:
        conn.close()
    return problems


class _Soak:
    VERSION = ""

    def test_gateway_under_sends_swaps_locks_and_outages(self):
        ej = support.require_ejabberd()
        venv = hermes_venv(self.VERSION)
        folder = support.tempdir(self)
        live = folder / "policies" / "live.wasm"
        live.parent.mkdir()
        replace(support.component(), live)
        home = support.hermes_home(folder / "home", VERSIONS[self.VERSION], ej, policy=str(live))
        db = home / "state.db"
        now = time.time()
        for i, (role, content, _) in enumerate(CLI_ROWS):
            support.execute(db, "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, ?, ?, ?)",
                            (CLI_SESSION, role, content, now - 100 + i))
        host, port = ej.api_url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
        proxy = OutageProxy(host, int(port))
        self.addCleanup(proxy.stop)
        config = home / "session-switch.toml"
        config.write_text(config.read_text(encoding="utf-8").replace(
            ej.api_url, ej.api_url.replace(f"{host}:{port}", f"127.0.0.1:{proxy.port}")), encoding="utf-8")
        llm = FakeLlm()
        self.addCleanup(llm.stop)
        gw = Gateway(venv, home, llm)
        self.addCleanup(gw.stop)
        cli = support.Cli(home)
        # Hermes v31 imports its agent module (`run_agent`) inside the first
        # request's handler: concurrent first requests race on that import
        # and one may fail with "cannot import name 'AIAgent'" (Hermes's own
        # behaviour, plugin or not). One request, on a session of no agent,
        # before the load.
        status, _, body = gw.chat(WARM_UP, "soak-warm-up")
        self.assertEqual(status, 200, body)

        # On a loaded machine a turn can take seconds: the load goes on past
        # SECONDS (up to three times as long) until both paths were taken.
        start = time.monotonic()

        def both_paths_seen() -> bool:
            histories = [sent_text(t["messages"][1:-1]) for t in llm.turns()
                         if not sent_text(t["messages"][-1:]).endswith(WARM_UP)]
            return any(CLI_MARK in h for h in histories) and any(CLI_MARK not in h for h in histories)

        def running() -> bool:
            elapsed = time.monotonic() - start
            return elapsed < SECONDS or (elapsed < 3 * SECONDS and not both_paths_seen())

        asked, sends, errors = [], [], []
        lock = threading.Lock()

        def guarded(f):
            def run():
                try:
                    f()
                except Exception as e:  # noqa: BLE001 - reported by the test
                    with lock:
                        errors.append(f"{f.__name__}: {e!r}")
            return threading.Thread(target=run)

        def asker(n):
            def ask():
                i = 0
                while running():
                    question = support.unique(f"soak {n}-{i}")
                    status, headers, body = gw.chat(question, XMPP, stream=bool(i % 2))
                    with lock:
                        asked.append((question, status, headers.get("X-Hermes-Session-Id"), body[:200]))
                    i += 1
            ask.__name__ = f"asker {n}"
            return ask

        def sender():
            i = 0
            while running():
                if i % 4 == 3:
                    cli.run("clear", "--agent", "mohe")
                else:
                    body = support.unique(f"cli send {i}")
                    status, out, err = cli.run("send", body, CLI_SESSION, "--agent", "mohe")
                    with lock:
                        # The CLI's error is its first line (a hint may follow).
                        first = err.strip().splitlines()[0] if err.strip() else ""
                        sends.append((body, status, first[:300]))
                i += 1
                time.sleep(0.2)

        def swapper():
            cycle = [support.variant("v2"), b"not a component", support.variant("panic"), support.component()]
            i = 0
            while running():
                time.sleep(1.5)
                replace(cycle[i % len(cycle)], live)
                i += 1
            replace(support.component(), live)

        def locker():
            # Hermes's own writer settings (0.19.0: timeout=1.0, BEGIN IMMEDIATE).
            while running():
                time.sleep(2.0)
                conn = sqlite3.connect(db, timeout=1.0, isolation_level=None)
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    time.sleep(0.4)
                    conn.execute("ROLLBACK")
                except sqlite3.OperationalError:
                    pass  # Hermes itself or a send had the lock: try later
                finally:
                    conn.close()

        def outages():
            while running():
                time.sleep(3.0)
                proxy.up.clear()
                time.sleep(1.0)
                proxy.up.set()

        threads = [guarded(asker(n)) for n in range(3)] + [guarded(f) for f in (sender, swapper, locker, outages)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=3 * SECONDS + 240)
        proxy.up.set()
        self.assertEqual(errors, [])
        # One more call completes any send the room took but state.db did
        # not record yet; none may stay pending after it.
        cli.json("active", "--agent", "mohe")
        active = cli.json("active", "--agent", "mohe")

        failed = [a for a in asked if a[1] != 200 or a[2] != XMPP]
        self.assertEqual(failed, [], "chat completions that failed or named another session")
        self.assertGreaterEqual(len(asked), 3, asked)
        turns = llm.turns()
        where = {"cli": 0, "xmpp": 0}
        for question, *_ in asked:
            # Hermes merges consecutive user rows before the call: a question
            # whose answer was not stored yet heads the next turn's last
            # message, so a turn's own question is the one it ends with.
            seen = [t for t in turns if sent_text(t["messages"][-1:]).endswith(question)]
            self.assertEqual(len(seen), 1, f"{question}: {len(seen)} LLM turns: "
                             f"{[t['messages'][-2:] for t in seen]}")
            history = sent_text(seen[0]["messages"][1:-1])
            decided = CLI_SESSION if CLI_MARK in history else XMPP
            where["cli" if decided == CLI_SESSION else "xmpp"] += 1
            self.assertEqual(user_rows_with(db, question), [decided], question)
        # The run took both paths: redirected turns and the bot's own.
        self.assertGreater(where["cli"], 0, where)
        self.assertGreater(where["xmpp"], 0, where)

        ok = [s for s in sends if s[1] == 0]
        self.assertGreater(len(ok), 0, sends)
        for body, status, err in sends:
            rows = [s for s in user_rows_with(db, "[YOU] " + body)]
            if status == 0:
                self.assertEqual(rows, [XMPP], body)
            else:
                self.assertLessEqual(len(rows), 1, (body, err))
        pending = [p for p in (active if isinstance(active, list) else [active]) if p.get("pending_send")]
        self.assertFalse([p for p in pending if p.get("delivered")], pending)
        self.assertEqual(database_checks(db), [])
        print(f"\n[soak {self.VERSION}] {time.monotonic() - start:.0f} s: {len(asked)} chat completions "
              f"({where['cli']} redirected, {where['xmpp']} own), {len(ok)}/{len(sends)} CLI sends ok",
              flush=True)
        for body, status, err in sends:
            if status != 0:
                print(f"  send refused, exit {status}: {err}", flush=True)


class SoakHermes019(_Soak, unittest.TestCase):
    VERSION = "0.19.0"


class SoakHermesAxisrow(_Soak, unittest.TestCase):
    VERSION = "axisrow"


class SoakHermesV31(_Soak, unittest.TestCase):
    VERSION = "v31"


if __name__ == "__main__":
    unittest.main()
