"""Benchmark of the example flow ``status_by_hour``: logetl against Polars and DuckDB, same run.

    python bench/flows.py [--lines 2000000] [--seed 7] [--repeat 3] [--skip-logetl]

Generates a seeded log with ``logetl generate`` (kept in bench/out/ for later runs), then runs, each in a
fresh process, interleaved ``--repeat`` times so that a noisy neighbour hurts all alike:

- **polars**: the raw log read as whole lines (``scan_csv`` with the newline as separator, no quoting),
  the contract's fields by one ``str.extract_groups`` (Rust regex), the valid-time filter by a second regex
  on the time field plus integer checks for the day of the month, ``group_by``, ``sort``, TSV;
- **duckdb**: ``read_csv`` of whole lines, ``regexp_extract`` (RE2) into a struct of the five fields, the
  same valid-time rule (``last_day(make_date(..))`` for the month's length), ``GROUP BY``, ``ORDER BY``,
  ``COPY`` to TSV;
- **logetl**: ``logetl run examples/status_by_hour.py --input LOG --output counts=DIR --overwrite``
  (its output directory's part files, concatenated in name order, are its result).

It checks that all outputs are byte-identical to each other and to tests/support/independent.py's result on the
whole log (plain Python, computed once per log and kept in bench/out/), reports the median wall time, CPU
time and peak RSS of each and the ratio logetl / min(polars, duckdb) of the median wall times against the
target (<= 0.3; the same ratio of CPU times beside it), and writes bench/out/flows.json and flows.md.

Where each baseline had to work around its reader (both are exact on the benchmark's log, checked):

- Polars' CSV reader (like ``scan_lines``) fails on the first invalid UTF-8 byte of the file, so the lines
  are read with ``encoding="utf8-lossy"`` and the lines that are not valid UTF-8 (the contract's malformed
  reason 1) are found by a pass of CPython's UTF-8 decoder over the file (``invalid_utf8_lines``, ~0.3 s
  of 2M lines) and dropped by row number. That pass is inside the timed run.
- DuckDB's CSV reader drops the invalid UTF-8 lines itself (``ignore_errors``), but it also ends a line
  at a bare CR and cuts a line at its delimiter byte, and both readers drop a UTF-8 BOM at the start of the
  file. ``reader_limits`` checks, outside the timing, that the log holds no CR, no delimiter byte and no
  BOM, so that both read exactly the contract's lines. (DuckDB would also drop a line longer than its
  ``max_line_size``, 2 MB by default; the generator's lines are under 1 kB.)
"""
from __future__ import annotations

import argparse
import codecs
import json
import mmap
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
EXAMPLE = os.path.join(ROOT, "examples", "status_by_hour.py")
TARGET = 0.3   # logetl / min(polars, duckdb)

# The contract's expression (src/logetl/contract.py) spelled out for Rust's regex and RE2: both take \w \s
# \d as ASCII only in some modes and RE2's \s lacks \x0B, so the classes are written out as Java's (ASCII)
# meanings: \s = [\t\n\x0B\f\r ], \S its complement, \w = [0-9A-Za-z_], \d = [0-9]; (?s): . matches anything.
# The contract's trailing ``.*$`` is left out: it matches whatever follows, so it changes neither whether a
# line matches nor the groups (both engines pick the leftmost-first match, as Java does), and without it
# the engines capture over the first ~100 bytes instead of the whole line (3x faster in Polars).
WS = r"\t\n\x0B\x0C\r "
LINE = (r'(?s)^([^ ]*) [^' + WS + r']+ [^' + WS + r']+ \[([0-9A-Za-z_:/]+[' + WS + r'][+\-][0-9]{4})\] '
        r'"(.+?)" ([0-9]{3}) ([^ ]*)')
MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()
# dd/Mon/yyyy:HH:MM:SS +hhmm with the ranges a regex can say; the day against the month's length and the
# year 0000 are checked after it. Groups: day, month name, year, hour.
TIME = (r'^(0[1-9]|[12][0-9]|3[01])/(' + "|".join(MONTHS) + r')/([0-9]{4}):([01][0-9]|2[0-3]):[0-5][0-9]:'
        r'[0-5][0-9] [+-](?:[01][0-9]|2[0-3])[0-5][0-9]$')
