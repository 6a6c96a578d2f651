"""Hermes's `state.db` over Python's `sqlite3`: the reads behind the
policy's host imports and the store half of the atomic send (DESIGN §4,
§8). The twin of the Rust host's host/bridge/src/store/ (same SQL, same rules):

- the connection never changes `journal_mode` or Hermes's schema, and
  creates our two tables only inside its first write transaction, so a read
  leaves the file untouched;
- reads run in autocommit mode (one implicit read transaction per
  statement); writes run inside `BEGIN IMMEDIATE` with a busy timeout;
- only our `state_meta` keys (`session_switch:` …, and the seed's
  `active_xmpp_sender_session` for deletion) are ever changed;
- a database with Hermes's CJK search triggers gets its tokenizer
  extension loaded before a write, or the write is refused.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import sqlite3
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Tuple, TypeVar

from .failure import SwitchError, bad_input, store as store_failure

#: Busy timeout of the connection, seconds: Hermes's readers use 5 s.
BUSY_TIMEOUT = 5.0
#: Attempts of `BEGIN IMMEDIATE` / `COMMIT` that still see SQLITE_BUSY
#: after the busy timeout, with a random pause of `RETRY_JITTER_MS` between
#: them (Hermes 0.19.0's write retry range).
WRITE_ATTEMPTS = 3
RETRY_JITTER_MS = (20, 150)
#: Prefix of every `state_meta` key session-switch owns (DESIGN §8).
OUR_KEY_PREFIX = "session_switch:"
#: The seed's fixed record key: read for the legacy agent, never written,
#: deleted by `clear`.
LEGACY_KEY = "active_xmpp_sender_session"
#: Where Hermes looks for its CJK tokenizer extension.
CJK_EXTENSION_ENV = "HERMES_FTS5_CJK_SO"

# Our two tables, exactly as the Rust host creates them (DESIGN §8): the
# `state_meta` DDL is Hermes's; `session_switch_sent` has no foreign key to
# `messages` (with foreign keys ON it would make Hermes's deletes fail).
_CREATE_OUR_TABLES = (
    "CREATE TABLE IF NOT EXISTS state_meta (key TEXT PRIMARY KEY, value TEXT)",
    "CREATE TABLE IF NOT EXISTS session_switch_sent (message_id INTEGER PRIMARY KEY, "
    "agent TEXT NOT NULL, cli_session_id TEXT NOT NULL, sent_at REAL NOT NULL)",
)

# Replaces the stored record unless it is valid JSON whose numeric
# `timestamp` is newer than the new one's (DESIGN §8: a later send wins by
# timestamp, not by arrival; equal timestamps replace). Nested CASE because
# SQLite does not promise to short-circuit AND, and json_type of invalid
# JSON is an error.
_UPSERT_RECORD = """
    INSERT INTO state_meta (key, value) VALUES (?1, ?2)
    ON CONFLICT(key) DO UPDATE SET value = excluded.value
    WHERE CASE WHEN json_valid(state_meta.value) THEN
              CASE WHEN json_type(state_meta.value, '$.timestamp') IN ('integer', 'real')
                   THEN json_extract(state_meta.value, '$.timestamp')
                        <= json_extract(excluded.value, '$.timestamp')
                   ELSE 1 END
          ELSE 1 END"""


#: The text columns of a history row, in the order `history` selects them.
_TEXT_COLUMNS = ("role", "content", "tool_calls", "tool_call_id", "tool_name")


# Hermes's cleaning of user and assistant text on load (0.19.0 and v31
# `agent/memory_manager.py` `sanitize_context`, applied with `.strip()` by
# `SessionDB._rows_to_conversation`), copied so this host's text equals the
# Rust host's. The rest of Hermes's loader (decoded lists, its extra keys,
# dropped rows) is the Rust host's alone (`host/bridge/src/store/loader.rs`).
_FENCE_TAG_RE = re.compile(r"</?\s*memory-context\s*>", re.IGNORECASE)
_INTERNAL_CONTEXT_RE = re.compile(
    r"<\s*memory-context\s*>[\s\S]*?</\s*memory-context\s*>", re.IGNORECASE
)
_INTERNAL_NOTE_RE = re.compile(
    r"\[System note:\s*The following is recalled memory context,\s*NOT new user input\.\s*"
    r"Treat as (?:informational background data|authoritative reference data[^\]]*)\.\]\s*",
    re.IGNORECASE,
)


def _loaded_text(role: str, content: str) -> str:
    if role not in ("user", "assistant"):
        return content
    for pattern in (_INTERNAL_CONTEXT_RE, _INTERNAL_NOTE_RE, _FENCE_TAG_RE):
        content = pattern.sub("", content)
    return content.strip()


@dataclass
class HistoryRow:
    """One history row as Hermes's loader returns it for the model
    (`get_messages_as_conversation`)."""

    #: `messages.id`; history order.
    id: int
    #: `messages.role` as stored.
    role: str
    #: `messages.content`, NULL read as `""`.
    content: str
    #: `messages.tool_calls`: JSON text as stored, or `None`.
    tool_calls: Optional[str]
    #: `messages.tool_call_id`, or `None`.
    tool_call_id: Optional[str]
    #: `messages.tool_name`, or `None`.
    tool_name: Optional[str]
    #: Listed in `session_switch_sent` for the agent the history was read for.
    bridge_wrote: bool

    def message(self) -> dict:
        """The row as Hermes's loader gives it to the model (and as the CLI's
        `context --json` prints it): `role`, `content`, and `tool_calls`
        (parsed JSON, the text when it does not parse), `tool_call_id`,
        `tool_name` when set."""
        m = {"role": self.role, "content": self.content}
        if self.tool_calls is not None:
            try:
                m["tool_calls"] = json.loads(self.tool_calls)
            except ValueError:
                m["tool_calls"] = self.tool_calls
        if self.tool_call_id is not None:
            m["tool_call_id"] = self.tool_call_id
        if self.tool_name is not None:
            m["tool_name"] = self.tool_name
        return m


@dataclass(frozen=True)
class SendWrite:
    """What one send writes, all in one transaction (WIT `send-plan`)."""

    agent: str
    history_session_id: str
    #: `[YOU] ` + the body; role `user`.
    history_content: str
    cli_session_id: str
    #: `session_switch:active:<agent>`.
    record_key: str
    #: JSON `{"session_id", "timestamp", "source": "cli", "agent"}`.
    record_value: str
    #: Unix seconds: row timestamp, record timestamp, `sent_at`.
    timestamp: float


@dataclass(frozen=True)
class Written:
    """What a committed send wrote."""

    message_id: int
    #: False when a newer record was already stored and was kept.
    record_replaced: bool


T = TypeVar("T")


def cjk_extension_path() -> Path:
    """`$HERMES_FTS5_CJK_SO` when set, else `$HERMES_HOME/lib/libfts5_cjk.so`."""
    from .config import hermes_home

    so = os.environ.get(CJK_EXTENSION_ENV)
    return Path(so) if so else hermes_home() / "lib" / "libfts5_cjk.so"


def check_our_key(key: str, legacy_ok: bool) -> None:
    """Raise `bad-input` unless `key` is ours to change: `session_switch:` +
    at least one character, or the seed's key when `legacy_ok`."""
    if (len(key) > len(OUR_KEY_PREFIX) and key.startswith(OUR_KEY_PREFIX)) or (
        legacy_ok and key == LEGACY_KEY
    ):
        return
    allowed = f"keys starting with `{OUR_KEY_PREFIX}`"
    if legacy_ok:
        allowed += f" and the seed's `{LEGACY_KEY}`"
    raise bad_input(
        f"refusing to change state_meta key {key!r}: it is not session-switch's (only "
        f"{allowed}); Hermes's own keys are left alone"
    )


