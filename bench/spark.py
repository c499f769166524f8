"""Benchmark: logetl --hdfs against hand-written PySpark jobs, Branch and Join, on ``local[*]`` and on a
standalone cluster started here (a Master and a Worker on 127.0.0.1, executors in their own JVMs).

    python bench/spark.py [--lines 2000000] [--seed 1] [--repeat 3] [--skip-local] [--skip-cluster]
                          [--skip-python]

logetl runs as a user would: on its default parse path (the kernel in the executors' JVMs), with nothing
shipped to the cluster (its jar goes with the application); and, unless --skip-python, on the Python
workers' path (``--conf logetl.parse=python``), logetl shipped to the cluster's executors in a packed venv
with spark.archives, as docs/guides/spark.md, "Shipping logetl to a cluster", says.

logetl's driver JVM starts from its class-data archive (``logetl.engines.spark.cds``), which the first
run on a machine records, and the executors of the standalone cluster here (its workers are this
machine's) start from it too: before measuring, one unmeasured logetl Join over a few lines on
``local[*]`` records it when it is missing (the time of that first run is printed, not counted).

Every job is a fresh process (JVM and session start included), the jobs interleaved so that a noisy
neighbour hurts all of them alike, each from a cleared output. Reports, per master, the median wall time
of each job and the ratio logetl / hand-written (target: <= 0.4), then the same without session start:
each side's median minus the median of a process of its own that only starts its session and stops it
(same master and settings). Outputs are compared byte for byte (logetl's parts concatenated in name order
against the hand-written job's). Also the parse's floor (``bench/spark_floor.py``: logetl's session, every
line read and parsed in the executors' JVMs, nothing written) and its ratio to each hand-written job.
Writes bench/out/results-spark-native.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
TARGET = 0.4
sys.path.insert(0, HERE)
from run import measure_usage  # noqa: E402  (bench/run.py: one way of measuring for every benchmark)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pack_venv(archive: str) -> None:
    """A virtual environment holding logetl (built from this checkout) and pyarrow, without pip, packed with
    venv-pack: what the executors get (the recipe of docs/guides/spark.md, "Shipping logetl to a cluster")."""
    import pyarrow
    import venv_pack

    with tempfile.TemporaryDirectory(prefix="logetl-pack-") as tmp:
        source = os.path.join(tmp, "source")   # a copy: pip leaves build/ and egg-info beside the sources
        shutil.copytree(os.path.join(ROOT, "src"), os.path.join(source, "src"),
                        ignore=shutil.ignore_patterns("*.so", "*.egg-info", "__pycache__"))
        for name in ("pyproject.toml", "setup.py", "README.md"):
            shutil.copy(os.path.join(ROOT, name), source)
        venv = os.path.join(tmp, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
        pip = [sys.executable, "-m", "pip", "--python", os.path.join(venv, "bin", "python"), "install", "--quiet",
               "--disable-pip-version-check"]
        # pyarrow first: pip checks what the environment holds after each install, and logetl's other
        # dependencies (the driver's) are not there, on purpose
        subprocess.run([*pip, f"pyarrow=={pyarrow.__version__}"], check=True)
        subprocess.run([*pip, "--no-deps", source], check=True)
        venv_pack.pack(prefix=venv, output=archive, force=True)


class Cluster:
    """A standalone Master and one Worker (2 cores) from the PySpark distribution, on 127.0.0.1."""

    def __init__(self, cores: int, memory: str):
        import pyspark

        home = os.path.dirname(os.path.abspath(pyspark.__file__))
        self.logs = tempfile.mkdtemp(prefix="logetl-bench-cluster-")
        env = {**os.environ, "SPARK_HOME": home, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1",
               "SPARK_LOG_DIR": self.logs, "SPARK_WORKER_DIR": os.path.join(self.logs, "work")}
        env.pop("PYTHONPATH", None)   # the executors see only what is shipped to them
        port, ui = free_port(), free_port()
        self.master = f"spark://127.0.0.1:{port}"
        self.procs = []
        spark_class = os.path.join(home, "bin", "spark-class")

        def start(args, name):
            log = open(os.path.join(self.logs, f"{name}.log"), "wb")
            self.procs.append(subprocess.Popen([spark_class, *args], stdout=log, stderr=subprocess.STDOUT,
                                               env=env, start_new_session=True))

        start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
               "--webui-port", str(ui)], "master")
        self._wait(lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close() or True)
        start(["org.apache.spark.deploy.worker.Worker", self.master, "--host", "127.0.0.1", "--cores", str(cores),
               "--memory", memory, "--webui-port", str(free_port()), "--work-dir", os.path.join(self.logs, "work")],
              "worker")

        def alive():
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
                return [w for w in json.load(r).get("workers", []) if w.get("state") == "ALIVE"]

        self._wait(alive)

    @staticmethod
    def _wait(check, timeout: float = 120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if check():
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise SystemExit("the standalone cluster did not start")

    def stop(self):
        for p in reversed(self.procs):
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        shutil.rmtree(self.logs, ignore_errors=True)


def out(where: str, name: str) -> str:
    return os.path.join(OUT, f"{where}-{name}")


def cat(d: str) -> bytes:
    return b"".join(open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d)) if n.startswith("part-"))


def jobs_for(where: str, master: str, log: str, conf: list[str], python: tuple | None) -> dict:
    """name -> (command, outputs to clear, extra environment). ``python``: (settings, environment) of the
    Python workers' path, or None to leave it out."""
    py, hand = sys.executable, os.path.join(HERE, "spark_handwritten.py")
    o = lambda name: out(where, name)
    logetl = [py, "-m", "logetl"]
    flags = lambda settings: ["-q", "--hdfs", "--master", master, *[x for kv in settings for x in ("--conf", kv)]]
    hand_env = {"HANDWRITTEN_MASTER": master, "PYSPARK_SUBMIT_ARGS": " ".join(f"--conf {kv}" for kv in conf)
                + " pyspark-shell"}
    session = ("from logetl.engines.spark.engine import SparkEngine; import sys; "
               f"e = SparkEngine(master={master!r}, conf=dict(kv.split('=', 1) for kv in sys.argv[1:])); "
               "e.session(); e.shutdown()")
    jobs = {
        "hand-written session": ([py, hand, "session"], [], hand_env),
        "hand-written branch": ([py, hand, "branch", log, o("hb1"), o("hb2")], [o("hb1"), o("hb2")], hand_env),
        "hand-written join": ([py, hand, "join", log, o("hj"), o("hj-ckpt")], [o("hj"), o("hj-ckpt")], hand_env),
        "logetl session": ([py, "-c", session, *conf], [], {}),
        "logetl branch": (logetl + ["branch", *flags(conf), "--input", log, "--output1", o("lb1"), "--output2",
                                    o("lb2")], [o("lb1"), o("lb2")], {}),
        "logetl join": (logetl + ["join", *flags(conf), log, o("lj")], [o("lj")], {}),
        "logetl floor": ([py, os.path.join(HERE, "spark_floor.py"), log, master, *conf], [], {}),
    }
    if python:
        settings, env = python
        settings = [*conf, *settings, "logetl.parse=python"]
        jobs["logetl branch, python workers"] = (
            logetl + ["branch", *flags(settings), "--input", log, "--output1", o("pb1"), "--output2", o("pb2")],
            [o("pb1"), o("pb2")], env)
        jobs["logetl join, python workers"] = (logetl + ["join", *flags(settings), log, o("pj")], [o("pj")], env)
    return jobs


