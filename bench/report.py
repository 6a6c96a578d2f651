"""The tables of `make bench` and its targets, from the figures
`bench/driver.py` measured: `report(results)` gives the Markdown and the
list of `(target, met, measured)`; `write_page(results, docs_dir)` writes
the book's Performance page (`docs/src/performance.md`) and its SVG charts
(`docs/src/performance/*.svg`) from them. The page holds the latest run
only; `bench/HISTORY.md` is the diary. Stdlib only.

  python3 bench/report.py [target/bench/results.json] [--docs docs/src]

rewrites the page from a results file (the driver does it after each run).
"""

import argparse
import json
import os
import statistics
import sys
from xml.sax.saxutils import escape

# Targets (issues 7, 14, 18 and 37; this machine kind, 2 cores).
CLI_WARM_MS = 10.0
CLI_COLD_MS = 30.0
SWAP_P99_US = 1000.0
BINDING_RESOLVE_US = 15.0
#: The plugin's added time per request against Hermes's own history load, at
#: 100 and 1,000 rows.
PLUGIN_SHARE = 0.25
#: `context` against the same rules compiled in, on alternating rounds.
CONTEXT_VS_NATIVE = 1.15
#: `context` against SQLite's own read of the columns Hermes's loader reads
#: (nothing built), on alternating rounds, at 1,000 and 10,000 rows.
#: Hermes's own loader over `context`, at 1,000 rows.
CONTEXT_VS_HERMES = 5.0
#: A send through HTTP against the legacy `xmpp_session_bridge.py`'s send
#: through ejabberdctl.
HTTP_SEND_VS_LEGACY_CTL = 0.1
#: Our send through ejabberdctl against the legacy tool's: median of alternating pairs.
CTL_SEND_VS_LEGACY = 1.1


def fmt_us(x):
    if x is None:
        return "–"
    if x >= 1000:
        return f"{x / 1000:.2f} ms"
    return f"{x:.1f} µs" if x < 100 else f"{x:.0f} µs"


