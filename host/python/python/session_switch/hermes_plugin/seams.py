"""The wrappers of Hermes's internals (the seams), installed by
``register``. No plugin hook fires where the API server picks a turn's
session and history (``llm_request`` middleware can rewrite what the model
gets, but not the session the turn is stored in), so:

- ``APIServerAdapter._run_agent``, called by keyword with ``session_id``
  and ``conversation_history`` already chosen: replacing both redirects a
  turn fully (the model gets the CLI session's history, the turn is stored
  there). Every route passes through it.
- The history load of ``/v1/chat/completions``: its handler loads the
  client's session with ``SessionDB.get_messages_as_conversation(session_id)``
  (in a worker thread; on v31 after its own live-tip lookup) and hands the
  list to ``_run_agent``. The handler is wrapped only to mark the request
  (:data:`~.turns.REQUEST`); the loader, wrapped, decides there, on that
  request's one load: on a redirect it loads the CLI session instead, so
  the client's session is never loaded, and the ``_run_agent`` wrapper
  finds the plan made (it checks that the history it gets is that very
  list). Other routes (``/v1/responses``, ``/v1/runs``,
  ``/api/sessions/…/chat``) take the first seam alone: a redirect there
  loads the CLI session after Hermes loaded the client's.
- ``repair_message_sequence``, where Hermes's loader repairs what it loaded
  (``repair_alternation``): a reload made during a turn is edited before
  the repair merges its rows.
"""

from __future__ import annotations

import functools
import inspect
import threading
from typing import Callable

from . import turn_plans
from .homes import Bridges, hermes_home
from .logs import log, reason
from .turns import REQUEST, TURNS, Plan, Request

def wrap_run_agent(original: Callable, bridges: Bridges) -> Callable:
    """``APIServerAdapter._run_agent`` running each turn on its plan: the
    load seam's, or one made here (:func:`~.turn_plans.plan`)."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    async def _run_agent(self, *args, **kwargs):
        if not args and "session_id" in kwargs and "conversation_history" in kwargs:
            # Hermes's own calls, all by keyword: no binding (`bind` would
            # be most of this wrapper's time a turn).
            arguments = kwargs

            def call():
                return original(self, **arguments)

        else:
            try:
                bound = signature.bind(self, *args, **kwargs)
            except TypeError:
                return await original(self, *args, **kwargs)
            arguments = bound.arguments

            def call():
                return original(*bound.args, **bound.kwargs)

        request = REQUEST.get()
        plan = None
        if request is not None:
            request.loading = False
            made = request.plan
            # The plan of the load seam, if this turn got that very list.
            if (
                made is not None
                and arguments.get("session_id") == made.asked
                and arguments.get("conversation_history") is made.history
            ):
                plan = made
        if plan is None:
            try:
                plan = await turn_plans.plan(self, bridges, arguments)
            except Exception as e:  # ours failed: Hermes's own behaviour
                log.warning(
                    "session-switch: turn on %s runs as Hermes's own: %s",
                    arguments.get("session_id"),
                    reason(e),
                )
        if plan is None:
            return await call()
        arguments["session_id"] = plan.session_id
        arguments["conversation_history"] = plan.history
        if plan.agent is not None:
            turn_plans.edit_incoming(plan, arguments)
            TURNS.start(plan)
        try:
            outcome = await call()
        finally:
            if plan.agent is not None:
                TURNS.end(plan)
        if plan.redirected and isinstance(outcome, tuple) and outcome:
            result = outcome[0]
            # The client keeps the id it sent (0.19.0's non-stream path
            # returns the agent's session id, here the CLI one).
            if isinstance(result, dict) and result.get("session_id") == plan.session_id:
                result["session_id"] = plan.asked
        return outcome

    _run_agent.__session_switch__ = True  # type: ignore[attr-defined]
    return _run_agent


def install(found, bridges: Bridges) -> None:
    """Wrap the seams the canary found (``canary.Seams``): ``_run_agent``,
    the chat-completions handler (to mark its requests),
    ``SessionDB.get_messages_as_conversation`` (to decide at the load) and,
    where Hermes's loader repairs, ``repair_message_sequence``."""
    adapter, handler, loader = found.adapter, found.handler, found.loader

    @functools.wraps(handler)
    async def _handle_chat_completions(self, *args, **kwargs):
        try:
            request = Request(hermes_home())
        except Exception:  # Hermes's own behaviour, through `_run_agent`'s seam
            return await handler(self, *args, **kwargs)
        token = REQUEST.set(request)
        try:
            return await handler(self, *args, **kwargs)
        finally:
            REQUEST.reset(token)

    @functools.wraps(loader)
    def get_messages_as_conversation(db, *args, **kwargs):
        request = REQUEST.get()
        # The handler's load is `loader(session_id)`, positional, alone.
        if request is None or not request.loading or len(args) != 1 or kwargs:
            return load_during_turn(db, loader, args, kwargs)
        request.loading = False
        (session_id,) = args
        try:
            request.plan = turn_plans.plan_at_load(db, loader, bridges, request.home, session_id)
        except Exception as e:  # ours failed: Hermes's own load
            log.warning(
                "session-switch: turn on %s runs as Hermes's own: %s",
                session_id,
                reason(e),
            )
            request.plan = Plan(session_id, session_id, loader(db, session_id), False)
        return request.plan.history

    run_agent = wrap_run_agent(found.run_agent, bridges)
    repair = found.repair
    if repair is not None and not getattr(repair, "__session_switch__", False):
        from agent import agent_runtime_helpers as helpers

        repair = wrap_repair(repair)
    else:
        repair = None
    # Every wrapper made: installed together, or none (a raise above).
    adapter._run_agent = run_agent
    found.session_db.get_messages_as_conversation = get_messages_as_conversation
    adapter._handle_chat_completions = _handle_chat_completions
    if repair is not None:
        helpers.repair_message_sequence = repair