DELIM = "\x1f"   # DuckDB's read_csv needs one; a line holding it would be cut (reader_limits checks)
BOM = b"\xef\xbb\xbf"


def reader_limits(data: bytes) -> str | None:
    """Why the baselines' readers would not see this input's lines exactly as the contract does, or None."""
    if b"\r" in data:
        return "holds a CR (DuckDB's read_csv ends a line at a bare CR)"
    if DELIM.encode() in data:
        return f"holds the byte {DELIM!r} (DuckDB's read_csv delimiter)"
    if data.startswith(BOM):
        return "starts with a UTF-8 BOM (both CSV readers drop it)"
    return None


def invalid_utf8_lines(path: str, window: int = 1 << 16) -> list[int]:
    """0-based numbers of the lines (split on \\n) that are not valid UTF-8.

    CPython's decoder over small windows of the mapped file: a window that decodes is only counted for
    newlines; at an error the line is noted and decoding goes on from the next line. Small windows because
    every UnicodeDecodeError copies the object it was raised for."""
    decode = codecs.utf_8_decode
    bad, line = [], 0
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return bad
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            pos, n = 0, len(mm)
            while pos < n:
                chunk = mm[pos:pos + window]
                try:
                    # final only at the end of the file: a sequence cut by the window is finished next time
                    _, used = decode(chunk, "strict", pos + len(chunk) == n)
                except UnicodeDecodeError as exc:
                    line += chunk.count(b"\n", 0, exc.start)
                    bad.append(line)
                    nxt = mm.find(b"\n", pos + exc.start)
                    if nxt < 0:
                        break
                    line += 1
                    pos = nxt + 1
                    continue
                line += chunk.count(b"\n", 0, used)
                pos += used
    return bad


def polars_status_by_hour(log: str, out: str) -> None:
    import polars as pl

    bad = invalid_utf8_lines(log)
    lines = pl.scan_csv(log, has_header=False, separator="\n", quote_char=None, schema={"line": pl.String},
                        encoding="utf8-lossy")   # keeps "" lines (as null) so row numbers are line numbers
    if bad:
        lines = lines.with_row_index("n").filter(~pl.col("n").is_in(bad))
    names = ["ip", "time", "request", "response", "size"]
    fields = (lines.select(pl.col("line").str.extract_groups(LINE).alias("f")).unnest("f")
              .rename(dict(zip(["1", "2", "3", "4", "5"], names))))
    kept = fields.filter(pl.col("response").is_not_null()            # matched
                         & ~pl.concat_str(names).str.contains(r"[\t\r]"))
    # the time's groups as columns (unnest): naming a field of the struct expression in several places would
    # run the regex once per place (3x slower)
    times = kept.select(pl.col("time").str.extract_groups(TIME).alias("t"), "response").unnest("t")
    day, year = pl.col("1").cast(pl.Int32), pl.col("3").cast(pl.Int32)
    month = pl.col("2").replace_strict(MONTHS, list(range(1, 13)), return_dtype=pl.Int32)
    leap = ((year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))).cast(pl.Int32)
    length = pl.when(month == 2).then(28 + leap).when(month.is_in([4, 6, 9, 11])).then(30).otherwise(31)
    hour = pl.concat_str([pl.col("3"), pl.lit("-"), month.cast(pl.String).str.zfill(2), pl.lit("-"), pl.col("1"),
                          pl.lit("T"), pl.col("4")])
    result = (times.filter((year >= 1) & (day <= length))     # null (the time did not match) is dropped too
              .group_by(hour.alias("hour"), "response").agg(count=pl.len())
              .sort("hour", "response")
              .collect(engine="streaming"))
    result.write_csv(out, separator="\t", include_header=False, quote_style="never", line_terminator="\n")


