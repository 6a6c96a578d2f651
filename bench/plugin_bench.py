#!/usr/bin/env python3
"""The Python binding and the Hermes plugin, per call and per request
(issue 14's speed targets), on one database of a bench run. Run it with the
Python of a Hermes venv with the wheel installed (`make hermes-venvs`,
`make python-test` installs it): `hermes_state` must match the database's
schema (0.19.0 for v22, the v31 line for v31).

  plugin_bench.py --db DB --config TOML --agent mohe --session xmpp-mohe-v2 \
      --cli-session ID [--repeat N] [--batches B]

Prints one JSON line, times in µs (medians over B batches of N calls):
- `resolve_py`: `Bridge.resolve` from Python, the figure a gateway sees,
  `state.db` unchanged between calls (the memo serves the decision);
  `resolve_rust`: the same call looped inside Rust (`Bridge._bench_resolve`,
  no Python objects); their difference is the binding's own share;
  `resolve_py_after_write`: `Bridge.resolve` after another connection
  committed (as Hermes does after each turn; the commit is not timed): the
  memo asks the call's reads again;
- `sqlite_after_write`: the two reads any redirect needs (the agent's
  record in `state_meta`, the target's `sessions` row) through Python's
  own `sqlite3`, one read transaction after another connection's commit:
  what SQLite alone takes once its page cache was dropped, the floor of
  `resolve_py_after_write`;
- `hermes_load`: Hermes's own loader, `SessionDB.get_messages_as_conversation`
  of the CLI session (what the API server does per request anyway);
- `plugin_load_seam`: what the plugin adds to a chat-completions request on
  a redirect, through the plugin itself (`register` in a Hermes home of
  this database, Hermes's own logging set up), each request after another
  connection's commit (a request follows Hermes's store of the last turn):
  the handler's mark, then the wrapped loader (the decision, Hermes's
  load of the CLI session less the time inside it, which a shim under the
  plugin's wrapper times, and `tag_messages`); plus `run_agent_wrapper`,
  what the `_run_agent` wrapper adds to a turn;
- `plugin_run_agent_seam`: the other routes, where Hermes has already
  loaded the client's session: `plugin_load_seam` plus one load of that
  session;
- `tag_messages`: `tag_messages` alone, `state.db` unchanged between calls;
- `tag_messages_long`: the same on 100 messages of 4,000 characters of
  Chinese each (long replies), each call on new string objects, as each
  load of Hermes's returns: Python encodes a non-ASCII string to UTF-8
  when it is first read as such, once per object.

`hermes_load` and the request are timed in alternate batches, and the
shares (of `hermes_load`) are the median of each batch's ratio: on a
shared machine whose speed drifts by 2x over minutes, a ratio of two
medians taken minutes apart measured the drift.
"""

import argparse
import copy
import functools
import gc
import json
import sqlite3
import statistics
import time
from pathlib import Path


class NoGc:
    """Python's cyclic garbage collector off inside (as `timeit` does): a
    collection that the bench's own copies set off, of every object of
    the Hermes process, would land in whichever call allocates next."""

    def __enter__(self):
        gc.collect()
        gc.disable()

    def __exit__(self, *exc):
        gc.enable()


def median_us(fn, repeat, batches):
    """`fn()`'s median time (µs) over `batches` batches of `repeat` calls.
    What `fn` returns is freed after the batch, untimed: freeing a loaded
    history is the work of whoever holds it last (Hermes's turn), with or
    without the plugin."""
    fn()  # warm
    out = []
    for _ in range(batches):
        with NoGc():
            kept = []
            start = time.perf_counter_ns()
            for _ in range(repeat):
                kept.append(fn())
            out.append((time.perf_counter_ns() - start) / repeat / 1000)
            del kept
    return statistics.median(out)


