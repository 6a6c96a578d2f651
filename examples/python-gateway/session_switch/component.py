"""The policy component under wasmtime-py (`wasmtime.component`): the
engine, compiling and checking a component, the linker of our `host`
interface, and the conversions between Python values and the WIT values of
`wit/types.wit`.

wasmtime-py gives WIT values as plain Python: strings, ints, floats, bools,
`None`/value for `option`, `str` for `enum` cases, `Record` objects whose
attributes carry the raw kebab-case field names, and for a `result` either a
`Variant(tag, payload)` (when its two cases have Python types that could be
confused, e.g. two records) or the bare payload.
"""

from __future__ import annotations

import ctypes
import hashlib
import itertools
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import wasmtime
from wasmtime import Config as EngineConfig
from wasmtime import Engine, WasmtimeError
from wasmtime import _ffi as ffi
from wasmtime.component import (
    Component,
    FuncType,
    Linker,
    ListType,
    OptionType,
    Record,
    RecordType,
    ResultType,
)
from wasmtime.component._enter import catch_exceptions, enter_wasm

from .config import Settings
from .failure import PolicyError, SwitchError

#: The host interface the policy may import (WIT `host`).
HOST_INTERFACE = "agentsmeeting:session-switch/host@0.1.0"
#: The type-only interface the policy may import (WIT `types`).
TYPES_INTERFACE = "agentsmeeting:session-switch/types@0.1.0"
#: The interface the policy must export (WIT `policy`).
POLICY_INTERFACE = "agentsmeeting:session-switch/policy@0.1.0"
#: The functions of `POLICY_INTERFACE`.
EXPORTS = (
    "version",
    "self-check",
    "configure",
    "resolve",
    "tag",
    "context",
    "send",
    "active",
    "clear",
    "is-own-message",
)

#: One line on what to do about a refused component (the Rust host's words).
REBUILD = "build it with `make component` (wasm32-unknown-unknown, our WIT only)"


class HostResult:
    """An explicit `ok`/`err` answer of a host import returning a WIT
    `result`.

    wasmtime-py 48 lowers a `result` whose cases have distinct Python types
    from the bare payload, picking the first case whose types match. For
    `meta-get`'s `result<option<string>, failure>` the `ok` case matches any
    value (an `option`'s `none` counts as `object`), so a `failure` record
    could never become `err`: the call failed with "value not valid for this
    variant" (a trap in the guest). This marker names the case; the hook
    below lowers it directly with the same C API calls wasmtime-py uses.
    """

    __slots__ = ("tag", "payload")

    def __init__(self, tag: str, payload: Any = None):
        assert tag in ("ok", "err")
        self.tag = tag
        self.payload = payload


def _install_result_hook() -> None:
    original = ResultType.convert_to_c
    if getattr(original, "_session_switch", False):
        return

    def convert_to_c(self: ResultType, store: Any, val: Any, ptr: Any) -> None:
        if not isinstance(val, HostResult):
            return original(self, store, val, ptr)
        ty = self.ok if val.tag == "ok" else self.err
        raw = None
        if ty is not None:
            payload = ffi.wasmtime_component_val_t()
            ty.convert_to_c(store, val.payload, ctypes.pointer(payload))
            raw = ffi.wasmtime_component_val_new(ctypes.byref(payload))
        ptr.contents.kind = ffi.WASMTIME_COMPONENT_RESULT
        ptr.contents.of.result.is_ok = val.tag == "ok"
        ptr.contents.of.result.val = raw

    convert_to_c._session_switch = True  # type: ignore[attr-defined]
    ResultType.convert_to_c = convert_to_c  # type: ignore[method-assign]


class RowSummaries(list):
    """A WIT `list<row-summary>` as a list of `(id, role, prefix,
    bridge_wrote)` tuples, lowered by `_lower_row_summaries`.

    wasmtime-py lowers a list of records one value at a time, asking the C
    API for the record's field names and types again for every row and
    copying every string through a Python-side buffer: measured at ~100 µs a
    row (107 ms for a 1k-row history on the 2-core test machine), a hundred
    times the seed's whole Python loader. History is the one large value
    that crosses (DESIGN §7), so it gets a direct lowering: the same C
    values (`wasmtime_component_vallist_t` of `valrecord_t`), built with
    the field names encoded once."""

    __slots__ = ()


