"""Benchmark: logetl's programs against the baselines in ../shared/bench, in the same run.

    python bench/run.py [--lines 2000000] [--repeat 3] [--shared ../shared] [--chart bench/results.png]

Generates a seeded log with ``logetl generate`` (kept in bench/out/ for later runs), builds the native
baseline with gcc, then runs every implementation ``--repeat`` times, interleaved so that a noisy
neighbour hurts all of them alike, from a cleared output each time. Reports the median wall time, peak RSS
(of the process tree's largest process, from wait4) and the ratios the targets are stated in; writes
bench/out/results.json and draws the chart bench/results.png.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")

TARGETS = [
    # (label, numerator, denominator, limit)
    ("Branch / plain Python", "logetl branch", "python branch", 0.5),
    ("Branch / native C", "logetl branch", "native branch", 1.5),
    ("Filter / plain Python", "logetl filter", "python filter", 0.4),
    ("Join / plain Python", "logetl join", "python join", 0.4),
]
RSS_LIMITS_MB = {"logetl branch": 256, "logetl filter": 256, "logetl join": 512}   # join: the default --memory-limit


def measure(cmd: list[str], clear: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one run of ``cmd``."""
    wall, _, rss = measure_usage(cmd, clear)
    return wall, rss


def _own_peak() -> None:
    """In the child, before exec: resets its peak RSS to what it holds now. A forked child starts with its
    parent's peak, which Linux carries into the exec'd program's ``ru_maxrss``: without this, every run
    measured by a benchmark that once read a whole log (bench/flows.py) reported at least that much."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def jvm_peak(parent: int, peak: list[int], done) -> None:
    """The largest VmHWM (KiB) seen of the java processes whose parent is ``parent`` (a Spark driver JVM
    that PySpark started: not a child the command waits for, so not in its ``ru_maxrss``), read every
    0.2 s until ``done`` (a threading.Event) is set."""
    while not done.is_set():
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/status") as f:
                    status = dict(line.split(":", 1) for line in f if ":" in line)
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    java = f.read().split(b"\0")[0].endswith(b"java")
            except OSError:
                continue
            if java and int(status.get("PPid", "0")) == parent and "VmHWM" in status:
                peak[0] = max(peak[0], int(status["VmHWM"].split()[0]))
        done.wait(0.2)


def measure_usage(cmd: list[str], clear: list[str], jvm: list | None = None) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system of the process and the children it waited for) and peak
    RSS (MB, of the largest of them) of one run of ``cmd``, from a cleared output. CPU time is worth
    reporting beside wall time on a shared machine: a neighbour's load grows the wall times, the CPU
    times much less. ``jvm``: a list that gets the peak RSS (MB) of the Spark driver JVM the command
    started (``jvm_peak``), 0 when none was seen."""
    for path in clear:
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
    subprocess.run(["sync"], check=False)
    start = time.perf_counter()
    # bytecode caches as on a user's machine: with PYTHONDONTWRITEBYTECODE set (some shells and containers
    # set it) every run would compile logetl's sources again (~40 ms)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=_own_peak, env=env)
    if jvm is not None:
        import threading

        peak, done = [0], threading.Event()
        watcher = threading.Thread(target=jvm_peak, args=(proc.pid, peak, done), daemon=True)
        watcher.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if jvm is not None:
        done.set()
        watcher.join()
        jvm.append(peak[0] / 1024)
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"benchmark command failed: {' '.join(cmd)}\n{err}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--chart", default=os.path.join(HERE, "results.png"))
    ap.add_argument("--spark", action="store_true",
                    help="also time the Spark engine against hand-written PySpark jobs (local[*])")
    ap.add_argument("--spark-repeat", type=int, default=2)
    ap.add_argument("--skip-local", action="store_true", help="only the Spark part")
    args = ap.parse_args()

    baselines = os.path.join(os.path.abspath(args.shared), "bench")
    if not os.path.isdir(baselines):
        raise SystemExit(f"the baselines are not at {baselines} (give --shared)")
    os.makedirs(OUT, exist_ok=True)
    from logetl.generate import VERSION   # a log kept from another generator version has other bytes

    log = os.path.join(OUT, f"access-{args.lines}-{args.seed}-g{VERSION}.log")
    if not os.path.exists(log):
        print(f"generating {args.lines:,} lines -> {log}", flush=True)
        subprocess.run([sys.executable, "-m", "logetl", "generate", "--lines", str(args.lines),
                        "--seed", str(args.seed), log], check=True)
    native = os.path.join(OUT, "native_branch")
    subprocess.run(["gcc", "-O2", "-o", native, os.path.join(baselines, "native_branch.c")], check=True)

    py, o = sys.executable, lambda name: os.path.join(OUT, name)
    logetl = [py, "-m", "logetl"]
    jobs = {
        "native branch": ([native, log, o("nb1"), o("nb2")], [o("nb1"), o("nb2")]),
        "python branch": ([py, os.path.join(baselines, "python_branch.py"), log, o("pb1"), o("pb2")],
                          [o("pb1"), o("pb2")]),
        "logetl branch": (logetl + ["branch", "-q", "--input", log, "--output1", o("lb1"), "--output2", o("lb2")],
                          [o("lb1"), o("lb2")]),
        "python filter": ([py, os.path.join(baselines, "python_filter.py"), log, o("pf")], [o("pf")]),
        "logetl filter": (logetl + ["filter", "-q", "--input", log, "--output", o("lf")], [o("lf")]),
        "python join": ([py, os.path.join(baselines, "python_join.py"), log, o("pj")], [o("pj")]),
        "logetl join": (logetl + ["join", "-q", log, o("lj")], [o("lj")]),
    }
    if args.skip_local:
        jobs = {}
    runs: dict[str, list[tuple[float, float]]] = {k: [] for k in jobs}
    for i in range(args.repeat):
        for name, (cmd, clear) in jobs.items():
            runs[name].append(measure(cmd, clear))
            print(f"  run {i + 1}/{args.repeat} {name:<14} {runs[name][-1][0]:7.2f} s", flush=True)

    size_mb = os.path.getsize(log) / 1e6
    spark = run_spark(log, o, logetl, args.spark_repeat) if args.spark else None
    if args.skip_local:
        with open(os.path.join(OUT, "results-spark.json"), "w") as f:
            json.dump(spark, f, indent=2)
        return
    results = {name: {"median_s": statistics.median(w for w, _ in r), "runs_s": [round(w, 3) for w, _ in r],
                      "peak_rss_mb": max(m for _, m in r)} for name, r in runs.items()}
    print(f"\n{args.lines:,} lines, {size_mb:,.0f} MB, median of {args.repeat} runs, "
          f"{os.cpu_count()} cores, Python {sys.version.split()[0]}")
    print(f"{'implementation':<16}{'wall (s)':>10}{'peak RSS (MB)':>16}")
    for name, r in results.items():
        print(f"{name:<16}{r['median_s']:>10.2f}{r['peak_rss_mb']:>16.0f}")
    print(f"\n{'target':<24}{'ratio':>8}{'limit':>8}  met")
    verdicts = []
    for label, num, den, limit in TARGETS:
        ratio = results[num]["median_s"] / results[den]["median_s"]
        verdicts.append({"target": label, "ratio": round(ratio, 3), "limit": limit, "met": ratio <= limit})
        print(f"{label:<24}{ratio:>8.2f}{limit:>8.2f}  {'yes' if ratio <= limit else 'NO'}")
    for name, limit in RSS_LIMITS_MB.items():
        rss = results[name]["peak_rss_mb"]
        verdicts.append({"target": f"{name} peak RSS (MB)", "value": round(rss), "limit": limit, "met": rss <= limit})
        print(f"{name + ' peak RSS':<24}{rss:>7.0f}M{limit:>7}M  {'yes' if rss <= limit else 'NO'}")

    # correctness beside speed: the baselines skip parts of the line contract (they accept invalid UTF-8),
    # so they are run once more on the log without the lines logetl traps, and must then give its bytes
    same = check_against_baselines(log, baselines, o, logetl)
    print("\nlogetl (whole log) byte-identical to the baseline (log without trapped lines):", same)

    restart = measure_restart(log, logetl, o, args.repeat)
    print(f"\nJoin rerun after a failure at step join: {restart['rerun_s']:.2f} s, "
          f"{restart['fraction']:.0%} of a full run ({restart['full_s']:.2f} s)")

    report = {"spark": spark, "restart": restart, "lines": args.lines, "bytes": os.path.getsize(log), "repeat": args.repeat, "results": results,
              "targets": verdicts, "identical": same}
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump(report, f, indent=2)
    draw(results, args, size_mb)


