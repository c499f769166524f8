"""Benchmark: how fast ``logetl generate`` writes a log (lines/s), and its peak RSS.

    python bench/generate_speed.py [--lines 10000000] [--seed 1] [--repeat 3] [--out DIR]

Runs ``logetl generate`` as a user does (a fresh process each time, start-up included) ``--repeat`` times,
writing to a file in ``--out`` (bench/out by default), and reports the median wall time, lines/s, MB/s and
the peak RSS (from wait4). The file is deleted after each run, so page-cache writeback of an earlier run
does not pile up. The system load is printed beside the result: on a shared machine it explains most of
the spread.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")
sys.path.insert(0, HERE)

from run import measure  # noqa: E402  (the same measurement as the main benchmark)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=10_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"generate-speed-{args.lines}-{args.seed}.log")
    cmd = [sys.executable, "-m", "logetl", "generate", "--lines", str(args.lines), "--seed", str(args.seed), path]
    walls, rss, size = [], [], 0
    for i in range(args.repeat):
        wall, peak = measure(cmd, [path])
        size = os.path.getsize(path)
        os.remove(path)
        walls.append(wall)
        rss.append(peak)
        print(f"  run {i + 1}/{args.repeat}: {wall:6.2f} s  {args.lines / wall:12,.0f} lines/s  {peak:5.0f} MB",
              flush=True)
    wall = statistics.median(walls)
    print(f"logetl generate, {args.lines:,} lines ({size / 1e6:,.0f} MB), median of {args.repeat}, "
          f"{os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}:")
    print(f"  {wall:.2f} s, {args.lines / wall:,.0f} lines/s, {size / 1e6 / wall:,.0f} MB/s, "
          f"peak RSS {max(rss):.0f} MB")


if __name__ == "__main__":
    main()
