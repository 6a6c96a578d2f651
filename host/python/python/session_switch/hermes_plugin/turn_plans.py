"""What a turn runs on (a :class:`~.turns.Plan`): the policy's decision
for a turn on one of an agent's XMPP sessions, the history of the session
it names (Hermes's own loader, the policy's ``[YOU] `` edits), and the
edits on the turn's own message."""

from __future__ import annotations

import asyncio
from typing import Callable, Optional

from .homes import Bridges, hermes_home
from .logs import log, note_turn, reason
from .compression_tips import live_tip_resolver, turn_target
from .turns import Plan


def plan_at_load(db, loader: Callable, bridges: Bridges, home: str, asked: str) -> Plan:
    """The plan of a chat-completions turn, made at its history load (in
    Hermes's worker thread): one load, of the session the turn runs on."""
    bridge = bridges.get(home)
    agent = bridge.agent_for_session(asked) if bridge is not None else None
    if agent is None:
        return Plan(asked, asked, loader(db, asked), False)
    decision = bridge.resolve(agent, asked)
    target = turn_target(bridge, db, decision, asked)
    history = loader(db, target)
    bridge.tag_messages(agent, target, history)
    note_turn(bridge, agent, asked, target, decision["detail"], "history loaded once")
    return Plan(asked, target, history, bool(decision["redirected"]), bridge, agent)


async def plan(adapter, bridges: Bridges, arguments: dict) -> Optional[Plan]:
    """What a turn that the load seam did not see runs on, or ``None`` for
    Hermes's own behaviour. On a redirect the CLI session is loaded here,
    after Hermes loaded the client's."""
    asked = arguments.get("session_id")
    history = arguments.get("conversation_history")
    if not isinstance(asked, str) or not asked or not isinstance(history, list):
        return None
    bridge = bridges.get(hermes_home())
    if bridge is None:
        return None
    agent = bridge.agent_for_session(asked)
    if agent is None:
        return None
    decision = bridge.resolve(agent, asked)
    if not decision["redirected"]:
        bridge.tag_messages(agent, asked, history)
        note_turn(bridge, agent, asked, asked, decision["detail"], "")
        return Plan(asked, asked, history, False, bridge, agent)
    target = decision["session_id"]
    db = await adapter._ensure_session_db_async()
    if db is None:
        raise RuntimeError("Hermes's session database is unavailable")
    live = live_tip_resolver()
    if live is not None and bridge.has_child_sessions(target):
        target = await live(adapter, target)

    def load() -> list:
        loaded = db.get_messages_as_conversation(target)
        bridge.tag_messages(agent, target, loaded)
        return loaded

    loaded = await asyncio.to_thread(load)
    note_turn(bridge, agent, asked, target, decision["detail"], "the client's history was loaded too")
    return Plan(asked, target, loaded, True, bridge, agent)


def edit_incoming(plan: Plan, arguments: dict) -> None:
    """The policy's ``[YOU] `` edits on the turn's own message
    (``user_message``: a string, or a list of parts whose first text part
    is edited), as on a history row no send of ours wrote: a room line
    imitating the tag reaches the model without it on the turn it arrives,
    not only on later turns, when it is history (Hermes appends the message
    after the history, and on a redirect merges it with a user row that
    ends it). Hermes stores the message as edited, as later loads would
    show it. A failure of ours: the message as it came, one log line."""
    message = arguments.get("user_message")
    if not isinstance(message, (str, list)):
        return
    rows = [{"role": "user", "content": message}]
    try:
        if plan.bridge.tag_messages(plan.agent, plan.session_id, rows):
            arguments["user_message"] = rows[0]["content"]
    except Exception as e:
        log.warning(
            "session-switch: %s message of a turn on %s runs as Hermes's own: %s",
            plan.agent,
            plan.asked,
            reason(e),
        )