def run_spark(log: str, o, logetl: list[str], repeat: int) -> dict:
    """logetl --hdfs against hand-written PySpark jobs doing the same work, both on local[*], each run a
    fresh process (JVM start included in both), interleaved; outputs must be byte-identical."""
    py = sys.executable
    hand = os.path.join(HERE, "spark_handwritten.py")
    jobs = {
        "handwritten branch": ([py, hand, "branch", log, o("hb1"), o("hb2")], [o("hb1"), o("hb2")]),
        "logetl spark branch": (logetl + ["branch", "-q", "--hdfs", "--master", "local[*]", "--input", log,
                                          "--output1", o("sb1"), "--output2", o("sb2")], [o("sb1"), o("sb2")]),
        "handwritten join": ([py, hand, "join", log, o("hj"), o("hj-ckpt")], [o("hj"), o("hj-ckpt")]),
        "logetl spark join": (logetl + ["join", "-q", "--hdfs", "--master", "local[*]", log, o("sj")], [o("sj")]),
    }
    runs: dict[str, list[float]] = {k: [] for k in jobs}
    for i in range(repeat):
        for name, (cmd, clear) in jobs.items():
            runs[name].append(measure(cmd, clear)[0])
            print(f"  run {i + 1}/{repeat} {name:<20} {runs[name][-1]:7.2f} s", flush=True)

    def cat(d: str) -> bytes:
        return b"".join(open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d)) if n.startswith("part-"))

    same = {"branch": cat(o("hb1")) == cat(o("sb1")) == cat(o("sb2")), "join": cat(o("hj")) == cat(o("sj"))}
    med = {k: statistics.median(v) for k, v in runs.items()}
    ratios = {"branch": med["logetl spark branch"] / med["handwritten branch"],
              "join": med["logetl spark join"] / med["handwritten join"]}
    print(f"\nSpark engine (local[*]), median of {repeat}:")
    for k, v in med.items():
        print(f"  {k:<22}{v:8.2f} s")
    for k, r in ratios.items():
        print(f"  {k} logetl / hand-written: {r:.2f} (limit 1.20) {'yes' if r <= 1.2 else 'NO'}")
    print(f"  byte-identical: {same}")
    return {"median_s": {k: round(v, 2) for k, v in med.items()}, "runs_s": runs,
            "ratios": {k: round(v, 3) for k, v in ratios.items()}, "identical": same}


