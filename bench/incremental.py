"""Benchmark of incremental runs: an incremental Branch run over 1 % new data against a full Branch run.

    python bench/incremental.py [--lines 2000000] [--new 20000] [--repeat 3]

Generates a seeded log of ``--lines`` + ``--new`` lines (``logetl.generate``; kept in bench/out/incremental/),
then ``--repeat`` times: the log is cut back to its first ``--lines`` lines and an incremental Branch run reads
it (untimed: the outputs' first run); the ``--new`` lines are appended; then, timed:

- ``incremental``: ``logetl branch --incremental`` (reads only the new lines, adds a part per output);
- ``full``: ``logetl branch`` over the same log (``--lines`` + ``--new`` lines), fresh outputs;
- (in process only) ``nothing new``: the incremental run once more, with nothing new to read: what every run
  pays whatever it reads (working directory, staging, fingerprints);

each as the whole command (``python -m logetl``: interpreter start, imports, run) and in this process
(``logetl.job.run_program``: the run alone). Target: median incremental / median full <= 0.05, measured in the
same run. Checks that the incremental outputs' parts concatenate to the full run's bytes. Prints the load
average before and after. Writes bench/out/incremental/results.json.
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
OUT = os.path.join(HERE, "out", "incremental")
LIMIT = 0.05


def cli(args: list[str]) -> float:
    env = {**os.environ, "LOGETL_MONITOR": "off"}
    start = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "logetl", *args], capture_output=True, env=env)
    wall = time.perf_counter() - start
    if p.returncode != 0:
        raise SystemExit(f"failed: logetl {' '.join(args)}\n{p.stderr.decode(errors='replace')}")
    return wall


def in_process(log_dir: str, outs: list[str], incremental: bool) -> float:
    from logetl.job import run_program

    start = time.perf_counter()
    run_program("branch", log_dir, {"output1": outs[0], "output2": outs[1]}, incremental=incremental,
                monitor=False, quiet=True)
    return time.perf_counter() - start


def concatenation(path: str) -> bytes:
    state = json.load(open(os.path.join(path, "_INCREMENTAL")))
    return b"".join(open(os.path.join(path, p), "rb").read() for p in state["parts"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--new", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from logetl import generate

    os.makedirs(OUT, exist_ok=True)
    base = os.path.join(OUT, f"base-{args.lines}-{args.seed}.log")
    new = os.path.join(OUT, f"new-{args.lines}-{args.new}-{args.seed}.log")
    if not os.path.exists(base) or not os.path.exists(new):
        generate.write(base, args.lines, args.seed)
        with open(new, "wb") as f:       # lines --lines .. --lines + --new - 1 of the same seeded log
            for chunk in generate.blocks(args.lines + args.new, args.seed, start=args.lines):
                f.write(chunk)
    tail = open(new, "rb").read()
    logs = os.path.join(OUT, "logs")
    log = os.path.join(logs, "access.log")
    inc = [os.path.join(OUT, n) for n in ("i1", "i2")]
    full = [os.path.join(OUT, n) for n in ("f1", "f2")]
    times: dict[str, list[float]] = {k: [] for k in ("incremental (command)", "full (command)",
                                                     "incremental (in process)", "full (in process)",
                                                     "nothing new (in process)")}
    same = True
    load_before = os.getloadavg()
    for _ in range(args.repeat):
        for how in ("command", "in process"):
            for p in [logs, *inc, *full]:
                shutil.rmtree(p, ignore_errors=True)
            os.makedirs(logs)
            shutil.copyfile(base, log)
            branch_inc = ["branch", "-q", "--incremental", "--input", logs, "--output1", inc[0], "--output2", inc[1]]
            branch_full = ["branch", "-q", "--input", logs, "--output1", full[0], "--output2", full[1]]
            cli(branch_inc)                                   # the outputs' first run: untimed
            with open(log, "ab") as f:
                f.write(tail)
            if how == "command":
                times["incremental (command)"].append(cli(branch_inc))
                times["full (command)"].append(cli(branch_full))
            else:
                times["incremental (in process)"].append(in_process(logs, inc, True))
                times["full (in process)"].append(in_process(logs, full, False))
                # the floor: a run with nothing new pays only what every run pays (working directory,
                # staging, plan), not the reading or the commit
                times["nothing new (in process)"].append(in_process(logs, inc, True))
            same = same and all(concatenation(i) == open(os.path.join(f, "part-00000"), "rb").read()
                                for i, f in zip(inc, full))
    med = {k: statistics.median(v) for k, v in times.items()}
    results = {
        "lines": args.lines, "new_lines": args.new, "bytes": os.path.getsize(log), "repeat": args.repeat,
        "median_s": med, "runs_s": times,
        "ratio_command": med["incremental (command)"] / med["full (command)"],
        "ratio_in_process": med["incremental (in process)"] / med["full (in process)"],
        "limit": LIMIT, "outputs_identical": same, "load_average_before": load_before,
        "load_average": os.getloadavg(),
    }
    for p in [logs, *inc, *full]:
        shutil.rmtree(p, ignore_errors=True)
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    print(f"{args.lines:,} lines + {args.new:,} new ({args.new / args.lines:.1%}); {results['bytes'] / 1e6:.0f} MB; "
          f"median of {args.repeat}")
    for k, v in med.items():
        print(f"  {k:<26} {v:7.3f} s")
    print(f"  incremental / full: whole command {results['ratio_command']:.3f}, in process "
          f"{results['ratio_in_process']:.3f}   (limit {LIMIT})")
    print(f"  incremental parts concatenate to the full run's bytes: {same}")
    print("  system load before {:.2f} {:.2f} {:.2f}, after {:.2f} {:.2f} {:.2f}".format(
        *load_before, *results["load_average"]))


if __name__ == "__main__":
    main()
