"""`SessionSwitch`: the policy component for a Python gateway, over
Hermes's `state.db` and ejabberd's HTTP API. Loads and checks the
component, calls its exports under fuel and memory budgets, checks every
answer like the Rust host (host/runtime/src/instance.rs), falls back safely
when the policy fails, and swaps in a new component when the file changes
(keeping the old one when the new one fails a check).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple

from wasmtime import WasmtimeError
from wasmtime.component import Record, Variant

from . import config as config_mod
from . import edits
from .component import (
    Instance,
    LoadInfo,
    Loaded,
    compile_component,
    failure_of,
    field_of,
    engine,
    make_linker,
    settings_record,
    trap_line,
)
from .config import Config
from .failure import PolicyError, SwitchError, bad_input
from .http_api import HttpApi
from .imports import HostState, HistoryQuery
from .store import LEGACY_KEY, OUR_KEY_PREFIX, HermesStore, HistoryRow

log = logging.getLogger("session_switch")

#: Fuel one call may burn, and the largest linear memory of an instance
#: (bytes): the Rust host's budgets (host/runtime/src/limits.rs), measured
#: there with 200× (fuel) and 15× (memory) headroom over a 10k-row history.
FUEL_PER_CALL = 2_000_000_000
MEMORY_BYTES = 64 << 20
#: How many characters of each row `tag` shows the policy (the Rust host's
#: default; `context` lets the policy choose).
TAG_PREFIX_CHARS = 256

REASONS = (
    "redirected",
    "no-record",
    "expired",
    "future-timestamp",
    "malformed-record",
    "unknown-session",
    "not-agent-session",
    "superseded",
    "policy-error",
)


@dataclass(frozen=True)
class Decision:
    """Which session the agent's bot should load, and why (WIT `decision`).
    `reason` is one of `REASONS`; `detail` one sentence for a person."""

    session_id: str
    redirected: bool
    reason: str
    detail: str

    def to_json(self) -> dict:
        """The CLI's `resolve --json` shape (DESIGN §8)."""
        return {
            "session_id": self.session_id,
            "redirected": self.redirected,
            "reason": self.reason,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Context:
    """The decision and the chosen session's history as Hermes's loader
    returns it (`role`, `content`, and `tool_calls`, `tool_call_id`,
    `tool_name` when set; in id order) with the `[YOU] ` edits applied."""

    decision: Decision
    messages: List[dict]

    def to_json(self) -> dict:
        """The CLI's `context --json` shape (DESIGN §8)."""
        return {**self.decision.to_json(), "messages": self.messages}


@dataclass(frozen=True)
class Receipt:
    """A send the room accepted and `state.db` recorded (WIT `receipt`)."""

    message_id: int
    room: str
    #: The normalised body the room got (history got `[YOU] ` + it).
    body: str
    record_key: str
    #: False when a newer record was already stored and was kept.
    record_replaced: bool

    def to_json(self) -> dict:
        """The CLI's `send --json` shape (DESIGN §8)."""
        return {
            "delivered": True,
            "room": self.room,
            "body": self.body,
            "message_id": self.message_id,
            "record_key": self.record_key,
            "record_replaced": self.record_replaced,
        }


@dataclass(frozen=True)
class RecordStatus:
    """One agent's record as `active` shows it (WIT `record-status`); ages
    and times in seconds."""

    agent: str
    key: str
    session_id: Optional[str]
    timestamp: Optional[float]
    age_seconds: Optional[float]
    remaining_seconds: Optional[float]
    valid: bool
    reason: str
    detail: str

    def to_json(self) -> dict:
        """One entry of the CLI's `active --json` list."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class SwapReport:
    """What one accepted swap cost (seconds)."""

    info: LoadInfo
    #: Read + compile + check, before the swap.
    prepare_seconds: float
    #: How long the swap held the lock callers wait on.
    pause_seconds: float


@dataclass
class WatchStats:
    """What the file watcher has done so far."""

    swaps: int = 0
    rejections: int = 0
    last_rejection: Optional[str] = None
    last_swap: Optional[SwapReport] = None


def check_decision(d: Decision, asked: str) -> Optional[str]:
    """DESIGN §8's checks of a decision for session `asked`: `redirected`
    exactly when the reason is `redirected`; `policy-error` is the host's
    alone and `superseded` `active`'s; a redirect names a session; anything
    else names `asked`. `None` when fine, else one sentence (the Rust
    host's)."""
    if d.reason not in REASONS:
        return f"it answered an unknown reason {d.reason!r}"
    if d.redirected != (d.reason == "redirected"):
        return f"it answered redirected = {str(d.redirected).lower()} with reason {d.reason}"
    if d.reason == "policy-error":
        return "it answered reason policy-error, which only the host gives"
    if d.reason == "superseded":
        return "it answered reason superseded, which only active gives"
    if d.redirected:
        if not d.session_id:
            return "it redirected to an empty session id"
    elif d.session_id != asked:
        return f"it did not redirect, yet named session '{d.session_id}' instead of '{asked}'"
    return None


def check_redirect(
    meta_get: Callable[[str], Optional[str]], agent: str, legacy: bool, d: Decision
) -> Optional[str]:
    """The host's own check of a redirect (SECURITY.md, H1; the Rust host's
    `session::check_redirect`): a decision that redirects `agent` is
    honoured only when one of the agent's records, `session_switch:active:
    <agent>` and, when `legacy` (the configured `legacy_agent` only), the
    seed's `active_xmpp_sender_session`, is a JSON object whose `session_id`
    is the target. It does not repeat the policy's rules (TTL, skew, target
    session); it stops a policy from sending a bot to a session no record
    names. `meta_get` reads a key (`HermesStore.meta_get`). `None` when
    fine, else one sentence (the Rust host's)."""
    if not d.redirected:
        return None
    keys = [f"{OUR_KEY_PREFIX}active:{agent}"] + ([LEGACY_KEY] if legacy else [])
    for key in keys:
        try:
            value = meta_get(key)
        except SwitchError as e:
            return (
                f"it redirected '{agent}' to session '{d.session_id}', and the host could not "
                f"read record '{key}' to check that: {e.message}"
            )
        try:
            record = json.loads(value) if value is not None else None
        except ValueError:
            record = None
        if isinstance(record, dict) and record.get("session_id") == d.session_id:
            return None
    return (
        f"it redirected '{agent}' to session '{d.session_id}', which no record of the agent "
        f"names (read: {', '.join(keys)})"
    )


def fallback_decision(asked: str, error: SwitchError) -> Decision:
    """The safe default: load the session asked about (reason
    `policy-error`, the failure in `detail`)."""
    return Decision(
        session_id=asked, redirected=False, reason="policy-error", detail=f"no redirect: {error.message}"
    )


def _decision(r: Record) -> Decision:
    return Decision(
        session_id=field_of(r, "session-id"),
        redirected=field_of(r, "redirected"),
        reason=field_of(r, "reason"),
        detail=field_of(r, "detail"),
    )


def _stamp(path: Path) -> Optional[Tuple[int, int, int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_dev, st.st_ino)


class SessionSwitch:
    """The session-switch policy for one Hermes gateway (one `state.db`,
    one config), loaded from a component file that may be replaced while
    the gateway runs.

    ```python
    switch = SessionSwitch("session_switch.wasm", "~/.hermes/state.db",
                           "~/.hermes/session-switch.toml")
    session_id = switch.resolve("mohe", session_id).session_id
    history = switch.context("mohe", session_id).messages
    ```

    Thread-safe: one lock serialises the calls (each takes tens to hundreds
    of microseconds; the instance and the SQLite connection are not for
    concurrent use). The instance is kept between calls and thrown away
    after a trap, an invalid answer or a swap.

    Every call runs under `fuel_per_call` fuel and a `memory_bytes` memory
    cap. When the policy traps, runs out of fuel or memory, or answers
    something that breaks the contract, the call raises `PolicyError`
    (naming the component's version, the call, and what the policy logged,
    its panic message included), or with `fallback=True` returns the safe
    default. Failures the policy returns itself keep their kind
    (`SwitchError`: `unknown-agent`, `bad-input`, `busy`, …).

    `watch_interval` (seconds): a thread looks at the component file this
    often and reloads it when its modification time, size or inode changes
    (`None`: only `reload()` does). Replace the file atomically (write
    beside it, then rename). `clock`: Unix seconds, for the `now` import.
    """

    def __init__(
        self,
        component: os.PathLike | str,
        db: os.PathLike | str,
        config: os.PathLike | str | Config,
        *,
        watch_interval: Optional[float] = 0.1,
        fuel_per_call: int = FUEL_PER_CALL,
        memory_bytes: int = MEMORY_BYTES,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = 5.0,
    ):
        self.component_path = Path(component).expanduser()
        self.config = config if isinstance(config, Config) else config_mod.load(Path(config).expanduser())
        self.settings = self.config.settings
        self.fuel_per_call = fuel_per_call
        self.memory_bytes = memory_bytes
        self._lock = threading.RLock()
        self._engine = engine()
        api = self.config.http_api
        http_api = HttpApi(api.api_url, api.credentials, api.timeout_seconds) if api else None
        self._store = HermesStore(Path(db).expanduser(), busy_timeout)
        self._host = HostState(self._store, http_api, self.settings.room, clock)
        self._linker = make_linker(self._engine, self._host)
        self._settings_record = settings_record(self.settings)
        self._live: Optional[Instance] = None
        self._last_fuel = 0
        self._stats = WatchStats()
        try:
            data = self._read_component()
            self._loaded = self._prepare(data, configure=False)
        except BaseException:
            self._store.close()
            raise
        self._host.policy = self._loaded.info.version
        self._stop = threading.Event()
        self._watcher: Optional[threading.Thread] = None
        if watch_interval is not None:
            self._watcher = threading.Thread(
                target=self._watch, args=(watch_interval,), name="session-switch-watch", daemon=True
            )
            self._watcher.start()

    @classmethod
    def from_hermes_home(cls, component: os.PathLike | str, **options: Any) -> "SessionSwitch":
        """`$HERMES_HOME/state.db` and `$HERMES_HOME/session-switch.toml`
        (`HERMES_HOME` defaulting to `~/.hermes`)."""
        home = config_mod.hermes_home()
        return cls(component, home / "state.db", home / "session-switch.toml", **options)

    def close(self) -> None:
        """Stop the watcher and close the database connection."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join()
        with self._lock:
            self._live = None
            self._store.close()

    def __enter__(self) -> "SessionSwitch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- what is loaded ----------------------------------------------------

    @property
    def info(self) -> LoadInfo:
        """The component serving now (after any swap)."""
        return self._loaded.info

    @property
    def version(self) -> str:
        """The serving component's `version`, e.g. `session-switch-policy 0.1.0`."""
        return self._loaded.info.version

    @property
    def watch_stats(self) -> WatchStats:
        with self._lock:
            return WatchStats(**self._stats.__dict__)

    @property
    def last_call_fuel(self) -> int:
        """Fuel units the last call burned (of `fuel_per_call`)."""
        return self._last_fuel

    # -- the policy's exports ---------------------------------------------

    def resolve(self, agent: str, session_id: str, *, fallback: bool = True) -> Decision:
        """The session `agent`'s bot should load when it is about to load
        `session_id` (DESIGN §3 "Redirect"), and why: the seed's redirect
        snippet is `session_id = switch.resolve(agent, session_id).session_id`.

        The answer is checked (`check_decision`, and a redirect against the
        agent's record, `check_redirect`). On any failure, with
        `fallback` (the default) the safe default comes back: no redirect,
        reason `policy-error`, the failure in `detail` and in the log;
        without it the failure is raised (`PolicyError` when the policy
        broke)."""
        _strings(agent=agent, session_id=session_id)
        try:
            with self._lock:
                answer, _ = self._run("resolve", (agent, session_id))
                decision = _decision(self._ok(answer))
                why = check_decision(decision, session_id) or self._check_redirect(agent, decision)
                if why is not None:
                    raise self._policy_failure("resolve", why)
                return decision
        except SwitchError as e:
            if not fallback:
                raise
            _log_fallback("resolve", e)
            return fallback_decision(session_id, e)

    def context(
        self, agent: str, session_id: str, limit: Optional[int] = None, *, fallback: bool = True
    ) -> Context:
        """The history `agent`'s bot should get when it loads `session_id`:
        `resolve`, the chosen session's rows (the last `limit` when given)
        read from `state.db`, and the policy's `[YOU] ` edits applied here to
        the full rows.

        Checked like `resolve`, plus: the policy read the history of the
        session it decided on, for `agent` and `limit`, and its edits index
        those rows, each at most once. On a failure, with `fallback` (the
        default): no redirect (reason `policy-error`) and the history of
        `session_id` as stored, with no edits; only an error of that read
        is raised then."""
        _strings(agent=agent, session_id=session_id)
        if limit is not None and not (isinstance(limit, int) and 0 <= limit <= 0xFFFF_FFFF):
            raise bad_input(f"limit must be a row count from 0 to 4294967295, not {limit!r}")
        try:
            with self._lock:
                answer, host = self._run("context", (agent, session_id, limit))
                result = self._ok(answer)
                decision = _decision(field_of(result, "decision"))
                why = check_decision(decision, session_id) or self._check_redirect(agent, decision)
                if why is None:
                    asked = HistoryQuery(decision.session_id, agent, limit)
                    read = host.history_query
                    if read is None:
                        why = "it answered without reading the history"
                    elif read != asked:
                        why = (
                            f"it read the history of '{read.session_id}' for '{read.agent}' (limit "
                            f"{_limit(read.limit)}) but decided on '{asked.session_id}' for '{agent}' "
                            f"(limit {_limit(limit)})"
                        )
                if why is None:
                    rows = host.rows
                    contents = [r.content for r in rows]
                    pairs = [(field_of(e, "index"), field_of(e, "action")) for e in field_of(result, "edits")]
                    why = edits.apply_edits(contents, pairs)
                if why is not None:
                    raise self._policy_failure("context", why)
                messages = []
                for row, content in zip(rows, contents, strict=True):
                    row.content = content
                    messages.append(row.message())
                return Context(decision, messages)
        except SwitchError as e:
            if not fallback:
                raise
            decision = fallback_decision(session_id, e)
            _log_fallback("context", e)
            with self._lock:
                rows = self._store.history(session_id, agent, limit)
            return Context(decision, [r.message() for r in rows])

    def tag(self, agent: str, rows: List[HistoryRow]) -> List[HistoryRow]:
        """`rows` with `agent`'s own rows tagged `[YOU] ` and imitations of
        the tag removed (DESIGN §3 "Tagging"): the policy sees summaries
        (`TAG_PREFIX_CHARS` characters) and answers edits, applied here to
        copies of the rows. Raises `PolicyError` for edits out of range or
        twice on a row."""
        from .imports import summaries

        with self._lock:
            answer, _ = self._run("tag", (agent, summaries(rows, TAG_PREFIX_CHARS)))
            pairs = [(field_of(e, "index"), field_of(e, "action")) for e in self._ok(answer)]
            contents = [r.content for r in rows]
            why = edits.apply_edits(contents, pairs)
            if why is not None:
                raise self._policy_failure("tag", why)
            return [HistoryRow(**{**r.__dict__, "content": c}) for r, c in zip(rows, contents, strict=True)]

    def send(self, agent: str, cli_session_id: str, text: str) -> Receipt:
        """Post `text` to the room as `agent` from CLI session
        `cli_session_id` (DESIGN §3 "Send"): the policy normalises the body
        and plans; the host checks the sender with ejabberd
        (`get_subscribers`), then in one `BEGIN IMMEDIATE` transaction writes
        the history row, its provenance and the record, posts, and commits
        only if the room accepted. Raises `SwitchError` with the kinds of
        DESIGN §8 (`bad-input`, `unknown-agent`, `not-accepted`, `busy`,
        `unknown-outcome`, `store`, `transport`); `PolicyError` when the
        policy broke (the message says if the send had already happened)."""
        _strings(agent=agent, cli_session_id=cli_session_id, text=text)
        with self._lock:
            answer, host = self._run("send", (agent, cli_session_id, text), send_args=(agent, cli_session_id))
            receipt = self._ok(answer)
            sent = host.sent
            if sent is None:
                raise self._policy_failure("send", "it reported a send that the host never performed")
            if field_of(sent, "message-id") != field_of(receipt, "message-id") or field_of(
                sent, "room"
            ) != field_of(receipt, "room"):
                raise self._policy_failure(
                    "send",
                    f"it reported message {field_of(receipt, 'message-id')} in room {field_of(receipt, 'room')} "
                    f"but the host sent message {field_of(sent, 'message-id')} to {field_of(sent, 'room')}",
                )
            return Receipt(
                message_id=field_of(receipt, "message-id"),
                room=field_of(receipt, "room"),
                body=field_of(receipt, "body"),
                record_key=field_of(receipt, "record-key"),
                record_replaced=field_of(receipt, "record-replaced"),
            )

    def active(self, agent: Optional[str] = None) -> List[RecordStatus]:
        """The record of each agent (or of `agent` only) that has one."""
        with self._lock:
            answer, _ = self._run("active", (agent,))
            return [
                RecordStatus(**{k.replace("-", "_"): v for k, v in s.__dict__.items()})
                for s in self._ok(answer)
            ]

    def clear(self, agent: Optional[str] = None) -> List[str]:
        """Delete the record of each agent (or of `agent` only), and the
        seed's key for the legacy agent; the keys deleted. Only our keys may
        be deleted, and every key reported must have been deleted."""
        with self._lock:
            answer, host = self._run("clear", (agent,))
            keys = list(self._ok(answer))
            missing = [k for k in keys if k not in host.deleted]
            if missing:
                raise self._policy_failure(
                    "clear", f"it reported key '{missing[0]}' as deleted, but did not delete it"
                )
            return keys

    def is_own_message(self, agent: str, sender: str, *, fallback: bool = True) -> bool:
        """Whether a room message from `sender` (occupant JID `room/nick`,
        full or bare JID, or nick) is the room's reflection of `agent`'s own
        message. With `fallback`, `False` on a failure (logged): the bot may
        then answer its own echo once, rather than drop someone else's."""
        _strings(agent=agent, sender=sender)
        try:
            with self._lock:
                answer, _ = self._run("is-own-message", (agent, sender))
                return bool(self._ok(answer))
        except SwitchError as e:
            if not fallback:
                raise
            _log_fallback("is-own-message", e)
            return False

    # -- hot swap ---------------------------------------------------------

    def reload(self) -> Optional[SwapReport]:
        """Load the component file again and swap it in if it passes every
        check (a valid component, our imports only, our export, type-check
        at instantiation, `self-check`, `configure` with this switch's
        settings). Unchanged bytes (same SHA-256): `None`. Any failure raises
        (`bad-input` unreadable file, `PolicyError` otherwise) and the old
        component keeps serving."""
        started = time.perf_counter()
        data = self._read_component()
        if hashlib.sha256(data).hexdigest() == self._loaded.info.sha256:
            return None
        loaded = self._prepare(data, configure=True)
        prepared = time.perf_counter()
        with self._lock:
            self._loaded = loaded
            self._live = None
            self._host.policy = loaded.info.version
        report = SwapReport(loaded.info, prepared - started, time.perf_counter() - prepared)
        log.info(
            "policy swapped: %s from %s (prepare %.1f ms)",
            loaded.info.version,
            self.component_path,
            report.prepare_seconds * 1e3,
        )
        return report

    def _watch(self, interval: float) -> None:
        # Nothing seen yet: the first look reloads, which is a no-op for the
        # bytes being served and catches a change made before the thread ran.
        seen = None
        while not self._stop.wait(interval):
            now = _stamp(self.component_path)
            if now is None or now == seen:
                continue  # unchanged, or gone for a moment (mid-rename)
            seen = now
            try:
                report = self.reload()
            except SwitchError as e:
                log.warning(
                    "policy file %s rejected, %s keeps serving: %s",
                    self.component_path,
                    self.version,
                    e.message,
                )
                with self._lock:
                    self._stats.rejections += 1
                    self._stats.last_rejection = e.message
                continue
            if report is not None:
                with self._lock:
                    self._stats.swaps += 1
                    self._stats.last_swap = report

    def _read_component(self) -> bytes:
        try:
            return self.component_path.read_bytes()
        except OSError as e:
            raise bad_input(
                f"cannot read policy component {self.component_path}: {e}; check the path"
            ) from None

    def _prepare(self, data: bytes, configure: bool) -> Loaded:
        """Compile and check `data`, then probe it in a store of its own with
        no `state.db` behind it: `version`, `self-check`, and (for a swap)
        `configure` with the current settings."""
        source = f"policy component {self.component_path}"
        loaded = compile_component(self._engine, data, source)
        started = time.perf_counter()
        probe_host = HostState(None, None, self.settings.room)
        try:
            instance = Instance(
                self._engine,
                make_linker(self._engine, probe_host),
                loaded,
                self.fuel_per_call,
                self.memory_bytes,
            )
        except WasmtimeError as e:
            raise PolicyError(
                f"refusing {source}: it does not match the host's WIT contract ({trap_line(e)}); "
                "build it with `make component` (wasm32-unknown-unknown, our WIT only)"
            ) from None

        def probe(call: str, *args: Any) -> Any:
            probe_host.begin(call)
            try:
                return instance.call(call, *args)
            except WasmtimeError as e:
                said = f"; it said: {' | '.join(probe_host.said)}" if probe_host.said else ""
                raise PolicyError(
                    f"refusing {source}: it trapped in `{call}` ({trap_line(e)}){said}"
                ) from None

        version = probe("version")
        probe_host.policy = version
        check = probe("self-check")
        if isinstance(check, Variant) and check.tag == "err":
            raise PolicyError(
                f"refusing {source}: policy `{version}` failed in `self-check`: self-check failed: {check.payload}"
            )
        if configure:
            refused = probe("configure", self._settings_record)
            if refused is not None:
                raise PolicyError(
                    f"refusing {source}: it does not accept the current settings: {failure_of(refused).message}"
                )
        loaded.info.version = version
        loaded.info.check_seconds = time.perf_counter() - started
        return loaded

    # -- calls ------------------------------------------------------------

    def _ensure_live(self) -> Instance:
        """The live, configured instance; made (and configured) if none."""
        if self._live is not None:
            return self._live
        host = self._host
        host.begin("configure")
        try:
            instance = Instance(
                self._engine, self._linker, self._loaded, self.fuel_per_call, self.memory_bytes
            )
        except WasmtimeError as e:
            raise self._policy_failure("configure", f"cannot instantiate it: {trap_line(e)}") from None
        try:
            refused = instance.call("configure", self._settings_record)
        except WasmtimeError as e:
            raise self._policy_failure("configure", self._describe_trap(e)) from None
        if refused is not None:
            # The policy's own refusal of the settings keeps its kind.
            raise failure_of(refused)
        self._live = instance
        return instance

    def _run(self, call: str, args: tuple, send_args: Optional[tuple] = None) -> Tuple[Any, HostState]:
        """Run export `call` on the live instance with fresh per-call state
        and a full fuel budget. A trap throws the instance away and becomes a
        `PolicyError`; so does a step outside the call's rights."""
        instance = self._ensure_live()
        host = self._host
        host.begin(call, send_args)
        try:
            answer = instance.call(call, *args)
        except WasmtimeError as e:
            self._last_fuel = instance.fuel_used()
            raise self._policy_failure(call, self._describe_trap(e)) from None
        except Exception as e:
            # A Python error raised inside the call (our glue or wasmtime-py
            # converting a value): the call failed like a trap, and the
            # gateway gets the same clear error and the same fallback.
            self._last_fuel = instance.fuel_used()
            raise self._policy_failure(
                call, f"the host failed while running it ({type(e).__name__}: {e})"
            ) from e
        except BaseException:
            self._live = None  # e.g. KeyboardInterrupt: never reuse the store
            raise
        self._last_fuel = instance.fuel_used()
        if host.violation is not None:
            what = f"it {host.violation}"
            if host.sent is not None:
                what += f"; the message was delivered and recorded (messages.id {field_of(host.sent, 'message-id')})"
            raise self._policy_failure(call, what)
        return answer, host

    def _check_redirect(self, agent: str, decision: Decision) -> Optional[str]:
        """`check_redirect` on this gateway's `state.db` and legacy agent.
        Python's store has no read snapshot: the records are read again
        right after the call (a send in between can only make the check
        refuse a redirect it would have honoured, or honour one that a
        record by then names)."""
        legacy = self.settings.legacy_agent == agent
        return check_redirect(self._store.meta_get, agent, legacy, decision)

    def _ok(self, answer: Any) -> Any:
        """The `ok` value of a `result<T, failure>` answer, or its failure
        raised (kind kept). wasmtime-py gives a `Variant` when both cases are
        records, else the bare value (a `failure` record for `err`)."""
        if isinstance(answer, Variant):
            if answer.tag == "ok":
                return answer.payload
            raise failure_of(answer.payload)
        if isinstance(answer, Record) and hasattr(answer, "kind") and hasattr(answer, "message"):
            raise failure_of(answer)
        return answer

    def _describe_trap(self, e: WasmtimeError) -> str:
        line = trap_line(e)
        if "all fuel consumed" in line:
            what = f"it ran out of fuel ({self.fuel_per_call} units per call): it loops or works far too long"
        elif "unreachable" in line and not self._host.said:
            # A panic logs its message first (the guest's panic hook); an
            # allocation the memory cap refused aborts without a word.
            what = (
                f"{line} with no panic message: most likely it went past its memory cap of "
                f"{self.memory_bytes >> 20} MiB"
            )
        else:
            what = line
        host = self._host
        if host.said:
            what += "; it said: " + " | ".join(host.said)
        if host.sent is not None:
            what += (
                "; NOTE: the room had already accepted the message and it was recorded "
                f"(messages.id {field_of(host.sent, 'message-id')}) before the policy failed"
            )
        return what

    def _policy_failure(self, call: str, what: str) -> PolicyError:
        """A failure of the policy itself: logged, instance thrown away."""
        message = f"policy `{self.version}` failed in `{call}`: {what}. Fix or replace the policy component"
        log.error("%s", message)
        self._live = None
        return PolicyError(message)


def _limit(limit: Optional[int]) -> str:
    return "None" if limit is None else f"Some({limit})"


def _strings(**values: Any) -> None:
    for name, value in values.items():
        if not isinstance(value, str):
            raise bad_input(f"{name} must be a string, not {type(value).__name__}")


def _log_fallback(call: str, e: SwitchError) -> None:
    log.warning("%s: falling back to the safe default (%s): %s", call, e.kind, e.message)
