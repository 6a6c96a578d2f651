#!/usr/bin/env python3
"""The driver behind `make bench` (issue 7): builds the databases of the
run, times the policy per call (component, native, SQLite alone for the
history, the legacy `xmpp_session_bridge.py`'s Python, the Python binding
and the Hermes plugin), the CLI as a whole process (hyperfine, warm and with the page cache dropped), its peak memory
(`/usr/bin/time -v`), hot swap, and sends and the room (`bench/room.py`)
against the real ejabberd when run under `tests/ejabberd/with-ejabberd.sh`;
then writes the tables. `ROOM_ONLY=1` runs the room alone.

  bench/driver.py [--out target/bench] [--quick]

Writes OUT/results.json (every figure), OUT/report.md (the tables) and
the book's Performance page (docs/src/performance.md, with its charts),
and prints the report. Medians throughout; ratios from the same run.
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

from report import report, room_report, write_page

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
#: `SSW_BENCH_BIN` times another build (e.g. the debug one while developing the bench).
BIN = os.path.abspath(os.environ.get("SSW_BENCH_BIN") or os.path.join(ROOT, "target/release/xmpp-session-bridge"))
#: The tests' venv: slixmpp and aiohttp for the room benchmark (`make venv`).
VENV_PYTHON = os.path.join(ROOT, "target/venv/bin/python")
COMPONENT = os.path.join(ROOT, "target/policy/session_switch.wasm")
OUT = os.path.join(ROOT, "target/bench")  # --out



def commit():
    """The version measured: the checkout's commit, `+changes` when it has
    uncommitted changes; None outside a git checkout."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here,
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=here, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+changes" if dirty else "")

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


def legacy_python(manifest, quick):
    out = {}
    for db in manifest["dbs"]:
        r = sh([sys.executable, os.path.join(BENCH, "legacy_baseline.py"), "bench",
                "--db", db["path"], "--session", manifest["session"],
                "--names", ",".join(manifest["names"]),
                "--repeat", "300" if quick else "2000", "--batches", "5" if quick else "21"])
        res = last_json(r.stdout)
        assert res["redirected"] and res["rows"] == db["rows"], res
        out[db["name"]] = res
    return out


#: The Hermes venv whose `hermes_state` matches each schema (`make hermes-venvs`).
HERMES_VENVS = {"v22": "target/hermes-venv/0.19.0", "v31": "target/hermes-venv/v31"}


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
    """Criterion's medians (µs) per group and variant, and under
    `"alternating"` the `context` variants timed in alternating rounds
    (tests/benches/policy.rs `SSW_BENCH_ALTERNATE`): the ratios the
    `context` targets are judged on."""
    home = os.path.join(run_dir, "criterion")
    alternating = os.path.join(run_dir, "alternating.json")
    env = dict(os.environ, SSW_BENCH_DIR=run_dir, CRITERION_HOME=home, SSW_BENCH_ALTERNATE=alternating)
    if quick:
        env["SSW_BENCH_QUICK"] = "1"
    sh(["cargo", "bench", "-q", "-p", "session-switch-tests", "--bench", "policy"], env=env, capture=False)
    out = {"alternating": json.load(open(alternating))}
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


def cli_args(manifest, db, *rest):
    return [BIN, "--config", manifest["config"], "--db", db, *rest]


def q(args):
    return " ".join(args)


