"""Hermes's home of the running request, and one ``Bridge`` per home
(profiles have homes of their own)."""

from __future__ import annotations

import threading
from typing import Any

from .logs import log


def hermes_home() -> str:
    """Hermes's home for the running request, as Hermes itself answers it
    (``get_hermes_home``: the profile's override, a context variable
    Hermes's profile routing sets, else ``HERMES_HOME``, else Hermes's
    default)."""
    import hermes_constants

    return str(hermes_constants.get_hermes_home())


class Bridges:
    """One ``Bridge`` per Hermes home; ``None`` for a home whose config or
    policy cannot be loaded (its turns run as Hermes's own)."""

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
