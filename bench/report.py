"""Benchmark of ``logetl report`` against GoAccess on the same generated combined log, same run.

    python bench/report.py [--lines 2000000] [--seed 7] [--growth 200000,1000000]

Generates a seeded log with ``logetl generate`` (kept in bench/out/), then runs, each in a fresh process:

- **goaccess**: ``goaccess LOG --log-format=COMBINED -o report.json`` (Debian's package; its progress
  output off with ``--no-progress``);
- **logetl**: ``logetl report --input LOG --output DIR --overwrite -q`` on the local engine.

Reports the wall time, CPU time and peak RSS of each (``bench/run.py``'s measurement: wait4 of the fresh
process) and the ratio logetl / goaccess of the wall times against the target (<= 0.05), and checks that
both count the same requests, failed requests, unique visitors, bandwidth, visitors per day and status
codes. ``--growth``: further log sizes logetl alone runs at, to show how its peak RSS grows with the
input. Writes bench/out/report.json and report.md.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")
sys.path.insert(0, HERE)

from run import measure_usage  # noqa: E402
from scale import log_of  # noqa: E402

TARGET = 0.05   # logetl / goaccess, wall time


def run_logetl(log: str, out: str) -> tuple[tuple[float, float, float], dict]:
    cmd = [sys.executable, "-m", "logetl", "report", "--input", log, "--output", out, "--overwrite", "-q"]
    usage = measure_usage(cmd, [out])
    with open(os.path.join(out, "report.json"), encoding="utf-8") as f:
        return usage, json.load(f)


def run_goaccess(log: str, out: str) -> tuple[tuple[float, float, float], dict]:
    cmd = ["goaccess", log, "--log-format=COMBINED", "-o", out, "--no-progress"]
    usage = measure_usage(cmd, [out])
    with open(out, encoding="utf-8") as f:
        return usage, json.load(f)


def differences(ours: dict, theirs: dict) -> list[str]:
    """What the two reports count differently (of what both define alike)."""
    out = []
    for key in ("total_requests", "valid_requests", "failed_requests", "unique_visitors", "bandwidth"):
        if ours["general"][key] != theirs["general"][key]:
            out.append(f"{key}: logetl {ours['general'][key]}, goaccess {theirs['general'][key]}")
    days = sorted((f"{d['data'][:4]}-{d['data'][4:6]}-{d['data'][6:]}", d["hits"]["count"], d["visitors"]["count"],
                   d["bytes"]["count"]) for d in theirs["visitors"]["data"])
    if [(r["day"], r["hits"], r["visitors"], r["bytes"]) for r in ours["visitors"]] != days:
        out.append("visitors per day differ")
    codes = sorted((i["data"].split(" ")[0], i["hits"]["count"]) for g in theirs["status_codes"]["data"]
                   for i in g["items"])
    if [(r["code"], r["hits"]) for r in ours["status_codes"]] != codes:
        out.append("status codes differ")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--growth", default="200000,1000000",
                    help="comma-separated log sizes logetl alone runs at (peak RSS against the input)")
    args = ap.parse_args()
    if shutil.which("goaccess") is None:
        sys.exit("goaccess is not installed (apt-get install goaccess)")
    os.makedirs(OUT, exist_ok=True)
    log = log_of(args.lines, args.seed)
    (l_wall, l_cpu, l_rss), ours = run_logetl(log, os.path.join(OUT, "report-logetl"))
    (g_wall, g_cpu, g_rss), theirs = run_goaccess(log, os.path.join(OUT, "report-goaccess.json"))
    growth = []
    for n in (int(x) for x in args.growth.split(",") if x):
        (wall, _cpu, rss), _ = run_logetl(log_of(n, args.seed), os.path.join(OUT, "report-logetl-growth"))
        growth.append({"lines": n, "wall_s": round(wall, 2), "peak_rss_mb": round(rss)})
    growth.append({"lines": args.lines, "wall_s": round(l_wall, 2), "peak_rss_mb": round(l_rss)})
    report = {
        "lines": args.lines, "seed": args.seed, "target": TARGET,
        "logetl": {"wall_s": round(l_wall, 2), "cpu_s": round(l_cpu, 2), "peak_rss_mb": round(l_rss)},
        "goaccess": {"wall_s": round(g_wall, 2), "cpu_s": round(g_cpu, 2), "peak_rss_mb": round(g_rss)},
        "ratio": round(l_wall / g_wall, 4), "differences": differences(ours, theirs),
        "growth": sorted(growth, key=lambda g: g["lines"]), "cores": os.cpu_count(),
        "load_average_1_5_15": os.getloadavg(),
    }
    with open(os.path.join(OUT, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    text = markdown(report)
    with open(os.path.join(OUT, "report.md"), "w") as f:
        f.write(text)
    print(text)


def markdown(r: dict) -> str:
    lines = [f"logetl report vs goaccess, {r['lines']:,}-line combined log (seed {r['seed']}), "
             f"{r['cores']} cores, system load at the end (1, 5, 15 min): "
             f"{', '.join(f'{x:.1f}' for x in r['load_average_1_5_15'])}", "",
             "| tool | wall s | CPU s | peak RSS MB |", "|---|---:|---:|---:|"]
    for tool in ("logetl", "goaccess"):
        t = r[tool]
        lines.append(f"| {tool} | {t['wall_s']} | {t['cpu_s']} | {t['peak_rss_mb']} |")
    verdict = "met" if r["ratio"] <= r["target"] else "NOT met"
    lines += ["", f"logetl / goaccess wall time: {r['ratio']} (target <= {r['target']}: {verdict})",
              "same totals, visitors per day and status codes: "
              + ("yes" if not r["differences"] else "no: " + "; ".join(r["differences"])),
              "", "logetl's peak RSS against the input:", "",
              "| lines | wall s | peak RSS MB |", "|---:|---:|---:|"]
    lines += [f"| {g['lines']:,} | {g['wall_s']} | {g['peak_rss_mb']} |" for g in r["growth"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
