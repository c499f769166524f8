"""Benchmark of one long line read by the local engine, from a file, from standard input and from gzip.

    python bench/longlines.py [--sizes 50,100,200] [--repeat 1]

The log: 1,000 ordinary lines, one line of N MB (a valid line: its request is N MB of ``x``), 1,000 more.
For each size and input kind, ``logetl filter`` (with ``--trap``) runs in a fresh process, twice:

- **read**: with ``LOGETL_MAX_LINE=1G`` the line is read whole and parsed (a record): time and peak RSS
  should grow linearly with N, and standard input and gzip should cost about what the file costs;
- **too_long**: with the default limit (64M) the line is malformed (``too_long``), kept aside in pieces and
  copied to the trap: the peak RSS should stay flat whatever N.

Each row gives wall time, CPU time and peak RSS, and the wall time per MB relative to the file's at the
smallest size (measured in the same run): a linear reader keeps that ratio near 1. Writes
bench/out/longlines.json and longlines.md.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")
MB = 1 << 20


def _line(i: int) -> bytes:
    return f'10.0.0.{i % 250} - - [17/May/2015:10:00:{i % 60:02d} +0000] "GET /{i}.png HTTP/1.1" 200 {i} "-" "a"\n'.encode()


def make_log(size_mb: int) -> str:
    """The log with a line of ``size_mb`` MB, and its gzip, in bench/out (made once)."""
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, f"longline-{size_mb}mb.log")
    if not os.path.exists(path + ".gz"):
        with open(path + ".tmp", "wb") as f:
            f.write(b"".join(_line(i) for i in range(1000)))
            f.write(b'10.0.0.1 - - [17/May/2015:10:00:00 +0000] "GET /')
            for _ in range(size_mb):
                f.write(b"x" * MB)
            f.write(b'.png HTTP/1.1" 200 1 "-" "a"\n')
            f.write(b"".join(_line(i) for i in range(1000, 2000)))
        os.replace(path + ".tmp", path)
        with open(path, "rb") as src, gzip.open(path + ".gz.tmp", "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, 16 * MB)
        os.replace(path + ".gz.tmp", path + ".gz")
    return path


def run_once(kind: str, log: str, limit: str | None) -> tuple[float, float, float]:
    sys.path.insert(0, HERE)
    from run import measure_usage

    out, trap = os.path.join(OUT, "longlines-out"), os.path.join(OUT, "longlines-trap")
    logetl = [sys.executable, "-m", "logetl", "filter", "--output", out, "--trap", trap, "--quiet"]
    if limit is not None:
        os.environ["LOGETL_MAX_LINE"] = limit
    else:
        os.environ.pop("LOGETL_MAX_LINE", None)
    if kind == "stdin":
        cmd = ["sh", "-c", f"cat {log} | " + " ".join(logetl + ["--input", "-"])]
    else:
        cmd = logetl + ["--input", log + (".gz" if kind == "gz" else "")]
    return measure_usage(cmd, [out, trap])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="50,100,200")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    for size in sizes:
        log = make_log(size)
        for mode, limit in (("read", "1G"), ("too_long", None)):
            for kind in ("file", "stdin", "gz"):
                best = min((run_once(kind, log, limit) for _ in range(args.repeat)), key=lambda r: r[0])
                rows.append({"size_mb": size, "mode": mode, "input": kind, "wall_s": round(best[0], 2),
                             "cpu_s": round(best[1], 2), "peak_rss_mb": round(best[2])})
                print(rows[-1], flush=True)
    base = next(r for r in rows if r["size_mb"] == sizes[0] and r["mode"] == "read" and r["input"] == "file")
    per_mb = base["wall_s"] / sizes[0]
    for r in rows:
        r["per_mb_vs_file"] = round(r["wall_s"] / r["size_mb"] / per_mb, 2)
    with open(os.path.join(OUT, "longlines.json"), "w") as f:
        json.dump(rows, f, indent=1)
    lines = ["| line | mode | input | wall s | CPU s | peak RSS MB | s/MB vs file |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['size_mb']} MB | {r['mode']} | {r['input']} | {r['wall_s']} | {r['cpu_s']} | "
              f"{r['peak_rss_mb']} | {r['per_mb_vs_file']} |" for r in rows]
    with open(os.path.join(OUT, "longlines.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
