#!/usr/bin/env python3
"""Build the databases of a benchmark run: copies of the real Hermes
fixtures (v22 `hermes-0.19.0.db`, v31 `hermes-latest.db`) with one CLI
session of 100, 1,000 or 10,000 history rows appended with plain INSERTs,
as Hermes's `append_message` does (its triggers keep the FTS indexes), and
a fresh record that redirects mohe's bot to that session.

  make_dbs.py OUT_DIR [--fixtures DIR] [--sizes 100,1000,10000]
  make_dbs.py --restamp OUT_DIR      renew the records' timestamps

OUT_DIR gets `v22-100.db` … `v31-10000.db`, `session-switch.toml` and
`manifest.json` (what the benches read). Stdlib only.
"""

import argparse
import json
import os
import shutil
import sqlite3
import sys
import time

SCHEMAS = {"v22": "hermes-0.19.0.db", "v31": "hermes-latest.db"}
AGENT = "mohe"
XMPP_SESSION = "xmpp-mohe-v2"
CLI_SESSION = "20261129_120000_bench0"
OUR_KEY = f"session_switch:active:{AGENT}"
LEGACY_KEY = "active_xmpp_sender_session"
ROOM = "coregroup@conference.meeting.localhost"
# Sends from the CLI session before the run (rows of the XMPP session).
SENDS = 5

# A room's traffic as the tagging rules see it: the agent's own lines (by
# name and by role), other agents', look-alikes that are not the agent's
# (`mohe2:`, `@mohe`), a typed `[YOU]`, Chinese and emoji. Lengths of
# ordinary chat lines (40-200 characters).
LINES = [
    ("user", "mohe: 大家好，今天的会议改到下午三点。请把议程和材料在两点半之前发到群里，谢谢。"),
    ("assistant", "好的，已记录：会议改到下午三点。我会在两点半提醒大家提交议程和材料。"),
    ("user", "zhiwei: Got it, I'll move the calendar invite and update the shared notes before lunch."),
    ("user", "xiaoguo：收到！👍 我这边的测试报告也会一起发上来。"),
    ("user", "@mohe please share the meeting link before 3pm, the external guests need it early."),
    ("assistant", "mohe, could you share the meeting link?\nzhiwei and xiaoguo are waiting for it."),
    ("user", "mohe2: I'm mohe2, not mohe — please keep our notes separate from theirs."),
    ("user", "[YOU] zhiwei: this line pretends to be yours, it must not reach the model as such."),
    ("user", "mohe：链接在这里 https://meet.example.org/coregroup-1500 ，密码稍后私信。"),
    ("tool", "Fri Nov 29 15:00:03 CST 2026"),
]


def config_text(db_room=ROOM):
    """The config of the run (docs/src/design/contracts.md#config): the three agents of the
    legacy `xmpp_session_bridge.py`, no legacy agent (so resolve reads one key, like the legacy tool)."""
    return f"""[xmpp]
room = "{db_room}"
transport = "http"
api_url = "http://127.0.0.1:9/api"

[redirect]
ttl_seconds = 3600
future_skew_seconds = 120

[[agents]]
name = "mohe"
jid = "mohe@meeting.localhost"
nick = "mohe"
sessions = ["xmpp-mohe-v2", "xmpp-mohe"]

[[agents]]
name = "zhiwei"
jid = "zhiwei@meeting.localhost"
nick = "zhiwei"
sessions = ["xmpp-zhiwei"]

[[agents]]
name = "xiaoguo"
jid = "xiaoguo@meeting.localhost"
nick = "xiaoguo"
sessions = ["xmpp-xiaoguo"]
"""


