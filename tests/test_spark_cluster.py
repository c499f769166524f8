"""The three programs on a real Spark standalone cluster on 127.0.0.1: a Master and a Worker launched from
the PySpark distribution, executors in their own JVMs. Skips only where Java or PySpark is missing, and
never under CI."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import CORPUS, corpus, free_port, parts, require, spark_missing

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")


def wait_for(check, what: str, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except OSError as exc:
            last = exc
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what} ({last})")


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory):
    missing = spark_missing()
    require(missing is None, missing or "")
    import pyspark

    home = os.path.dirname(os.path.abspath(pyspark.__file__))
    spark_class = os.path.join(home, "bin", "spark-class")
    logs = tmp_path_factory.mktemp("spark-cluster")
    port, ui, worker_ui = free_port(), free_port(), free_port()
    env = {**os.environ, "SPARK_HOME": home, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1",
           "SPARK_LOG_DIR": str(logs), "SPARK_WORKER_DIR": str(logs / "work")}
    procs = []

    def start(args, name):
        log = open(logs / f"{name}.log", "wb")
        procs.append(subprocess.Popen([spark_class, *args], stdout=log, stderr=subprocess.STDOUT, env=env,
                                      start_new_session=True))

    try:
        start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
               "--webui-port", str(ui)], "master")
        wait_for(lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close() or True, "the master")
        master = f"spark://127.0.0.1:{port}"
        start(["org.apache.spark.deploy.worker.Worker", master, "--host", "127.0.0.1", "--cores", "2",
               "--memory", "2g", "--webui-port", str(worker_ui), "--work-dir", str(logs / "work")], "worker")

        def alive_workers():
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
                state = json.load(r)
            return [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]

        wait_for(alive_workers, "a worker to register")
        yield {"master": master, "ui": ui, "logs": logs}
    finally:
        for p in reversed(procs):
            try:
                os.killpg(p.pid, 15)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)


def logetl(*args):
    return subprocess.run([sys.executable, "-m", "logetl", *args], capture_output=True, timeout=600)


def test_three_programs_on_a_standalone_cluster(standalone_cluster, tmp_path):
    master = standalone_cluster["master"]
    common = ["--hdfs", "--master", master, "--conf", "spark.executor.memory=1g", "--conf", "spark.cores.max=2"]
    p = logetl("branch", *common, "--input", CORPUS_LOG, "--output1", str(tmp_path / "b1"),
               "--output2", str(tmp_path / "b2"), "--trap", str(tmp_path / "trap"))
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert parts(tmp_path / "b1") == corpus("branch.tsv") == parts(tmp_path / "b2")
    assert parts(tmp_path / "trap") == corpus("trap.log")
    p = logetl("filter", *common, "--input", CORPUS_LOG, "--output", str(tmp_path / "f"))
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert parts(tmp_path / "f") == corpus("filter.tsv")
    p = logetl("join", *common, CORPUS_LOG, str(tmp_path / "j"))
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert parts(tmp_path / "j") == corpus("join.tsv")   # its sorted parts, concatenated in name order
    # the work ran on the cluster: the master saw the applications, with executors on the worker
    with urllib.request.urlopen(f"http://127.0.0.1:{standalone_cluster['ui']}/json/", timeout=5) as r:
        state = json.load(r)
    assert len(state["completedapps"]) >= 3
    assert {a["name"] for a in state["completedapps"]} == {"logetl"}
    executors = os.listdir(standalone_cluster["logs"] / "work")
    assert len(executors) >= 3, "each application had executors launched by the worker"


def test_unreachable_master_is_one_line_exit_2(tmp_path):
    missing = spark_missing()
    require(missing is None, missing or "")
    port = free_port()
    p = logetl("filter", "--hdfs", "--master", f"spark://127.0.0.1:{port}", "--input", CORPUS_LOG,
               "--output", str(tmp_path / "o"))
    assert p.returncode == 2
    err = p.stderr.decode()
    assert "Traceback" not in err
    assert f"Error: cannot reach the Spark master at spark://127.0.0.1:{port} (is it running?)" in err


def test_missing_path_on_the_cluster_file_system_is_one_line_exit_2(tmp_path):
    missing = spark_missing()
    require(missing is None, missing or "")
    p = logetl("filter", "--hdfs", "--master", "local[1]", "--input", "file:///no/such/dir/x.log",
               "--output", str(tmp_path / "o"))
    assert p.returncode == 2
    lines = [l for l in p.stderr.decode().splitlines() if l.startswith("Error")]
    assert lines == ["Error: input 'file:///no/such/dir/x.log' does not exist"]


def test_missing_java_and_missing_pyspark_are_one_line_exit_2(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = "/nonexistent"
    p = subprocess.run([sys.executable, "-m", "logetl", "filter", "--hdfs", "--input", CORPUS_LOG,
                        "--output", str(tmp_path / "o")], capture_output=True, env=env)
    assert p.returncode == 2
    err = p.stderr.decode()
    assert "Traceback" not in err
    assert "no java was found" in err or "needs PySpark" in err
    # without PySpark on the path at all
    code = ("import sys; sys.modules['pyspark'] = None; sys.argv = ['logetl', 'filter', '--hdfs', '--input', "
            f"{CORPUS_LOG!r}, '--output', {str(tmp_path / 'o2')!r}]; from logetl.cli import main; main()")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert p.returncode == 2
    assert p.stderr.decode().strip() == "Error: the spark engine needs PySpark: pip install 'logetl[spark]'"


def test_launched_through_spark_submit(tmp_path):
    """spark-submit starts the driver JVM and sets the master; logetl uses that session."""
    missing = spark_missing()
    require(missing is None, missing or "")
    import pyspark

    import logetl

    home = os.path.dirname(os.path.abspath(pyspark.__file__))
    main = os.path.join(os.path.dirname(os.path.abspath(logetl.__file__)), "__main__.py")
    env = {**os.environ, "SPARK_HOME": home, "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    p = subprocess.run([os.path.join(home, "bin", "spark-submit"), "--master", "local[2]", main,
                        "join", "--hdfs", CORPUS_LOG, str(tmp_path / "j")], capture_output=True, env=env,
                       timeout=600)
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert parts(tmp_path / "j") == corpus("join.tsv")
    # spark-submit's PythonRunner merges the driver's stderr into its stdout
    assert "logetl join: SUCCESSFUL" in (p.stdout + p.stderr).decode()
    assert "(spark engine)" in (p.stdout + p.stderr).decode()
