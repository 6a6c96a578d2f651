#!/usr/bin/env python3
"""What Hermes itself would do in the demo, with Python's sqlite3 only.

  cli-session DB SESSION      a person talks to mohe in a CLI session: the
                              session row and its first two turns
  tool-call DB SESSION CMD OUT
                              mohe ran CMD in its terminal tool: the assistant
                              row with tool_calls and the tool's result row
  bot DB BIN CONFIG AGENT XMPP_SESSION ROOM
                              the agent's gateway: reads the room observer's
                              JSON lines on stdin; skips the agent's own
                              reflection (`BIN is-own`), asks `BIN resolve`
                              which session to load, and appends the room
                              message there as a user turn "nick: body", as
                              Hermes's API server does for the XMPP bridge

Writes are plain INSERTs inside BEGIN IMMEDIATE plus the message_count bump,
like Hermes's append_message, so Hermes's own
FTS triggers index them.
"""
import json
import sqlite3
import subprocess
import sys
import time


def connect(db):
    conn = sqlite3.connect(db, timeout=5.0, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def append(conn, session, role, content, tool_calls=None, tool_call_id=None, tool_name=None):
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(
        "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (session, role, content, tool_call_id, tool_calls, tool_name, time.time()),
    )
    conn.execute("UPDATE sessions SET message_count = message_count + 1 WHERE id = ?", (session,))
    conn.execute("COMMIT")


def cli_session(db, session):
    conn = connect(db)
    conn.execute(
        "INSERT INTO sessions (id, source, model, started_at) VALUES (?, 'cli', 'hermes-4-70b', ?)",
        (session, time.time()),
    )
    append(conn, session, "user", "The design review moves to 3pm. Tell the core group, please.")
    append(conn, session, "assistant", "Sure, I will post it to the core group now.")


def tool_call(db, session, command, output):
    conn = connect(db)
    call = [{"id": "call_demo_1", "type": "function",
             "function": {"name": "terminal", "arguments": json.dumps({"command": command}, ensure_ascii=False)}}]
    append(conn, session, "assistant", "", tool_calls=json.dumps(call))
    append(conn, session, "tool", output, tool_call_id="call_demo_1", tool_name="terminal")


def cli_json(bin_path, config, *args):
    out = subprocess.run([bin_path, "--config", config, "--json", *args],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def bot(db, bin_path, config, agent, xmpp_session, room):
    conn = connect(db)
    for line in sys.stdin:
        event = json.loads(line)
        if event.get("event") != "message" or event.get("history"):
            continue
        nick, body = event["nick"], event["body"]
        sender = f"{room}/{nick}"  # the occupant JID the stanza comes from
        if cli_json(bin_path, config, "is-own", sender, "--agent", agent)["own"]:
            print(f"  {agent}'s bot: {sender} is {agent} itself (the room's reflection): not stored, not answered", flush=True)
            continue
        decision = cli_json(bin_path, config, "resolve", xmpp_session, "--agent", agent)
        target = decision["session_id"]
        append(conn, target, "user", f"{nick}: {body}")
        print(f"  {agent}'s bot: message from {sender} -> resolve {xmpp_session} -> {target}"
              f" ({decision['reason']}); stored there as a user turn", flush=True)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "cli-session":
        cli_session(*args)
    elif cmd == "tool-call":
        tool_call(*args)
    elif cmd == "bot":
        bot(*args)
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