def measure_restart(log: str, logetl: list[str], o, repeat: int) -> dict:
    """Full Join runs against reruns that restart after the checkpoint of a run failed at ``join``."""
    full, rerun = [], []
    env_fail = {**os.environ, "LOGETL_FAIL_AT": "join"}
    for _ in range(repeat):
        full.append(measure(logetl + ["join", "-q", log, o("rj")], [o("rj"), o(".rj.logetl-work")])[0])
        shutil.rmtree(o("rj"), ignore_errors=True)
        failed = subprocess.run(logetl + ["join", "-q", log, o("rj")], env=env_fail, stderr=subprocess.DEVNULL)
        assert failed.returncode == 1
        rerun.append(measure(logetl + ["join", "-q", log, o("rj")], [])[0])
        same = subprocess.run(["cmp", "-s", o("rj/part-00000"), o("lj/part-00000")]).returncode == 0
        if not same:
            raise SystemExit("the restarted Join gave other bytes than a full run")
        shutil.rmtree(o("rj"))
    f, r = statistics.median(full), statistics.median(rerun)
    return {"full_s": round(f, 3), "rerun_s": round(r, 3), "fraction": round(r / f, 3)}


def check_against_baselines(log: str, baselines: str, o, logetl: list[str]) -> dict[str, bool]:
    trap = o("trap")
    shutil.rmtree(trap, ignore_errors=True)
    subprocess.run(logetl + ["filter", "-q", "--input", log, "--output", o("trap-run"), "--overwrite",
                             "--trap", trap], check=True)
    with open(os.path.join(trap, "part-00000"), "rb") as f:
        trapped = set(f.read().split(b"\n"))
    clean = o("clean.log")
    with open(log, "rb") as src, open(clean, "wb") as dst:
        for line in src:
            if line.rstrip(b"\n") not in trapped:
                dst.write(line)
    py = sys.executable
    subprocess.run([py, os.path.join(baselines, "python_branch.py"), clean, o("cb1"), o("cb2")], check=True)
    subprocess.run([py, os.path.join(baselines, "python_filter.py"), clean, o("cf")], check=True)
    subprocess.run([py, os.path.join(baselines, "python_join.py"), clean, o("cj")], check=True)

    def cmp(a: str, b: str) -> bool:
        return subprocess.run(["cmp", "-s", a, b]).returncode == 0

    return {
        "branch output1": cmp(o("lb1/part-00000"), o("cb1")),
        "branch output2": cmp(o("lb2/part-00000"), o("cb1")),
        "filter": cmp(o("lf/part-00000"), o("cf")),
        "join": cmp(o("lj/part-00000"), o("cj")),
    }


def draw(results: dict, args, size_mb: float) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install 'logetl[bench]'): no chart drawn")
        return
    groups = [("Branch", ["native branch", "python branch", "logetl branch"]),
              ("Filter", ["python filter", "logetl filter"]),
              ("Join", ["python join", "logetl join"])]
    colors = {"native": "#888888", "python": "#4C72B0", "logetl": "#DD8452"}
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=110)
    x, ticks, labels = 0, [], []
    for _title, names in groups:
        start = x
        for name in names:
            v = results[name]["median_s"]
            kind = name.split()[0]
            ax.bar(x, v, color=colors[kind], label=kind if kind not in labels else None)
            ax.text(x, v, f"{v:.2f}s", ha="center", va="bottom", fontsize=8)
            labels.append(kind)
            x += 1
        ticks.append((start + x - 1) / 2)
        x += 0.6
    ax.set_xticks(ticks, [g for g, _ in groups])
    ax.set_ylabel("wall time (s), median")
    ax.set_title(f"{args.lines:,} lines ({size_mb:,.0f} MB), {os.cpu_count()} cores: lower is better")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.chart)
    print(f"chart: {args.chart}")


if __name__ == "__main__":
    main()
