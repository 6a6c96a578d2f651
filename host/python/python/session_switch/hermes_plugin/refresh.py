"""The refresh after a turn, off the response's path (docs/src/design/hermes-plugin.md): the
next turn's reads made again by one thread of the plugin's, and for a
chat-completions turn the next turn's history prepared
(:class:`Prepared`), which the next request takes while nothing was
committed since."""

from __future__ import annotations

import os
import queue
import threading
import time
from typing import Any, Callable, Optional

from .logs import log, reason
from .compression_tips import live_tip, turn_target


def refresh_after_turn(plan) -> None:
    """Have :data:`REFRESHER` run :func:`refresh` of ``plan``'s reads; the
    turn's response does not wait for it. Nothing for a turn on no agent's
    XMPP session."""
    if plan.agent is not None:
        REFRESHER.schedule(plan.bridge, plan.agent, plan.asked, plan.db)


class Refresher:
    """The one thread that runs :func:`refresh` after turns, fed by a
    queue. ``loop.run_in_executor`` costs the event loop a future, the
    pool's bookkeeping and a wake of a worker each turn; scheduling here is
    a dict lookup and a put, whose wake of the sleeping thread is most of
    its cost (bench/README.md, "Figures behind design choices"). A refresh
    queued for a
    session and not started is not queued again: it reads after both
    turns. Started at the first turn (importing the plugin starts nothing),
    again in a forked child. Not a daemon thread: one that takes the GIL
    back after Python's finalisation started is ended by ``pthread_exit``,
    which cannot unwind the extension's frames; it is stopped, as
    ``concurrent.futures``'s workers are, before Python joins its threads
    at exit."""

    def __init__(self) -> None:
        self._fork_hook = False  # `_forget` registered (kept in a child)
        self._forget()

    def schedule(self, bridge, agent: str, asked: str, db: Any = None) -> None:
        """Queue a refresh of ``asked``'s reads (never raises)."""
        key = (id(bridge), agent, asked)
        item = (key, bridge, agent, asked, db)
        # Atomic under the GIL: of two turns ending at once one queues.
        if self._queued.setdefault(key, item) is not item:
            return
        if self._thread is None and not self._start():
            self._queued.pop(key, None)
            return
        self._queue.put(item)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait until the refreshes queued so far have run (tests and the
        bench); False after ``timeout`` seconds, or with no thread."""
        if self._thread is None and not self._start():
            return False
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    def _start(self) -> bool:
        """Start the thread; False at Python's exit, when none can start."""
        with self._lock:
            if self._thread is not None:
                return True
            thread = threading.Thread(target=self._run, name="session-switch-refresh", daemon=True)
            register = getattr(threading, "_register_atexit", None)
            try:
                if register is not None:
                    thread.daemon = False
                    register(self._queue.put, None)
                thread.start()
            except RuntimeError:  # "can't register atexit after shutdown"
                return False
            if not self._fork_hook:
                self._fork_hook = True
                os.register_at_fork(after_in_child=self._forget)
            self._thread = thread
            return True

    def _forget(self) -> None:
        """No thread, nothing queued: at the start, and in a forked child
        (the parent's thread is not copied; its queue may not be whole)."""
        self._lock = threading.Lock()
        self._queued: dict = {}
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: Optional[threading.Thread] = None

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if isinstance(item, threading.Event):
                item.set()
                continue
            key, bridge, agent, asked, db = item
            self._queued.pop(key, None)
            refresh(bridge, agent, asked, db)


REFRESHER = Refresher()


def refresh(bridge, agent: str, asked: str, db: Any = None) -> None:
    """Read again, after a turn on ``asked`` stored its messages, what the
    next turn on ``asked`` reads first: the decision (``resolve``), the
    target's children and the sent rows; with Hermes's ``SessionDB``
    (``db``: the turn came through the history-load seam) also the next
    turn's history (:class:`Prepared`). SQLite drops a connection's page
    cache when another commits, so the first reads after Hermes's store of
    a turn go back to the file (docs/src/design/hermes-plugin.md#as-built); made here, off
    the request's path, they leave the next request the decision memo and
    pages that are current. Nothing is served that is not: the next
    ``resolve`` still checks the data version (a CLI send or another turn
    in between is read then). Never raises."""
    try:
        if db is not None and PREPARED.loader is not None:
            PREPARED.make(bridge, agent, asked, db)
            return
        decision = bridge.resolve(agent, asked)
        target = decision["session_id"] if decision["redirected"] else asked
        if decision["redirected"]:
            bridge.has_child_sessions(target)
        # No messages: reads the sent rows of the target, edits nothing.
        bridge.tag_messages(agent, target, [])
    except Exception as e:  # the next request reads for itself
        log.debug("session-switch: refresh after a turn on %s: %s", asked, reason(e))


