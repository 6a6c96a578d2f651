"""The one error type of the Python embedding: a kind (the WIT
`failure-kind`, kebab-case) and one line for a person saying what failed,
where, and what to do. It mirrors the Rust host's `session_switch::Failure`
(wit/src/failure.rs), so a failure crosses the component boundary unchanged.
"""

from __future__ import annotations

#: Every WIT `failure-kind`, with the exit status DESIGN §8 gives it:
#: 2 refused before posting, 3 the room's answer is unknown, 1 any other.
EXIT_STATUS = {
    "bad-input": 2,
    "unknown-agent": 2,
    "not-accepted": 2,
    "busy": 2,
    "unknown-outcome": 3,
    "store": 1,
    "transport": 1,
    "policy": 1,
}


class SwitchError(Exception):
    """A failure of session-switch: `kind` is one of `EXIT_STATUS`'s keys,
    `message` one line for a person (also `str(error)`)."""

    def __init__(self, kind: str, message: str):
        if kind not in EXIT_STATUS:
            raise ValueError(f"unknown failure kind {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.message = message

    @property
    def exit_status(self) -> int:
        """The CLI's exit status for this kind (DESIGN §8)."""
        return EXIT_STATUS[self.kind]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.kind!r}, {self.message!r})"

    @staticmethod
    def of(kind: str, message: str) -> "SwitchError":
        """The error for `kind`: a `PolicyError` for kind `policy`."""
        if kind == "policy":
            return PolicyError(message)
        return SwitchError(kind, message)


class PolicyError(SwitchError):
    """The policy component itself failed (kind `policy`): it trapped, ran
    out of fuel or memory, broke the contract in its answer, or could not
    be loaded. The message names the component's version and the call."""

    def __init__(self, message: str):
        super().__init__("policy", message)


def bad_input(message: str) -> SwitchError:
    return SwitchError("bad-input", message)


def store(message: str) -> SwitchError:
    return SwitchError("store", message)


def transport(message: str) -> SwitchError:
    return SwitchError("transport", message)
