"""What the plugin logs: its logger, what a line says of a failure, and
where an XMPP session's turns run (a line when that changes)."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("session_switch.hermes")


def reason(e: Exception) -> Any:
    """What a log line says of ``e``: a ``SessionSwitchError``'s message,
    else the exception itself."""
    return getattr(e, "message", None) or e


# The session each XMPP session's last turn ran on ((bridge, asked) ->
# target), for `note_turn`; by bridge, since one gateway may serve several
# Hermes homes (profiles) whose sessions share ids. At most one entry per
# XMPP session and continuation of each home; a race of two turns costs at
# most a repeated line.
LAST_TARGET: dict[tuple, str] = {}


def note_turn(bridge, agent: str, asked: str, target: str, detail: str, how: str) -> None:
    """Log where a turn on ``asked`` runs: at INFO when that changed since
    the session's last turn (a redirect starts, moves or ends), else at
    DEBUG. A line per turn at INFO would be a third of the plugin's time
    per request (Hermes's ``agent.log`` handler formats, redacts and
    flushes every record) and repeat the same words each turn."""
    key = (bridge, asked)
    last = LAST_TARGET.get(key, asked)
    LAST_TARGET[key] = target
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
