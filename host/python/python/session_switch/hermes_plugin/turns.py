"""The turn registry: what a turn runs on (:class:`Plan`), the
chat-completions request being handled (:class:`Request`, a context
variable), and the turns running now on agents' XMPP sessions
(:data:`TURNS`), by which a load Hermes makes during a turn is known as
that turn's."""

from __future__ import annotations

import contextvars
import threading
from typing import Any, Optional

from .compression_tips import live_tip


class Plan:
    """What a turn runs on: ``session_id`` and ``history`` in place of what
    the client asked (``asked``); ``bridge`` and ``agent`` when ``asked`` is
    one of an agent's XMPP sessions."""

    __slots__ = ("asked", "session_id", "history", "redirected", "bridge", "agent")

    def __init__(
        self,
        asked: str,
        session_id: str,
        history: list,
        redirected: bool,
        bridge: Any = None,
        agent: Optional[str] = None,
    ):
        self.asked = asked
        self.session_id = session_id
        self.history = history
        self.redirected = redirected
        self.bridge = bridge
        self.agent = agent


class Request:
    """One ``/v1/chat/completions`` request, from its handler's start: the
    Hermes home (captured on the event loop, where Hermes's profile scope
    is set) and the plan its one history load made."""

    __slots__ = ("home", "loading", "plan")

    def __init__(self, home: str) -> None:
        self.home = home
        # Until the load or `_run_agent`: no later load is the handler's.
        self.loading = True
        self.plan: Optional[Plan] = None


#: The request whose handler runs (``asyncio.to_thread`` and the agent's
#: task inherit it).
REQUEST: contextvars.ContextVar[Optional[Request]] = contextvars.ContextVar(
    "session_switch_request", default=None
)


class Turns:
    """The turns running now on an agent's XMPP session, by the session
    they run on (the plan's ``session_id``): a load of that session while
    one runs is a reload for it (a turn lease reloads a waiting turn's
    history from the file, in the agent's thread, where no context variable
    of the request reaches). Two overlapping turns on one session share the
    entry until both end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, list] = {}

    def __bool__(self) -> bool:
        return bool(self._running)

    def start(self, plan: Plan) -> None:
        with self._lock:
            entry = self._running.setdefault(plan.session_id, [plan, 0])
            entry[1] += 1

    def end(self, plan: Plan) -> None:
        with self._lock:
            entry = self._running.get(plan.session_id)
            if entry is not None:
                entry[1] -= 1
                if entry[1] <= 0:
                    del self._running[plan.session_id]

    def on(self, session_id: Any) -> Optional[Plan]:
        entry = self._running.get(session_id) if isinstance(session_id, str) else None
        return entry[0] if entry is not None else None

    def continued_by(self, db, session_id: Any) -> Optional[Plan]:
        """The running turn whose session ``session_id`` is the live
        compression tip of: a lease reloads a waiting turn's session at
        ``resolve_resume_session_id`` of it, and a turn holding the lease
        may have compressed it meanwhile (SECURITY G10). Asked only of
        sessions some other session names as parent
        (``Bridge.has_child_sessions``, kept while ``state.db`` is
        unchanged): Hermes's walk is Python a request need not pay."""
        if not isinstance(session_id, str):
            return None
        with self._lock:
            plans = [entry[0] for entry in self._running.values()]
        for plan in plans:
            if plan.session_id != session_id and live_tip(plan.bridge, db, plan.session_id) == session_id:
                return plan
        return None


TURNS = Turns()
