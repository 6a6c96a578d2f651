#!/usr/bin/env python3
"""The driver behind `make bench` (issue 7): builds the databases of the
run, times the policy per call (component, native, SQLite alone for the
history, the seed's Python, the Python binding and the Hermes plugin), the CLI as
a whole process (hyperfine, cache warm and cold), its peak memory
(`/usr/bin/time -v`), hot swap, and sends against the real ejabberd when
run under `tests/ejabberd/with-ejabberd.sh`; then writes the tables.

  bench/driver.py [--out target/bench] [--quick]

Writes OUT/results.json (every figure) and OUT/report.md (the README
table), and prints the report. Medians throughout; ratios from the same run.
Expects `make component variants` and a release build (`make bench` does it).
Stdlib only.
"""

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
BIN = os.path.join(ROOT, "target/release/xmpp-session-bridge")
COMPONENT = os.path.join(ROOT, "target/policy/session_switch.wasm")
OUT = os.path.join(ROOT, "target/bench")  # --out

# Targets of issues 7 and 18 (this machine kind, 2 cores).
CLI_WARM_MS = 10.0
HTTP_SEND_MS = 8.0
CTL_SEND_VS_SEED = 1.1
SWAP_P99_US = 1000.0
CLI_COLD_MS = 30.0
CONTEXT_VS_NATIVE = 1.15
CONTEXT_VS_PYTHON = 2.5
CONTEXT_VS_HERMES = 10.0


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def sh(cmd, env=None, capture=True, check=True):
    log(" ".join(cmd) if len(" ".join(cmd)) < 300 else " ".join(cmd)[:300] + " …")
    out = subprocess.run(cmd, env=env, cwd=ROOT, text=True,
                         stdout=subprocess.PIPE if capture else None,
                         stderr=subprocess.PIPE if capture else None)
    if check and out.returncode != 0:
        sys.exit(f"[bench] failed ({out.returncode}): {' '.join(cmd)}\n{out.stderr or ''}")
    return out


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError(f"no JSON line in: {text[-500:]}")


def restamp(run_dir):
    sh([sys.executable, os.path.join(BENCH, "make_dbs.py"), run_dir, "--restamp"])


def seed_python(manifest, quick):
    out = {}
    for db in manifest["dbs"]:
        r = sh([sys.executable, os.path.join(BENCH, "seed_baseline.py"), "bench",
                "--db", db["path"], "--session", manifest["session"],
                "--names", ",".join(manifest["names"]),
                "--repeat", "300" if quick else "2000", "--batches", "5" if quick else "21"])
        res = last_json(r.stdout)
        assert res["redirected"] and res["rows"] == db["rows"], res
        out[db["name"]] = res
    return out


#: The Hermes venv whose `hermes_state` matches each schema (`make hermes-venvs`).
HERMES_VENVS = {"v22": "target/hermes-venv/0.19.0", "v31": "target/hermes-venv/v31"}
BINDING_RESOLVE_US = 15.0
PLUGIN_SHARE = 0.10


