#!/usr/bin/env python3
"""The room benchmark: one `xmpp-session-bridge bot` against the real
ejabberd and a stand-in for Hermes's API server that answers at once,
beside the baseline bot (`room_baseline.py`: slixmpp and aiohttp, no
policy, no writes) in the same run. Run by `bench/driver.py` under
`tests/ejabberd/with-ejabberd.sh`, in the tests' venv (slixmpp, aiohttp).

  room.py --bin BIN --db v22=PATH --db v31=PATH --work DIR --out FILE [--quick]

A person's client (`anna`) posts messages that address mohe, each with a
distinct token. Per fixture:
  - time per message, taken outside the bots: the person's send → the
    stand-in receives the turn request, plus the stand-in's answer → the
    person receives the reply; p50 / p99 at 2/s and 10/s (the bot and the
    baseline each in a room of its own, their messages interleaved), at
    100/s (runs of 100, the bot's and the baseline's alternating);
  - throughput: bursts at rising rates, the bot's and the baseline's
    alternating, the most messages per second answered with none lost or
    doubled;
  - RSS (VmRSS) idle, and its peak under load;
  - each bot's own share from its log: stanza in → turn request out,
    reply in → stanza out; the bot's split into the policy's decisions,
    the durable write and the rest;
  - the bot once more under `strace -f -T -e trace=fsync,fdatasync`: the
    fsyncs per decision and their time.
Once: the room's ceiling, how fast ejabberd delivers a burst to a client
that does nothing.

Writes every figure to FILE (JSON). Every process it starts is ended,
also on failure.
"""

import argparse
import asyncio
import datetime
import json
import logging
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import time

import slixmpp
from aiohttp import web

HERE = os.path.dirname(os.path.abspath(__file__))
AGENT, PERSON, IDLE = "mohe", "anna", "xiaoguo"
SESSION = "xmpp-mohe-v2"
API_KEY = "bench-room-key"
TOKEN = re.compile(r"\bq\d+-\d+\b")


def log(msg):
    print(f"[room] {msg}", file=sys.stderr, flush=True)


def pct(values, q):
    """The q-th percentile (nearest rank) of `values`."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s) + 0.5) - 1))]


def ctl(ej, *args, check=True):
    r = subprocess.run([ej["EJ_CTL"], *args], capture_output=True, text=True,
                       env={**os.environ, "LC_ALL": "C.UTF-8"})
    if check and r.returncode != 0:
        raise RuntimeError(f"ejabberdctl {args}: {r.stdout}{r.stderr}")
    return r


def make_room(ej, name):
    muc = ej["EJ_MUC_SERVICE"]
    ctl(ej, "create_room", name, muc, ej["EJ_DOMAIN"])
    # Non-anonymous, as the bots' rooms are: the policy tells people from agents by real JID.
    ctl(ej, "change_room_option", name, muc, "anonymous", "false")
    return f"{name}@{muc}"


# The stand-in for Hermes's API server: answers a turn at once, noting when
# each token's request came and when its answer left.
class StandIn:
    def __init__(self):
        self.asked, self.answered = {}, {}

    async def turn(self, request):
        t = time.monotonic()
        body = await request.json()
        tokens = TOKEN.findall(body["messages"][-1]["content"])
        token = tokens[-1] if tokens else "none"
        self.asked.setdefault(token, []).append(t)
        answer = {"id": f"chatcmpl-{token}", "object": "chat.completion", "model": "hermes-agent",
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": f"ok {token}"},
                               "finish_reason": "stop"}]}
        self.answered.setdefault(token, []).append(time.monotonic())
        return web.json_response(answer)

    async def start(self):
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.turn)
        app.router.add_get("/health", lambda r: web.json_response({"status": "ok"}))
        app.router.add_get("/v1/models", lambda r: web.json_response({"object": "list", "data": []}))
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"


# A client in the rooms: the person who posts, or the one that does nothing.
class Occupant(slixmpp.ClientXMPP):
    def __init__(self, jid, password):
        super().__init__(jid, password, plugin_config={"feature_mechanisms": {"unencrypted_scram": True}})
        # The bench's ejabberd listens on loopback without TLS.
        self.enable_plaintext = True
        self.enable_starttls = False
        self.enable_direct_tls = False
        self.use_ipv6 = False
        self.register_plugin("xep_0045")
        self.started = asyncio.Event()
        self.replies = {}   # token → arrival times (the agent's "ok TOKEN")
        self.arrivals = []  # (room, time) of every live message
        self.add_event_handler("session_start", self.on_start)
        self.add_event_handler("groupchat_message", self.on_message)

    async def on_start(self, _):
        self.send_presence()
        self.started.set()

    async def join(self, room, nick):
        await self.plugin["xep_0045"].join_muc_wait(room, nick, maxstanzas=0, timeout=20)

    def on_message(self, msg):
        t = time.monotonic()
        if msg.xml.find("{urn:xmpp:delay}delay") is not None:
            return
        self.arrivals.append((msg["from"].bare, t))
        body = msg["body"]
        if msg["mucnick"] == AGENT and body.startswith("ok "):
            self.replies.setdefault(body[3:].strip(), []).append(t)

    def post(self, room, body):
        self.send_message(mto=room, mbody=body, mtype="groupchat")


def rss_kib(pid):
    """VmRSS of `pid` and its children (the bot under strace is strace's child)."""
    total = 0
    for p in [pid] + children(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                total += next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass
    return total


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(x) for x in f.read().split()]
    except OSError:
        return []
    return kids + [g for k in kids for g in children(k)]


class Process:
    """A bot process in its own process group, its log in a file."""

    def __init__(self, name, cmd, logfile, env=None, rss_pid_of=None):
        self.name, self.logfile = name, logfile
        self.out = open(logfile + ".out", "w")
        self.err = open(logfile if rss_pid_of is None or True else logfile, "a")
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=self.err, env=env,
                                     stdin=subprocess.DEVNULL, start_new_session=True)

    def pid_for_rss(self):
        """The bot's own process (under strace, strace's child)."""
        kids = children(self.proc.pid)
        return kids[0] if kids and self.name.endswith("strace") else self.proc.pid

    async def wait_for(self, path, text, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} ended ({self.proc.returncode}):\n{tail(self.logfile)}")
            try:
                with open(path) as f:
                    if text in f.read():
                        return
            except OSError:
                pass
            await asyncio.sleep(0.1)
        raise RuntimeError(f"{self.name} did not say {text!r} within {timeout} s:\n{tail(self.logfile)}")

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            except ProcessLookupError:
                pass
        self.out.close()
        self.err.close()


