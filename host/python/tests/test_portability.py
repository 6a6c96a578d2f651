"""The policy component in another component-model host: wasmtime-py
(no session-switch code here) loads it, and its `version`, `self-check` and
`configure` answer. The proof that the policy stays portable."""

import unittest

import wasmtime
from wasmtime.component import Component, Linker, Record

from . import support

HOST = "agentsmeeting:session-switch/host@0.3.0"
POLICY = "agentsmeeting:session-switch/policy@0.3.0"


def record(**fields):
    r = Record()
    for name, value in fields.items():
        setattr(r, name.replace("_", "-"), value)
    return r


class Portability(unittest.TestCase):
    def test_version_self_check_configure_in_wasmtime_py(self):
        config = wasmtime.Config()
        config.consume_fuel = True
        engine = wasmtime.Engine(config)
        component = Component(engine, support.component().read_bytes())
        linker = Linker(engine)

        def never(*_args):
            raise AssertionError("no host import is needed here")

        with linker.root() as root:
            with root.add_instance(HOST) as host:
                for name in ("meta-get", "meta-delete", "meta-set", "session-exists", "history", "now", "send"):
                    host.add_func(name, never)
                host.add_func("log", lambda _store, _level, _message: None)
        store = wasmtime.Store(engine)
        store.set_fuel(10**9)
        instance = linker.instantiate(store, component)
        iface = instance.get_export_index(store, POLICY)

        def call(name, *args):
            func = instance.get_func(store, instance.get_export_index(store, name, iface))
            out = func(store, *args)
            func.post_return(store)
            return out

        self.assertTrue(call("version").startswith("session-switch-policy "))
        self.assertIsNotNone(call("self-check"))
        own = record(require_mention=None, free_response_rooms=None, mention_patterns=None, allow_bots=None)
        agent = record(name="mohe", jid="mohe@meeting.localhost", nick="mohe", sessions=["xmpp-mohe"], aliases=[],
                       mention=None, meeting=own)
        loop_guard = record(max_hops=6, window_messages=20, window_seconds=300, duplicate_seconds=600)
        meeting = record(require_mention=True, free_response_rooms=[], mention_patterns=["^team"],
                         allow_bots="mentions", stop_words=["stop"])
        settings = record(room="coregroup@conference.meeting.localhost", ttl_seconds=3600,
                          future_skew_seconds=120, max_body_chars=10000, legacy_agent=None, agents=[agent],
                          loop_guard=loop_guard, meeting=meeting)
        self.assertIsNone(call("configure", settings))


if __name__ == "__main__":
    unittest.main()
