"""Benchmark of ``logetl sql``: requests per hour and status, against DuckDB alone and the same flow in the flow API.

    python bench/sql.py [--lines 2000000] [--seed 7] [--repeat 3]

Generates (or reuses) the seeded log of bench/flows.py in bench/out/, then runs, each in a fresh process,
interleaved ``--repeat`` times so that a noisy neighbour hurts all alike:

- **logetl-sql**: ``logetl sql QUERY --input LOG --output DIR --overwrite`` with the query below (DuckDB fed
  the kernel's Arrow batches);
- **duckdb**: DuckDB alone, reading the log as text (``read_csv`` of whole lines) and parsing it with
  ``regexp_extract`` (bench/flows.py's ``duckdb_status_by_hour``, the same result);
- **logetl-flow**: the same question in the flow API (``logetl run examples/status_by_hour.py``).

It checks that the three outputs are byte-identical, reports the median wall time, CPU time and peak RSS of
each, and the ratios logetl-sql / duckdb (target <= 0.3) and logetl-sql / logetl-flow (target <= 1.2), and
writes bench/out/sql.json and sql.md.

The query gives status_by_hour's rows: the hour of the log's own clock (``YYYY-MM-DDTHH``, no conversion to
UTC), for the records whose time is valid (``try_strptime`` of the whole field, zone included).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import flows  # noqa: E402  (the DuckDB baseline and the measure are bench/flows.py's)
from strings import generated  # noqa: E402  (the seeded log, kept in bench/out/ as every benchmark keeps it)

QUERY = """
SELECT strftime(try_strptime(left(time, 20), '%d/%b/%Y:%H:%M:%S'), '%Y-%m-%dT%H') AS hour, response,
       count(*) AS count
FROM log
WHERE try_strptime(time, '%d/%b/%Y:%H:%M:%S %z') IS NOT NULL
GROUP BY hour, response ORDER BY hour, response
"""
TARGETS = {"duckdb": 0.3, "logetl-flow": 1.2}   # logetl-sql / each, at most


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    log = generated(args.lines, args.seed)
    with open(log, "rb") as f:
        limit = flows.reader_limits(f.read())
    if limit:
        raise SystemExit(f"the log {limit}: DuckDB's reader would not read it exactly")

    py, o = sys.executable, lambda name: os.path.join(flows.OUT, name)
    jobs = {
        "logetl-sql": ([py, "-m", "logetl", "sql", QUERY, "--input", log, "--output", o("sql-logetl"), "--overwrite",
                        "-q"], o("sql-logetl")),
        "duckdb": ([py, os.path.join(HERE, "flows.py"), "--one", "duckdb", log, o("sql-duckdb.tsv")],
                   o("sql-duckdb.tsv")),
        "logetl-flow": ([py, "-m", "logetl", "run", flows.EXAMPLE, "--input", log, "--output",
                         f"counts={o('sql-flow')}", "--overwrite", "-q"], o("sql-flow")),
    }
    runs: dict[str, list] = {k: [] for k in jobs}
    for i in range(args.repeat):
        for name, (cmd, clear) in jobs.items():
            runs[name].append(flows.measure(cmd, clear))
            wall, cpu, _ = runs[name][-1]
            print(f"  run {i + 1}/{args.repeat} {name:<11} {wall:7.2f} s wall {cpu:7.2f} s CPU", flush=True)

    outputs = {name: flows.result_bytes(clear) for name, (_, clear) in jobs.items()}
    identical = {name: out == outputs["duckdb"] for name, out in outputs.items()}
    results = {name: {"median_s": round(statistics.median(w for w, _, _ in r), 3),
                      "runs_s": [round(w, 3) for w, _, _ in r],
                      "median_cpu_s": round(statistics.median(c for _, c, _ in r), 3),
                      "peak_rss_mb": round(max(m for _, _, m in r))} for name, r in runs.items()}
    ratios = {other: round(results["logetl-sql"]["median_s"] / results[other]["median_s"], 3) for other in TARGETS}
    report = {"question": "requests per hour and status", "lines": args.lines, "seed": args.seed,
              "bytes": os.path.getsize(log), "repeat": args.repeat, "cores": os.cpu_count(),
              "python": sys.version.split()[0], "versions": flows.versions(), "results": results,
              "output_rows": outputs["duckdb"].count(b"\n"), "identical_to_duckdb": identical,
              "ratios": ratios, "targets": TARGETS,
              "met": {k: ratios[k] <= t for k, t in TARGETS.items()}, "load_average_1_5_15": os.getloadavg()}
    table = markdown(report)
    print("\n" + table)
    with open(o("sql.json"), "w") as f:
        json.dump(report, f, indent=2)
    with open(o("sql.md"), "w") as f:
        f.write(table)
    if not all(identical.values()):
        raise SystemExit(f"outputs differ: {identical}")


def markdown(report: dict) -> str:
    v = report["versions"]
    rows = [f"requests per hour and status, {report['lines']:,} lines ({report['bytes'] / 1e6:,.0f} MB, seed "
            f"{report['seed']}), median of {report['repeat']} runs, {report['cores']} cores, Python "
            f"{report['python']}, Polars {v['polars']}, DuckDB {v['duckdb']}", "",
            "system load at the end (1, 5, 15 min): "
            + ", ".join(f"{x:.1f}" for x in report["load_average_1_5_15"]), "",
            "| implementation | wall (s) | runs (s) | CPU (s) | peak RSS (MB) | output = duckdb's |",
            "|---|---:|---|---:|---:|---|"]
    for name, r in report["results"].items():
        rows.append(f"| {name} | {r['median_s']:.2f} | {', '.join(f'{w:.2f}' for w in r['runs_s'])} | "
                    f"{r['median_cpu_s']:.2f} | {r['peak_rss_mb']} | "
                    f"{'yes' if report['identical_to_duckdb'][name] else 'NO'} |")
    rows.append("")
    for other, target in report["targets"].items():
        rows.append(f"logetl-sql / {other}: **{report['ratios'][other]:.2f}** (target <= {target}: "
                    f"{'met' if report['met'][other] else 'NOT met'})")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    main()