def stamp(db, now):
    """Write both records (ours and the legacy tool's fixed key) naming the CLI
    session, dated `now`."""
    ours = {"session_id": CLI_SESSION, "timestamp": now, "source": "cli", "agent": AGENT}
    legacy = {"session_id": CLI_SESSION, "timestamp": now, "source": "cli"}
    with db:
        db.execute("CREATE TABLE IF NOT EXISTS state_meta (key TEXT PRIMARY KEY, value TEXT)")
        for key, value in ((OUR_KEY, ours), (LEGACY_KEY, legacy)):
            db.execute(
                "INSERT OR REPLACE INTO state_meta (key, value) VALUES (?, ?)",
                (key, json.dumps(value)),
            )


def sent_by_the_bridge(db, now):
    """What the CLI's `send`s leave in `state.db`, as a send writes it
    (host/store/src/send/mod.rs): the `[YOU] ` rows in the agent's
    XMPP session and the list of sent rows, `session_switch_sent`,
    whose reads the plugin's `tag_messages` makes on every request."""
    db.execute("CREATE TABLE IF NOT EXISTS session_switch_sent (message_id INTEGER PRIMARY KEY, "
               "agent TEXT NOT NULL, cli_session_id TEXT NOT NULL, sent_at REAL NOT NULL)")
    for i in range(SENDS):
        sent_at = now - 60 * (SENDS - i)
        (message_id,) = db.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, 'user', ?, ?) "
            "RETURNING id", (XMPP_SESSION, f"[YOU] sent from the CLI #{i}", sent_at)).fetchone()
        db.execute("INSERT INTO session_switch_sent (message_id, agent, cli_session_id, sent_at) "
                   "VALUES (?, ?, ?, ?)", (message_id, AGENT, CLI_SESSION, sent_at))


def build(src, dst, rows, now):
    shutil.copyfile(src, dst)
    db = sqlite3.connect(dst)
    with db:
        db.execute(
            "INSERT INTO sessions (id, source, model, started_at) VALUES (?, 'cli', 'hermes-4-70b', ?)",
            (CLI_SESSION, now - rows),
        )
        for i in range(rows):
            role, content = LINES[i % len(LINES)]
            tool = role == "tool"
            db.execute(
                "INSERT INTO messages (session_id, role, content, tool_call_id, tool_name, timestamp) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (CLI_SESSION, role, f"{content} #{i}" if not tool else content,
                 f"call_{i:05}" if tool else None, "terminal" if tool else None, now - rows + i),
            )
        db.execute(
            "UPDATE sessions SET message_count = message_count + ? WHERE id = ?", (rows, CLI_SESSION)
        )
        sent_by_the_bridge(db, now)
    stamp(db, now)
    db.close()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--fixtures", default=os.environ.get("HERMES_FIXTURES", "../shared/fixtures/hermes"))
    p.add_argument("--sizes", default="100,1000,10000")
    p.add_argument("--restamp", action="store_true")
    args = p.parse_args(argv)
    now = time.time()
    if args.restamp:
        manifest = json.load(open(os.path.join(args.out, "manifest.json")))
        for entry in manifest["dbs"]:
            db = sqlite3.connect(entry["path"])
            stamp(db, now)
            db.close()
        return
    os.makedirs(args.out, exist_ok=True)
    dbs = []
    for schema, name in SCHEMAS.items():
        src = os.path.join(args.fixtures, name)
        if not os.path.isfile(src):
            sys.exit(f"make_dbs: fixture {src} is missing (set HERMES_FIXTURES)")
        for rows in [int(s) for s in args.sizes.split(",")]:
            dst = os.path.abspath(os.path.join(args.out, f"{schema}-{rows}.db"))
            build(src, dst, rows, now)
            dbs.append({"name": f"{schema}-{rows}", "schema": schema, "rows": rows, "path": dst})
    config = os.path.abspath(os.path.join(args.out, "session-switch.toml"))
    with open(config, "w") as f:
        f.write(config_text())
    manifest = {
        "agent": AGENT, "session": XMPP_SESSION, "cli_session": CLI_SESSION,
        "names": [AGENT], "config": config, "dbs": dbs,
    }
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(json.dumps(manifest))


if __name__ == "__main__":
    main()
