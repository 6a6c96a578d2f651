"""The value conversions session_switch adds to wasmtime-py: the direct
lowering of `list<row-summary>` gives exactly the values wasmtime-py's own
lowering gives, and an explicit `HostResult` reaches every case of a
`result`, including `meta-get`'s that wasmtime-py cannot (its `ok` case,
`option<string>`, matches any Python value)."""

import ctypes
import unittest

from . import support
import wasmtime
from wasmtime import _ffi as ffi

from session_switch import component as c
from session_switch.failure import SwitchError


class Conversions(unittest.TestCase):
    def setUp(self):
        engine = c.engine()
        loaded = c.compile_component(engine, support.component().read_bytes(), "test")
        # The types come from the component itself: `tag`'s second parameter
        # is `list<row-summary>`; the host interface's `meta-get` result is
        # `result<option<string>, failure>`.
        store = wasmtime.Store(engine)
        store.set_fuel(10**9)
        linker = c.make_linker(engine, _NoHost())
        inst = linker.instantiate(store, loaded.component)
        iface = inst.get_export_index(store, c.POLICY_INTERFACE)
        tag = inst.get_func(store, inst.get_export_index(store, "tag", iface))
        self.store = store
        self.list_type = tag.type(store).params[1][1]

    def roundtrip(self, value):
        raw = ffi.wasmtime_component_val_t()
        self.list_type.convert_to_c(self.store, value, ctypes.pointer(raw))
        return self.list_type.convert_from_c(raw)

    def test_row_summaries_lower_like_wasmtime_py(self):
        rows = [
            (1, "user", "mohe: 大家好", False),
            (-5, "assistant", "", True),
            (2**63 - 1, "other", "👍\u3000[YOU] x\x1c", False),
            (7, "tool", "a" * 300, True),
        ]
        fast = self.roundtrip(c.RowSummaries(rows))
        generic = self.roundtrip([c.record(id=i, role=r, prefix=p, bridge_wrote=b) for i, r, p, b in rows])
        as_tuples = [(x.id, x.role, x.prefix, getattr(x, "bridge-wrote")) for x in fast]
        self.assertEqual(as_tuples, rows)
        self.assertEqual(fast, generic)
        self.assertEqual(self.roundtrip(c.RowSummaries([])), [])

    def test_host_results_reach_both_cases(self):
        # Call the imports through a real instance: the guest's resolve asks
        # meta-get, and its failure must come back with its kind.
        host = _NoHost()
        engine = c.engine()
        loaded = c.compile_component(engine, support.component().read_bytes(), "test")
        inst = c.Instance(engine, c.make_linker(engine, host), loaded, 10**9, 64 << 20)
        from session_switch.config import Agent, Settings

        settings = Settings(room="r@conference.x", agents=[Agent("mohe", "mohe@x", "mohe", ["xmpp-mohe"])])
        self.assertIsNone(inst.call("configure", c.settings_record(settings)))
        for answer, expected in [
            (None, ("ok", "no-record")),
            (
                '{"session_id": "s1", "timestamp": 100.0, "source": "cli", "agent": "mohe"}',
                ("ok", "redirected"),
            ),
            (SwitchError("busy", "locked"), ("err", "busy")),
        ]:
            host.meta = answer
            got = inst.call("resolve", "mohe", "xmpp-mohe")
            self.assertEqual(got.tag, expected[0])
            self.assertEqual(getattr(got.payload, "reason" if got.tag == "ok" else "kind"), expected[1])


class _NoHost(c.Imports):
    meta = None

    def meta_get(self, key):
        if isinstance(self.meta, SwitchError):
            raise self.meta
        return self.meta

    def session_exists(self, session_id):
        return True

    def now(self):
        return 110.0

    def log(self, level, message):
        pass


if __name__ == "__main__":
    unittest.main()
