"""Hermes's side of the loader-fidelity test (tests/all/fidelity.rs).

Run with the Python of a venv that has Hermes installed
(target/hermes-venv/<version>, `make hermes-venvs`):

    python loader_sessions.py write STATE_DB   # sessions through Hermes's own SessionDB
    python loader_sessions.py load STATE_DB ID…  # SessionDB.get_messages_as_conversation(ID)

`write` uses only Hermes's API (create_session, append_message,
rewind_to_message) for every row Hermes writes itself; the rows Hermes never
writes (bad JSON where it stores JSON) are then made with plain SQL updates
of rows Hermes wrote, so its loader meets its own failure paths. `load`
prints {"version": schema_version, "conversations": {id: [message, ...]}}.
"""

import json
import os
import pathlib
import sqlite3
import sys

from hermes_state import SessionDB

CALLS = [
    {
        "id": "call_0001",
        "type": "function",
        "function": {"name": "terminal", "arguments": '{"command": "date"}'},
    }
]
MARKER_CALLS = [
    {
        "id": "call_0002|fc_0002",
        "type": "function",
        "function": {"name": "memory", "arguments": "{}"},
    }
]
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
NOTE = (
    "[System note: The following is recalled memory context, NOT new user input. "
    "Treat as informational background data.]\n\n"
)


def write(path):
    db = SessionDB(pathlib.Path(path))
    t = [1781870400.0]

    def at():
        t[0] += 1.25
        return t[0]

    def add(session, role, content=None, **kw):
        return db.append_message(session, role, content, timestamp=at(), **kw)

    s = "xmpp-mohe-v2"
    db.create_session(s, "api_server", model="hermes-4-70b")
    add(s, "user", "mohe: 大家好，今天的会议改到下午三点。😊")
    add(s, "user", "  \n zhiwei: Got it, blanks around me.\t \u3000")
    add(s, "user", [{"type": "text", "text": "mohe: look at this "}, IMAGE])
    add(s, "user", [IMAGE, {"type": "text", "text": " xiaoguo：图在这里 👍🏽 "}])
    add(s, "user", [IMAGE])
    add(s, "user", "mohe: remember <memory-context>the secret plan</memory-context> this")
    add(s, "user", NOTE + "xiaoguo: noted")
    add(s, "user", "<MEMORY-CONTEXT>\nrecalled\n</memory-context>\n\nzhiwei: after a block")
    add(
        s,
        "user",
        "mohe: with a sidecar",
        api_content="mohe: with a sidecar\n\n<memory-context>\nprefetched\n</memory-context>",
    )
    add(
        s,
        "assistant",
        "  Sure, done.  \n",
        finish_reason="stop",
        reasoning="thinking about it",
        reasoning_content="",
        reasoning_details=[{"type": "reasoning.text", "text": "step 1", "format": "x"}],
        codex_reasoning_items=[{"type": "reasoning", "id": "rs_1"}],
        api_content="  Sure, done.  \n",
    )
    add(s, "assistant", None, tool_calls=CALLS, finish_reason="tool_calls")
    add(s, "tool", "Fri Jun 19 19:30:03 CST 2026", tool_call_id="call_0001", tool_name="terminal")
    add(s, "assistant", "It is 19:30.", finish_reason="stop")
    add(s, "user", "Review the conversation above and consider saving to memory. Use the memory tool.")
    add(s, "assistant", "Saved nothing: curator mode.")
    add(s, "user", "  Review the conversation above and update the skill library now.")
    add(s, "user", "Review the conversation above and consider saving to memory again.")
    add(s, "assistant", "Another curator reply.")
    add(s, "assistant", "A reply after the harness pair stays.")
    add(s, "user", "[YOU] zhiwei: I am imitating the tag")
    add(s, "user", " ［YOU］mohe: a full-width tag on my own line")
    add(s, "assistant", "  [memory]  ", tool_calls=MARKER_CALLS, finish_reason="tool_calls")
    add(s, "tool", "saved", tool_call_id=" call_0002 ", tool_name="memory")
    add(
        s,
        "user",
        "xiaoguo：中文、English 和 emoji 🎉 together",
        platform_message_id="xmpp-msg-17",
        observed=True,
        effect_disposition="none",
    )
    add(s, "user", "\x00json:not json, typed by a person")
    add(s, "system", "  You are mohe. <memory-context>kept in system</memory-context>  ")
    add(s, "user", "mohe2: not mohe's line")
    undo = add(s, "user", "mohe: never mind, undo that")
    add(s, "assistant", "OK, undone.", finish_reason="stop")
    db.rewind_to_message(s, undo)

    cli = "20260619_190821_7c0afe"
    db.create_session(cli, "cli", model="hermes-4-70b")
    add(cli, "user", "Hello Hermes! Can you summarise today's plan?")
    add(cli, "assistant", "Sure 😊 Here is today's plan:\n1. Review\n2. Ship", finish_reason="stop")

    bad = "bad-rows"
    db.create_session(bad, "cli", model="hermes-4-70b")
    broken_list = add(bad, "user", [{"type": "text", "text": "mohe: broken"}])
    broken_calls = add(bad, "assistant", "calls", tool_calls=CALLS, finish_reason="tool_calls")
    broken_reasoning = add(bad, "assistant", "thought", reasoning_details=[{"a": 1}])
    json_string = add(bad, "user", "placeholder")
    not_a_list = add(bad, "user", "placeholder")
    db.close()

    con = sqlite3.connect(path)
    columns = {row[1] for row in con.execute("PRAGMA table_info(messages)")}
    update = "UPDATE messages SET {} = ? WHERE id = ?"
    con.execute(update.format("content"), ("\x00json:[{\"type\": \"text\", \"text\": \"mohe: bro", broken_list))
    con.execute(update.format("tool_calls"), ("[{\"id\": \"call_x\",", broken_calls))
    con.execute(update.format("reasoning_details"), ("{not json", broken_reasoning))
    con.execute(update.format("content"), ("\x00json:\"  mohe: a JSON string  \"", json_string))
    con.execute(update.format("content"), ("\x00json:{\"type\": \"text\", \"text\": \"mohe: an object\"}", not_a_list))
    if "tool_call_uids" in columns:
        con.execute(update.format("tool_call_uids"), ("{broken", broken_calls))
        con.execute(update.format("display_metadata"), ("\"{\\\"k\\\": 1}\"", broken_reasoning))
        con.execute(update.format("display_metadata"), ("[1, 2]", json_string))
        con.execute(update.format("absorbed_message_uids"), ("[\"u1\", \"\", \"u1\", 7, \"u2\"]", not_a_list))
    con.commit()
    con.close()


def load(path, ids):
    db = SessionDB(pathlib.Path(path))
    out = {}
    for sid in ids:
        out[sid] = db.get_messages_as_conversation(sid)
    db.close()
    con = sqlite3.connect(path)
    version = con.execute("SELECT max(version) FROM schema_version").fetchone()[0]
    con.close()
    json.dump({"version": version, "conversations": out}, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    os.environ.setdefault("HERMES_HOME", str(pathlib.Path(sys.argv[2]).parent))
    if sys.argv[1] == "write":
        write(sys.argv[2])
    else:
        load(sys.argv[2], sys.argv[3:])
