"""Hermes's side of the compression-chain test (tests/all/chain.rs), v31
(`compress` also on the axisrow line, for the plugin's tests).

Run with the Python of the v31 Hermes venv (target/hermes-venv/v31, made by
`make hermes-venvs`; `python -m` style, never the venv's scripts):

    python chain_sessions.py write STATE_DB   # chains through Hermes's own SessionDB
    python chain_sessions.py tips STATE_DB ID…  # Hermes's own answers for each id
    python chain_sessions.py append STATE_DB ID  # does Hermes let a row into ID?
    python chain_sessions.py fork STATE_DB PARENT  # a second live child of PARENT
    python chain_sessions.py create STATE_DB ID…  # plain CLI sessions (any id)
    python chain_sessions.py legacy STATE_DB     # 0.19.0 too: P ended 'compression', child C
    python chain_sessions.py orphan STATE_DB ID  # ID ended 'compression', no child
    python chain_sessions.py compress STATE_DB ID  # one rotation of ID now

`write` compresses sessions the way Hermes's compressor does
(agent/conversation_compression.py `_rotate_session`): take the session's
compression lease (`try_acquire_compression_lock`), then
`publish_compression_child`, which ends the parent with
`end_reason = 'compression'` and creates the child (`parent_session_id` =
the parent) in one transaction; child ids come from Hermes's own
`hermes_state_ids.new_session_id`. The second live child of one parent is
what a stale writer makes (hermes_state_compression.py
`get_compression_chain`'s docstring: "a stale websocket later creates a
sibling"): a plain `create_session(…, parent_session_id=…)`. It prints
{"ids": {name: session id}}.

`tips` prints, per id, Hermes's `get_compression_tip`,
`find_live_compression_child` (its id or null) and
`resolve_resume_session_id` (what the v31 API server continues,
gateway/platforms/api_server_runs.py `_resolve_live_session_id`).
"""

import json
import pathlib
import sys

from hermes_state import SessionDB

T0 = 1781870400.0


def new_session_id():
    """A new session id as Hermes mints it: v31's `hermes_state_ids`; where
    that module is missing (axisrow), the compressor's own format
    (agent/conversation_compression.py: local time `%Y%m%d_%H%M%S`, `_`,
    6 hex digits)."""
    try:
        from hermes_state_ids import new_session_id as mint
    except ImportError:
        import datetime
        import uuid

        return f"{datetime.datetime.now().strftime('%Y%m%d_%H%M%S')}_{uuid.uuid4().hex[:6]}"
    return mint()


def compress(db, parent, summary, at):
    """One rotation of `parent`, as `_rotate_session` publishes it."""
    holder = f"chain-test:{parent}"
    if not db.try_acquire_compression_lock(parent, holder):
        raise SystemExit(f"no compression lease for {parent}")
    child = new_session_id()
    try:
        db.publish_compression_child(
            parent_session_id=parent,
            child_session_id=child,
            source=db.get_session(parent)["source"],
            messages=[{"role": "user", "content": summary, "timestamp": at}],
            compression_lock_holder=holder,
        )
    finally:
        db.release_compression_lock(parent, holder)
    return child


