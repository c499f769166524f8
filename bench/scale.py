"""Scale benchmark: Branch, Filter and Join at growing input sizes; peak RSS and lines/s of each.

    python bench/scale.py [--sizes 2000000,10000000,50000000] [--repeat 1] [--chart bench/scale.png]

For each size a seeded log is generated with ``logetl generate`` (kept in bench/out/), then each program
runs on it from a cleared output (median wall time of ``--repeat``; peak RSS from wait4). Targets:
peak RSS <= 512 MB for every program at the largest size, and lines/s at the largest size within
1.3x of lines/s at the smallest. Correctness: Join at the smallest size must be byte-identical to the
plain-Python baseline (../shared/bench/python_join.py) on the log without the lines logetl traps, and at
the largest to ``bench/independent_join.py`` (Python re + coreutils ``sort -s``, no logetl code).
Writes bench/out/scale.json and the chart of peak RSS against input size (docs/performance.md).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
sys.path.insert(0, HERE)

from run import measure  # noqa: E402  (same measurement as the main benchmark)

RSS_LIMIT_MB = 512
SLOWDOWN_LIMIT = 1.3
PROGRAMS = ("branch", "filter", "join")


def log_of(lines: int, seed: int) -> str:
    from logetl.generate import VERSION

    path = os.path.join(OUT, f"access-{lines}-{seed}-g{VERSION}.log")
    if not os.path.exists(path):
        print(f"generating {lines:,} lines -> {path}", flush=True)
        subprocess.run([sys.executable, "-m", "logetl", "generate", "--lines", str(lines), "--seed", str(seed),
                        path + ".tmp"], check=True)
        os.replace(path + ".tmp", path)
    return path


def command(program: str, log: str, out: str) -> tuple[list[str], list[str]]:
    logetl = [sys.executable, "-m", "logetl", program, "-q"]
    if program == "branch":
        return logetl + ["--input", log, "--output1", out + "-1", "--output2", out + "-2"], [out + "-1", out + "-2"]
    if program == "filter":
        return logetl + ["--input", log, "--output", out], [out]
    return logetl + [log, out], [out]


def same(a: str, b: str) -> bool:
    return subprocess.run(["cmp", "-s", a, b]).returncode == 0


def check_small(log: str, join_out: str, shared: str) -> bool:
    """Join against the plain-Python baseline, on the log without the lines logetl traps."""
    trap, clean, expected = (os.path.join(OUT, n) for n in ("scale-trap", "scale-clean.log", "scale-pj"))
    shutil.rmtree(trap, ignore_errors=True)
    shutil.rmtree(trap + "-out", ignore_errors=True)
    subprocess.run([sys.executable, "-m", "logetl", "branch", "-q", "--input", log, "--output1", trap + "-out",
                    "--output2", trap + "-out2", "--trap", trap, "--overwrite"], check=True)
    with open(os.path.join(trap, "part-00000"), "rb") as f:
        trapped = set(f.read().split(b"\n"))
    with open(log, "rb") as src, open(clean, "wb") as dst:
        for line in src:
            if line.rstrip(b"\n") not in trapped:
                dst.write(line)
    subprocess.run([sys.executable, os.path.join(shared, "bench", "python_join.py"), clean, expected], check=True)
    ok = same(os.path.join(join_out, "part-00000"), expected)
    for p in (trap, trap + "-out", trap + "-out2"):
        shutil.rmtree(p, ignore_errors=True)
    os.remove(clean)
    return ok


def check_large(log: str, join_out: str) -> bool:
    expected = os.path.join(OUT, "scale-independent.tsv")
    subprocess.run([sys.executable, os.path.join(HERE, "independent_join.py"), log, expected, "--tmp", OUT],
                   check=True)
    ok = same(os.path.join(join_out, "part-00000"), expected)
    os.remove(expected)
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000000,10000000,50000000")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--chart", default=os.path.join(HERE, "scale.png"))
    ap.add_argument("--keep-logs", action="store_true", help="keep the generated logs in bench/out")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    os.makedirs(OUT, exist_ok=True)
    results: dict[str, dict[int, dict]] = {p: {} for p in PROGRAMS}
    checks = {}
    for n in sizes:
        log = log_of(n, args.seed)
        size_gb = os.path.getsize(log) / 1e9
        for program in PROGRAMS:
            out = os.path.join(OUT, f"scale-{program}")
            cmd, clear = command(program, log, out)
            runs = [measure(cmd, clear) for _ in range(args.repeat)]
            wall = statistics.median(w for w, _ in runs)
            rss = max(m for _, m in runs)
            results[program][n] = {"wall_s": round(wall, 2), "lines_per_s": round(n / wall),
                                   "peak_rss_mb": round(rss), "log_gb": round(size_gb, 2)}
            print(f"{n:>12,} lines ({size_gb:5.1f} GB)  {program:<7} {wall:8.2f} s  {n / wall / 1e6:6.2f} M lines/s"
                  f"  peak RSS {rss:6.0f} MB", flush=True)
        join_out = os.path.join(OUT, "scale-join")
        if n == sizes[0] and os.path.isdir(os.path.join(args.shared, "bench")):
            checks[f"join at {n:,} lines = plain-Python baseline"] = check_small(log, join_out, args.shared)
        if n == sizes[-1] and n != sizes[0]:
            checks[f"join at {n:,} lines = independent result (re + sort -s)"] = check_large(log, join_out)
        for program in PROGRAMS:
            for d in command(program, log, os.path.join(OUT, f"scale-{program}"))[1]:
                shutil.rmtree(d, ignore_errors=True)
        if not args.keep_logs and n != sizes[0]:
            os.remove(log)

    small, large = sizes[0], sizes[-1]
    verdicts = []
    print(f"\n{'target':<44}{'value':>10}{'limit':>10}  met")
    for p in PROGRAMS:
        rss = results[p][large]["peak_rss_mb"]
        verdicts.append({"target": f"{p} peak RSS at {large:,} lines (MB)", "value": rss, "limit": RSS_LIMIT_MB,
                         "met": rss <= RSS_LIMIT_MB})
        slow = results[p][small]["lines_per_s"] / results[p][large]["lines_per_s"]
        verdicts.append({"target": f"{p} lines/s at {small:,} / at {large:,}", "value": round(slow, 3),
                         "limit": SLOWDOWN_LIMIT, "met": slow <= SLOWDOWN_LIMIT})
    for v in verdicts:
        print(f"{v['target']:<44}{v['value']:>10}{v['limit']:>10}  {'yes' if v['met'] else 'NO'}")
    for k, ok in checks.items():
        print(f"{k}: {'identical' if ok else 'DIFFERENT'}")
    with open(os.path.join(OUT, "scale.json"), "w") as f:
        json.dump({"sizes": sizes, "results": results, "targets": verdicts, "checks": checks}, f, indent=2)
    draw(results, sizes, args.chart)


def draw(results, sizes, chart: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install 'logetl[bench]'): no chart drawn")
        return
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4), dpi=110)
    for p in PROGRAMS:
        xs = [n / 1e6 for n in sizes]
        a.plot(xs, [results[p][n]["peak_rss_mb"] for n in sizes], marker="o", label=p)
        b.plot(xs, [results[p][n]["lines_per_s"] / 1e6 for n in sizes], marker="o", label=p)
    a.axhline(RSS_LIMIT_MB, color="#aa0000", linestyle="--", linewidth=1, label="limit 512 MB")
    a.set_xlabel("input (million lines)")
    a.set_ylabel("peak RSS (MB)")
    a.set_ylim(bottom=0)
    a.set_title("peak RSS against input size")
    b.set_xlabel("input (million lines)")
    b.set_ylabel("million lines/s")
    b.set_ylim(bottom=0)
    b.set_title("throughput against input size")
    for ax in (a, b):
        ax.legend()
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(chart)
    print(f"chart: {chart}")


if __name__ == "__main__":
    main()
