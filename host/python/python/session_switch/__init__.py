"""session-switch for Python: the Rust host of the dynamic session switch.

``Bridge`` is the host of one Hermes home (the CLI's defaults: ``HERMES_HOME``,
``session-switch.toml``, ``state.db``, the embedded policy or the config's
``[policy] path``). Its methods answer with the CLI's JSON shapes as Python
objects and raise :class:`SessionSwitchError` (with ``.kind``) on failure.
The Hermes plugin is :mod:`session_switch.hermes_plugin`.
"""

from ._native import Bridge, SessionSwitchError, __version__, build_info

__all__ = ["Bridge", "SessionSwitchError", "__version__", "build_info"]