def report(res):
    m, crit, legacy = res["manifest"], res["criterion"], res["seed_python"]
    lines = []
    load = res["load_before"], res["load_after"]
    lines.append(f"Run of {res['started'][:10]} — {res['cpu']}, {os.cpu_count()} cores; load average "
                 f"{load[0][0]:.2f} before, {load[1][0]:.2f} after (1 min); release build; "
                 f"Python {next(iter(legacy.values()))['python']} with SQLite "
                 f"{next(iter(legacy.values()))['sqlite']}, rusqlite bundled SQLite.")
    lines.append("")
    lines.append("**Per call, in process** (median; component = `PolicyInstance` over `HermesImports`, "
                 "store reused, `state.db` unchanged between calls: the memo serves the decision; "
                 "after a write = another connection committed before each call, as Hermes does "
                 "after a turn: the memo asks the reads again; no memo = the policy runs every "
                 "call; native = the same rules compiled into the host, every call; SQLite alone = "
                 "the history's own selects (the list of sent rows, the rows) stepped, each cell handed "
                 "over and nothing built: the "
                 "floor of any loader that reads the columns Hermes's loader reads; Python = "
                 "`bench/legacy_baseline.py` (the legacy `xmpp_session_bridge.py`'s approach); the two ratios of `context` come from alternating "
                 "rounds, a batch of each of component, native and SQLite alone per round in "
                 "rotating order, the median of the rounds' ratios: the machine's drift over "
                 "minutes falls on all three alike)")
    lines.append("")
    head = ["database", "resolve: component", "after a write", "no memo", "native", "Python legacy",
            "context: component", "native", "SQLite alone", "Python legacy",
            "context component / native (alternating)", "component / SQLite alone (alternating)",
            "Python legacy / component"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    checks = []
    for db in m["dbs"]:
        n = db["name"]
        r, c, s = crit[f"resolve-{n}"], crit[f"context-{n}"], legacy[n]
        alt = crit["alternating"][n]
        vs_native = alt["component_over_native"]
        vs_sqlite = alt["component_over_sqlite_alone"]
        vs_python = s["context_us"] / c["component"]
        row = [n.replace("-", ", ") + " rows", fmt_us(r["component"]),
               fmt_us(r["component-after-write"]), fmt_us(r["component-no-memo"]),
               fmt_us(r["native"]), fmt_us(s["resolve_us"]),
               fmt_us(c["component"]), fmt_us(c["native"]), fmt_us(c["sqlite-alone"]),
               fmt_us(s["context_us"]), f"{vs_native:.2f}×", f"{vs_sqlite:.2f}×",
               f"{vs_python:.1f}×"]
        lines.append("| " + " | ".join(row) + " |")
        checks.append((f"resolve no slower than the Python legacy tool's ({n})", r["component"] <= s["resolve_us"],
                       f"{fmt_us(r['component'])} vs {fmt_us(s['resolve_us'])}"))
        if db["rows"] >= 1000:
            checks.append((f"context ≤ {CONTEXT_VS_NATIVE}× native, alternating rounds ({n})",
                           vs_native <= CONTEXT_VS_NATIVE, f"{vs_native:.2f}×"))
        hermes = res.get("binding", {}).get(n, {}).get("hermes_load")
        if hermes and db["rows"] == 1000:
            vs_hermes = hermes / c["component"]
            checks.append((f"context ≥ {CONTEXT_VS_HERMES:.0f}× faster than Hermes's loader ({n})",
                           vs_hermes >= CONTEXT_VS_HERMES,
                           f"{vs_hermes:.1f}× ({fmt_us(hermes)} vs {fmt_us(c['component'])})"))
    lines.append("")
    lines.append("**The caches that stay, with and without** (median, in process, `state.db` unchanged "
                 "between calls; without = `PolicyOptions::memo = false`, the switch the runtime has: "
                 "the policy decides every `resolve` and is asked about every row of `tag`; the "
                 "legacy tool's `resolve` for the target beside it)")
    lines.append("")
    lines.append("| database | resolve: decision memo | without it | Python legacy | "
                 "tag (the plugin's rows): row memo | without it |")
    lines.append("|---|---|---|---|---|---|")
    for db in m["dbs"]:
        n = db["name"]
        r, t, s = crit[f"resolve-{n}"], crit.get(f"tag-{n}", {}), legacy[n]
        lines.append(f"| {n.replace('-', ', ')} rows | {fmt_us(r['component'])} | "
                     f"{fmt_us(r['component-no-memo'])} | {fmt_us(s['resolve_us'])} | "
                     f"{fmt_us(t.get('component'))} | {fmt_us(t.get('component-no-memo'))} |")
    fresh = [crit[f"resolve-{d['name']}"]["component-fresh-store"] for d in m["dbs"]]
    lines.append("")
    lines.append(f"`resolve` with a new store + instance + `configure` every call "
                 f"(`reuse_store: false`): {fmt_us(statistics.median(fresh))} (median over the "
                 f"databases).")

    b = res.get("binding", {"skipped": "not run"})
    lines.append("")
    lines.append("**Python binding and Hermes plugin** (median; `bench/plugin_bench.py` in the Hermes "
                 "venv of the schema; resolve from Python vs the same call looped inside Rust; plugin "
                 "per request = a chat-completions request's history load through the registered "
                 "plugin (Hermes's own logging set up), each after another connection's commit "
                 "(as a request follows Hermes's store of the last turn): the decision, Hermes's load "
                 "of the CLI session (its own time not counted) and the tagging, plus the "
                 "`_run_agent` wrapper; nothing runs between turns; "
                 "share = of Hermes's own load; on "
                 "other routes Hermes has loaded the client's session too; SQLite's reads = the "
                 "record and the target's row through Python's `sqlite3` after such a commit, "
                 "the floor of a decision read after a write)")
    lines.append("")
    if "skipped" in b:
        lines.append(f"Skipped: {b['skipped']}.")
    else:
        lines.append("| database | resolve: binding | inside Rust | binding's own | binding after a write "
                     "| SQLite's reads after a write | Hermes's loader | plugin per request | share "
                     "| `tag_messages` alone | other routes (+ client load) | share |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for db in m["dbs"]:
            x = b[db["name"]]
            lines.append(f"| {db['name'].replace('-', ', ')} rows | {fmt_us(x['resolve_py'])} | "
                         f"{fmt_us(x['resolve_rust'])} | {fmt_us(x['resolve_py'] - x['resolve_rust'])} | "
                         f"{fmt_us(x['resolve_py_after_write'])} | {fmt_us(x['sqlite_after_write'])} | "
                         f"{fmt_us(x['hermes_load'])} | {fmt_us(x['plugin_load_seam'])} | "
                         f"{x['load_seam_share'] * 100:.1f} % | {fmt_us(x['tag_messages'])} | "
                         f"{fmt_us(x['plugin_run_agent_seam'])} | {x['run_agent_seam_share'] * 100:.1f} % |")
            checks.append((f"binding resolve ≤ {BINDING_RESOLVE_US:.0f} µs ({db['name']})",
                           x["resolve_py"] <= BINDING_RESOLVE_US, fmt_us(x["resolve_py"])))
            if db["rows"] <= 1000:
                checks.append((f"plugin per request ≤ {PLUGIN_SHARE:.0%} of Hermes's load ({db['name']})",
                               x["load_seam_share"] <= PLUGIN_SHARE, f"{x['load_seam_share'] * 100:.1f} %"))
        long_tag = [b[db["name"]]["tag_messages_long"] for db in m["dbs"]]
        lines.append("")
        lines.append(f"`tag_messages` on 100 messages of 4,000 characters of Chinese each, new strings "
                     f"every call (as each load returns): {fmt_us(statistics.median(long_tag))} "
                     f"(median over the runs; {fmt_us(min(long_tag))}–{fmt_us(max(long_tag))}).")

    w = res["whole_process"]
    lines.append("")
    lines.append("**Whole process** (hyperfine, median (min–max); the embedded policy, precompiled "
                 "into the binary; cold = the page cache dropped before every run; a policy file is "
                 "compiled at every start)")
    lines.append("")
    lines.append("| command | wall time |")
    lines.append("|---|---|")

    def ms(x):
        return f"{x['median_ms']:.1f} ms ({x['min_ms']:.1f}–{x['max_ms']:.1f})"
    lines.append(f"| `xmpp-session-bridge resolve --json`, warm | {ms(w['resolve_warm'])} |")
    lines.append(f"| `xmpp-session-bridge resolve --json`, cold | {ms(w['resolve_cold'])} |")
    lines.append(f"| `xmpp-session-bridge --policy FILE resolve --json` (compiles FILE) | "
                 f"{ms(w['resolve_policy_file'])} |")
    lines.append(f"| `xmpp-session-bridge context --json`, 1,000 rows, warm | {ms(w['context_1k_warm'])} |")
    lines.append(f"| `python3 bench/legacy_baseline.py resolve` (for scale) | {ms(w['seed_resolve_process'])} |")
    checks.append(("CLI resolve --json ≤ 10 ms warm", w["resolve_warm"]["median_ms"] <= CLI_WARM_MS,
                   f"{w['resolve_warm']['median_ms']:.1f} ms"))
    checks.append((f"CLI resolve --json ≤ {CLI_COLD_MS:.0f} ms, cold", w["resolve_cold"]["median_ms"] <= CLI_COLD_MS,
                   f"{w['resolve_cold']['median_ms']:.1f} ms"))
    s = res["sends"]
    if "skipped" in s:
        lines.append(f"| sends | skipped: {s['skipped']} |")
    else:
        f, p = s["http_floor"], s["ejabberdctl_pairs"]
        lines.append(f"| `send` through HTTP (check + write + post + commit) | {ms(s['http'])} |")
        lines.append(f"| its floor: process start (`--version`) + the write's {f['fsyncs']:.0f} `fsync`s "
                     f"(`strace -T`) | {f['floor_ms']:.1f} ms ({f['start_ms']:.1f} + {f['fsync_ms']:.1f}) |")
        lines.append(f"| `send` through ejabberdctl (the sender check beside the post: two Erlang VM "
                     f"boots at once), {p['pairs']} pairs alternating with the legacy tool's | "
                     f"{p['ours_median_ms']:.1f} ms ({min(p['ours_ms']):.1f}–{max(p['ours_ms']):.1f}) |")
        lines.append(f"| the legacy tool's send through ejabberdctl (no sender check), the same pairs | "
                     f"{p['seed_median_ms']:.1f} ms ({min(p['seed_ms']):.1f}–{max(p['seed_ms']):.1f}) |")
        http_vs_legacy = s["http"]["median_ms"] / p["seed_median_ms"]
        checks.append((f"send through HTTP ≤ {HTTP_SEND_VS_LEGACY_CTL}× the legacy tool's ejabberdctl send",
                       http_vs_legacy <= HTTP_SEND_VS_LEGACY_CTL,
                       f"{http_vs_legacy:.3f}× ({s['http']['median_ms']:.1f} vs {p['seed_median_ms']:.1f} ms; "
                       f"floor {f['floor_ms']:.1f} ms)"))
        checks.append((f"send through ejabberdctl ≤ {CTL_SEND_VS_LEGACY}× the legacy tool's, median of "
                       f"{p['pairs']} alternating pairs", p["ratio_median"] <= CTL_SEND_VS_LEGACY,
                       f"{p['ratio_median']:.2f}×"))

    mem = res["memory"]
    lines.append("")
    lines.append(f"**Peak memory** (max RSS, `/usr/bin/time -v`, median of 5): CLI `resolve` "
                 f"{mem['cli_resolve_kib'] / 1024:.1f} MiB (a policy file, compiling: "
                 f"{mem['cli_resolve_policy_file_kib'] / 1024:.1f} MiB), CLI `context` 10,000 rows "
                 f"{mem['cli_context_10k_kib'] / 1024:.1f} MiB; the legacy tool's Python `resolve` "
                 f"{mem['seed_resolve_kib'] / 1024:.1f} MiB, `context` 10,000 rows "
                 f"{mem['seed_context_10k_kib'] / 1024:.1f} MiB.")

    hs = res["hot_swap"]
    lines.append("")
    lines.append(f"**Hot swap** (`Policy::reload` {hs['compile']['swaps']}× between two "
                 f"builds while {hs['compile']['callers']} thread(s) resolve in a loop; µs unless said)")
    lines.append("")
    lines.append("| mode | compile-and-check, median (max) | lock held, max | every call p50 / p99 / max "
                 "| first call on the new component p50 / p99 / max | failed calls |")
    lines.append("|---|---|---|---|---|---|")
    for mode, label in (("compile", "compiling"),):
        h = hs[mode]
        c, f = h["calls"], h["first_after_swap"]
        lines.append(f"| {label} | {h['prepare_ms']['p50']:.1f} ms ({h['prepare_ms']['max']:.1f} ms) | "
                     f"{h['lock_us']['max']:.1f} | {c['p50']:.1f} / {c['p99']:.1f} / {c['max']:.0f} | "
                     f"{f['p50']:.0f} / {f['p99']:.0f} / {f['max']:.0f} | {h['failures']} of {c['n']} |")
        checks.append((f"hot swap ({label}): caller p99 ≤ 1 ms, no failed call",
                       c["p99"] <= SWAP_P99_US and f["p99"] <= SWAP_P99_US and h["failures"] == 0,
                       f"every call p99 {c['p99']:.1f} µs, first call p99 {f['p99']:.0f} µs, "
                       f"{h['failures']} failed"))

    room = res.get("room", {"skipped": "not run"})
    lines.append("")
    if "skipped" in room:
        lines.append(f"**The room**: skipped: {room['skipped']}.")
    else:
        room_lines, room_checks = room_report(room)
        lines.extend(room_lines)
        checks.extend(room_checks)

    lines.append("")
    lines.append("**Targets** (issues 7, 14, 18, as issue 55 restates them: `context` ≤ 1.3× SQLite alone is retired, its figure stays in the table above; `resolve` no slower than the legacy tool's)")
    lines.append("")
    lines.append("| target | result | measured |")
    lines.append("|---|---|---|")
    for name, ok, got in checks:
        lines.append(f"| {name} | {'met' if ok else '**missed**'} | {got} |")
    return "\n".join(lines) + "\n", checks




#: The room's fixtures: Hermes's journal mode decides what a durable write costs.
ROOM_FIXTURES = (("v22", "v22 (WAL)"), ("v31", "v31 (DELETE)"))
#: The bot's own share, less its fsyncs, against the baseline's own share.
ROOM_OWN_SHARE = 0.5
#: Throughput may stay this close under the lower of the two ceilings.
ROOM_CEILING_SLACK = 0.10


def room_report(room):
    """The room benchmark's section (`bench/room.py`): its Markdown lines and
    its `(target, met, measured)` checks."""
    lines, checks = [], []

    def ms(x):
        return f"{x:.1f}" if x < 100 else f"{x:.0f}"

    build = room.get("build", "")
    built = " (a debug build: not the product's figures)" if "/debug/" in build else ""
    lines.append(f"**The room** (`bench/room.py`{built}: one `xmpp-session-bridge bot` in a room of the "
                 "real ejabberd, its turns answered at once by a stand-in for Hermes's API server; the "
                 "baseline, `bench/room_baseline.py`, is a slixmpp and aiohttp bot that forwards each "
                 "message naming it to the same stand-in with the same request and posts the reply, "
                 "no policy, no writes. A person's client posts messages that address the agent, each "
                 "with a distinct token. Time per message, taken outside the bots: the person's send → "
                 "the stand-in receives the turn request, plus the stand-in's answer → the person "
                 "receives the reply. At 2/s and 10/s the bot and the baseline each have a room and "
                 "their messages interleave; at 100/s and in the throughput ramp their runs alternate. "
                 f"Fixtures at 1,000 rows; load average {room['loadavg_before'][0]:.2f} before, "
                 f"{room['loadavg_after'][0]:.2f} after (1 min))")
    lines.append("")
    lines.append("| fixture | rate | messages each | bot p50 / p99 (ms) | baseline p50 / p99 (ms) "
                 "| lost or doubled (bot, baseline) |")
    lines.append("|---|---|---|---|---|---|")
    for key, label in ROOM_FIXTURES:
        if key not in room:
            continue
        for rate, r in room[key]["latency"].items():
            b, s = r["bot"], r["baseline"]
            lines.append(f"| {label} | {rate}/s | {b['n']} | {ms(b['p50_ms'])} / {ms(b['p99_ms'])} | "
                         f"{ms(s['p50_ms'])} / {ms(s['p99_ms'])} | "
                         f"{b['lost'] + b['doubled']}, {s['lost'] + s['doubled']} |")
            ok = b["p50_ms"] <= s["p50_ms"] and b["p99_ms"] <= s["p99_ms"] and not (b["lost"] or b["doubled"])
            checks.append((f"room: time per message no slower than the baseline's at p50 and p99 "
                           f"({key}, {rate}/s)", ok,
                           f"p50 {ms(b['p50_ms'])} vs {ms(s['p50_ms'])} ms, p99 {ms(b['p99_ms'])} vs "
                           f"{ms(s['p99_ms'])} ms"))
    ceiling = room["room_ceiling"]["per_s"]
    lines.append("")
    lines.append(f"Throughput (bursts at rising rates, the most messages per second answered with none "
                 f"lost or doubled) beside its two ceilings: the room's own, ejabberd delivering a burst "
                 f"of {room['room_ceiling']['n']} to a client that does nothing (median of "
                 f"{room['room_ceiling']['bursts']}); the durable write's, the bot's fsyncs per message "
                 f"(`strace -f -T`, a run at 10/s) one after another. RSS (VmRSS) idle after joining, "
                 f"and its peak under load.")
    lines.append("")
    lines.append("| fixture | bot | baseline | the room's ceiling | the durable write's ceiling "
                 "| fsyncs per message (per decision), median time | RSS idle: bot, baseline "
                 "| RSS under load: bot, baseline |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for key, label in ROOM_FIXTURES:
        if key not in room:
            continue
        x = room[key]
        t, f = x["throughput_per_s"], x["fsync"]
        idle, load = x["rss_idle_kib"], x["rss_load_kib"]
        write_ceiling = f["ceiling_per_s"] or float("inf")
        lines.append(f"| {label} | {t['bot']:.0f}/s | {t['baseline']:.0f}/s | {ceiling:.0f}/s | "
                     f"{write_ceiling:.0f}/s | {f['per_message']:.1f} ({f['per_decision']:.1f}), "
                     f"{f['median_us'] / 1000:.2f} ms | {idle['bot'] / 1024:.1f}, "
                     f"{idle['baseline'] / 1024:.1f} MiB | {load['bot'] / 1024:.1f}, "
                     f"{load['baseline'] / 1024:.1f} MiB |")
        lower = min(ceiling, write_ceiling)
        checks.append((f"room: throughput ≥ the baseline's, or within {ROOM_CEILING_SLACK:.0%} of the "
                       f"lower ceiling ({key})",
                       t["bot"] >= t["baseline"] or t["bot"] >= (1 - ROOM_CEILING_SLACK) * lower,
                       f"{t['bot']:.0f}/s vs {t['baseline']:.0f}/s; ceilings: room {ceiling:.0f}/s, "
                       f"durable write {write_ceiling:.0f}/s"))
        checks.append((f"room: RSS ≤ the baseline's, idle and under load ({key})",
                       idle["bot"] <= idle["baseline"] and load["bot"] <= load["baseline"],
                       f"idle {idle['bot'] / 1024:.1f} vs {idle['baseline'] / 1024:.1f} MiB, load "
                       f"{load['bot'] / 1024:.1f} vs {load['baseline'] / 1024:.1f} MiB"))
    lines.append("")
    lines.append("The bots' own share per message (median, µs), from their logs' timestamps: stanza in → "
                 "turn request out, plus reply in → stanza out; the bot's split from its debug lines "
                 "(the policy's decisions: `is-own`, `admit` and `resolve`; the durable write: the "
                 "decision's line, cursor and commit (the lines Hermes took are forgotten in the next decision's transaction, the echo's); the "
                 "rest: parsing, queues, the HTTP request, the reply's stanza); its fsyncs inside its own "
                 "share from the `strace -T` run (each fsync's start against the log's spans); beside it, "
                 "the decision the bot makes on the room's echo of its own reply (`is-own`, `admit`, the "
                 "cursor's write): outside the message's share, but the decision thread's time.")
    lines.append("")
    lines.append("| fixture | rate | bot: in | out | own | policy | durable write | rest "
                 "| fsyncs inside | own less fsyncs | baseline: in | out | own | ratio "
                 "| the bot's decision on its reply's echo |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key, label in ROOM_FIXTURES:
        if key not in room:
            continue
        x = room[key]
        inside = x["fsync"].get("in_own_share_us") or 0
        for rate, o in x["own"].items():
            b, s = o["bot"], o["baseline"]
            if not b.get("n") or not s.get("n"):
                lines.append(f"| {label} | {rate}/s | no lines | | | | | | | | | | | | |")
                continue
            less = b["own"]["p50"] - inside
            ratio = less / s["own"]["p50"]
            lines.append(f"| {label} | {rate}/s | {b['in']['p50']:.0f} | {b['out']['p50']:.0f} | "
                         f"{b['own']['p50']:.0f} | {b['policy']['p50']:.0f} | {b['write']['p50']:.0f} | "
                         f"{b['rest']['p50']:.0f} | {inside:.0f} | {less:.0f} | {s['in']['p50']:.0f} | "
                         f"{s['out']['p50']:.0f} | {s['own']['p50']:.0f} | {ratio:.2f}× | "
                         f"{b['echo']['p50'] if 'echo' in b else 0:.0f} |")
            checks.append((f"room: the bot's own share less its fsyncs ≤ {ROOM_OWN_SHARE}× the "
                           f"baseline's ({key}, {rate}/s)", ratio <= ROOM_OWN_SHARE,
                           f"{ratio:.2f}× ({less:.0f} vs {s['own']['p50']:.0f} µs)"))
    return lines, checks


# The page: what the figures are, then the latest run's charts and tables.
PAGE_HEAD = """# Performance

<!-- Written by bench/report.py from target/bench/results.json (`make bench`);
     edit the script, not this page. -->

The policy runs on every room message an agent's gateway handles
(`resolve`, `context`) and on every CLI call, so its cost is the product's
performance. `make bench` measures it in one run on one machine against
the two references that matter: the **same rules compiled natively** into
the host (`session_switch_policy::Rules` over `HermesStore`: the floor of
this design) and the **legacy tool's approach in CPython**
(`bench/legacy_baseline.py`: the fixed `state_meta` key, the 1-hour
check, Hermes's history read, the `startswith(name)` tagging loop, its
send: what a user has today).

```sh
make bench    # not part of `make test`: slow, and it wants a quiet machine
```

It builds the component, its test variants and a release host, then runs
`bench/driver.py` under one isolated ejabberd: databases built for the
run (copies of Hermes's v22 and v31 fixtures with a CLI session of 100,
1,000 and 10,000 rows and five earlier sends, as the CLI writes them),
criterion in process (`tests/benches/policy.rs`), hyperfine for whole
commands, `/usr/bin/time -v` for peak memory, the hot-swap bench
(`tests/benches/hot_swap.rs`), and the room (`bench/room.py`): one room
bot against the real ejabberd and a stand-in for Hermes's API server,
side by side with a slixmpp and aiohttp bot, the stack of the legacy
Python tools and of Hermes's XMPP adapter (`make bench-room` runs the
room alone). Medians throughout, ratios from the same
run. "component" is `PolicyInstance` over `HermesImports`, exactly as the
CLI and a Rust gateway use it; "SQLite alone" is the history's own selects
with nothing built, the floor of any faithful loader. `bench/README.md`
lists the parts.

A machine's speed drifts over minutes, so compare within a row, and read
the ratios of `context` and of the ejabberdctl send, which are taken side
by side (alternating rounds, alternating pairs). Why the hot paths are
shaped as they are is in the design chapter
[Where the time goes](design/where-the-time-goes.md); what was changed to
get here, run by run, is in `bench/HISTORY.md`.

"""

COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759")


def svg_bars(title, categories, series, unit, targets=(), width=640):
    """A grouped bar chart as SVG text: `series` is `[(name, [value per
    category])]`, `targets` `[(label, value)]` drawn as dashed lines."""
    top, left, bottom, right, bar_h = 34, 96, 44, 16, 12
    group_h = bar_h * len(series) + 10
    height = top + group_h * len(categories) + bottom
    vmax = max([v for _, vs in series for v in vs if v is not None] + [v for _, v in targets]) * 1.1
    plot_w = width - left - right

    def x(v):
        return left + plot_w * v / vmax
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="18" font-size="13" font-weight="bold">{escape(title)}</text>']
    for i, cat in enumerate(categories):
        y0 = top + i * group_h
        out.append(f'<text x="{left - 6}" y="{y0 + group_h / 2}" text-anchor="end" '
                   f'dominant-baseline="middle">{escape(cat)}</text>')
        for j, (name, values) in enumerate(series):
            v = values[i]
            if v is None:
                continue
            y = y0 + j * bar_h
            out.append(f'<rect x="{left}" y="{y}" width="{x(v) - left:.1f}" height="{bar_h - 2}" '
                       f'fill="{COLOURS[j % len(COLOURS)]}"><title>{escape(name)}: {v:g}{unit}</title></rect>')
            out.append(f'<text x="{x(v) + 3:.1f}" y="{y + bar_h / 2}" dominant-baseline="middle">'
                       f'{v:g}{escape(unit)}</text>')
    y_end = top + group_h * len(categories)
    out.append(f'<line x1="{left}" y1="{top - 4}" x2="{left}" y2="{y_end}" stroke="black"/>')
    for label, v in targets:
        out.append(f'<line x1="{x(v):.1f}" y1="{top - 4}" x2="{x(v):.1f}" y2="{y_end}" '
                   f'stroke="#c00" stroke-dasharray="4 3"/>')
        out.append(f'<text x="{x(v) + 3:.1f}" y="{top - 6}" fill="#c00">{escape(label)}</text>')
    lx = left
    for j, (name, _) in enumerate(series):
        out.append(f'<rect x="{lx}" y="{y_end + 16}" width="10" height="10" fill="{COLOURS[j % len(COLOURS)]}"/>')
        out.append(f'<text x="{lx + 14}" y="{y_end + 25}">{escape(name)}</text>')
        lx += 22 + 6.5 * len(name)
    out.append('</svg>')
    return "\n".join(out) + "\n"


def context_chart(dbs, vs_native, vs_sqlite):
    """`context`'s ratios on alternating rounds, per database."""
    return svg_bars("context: component over native and over SQLite alone (alternating rounds)",
                    [d.replace("-", ", ") + " rows" for d in dbs],
                    [("component / native", vs_native), ("component / SQLite alone", vs_sqlite)],
                    "×", [(f"target {CONTEXT_VS_NATIVE}×", CONTEXT_VS_NATIVE)])


def plugin_chart(dbs, per_request):
    """The plugin's cost per request as a share of Hermes's own load."""
    return svg_bars("The Hermes plugin per request, share of Hermes's own history load",
                    [d.replace("-", ", ") + " rows" for d in dbs],
                    [("per request", per_request)],
                    " %", [(f"target {PLUGIN_SHARE:.0%}", PLUGIN_SHARE * 100)])


def charts(res):
    """The page's charts from a results file: `{file name: svg}`."""
    dbs = [d["name"] for d in res["manifest"]["dbs"]]
    big = [d["name"] for d in res["manifest"]["dbs"] if d["rows"] >= 1000]
    alt = res["criterion"]["alternating"]
    out = {"context-ratios.svg": context_chart(
        big, [round(alt[n]["component_over_native"], 2) for n in big],
        [round(alt[n]["component_over_sqlite_alone"], 2) for n in big])}
    b = res.get("binding", {})
    if "skipped" not in b and b:
        out["plugin-share.svg"] = plugin_chart(
            dbs, [round(b[n]["load_seam_share"] * 100, 1) for n in dbs])
    return out


def page(text, checks, chart_names, commit=None):
    """The page's Markdown: the fixed head, a summary of the targets, the
    charts, then the run's tables (`text`, from `report`)."""
    met = sum(1 for _, ok, _ in checks if ok)
    measured = (f"Measured by version `{commit}`." if commit
                 else "Measured by an earlier version (its results name no commit).")
    lines = [PAGE_HEAD.rstrip("\n"), "", "## The latest run", "", measured, "",
             f"{met} of {len(checks)} targets met."]
    missed = [f"- {n}: {got}" for n, ok, got in checks if not ok]
    if missed:
        lines[-1] += " Missed:"
        lines.append("")
        lines.extend(missed)
    lines.append("")
    titles = {"context-ratios.svg": "context: component over native and over SQLite alone",
              "plugin-share.svg": "the Hermes plugin per request, share of Hermes's load"}
    for name in chart_names:
        lines.append(f"![{titles.get(name, name)}](performance/{name})")
        lines.append("")
    lines.append(text.rstrip("\n"))
    return "\n".join(lines) + "\n"


def write_page(res, docs_dir):
    """Write `performance.md` and `performance/*.svg` under `docs_dir`."""
    text, checks = report(res)
    svgs = charts(res)
    os.makedirs(os.path.join(docs_dir, "performance"), exist_ok=True)
    for name, svg in svgs.items():
        with open(os.path.join(docs_dir, "performance", name), "w") as f:
            f.write(svg)
    with open(os.path.join(docs_dir, "performance.md"), "w") as f:
        f.write(page(text, checks, sorted(svgs), res.get("commit")))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    p = argparse.ArgumentParser(description="Write the book's Performance page from a results file.")
    p.add_argument("results", nargs="?", default=os.path.join(root, "target/bench/results.json"))
    p.add_argument("--docs", default=os.path.join(root, "docs/src"))
    args = p.parse_args()
    if not os.path.exists(args.results):
        sys.exit(f"{args.results}: no results; run `make bench` first")
    with open(args.results) as f:
        write_page(json.load(f), args.docs)
    print(f"wrote {os.path.join(args.docs, 'performance.md')}")


if __name__ == "__main__":
    main()