def whole_process(manifest, run_dir, quick):
    db = next(d for d in manifest["dbs"] if d["name"] == "v31-1000")["path"]
    resolve = cli_args(manifest, db, "resolve", manifest["session"], "--agent",
                       manifest["agent"], "--json")
    context = cli_args(manifest, db, "context", manifest["session"], "--agent",
                       manifest["agent"], "--json")
    # A policy given as a file is compiled at every start (no compile cache).
    policy_file = cli_args(manifest, db, "--policy", os.path.join(ROOT, "target/policy/session_switch.wasm"),
                           "resolve", manifest["session"], "--agent", manifest["agent"], "--json")
    legacy = [sys.executable, os.path.join(BENCH, "legacy_baseline.py"), "resolve", "--db", db,
            "--session", manifest["session"]]
    runs, warm = (10, 2) if quick else (50, 5)
    warm_res = hyperfine([q(resolve), q(context), q(legacy), q(policy_file)], runs, warm,
                         names=["cli resolve (warm)", "cli context 1k (warm)", "legacy resolve",
                                "cli resolve, a policy file"])
    # Cold: the binary and the database read from disk again (the page cache
    # dropped before each run), as the first command after a boot.
    cold = hyperfine([q(resolve)], max(5, runs // 3), 1,
                     prepare="sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'")
    return {"resolve_warm": warm_res[0], "context_1k_warm": warm_res[1],
            "seed_resolve_process": warm_res[2], "resolve_policy_file": warm_res[3],
            "resolve_cold": cold[0]}


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
    legacy = [sys.executable, os.path.join(BENCH, "legacy_baseline.py")]
    s, a = manifest["session"], manifest["agent"]
    return {
        "cli_resolve_kib": max_rss_kib(cli_args(manifest, small, "resolve", s, "--agent", a, "--json")),
        "cli_resolve_policy_file_kib": max_rss_kib(cli_args(
            manifest, small, "--policy", os.path.join(ROOT, "target/policy/session_switch.wasm"),
            "resolve", s, "--agent", a, "--json"), 3),
        "cli_context_10k_kib": max_rss_kib(cli_args(manifest, big, "context", s, "--agent", a, "--json")),
        "seed_resolve_kib": max_rss_kib(legacy + ["resolve", "--db", small, "--session", s]),
        "seed_context_10k_kib": max_rss_kib(legacy + ["context", "--db", big, "--session", s]),
    }


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
    cli = manifest["cli_session"]

    def send_cmd(transport, text):
        return [BIN, "--config", configs[transport], "--db", db,
                "send", text, cli, "--agent", "mohe", "--json"]

    legacy = [sys.executable, os.path.join(BENCH, "legacy_baseline.py"), "send", "bench-legacy-ctl", cli,
            "--agent", "mohe", "--db", db, "--room", room, "--from-jid", f"mohe@{domain}",
            "--ctl", ej["EJ_CTL"]]
    for cmd in (send_cmd("http", "bench check"), ):
        r = sh(cmd)
        assert json.loads(r.stdout)["delivered"], r.stdout
    http = hyperfine([q(send_cmd("http", "bench-http"))], 10 if quick else 30, 3)[0]
    floor = http_send_floor(send_cmd("http", "bench-floor"), 3 if quick else 10)
    ctl = alternating_pairs(send_cmd("ejabberdctl", "bench-ctl"), legacy, 3 if quick else 12)
    return {"http": http, "http_floor": floor, "ejabberdctl_pairs": ctl}


def http_send_floor(send, runs):
    """What no `send` through HTTP can go below: the process start
    (`--version`, hyperfine) plus the write's own `fsync`s (their time in
    the kernel, `strace -T`, summed per send; median over `runs` sends)."""
    start = hyperfine([q([BIN, "--version"])], 30, 3)[0]["median_ms"]
    fsyncs, counts = [], []
    trace = os.path.join(OUT, "send.strace")
    for _ in range(runs):
        sh(["strace", "-f", "-T", "-e", "trace=fsync,fdatasync", "-o", trace, *send])
        times = [float(t) for t in re.findall(r"<([\d.]+)>\s*$", open(trace).read(), re.M)]
        fsyncs.append(sum(times) * 1e3)
        counts.append(len(times))
    fsync_ms = statistics.median(fsyncs)
    return {"start_ms": start, "fsync_ms": fsync_ms, "fsyncs": statistics.median(counts),
            "floor_ms": start + fsync_ms}


def alternating_pairs(ours, legacy, pairs):
    """`pairs` pairs of whole sends, ours and the legacy tool's back to back, the
    one that goes first alternating pair by pair (after one of each to
    warm up): each send's wall time (ms), and the median of the pairs'
    ratios, on which the target is judged (the machine's drift falls on
    both halves of a pair alike)."""
    def timed(cmd):
        t = time.perf_counter()
        r = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit(f"[bench] failed ({r.returncode}): {q(cmd)}\n{r.stderr[-800:]}")
        return (time.perf_counter() - t) * 1e3
    timed(ours), timed(legacy)
    mine, theirs = [], []
    for i in range(pairs):
        if i % 2 == 0:
            mine.append(timed(ours))
            theirs.append(timed(legacy))
        else:
            theirs.append(timed(legacy))
            mine.append(timed(ours))
    log(f"ejabberdctl sends, ours vs the legacy tool's (ms): {[round(x) for x in mine]} vs {[round(x) for x in theirs]}")
    return {"ours_ms": mine, "seed_ms": theirs, "pairs": pairs,
            "ours_median_ms": statistics.median(mine), "seed_median_ms": statistics.median(theirs),
            "ratio_median": statistics.median(a / b for a, b in zip(mine, theirs))}


def room(manifest, run_dir, quick):
    """The room benchmark (bench/room.py): the bot against the real ejabberd
    and a stand-in for Hermes's API server, beside the slixmpp/aiohttp
    baseline, on the v22 (WAL) and v31 (DELETE) fixtures at 1,000 rows."""
    if "EJ_CTL" not in os.environ:
        return {"skipped": "no ejabberd (run through tests/ejabberd/with-ejabberd.sh, as `make bench` does)"}
    if not os.path.exists(VENV_PYTHON):
        return {"skipped": f"{VENV_PYTHON} is missing (`make venv`)"}
    dbs = {d["name"]: d["path"] for d in manifest["dbs"]}
    out = os.path.join(OUT, "room.json")
    sh([VENV_PYTHON, os.path.join(BENCH, "room.py"), "--bin", BIN,
        "--db", f"v22={dbs['v22-1000']}", "--db", f"v31={dbs['v31-1000']}",
        "--work", os.path.join(run_dir, "room"), "--out", out] + (["--quick"] if quick else []),
       capture=False)
    with open(out) as f:
        figures = json.load(f)
    figures["build"] = BIN
    return figures


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
    for tool in ("strace",) if os.environ.get("ROOM_ONLY") else ("hyperfine", "/usr/bin/time", "strace"):
        if not shutil.which(tool):
            sys.exit(f"[bench] {tool} is missing: apt-get install -y hyperfine time strace")
    global OUT
    OUT = os.path.abspath(args.out)
    os.makedirs(OUT, exist_ok=True)
    run_dir = os.path.join(args.out, "run")
    shutil.rmtree(run_dir, ignore_errors=True)
    res = {"started": time.strftime("%Y-%m-%d %H:%M %Z"), "cpu": cpu_name(),
           "commit": commit(),
           "load_before": os.getloadavg(), "quick": args.quick}
    if res["load_before"][0] > 1.5:
        log(f"WARNING: load average {res['load_before'][0]:.2f} > 1.5: figures will be noisy")
    fixtures = os.environ.get("HERMES_FIXTURES", os.path.join(ROOT, "../shared/fixtures/hermes"))
    made = sh([sys.executable, os.path.join(BENCH, "make_dbs.py"), run_dir, "--fixtures", fixtures])
    manifest = last_json(made.stdout)
    if os.environ.get("ROOM_ONLY"):
        room_only(res, manifest, run_dir, args)
        return
    res["manifest"] = manifest
    res["seed_python"] = legacy_python(manifest, args.quick)
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
    res["room"] = room(manifest, run_dir, args.quick)
    res["load_after"] = os.getloadavg()
    # The measurements first: a report that fails to render keeps them.
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1, ensure_ascii=False)
    text, checks = report(res)
    res["targets"] = [{"target": n, "met": ok, "measured": g} for n, ok, g in checks]
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1, ensure_ascii=False)
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(text)
    write_page(res, os.path.join(ROOT, "docs", "src"))
    print(text)
    shutil.rmtree(run_dir, ignore_errors=True)


def room_only(res, manifest, run_dir, args):
    """`ROOM_ONLY=1`: the room benchmark alone. Its figures replace the room's
    in OUT/results.json when a full run left one (the page is then written
    again, saying which version measured the room); else OUT/report.md holds
    the room's section only."""
    started = {k: res[k] for k in ("started", "cpu", "commit", "load_before")}
    figures = room(manifest, run_dir, args.quick)
    figures.update(started)
    path = os.path.join(args.out, "results.json")
    full = None
    if os.path.exists(path):
        with open(path) as f:
            full = json.load(f)
    if full and "criterion" in full:
        full["room"] = figures
        text, checks = report(full)
        full["targets"] = [{"target": n, "met": ok, "measured": g} for n, ok, g in checks]
        write_page(full, os.path.join(ROOT, "docs", "src"))
    else:
        full = {"room": figures}
        lines, checks = room_report(figures)
        lines += ["", "| target | result | measured |", "|---|---|---|"]
        lines += [f"| {n} | {'met' if ok else '**missed**'} | {g} |" for n, ok, g in checks]
        text = "\n".join(lines) + "\n"
    with open(path, "w") as f:
        json.dump(full, f, indent=1, ensure_ascii=False)
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(text)
    print(text)
    shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