def write(path):
    db = SessionDB(pathlib.Path(path))
    t = [T0]

    def at():
        t[0] += 1.25
        return t[0]

    def add(session, role, content):
        db.append_message(session, role, content, timestamp=at())

    ids = {}
    # The configured XMPP session, compressed once: its child is live.
    x = "xmpp-mohe-v2"
    db.create_session(x, "api_server", model="hermes-4-70b")
    add(x, "user", "zhiwei: the deploy is at five")
    add(x, "assistant", "Noted.")
    ids["xmpp"] = x
    ids["xmpp_child"] = compress(db, x, "[summary] zhiwei said the deploy is at five", at())
    add(ids["xmpp_child"], "user", "xiaoguo: after compression")

    # A CLI session compressed once, with a live child and a /branch fork
    # (a branch is its own conversation, never the continuation).
    a = "20260619_190821_7c0afe"
    db.create_session(a, "cli", model="hermes-4-70b")
    add(a, "user", "let us plan the release")
    add(a, "assistant", "Sure: freeze on Monday.")
    ids["once"] = a
    ids["once_tip"] = compress(db, a, "[summary] release planning", at())
    add(ids["once_tip"], "user", "and the changelog?")
    ids["once_branch"] = new_session_id()
    db.create_session(
        ids["once_branch"], "cli", parent_session_id=a, model_config={"_branched_from": a}
    )

    # A CLI session compressed twice: root -> mid -> live tip.
    b = "20260619_193000_a1b2c3"
    db.create_session(b, "cli", model="hermes-4-70b")
    add(b, "user", "first part")
    ids["twice"] = b
    ids["twice_mid"] = compress(db, b, "[summary] first part", at())
    add(ids["twice_mid"], "user", "second part")
    ids["twice_tip"] = compress(db, ids["twice_mid"], "[summary] first and second", at())
    add(ids["twice_tip"], "user", "third part")

    # A CLI session compressed, then a second live child beside the real one.
    d = "20260619_194500_c0ffee"
    db.create_session(d, "cli", model="hermes-4-70b")
    add(d, "user", "forked")
    ids["forked"] = d
    ids["forked_a"] = compress(db, d, "[summary] forked", at())
    ids["forked_b"] = new_session_id()
    db.create_session(ids["forked_b"], "cli", parent_session_id=d)
    add(ids["forked_b"], "user", "the stale writer's sibling")

    # A plain CLI session (no chain) for the sends.
    c = "20260620_080000_5e11d0"
    db.create_session(c, "cli", model="hermes-4-70b")
    add(c, "user", "plain")
    ids["plain"] = c
    db.close()
    print(json.dumps({"ids": ids}))


def tips(path, ids):
    db = SessionDB(pathlib.Path(path))
    out = {}
    for i in ids:
        child = db.find_live_compression_child(i)
        out[i] = {
            "tip": db.get_compression_tip(i),
            "live_child": child["id"] if child else None,
            "resume": db.resolve_resume_session_id(i),
            "ended": db.get_session(i)["end_reason"],
        }
    db.close()
    print(json.dumps(out))


def append(path, session):
    db = SessionDB(pathlib.Path(path))
    try:
        db.append_message(session, "user", "probe", timestamp=T0)
        print(json.dumps({"refused": None}))
    except Exception as e:  # Hermes's own error class names the rule
        print(json.dumps({"refused": type(e).__name__}))
    db.close()


def fork(path, parent):
    db = SessionDB(pathlib.Path(path))
    child = new_session_id()
    db.create_session(child, db.get_session(parent)["source"], parent_session_id=parent)
    db.close()
    print(json.dumps({"child": child}))


def compress_now(path, session):
    """One rotation of `session` (its child carries a summary row), as the
    compressor makes it during a running gateway; prints {"child": id}."""
    import time

    db = SessionDB(pathlib.Path(path))
    child = compress(db, session, f"[summary] {session} before compression", time.time())
    db.close()
    print(json.dumps({"child": child}))


def create(path, ids):
    db = SessionDB(pathlib.Path(path))
    for i in ids:
        db.create_session(i, "cli", model="hermes-4-70b")
    db.close()


def orphan(path, session):
    """A session ended as 'compression' whose child was never published."""
    db = SessionDB(pathlib.Path(path))
    db.create_session(session, "cli", model="hermes-4-70b")
    db.end_session(session, "compression")
    db.close()


def legacy(path):
    """What 0.19.0's API allows: end a session as 'compression', add a child."""
    db = SessionDB(pathlib.Path(path))
    db.create_session("20260619_190821_7c0afe", "cli", model="hermes-4-70b")
    db.end_session("20260619_190821_7c0afe", "compression")
    db.create_session(
        "20260619_190900_beef01", "cli", parent_session_id="20260619_190821_7c0afe"
    )
    db.close()


if __name__ == "__main__":
    cmd, db_path, *rest = sys.argv[1:]
    {"write": lambda: write(db_path), "tips": lambda: tips(db_path, rest),
     "append": lambda: append(db_path, rest[0]), "fork": lambda: fork(db_path, rest[0]),
     "create": lambda: create(db_path, rest), "legacy": lambda: legacy(db_path),
     "orphan": lambda: orphan(db_path, rest[0]),
     "compress": lambda: compress_now(db_path, rest[0])}[cmd]()
