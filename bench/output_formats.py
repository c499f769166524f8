"""Benchmark of the sink formats: Branch over a generated log written as TSV, Parquet and JSON
Lines, in the same run.

    python bench/output_formats.py [--lines 2000000] [--seed 7] [--repeat 3]

Each format runs ``--repeat`` times, interleaved (a noisy neighbour hurts all alike), from a cleared output.
Reports the median wall time, CPU time (user + system) and peak RSS of each, and the ratio Parquet / TSV of
the wall times against the target (<= 1.5), with the ratio of the CPU times beside it (on a machine shared
with other work the wall ratio moves toward the CPU ratio: the Parquet run's third thread, the encoder,
finds no idle core); the system load before and after. Checks that the Parquet and JSON Lines outputs
hold the TSV's records; writes bench/out/output_formats.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from run import HERE, OUT, measure_usage

LIMIT = 1.5


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    log = os.path.join(OUT, f"access-{args.lines}-{args.seed}-g2.log")
    logetl = [sys.executable, "-m", "logetl"]
    if not os.path.exists(log):
        subprocess.run([*logetl, "generate", "--lines", str(args.lines), "--seed", str(args.seed), log], check=True)
    env_off = {**os.environ, "LOGETL_MONITOR": "off"}
    os.environ.update(env_off)
    times: dict[str, list[float]] = {f: [] for f in ("tsv", "parquet", "jsonl")}
    cpu: dict[str, list[float]] = {f: [] for f in times}
    rss: dict[str, list[float]] = {f: [] for f in times}
    load_before = os.getloadavg()
    for i in range(args.repeat):
        for fmt in times:
            outs = [os.path.join(OUT, f"formats-{fmt}-{n}") for n in (1, 2)]
            wall, used, peak = measure_usage([*logetl, "branch", "--input", log, "--output1", outs[0],
                                              "--output2", outs[1], "--output-format", fmt, "-q"], outs)
            times[fmt].append(wall)
            cpu[fmt].append(used)
            rss[fmt].append(peak)
            print(f"  run {i + 1}/{args.repeat} {fmt:<8} {wall:6.2f} s  CPU {used:5.2f} s  {peak:6.0f} MB", flush=True)
    check(os.path.join(OUT, "formats-tsv-1"), os.path.join(OUT, "formats-parquet-1"),
          os.path.join(OUT, "formats-jsonl-1"))
    med = {f: statistics.median(v) for f, v in times.items()}
    med_cpu = {f: statistics.median(v) for f, v in cpu.items()}
    ratio = med["parquet"] / med["tsv"]
    result = {"lines": args.lines, "median_s": med, "median_cpu_s": med_cpu,
              "peak_rss_mb": {f: max(v) for f, v in rss.items()}, "runs_s": times, "runs_cpu_s": cpu,
              "parquet_over_tsv": ratio, "parquet_over_tsv_cpu": med_cpu["parquet"] / med_cpu["tsv"],
              "limit": LIMIT, "met": ratio <= LIMIT, "load_average_before": load_before,
              "load_average": os.getloadavg()}
    with open(os.path.join(OUT, "output_formats.json"), "w") as f:
        json.dump(result, f, indent=2)
    for fmt in med:
        print(f"{fmt:<8} median {med[fmt]:6.2f} s   CPU {med_cpu[fmt]:5.2f} s   peak RSS {max(rss[fmt]):5.0f} MB")
    print(f"Parquet / TSV = {ratio:.2f} (limit {LIMIT}: {'met' if ratio <= LIMIT else 'NOT met'}); "
          f"in CPU time {result['parquet_over_tsv_cpu']:.2f}; JSON Lines / TSV = {med['jsonl'] / med['tsv']:.2f}")
    print("system load before {:.2f} {:.2f} {:.2f}, after {:.2f} {:.2f} {:.2f}".format(*load_before,
                                                                                    *result["load_average"]))


def check(tsv_dir: str, parquet_dir: str, jsonl_dir: str) -> None:
    """The three outputs hold the same records (compared as Polars frames of strings)."""
    import polars as pl

    names = ["ip", "time", "request", "response", "size"]
    tsv = pl.read_csv(os.path.join(tsv_dir, "part-00000"), separator="\t", has_header=False, quote_char=None,
                      schema={n: pl.String for n in names}, empty_string_is_null=False)
    parquet = pl.read_parquet(os.path.join(parquet_dir, "part-00000.parquet"))
    jsonl = pl.read_ndjson(os.path.join(jsonl_dir, "part-00000.jsonl"), schema={n: pl.String for n in names})
    if not (tsv.equals(parquet) and tsv.equals(jsonl)):
        raise SystemExit("the formats' outputs differ")


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    main()