class Prepared:
    """The next turn's history of each agent's XMPP session, made after a
    turn on it (:func:`refresh`, off the request's path) by Hermes's own
    loader (``loader``, set when the history-load seam is installed) with
    the policy's edits, for the next chat-completions request on it to take
    instead of loading: Hermes's load (which grows with the history,
    docs/src/performance.md) and the edits leave the request.

    A prepared history is handed out at most once (Hermes appends to the
    list it gets), with the decision and the session it was made for,
    and only when ``Bridge.data_version`` at the request's history load
    equals the one read before they were made (nobody committed to
    ``state.db``, no policy swap: Hermes's loader and the policy read
    nothing else, so a load now would give the same list) and the clock
    has not reached the decision's ``valid_until`` (a record's TTL).
    Otherwise the request decides and loads itself. At most ``_MAX``
    sessions are kept (an agent's Hermes serves a few)."""

    _MAX = 8
    #: Seconds after each making until its version is checked (`make`):
    #: at most two loads a turn, also where other sessions write all the
    #: time. The refresh thread waits them out: another session's refresh
    #: queued meanwhile starts up to 0.5 s later.
    _SETTLE = (0.1, 0.4)

    def __init__(self) -> None:
        self._by_session: dict[tuple, tuple] = {}
        #: Hermes's own ``get_messages_as_conversation`` (``loader(db,
        #: session_id)``), as the history-load seam found it.
        self.loader: Optional[Callable] = None

    def take(self, bridge, asked: str) -> Optional[tuple]:
        """``(agent, decision, target, history)`` prepared for a turn on
        ``asked``, if ``bridge.data_version()`` now is the one read before
        they were made and the clock has not reached the decision's
        ``valid_until`` (WIT ``decision.valid-until``: a host may answer a
        later ``resolve`` from it while ``state.db`` is unchanged); never
        raises."""
        entry = self._by_session.pop((id(bridge), asked), None) if bridge is not None else None
        if entry is None:
            return None
        made_at, agent, decision, target, history = entry
        until = decision["valid_until"]
        try:
            now: Any = bridge.data_version()
        except Exception as e:  # the request decides and loads itself
            now = reason(e)
        if now == made_at and (until is None or time.time() < until):
            return agent, decision, target, history
        log.debug(
            "session-switch: turn prepared for %s not taken: made at %s, valid until %s; now %s",
            asked,
            made_at,
            until,
            now,
        )
        return None

    def make(self, bridge, agent: str, asked: str, db) -> None:
        """Prepare the next turn's history on ``asked``. Kept at once, then
        checked after ``_SETTLE`` seconds: a commit since (Hermes may still
        be storing the turn; v31's token counts come from a writer thread
        of their own) makes it again, at most ``len(_SETTLE)`` times. Not
        made again once a request took it. Raises what Hermes's loader or
        the Bridge raises; nothing is kept then.

        Made for ``asked``'s live compression tip where the turn was
        compressed (v31): the API server runs the next turn on the client's
        id at the tip (``_resolve_live_session_id``), and that is the id
        its load asks for."""
        self._by_session.pop((id(bridge), asked), None)
        tip = live_tip(bridge, db, asked)
        if tip != asked:
            # As the request will: a continuation seen first renews the
            # pooled instances, whose settings list the agent's sessions.
            if bridge.agent_for_session(tip) != agent:
                return
            asked = tip
            self._by_session.pop((id(bridge), asked), None)
        key = (id(bridge), asked)
        for wait in self._SETTLE:
            version = bridge.data_version()
            decision = bridge.resolve(agent, asked)
            target = turn_target(bridge, db, decision, asked)
            history = self.loader(db, target)
            bridge.tag_messages(agent, target, history)
            entry = (version, agent, decision, target, history)
            while len(self._by_session) >= self._MAX:
                self._by_session.pop(next(iter(self._by_session)), None)
            self._by_session[key] = entry
            time.sleep(wait)
            if self._by_session.get(key) is not entry:
                return  # taken (or made way): the next turn prepares again
            if bridge.data_version() == version:
                log.debug(
                    "session-switch: next turn on %s prepared: %s, %d messages", asked, target, len(history)
                )
                return


PREPARED = Prepared()