def sql_text(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def duckdb_status_by_hour(log: str, out: str) -> None:
    import duckdb

    months = "[" + ", ".join(sql_text(m) for m in MONTHS) + "]"
    # The two MATERIALIZED CTEs are there for speed only: DuckDB inlines a struct field reference into every
    # filter that names it, so without them regexp_extract runs once per field named (7 times a line).
    query = f"""
        WITH f AS MATERIALIZED (
            SELECT r.time AS time, r.response AS response,
                   r.response <> ''             -- no match gives '' in every field; a match has 3 digits
                   AND NOT regexp_matches(concat(r.ip, r.time, r.request, r.response, r.size), '[\\t\\r]') AS kept
            FROM (SELECT regexp_extract(line, {sql_text(LINE)}, ['ip', 'time', 'request', 'response', 'size']) AS r
                  FROM read_csv({sql_text(log)}, columns = {{'line': 'VARCHAR'}}, header = false,
                      auto_detect = false, delim = {sql_text(DELIM)}, quote = '', escape = '', new_line = '\\n',
                      ignore_errors = true))   -- an invalid UTF-8 line is an error row: dropped, as the contract does
        ), t AS MATERIALIZED (
            SELECT g.y || '-' || lpad(list_position({months}, g.mon)::VARCHAR, 2, '0') || '-' || g.d || 'T' || g.h
                       AS hour, response,
                   CASE WHEN g.d = '' OR g.y = '0000' THEN false   -- the time did not match, or the year 0000
                   ELSE g.d::INTEGER <= day(last_day(make_date(g.y::INTEGER, list_position({months}, g.mon), 1)))
                   END AS valid   -- CASE: the casts run on matched times only
            FROM (SELECT regexp_extract(time, {sql_text(TIME)}, ['d', 'mon', 'y', 'h']) AS g, response FROM f WHERE kept)
        )
        SELECT hour, response, count(*) AS count FROM t WHERE valid GROUP BY hour, response ORDER BY hour, response
    """
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    con.execute(f"COPY ({query}) TO {sql_text(out)} (FORMAT csv, DELIMITER '\t', HEADER false, QUOTE '')")
    con.close()


BASELINES = {"polars": polars_status_by_hour, "duckdb": duckdb_status_by_hour}


def measure(cmd: list[str], clear: str) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MB) of one run (``run.measure_usage``, the measure every
    benchmark here shares)."""
    from run import measure_usage

    return measure_usage(cmd, [clear])


def result_bytes(path: str) -> bytes:
    """A file's bytes, or an output directory's part files concatenated in name order."""
    if os.path.isdir(path):
        return b"".join(open(os.path.join(path, n), "rb").read() for n in sorted(os.listdir(path))
                        if n.startswith("part-"))
    with open(path, "rb") as f:
        return f.read()


def reference(log: str) -> bytes:
    """tests/support/independent.py's status_by_hour of the whole log, kept beside it (plain Python: ~15 s)."""
    kept = log + ".status_by_hour.tsv"
    if os.path.exists(kept) and os.path.getmtime(kept) >= os.path.getmtime(log):
        return result_bytes(kept)
    sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
    import independent

    with open(log, "rb") as f:
        result = independent.status_by_hour(f.read())
    with open(kept + ".tmp", "wb") as f:
        f.write(result)
    os.replace(kept + ".tmp", kept)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-logetl", action="store_true",
                    help="time the two baselines only (until `logetl run` and the example exist)")
    ap.add_argument("--one", nargs=3, metavar=("IMPL", "LOG", "OUT"), help=argparse.SUPPRESS)  # one timed run
    args = ap.parse_args()
    if args.one:
        impl, log, out = args.one
        BASELINES[impl](log, out)
        return

    if not args.skip_logetl and not os.path.isfile(EXAMPLE):
        raise SystemExit(f"the example flow is missing: {EXAMPLE} (give --skip-logetl to time the baselines only)")
    os.makedirs(OUT, exist_ok=True)
    from logetl.generate import VERSION   # a log kept from another generator version has other bytes

    log = os.path.join(OUT, f"access-{args.lines}-{args.seed}-g{VERSION}.log")
    if not os.path.exists(log):
        print(f"generating {args.lines:,} lines -> {log}", flush=True)
        subprocess.run([sys.executable, "-m", "logetl", "generate", "--lines", str(args.lines),
                        "--seed", str(args.seed), log + ".tmp"], check=True)
        os.replace(log + ".tmp", log)
    with open(log, "rb") as f:
        limit = reader_limits(f.read())
    if limit:
        raise SystemExit(f"the log {limit}: the baselines would not read it exactly")

    py, o = sys.executable, lambda name: os.path.join(OUT, name)
    jobs = {name: ([py, os.path.abspath(__file__), "--one", name, log, o(f"flows-{name}.tsv")],
                   o(f"flows-{name}.tsv")) for name in BASELINES}
    if not args.skip_logetl:
        jobs["logetl"] = ([py, "-m", "logetl", "run", EXAMPLE, "--input", log, "--output",
                           f"counts={o('flows-logetl')}", "--overwrite"], o("flows-logetl"))
    runs: dict[str, list[tuple[float, float, float]]] = {k: [] for k in jobs}
    for i in range(args.repeat):
        for name, (cmd, clear) in jobs.items():
            runs[name].append(measure(cmd, clear))
            wall, cpu, _ = runs[name][-1]
            print(f"  run {i + 1}/{args.repeat} {name:<7} {wall:7.2f} s wall {cpu:7.2f} s CPU", flush=True)

    expected = reference(log)
    identical = {name: result_bytes(clear) == expected for name, (_, clear) in jobs.items()}
    results = {name: {"median_s": round(statistics.median(w for w, _, _ in r), 3),
                      "runs_s": [round(w, 3) for w, _, _ in r],
                      "median_cpu_s": round(statistics.median(c for _, c, _ in r), 3),
                      "peak_rss_mb": round(max(m for _, _, m in r))} for name, r in runs.items()}
    best = min(results["polars"]["median_s"], results["duckdb"]["median_s"])
    ratio = results["logetl"]["median_s"] / best if "logetl" in results else None
    best_cpu = min(results["polars"]["median_cpu_s"], results["duckdb"]["median_cpu_s"])
    ratio_cpu = results["logetl"]["median_cpu_s"] / best_cpu if "logetl" in results else None
    report = {"flow": "status_by_hour", "lines": args.lines, "seed": args.seed, "bytes": os.path.getsize(log),
              "repeat": args.repeat, "cores": os.cpu_count(), "python": sys.version.split()[0],
              "versions": versions(), "results": results, "output_rows": expected.count(b"\n"),
              "identical_to_independent": identical,
              "ratio_logetl_to_best_baseline": None if ratio is None else round(ratio, 3),
              "cpu_ratio_logetl_to_best_baseline": None if ratio_cpu is None else round(ratio_cpu, 3),
              "load_average_1_5_15": os.getloadavg(), "target": TARGET,
              "met": None if ratio is None else ratio <= TARGET}
    table = markdown(report)
    print("\n" + table)
    with open(o("flows.json"), "w") as f:
        json.dump(report, f, indent=2)
    with open(o("flows.md"), "w") as f:
        f.write(table)
    if not all(identical.values()):
        raise SystemExit(f"outputs differ from tests/support/independent.py's: {identical}")