# Our own prototype of `wasm_byte_vec_new` taking the bytes as `c_char_p`
# (no per-string ctypes array); wasmtime-py's shared one is left alone.
_byte_vec_new = ffi.dll._FuncPtr(("wasm_byte_vec_new", ffi.dll))
_byte_vec_new.restype = None
_byte_vec_new.argtypes = [ctypes.POINTER(ffi.wasm_byte_vec_t), ctypes.c_size_t, ctypes.c_char_p]
_SUMMARY_FIELDS = (b"id", b"role", b"prefix", b"bridge-wrote")


def _lower_row_summaries(rows: RowSummaries, ptr: Any) -> None:
    """Write `rows` into `ptr` as a WIT `list<row-summary>` value (fields in
    the WIT order: `id` s64, `role` enum, `prefix` string, `bridge-wrote`
    bool). Every string is allocated by the C API straight into its place
    (ctypes views of the list's memory, no temporary structs); the C side
    owns and frees all of it with the value."""
    S64, ENUM, STRING, BOOL = (
        ffi.WASMTIME_COMPONENT_S64,
        ffi.WASMTIME_COMPONENT_ENUM,
        ffi.WASMTIME_COMPONENT_STRING,
        ffi.WASMTIME_COMPONENT_BOOL,
    )
    RECORD = ffi.WASMTIME_COMPONENT_RECORD
    id_name, role_name, prefix_name, bridge_name = _SUMMARY_FIELDS
    new, byref, record_new = _byte_vec_new, ctypes.byref, ffi.wasmtime_component_valrecord_new_uninit
    raw = ffi.wasmtime_component_vallist_t()
    ffi.wasmtime_component_vallist_new_uninit(raw, len(rows))
    data = raw.data
    for i, (row_id, role, prefix, bridge_wrote) in enumerate(rows):
        elem = data[i]
        elem.kind = RECORD
        rec = elem.of.record
        record_new(rec, 4)
        fields = rec.data
        f = fields[0]
        new(byref(f.name), len(id_name), id_name)
        v = f.val
        v.kind = S64
        v.of.s64 = row_id
        f = fields[1]
        new(byref(f.name), len(role_name), role_name)
        v = f.val
        v.kind = ENUM
        text = role.encode()
        new(byref(v.of.enumeration), len(text), text)
        f = fields[2]
        new(byref(f.name), len(prefix_name), prefix_name)
        v = f.val
        v.kind = STRING
        text = prefix.encode("utf-8")
        new(byref(v.of.string), len(text), text)
        f = fields[3]
        new(byref(f.name), len(bridge_name), bridge_name)
        v = f.val
        v.kind = BOOL
        v.of.boolean = bridge_wrote
    ptr.contents.kind = ffi.WASMTIME_COMPONENT_LIST
    ptr.contents.of.list = raw


def _install_list_hook() -> None:
    original = ListType.convert_to_c
    if getattr(original, "_session_switch", False):
        return

    def convert_to_c(self: ListType, store: Any, val: Any, ptr: Any) -> None:
        if isinstance(val, RowSummaries):
            return _lower_row_summaries(val, ptr)
        return original(self, store, val, ptr)

    convert_to_c._session_switch = True  # type: ignore[attr-defined]
    ListType.convert_to_c = convert_to_c  # type: ignore[method-assign]


def _memoise(cls: type, name: str) -> None:
    """Make property `name` of wasmtime-py type class `cls` remember its
    answer on the type object. wasmtime-py asks the C API again on every
    access (a record's fields for every value lifted, a result's `ok` type
    for every value lowered, …); a type object is immutable, so the first
    answer is the answer."""
    original = getattr(cls, name)
    if getattr(original.fget, "_session_switch", False):
        return
    slot = f"_session_switch_{name}"

    def get(self: Any) -> Any:
        memo = self.__dict__.get(slot, get)
        if memo is get:
            memo = original.fget(self)
            self.__dict__[slot] = memo
        return memo

    get._session_switch = True  # type: ignore[attr-defined]
    setattr(cls, name, property(get, doc=original.__doc__))


