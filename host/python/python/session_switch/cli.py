"""The ``xmpp-session-bridge`` command of the wheel: the Rust command line
run in this process through the extension, with the binary's output and exit
statuses."""

import importlib.util
import signal
import sys
from importlib.metadata import entry_points

from ._native import run_cli


def main() -> None:
    # Ctrl-C as for the binary: the default action, or the bot's own handler
    # (it leaves the room and exits 0). Python's handler would only set a
    # flag, and raise KeyboardInterrupt as a traceback after the command.
    # An inherited ignore (a background job of a script) stays an ignore.
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(run_cli(sys.argv))


def plugin_import() -> str:
    """``doctor``'s ``plugin-imports`` link, in the Python the command runs
    in: Hermes finds the plugin by its entry point, it imports, and Hermes
    is in the same Python (the wheel went into Hermes's venv). What was
    found; raises with what is wrong."""
    found = [ep for ep in entry_points(group="hermes_agent.plugins") if ep.name == "session-switch"]
    if not found:
        raise RuntimeError(f"{sys.executable} has no hermes_agent.plugins entry point named session-switch")
    found[0].load()
    if importlib.util.find_spec("hermes_cli") is None:
        raise RuntimeError(
            f"{sys.executable} has the plugin but no Hermes (no module hermes_cli): "
            "the wheel belongs in Hermes's own venv"
        )
    return f"{found[0].value} imports in {sys.executable}, beside Hermes"


if __name__ == "__main__":
    main()