# The turn whose reload the running thread's load is (see `load_during_turn`).
_RELOAD = threading.local()


def load_during_turn(db, loader: Callable, args: tuple, kwargs: dict):
    """Hermes's load, with the policy's edits when it loads a session a
    turn on an agent's XMPP session runs on (``TURNS``), or the live
    compression tip of one (``Turns.continued_by``): the model gets that
    history as it gets the first load's. Rows are edited before Hermes's
    alternation repair merges consecutive user rows
    (``repair_alternation=True``, :func:`wrap_repair`), as on the
    first load, where the repair comes later; where no repair runs, after
    the load. A failure of ours: Hermes's load as it is, one log line."""
    session_id = args[0] if args else kwargs.get("session_id")
    plan = TURNS.on(session_id)
    if plan is None and TURNS:
        try:
            plan = TURNS.continued_by(db, session_id)
        except Exception as e:
            log.warning(
                "session-switch: load of %s during a turn runs as Hermes's own: %s",
                session_id,
                reason(e),
            )
    if plan is None:
        return loader(db, *args, **kwargs)
    _RELOAD.turn = (plan, session_id)
    try:
        loaded = loader(db, *args, **kwargs)
        if getattr(_RELOAD, "turn", None) is not None and isinstance(loaded, list):
            tag_reload(plan, session_id, loaded)
        return loaded
    finally:
        _RELOAD.turn = None


def tag_reload(plan: Plan, session_id: str, messages: list) -> None:
    """``tag_messages`` on a reload; logs instead of raising."""
    try:
        plan.bridge.tag_messages(plan.agent, session_id, messages)
    except Exception as e:
        log.warning(
            "session-switch: %s reload of %s runs as Hermes's own: %s",
            plan.agent,
            session_id,
            reason(e),
        )


def wrap_repair(repair: Callable) -> Callable:
    """Hermes's ``repair_message_sequence`` (the loader imports it from
    ``agent.agent_runtime_helpers`` when it repairs), wrapped so that a
    reload :func:`load_during_turn` marked is edited just before the repair
    merges its rows: a merged row's second text would keep an imitated tag
    inside it. Only the loader's own call (``agent`` None) is edited."""

    @functools.wraps(repair)
    def repair_message_sequence(agent, messages, *args, **kwargs):
        turn = getattr(_RELOAD, "turn", None)
        if turn is not None and agent is None and isinstance(messages, list):
            _RELOAD.turn = None
            tag_reload(turn[0], turn[1], messages)
        return repair(agent, messages, *args, **kwargs)

    repair_message_sequence.__session_switch__ = True  # type: ignore[attr-defined]
    return repair_message_sequence
