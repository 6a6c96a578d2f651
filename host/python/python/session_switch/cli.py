"""The ``xmpp-session-bridge`` command of the wheel: the Rust command line
run in this process through the extension, with the binary's output and exit
statuses."""

import signal
import sys

from ._native import run_cli


def main() -> None:
    # Ctrl-C as for the binary: the default action, or the bot's own handler
    # (it leaves the room and exits 0). Python's handler would only set a
    # flag, and raise KeyboardInterrupt as a traceback after the command.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(run_cli(sys.argv))


if __name__ == "__main__":
    main()
