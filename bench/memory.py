"""Memory benchmark of user-shaped flows: peak RSS against ``--memory-limit``, and how it grows with the input.

    python bench/memory.py [--sizes 200000,1000000,2000000] [--limits 384M,512M] [--seed 5]

The flows are in bench/memory_flows/ (blocking operators a data engineer writes: two Tops beside a GroupBy
with count_distinct, a GroupBy of nearly unique keys, a Sort and a Unique of every record). Each runs on
a seeded generated log (kept in bench/out/) at each size and each limit, in a fresh process; the peak RSS
comes from wait4 (bench/run.py's measurement). Printed per flow: peak RSS in MiB, and peak / limit; a run
within its limit has a ratio <= 1. Writes bench/out/memory.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")
FLOWS = os.path.join(HERE, "memory_flows")
sys.path.insert(0, HERE)

from run import measure_usage  # noqa: E402
from scale import log_of  # noqa: E402

from logetl.engines.local.spill import parse_size  # noqa: E402


def outputs(flow: str, out: str) -> list[str]:
    if flow == "top_per_hour":
        return [f"requests={out}-r", f"clients={out}-c"]
    return [f"out={out}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="200000,1000000,2000000")
    ap.add_argument("--limits", default="384M,512M")
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    limits = args.limits.split(",")
    flows = sorted(f[:-3] for f in os.listdir(FLOWS) if f.endswith(".py"))
    results = []
    for lines in sizes:
        log = log_of(lines, args.seed)
        for limit in limits:
            for flow in flows:
                out = os.path.join(OUT, f"memory-{flow}")
                outs = outputs(flow, out)
                cmd = [sys.executable, "-m", "logetl", "run", os.path.join(FLOWS, flow + ".py"), "-q", "--input", log,
                       "--memory-limit", limit] + [a for o in outs for a in ("--output", o)]
                wall, cpu, rss_mb = measure_usage(cmd, [o.split("=", 1)[1] for o in outs])
                ratio = rss_mb * (1 << 20) / parse_size(limit)    # measure_usage's MB are MiB (KiB / 1024)
                results.append({"flow": flow, "lines": lines, "limit": limit, "peak_mib": round(rss_mb, 1),
                                "peak_over_limit": round(ratio, 3), "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)})
                print(f"{flow:18} {lines:>9,} lines  --memory-limit {limit:>5}  peak {rss_mb:7.1f} MiB  "
                      f"peak/limit {ratio:5.2f}  {wall:6.2f} s", flush=True)
    with open(os.path.join(OUT, "memory.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
