"""Hermes's home of the running request, and one ``Bridge`` per home
(profiles have homes of their own)."""

from __future__ import annotations

import os
import threading
from typing import Any

from .logs import log

# Hermes's home per input of `get_hermes_home`: see `hermes_home`.
_HOMES: dict[tuple, str] = {}
# The environment variables Hermes's home depends on (every Hermes line:
# the variable itself, `~` and the default's home, v31's data-directory
# suffix).
_HOME_VARIABLES = ("HERMES_HOME", "HOME", "HERMES_DATA_DIR_SUFFIX")


def hermes_home() -> str:
    """Hermes's home for the running request, as ``str(get_hermes_home())``:
    the profile's override (a context variable Hermes's profile routing
    sets), else ``HERMES_HOME``, else Hermes's default. Hermes builds a new
    ``Path`` each time, slowest as the first code of a request (the figures are on
    docs/src/performance.md); the answer is kept
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
