"""Benchmark: a flow over a directory of many one-line files against the same lines in one file, on the
local engine, in the same run.

    python bench/smallfiles.py [--files 10000] [--repeat 3]

The lines are the real sample's (../shared/data/access_sample_5k.log), in turn; the directory is kept in
bench/out/smallfiles-N/. Each input is run ``--repeat`` times, alternating, as ``logetl run`` of a flow that
counts requests per client (a fresh process each: start-up, binding, reading, parsing, writing); the best
wall time of each, their ratio, the peak RSS (``wait4``), and whether the two outputs are the same bytes.
Prints the figures and writes bench/out/smallfiles.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
SAMPLE = os.path.join(ROOT, "..", "shared", "data", "access_sample_5k.log")
sys.path.insert(0, HERE)

from run import _own_peak  # noqa: E402

FLOW = """import logetl.api as L


def flow(fmt):
    return L.Flow("per_client", [L.read(fmt).group_by("ip").agg(requests=L.count()).sort("ip").write("out")])
"""


def inputs(n: int) -> tuple[str, str]:
    """``n`` files of one line each, and one file of the same lines."""
    with open(SAMPLE, "rb") as f:
        lines = f.read().splitlines(keepends=True)
    d, one = os.path.join(OUT, f"smallfiles-{n}"), os.path.join(OUT, f"smallfiles-{n}.log")
    if not (os.path.isdir(d) and len(os.listdir(d)) == n and os.path.exists(one)):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for i in range(n):
            with open(os.path.join(d, f"access-{i:05d}.log"), "wb") as f:
                f.write(lines[i % len(lines)])
        with open(one, "wb") as f:
            f.writelines(lines[i % len(lines)] for i in range(n))
    return d, one


def run(flow: str, source: str, out: str) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one ``logetl run``."""
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "logetl", "run", flow, "-q", "--input", source, "--output",
                          f"out={out}"], preexec_fn=_own_peak)
    _, status, usage = os.wait4(p.pid, 0)
    took = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"logetl run over {source} failed")
    return took, usage.ru_maxrss * 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    flow = os.path.join(OUT, "smallfiles_flow.py")
    with open(flow, "w") as f:
        f.write(FLOW)
    many, one = inputs(args.files)
    times: dict[str, list] = {"many": [], "one": []}
    peaks: dict[str, int] = {"many": 0, "one": 0}
    for _ in range(args.repeat):
        for name, source in (("one", one), ("many", many)):
            took, peak = run(flow, source, os.path.join(OUT, f"smallfiles-out-{name}"))
            times[name].append(took)
            peaks[name] = max(peaks[name], peak)
    same = all(open(os.path.join(OUT, "smallfiles-out-many", n), "rb").read()
               == open(os.path.join(OUT, "smallfiles-out-one", n), "rb").read()
               for n in os.listdir(os.path.join(OUT, "smallfiles-out-one")))
    result = {"files": args.files, "one_file_s": round(min(times["one"]), 3),
              "many_files_s": round(min(times["many"]), 3),
              "ratio": round(min(times["many"]) / min(times["one"]), 2),
              "peak_rss_mb": {k: round(v / 1e6) for k, v in peaks.items()}, "same_bytes": same,
              "loadavg": open("/proc/loadavg").read().split()[:3]}
    print(json.dumps(result, indent=2))
    with open(os.path.join(OUT, "smallfiles.json"), "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