def record_class_archive(log: str) -> str:
    """What a user's first Spark run does once per machine: record logetl's driver JVM class archive (a
    Join on the first 1,000 lines, so that the archive holds what Branch and Join load). Says what it found."""
    from logetl.engines.spark import cds as spark_cds

    archive = spark_cds.ClassArchive({})
    if archive.path is None:
        return "none (no java or Spark installation to key it on)"
    if os.path.isfile(archive.path):
        return f"present ({archive.path})"
    with tempfile.TemporaryDirectory(prefix="logetl-bench-") as tmp:
        head = os.path.join(tmp, "head.log")
        with open(log, "rb") as src, open(head, "wb") as dst:
            dst.writelines(line for _, line in zip(range(1000), src))
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "logetl", "join", "-q", "--hdfs", head, os.path.join(tmp, "out")],
                       check=True, stderr=subprocess.DEVNULL)
        took = time.perf_counter() - start
    found = "recorded" if os.path.isfile(archive.path) else "NOT recorded"
    print(f"logetl's JVM class archive {found} by a first run ({took:.1f} s): {archive.path}", flush=True)
    return f"{found} by a first run of {took:.1f} s ({archive.path})"


def measure_in(cmd: list[str], clear: list[str], env: dict) -> tuple[float, float, float]:
    """Wall seconds, the Python process's peak RSS and the driver JVM's (MB; on local[*] that JVM runs
    the executors too; a cluster's executors are the cluster's processes)."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        jvm: list[float] = []
        wall, _, rss = measure_usage(cmd, clear, jvm)
        return wall, rss, jvm[0]
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--log", help="the input log (default: bench/out/access-LINES-SEED-gV.log, generated)")
    ap.add_argument("--skip-local", action="store_true")
    ap.add_argument("--skip-cluster", action="store_true")
    ap.add_argument("--skip-python", action="store_true", help="leave out logetl's Python workers' path")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    from logetl.generate import VERSION

    log = args.log or os.path.join(OUT, f"access-{args.lines}-{args.seed}-g{VERSION}.log")
    if not os.path.exists(log):
        print(f"generating {args.lines:,} lines -> {log}", flush=True)
        subprocess.run([sys.executable, "-m", "logetl", "generate", "--lines", str(args.lines), "--seed",
                        str(args.seed), log], check=True)
    load_before = os.getloadavg()
    places = []
    python = not args.skip_python
    if not args.skip_local:
        places.append(("local", "local[*]", [], ([], {}) if python else None))
    cluster = None
    if not args.skip_cluster:
        shipped = None
        if python:   # only the Python workers' path needs logetl shipped to the executors
            archive = os.path.join(OUT, "logetl-env.tar.gz")
            print(f"packing a venv with logetl -> {archive}", flush=True)
            pack_venv(archive)
            shipped = ([f"spark.archives={archive}#environment"], {"PYSPARK_PYTHON": "./environment/bin/python"})
        cluster = Cluster(cores=2, memory="6g")
        places.append(("cluster", cluster.master, ["spark.cores.max=2", "spark.executor.memory=4g"], shipped))
    report = {"lines": args.lines, "log": log, "repeat": args.repeat, "cores": os.cpu_count(), "places": {}}
    report["class_archive"] = record_class_archive(log)
    try:
        for where, master, conf, shipped in places:
            jobs = jobs_for(where, master, log, conf, shipped)
            runs: dict[str, list[float]] = {k: [] for k in jobs}
            rss: dict[str, list[float]] = {k: [] for k in jobs}
            jvm_rss: dict[str, list[float]] = {k: [] for k in jobs}
            for i in range(args.repeat):
                for name, (cmd, clear, extra) in jobs.items():
                    wall, peak, jvm_peak = measure_in(cmd, clear, extra)
                    runs[name].append(wall)
                    rss[name].append(peak)
                    jvm_rss[name].append(jvm_peak)
                    print(f"  {where} run {i + 1}/{args.repeat} {name:<22} {runs[name][-1]:7.2f} s  "
                          f"(load {os.getloadavg()[0]:.1f})", flush=True)
            same = {"branch": cat(out(where, "hb1")) == cat(out(where, "lb1")) == cat(out(where, "lb2")),
                    "join": cat(out(where, "hj")) == cat(out(where, "lj"))}
            if shipped:
                same["branch"] &= cat(out(where, "hb1")) == cat(out(where, "pb1")) == cat(out(where, "pb2"))
                same["join"] &= cat(out(where, "hj")) == cat(out(where, "pj"))
            med = {k: statistics.median(v) for k, v in runs.items()}
            rows = {}
            for program in ("branch", "join"):
                hand, ours = med[f"hand-written {program}"], med[f"logetl {program}"]
                hand_work, ours_work = hand - med["hand-written session"], ours - med["logetl session"]
                rows[program] = {"hand_written_s": round(hand, 2), "logetl_s": round(ours, 2),
                                 "ratio": round(ours / hand, 3),
                                 "floor_ratio": round(med["logetl floor"] / hand, 3),
                                 "hand_written_without_session_s": round(hand_work, 2),
                                 "logetl_without_session_s": round(ours_work, 2),
                                 "ratio_without_session": round(ours_work / hand_work, 3),
                                 "identical": same[program]}
                if shipped:
                    workers = med[f"logetl {program}, python workers"]
                    rows[program].update(python_workers_s=round(workers, 2), python_workers_ratio=round(workers / hand, 3))
            report["places"][where] = {"master": master, "median_s": {k: round(v, 2) for k, v in med.items()},
                                       "runs_s": {k: [round(x, 2) for x in v] for k, v in runs.items()},
                                       "peak_rss_mb": {k: round(statistics.median(v)) for k, v in rss.items()},
                                       "jvm_peak_rss_mb": {k: round(statistics.median(v)) for k, v in jvm_rss.items()},
                                       "programs": rows}
    finally:
        if cluster:
            cluster.stop()
    load_after = os.getloadavg()
    report["load"] = {"before": load_before, "after": load_after}
    print(f"\n{args.lines:,} lines, median of {args.repeat} runs, {os.cpu_count()} cores, "
          f"system load {load_before[0]:.1f} before, {load_after[0]:.1f} after")
    print(f"logetl's JVM class archive: {report['class_archive']}")
    print(f"{'':<9}{'program':<8}{'hand-written':>13}{'logetl':>9}{'ratio':>7}  {'without session start':>22}"
          f"{'ratio':>7}  met (<= {TARGET})  same bytes  floor's ratio  python workers (ratio)")
    for where, r in report["places"].items():
        sessions = f"(sessions: hand-written {r['median_s']['hand-written session']:.1f} s, " \
                   f"logetl {r['median_s']['logetl session']:.1f} s)"
        for program, row in r["programs"].items():
            print(f"{where:<9}{program:<8}{row['hand_written_s']:>12.1f}s{row['logetl_s']:>8.1f}s{row['ratio']:>7.2f}  "
                  f"{row['hand_written_without_session_s']:>10.1f}s vs {row['logetl_without_session_s']:>6.1f}s"
                  f"{row['ratio_without_session']:>7.2f}  {'yes' if row['ratio'] <= TARGET else 'NO':>4}"
                  f"{'':>10}{str(row['identical']):<12}{row['floor_ratio']:<15.2f}"
                  + (f"{row['python_workers_s']:.1f}s ({row['python_workers_ratio']:.2f})" if "python_workers_s" in row else ""))
        print(f"{'':<9}{sessions}")
        print(f"{'':<9}(the parse's floor: {r['median_s']['logetl floor']:.1f} s, "
              "logetl's session, every line read and parsed in the executors' JVMs, nothing written)")
        print(f"{'':<9}(peak RSS, MB, Python / driver JVM: " + ", ".join(
            f"{k} {v} / {r['jvm_peak_rss_mb'][k]}" for k, v in r["peak_rss_mb"].items() if "session" not in k) + ")")
    with open(os.path.join(OUT, "results-spark-native.json"), "w") as f:
        json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