_install_result_hook()
_install_list_hook()
for _cls, _name in (
    (RecordType, "fields"),
    (ListType, "element"),
    (OptionType, "payload"),
    (ResultType, "ok"),
    (ResultType, "err"),
    (FuncType, "params"),
    (FuncType, "result"),
):
    _memoise(_cls, _name)


def record(**fields: Any) -> Record:
    """A WIT record from Python keywords (`ttl_seconds` → `ttl-seconds`)."""
    r = Record()
    for name, value in fields.items():
        setattr(r, name.replace("_", "-"), value)
    return r


def field_of(r: Record, name: str) -> Any:
    """Field `name` (kebab-case) of a WIT record."""
    return getattr(r, name)


def failure_record(error: SwitchError) -> Record:
    """A `SwitchError` as the WIT `failure` record."""
    return record(kind=error.kind, message=error.message)


def failure_of(r: Record) -> SwitchError:
    """A WIT `failure` record as a `SwitchError` (kind kept)."""
    return SwitchError.of(field_of(r, "kind"), field_of(r, "message"))


def settings_record(s: Settings) -> Record:
    """The WIT `settings` record of `s`."""
    return record(
        room=s.room,
        ttl_seconds=s.ttl_seconds,
        future_skew_seconds=s.future_skew_seconds,
        max_body_chars=s.max_body_chars,
        legacy_agent=s.legacy_agent,
        agents=[
            record(name=a.name, jid=a.jid, nick=a.nick, sessions=list(a.sessions), aliases=list(a.aliases))
            for a in s.agents
        ],
    )


_ENGINE: Optional[Engine] = None
_COMPILED: "OrderedDict[str, Component]" = OrderedDict()
#: Compiled components kept in memory, by SHA-256 of their bytes.
COMPILED_KEPT = 8
_CACHE_LOCK = threading.Lock()


def engine() -> Engine:
    """The process's engine (wasmtime's advice: one per process), with fuel
    metering on as the Rust host's: a call's work is bounded; time spent in
    host imports is not counted."""
    global _ENGINE
    with _CACHE_LOCK:
        if _ENGINE is None:
            config = EngineConfig()
            config.consume_fuel = True
            _ENGINE = Engine(config)
        return _ENGINE


def _compile(engine: Engine, data: bytes, sha256: str) -> Tuple[Component, bool]:
    """The compiled component for `data`, from the in-memory cache when the
    same bytes were compiled before in this process (`True`): compiling
    takes 0.1–0.4 s on the 2-core test machine, a gateway that opens
    several switches or swaps back to a version pays it once."""
    with _CACHE_LOCK:
        hit = _COMPILED.get(sha256)
        if hit is not None:
            _COMPILED.move_to_end(sha256)
            return hit, True
    component = Component(engine, data)
    with _CACHE_LOCK:
        _COMPILED[sha256] = component
        while len(_COMPILED) > COMPILED_KEPT:
            _COMPILED.popitem(last=False)
    return component, False


@dataclass
class LoadInfo:
    """What was loaded, and how."""

    #: Where the bytes came from (a path, for messages).
    source: str
    #: Hex SHA-256 of the component's bytes.
    sha256: str
    size: int
    #: What the component's `version` export answered.
    version: str = "unchecked component"
    imports: List[str] = field(default_factory=list)
    exports: List[str] = field(default_factory=list)
    #: Time to compile, and to check (interfaces, instantiate, version,
    #: self-check, configure), in seconds.
    compile_seconds: float = 0.0
    check_seconds: float = 0.0
    #: The compiled code came from this process's in-memory cache.
    cached: bool = False


@dataclass
class Loaded:
    """A compiled component whose interfaces were checked."""

    component: Component
    info: LoadInfo


