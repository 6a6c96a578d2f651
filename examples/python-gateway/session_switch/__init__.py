"""session-switch for a Python gateway: the very same policy component the
Rust host runs (`target/policy/session_switch.wasm`), loaded with wasmtime
from PyPI (`wasmtime.component`), hot-swappable, over Hermes's `state.db`
(`sqlite3`) and ejabberd's HTTP API — no Rust process in between.

The drop-in for the seed's redirect snippet in Hermes's API server::

    from session_switch import SessionSwitch
    switch = SessionSwitch.from_hermes_home("/opt/session-switch/session_switch.wasm")

    # when the bot is about to load `session_id` for agent "mohe":
    context = switch.context("mohe", session_id)
    session_id = context.decision.session_id   # the CLI session while a record is valid
    history = context.messages                 # Hermes's loader shape, own rows "[YOU] "-tagged

See `SessionSwitch` for the rest (`resolve`, `send`, `active`, `clear`,
`is_own_message`, `reload`) and DESIGN §3 and §8 for the rules.
"""

import logging as _logging

from .component import HOST_INTERFACE, POLICY_INTERFACE, TYPES_INTERFACE, LoadInfo
from .config import Agent, Config, Settings
from .config import load as load_config
from .edits import WHITE_SPACE, YOU_TAG, tag, untag
from .failure import EXIT_STATUS, PolicyError, SwitchError
from .store import HermesStore, HistoryRow
from .switch import (
    FUEL_PER_CALL,
    MEMORY_BYTES,
    REASONS,
    Context,
    Decision,
    Receipt,
    RecordStatus,
    SessionSwitch,
    SwapReport,
    WatchStats,
    check_decision,
    check_redirect,
    fallback_decision,
)

# A library logs; the application decides where (no "last resort" stderr).
_logging.getLogger(__name__).addHandler(_logging.NullHandler())

__all__ = [
    "Agent",
    "Config",
    "Context",
    "Decision",
    "EXIT_STATUS",
    "FUEL_PER_CALL",
    "HOST_INTERFACE",
    "HermesStore",
    "HistoryRow",
    "LoadInfo",
    "MEMORY_BYTES",
    "POLICY_INTERFACE",
    "PolicyError",
    "REASONS",
    "Receipt",
    "RecordStatus",
    "SessionSwitch",
    "Settings",
    "SwapReport",
    "SwitchError",
    "TYPES_INTERFACE",
    "WHITE_SPACE",
    "WatchStats",
    "YOU_TAG",
    "check_decision",
    "check_redirect",
    "fallback_decision",
    "load_config",
    "tag",
    "untag",
]
