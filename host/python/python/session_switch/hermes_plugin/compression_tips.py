"""Hermes's compression chains (docs/src/design/compression.md): the live tip of a session,
asked of Hermes itself. A compressed session is ended and continues in a
child; Hermes runs a turn on a compressed session's live tip."""

from __future__ import annotations


def live_tip(bridge, db, session_id: str) -> str:
    """Hermes's live compression tip of ``session_id`` (``SessionDB.
    resolve_resume_session_id``), asked only where some session names it
    as parent (``Bridge.has_child_sessions``; else it is its own tip, and
    Hermes's walk is Python that a request need not pay); ``session_id``
    itself where Hermes has no
    walk. Raises what those raise."""
    resolver = getattr(db, "resolve_resume_session_id", None)
    if callable(resolver) and bridge.has_child_sessions(session_id):
        return str(resolver(session_id) or session_id)
    return session_id


def turn_target(bridge, db, decision: dict, asked: str) -> str:
    """The session a turn on ``asked`` runs on, given the policy's
    ``decision``: ``asked`` itself, or on a redirect the CLI session, on v31
    its live compression tip, as Hermes's ``_resolve_live_session_id`` does
    for the client's id (fails open to the id itself). A session no other
    names as parent is its own tip: Hermes's walk (Python, slower after a
    write) would answer the id itself."""
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


def live_tip_resolver():
    """The API server's own lookup of a session's live compression tip
    (v31's ``_resolve_live_session_id``, a coroutine of the adapter and the
    id), or ``None`` where the API server has none."""
    try:
        from gateway.platforms.api_server_runs import _resolve_live_session_id
    except Exception:
        return None
    return _resolve_live_session_id
