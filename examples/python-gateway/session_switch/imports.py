"""The host side of the WIT `host` interface for one `SessionSwitch`: the
imports over Hermes's `state.db` (`store.py`) and ejabberd's HTTP API
(`http_api.py`), and what a call may do with them. The twin of the Rust
host's host/runtime/src/imports.rs and bridge.rs:

- `send` only inside `policy.send`, once, with a plan that names the call's
  agent and CLI session, the agent's record key, and a history row of
  `[YOU] ` + the room's body;
- `meta-delete` only inside `policy.clear`, and only on our keys;
- `history` only inside `policy.context`; the host keeps the full rows and
  gives the policy summaries.

A policy that steps outside gets a `policy` failure and its answer is
refused (`violation`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, List, Optional

from wasmtime.component import Record

from . import edits
from .component import RowSummaries, field_of, record
from .failure import PolicyError, SwitchError, bad_input, transport
from .http_api import HttpApi
from .store import LEGACY_KEY, OUR_KEY_PREFIX, HermesStore, HistoryRow, SendWrite

log = logging.getLogger("session_switch.policy")

#: How many error/warn lines of the guest one call keeps for its failure
#: message, and how long each may be (characters).
KEPT_LINES = 8
KEPT_LINE_CHARS = 2000

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "error": logging.ERROR}


def is_our_meta_key(key: str) -> bool:
    """Whether the policy may delete `state_meta` key `key`: ours
    (`session_switch:` …) or the seed's `active_xmpp_sender_session`."""
    return key.startswith(OUR_KEY_PREFIX) or key == LEGACY_KEY


@dataclass(frozen=True)
class HistoryQuery:
    """The arguments of the last `host.history` call of a `context`."""

    session_id: str
    agent: str
    limit: Optional[int]


class HostState:
    """The imports of one `SessionSwitch` and the per-call record of what
    the policy did with them. `store` `None`: every fallible import fails
    with kind `store` (a component being checked before a swap, where no
    `state.db` is attached: `self-check` and `configure` must not call the
    host)."""

    def __init__(
        self,
        store: Optional[HermesStore],
        http_api: Optional[HttpApi],
        room: str,
        clock: Callable[[], float] = time.time,
    ):
        self.store = store
        self.http_api = http_api
        self.room = room
        self.clock = clock
        #: Version of the component, for log lines.
        self.policy = "unchecked component"
        self.begin("configure")

    def begin(self, call: str, send_args: Optional[tuple] = None) -> None:
        """Forget the previous call and start `call` (an export's WIT name);
        `send_args`: `(agent, cli_session_id)` of a `send`."""
        self.call = call
        self.send_args = send_args
        self.rows: List[HistoryRow] = []
        self.history_query: Optional[HistoryQuery] = None
        self.sent: Optional[Record] = None
        self.deleted: List[str] = []
        self.violation: Optional[str] = None
        self.said: List[str] = []

    def _refuse(self, what: str) -> PolicyError:
        if self.violation is None:
            self.violation = what
        return PolicyError(f"the policy {what}, which the host refuses")

    def _backend(self, what: str) -> HermesStore:
        if self.store is None:
            raise SwitchError(
                "store",
                f"the policy called host.{what} while being checked, where no state.db is "
                "attached; self-check and configure must not call the host",
            )
        return self.store

    # -- the imports -------------------------------------------------------

    def meta_get(self, key: str) -> Optional[str]:
        return self._backend("meta-get").meta_get(key)

    def meta_delete(self, key: str) -> bool:
        if self.call != "clear":
            raise self._refuse(f"called host.meta-delete during {self.call}; only policy.clear may delete")
        if not is_our_meta_key(key):
            raise bad_input(
                f"state_meta key '{key}' is not ours: only `session_switch:` keys and "
                "`active_xmpp_sender_session` may be deleted"
            )
        deleted = self._backend("meta-delete").meta_delete(key)
        if deleted:
            self.deleted.append(key)
        return deleted

    def session_exists(self, session_id: str) -> bool:
        return self._backend("session-exists").session_exists(session_id)

    def history(self, session_id: str, agent: str, limit: Optional[int], prefix_chars: int) -> RowSummaries:
        if self.call != "context":
            raise self._refuse(f"called host.history during {self.call}; only policy.context reads history")
        rows = self._backend("history").history(session_id, agent, limit)
        self.rows = rows
        self.history_query = HistoryQuery(session_id, agent, limit)
        return summaries(rows, prefix_chars)

    def now(self) -> float:
        return self.clock()

    def send(self, plan: Record) -> Record:
        if self.call != "send":
            raise self._refuse(f"called host.send during {self.call}; only policy.send may send")
        if self.sent is not None:
            raise self._refuse("called host.send twice in one policy.send")
        why = self._check_plan(plan)
        if why is not None:
            raise self._refuse(why)
        store = self._backend("send")
        if self.http_api is None:
            raise transport(
                "no ejabberd HTTP API is configured for this caller: set [xmpp] api_url "
                "(the Python embedding posts through mod_http_api)"
            )
        api = self.http_api
        sender = field_of(plan, "from-jid")
        body = field_of(plan, "room-body")
        # Ask ejabberd first, before state.db is locked (DESIGN §8 order).
        api.check_sender(sender, self.room)
        write = SendWrite(
            agent=field_of(plan, "agent"),
            history_session_id=field_of(plan, "history-session-id"),
            history_content=field_of(plan, "history-content"),
            cli_session_id=field_of(plan, "cli-session-id"),
            record_key=field_of(plan, "record-key"),
            record_value=field_of(plan, "record-value"),
            timestamp=field_of(plan, "timestamp"),
        )
        written, _ = store.send_write(write, lambda: api.post(sender, self.room, body))
        self.sent = record(
            message_id=written.message_id, room=self.room, record_replaced=written.record_replaced
        )
        return self.sent

    def log(self, level: str, message: str) -> None:
        log.log(
            _LEVELS.get(level, logging.INFO), "%s", message, extra={"policy": self.policy, "call": self.call}
        )
        if level in ("warn", "error") and len(self.said) < KEPT_LINES:
            # One line for the failure message: a panic spans two lines.
            self.said.append(" ".join(message.split())[:KEPT_LINE_CHARS])

    def _check_plan(self, plan: Record) -> Optional[str]:
        if self.send_args is None:
            return "called host.send outside policy.send"
        agent, cli = self.send_args
        if field_of(plan, "agent") != agent:
            return f"planned a send for agent '{field_of(plan, 'agent')}' while asked to send for '{agent}'"
        if field_of(plan, "cli-session-id") != cli:
            return f"planned a send from CLI session '{field_of(plan, 'cli-session-id')}' while asked for '{cli}'"
        key = f"session_switch:active:{agent}"
        if field_of(plan, "record-key") != key:
            return f"planned to write record key '{field_of(plan, 'record-key')}' instead of '{key}'"
        if field_of(plan, "history-content") != edits.YOU_TAG + field_of(plan, "room-body"):
            return "planned a history row that is not `[YOU] ` + the room's body"
        return None


def summaries(rows: List[HistoryRow], prefix_chars: int) -> RowSummaries:
    """What the policy sees of `rows` (WIT `row-summary`): id, role, a prefix
    of at most `prefix_chars` characters, and the provenance flag."""
    return RowSummaries(
        (r.id, edits.role_of(r.role), edits.prefix(r.content, prefix_chars), r.bridge_wrote) for r in rows
    )