def binding(manifest, quick):
    """The Python binding and the Hermes plugin (issue 14): `resolve` from
    Python and inside Rust, Hermes's own loader, the plugin's work per
    request (bench/plugin_bench.py, in the Hermes venv of the schema, with
    the wheel that `make python-test` installs there)."""
    wheels = sorted(glob.glob(os.path.join(ROOT, "target/wheels/session_switch-*.whl")), key=os.path.getmtime)
    if not wheels:
        return {"skipped": "no wheel in target/wheels (run `make wheel`)"}
    out = {}
    for schema, venv in HERMES_VENVS.items():
        python = os.path.join(ROOT, venv, "bin/python")
        if not os.path.exists(python):
            return {"skipped": f"{venv} is missing (run `make hermes-venvs`)"}
        # `python -m pip`: the venv's scripts may name another checkout's python.
        sh([python, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", wheels[-1]])
    for db in manifest["dbs"]:
        r = sh([os.path.join(ROOT, HERMES_VENVS[db["schema"]], "bin/python"),
                os.path.join(BENCH, "plugin_bench.py"), "--db", db["path"], "--config", manifest["config"],
                "--agent", manifest["agent"], "--session", manifest["session"],
                "--cli-session", manifest["cli_session"],
                "--repeat", "300" if quick else "2000", "--batches", "5" if quick else "15"], check=False)
        if r.returncode != 0:
            return {"skipped": f"plugin_bench.py failed: {(r.stderr or '').strip()[-300:]}"}
        out[db["name"]] = last_json(r.stdout)
    return out


def criterion(run_dir, quick):
    home = os.path.join(run_dir, "criterion")
    env = dict(os.environ, SSW_BENCH_DIR=run_dir, CRITERION_HOME=home)
    if quick:
        env["SSW_BENCH_QUICK"] = "1"
    sh(["cargo", "bench", "-q", "-p", "session-switch-tests", "--bench", "policy"], env=env, capture=False)
    out = {}
    for group in sorted(os.listdir(home)):
        for fn in sorted(os.listdir(os.path.join(home, group))):
            est = os.path.join(home, group, fn, "new", "estimates.json")
            if os.path.exists(est):
                e = json.load(open(est))
                out.setdefault(group, {})[fn] = e["median"]["point_estimate"] / 1000.0  # µs
    return out


def hot_swap(run_dir, quick):
    env = dict(os.environ, SSW_BENCH_DIR=run_dir)
    if quick:
        env["SSW_BENCH_QUICK"] = "1"
    r = sh(["cargo", "bench", "-q", "-p", "session-switch-tests", "--bench", "hot_swap"], env=env)
    return last_json(r.stdout)["hot_swap"]


def hyperfine(cmds, runs, warmup, prepare=None, names=None):
    """Median, min, max wall time in ms of each command (hyperfine, no shell)."""
    path = os.path.join(OUT, "hyperfine.json")
    args = ["hyperfine", "-N", "--style", "basic", "--runs", str(runs), "--warmup", str(warmup),
            "--export-json", path]
    if prepare:
        args += ["--prepare", prepare]
    for i, c in enumerate(cmds):
        if names:
            args += ["-n", names[i]]
        args.append(c)
    sh(args)
    res = json.load(open(path))["results"]
    return [{"median_ms": r["median"] * 1e3, "min_ms": r["min"] * 1e3, "max_ms": r["max"] * 1e3,
             "runs": len(r["times"])} for r in res]


def cli_args(manifest, db, cache, *rest):
    return [BIN, "--config", manifest["config"], "--db", db, "--cache-dir", cache, *rest]


def q(args):
    return " ".join(args)


def whole_process(manifest, run_dir, quick):
    db = next(d for d in manifest["dbs"] if d["name"] == "v31-1000")["path"]
    cache = os.path.join(run_dir, "cli-cache")
    resolve = cli_args(manifest, db, cache, "resolve", manifest["session"], "--agent",
                       manifest["agent"], "--json")
    context = cli_args(manifest, db, cache, "context", manifest["session"], "--agent",
                       manifest["agent"], "--json")
    seed = [sys.executable, os.path.join(BENCH, "seed_baseline.py"), "resolve", "--db", db,
            "--session", manifest["session"]]
    runs, warm = (10, 2) if quick else (50, 5)
    sh(resolve)  # fills the cache
    warm_res = hyperfine([q(resolve), q(context), q(seed)], runs, warm,
                         names=["cli resolve (warm)", "cli context 1k (warm)", "seed resolve"])
    cold = hyperfine([q(resolve)], max(5, runs // 3), 1, prepare=f"rm -rf {cache}")
    return {"resolve_warm": warm_res[0], "context_1k_warm": warm_res[1],
            "seed_resolve_process": warm_res[2], "resolve_cold": cold[0]}


def max_rss_kib(args, times=5):
    values = []
    for _ in range(times):
        r = subprocess.run(["/usr/bin/time", "-v", *args], cwd=ROOT, text=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if r.returncode != 0:
            sys.exit(f"[bench] failed: {q(args)}\n{r.stderr[-800:]}")
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
        values.append(int(m.group(1)))
    return statistics.median(values)


def memory(manifest, run_dir):
    big = next(d for d in manifest["dbs"] if d["name"] == "v31-10000")["path"]
    small = next(d for d in manifest["dbs"] if d["name"] == "v31-1000")["path"]
    cache = os.path.join(run_dir, "cli-cache")
    seed = [sys.executable, os.path.join(BENCH, "seed_baseline.py")]
    s, a = manifest["session"], manifest["agent"]
    return {
        "cli_resolve_kib": max_rss_kib(cli_args(manifest, small, cache, "resolve", s, "--agent", a, "--json")),
        "cli_resolve_cold_kib": max_rss_kib_cold(manifest, small, run_dir),
        "cli_context_10k_kib": max_rss_kib(cli_args(manifest, big, cache, "context", s, "--agent", a, "--json")),
        "seed_resolve_kib": max_rss_kib(seed + ["resolve", "--db", small, "--session", s]),
        "seed_context_10k_kib": max_rss_kib(seed + ["context", "--db", big, "--session", s]),
    }


def max_rss_kib_cold(manifest, db, run_dir):
    """Peak memory of a resolve that compiles the component (empty cache)."""
    values = []
    for i in range(3):
        cache = os.path.join(run_dir, f"cold-cache-{i}")
        shutil.rmtree(cache, ignore_errors=True)
        values.append(max_rss_kib(cli_args(manifest, db, cache, "resolve", manifest["session"],
                                           "--agent", manifest["agent"], "--json"), 1))
        shutil.rmtree(cache, ignore_errors=True)
    return statistics.median(values)


def sends(manifest, run_dir, quick):
    ej = {k: v for k, v in os.environ.items() if k.startswith("EJ_")}
    if "EJ_API_URL" not in ej:
        return {"skipped": "no ejabberd (run through tests/ejabberd/with-ejabberd.sh, as `make bench` does)"}
    src = next(d for d in manifest["dbs"] if d["name"] == "v31-1000")["path"]
    db = os.path.join(run_dir, "send.db")
    shutil.copyfile(src, db)
    domain, room = ej["EJ_DOMAIN"], ej["EJ_ROOM"]
    configs = {}
    for transport in ("http", "ejabberdctl"):
        path = os.path.join(run_dir, f"send-{transport}.toml")
        with open(path, "w") as f:
            f.write(f"""[xmpp]
room = "{room}"
transport = "{transport}"
ejabberdctl = ["{ej['EJ_CTL']}"]
api_url = "{ej['EJ_API_URL']}"

[[agents]]
name = "mohe"
jid = "mohe@{domain}"
nick = "mohe"
sessions = ["xmpp-mohe-v2", "xmpp-mohe"]
""")
        configs[transport] = path
    cache = os.path.join(run_dir, "cli-cache")
    cli = manifest["cli_session"]

    def send_cmd(transport, text):
        return [BIN, "--config", configs[transport], "--db", db, "--cache-dir", cache,
                "send", text, cli, "--agent", "mohe", "--json"]

    seed = [sys.executable, os.path.join(BENCH, "seed_baseline.py"), "send", "bench-seed-ctl", cli,
            "--agent", "mohe", "--db", db, "--room", room, "--from-jid", f"mohe@{domain}",
            "--ctl", ej["EJ_CTL"]]
    for cmd in (send_cmd("http", "bench check"), ):
        r = sh(cmd)
        assert json.loads(r.stdout)["delivered"], r.stdout
    http = hyperfine([q(send_cmd("http", "bench-http"))], 10 if quick else 30, 3)[0]
    ctl_runs = 3 if quick else 10
    ctl = hyperfine([q(send_cmd("ejabberdctl", "bench-ctl")), q(seed)], ctl_runs, 1,
                    names=["cli send ctl", "seed send ctl"])
    return {"http": http, "ejabberdctl": ctl[0], "seed_ejabberdctl": ctl[1]}


def fmt_us(x):
    if x is None:
        return "–"
    if x >= 1000:
        return f"{x / 1000:.2f} ms"
    return f"{x:.1f} µs" if x < 100 else f"{x:.0f} µs"


def report(res):
    m, crit, seed = res["manifest"], res["criterion"], res["seed_python"]
    lines = []
    load = res["load_before"], res["load_after"]
    lines.append(f"Run of {res['started']} — {res['cpu']}, {os.cpu_count()} cores; load average "
                 f"{load[0][0]:.2f} before, {load[1][0]:.2f} after (1 min); release build; "
                 f"Python {next(iter(seed.values()))['python']} with SQLite "
                 f"{next(iter(seed.values()))['sqlite']}, rusqlite bundled SQLite.")
    lines.append("")
    lines.append("**Per call, in process** (median; component = `PolicyInstance` over `HermesImports`, "
                 "store reused, `state.db` unchanged between calls: the memo serves the decision; "
                 "after a write = another connection committed before each call, as Hermes does "
                 "after a turn: the memo asks the reads again; no memo = the policy runs every "
                 "call; native = the same rules compiled into the host, every call; SQLite alone = "
                 "the history's own selects (the bridge's list, the rows) stepped, each cell handed "
                 "over and nothing built: the "
                 "floor of any loader that reads the columns Hermes's loader reads; Python = "
                 "`bench/seed_baseline.py`)")
    lines.append("")
    head = ["database", "resolve: component", "after a write", "no memo", "native", "Python seed",
            "context: component", "native", "SQLite alone", "Python seed",
            "context component / native", "context Python / component", "Python / SQLite alone"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    checks = []
    for db in m["dbs"]:
        n = db["name"]
        r, c, s = crit[f"resolve-{n}"], crit[f"context-{n}"], seed[n]
        vs_native = c["component"] / c["native"]
        vs_python = s["context_us"] / c["component"]
        # The best any loader reading Hermes's columns could do against the
        # seed: SQLite alone, nothing built.
        floor_vs_python = s["context_us"] / c["sqlite-alone"]
        row = [n.replace("-", ", ") + " rows", fmt_us(r["component"]),
               fmt_us(r["component-after-write"]), fmt_us(r["component-no-memo"]),
               fmt_us(r["native"]), fmt_us(s["resolve_us"]),
               fmt_us(c["component"]), fmt_us(c["native"]), fmt_us(c["sqlite-alone"]),
               fmt_us(s["context_us"]), f"{vs_native:.2f}×", f"{vs_python:.1f}×",
               f"{floor_vs_python:.1f}×"]
        lines.append("| " + " | ".join(row) + " |")
        checks.append((f"resolve ≤ 0.5× Python seed ({n})", r["component"] <= 0.5 * s["resolve_us"],
                       f"{fmt_us(r['component'])} vs {fmt_us(s['resolve_us'])}"))
        if db["rows"] >= 1000:
            checks.append((f"context ≤ {CONTEXT_VS_NATIVE}× native ({n})", vs_native <= CONTEXT_VS_NATIVE,
                           f"{vs_native:.2f}×"))
            checks.append((f"context ≥ {CONTEXT_VS_PYTHON}× faster than the Python seed ({n})",
                           vs_python >= CONTEXT_VS_PYTHON,
                           f"{vs_python:.1f}× (SQLite alone {floor_vs_python:.1f}×)"))
            hermes = res.get("binding", {}).get(n, {}).get("hermes_load")
            if hermes:
                vs_hermes = hermes / c["component"]
                checks.append((f"context ≥ {CONTEXT_VS_HERMES:.0f}× faster than Hermes's loader ({n})",
                               vs_hermes >= CONTEXT_VS_HERMES,
                               f"{vs_hermes:.1f}× (SQLite alone {hermes / c['sqlite-alone']:.1f}×)"))
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
                 "and the plugin's refresh after that turn, which prepared the history the request "
                 "takes, plus the `_run_agent` wrapper; no refresh = the same with no refresh after "
                 "the commit (a request that overlaps the last turn: it loads the CLI session with "
                 "Hermes's loader and tags it; the time inside Hermes's load not counted); refresh = "
                 "its own time, in the plugin's refresh thread after each turn (the reads, Hermes's "
                 "load of the CLI session and the tagging: work moved off the request, not saved); "
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
                     "| no refresh (share) | refresh, off the path | `tag_messages` alone "
                     "| other routes (+ client load) | share |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for db in m["dbs"]:
            x = b[db["name"]]
            lines.append(f"| {db['name'].replace('-', ', ')} rows | {fmt_us(x['resolve_py'])} | "
                         f"{fmt_us(x['resolve_rust'])} | {fmt_us(x['resolve_py'] - x['resolve_rust'])} | "
                         f"{fmt_us(x['resolve_py_after_write'])} | {fmt_us(x['sqlite_after_write'])} | "
                         f"{fmt_us(x['hermes_load'])} | {fmt_us(x['plugin_load_seam'])} | "
                         f"{x['load_seam_share'] * 100:.1f} % | {fmt_us(x['plugin_unrefreshed'])} "
                         f"({x['unrefreshed_share'] * 100:.1f} %) | {fmt_us(x['refresh'])} | "
                         f"{fmt_us(x['tag_messages'])} | "
                         f"{fmt_us(x['plugin_run_agent_seam'])} | {x['run_agent_seam_share'] * 100:.1f} % |")
            checks.append((f"binding resolve ≤ {BINDING_RESOLVE_US:.0f} µs ({db['name']})",
                           x["resolve_py"] <= BINDING_RESOLVE_US, fmt_us(x["resolve_py"])))
            checks.append((f"plugin per request ≤ {PLUGIN_SHARE:.0%} of Hermes's load ({db['name']})",
                           x["load_seam_share"] <= PLUGIN_SHARE, f"{x['load_seam_share'] * 100:.1f} %"))
            checks.append((f"the same with no refresh before the request ({db['name']})",
                           x["unrefreshed_share"] <= PLUGIN_SHARE, f"{x['unrefreshed_share'] * 100:.1f} %"))
        long_tag = [b[db["name"]]["tag_messages_long"] for db in m["dbs"]]
        lines.append("")
        lines.append(f"`tag_messages` on 100 messages of 4,000 characters of Chinese each, new strings "
                     f"every call (as each load returns): {fmt_us(statistics.median(long_tag))} "
                     f"(median over the runs; {fmt_us(min(long_tag))}–{fmt_us(max(long_tag))}).")

    w = res["whole_process"]
    lines.append("")
    lines.append("**Whole process** (hyperfine, median (min–max); `--cache-dir` warm = the "
                 "precompiled component is cached, cold = emptied before every run)")
    lines.append("")
    lines.append("| command | wall time |")
    lines.append("|---|---|")

    def ms(x):
        return f"{x['median_ms']:.1f} ms ({x['min_ms']:.1f}–{x['max_ms']:.1f})"
    lines.append(f"| `xmpp-session-bridge resolve --json`, cache warm | {ms(w['resolve_warm'])} |")
    lines.append(f"| `xmpp-session-bridge resolve --json`, cache cold | {ms(w['resolve_cold'])} |")
    lines.append(f"| `xmpp-session-bridge context --json`, 1,000 rows, warm | {ms(w['context_1k_warm'])} |")
    lines.append(f"| `python3 bench/seed_baseline.py resolve` (for scale) | {ms(w['seed_resolve_process'])} |")
    checks.append(("CLI resolve --json ≤ 10 ms warm", w["resolve_warm"]["median_ms"] <= CLI_WARM_MS,
                   f"{w['resolve_warm']['median_ms']:.1f} ms"))
    checks.append((f"CLI resolve --json ≤ {CLI_COLD_MS:.0f} ms, cache cold", w["resolve_cold"]["median_ms"] <= CLI_COLD_MS,
                   f"{w['resolve_cold']['median_ms']:.1f} ms"))
    s = res["sends"]
    if "skipped" in s:
        lines.append(f"| sends | skipped: {s['skipped']} |")
    else:
        lines.append(f"| `send` through HTTP (check + write + post + commit) | {ms(s['http'])} |")
        lines.append(f"| `send` through ejabberdctl (the sender check beside the post: two Erlang VM boots at once) | {ms(s['ejabberdctl'])} |")
        lines.append(f"| seed's send through ejabberdctl (no sender check) | {ms(s['seed_ejabberdctl'])} |")
        checks.append((f"send through HTTP ≤ {HTTP_SEND_MS:.0f} ms", s["http"]["median_ms"] <= HTTP_SEND_MS,
                       f"{s['http']['median_ms']:.1f} ms"))
        ctl_vs_seed = s["ejabberdctl"]["median_ms"] / s["seed_ejabberdctl"]["median_ms"]
        checks.append((f"send through ejabberdctl ≤ {CTL_SEND_VS_SEED}× the seed's", ctl_vs_seed <= CTL_SEND_VS_SEED,
                       f"{ctl_vs_seed:.2f}×"))

    mem = res["memory"]
    lines.append("")
    lines.append(f"**Peak memory** (max RSS, `/usr/bin/time -v`, median of 5): CLI `resolve` "
                 f"{mem['cli_resolve_kib'] / 1024:.1f} MiB (cache cold, compiling: "
                 f"{mem['cli_resolve_cold_kib'] / 1024:.1f} MiB), CLI `context` 10,000 rows "
                 f"{mem['cli_context_10k_kib'] / 1024:.1f} MiB; seed Python `resolve` "
                 f"{mem['seed_resolve_kib'] / 1024:.1f} MiB, `context` 10,000 rows "
                 f"{mem['seed_context_10k_kib'] / 1024:.1f} MiB.")

    hs = res["hot_swap"]
    lines.append("")
    lines.append(f"**Hot swap** (`Policy::reload` {hs['compile']['swaps']}× per mode between two "
                 f"builds while {hs['compile']['callers']} thread(s) resolve in a loop; µs unless said)")
    lines.append("")
    lines.append("| mode | compile-and-check, median (max) | lock held, max | every call p50 / p99 / max "
                 "| first call on the new component p50 / p99 / max | failed calls |")
    lines.append("|---|---|---|---|---|---|")
    for mode, label in (("compile", "compiling"), ("cache", "from the cache")):
        h = hs[mode]
        c, f = h["calls"], h["first_after_swap"]
        lines.append(f"| {label} | {h['prepare_ms']['p50']:.1f} ms ({h['prepare_ms']['max']:.1f} ms) | "
                     f"{h['lock_us']['max']:.1f} | {c['p50']:.1f} / {c['p99']:.1f} / {c['max']:.0f} | "
                     f"{f['p50']:.0f} / {f['p99']:.0f} / {f['max']:.0f} | {h['failures']} of {c['n']} |")
        checks.append((f"hot swap ({label}): caller p99 ≤ 1 ms, no failed call",
                       c["p99"] <= SWAP_P99_US and f["p99"] <= SWAP_P99_US and h["failures"] == 0,
                       f"every call p99 {c['p99']:.1f} µs, first call p99 {f['p99']:.0f} µs, "
                       f"{h['failures']} failed"))

    lines.append("")
    lines.append("**Targets of issues 7, 14 and 18**")
    lines.append("")
    lines.append("| target | result | measured |")
    lines.append("|---|---|---|")
    for name, ok, got in checks:
        lines.append(f"| {name} | {'met' if ok else '**missed**'} | {got} |")
    return "\n".join(lines) + "\n", checks


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(ROOT, "target/bench"))
    p.add_argument("--quick", action="store_true", help="short runs, for checking the driver")
    args = p.parse_args()
    for need in (BIN, COMPONENT):
        if not os.path.exists(need):
            sys.exit(f"[bench] {need} is missing: run `make bench` (it builds it)")
    for tool in ("hyperfine", "/usr/bin/time"):
        if not shutil.which(tool):
            sys.exit(f"[bench] {tool} is missing: apt-get install -y hyperfine time")
    global OUT
    OUT = os.path.abspath(args.out)
    os.makedirs(OUT, exist_ok=True)
    run_dir = os.path.join(args.out, "run")
    shutil.rmtree(run_dir, ignore_errors=True)
    res = {"started": time.strftime("%Y-%m-%d %H:%M %Z"), "cpu": cpu_name(),
           "load_before": os.getloadavg(), "quick": args.quick}
    if res["load_before"][0] > 1.5:
        log(f"WARNING: load average {res['load_before'][0]:.2f} > 1.5: figures will be noisy")
    fixtures = os.environ.get("HERMES_FIXTURES", os.path.join(ROOT, "../shared/fixtures/hermes"))
    made = sh([sys.executable, os.path.join(BENCH, "make_dbs.py"), run_dir, "--fixtures", fixtures])
    manifest = last_json(made.stdout)
    res["manifest"] = manifest
    res["seed_python"] = seed_python(manifest, args.quick)
    restamp(run_dir)
    res["binding"] = binding(manifest, args.quick)
    restamp(run_dir)
    res["criterion"] = criterion(run_dir, args.quick)
    restamp(run_dir)
    res["hot_swap"] = hot_swap(run_dir, args.quick)
    restamp(run_dir)
    res["whole_process"] = whole_process(manifest, run_dir, args.quick)
    res["memory"] = memory(manifest, run_dir)
    res["sends"] = sends(manifest, run_dir, args.quick)
    res["load_after"] = os.getloadavg()
    text, checks = report(res)
    res["targets"] = [{"target": n, "met": ok, "measured": g} for n, ok, g in checks]
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1, ensure_ascii=False)
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(text)
    print(text)
    shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