def versions() -> dict[str, str]:
    import duckdb
    import polars

    return {"polars": polars.__version__, "duckdb": duckdb.__version__}


def markdown(report: dict) -> str:
    v = report["versions"]
    rows = [f"status_by_hour, {report['lines']:,} lines ({report['bytes'] / 1e6:,.0f} MB, seed {report['seed']}), "
            f"median of {report['repeat']} runs, {report['cores']} cores, Python {report['python']}, "
            f"Polars {v['polars']}, DuckDB {v['duckdb']}", "",
            f"system load at the end (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in report['load_average_1_5_15'])}",
            "", "| implementation | wall (s) | runs (s) | CPU (s) | peak RSS (MB) | output = tests/support/independent.py |",
            "|---|---:|---|---:|---:|---|"]
    for name, r in report["results"].items():
        same = "yes" if report["identical_to_independent"][name] else "NO"
        rows.append(f"| {name} | {r['median_s']:.2f} | {', '.join(f'{w:.2f}' for w in r['runs_s'])} | "
                    f"{r['median_cpu_s']:.2f} | {r['peak_rss_mb']} | {same} |")
    ratio = report["ratio_logetl_to_best_baseline"]
    rows.append("")
    rows.append("logetl / min(polars, duckdb): " + ("not measured (--skip-logetl)" if ratio is None else
                f"{ratio:.2f} (target <= {report['target']}: {'met' if report['met'] else 'NOT met'}); "
                f"in CPU time {report['cpu_ratio_logetl_to_best_baseline']:.2f}"))
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    main()