def tail(path, n=20):
    try:
        with open(path) as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


class Bench:
    def __init__(self, a, ej):
        self.a, self.ej = a, ej
        self.domain = ej["EJ_DOMAIN"]
        self.host, self.port = ej.get("EJ_C2S_HOST", "127.0.0.1"), int(ej["EJ_C2S_PORT"])
        self.procs = []
        self.seq = 0
        self.rooms = []

    def token(self):
        self.seq += 1
        return f"q{os.getpid() % 1000}-{self.seq}"

    # The systems under test.
    def bot_config(self, room, name):
        path = os.path.join(self.a.work, f"{name}.toml")
        with open(path, "w") as f:
            f.write(f"""[xmpp]
room = "{room}"
transport = "http"
api_url = "{self.ej['EJ_API_URL']}"

[bot]
server = "{self.host}:{self.port}"
tls = "insecure-plaintext"
turn_timeout_seconds = 30
catch_up_lines = 0

[bot.agents.{AGENT}]
password = "pw-{AGENT}"
api_url = "{self.standin.url}"
api_key_env = "SSW_BENCH_API_KEY"

[[agents]]
name = "{AGENT}"
jid = "{AGENT}@{self.domain}"
sessions = ["{SESSION}", "xmpp-mohe"]
""")
        return path

    async def start_bot(self, room, db, name, strace=None):
        home = os.path.join(self.a.work, name)
        os.makedirs(os.path.join(home, "run"), exist_ok=True)
        cmd = [self.a.bin, "--config", self.bot_config(room, name), "--db", db,
               "bot", "--agent", AGENT]
        if strace:
            # Only these calls stop the bot (seccomp), each with its start and its time.
            cmd = ["strace", "-f", "--seccomp-bpf", "-ttt", "-T", "-e", "trace=fsync,fdatasync",
                   "-o", strace, *cmd]
            name += "-strace"
        env = {**os.environ, "HERMES_HOME": home, "HERMES_GATEWAY_LOCK_DIR": os.path.join(home, "run"),
               "SESSION_SWITCH_BOT_HOST": f"bench-{os.getpid()}", "SSW_BENCH_API_KEY": API_KEY,
               # Info, and the debug lines of the bot and the façade that time each step.
               "RUST_LOG": "info,session_switch_bot=debug,session_switch=debug"}
        logfile = os.path.join(self.a.work, f"{name}.log")
        p = Process(name, cmd, logfile, env)
        self.procs.append(p)
        await p.wait_for(logfile, "joined", 120)
        return p

    async def start_baseline(self, room, name):
        logfile = os.path.join(self.a.work, f"{name}.log")
        steps = logfile + ".steps"
        cmd = [sys.executable, os.path.join(HERE, "room_baseline.py"),
               "--jid", f"{AGENT}@{self.domain}/bench-baseline", "--password", f"pw-{AGENT}",
               "--room", room, "--nick", AGENT, "--host", self.host, "--port", str(self.port),
               "--api-url", self.standin.url, "--api-key", API_KEY, "--session", SESSION,
               "--log", steps]
        p = Process(name, cmd, logfile)
        p.steps = steps
        self.procs.append(p)
        await p.wait_for(logfile + ".out", "joined", 60)
        return p

    async def stop(self, p):
        # In a thread: the stand-in keeps answering the turn a stopping bot waits for.
        await asyncio.to_thread(p.stop)
        self.procs.remove(p)

    # Runs.
    async def run(self, systems, rate, n, rss=None):
        """`n` messages at `rate` per second to each of `systems` (rooms),
        interleaved; wait until each is answered or nothing moves for 5 s.
        Per system: the tokens sent and when."""
        sent = [dict() for _ in systems]
        period = 1.0 / rate
        t0 = time.monotonic() + 0.2
        sampler = asyncio.create_task(self.sample_rss(rss)) if rss else None
        for i in range(n):
            for k, room in enumerate(systems):
                at = t0 + i * period + k * period / len(systems)
                delay = at - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                token = self.token()
                sent[k][token] = time.monotonic()
                self.person.post(room, f"{AGENT}, bench question {token}")
        want = {t for s in sent for t in s}
        last, moved = -1, time.monotonic()
        while True:
            got = sum(1 for t in want if t in self.person.replies)
            if got == len(want):
                break
            if got != last:
                last, moved = got, time.monotonic()
            elif time.monotonic() - moved > 5:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)  # a doubled reply comes right after the first
        if sampler:
            sampler.cancel()
        return [self.outcome(s) for s in sent]

    async def sample_rss(self, into):
        while True:
            for name, p in into.items():
                into_peak = self.peaks.setdefault(name, 0)
                self.peaks[name] = max(into_peak, rss_kib(p.pid_for_rss()))
            await asyncio.sleep(0.05)

    def outcome(self, sent):
        """Time per message (ms) taken outside the bot, and what was lost or doubled."""
        s = self.standin
        per, lost, doubled = [], 0, 0
        first, last = min(sent.values()), None
        for token, t in sent.items():
            replies = self.person.replies.get(token, [])
            if not replies or token not in s.asked:
                lost += 1
                continue
            if len(replies) > 1 or len(s.asked[token]) > 1:
                doubled += 1
            per.append(((s.asked[token][0] - t) + (replies[0] - s.answered[token][0])) * 1e3)
            last = max(last or 0, replies[0])
        out = {"n": len(sent), "lost": lost, "doubled": doubled}
        if per:
            out.update(p50_ms=statistics.median(per), p99_ms=pct(per, 99), max_ms=max(per),
                       answered_per_s=len(per) / (last - first) if last > first else None)
        return out

    async def ceiling(self, room, n, bursts):
        """How fast ejabberd delivers a burst of `n` to a client that does nothing."""
        rates = []
        for _ in range(bursts):
            self.idle.arrivals.clear()
            t0 = time.monotonic()
            for i in range(n):
                self.person.post(room, f"burst {i}")
            end = time.monotonic() + 30
            while time.monotonic() < end and sum(1 for r, _ in self.idle.arrivals if r == room) < n:
                await asyncio.sleep(0.01)
            got = [t for r, t in self.idle.arrivals if r == room]
            rates.append(len(got) / (got[-1] - t0) if got else 0)
            await asyncio.sleep(0.5)
        return {"n": n, "bursts": bursts, "per_s": statistics.median(rates), "all_per_s": rates}

    async def fixture(self, name, db):
        """Every figure of one fixture, the bot's and the baseline's side by side."""
        q = self.a.quick
        bot_room = self.rooms[0] if False else make_room(self.ej, f"benchbot{name}{os.getpid()}")
        base_room = make_room(self.ej, f"benchbase{name}{os.getpid()}")
        self.rooms += [bot_room.split("@")[0], base_room.split("@")[0]]
        await self.person.join(bot_room, PERSON)
        await self.person.join(base_room, PERSON)
        work_db = os.path.join(self.a.work, f"{name}.db")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(db + suffix):
                shutil.copyfile(db + suffix, work_db + suffix)
        # Hermes's gateway holds state.db open while the bot runs: in WAL mode the
        # bot's connections are then never the last, which would checkpoint on close.
        # The read runs to its end: a statement left open would hold a shared
        # lock, which in DELETE mode keeps every write of the bot waiting.
        hermes_holds = sqlite3.connect(work_db)
        hermes_holds.execute("SELECT count(*) FROM sessions").fetchall()
        try:
            return await self.measure(name, bot_room, base_room, work_db)
        finally:
            hermes_holds.close()

    async def measure(self, name, bot_room, base_room, work_db):
        q = self.a.quick
        res = {}
        bot = await self.start_bot(bot_room, work_db, f"bot-{name}")
        base = await self.start_baseline(base_room, f"baseline-{name}")
        try:
            await asyncio.sleep(2)
            res["rss_idle_kib"] = {"bot": rss_kib(bot.proc.pid), "baseline": rss_kib(base.proc.pid)}
            await self.run([bot_room, base_room], 10, 10)  # warm-up: the first turn instantiates
            log(f"{name}: 2/s and 10/s, the bot and the baseline interleaved")
            self.peaks = {}
            slow, res["own"] = {}, {}
            for rate, n in ((2, 20 if q else 120), (10, 60 if q else 300)):
                marks = {"bot": mark(bot.logfile), "baseline": mark(base.steps)}
                b, s = await self.run([bot_room, base_room], rate, n)
                slow[rate] = {"bot": b, "baseline": s}
                res["own"][rate] = {"bot": bot_share(bot.logfile, marks["bot"], mark(bot.logfile)),
                                    "baseline": baseline_share(base.steps, marks["baseline"], mark(base.steps))}
            log(f"{name}: 100/s, runs alternating")
            fast = {"bot": [], "baseline": []}
            order = [("bot", bot_room), ("baseline", base_room)]
            if name.endswith("1"):
                order.reverse()
            for _ in range(1 if q else 3):
                for who, room in order:
                    fast[who].append((await self.run([room], 100, 100, rss={who: bot if who == "bot" else base}))[0])
            slow[100] = {who: merge(runs) for who, runs in fast.items()}
            res["latency"] = slow
            log(f"{name}: throughput, bursts at rising rates, alternating")
            ramp = {"bot": [], "baseline": []}
            going = {"bot": True, "baseline": True}
            for rate in (50, 100, 200, 400, 800, 1600):
                for who, room in order:
                    if not going[who]:
                        continue
                    n = max(100, min(400, rate))
                    r = (await self.run([room], rate, n, rss={who: bot if who == "bot" else base}))[0]
                    r["rate"] = rate
                    ramp[who].append(r)
                    # Saturated (answering well below the offered rate) or lossy: the ramp ends here.
                    if r["lost"] or r["doubled"] or (r.get("answered_per_s") or 0) < 0.8 * rate:
                        going[who] = False
                    await asyncio.sleep(0.5)
            res["ramp"] = ramp
            res["throughput_per_s"] = {
                who: max([x["answered_per_s"] for x in steps if not x["lost"] and not x["doubled"]
                          and x.get("answered_per_s")] or [0]) for who, steps in ramp.items()}
            res["rss_load_kib"] = dict(self.peaks)
            res["decisions"] = count_decisions(bot.logfile)
            res["bot_warnings"] = warnings(bot.logfile)
        finally:
            await asyncio.gather(self.stop(bot), self.stop(base))
        log(f"{name}: the bot under strace -T")
        trace = os.path.join(self.a.work, f"bot-{name}.strace")
        sbot = await self.start_bot(bot_room, work_db, f"bot-{name}", strace=trace)
        try:
            await self.run([bot_room], 10, 5)
            before = mark(sbot.logfile)
            at = trace_len(trace)
            r = (await self.run([bot_room], 10, 20 if q else 60))[0]
            await asyncio.sleep(0.5)
            res["fsync"] = fsyncs(trace, at, r["n"], count_decisions(sbot.logfile, before),
                                  windows(sbot.logfile, before))
        finally:
            await self.stop(sbot)
        return res

    async def main(self):
        # The bots run in sessions of their own, out of reach of a signal to
        # this process's group: a SIGTERM ends the run through its cleanup.
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, asyncio.current_task().cancel)
        self.standin = StandIn()
        await self.standin.start()
        ctl(self.ej, "register", PERSON, self.domain, f"pw-{PERSON}", check=False)
        self.person = Occupant(f"{PERSON}@{self.domain}/bench", f"pw-{PERSON}")
        self.idle = Occupant(f"{IDLE}@{self.domain}/bench-idle", f"pw-{IDLE}")
        for c in (self.person, self.idle):
            c.connect(self.host, self.port)
            await asyncio.wait_for(c.started.wait(), 30)
        out = {"loadavg_before": os.getloadavg()}
        try:
            room = make_room(self.ej, f"benchceiling{os.getpid()}")
            self.rooms.append(room.split("@")[0])
            await self.person.join(room, PERSON)
            await self.idle.join(room, "idle")
            log("the room's ceiling: bursts to a client that does nothing")
            out["room_ceiling"] = await self.ceiling(room, 200 if self.a.quick else 1000, 3)
            for name, db in self.a.db:
                out[name] = await self.fixture(name, db)
        finally:
            await asyncio.gather(*(self.stop(p) for p in list(self.procs)))
            for c in (self.person, self.idle):
                c.disconnect()
            await asyncio.sleep(0.5)
            await self.standin.runner.cleanup()
            for r in self.rooms:
                ctl(self.ej, "destroy_room", r, self.ej["EJ_MUC_SERVICE"], check=False)
        out["loadavg_after"] = os.getloadavg()
        return out


