"""Benchmark of log formats: Branch on an 11-field nginx log against Branch on the default (combined) log.

    python bench/formats.py [--lines 2000000] [--repeat 3]

Generates a seeded combined log with ``logetl generate`` and rewrites it into an nginx format
(each line gets `` $request_time "$http_x_forwarded_for"`` appended: the combined layout is the first nine
fields of that format), both kept in bench/out/formats/. Then, interleaved ``--repeat`` times from cleared
outputs, median wall time of:

- ``logetl branch`` (default format) on the combined log, and ``logetl branch --format NGINX`` on the nginx
  log (the whole command: start, parse, write);
- the parse alone, in this process: the local engine's two-thread scan over the file with each format's
  parser, records written as TSV (what Branch asks of the kernel).

Target: the nginx parse within 1.5x the default format's time in the same run. Writes
bench/out/formats/results.json.
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
OUT = os.path.join(HERE, "out", "formats")
NGINX = ('$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" '
         '"$http_user_agent" $request_time "$http_x_forwarded_for"')
LIMIT = 1.5


def to_nginx(src: str, dst: str) -> None:
    """Appends a request time and a forwarded-for list to every line (seeded by the line number)."""
    with open(src, "rb") as f, open(dst + ".tmp", "wb") as out:
        n = 0
        buf = []
        for line in f:
            line = line.rstrip(b"\n")
            h = (n * 2654435761) & 0xFFFFFFFF
            rt = b"%d.%03d" % (h % 3, h % 1000)
            xff = b"-" if h % 4 else b"203.0.113.%d, 10.0.%d.%d" % (h % 250, h % 7, h % 200)
            buf.append(line + b" " + rt + b' "' + xff + b'"\n')
            n += 1
            if len(buf) >= 65536:
                out.write(b"".join(buf))
                buf = []
        out.write(b"".join(buf))
    os.replace(dst + ".tmp", dst)


def run_cli(args: list[str], outs: list[str]) -> float:
    for p in outs:
        shutil.rmtree(p, ignore_errors=True)
    start = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "logetl", *args], capture_output=True)
    wall = time.perf_counter() - start
    if p.returncode != 0:
        raise SystemExit(f"failed: logetl {' '.join(args)}\n{p.stderr.decode(errors='replace')}")
    return wall


def parse_only(path: str, fmt) -> tuple[float, int]:
    from logetl.contract import FIELDS
    from logetl.engines import kernel
    from logetl.engines.local.scan import scan

    parser = kernel.Parser(fmt, FIELDS)
    start = time.perf_counter()
    n = 0
    for parsed, _ in scan([path], columns=False, parser=parser):
        n += parsed.n_records
    return time.perf_counter() - start, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from logetl import formats

    os.makedirs(OUT, exist_ok=True)
    combined = os.path.join(OUT, f"combined-{args.lines}-{args.seed}.log")
    nginx = os.path.join(OUT, f"nginx-{args.lines}-{args.seed}.log")
    if not os.path.exists(combined):
        subprocess.run([sys.executable, "-m", "logetl", "generate", "--lines", str(args.lines), "--seed",
                        str(args.seed), combined], check=True)
    if not os.path.exists(nginx):
        to_nginx(combined, nginx)
    env_outs = [os.path.join(OUT, n) for n in ("c1", "c2", "n1", "n2")]
    cmd = {
        "branch (combined, default)": (["branch", "-q", "--input", combined, "--output1", env_outs[0],
                                        "--output2", env_outs[1]], env_outs[:2]),
        "branch --format nginx-11": (["branch", "-q", "--format", NGINX, "--input", nginx, "--output1",
                                      env_outs[2], "--output2", env_outs[3]], env_outs[2:]),
    }
    fmts = {"parse (combined, default)": (combined, formats.LEGACY),
            "parse nginx-11": (nginx, formats.compile_format(NGINX))}
    times: dict[str, list[float]] = {k: [] for k in [*cmd, *fmts]}
    records = {}
    for _ in range(args.repeat):
        for label, (a, outs) in cmd.items():
            times[label].append(run_cli(a, outs))
        for label, (path, fmt) in fmts.items():
            t, records[label] = parse_only(path, fmt)
            times[label].append(t)
    a, b = (os.path.join(OUT, n, "part-00000") for n in ("c1", "n1"))
    same = open(a, "rb").read() == open(b, "rb").read()
    med = {k: statistics.median(v) for k, v in times.items()}
    results = {
        "lines": args.lines, "bytes": {"combined": os.path.getsize(combined), "nginx": os.path.getsize(nginx)},
        "median_s": med, "runs_s": times, "records": records, "branch_outputs_identical": same,
        "ratio_cli": med["branch --format nginx-11"] / med["branch (combined, default)"],
        "ratio_parse": med["parse nginx-11"] / med["parse (combined, default)"], "limit": LIMIT,
    }
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    print(f"{args.lines:,} lines; combined {results['bytes']['combined'] / 1e6:.0f} MB, "
          f"nginx {results['bytes']['nginx'] / 1e6:.0f} MB; median of {args.repeat}")
    for k, v in med.items():
        print(f"  {k:<30} {v:6.2f} s")
    print(f"  nginx / default, whole branch: {results['ratio_cli']:.2f}   parse only: {results['ratio_parse']:.2f}"
          f"   (limit {LIMIT})")
    print(f"  branch outputs identical: {same}")


if __name__ == "__main__":
    main()