def median_us_after_write(fn, conn, repeat, batches, untimed=lambda: 0):
    """`fn()`'s median time (µs) over `batches` batches of `repeat` calls,
    each call after a commit of `conn` (not timed), less `untimed()` (ns, read after each call: time `fn` spent in
    work not measured here)."""
    n = 0

    def commit():
        nonlocal n
        n += 1
        conn.execute("INSERT OR REPLACE INTO state_meta (key, value) VALUES ('bench:elsewhere', ?)",
                     (str(n),))
        conn.commit()

    commit()
    fn()
    out = []
    for _ in range(batches):
        spent = 0
        with NoGc():
            for _ in range(repeat):
                commit()
                start = time.perf_counter_ns()
                kept = fn()
                spent += time.perf_counter_ns() - start - untimed()
                del kept  # freed untimed, as in `median_us`
        out.append(spent / repeat / 1000)
    return statistics.median(out)


def install_plugin(a):
    """Register the plugin in a Hermes home of its own (the config, `state.db`
    a link to the bench's database, Hermes's logging set up as the gateway
    does); the plugin module and the time its `_run_agent` wrapper adds to a
    turn (µs, around a coroutine that does nothing: the turn itself is
    Hermes's)."""
    import asyncio
    import atexit
    import os
    import shutil
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="plugin-bench-"))
    atexit.register(shutil.rmtree, home, True)
    shutil.copy(a.config, home / "session-switch.toml")
    os.symlink(Path(a.db).resolve(), home / "state.db")
    os.environ["HERMES_HOME"] = str(home)
    import hermes_logging

    hermes_logging.setup_logging(hermes_home=home, mode="gateway")
    from session_switch import hermes_plugin

    hermes_plugin.register(None)

    async def run_agent(self, user_message, conversation_history, session_id=None):
        return {"session_id": session_id}, None

    class Untagged:
        """The edits of the turn's own message as a no-op: the wrapper's
        own cost is timed here (the plan taken, the turn registered)."""

        def tag_messages(self, agent, session_id, messages):
            return 0

    wrapped = hermes_plugin._wrap_run_agent(run_agent, hermes_plugin._Bridges())
    history = []
    untagged = Untagged()

    async def turns(fn, n):
        mark = hermes_plugin._Request(str(home))
        spent = 0
        for _ in range(n):
            # As after the load seam: the plan made, this very list.
            mark.plan = hermes_plugin._Plan("asked", "target", history, True, untagged, "mohe")
            token = hermes_plugin._REQUEST.set(mark)
            start = time.perf_counter_ns()
            await fn(None, user_message="hi", conversation_history=history, session_id="asked")
            spent += time.perf_counter_ns() - start
            hermes_plugin._REQUEST.reset(token)
        return spent / n / 1000

    loop = asyncio.new_event_loop()
    plain, through = [], []
    for _ in range(a.batches):
        plain.append(loop.run_until_complete(turns(run_agent, a.repeat)))
        through.append(loop.run_until_complete(turns(wrapped, a.repeat)))
    loop.close()
    return hermes_plugin, max(0.0, statistics.median(through) - statistics.median(plain))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--db", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--agent", required=True)
    p.add_argument("--session", required=True)
    p.add_argument("--cli-session", required=True)
    p.add_argument("--repeat", type=int, default=2000)
    p.add_argument("--batches", type=int, default=15)
    a = p.parse_args()

    from hermes_state import SessionDB

    import session_switch

    bridge = session_switch.Bridge(Path(a.config).parent, config=a.config, db=a.db, watch=False)
    decision = bridge.resolve(a.agent, a.session)
    assert decision["redirected"] and decision["session_id"] == a.cli_session, decision
    db = SessionDB(db_path=Path(a.db))
    loaded = db.get_messages_as_conversation(a.cli_session)
    rows = len(loaded)
    # Long calls (a load of 10,000 rows) need fewer repeats.
    slow = max(1, a.repeat // max(1, rows // 10))

    res = {"db": Path(a.db).name, "rows_loaded": rows}
    res["resolve_py"] = median_us(lambda: bridge.resolve(a.agent, a.session), a.repeat, a.batches)
    rust = []
    for _ in range(a.batches):
        rust.append(bridge._bench_resolve(a.agent, a.session, a.repeat) / 1000)
    res["resolve_rust"] = statistics.median(rust)
    other = sqlite3.connect(a.db)
    res["resolve_py_after_write"] = median_us_after_write(
        lambda: bridge.resolve(a.agent, a.session), other, a.repeat // 10 or 1, a.batches)
    plain = sqlite3.connect(a.db, isolation_level=None)
    record_key = f"session_switch:active:{a.agent}"

    def two_reads():
        plain.execute("BEGIN")
        assert plain.execute("SELECT value FROM state_meta WHERE key = ?", (record_key,)).fetchone()
        assert plain.execute("SELECT 1 FROM sessions WHERE id = ?", (a.cli_session,)).fetchone()
        plain.execute("COMMIT")

    res["sqlite_after_write"] = median_us_after_write(two_reads, other, a.repeat // 10 or 1, a.batches)
    res["client_load"] = median_us(lambda: db.get_messages_as_conversation(a.session), a.repeat // 10 or 1, a.batches)

    def tag_us(lists_of_a_batch):
        """`tag_messages`' median time (µs) over the batches, each on the
        lists `lists_of_a_batch()` makes (untimed): it edits in place, so
        every call gets a list of its own."""
        out = []
        for _ in range(a.batches):
            lists = lists_of_a_batch()
            with NoGc():
                start = time.perf_counter_ns()
                for messages in lists:
                    bridge.tag_messages(a.agent, a.cli_session, messages)
                out.append((time.perf_counter_ns() - start) / len(lists) / 1000)
        return statistics.median(out)

    res["tag_messages"] = tag_us(lambda: [copy.deepcopy(loaded) for _ in range(slow)])
    text = ("这是一段很长的中文回答。" * 400)[:4000].encode()
    roles = ("user", "assistant")
    res["tag_messages_long"] = tag_us(lambda: [
        [{"role": roles[i % 2], "content": text.decode(), "timestamp": float(i)} for i in range(100)]
        for _ in range(20)])
    # The plugin as Hermes runs it: registered (both seams wrapped on
    # Hermes's own classes) in a Hermes home holding this database, with
    # Hermes's own logging (agent.log at INFO). Under the plugin's wrapper,
    # Hermes's loader is timed by a shim: what the plugin adds to a request
    # is the request's time less the time inside Hermes's load, both from
    # the same calls (a difference of two separately timed short loads
    # would be mostly their noise).
    hermes_loader = SessionDB.get_messages_as_conversation
    inside = [0]

    @functools.wraps(hermes_loader)
    def timed_loader(*args, **kwargs):
        start = time.perf_counter_ns()
        try:
            return hermes_loader(*args, **kwargs)
        finally:
            inside[0] += time.perf_counter_ns() - start

    SessionDB.get_messages_as_conversation = timed_loader
    plugin, run_agent_wrapper = install_plugin(a)
    seam_loader = SessionDB.get_messages_as_conversation
    assert seam_loader is not timed_loader, "the plugin did not wrap Hermes's loader"

    def request():
        """A chat-completions request through the plugin: the handler's
        mark (as its wrapper makes it), then the wrapped loader, which
        decides, loads the CLI session and tags it."""
        inside[0] = 0
        mark = plugin._Request(plugin._hermes_home())
        token = plugin._REQUEST.set(mark)
        try:
            seam_loader(db, a.session)
        finally:
            plugin._REQUEST.reset(token)
        assert mark.plan.redirected and mark.plan.session_id == a.cli_session
        return mark.plan

    request()
    # What the plugin adds: the request less the time inside Hermes's
    # load, each after a commit, as a request follows Hermes's store of the
    # last turn.
    reps = min(slow, a.repeat // 10) or 1
    hermes, added = [], []
    for _ in range(a.batches):
        hermes.append(median_us(lambda: hermes_loader(db, a.cli_session), slow, 1))
        added.append(median_us_after_write(request, other, reps, 1, untimed=lambda: inside[0])
                     + run_agent_wrapper)
    res["run_agent_wrapper"] = run_agent_wrapper
    res["hermes_load"] = statistics.median(hermes)
    res["plugin_load_seam"] = statistics.median(added)
    res["load_seam_share"] = statistics.median(p / h for p, h in zip(added, hermes))
    res["plugin_run_agent_seam"] = res["plugin_load_seam"] + res["client_load"]
    res["run_agent_seam_share"] = statistics.median(
        (p + res["client_load"]) / h for p, h in zip(added, hermes))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