def _is_busy(e: sqlite3.Error) -> bool:
    return getattr(e, "sqlite_errorname", "") in ("SQLITE_BUSY", "SQLITE_LOCKED") or (
        "database is locked" in str(e)
    )


class HermesStore:
    """One `sqlite3` connection to a Hermes `state.db`, in autocommit mode
    (`isolation_level=None`: this class runs `BEGIN IMMEDIATE` / `COMMIT` /
    `ROLLBACK` itself), busy timeout `BUSY_TIMEOUT`, `foreign_keys = ON` as
    Hermes runs. Not for concurrent use from several threads: the caller
    serialises (`SessionSwitch` holds a lock around every call)."""

    def __init__(self, path: os.PathLike | str, busy_timeout: float = BUSY_TIMEOUT):
        """Open an existing Hermes database read-write without changing
        anything (no journal mode, no schema, no table).

        Errors (`SwitchError`, kind `store` unless said): `no Hermes
        database at PATH: …` when the file or its folder is missing (never
        created); a folder; not a SQLite file; a SQLite file without
        Hermes's `sessions` and `messages` tables; kind `busy` when the file
        stays locked past the busy timeout."""
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        _check_exists(self.path)
        uri = "file:" + urllib.parse.quote(os.fspath(self.path.absolute())) + "?mode=rw"
        try:
            self.conn = sqlite3.connect(
                uri, uri=True, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as e:
            raise self._fail("open the database", e) from None
        self._cjk_loaded = False
        self._seen_tables: set = set()
        try:
            self.conn.execute("PRAGMA foreign_keys = ON")
            found = self.conn.execute(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('sessions', 'messages')"
            ).fetchone()[0]
            if found != 2:
                raise store_failure(
                    f"{self.path} is a SQLite database but not Hermes's: it has no `sessions` "
                    "and `messages` tables; point at Hermes's state.db ($HERMES_HOME/state.db)"
                )
            # `messages.active` (Hermes ≥ schema v22): history keeps only
            # `active = 1` rows. Read once, at open, like the Rust store.
            self.has_active = bool(
                self.conn.execute(
                    "SELECT EXISTS(SELECT 1 FROM pragma_table_info('messages') WHERE name = 'active')"
                ).fetchone()[0]
            )
        except sqlite3.Error as e:
            self.conn.close()
            raise self._fail("read the schema", e) from None
        except SwitchError:
            self.conn.close()
            raise

    def close(self) -> None:
        self.conn.close()

    # -- reads -------------------------------------------------------------

    def _table_exists(self, name: str) -> bool:
        """Whether table `name` exists. A table once seen is remembered:
        neither Hermes nor we ever drop `state_meta` or `session_switch_sent`,
        while a missing one may be created at any time (by a send, or by
        Hermes's migration), so absence is asked every time."""
        if name in self._seen_tables:
            return True
        try:
            found = bool(
                self.conn.execute(
                    "SELECT EXISTS(SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
                    (name,),
                ).fetchone()[0]
            )
        except sqlite3.Error as e:
            raise self._fail("read the schema", e) from None
        if found:
            self._seen_tables.add(name)
        return found

    def meta_get(self, key: str) -> Optional[str]:
        """The value of `state_meta` key `key`; `None` when the key, the whole
        table (early Hermes), or the value is absent. SQL (autocommit):
        `SELECT CAST(CAST(value AS TEXT) AS BLOB) FROM state_meta WHERE key = ?1`,
        decoded with bytes that are not UTF-8 replaced by U+FFFD (as the Rust
        host does): a garbage record is a malformed one, not a read error."""
        if not self._table_exists("state_meta"):
            return None
        try:
            row = self.conn.execute(
                "SELECT CAST(CAST(value AS TEXT) AS BLOB) FROM state_meta WHERE key = ?1", (key,)
            ).fetchone()
        except sqlite3.Error as e:
            raise self._fail(f"read state_meta key {key!r}", e) from None
        if row is None or row[0] is None:
            return None
        return bytes(row[0]).decode("utf-8", "replace")

    def session_exists(self, session_id: str) -> bool:
        """Whether `sessions` has a row with this id."""
        try:
            return bool(
                self.conn.execute(
                    "SELECT EXISTS(SELECT 1 FROM sessions WHERE id = ?1)", (session_id,)
                ).fetchone()[0]
            )
        except sqlite3.Error as e:
            raise self._fail(f"look up session {session_id!r}", e) from None

    def history(self, session_id: str, agent: str, limit: Optional[int]) -> List[HistoryRow]:
        """The history of `session_id` as Hermes's current loader gives it to
        the model: ORDER BY `messages.id`, `active = 1` rows only where that
        column exists, the last `limit` rows when given (still in id order),
        NULL content as `""`. `bridge_wrote` is about `agent`. An unknown
        session reads as empty. One autocommit read."""
        doing = f"read the history of session {session_id!r}"
        if self._table_exists("session_switch_sent"):
            bridge = "EXISTS(SELECT 1 FROM session_switch_sent s WHERE s.message_id = m.id AND s.agent = ?3)"
        else:
            bridge = "0"
        active = " AND m.active = 1" if self.has_active else ""
        sql = (
            f"SELECT m.id, m.role, m.content, m.tool_calls, m.tool_call_id, m.tool_name, {bridge} "
            f"FROM messages m WHERE m.session_id = ?1{active} ORDER BY m.id DESC LIMIT ?2"
        )
        # SQLite reads a negative LIMIT as "no limit".
        params = (session_id, -1 if limit is None else limit, agent)
        if bridge == "0":
            params = params[:2]
        try:
            rows = self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise self._fail(doing, e) from None
        rows.reverse()
        for r in rows:
            # rusqlite refuses a non-text value where the Rust store reads a
            # string; so does this store (Hermes writes only text there).
            for column, value in zip(_TEXT_COLUMNS, r[1:6], strict=True):
                if value is not None and not isinstance(value, str):
                    raise store_failure(
                        f"could not {doing} in {self.path}: messages.{column} of row {r[0]} holds "
                        f"{type(value).__name__} ({value!r:.40}), not text"
                    )
        return [
            HistoryRow(
                id=r[0],
                role=r[1],
                # Early Hermes (schema 1, no `active` column) did not clean.
                content="" if r[2] is None else (_loaded_text(r[1], r[2]) if self.has_active else r[2]),
                tool_calls=r[3],
                tool_call_id=r[4],
                tool_name=r[5],
                bridge_wrote=bool(r[6]),
            )
            for r in rows
        ]

    # -- writes ------------------------------------------------------------

    def meta_delete(self, key: str) -> bool:
        """Delete `state_meta` key `key` (ours only, else `bad-input` before
        the file is touched); `True` when a row was removed. SQL: `BEGIN
        IMMEDIATE` (retried), `DELETE …`, `COMMIT`. A missing table: `False`,
        nothing runs."""
        check_our_key(key, legacy_ok=True)
        if not self._table_exists("state_meta"):
            return False
        doing = f"delete state_meta key {key!r}"
        self._begin_immediate(doing)
        try:
            removed = self.conn.execute("DELETE FROM state_meta WHERE key = ?1", (key,)).rowcount
        except sqlite3.Error as e:
            self._rollback()
            raise self._fail(doing, e) from None
        self._commit(doing)
        return removed > 0

    def send_write(self, w: SendWrite, post: Callable[[], T]) -> Tuple[Written, T]:
        """Write one send atomically around `post` (the room post), in this
        order, in one transaction (DESIGN §8 "Send"):

        1. `BEGIN IMMEDIATE` (busy timeout, then `WRITE_ATTEMPTS` tries with
           a random pause; still busy: kind `busy`, nothing written, `post`
           not called);
        2. the CJK tokenizer check (load the extension, or refuse);
        3. `CREATE TABLE IF NOT EXISTS` `state_meta`, `session_switch_sent`;
        4. the history session's row if missing (source `xmpp`);
        5. the history row (role `user`, a plain INSERT: Hermes's triggers
           keep its FTS indexes);
        6. `sessions.message_count + 1`, as Hermes's `append_message`;
        7. the provenance row;
        8. the record upsert (a stored newer record is kept);
        9. `post()`: its success commits, its `SwitchError` rolls back and
           is raised unchanged.

        Errors: `bad-input` before anything is touched (empty ids or content,
        a NUL in the content, a key not ours, a record value that is not a
        JSON object with a numeric `timestamp`, a timestamp that is not a
        positive finite number); `busy`; `store` for SQL errors (rolled back)
        and for a `COMMIT` that fails after `post` succeeded (the message
        then says the room has the message)."""
        _validate(w)
        doing = f"record the send in session {w.history_session_id!r}"
        self._begin_immediate(doing)
        try:
            written = self._write_send(w)
            value = post()
        except BaseException as e:
            # Anything (a failure of ours, a SQL error, a KeyboardInterrupt
            # in `post`) rolls back before it goes on.
            rollback_error = self._rollback()
            if isinstance(e, SwitchError) and rollback_error:
                raise SwitchError(
                    e.kind, f"{e.message}; rolling back {self.path} failed too: {rollback_error}"
                ) from None
            raise
        try:
            self._commit(doing)
        except SwitchError as e:
            raise store_failure(
                f"the message was posted to the room, but state.db could not record it "
                f"({e.message}); the room has the message, the history row and the record "
                "were not written"
            ) from None
        return written, value

    def _write_send(self, w: SendWrite) -> Written:
        def step(doing: str, sql: str, params: tuple = ()) -> sqlite3.Cursor:
            try:
                return self.conn.execute(sql, params)
            except sqlite3.Error as e:
                raise self._fail(doing, e) from None

        self._ensure_cjk_tokenizer()
        for ddl in _CREATE_OUR_TABLES:
            step("create session-switch's tables", ddl)
        step(
            "create the XMPP session's row",
            "INSERT INTO sessions (id, source, started_at) VALUES (?1, 'xmpp', ?2) "
            "ON CONFLICT(id) DO NOTHING",
            (w.history_session_id, w.timestamp),
        )
        message_id = step(
            "insert the history row",
            "INSERT INTO messages (session_id, role, content, timestamp) "
            "VALUES (?1, 'user', ?2, ?3) RETURNING id",
            (w.history_session_id, w.history_content, w.timestamp),
        ).fetchone()[0]
        step(
            "bump sessions.message_count",
            "UPDATE sessions SET message_count = COALESCE(message_count, 0) + 1 WHERE id = ?1",
            (w.history_session_id,),
        )
        step(
            "insert the provenance row",
            "INSERT INTO session_switch_sent (message_id, agent, cli_session_id, sent_at) "
            "VALUES (?1, ?2, ?3, ?4) ON CONFLICT(message_id) DO UPDATE SET "
            "agent = excluded.agent, cli_session_id = excluded.cli_session_id, "
            "sent_at = excluded.sent_at",
            (message_id, w.agent, w.cli_session_id, w.timestamp),
        )
        changed = step(
            f"write the record {w.record_key!r}", _UPSERT_RECORD, (w.record_key, w.record_value)
        ).rowcount
        return Written(message_id=message_id, record_replaced=changed > 0)

    def _ensure_cjk_tokenizer(self) -> None:
        """Inside the write transaction, before the first INSERT into
        `messages`: a database with Hermes's `messages_fts_cjk*` triggers
        needs the `cjk_unicode61` tokenizer on this connection (every INSERT
        fails without it), so load Hermes's extension or refuse (kind
        `store`). The triggers are Hermes's: never dropped."""
        if self._cjk_loaded:
            return
        try:
            has_triggers = self.conn.execute(
                "SELECT EXISTS(SELECT 1 FROM sqlite_master WHERE type = 'trigger' "
                "AND name GLOB 'messages_fts_cjk*')"
            ).fetchone()[0]
        except sqlite3.Error as e:
            raise self._fail("read the schema", e) from None
        if not has_triggers:
            return
        so = cjk_extension_path()
        why = (
            f"{self.path} has Hermes's CJK search triggers (messages_fts_cjk*), whose tokenizer "
            f"cjk_unicode61 lives in the extension {so}"
        )
        fix = (
            f"install Hermes's libfts5_cjk.so there or set {CJK_EXTENSION_ENV} to its path; "
            "nothing was written"
        )
        if not so.is_file():
            raise store_failure(f"refusing to write: {why}, and that file does not exist; {fix}")
        if not hasattr(self.conn, "enable_load_extension"):
            raise store_failure(
                f"refusing to write: {why}, and this Python's sqlite3 cannot load extensions "
                "(built without --enable-loadable-sqlite-extensions); use a Python that can, "
                "or the Rust CLI; nothing was written"
            )
        try:
            self.conn.enable_load_extension(True)
            try:
                self.conn.load_extension(os.fspath(so))
            finally:
                self.conn.enable_load_extension(False)
        except sqlite3.Error as e:
            raise store_failure(f"refusing to write: {why}, and it failed to load ({e}); {fix}") from None
        self._cjk_loaded = True

    def _begin_immediate(self, doing: str) -> None:
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.Error as e:
                if _is_busy(e) and attempt < WRITE_ATTEMPTS:
                    time.sleep(random.uniform(*RETRY_JITTER_MS) / 1000)
                    continue
                raise self._fail(doing, e) from None

    def _commit(self, doing: str) -> None:
        """COMMIT; a busy COMMIT (DELETE mode: readers still hold shared
        locks) leaves the transaction open, so it is tried again like BEGIN.
        A final failure rolls back."""
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                self.conn.execute("COMMIT")
                return
            except sqlite3.Error as e:
                if _is_busy(e) and attempt < WRITE_ATTEMPTS:
                    time.sleep(random.uniform(*RETRY_JITTER_MS) / 1000)
                    continue
                failure = self._fail(doing, e)
                rollback_error = self._rollback()
                if rollback_error:
                    raise SwitchError(
                        failure.kind, f"{failure.message}; the rollback failed too: {rollback_error}"
                    ) from None
                raise failure from None

    def _rollback(self) -> Optional[str]:
        """ROLLBACK if a transaction is open; the error text if it fails."""
        if not self.conn.in_transaction:
            return None
        try:
            self.conn.execute("ROLLBACK")
            return None
        except sqlite3.Error as e:
            return str(e)

    def _fail(self, doing: str, e: sqlite3.Error) -> SwitchError:
        return sqlite_failure(self.path, self.busy_timeout, doing, e)


def sqlite_failure(path: Path, busy_timeout: float, doing: str, e: sqlite3.Error) -> SwitchError:
    """A SQLite error raised while `doing` as a `SwitchError` (the Rust
    store's mapping): SQLITE_BUSY/LOCKED → `busy`; everything else →
    `store`, with a hint for the cases a person can fix."""
    name = getattr(e, "sqlite_errorname", "") or ""
    if _is_busy(e):
        return SwitchError(
            "busy",
            f"could not {doing}: {path} stayed locked by another connection (e.g. a Hermes "
            f"gateway) for more than {busy_timeout:.1f} s; nothing was written, try again",
        )
    if name.startswith("SQLITE_READONLY"):
        return store_failure(
            f"could not {doing}: {path} is read-only for this process ({e}); run as the user "
            "that owns Hermes's database, and make the file and its folder writable"
        )
    if name == "SQLITE_NOTADB":
        return store_failure(
            f"could not {doing}: {path} is not a SQLite database ({e}); point at Hermes's state.db"
        )
    if name.startswith("SQLITE_CANTOPEN") or name.startswith("SQLITE_PERM"):
        return store_failure(
            f"could not {doing}: cannot open {path} ({e}); check that this user may read and "
            "write the file and its folder (a WAL-mode database needs its -wal and -shm files beside it)"
        )
    if name.startswith("SQLITE_CORRUPT"):
        return store_failure(
            f"could not {doing}: {path} is damaged ({e}); run `sqlite3 {path} 'PRAGMA "
            "integrity_check'` and restore it from a backup"
        )
    if name == "SQLITE_FULL":
        return store_failure(f"could not {doing} in {path}: the disk is full ({e}); free some space")
    if "no such tokenizer" in str(e):
        return store_failure(
            f"could not {doing} in {path}: {e}; the database's full-text triggers need a "
            f"tokenizer extension this connection has not loaded (set {CJK_EXTENSION_ENV})"
        )
    return store_failure(f"could not {doing} in {path}: {e}")


def _check_exists(path: Path) -> None:
    """A clear `no Hermes database at …` before SQLite's generic error."""
    hint = "set HERMES_HOME or pass the database path, or create one with `xmpp-session-bridge init-db`"
    try:
        if path.is_dir():
            raise store_failure(f"no Hermes database at {path}: that is a folder; {hint}")
        if path.exists():
            return
    except OSError as e:
        raise store_failure(
            f"no Hermes database at {path}: cannot read it ({e}); check the permissions of the "
            "file and its folders"
        ) from None
    folder = path.parent
    if folder.is_dir():
        problem = "no such file"
    elif folder.exists():
        problem = f"{folder} is not a folder"
    else:
        problem = f"the folder {folder} does not exist"
    raise store_failure(f"no Hermes database at {path}: {problem}; {hint}")


def _validate(w: SendWrite) -> None:
    for name, value in (
        ("agent", w.agent),
        ("history session id", w.history_session_id),
        ("CLI session id", w.cli_session_id),
        ("history content", w.history_content),
    ):
        if not value:
            raise bad_input(f"refusing to write a send with an empty {name}")
    if "\0" in w.history_content:
        raise bad_input(
            "refusing to write history content with a NUL character (Hermes reads content "
            "starting with NUL + `json:` as multimodal parts); normalise the body first"
        )
    check_our_key(w.record_key, legacy_ok=False)
    if not (math.isfinite(w.timestamp) and w.timestamp > 0):
        raise bad_input(f"refusing to write a send with timestamp {w.timestamp}: it must be Unix seconds > 0")
    try:
        record = json.loads(w.record_value)
    except ValueError:
        record = None
    ts = record.get("timestamp") if isinstance(record, dict) else None
    if not isinstance(ts, (int, float)) or isinstance(ts, bool):
        raise bad_input(
            f"refusing to write record {w.record_key!r}: its value is not a JSON object with a "
            f'numeric "timestamp" (DESIGN §8): {w.record_value}'
        )
