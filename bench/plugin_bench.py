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
  a redirect (`agent_for_session`, `resolve`, the live-tip lookup where
  Hermes has one and the target has child sessions, `tag_messages` on the
  loaded list), timed as one piece after another connection's commit, as
  a request follows Hermes's store of the last turn: its history load
  replaces Hermes's, so no load is counted;
- `plugin_run_agent_seam`: the same on the other routes, where Hermes has
  already loaded the client's session: plus one load of that session;
- `tag_messages`: `tag_messages` alone, `state.db` unchanged between calls;
- `tag_messages_long`: the same on 100 messages of 4,000 characters of
  Chinese each (long replies), each call on new string objects, as each
  load of Hermes's returns: Python encodes a non-ASCII string to UTF-8
  when it is first read as such, once per object.

`hermes_load` and `plugin_load_seam` are timed in alternate batches, and
the shares are the median of each batch pair's ratio: on a shared machine
whose speed drifts by 2x over minutes, a ratio of two medians taken
minutes apart measured the drift.
"""

import argparse
import copy
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
    fn()  # warm
    out = []
    for _ in range(batches):
        with NoGc():
            start = time.perf_counter_ns()
            for _ in range(repeat):
                fn()
            out.append((time.perf_counter_ns() - start) / repeat / 1000)
    return statistics.median(out)


def median_us_after_write(fn, conn, repeat, batches, fresh=lambda: None):
    """`fn(fresh())`'s median time (µs), each call after a commit of `conn`;
    neither the commit nor `fresh()` (e.g. a copy of a list `fn` edits in
    place, made after the commit as Hermes's load comes after its store of
    the last turn) is timed."""
    n = 0

    def commit():
        nonlocal n
        n += 1
        conn.execute("INSERT OR REPLACE INTO state_meta (key, value) VALUES ('bench:elsewhere', ?)",
                     (str(n),))
        conn.commit()

    commit()
    fn(fresh())
    out = []
    for _ in range(batches):
        spent = 0
        with NoGc():
            for _ in range(repeat):
                commit()
                arg = fresh()
                start = time.perf_counter_ns()
                fn(arg)
                spent += time.perf_counter_ns() - start
        out.append(spent / repeat / 1000)
    return statistics.median(out)


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
        lambda _: bridge.resolve(a.agent, a.session), other, a.repeat // 10 or 1, a.batches)
    plain = sqlite3.connect(a.db, isolation_level=None)
    record_key = f"session_switch:active:{a.agent}"

    def two_reads(_):
        plain.execute("BEGIN")
        assert plain.execute("SELECT value FROM state_meta WHERE key = ?", (record_key,)).fetchone()
        assert plain.execute("SELECT 1 FROM sessions WHERE id = ?", (a.cli_session,)).fetchone()
        plain.execute("COMMIT")

    res["sqlite_after_write"] = median_us_after_write(two_reads, other, a.repeat // 10 or 1, a.batches)
    res["client_load"] = median_us(lambda: db.get_messages_as_conversation(a.session), a.repeat // 10 or 1, a.batches)
    # tag_messages edits in place: each call gets its own copy, made
    # before the timed loop.
    tag = []
    for _ in range(a.batches):
        copies = [copy.deepcopy(loaded) for _ in range(slow)]
        with NoGc():
            start = time.perf_counter_ns()
            for c in copies:
                bridge.tag_messages(a.agent, a.cli_session, c)
            tag.append((time.perf_counter_ns() - start) / len(copies) / 1000)
    res["tag_messages"] = statistics.median(tag)
    text = ("这是一段很长的中文回答。" * 400)[:4000].encode()
    roles = ("user", "assistant")
    long_tag = []
    for _ in range(a.batches):
        lists = [[{"role": roles[i % 2], "content": text.decode(), "timestamp": float(i)}
                  for i in range(100)] for _ in range(20)]
        with NoGc():
            start = time.perf_counter_ns()
            for messages in lists:
                bridge.tag_messages(a.agent, a.cli_session, messages)
            long_tag.append((time.perf_counter_ns() - start) / len(lists) / 1000)
    res["tag_messages_long"] = statistics.median(long_tag)
    resolver = getattr(db, "resolve_resume_session_id", None)

    def request(messages):
        """The plugin's work on a redirect (`hermes_plugin.py`), around
        Hermes's own load of `messages`."""
        agent = bridge.agent_for_session(a.session)
        d = bridge.resolve(agent, a.session)
        target = d["session_id"]
        # As the plugin: Hermes's walk only where the target has children.
        if callable(resolver) and bridge.has_child_sessions(target):
            target = resolver(target) or target
        bridge.tag_messages(agent, target, messages)

    # Hermes stores each turn, so a request finds state.db changed: timed
    # whole after another connection's commit (every read of the request
    # sees SQLite's page cache dropped), on a copy of the loaded list.
    hermes, plugin = [], []
    for _ in range(a.batches):
        hermes.append(median_us(lambda: db.get_messages_as_conversation(a.cli_session), slow, 1))
        plugin.append(median_us_after_write(
            request, other, min(slow, a.repeat // 10) or 1, 1, fresh=lambda: copy.deepcopy(loaded)))
    res["hermes_load"] = statistics.median(hermes)
    res["plugin_load_seam"] = statistics.median(plugin)
    res["plugin_run_agent_seam"] = res["plugin_load_seam"] + res["client_load"]
    res["load_seam_share"] = statistics.median(p / h for p, h in zip(plugin, hermes))
    res["run_agent_seam_share"] = statistics.median(
        (p + res["client_load"]) / h for p, h in zip(plugin, hermes))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
