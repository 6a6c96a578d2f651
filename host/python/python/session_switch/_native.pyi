"""Type stubs of the Rust extension (host/python/src/lib.rs)."""

from os import PathLike
from typing import Any, Literal, Optional, Sequence, TypedDict, Union

_Path = Union[str, PathLike[str]]

FailureKind = Literal[
    "bad-input", "unknown-agent", "not-accepted", "busy",
    "unknown-outcome", "store", "transport", "policy",
]
Reason = Literal[
    "redirected", "no-record", "expired", "future-timestamp",
    "malformed-record", "unknown-session", "not-agent-session",
    "superseded", "policy-error",
]

__version__: str

class SessionSwitchError(Exception):
    """A failure of session-switch."""
    kind: FailureKind
    message: str

class Decision(TypedDict):
    session_id: str
    redirected: bool
    reason: Reason
    detail: str
    # Unix seconds until which the decision holds (None: the clock does not
    # change it); WIT `decision.valid-until`.
    valid_until: float | None

class Message(TypedDict, total=False):
    role: str
    content: str
    tool_calls: Any
    tool_call_id: str
    tool_name: str

class Context(Decision):
    messages: list[Message]

class Receipt(TypedDict):
    delivered: bool
    room: str
    body: str
    message_id: int
    record_key: str
    record_replaced: bool
    #: The session the `[YOU] ` row went into (the agent's first XMPP
    #: session, or on v31 its live compression tip).
    history_session_id: str

class RecordStatus(TypedDict):
    agent: str
    key: str
    session_id: Optional[str]
    timestamp: Optional[float]
    age_seconds: Optional[float]
    remaining_seconds: Optional[float]
    valid: bool
    reason: Reason
    detail: str

class PendingSend(TypedDict):
    """A send between its intent and its record (docs/src/design/send.md#a-send-never-locks-hermes-out)."""
    agent: str
    pending_send: Literal[True]
    key: str
    state: Literal["posting", "unknown", "delivered", "malformed"]
    delivered: bool
    in_progress: bool
    timestamp: float
    cli_session_id: str
    body: str

class Admission(TypedDict):
    reply: bool
    reason: str
    stop: bool
    heard: bool
    hops: int
    detail: str

class Cleared(TypedDict):
    cleared: list[str]
    pending_sends_cleared: int

class WatchStats(TypedDict):
    swaps: int
    rejections: int
    last_rejection: Optional[str]

class BuildInfo(TypedDict):
    version: str
    sqlite: str
    sqlite_version: str

def build_info() -> BuildInfo: ...
def run_cli(argv: Sequence[str]) -> int:
    """Run the ``xmpp-session-bridge`` command line ``argv`` (the program's
    path first) in this process, as the binary does, with the GIL released
    until it ends; its exit status. The console script's body
    (:mod:`session_switch.cli`)."""

class Bridge:
    """The host of one Hermes home; safe to share between threads. A ``str``
    argument holding a lone surrogate (not UTF-8) raises
    ``SessionSwitchError`` kind ``bad-input``, as the CLI exits 2."""

    def __init__(
        self,
        home: Optional[_Path] = None,
        *,
        config: Optional[_Path] = None,
        db: Optional[_Path] = None,
        policy: Optional[_Path] = None,
        watch: bool = True,
    ) -> None: ...
    @property
    def home(self) -> str: ...
    @property
    def db_path(self) -> str: ...
    @property
    def config_path(self) -> Optional[str]: ...
    @property
    def policy_file(self) -> Optional[str]: ...
    @property
    def agents(self) -> list[str]: ...
    def agent_for_session(self, session_id: str) -> Optional[str]:
        """The agent whose XMPP sessions include ``session_id``: one the
        config names, or on Hermes's v31 schema a compression continuation
        of one. Raises ``SessionSwitchError`` (kind ``busy``/``store``) when
        the chain cannot be read."""
    def has_child_sessions(self, session_id: str) -> bool:
        """Whether any session names ``session_id`` as its parent; without
        one, Hermes's walks to a continuation end at ``session_id``. Raises
        ``SessionSwitchError`` (kind ``busy``/``store``)."""
    def version(self) -> str: ...
    def resolve(self, agent: str, session_id: str) -> Decision: ...
    def context(self, agent: str, session_id: str, limit: Optional[int] = None) -> Context:
        """The decision and the chosen session's history, ``[YOU] `` edits
        applied (CLI ``context --json``); ``limit``: the last rows only, an
        int from 0 to 2**32-1 (else ``SessionSwitchError`` kind
        ``bad-input``, as the CLI's ``--limit``)."""
    def send(self, agent: str, cli_session_id: str, text: str) -> Receipt: ...
    def active(self, agent: Optional[str] = None) -> list[Union[RecordStatus, PendingSend]]: ...
    def clear(self, agent: Optional[str] = None) -> Cleared: ...
    def is_own(self, agent: str, sender: str) -> bool: ...
    def admit(
        self,
        agent: str,
        occupant: str,
        body: str,
        *,
        jid: Optional[str] = None,
        delayed: bool = False,
        human_origin: bool = False,
        stanza_id: Optional[str] = None,
        reply_to: Optional[str] = None,
        reply_to_id: Optional[str] = None,
    ) -> Admission:
        """The loop guard and the meeting rules (CLI ``admit --json``, 
        docs/src/design/loop-guard.md): whether ``agent``'s bot should answer one live room message
        from ``occupant`` (``room/nick``; ``jid`` the sender's real bare JID
        where the room exposes it), and why. ``stanza_id``: the room's
        XEP-0359 id of the message; ``reply_to`` / ``reply_to_id``: the
        sender (``room/nick`` or a nick) and stanza-id of the message it
        replies to (XEP-0461)."""
        ...
    def reload(self, path: Optional[_Path] = None) -> Optional[str]: ...
    def watch_stats(self) -> Optional[WatchStats]: ...
    def close(self) -> None: ...
    def tag_messages(self, agent: str, session_id: str, messages: list[dict[str, Any]]) -> int:
        """Apply the policy's ``[YOU] `` edits, in place, to ``messages``
        (Hermes's loader output for ``session_id``: ``content`` a string, a
        list of parts (the first ``{"type": "text"}`` part carries the
        text) or ``None``; ``api_content`` edited alike when non-empty).
        Rows are matched to the sent rows by role and timestamp, never by
        position. Returns how many messages changed. Raises
        ``SessionSwitchError`` (``bad-input`` for a session id Hermes's API
        server refuses, as ``resolve``; ``store``, ``policy``) and leaves
        ``messages`` as they were."""
        ...
    def _bench_resolve(self, agent: str, session_id: str, n: int) -> float:
        """``resolve`` ``n`` times inside Rust (no Python objects); ns per call."""
        ...