def merge(runs):
    """Runs of one rate as one: the latencies' percentiles are kept per run,
    so p50 and p99 here are the median of the runs' (each run 100)."""
    return {"n": sum(r["n"] for r in runs), "lost": sum(r["lost"] for r in runs),
            "doubled": sum(r["doubled"] for r in runs),
            "p50_ms": statistics.median(r["p50_ms"] for r in runs if "p50_ms" in r),
            "p99_ms": statistics.median(r["p99_ms"] for r in runs if "p99_ms" in r),
            "max_ms": max(r["max_ms"] for r in runs if "max_ms" in r), "runs": runs}


def mark(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def trace_len(path):
    return mark(path)


# The bot's log: `TIME LEVEL TARGET: text`.
LINE = re.compile(r"^(\S+Z)\s+(\w+)\s+(\S+?):\s(.*)$")


def log_lines(path, start, end=None):
    with open(path, "rb") as f:
        f.seek(start)
        text = f.read(None if end is None else end - start).decode(errors="replace")
        for line in text.splitlines():
            m = LINE.match(line.rstrip("\n"))
            if m:
                t = datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp()
                yield t, m.group(4)


def warnings(path, keep=5):
    """How many WARN and ERROR lines the bot logged, and the first few: what a
    lost message or a stall would leave."""
    lines = [text for line in open(path, errors="replace") if (m := LINE.match(line.rstrip("\n")))
             and m.group(2) in ("WARN", "ERROR") for text in [m.group(4)]]
    return {"count": len(lines), "first": lines[:keep]}


def count_decisions(path, start=0):
    return sum(1 for _, text in log_lines(path, start) if " message decided in " in text)


def bot_share(path, start, end):
    """Per answered message of the person, from the bot's debug lines: stanza
    in → turn request out, reply in → stanza out (µs), and the split."""
    handed, decided, admits, resolves, hermes, forgets, replied = [], [], [], [], [], [], []
    echoes = []  # the decision on the room's echo of each reply: the decision thread's time too
    p = re.escape(PERSON)
    for t, text in log_lines(path, start, end):
        if m := re.match(rf"{p}'s message handed to the decision thread", text):
            handed.append(t)
        elif m := re.match(rf"{p}'s message decided in (\d+) µs", text):
            decided.append(int(m.group(1)))
        elif m := re.match(rf"admit of {p}'s message: policy (\d+) µs, write and commit (\d+) µs", text):
            admits.append((int(m.group(1)), int(m.group(2))))
        elif m := re.match(rf"resolve for {p}'s turn: (\d+) µs", text):
            resolves.append(int(m.group(1)))
        elif m := re.match(rf"Hermes answered {p}'s turn in (\d+) µs", text):
            hermes.append((t, int(m.group(1))))
        elif m := re.match(r"lines Hermes took forgotten in (\d+) µs", text):
            forgets.append(int(m.group(1)))
        elif text.startswith(f"replied to {PERSON} "):
            replied.append(t)
        elif m := re.match(rf"{re.escape(AGENT)}'s message decided in (\d+) µs", text):
            echoes.append(int(m.group(1)))
    # A bot that forgets the lines after handing the reply on logs no
    # forget inside its share.
    parts = (handed, decided, admits, resolves, hermes, replied) + ((forgets,) if forgets else ())
    forgets = forgets or [0] * len(handed)
    n = min(map(len, parts))
    rows = []
    for i in range(n):
        back, rtt = hermes[i]
        inward = (back - rtt / 1e6 - handed[i]) * 1e6
        outward = (replied[i] - back) * 1e6
        write = admits[i][1] + forgets[i]
        policy = decided[i] - admits[i][1] + resolves[i]
        rows.append({"in": inward, "out": outward, "own": inward + outward, "policy": policy,
                     "write": write, "rest": inward + outward - policy - write})
    out = summary(rows, ("in", "out", "own", "policy", "write", "rest"))
    if echoes:
        out["echo"] = {"p50": statistics.median(echoes), "p99": pct(echoes, 99), "mean": statistics.fmean(echoes)}
    return out


def baseline_share(path, start, end):
    steps = {"in": [], "out": [], "reply": [], "sent": []}
    with open(path, "rb") as f:
        f.seek(start)
        for line in f.read(end - start).decode().splitlines():
            t, step, nick = line.split()
            if nick == PERSON:
                steps[step].append(float(t))
    n = min(map(len, steps.values()))
    rows = []
    for i in range(n):
        inward = (steps["out"][i] - steps["in"][i]) * 1e6
        outward = (steps["sent"][i] - steps["reply"][i]) * 1e6
        rows.append({"in": inward, "out": outward, "own": inward + outward})
    return summary(rows, ("in", "out", "own"))


def summary(rows, keys):
    """Median and p99 of each part (µs) over the messages."""
    if not rows:
        return {"n": 0}
    out = {"n": len(rows)}
    for k in keys:
        values = [r[k] for r in rows]
        out[k] = {"p50": statistics.median(values), "p99": pct(values, 99),
                  "mean": statistics.fmean(values)}
    return out


def windows(path, start):
    """The bot's own share of each message of the person as wall-clock
    spans (stanza in → turn request out, reply in → stanza out)."""
    handed, hermes, replied = [], [], []
    p = re.escape(PERSON)
    for t, text in log_lines(path, start):
        if re.match(rf"{p}'s message handed to the decision thread", text):
            handed.append(t)
        elif m := re.match(rf"Hermes answered {p}'s turn in (\d+) µs", text):
            hermes.append((t, int(m.group(1))))
        elif text.startswith(f"replied to {PERSON} "):
            replied.append(t)
    return [((h, back - rtt / 1e6), (back, out)) for h, (back, rtt), out in zip(handed, hermes, replied)]


def fsyncs(path, start, messages, decisions, spans):
    """The fsyncs `strace -T` saw from byte `start` of its output on: how many
    and their time, per message of the person and per decision, and their
    time inside the bot's own share of each message (`spans`)."""
    with open(path) as f:
        f.seek(start)
        calls = [(float(at), float(t)) for at, t in re.findall(
            r"^(?:\d+\s+)?([\d.]+) (?:fsync|fdatasync)\(.*<([\d.]+)>\s*$", f.read(), re.M)]
    times = [t for _, t in calls]
    total = sum(times)
    inside = [sum(t for at, t in calls if any(a <= at <= b for a, b in pair)) * 1e6 for pair in spans]
    return {"messages": messages, "decisions": decisions, "count": len(times),
            "per_message": len(times) / messages, "per_decision": len(times) / max(1, decisions),
            "ms_per_message": total * 1e3 / messages, "median_us": statistics.median(times) * 1e6 if times else 0,
            "in_own_share_us": statistics.median(inside) if inside else None,
            # What the fsyncs alone would allow: one message's worth of them at a time.
            "ceiling_per_s": messages / total if total else None}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--db", action="append", required=True, help="NAME=PATH, a fixture's database")
    p.add_argument("--work", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    a.db = [tuple(x.split("=", 1)) for x in a.db]
    ej = {k: v for k, v in os.environ.items() if k.startswith("EJ_")}
    if "EJ_CTL" not in ej:
        sys.exit("[room] no ejabberd: run under tests/ejabberd/with-ejabberd.sh")
    if not shutil.which("strace"):
        sys.exit("[room] strace is missing: apt-get install -y strace")
    os.makedirs(a.work, exist_ok=True)
    logging.basicConfig(level=logging.ERROR)
    out = asyncio.run(Bench(a, ej).main())
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
