#!/usr/bin/env python3
"""The legacy `xmpp_session_bridge.py`'s approach in CPython, as the
legacy tool's description gives it: a timing reference for `make bench`,
not a product (it keeps every gap of the legacy tool that docs/src/design/problem.md lists:
one fixed key for all agents, bare-prefix tagging, ejabberdctl's exit 0
taken as delivery, no validation of the record).

What it copies: the redirect of its patched `api_server.py`, its `[YOU]`
tagging loop, and `xmpp_session_bridge.py send`.

Commands:
  resolve  --db DB --session ID                 one redirect decision (JSON)
  context  --db DB --session ID --names a,b     resolve + load + tag (JSON)
  send TEXT SESSION_ID --agent NAME --db DB --room JID --from-jid JID
           [--ctl CMD ...]                      post with ejabberdctl, then write
  bench    --db DB --session ID --names a,b --repeat N
           one JSON line {"resolve_us": median, "context_us": median, ...}

Times in the `bench` output are microseconds per call, the median over
`--batches` batches of `--repeat` calls each, on one open connection (the
gateway keeps its `SessionDB` open).
"""

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time

# The legacy tool's fixed state_meta key and lifetime ("有效期 1 小时", one hour).
KEY = "active_xmpp_sender_session"
TTL_SECONDS = 3600
# The legacy tool's hard-coded list of redirected XMPP sessions (api_server.py).
XMPP_SESSIONS = ("xmpp-mohe-v2", "xmpp-mohe", "xmpp-zhiwei", "xmpp-zhiwei-v2")
# The legacy tool's agent table: name -> the XMPP session its bridge writes to.
AGENT_SESSIONS = {"mohe": "xmpp-mohe-v2", "zhiwei": "xmpp-zhiwei", "xiaoguo": "xmpp-xiaoguo"}


def resolve(db, session_id):
    """api_server.py's redirect, verbatim in logic: the fixed key, the
    1-hour check, any failure swallowed. Returns the session to load."""
    if session_id in XMPP_SESSIONS:
        try:
            row = db.execute(
                "SELECT value FROM state_meta WHERE key='active_xmpp_sender_session'"
            ).fetchone()
            if row:
                data = json.loads(row[0])
                age = time.time() - data.get("timestamp", 0)
                if age < TTL_SECONDS:
                    session_id = data.get("session_id", session_id)
        except Exception:
            pass
    return session_id


def load_history(db, session_id):
    """Hermes's loader for the model (`get_messages_as_conversation` of
    Hermes 0.19.0 and v31): ORDER BY id, active rows only, role and
    content plus tool fields when present (tool_calls parsed)."""
    rows = db.execute(
        "SELECT role, content, tool_calls, tool_call_id, tool_name FROM messages "
        "WHERE session_id = ? AND active = 1 ORDER BY id",
        (session_id,),
    ).fetchall()
    history = []
    for role, content, tool_calls, tool_call_id, tool_name in rows:
        msg = {"role": role, "content": content or ""}
        if tool_calls:
            msg["tool_calls"] = json.loads(tool_calls)
        if tool_call_id:
            msg["tool_call_id"] = tool_call_id
        if tool_name:
            msg["tool_name"] = tool_name
        history.append(msg)
    return history


def tag(history, my_names):
    """The legacy tool's self-tagging loop: a bare `startswith(name)`."""
    for msg in history:
        content = msg["content"]
        if any(content.startswith(name) for name in my_names):
            msg["content"] = "[YOU] " + content
    return history


def context(db, session_id, my_names):
    """What the gateway does per room message: resolve, load, tag."""
    return tag(load_history(db, resolve(db, session_id)), my_names)


def send(db, agent, cli_session_id, text, room, from_jid, ctl):
    """xmpp_session_bridge.py send: post with ejabberdctl (exit 0 taken as
    delivery), then append `[YOU] text` to the agent's XMPP session and
    record the CLI session under the fixed key."""
    env = dict(os.environ, LC_ALL="C.UTF-8")
    subprocess.run(
        ctl + ["send_message", "groupchat", from_jid, room, "", text],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    now = time.time()
    history_session = AGENT_SESSIONS[agent]
    with db:
        db.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, 'user', ?, ?)",
            (history_session, f"[YOU] {text}", now),
        )
        db.execute(
            "UPDATE sessions SET message_count = message_count + 1 WHERE id = ?",
            (history_session,),
        )
        db.execute(
            "INSERT OR REPLACE INTO state_meta (key, value) VALUES (?, ?)",
            (KEY, json.dumps({"session_id": cli_session_id, "timestamp": now, "source": "cli"})),
        )


def per_call_us(fn, repeat, batches):
    """Median over `batches` of the mean time of `repeat` calls, in µs."""
    for _ in range(max(1, repeat // 10)):
        fn()
    means = []
    for _ in range(batches):
        started = time.perf_counter_ns()
        for _ in range(repeat):
            fn()
        means.append((time.perf_counter_ns() - started) / repeat / 1000.0)
    return statistics.median(means), min(means), max(means)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("resolve", "context", "bench"):
        s = sub.add_parser(name)
        s.add_argument("--db", required=True)
        s.add_argument("--session", required=True)
        s.add_argument("--names", default="mohe", help="comma-separated names of the agent")
        if name == "bench":
            s.add_argument("--repeat", type=int, default=1000)
            s.add_argument("--batches", type=int, default=15)
    s = sub.add_parser("send")
    s.add_argument("text")
    s.add_argument("session_id")
    s.add_argument("--agent", required=True)
    s.add_argument("--db", required=True)
    s.add_argument("--room", required=True)
    s.add_argument("--from-jid", required=True)
    s.add_argument("--ctl", nargs="+", default=["docker", "exec", "ejabberd", "ejabberdctl"])
    args = p.parse_args(argv)

    if not os.path.isfile(args.db):
        sys.exit(f"legacy_baseline: no database at {args.db}")
    db = sqlite3.connect(args.db)
    if args.cmd == "resolve":
        target = resolve(db, args.session)
        print(json.dumps({"session_id": target, "redirected": target != args.session}))
    elif args.cmd == "context":
        names = args.names.split(",")
        target = resolve(db, args.session)
        messages = tag(load_history(db, target), names)
        print(json.dumps({"session_id": target, "messages": messages}, ensure_ascii=False))
    elif args.cmd == "send":
        send(db, args.agent, args.session_id, args.text, args.room, args.from_jid, args.ctl)
        print(json.dumps({"delivered": True}))
    else:
        names = args.names.split(",")
        target = resolve(db, args.session)
        rows = len(load_history(db, target))
        r = per_call_us(lambda: resolve(db, args.session), args.repeat, args.batches)
        # Fewer context calls on big histories: ~0.2 s a batch at most.
        n = max(3, min(args.repeat, 200_000 // max(rows, 1)))
        c = per_call_us(lambda: context(db, args.session, names), n, args.batches)
        print(json.dumps({
            "resolve_us": r[0], "resolve_us_min": r[1], "resolve_us_max": r[2],
            "context_us": c[0], "context_us_min": c[1], "context_us_max": c[2],
            "session_id": target, "redirected": target != args.session, "rows": rows,
            "python": sys.version.split()[0], "sqlite": sqlite3.sqlite_version,
        }))


if __name__ == "__main__":
    main()
