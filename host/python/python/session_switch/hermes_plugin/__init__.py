"""session-switch as a Hermes plugin (entry point ``session-switch`` in the
group ``hermes_agent.plugins``; enable it with ``plugins: {enabled:
[session-switch]}`` in Hermes's ``config.yaml``).

For a turn on one of an agent's XMPP sessions the policy answers
(``resolve``); on a redirect the CLI session is loaded with Hermes's own
loader (on v31 its live compression tip first), the policy's ``[YOU] ``
edits are applied to that output (``Bridge.tag_messages``) and the turn runs
there; the result names the session the client sent, so
``X-Hermes-Session-Id`` does too. Without a redirect the history Hermes
loaded gets the same edits, and so does a load of the turn's session that
Hermes makes during the turn (a turn lease reloads a waiting turn's
history); the turn's own message gets them either way. Any failure of
ours falls back to Hermes's own behaviour with one log line.

The parts: :mod:`.canary` (whether each seam is as the plugin expects),
:mod:`.seams` (the wrappers of Hermes's internals),
:mod:`.turns` (the turn registry), :mod:`.turn_plans` (what a turn runs on),
:mod:`.compression_tips` (compression tips), :mod:`.homes` (Hermes's home, a
``Bridge`` per home), :mod:`.logs`.

Importing this package does nothing but define it: Hermes's newer versions
import every enabled entry point while scanning for providers.
"""

from __future__ import annotations

from typing import Any

from . import canary, seams, turns
from .homes import Bridges, hermes_home
from .logs import log

# How the INFO line at `register` names the two seams every line has.
SEAM = canary.RUN_AGENT
LOAD_SEAM = f"{canary.LOADER} in APIServerAdapter._handle_chat_completions"


def register(ctx: Any) -> None:
    """Install the wrappers of the seams. Inert, with one log line, where
    a seam moved (:mod:`.canary`) or the config or the policy file cannot
    be loaded: Hermes's own behaviour. Never raises."""
    hermes = canary.hermes_version()
    try:
        from session_switch import Bridge, SessionSwitchError, __version__
    except Exception as e:  # the extension cannot load here
        log.warning("session-switch: inert on %s: cannot load the extension: %s", hermes, e)
        return
    try:
        found = canary.find()
    except canary.SeamMoved as e:
        log.warning(
            "session-switch %s: inert on %s (Hermes's own behaviour): seam %s moved: %s",
            __version__,
            hermes,
            e.seam,
            e.why,
        )
        return
    except Exception as e:  # a Hermes the canary cannot even read
        log.warning(
            "session-switch %s: inert on %s (Hermes's own behaviour): its seams cannot be checked: %r",
            __version__,
            hermes,
            e,
        )
        return
    if getattr(found.run_agent, "__session_switch__", False):
        return
    home = hermes_home()
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
    bridges = Bridges()
    bridges.put(home, bridge)
    seams.install(found, bridges)
    also = [f"reload repair {canary.REPAIR}"] if found.repair is not None else []
    log.info(
        "session-switch %s on %s: seam %s, history load %s%s, policy %s (%s), home %s",
        __version__,
        hermes,
        SEAM,
        LOAD_SEAM,
        "".join(f", {used}" for used in also + found.used),
        bridge.version(),
        bridge.policy_file or "embedded",
        home,
    )


# Hermes 0.19.0 and the axisrow line load an entry point's target and call
# its `register` attribute (made for a module target); the v31 line calls
# a function target itself. The function carries itself as `register`:
# both work.
register.register = register  # type: ignore[attr-defined]

# The parts bench/plugin_bench.py drives by these names.
_Bridges = Bridges
_hermes_home = hermes_home
_wrap_run_agent = seams.wrap_run_agent
_Plan = turns.Plan
_Request = turns.Request
_REQUEST = turns.REQUEST