def compile_component(engine: Engine, data: bytes, source: str) -> Loaded:
    """Compile `data` and check its interfaces: it may import only
    `HOST_INTERFACE` and `TYPES_INTERFACE` (no WASI, nothing else) and must
    export `POLICY_INTERFACE`. Raises `PolicyError` naming `source` and the
    reason (the Rust host's checks and words)."""
    info = LoadInfo(source=source, sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    started = time.perf_counter()
    try:
        component, info.cached = _compile(engine, data, info.sha256)
    except (WasmtimeError, ValueError, TypeError) as e:
        raise PolicyError(
            f"refusing {source}: it is not a valid WebAssembly component ({_one_line(str(e))}); {REBUILD}"
        ) from None
    info.compile_seconds = time.perf_counter() - started
    ty = component.type
    info.imports = list(ty.imports(engine))
    info.exports = list(ty.exports(engine))
    foreign = [name for name in info.imports if name not in (HOST_INTERFACE, TYPES_INTERFACE)]
    if foreign:
        more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
        raise PolicyError(
            f"refusing {source}: it imports `{foreign[0]}`{more}, but a policy may import only "
            f"`{HOST_INTERFACE}` and `{TYPES_INTERFACE}` (no WASI, no files, no network); {REBUILD}"
        )
    if POLICY_INTERFACE not in info.exports:
        found = ", ".join(f"`{n}`" for n in info.exports) or "nothing"
        raise PolicyError(
            f"refusing {source}: it does not export `{POLICY_INTERFACE}` (it exports {found}); "
            f"it is not a session-switch policy of this version; {REBUILD}"
        )
    return Loaded(component=component, info=info)


class Imports:
    """What a linker forwards the policy's imports to; `SessionSwitch`'s
    per-call host state implements it. Each method returns the import's
    value or raises `SwitchError` (passed to the policy as a WIT `failure`);
    none may raise anything else."""

    def meta_get(self, key: str) -> Optional[str]: ...
    def meta_delete(self, key: str) -> bool: ...
    def session_exists(self, session_id: str) -> bool: ...
    def history(
        self, session_id: str, agent: str, limit: Optional[int], prefix_chars: int
    ) -> List[Record]: ...
    def now(self) -> float: ...
    def send(self, plan: Record) -> Record: ...
    def log(self, level: str, message: str) -> None: ...


def make_linker(engine: Engine, host: Imports) -> Linker:
    """A linker with our `host` interface only (no WASI), bound to `host`.

    A Python exception escaping a host function would become a trap in the
    guest (and be kept in wasmtime-py's process-wide last-exception slot),
    so every import turns whatever it raises into a WIT `failure`."""

    def fallible(method: Callable[..., Any]) -> Callable[..., Any]:
        def call(_store: Any, *args: Any) -> HostResult:
            try:
                return HostResult("ok", method(*args))
            except SwitchError as e:
                return HostResult("err", failure_record(e))
            except Exception as e:  # a bug of the host: still a clear failure
                name = method.__name__.replace("_", "-")
                return HostResult(
                    "err",
                    record(kind="store", message=f"host import {name} failed: {type(e).__name__}: {e}"),
                )

        return call

    def now(_store: Any) -> float:
        try:
            return float(host.now())
        except Exception:
            return float("nan")  # the policy refuses a clock that is not finite

    def log(_store: Any, level: str, message: str) -> None:
        try:
            host.log(level, message)
        except Exception:
            pass

    linker = Linker(engine)
    with linker.root() as root:
        with root.add_instance(HOST_INTERFACE) as h:
            _add_func(h, "meta-get", fallible(host.meta_get))
            _add_func(h, "meta-delete", fallible(host.meta_delete))
            _add_func(h, "session-exists", fallible(host.session_exists))
            _add_func(h, "history", fallible(host.history))
            _add_func(h, "now", now)
            _add_func(h, "send", fallible(host.send))
            _add_func(h, "log", log)
    return linker


# Host functions by the id the C side hands back to `_trampoline`, each
# with its parameter and result types once known.
_IMPORTS: Dict[int, Tuple[Callable[..., Any], list]] = {}
_IMPORT_IDS = itertools.count(1)


@ffi.wasmtime_component_func_callback_t
def _trampoline(idx, context, ty_raw, args, nargs, results, nresults):  # type: ignore[no-untyped-def]
    """wasmtime-py's own trampoline (`_linker.func_impl`), except that an
    import's types are read from the C API once, not on every call (~25 µs
    saved per import call on the test machine). The types of an import are
    those of our WIT, the same for every call and every component."""
    func, types = _IMPORTS[idx or 0]

    def run(store: Any) -> None:
        if not types:
            fty = FuncType._from_ptr(ty_raw, owner=store)
            types.extend(([ty for _, ty in fty.params], fty.result))
        params, result_ty = types
        value = func(store, *[ty.convert_from_c(args[i]) for i, ty in enumerate(params)])
        if result_ty is not None:
            result_ty.convert_to_c(store, value, results)

    return catch_exceptions(context, run)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _finalize_import(idx):  # type: ignore[no-untyped-def]
    _IMPORTS.pop(idx or 0, None)


def _add_func(instance: Any, name: str, func: Callable[..., Any]) -> None:
    """`LinkerInstance.add_func` through `_trampoline`."""
    instance._assert_not_locked()
    idx = next(_IMPORT_IDS)
    _IMPORTS[idx] = (func, [])
    encoded = name.encode("utf-8")
    err = ffi.wasmtime_component_linker_instance_add_func(
        instance.ptr(), ctypes.create_string_buffer(encoded), len(encoded), _trampoline, idx, _finalize_import
    )
    if err:
        _IMPORTS.pop(idx, None)
        raise WasmtimeError._from_ptr(err)


class Instance:
    """One instance of a component in its own `wasmtime.Store`, with fuel
    and memory budgets. A store is never used again after a trap."""

    def __init__(self, engine: Engine, linker: Linker, loaded: Loaded, fuel: int, memory_bytes: int):
        self.store = wasmtime.Store(engine)
        self.store.set_limits(memory_size=memory_bytes)
        self.fuel = fuel
        self.store.set_fuel(fuel)
        self.instance = linker.instantiate(self.store, loaded.component)
        iface = self.instance.get_export_index(self.store, POLICY_INTERFACE)
        if iface is None:
            raise PolicyError(f"{loaded.info.source} has no instance export `{POLICY_INTERFACE}`")
        self.funcs: Dict[str, Any] = {}
        for name in EXPORTS:
            index = self.instance.get_export_index(self.store, name, iface)
            func = self.instance.get_func(self.store, index) if index is not None else None
            if func is None:
                raise PolicyError(
                    f"refusing {loaded.info.source}: `{POLICY_INTERFACE}` has no function `{name}`; {REBUILD}"
                )
            fty = func.type(self.store)
            self.funcs[name] = (func, [ty for _, ty in fty.params], fty.result)

    def call(self, name: str, *args: Any) -> Any:
        """Call export `name` with a full fuel budget. Raises
        `WasmtimeError` on a trap.

        wasmtime-py's `Func.__call__`, except that the function's types are
        read once per instance, not on every call."""
        func, params, result_ty = self.funcs[name]
        store = self.store
        store.set_fuel(self.fuel)
        if len(args) != len(params):
            raise TypeError(f"{name} takes {len(params)} arguments, not {len(args)}")
        raw = (ffi.wasmtime_component_val_t * len(args))()
        n = 0
        try:
            for ty, value in zip(params, args, strict=True):
                ty.convert_to_c(store, value, ctypes.pointer(raw[n]))
                n += 1
            result = ffi.wasmtime_component_val_t() if result_ty is not None else None
            enter_wasm(
                lambda: ffi.wasmtime_component_func_call(
                    ctypes.byref(func._func),
                    store._context(),
                    raw,
                    n,
                    ctypes.byref(result) if result is not None else None,
                    1 if result is not None else 0,
                )
            )
            return None if result_ty is None else result_ty.convert_from_c(result)
        finally:
            for i in range(n):
                ffi.wasmtime_component_val_delete(ctypes.byref(raw[i]))

    def fuel_used(self) -> int:
        return self.fuel - self.store.get_fuel()


def trap_line(error: BaseException) -> str:
    """The cause of a trap on one line: wasmtime's `wasm trap: …` line (the
    backtrace above it names only `<unknown>` functions of a stripped
    component), else the whole message on one line."""
    text = str(error)
    causes = [line.strip() for line in text.splitlines() if line.strip().startswith("wasm trap:")]
    return causes[-1] if causes else _one_line(text)


def _one_line(text: str) -> str:
    return " ".join(text.split())
