#!/usr/bin/env python3
"""Per-call cost of the policy in the Python embedding
(examples/python-gateway), next to the Rust host's in the benchmark table.

    bench/py_embedding_bench.py --component target/policy/session_switch.wasm \\
        --db STATE_DB --config session-switch.toml --agent mohe \\
        --session xmpp-mohe-v2 --repeat 1000

Prints one JSON line: {"resolve_us": <median>, "context_us": <median>},
the median wall time of one `SessionSwitch.resolve` and one
`SessionSwitch.context` call in microseconds, over `--repeat` calls each
after `--warmup` untimed ones. Each call is what a gateway pays: the
crossing into the component, the host imports over `sqlite3` (and for
`context` the history read and the edits applied to the rows), the answer's
checks. Loading the component is not timed. The watcher thread is off
(`watch_interval=None`): it runs beside the calls, not in them. Only reads:
the database is not changed.

Run with the workspace venv (`make venv`: the pinned wasmtime). Exit
status: 0, or the failure's (DESIGN §8) with one line on stderr.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "python-gateway"))

from session_switch import SessionSwitch, SwitchError  # noqa: E402


def timed(call, repeat: int, warmup: int) -> float:
    """Median wall time of `call()` in microseconds."""
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter_ns()
        call()
        samples.append(time.perf_counter_ns() - started)
    return statistics.median(samples) / 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--component", required=True, help="the policy component (.wasm)")
    ap.add_argument("--db", required=True, help="a Hermes state.db (read only)")
    ap.add_argument("--config", required=True, help="session-switch.toml")
    ap.add_argument("--agent", required=True)
    ap.add_argument("--session", required=True, help="the session id asked about")
    ap.add_argument("--repeat", type=int, default=1000, help="timed calls of each kind")
    ap.add_argument("--warmup", type=int, default=20, help="untimed calls first")
    ap.add_argument("--limit", type=int, default=None, help="context: only the last N rows")
    a = ap.parse_args()
    if a.repeat < 1 or a.warmup < 0:
        print("py_embedding_bench: --repeat must be at least 1 and --warmup at least 0", file=sys.stderr)
        return 2
    try:
        with SessionSwitch(a.component, a.db, a.config, watch_interval=None) as switch:
            resolve_us = timed(lambda: switch.resolve(a.agent, a.session, fallback=False), a.repeat, a.warmup)
            context_us = timed(
                lambda: switch.context(a.agent, a.session, a.limit, fallback=False), a.repeat, a.warmup
            )
    except SwitchError as e:
        print(f"py_embedding_bench: {e.message}", file=sys.stderr)
        return e.exit_status
    print(json.dumps({"resolve_us": round(resolve_us, 2), "context_us": round(context_us, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
