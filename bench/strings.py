"""Benchmark of regex capture against a match of the same regex, on the local engine.

    python bench/strings.py [--lines 2000000] [--seed 7] [--repeat 3]

The target: a capture (``extract(regex, 1)``) costs at most 2x a ``matches`` of the same regex. On a seeded
log (``logetl generate``, kept in bench/out/ as bench/flows.py keeps it), for each regex:

- **flows**: ``logetl run`` of ``bench/strings_flows/matches.py`` (a filter on ``matches``) and of
  ``extract.py`` (a derive of ``extract``, a filter on it not being null), each in a fresh process,
  interleaved ``--repeat`` times; both count the kept requests per status, so their outputs must be
  byte-identical (checked). Median wall and CPU time and peak RSS of each, and the ratio of the medians.
- **expressions**: the two compiled Polars expressions alone on the parsed request column (in this
  process, best of ``--repeat``), which leaves out the parse and everything else the flows share.

Writes bench/out/strings.json and strings.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")
FLOWS = os.path.join(HERE, "strings_flows")
TARGET = 2.0
#: a path (the group runs to the end of the target: a match can stop at its first /, a capture cannot), a
#: file extension, the second path segment
REGEXES = [r"^[A-Z]+ (/[^ ?]*)", r"\.([a-z0-9]+) HTTP/", r"^[A-Z]+ /[^/ ]+/([^/ ?]+)"]


def generated(lines: int, seed: int) -> str:
    from logetl.generate import VERSION

    os.makedirs(OUT, exist_ok=True)
    log = os.path.join(OUT, f"access-{lines}-{seed}-g{VERSION}.log")
    if not os.path.exists(log):
        print(f"generating {lines:,} lines -> {log}", flush=True)
        subprocess.run([sys.executable, "-m", "logetl", "generate", "--lines", str(lines), "--seed", str(seed),
                        log + ".tmp"], check=True)
        os.replace(log + ".tmp", log)
    return log


def result_bytes(path: str) -> bytes:
    return b"".join(open(os.path.join(path, n), "rb").read() for n in sorted(os.listdir(path))
                    if n.startswith("part-"))


def time_flows(log: str, regex: str, repeat: int) -> dict:
    sys.path.insert(0, HERE)
    from run import measure_usage

    os.environ["LOGETL_BENCH_REGEX"] = regex
    runs: dict[str, list] = {"matches": [], "extract": []}
    for i in range(repeat):
        for name in runs:
            out = os.path.join(OUT, f"strings-{name}")
            cmd = [sys.executable, "-m", "logetl", "run", os.path.join(FLOWS, f"{name}.py"), "--input", log,
                   "--output", f"counts={out}", "--overwrite"]
            runs[name].append(measure_usage(cmd, [out]))
            print(f"  run {i + 1}/{repeat} {name:<7} {runs[name][-1][0]:7.2f} s wall", flush=True)
    same = result_bytes(os.path.join(OUT, "strings-matches")) == result_bytes(os.path.join(OUT, "strings-extract"))
    result = {name: {"median_s": round(statistics.median(w for w, _, _ in r), 3),
                     "median_cpu_s": round(statistics.median(c for _, c, _ in r), 3),
                     "peak_rss_mb": round(max(m for _, _, m in r))} for name, r in runs.items()}
    result["ratio"] = round(result["extract"]["median_s"] / result["matches"]["median_s"], 3)
    result["identical_outputs"] = same
    return result


def time_expressions(log: str, regex: str, repeat: int) -> dict:
    """The compiled expressions alone, over the request column of the whole log."""
    import polars as pl

    import logetl.api as L
    from logetl.engines.local.expressions import Compiler

    pattern = r'^\S+ \S+ \S+ \[[^\]]+\] "(.*?)" '
    with open(log, encoding="utf-8", errors="replace") as f:
        frame = pl.DataFrame({"line": f.read().splitlines()})
    frame = frame.select(pl.col("line").str.extract(pattern, 1).alias("request")).rechunk()
    compile_ = Compiler({"request": "string"})
    exprs = {"matches": compile_(L.col("request").matches(regex)), "extract": compile_(L.col("request").extract(regex))}
    best = {}
    for name, expr in exprs.items():
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            frame.select(expr)
            times.append(time.perf_counter() - start)
        best[name] = round(min(times), 3)
    best["ratio"] = round(best["extract"] / best["matches"], 3)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    log = generated(args.lines, args.seed)
    report = {"lines": args.lines, "seed": args.seed, "repeat": args.repeat, "cores": os.cpu_count(),
              "target": TARGET, "regexes": {}}
    for regex in REGEXES:
        print(f"regex {regex}", flush=True)
        report["regexes"][regex] = {"flows": time_flows(log, regex, args.repeat),
                                    "expressions": time_expressions(log, regex, args.repeat)}
    report["met"] = all(r["flows"]["ratio"] <= TARGET for r in report["regexes"].values())
    report["load_average_1_5_15"] = os.getloadavg()
    table = markdown(report)
    print("\n" + table)
    with open(os.path.join(OUT, "strings.json"), "w") as f:
        json.dump(report, f, indent=2)
    with open(os.path.join(OUT, "strings.md"), "w") as f:
        f.write(table)
    if not all(r["flows"]["identical_outputs"] for r in report["regexes"].values()):
        raise SystemExit("the matches and extract flows wrote different outputs")


def markdown(report: dict) -> str:
    rows = [f"extract vs matches, local engine, {report['lines']:,} generated lines (seed {report['seed']}), "
            f"median of {report['repeat']} runs, {report['cores']} cores; system load at the end: "
            f"{', '.join(f'{x:.1f}' for x in report['load_average_1_5_15'])}", "",
            "| regex | matches flow (s) | extract flow (s) | flow ratio | CPU (s) m / e | peak RSS (MB) m / e "
            "| matches expr (s) | extract expr (s) | expr ratio |", "|---|---:|---:|---:|---|---|---:|---:|---:|"]
    for regex, r in report["regexes"].items():
        f, e = r["flows"], r["expressions"]
        rows.append(f"| `{regex}` | {f['matches']['median_s']:.2f} | {f['extract']['median_s']:.2f} | "
                    f"{f['ratio']:.2f} | {f['matches']['median_cpu_s']:.2f} / {f['extract']['median_cpu_s']:.2f} | "
                    f"{f['matches']['peak_rss_mb']} / {f['extract']['peak_rss_mb']} | {e['matches']:.3f} | "
                    f"{e['extract']:.3f} | {e['ratio']:.2f} |")
    rows += ["", f"flow ratio extract / matches <= {report['target']}: {'met' if report['met'] else 'NOT met'}"]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    main()
