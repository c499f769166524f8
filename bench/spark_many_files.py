"""Benchmark: many small input files on Spark (``--hdfs``): binding them, and the whole run, against the
local engine on the same files.

    python bench/spark_many_files.py [--files 500,2000,10000] [--lines-per-file 3] [--driver-memory 128m]

The inputs are directories of N files of a few lines each, cut from the real sample in
../shared/data/access_sample_5k.log (kept in bench/out/many-N/). For each N:

- **bind**: in this process, on one ``local[1]`` session made as the engine makes it, the time
  ``logetl.job.bind`` takes over the directory (listing, each file's status, readability and qualified
  names, through Hadoop's FileSystem API) and its JVM calls (each a py4j round trip), a file; best of 3.
- **run**: ``logetl filter --hdfs --master local[1]`` in a fresh process, with a driver of
  ``--driver-memory`` (and ``spark.testing.reservedMemory=0``, so that Spark starts with less than its 450 MB
  floor), against ``logetl filter`` on the local engine: wall times, their ratio, the peak RSS of the
  driver's JVM (its ``VmHWM``, read every 0.2 s until it exits) and of the Python process (``wait4``), and
  whether the two outputs are the same bytes.

Writes bench/out/spark_many_files.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
sys.path.insert(0, HERE)

from run import _own_peak, jvm_peak  # noqa: E402


def inputs(n: int, per_file: int, sample: str) -> str:
    """Directory of ``n`` files of ``per_file`` lines each, the sample's lines in turn."""
    d = os.path.join(OUT, f"many-{n}-{per_file}")
    if os.path.isdir(d) and len(os.listdir(d)) == n:
        return d
    with open(sample, "rb") as f:
        lines = f.read().splitlines(keepends=True)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for i in range(n):
        with open(os.path.join(d, f"f{i:05d}.log"), "wb") as f:
            f.writelines(lines[(i * per_file + k) % len(lines)] for k in range(per_file))
    return d


def bind_cost(directory: str, n: int) -> dict:
    """Seconds and JVM calls of binding ``directory`` on Spark, best of 3 (each on a fresh HadoopFS, so
    nothing is known beforehand); the calls as ``counting_jvm_calls`` counts them."""
    from logetl import programs
    from logetl.engines.spark.fs import HadoopFS, counting_jvm_calls
    from logetl.job import bind

    best = None
    with counting_jvm_calls() as made:
        for _ in range(3):
            fs = HadoopFS(SESSION)
            before, start = made[0], time.perf_counter()
            bind(programs.get("filter"), directory, {"output": os.path.join(OUT, "many-bind-out")}, engine="spark", fs=fs)
            took, trips = time.perf_counter() - start, made[0] - before
            if best is None or took < best[0]:
                best = (took, trips)
    return {"bind_s": round(best[0], 2), "jvm_calls_a_file": round(best[1] / n, 1)}


def timed(cmd: list[str], out: str) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "LOGETL_MONITOR": "off"}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=_own_peak, env=env)
    peak, done = [0], threading.Event()
    watcher = threading.Thread(target=jvm_peak, args=(proc.pid, peak, done), daemon=True)
    watcher.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    done.set()
    watcher.join()
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"benchmark command failed: {' '.join(cmd)}\n{err}")
    return {"wall_s": round(wall, 1), "python_peak_mib": round(usage.ru_maxrss / 1024, 1),
            "jvm_peak_mib": round(peak[0] / 1024, 1) if peak[0] else None}


def cat(d: str) -> bytes:
    return b"".join(open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d)) if n.startswith("part-"))


SESSION = None


def main() -> None:
    global SESSION
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", default="500,2000,10000")
    ap.add_argument("--lines-per-file", type=int, default=3)
    ap.add_argument("--driver-memory", default="128m")
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    args = ap.parse_args()
    sample = os.path.join(os.path.abspath(args.shared), "data", "access_sample_5k.log")
    if not os.path.isfile(sample):
        raise SystemExit(f"the sample is not at {sample} (give --shared)")
    os.makedirs(OUT, exist_ok=True)
    from logetl.engines.spark.engine import SparkEngine

    engine = SparkEngine(master="local[1]", conf={"spark.ui.enabled": "false"})
    SESSION = engine.keep_session()
    sizes = [int(n) for n in args.files.split(",")]
    dirs = {n: inputs(n, args.lines_per_file, sample) for n in sizes}
    results = []
    for n in sizes:
        results.append({"files": n, **bind_cost(dirs[n], n)})
    SESSION.stop()
    logetl = [sys.executable, "-m", "logetl", "filter"]
    for r in results:
        n, d = r["files"], dirs[r["files"]]
        local_out, spark_out = os.path.join(OUT, "many-local"), os.path.join(OUT, "many-spark")
        local = timed(logetl + ["--input", d, "--output", local_out], local_out)
        spark = timed(logetl + ["--hdfs", "--master", "local[1]", "--conf", f"spark.driver.memory={args.driver_memory}",
                                "--conf", "spark.testing.reservedMemory=0", "--input", d, "--output", spark_out],
                      spark_out)
        r.update({"local_wall_s": local["wall_s"], "spark_wall_s": spark["wall_s"],
                  "spark_over_local": round(spark["wall_s"] / local["wall_s"], 1),
                  "driver_jvm_peak_mib": spark["jvm_peak_mib"], "driver_python_peak_mib": spark["python_peak_mib"],
                  "same_bytes": cat(local_out) == cat(spark_out)})
        print(f"{n:>6,} files  bind {r['bind_s']:6.2f} s ({r['jvm_calls_a_file']:4.1f} JVM calls a file)  "
              f"run: Spark {r['spark_wall_s']:6.1f} s, local {r['local_wall_s']:5.1f} s ({r['spark_over_local']}x)  "
              f"driver peak: JVM {r['driver_jvm_peak_mib']} MiB, Python {r['driver_python_peak_mib']} MiB  "
              f"same bytes: {r['same_bytes']}", flush=True)
    with open(os.path.join(OUT, "spark_many_files.json"), "w") as f:
        json.dump({"driver_memory": args.driver_memory, "lines_per_file": args.lines_per_file, "results": results},
                  f, indent=1)


if __name__ == "__main__":
    main()
