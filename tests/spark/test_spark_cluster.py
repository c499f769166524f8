"""The three programs on a real Spark standalone cluster on 127.0.0.1: a Master and a Worker launched from
the PySpark distribution, executors in their own JVMs. Skips only where Java or PySpark is missing, and
never under CI."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import CORPUS, HERE, corpus, free_port, parts, require, spark_missing

#: a standalone Spark master and worker, and a packed venv shipped to them
pytestmark = pytest.mark.slow

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
    # as on a real cluster, the executors' Python sees no source tree of the driver's (a developer's
    # PYTHONPATH=src would otherwise reach every Python worker the Worker starts)
    env.pop("PYTHONPATH", None)
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


def logetl(*args, env: dict | None = None):
    return subprocess.run([sys.executable, "-m", "logetl", *args], capture_output=True, timeout=600,
                          env={**os.environ, **(env or {})})


def notices(stderr: bytes) -> list[str]:
    return [l for l in stderr.decode().splitlines() if l.startswith("logetl: Spark parses")]


@pytest.fixture(scope="module")
def packed_venv(tmp_path_factory):
    """What a user ships to a cluster's executors: a virtual environment holding logetl, packed with
    venv-pack, as Spark's "Python Package Management" page describes. Built once per module from this
    source tree (so its C kernel is this one), holding only what the executors run: logetl itself (no
    dependencies: the executors import its kernel and nothing else of it) and pyarrow (mapInArrow's
    workers need it), at the driver's version."""
    missing = spark_missing()
    require(missing is None, missing or "")
    import pyarrow
    import venv_pack

    root = os.path.dirname(HERE)
    where = tmp_path_factory.mktemp("packed")
    source = where / "source"   # a copy: pip must not leave build/ and egg-info in the checkout
    shutil.copytree(os.path.join(root, "src"), source / "src",
                    ignore=shutil.ignore_patterns("*.so", "*.egg-info", "__pycache__"))
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(os.path.join(root, name), source / name)
    venv = where / "venv"
    # without pip (and setuptools) in it, as the Spark guide's recipe: 12 % less for every executor to unpack;
    # this interpreter's pip installs into it
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
           "--disable-pip-version-check"]
    # pyarrow first: pip checks what the environment holds after each install, and logetl's other
    # dependencies (the driver's) are not there, on purpose
    subprocess.run([*pip, f"pyarrow=={pyarrow.__version__}"], check=True)
    subprocess.run([*pip, "--no-deps", str(source)], check=True)
    archive = where / "logetl-env.tar.gz"
    venv_pack.pack(prefix=str(venv), output=str(archive))
    return archive


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


def event_log(tmp_path) -> tuple[list[str], list]:
    """Settings that make the run write its event log, uncompressed, into a directory; and a function
    that reads the run's events."""
    events = tmp_path / "events"
    events.mkdir()

    def recorded() -> list[dict]:
        [log] = os.listdir(events)
        with open(events / log) as f:
            return [json.loads(line) for line in f]

    conf = ["spark.eventLog.enabled=true", f"spark.eventLog.dir=file://{events}", "spark.eventLog.compress=false",
            "spark.eventLog.rolling.enabled=false"]
    return [x for kv in conf for x in ("--conf", kv)], recorded


def check_job(recorded: list, description: str):
    """The session's check: its job, and the physical plan of its query."""
    plans = {e["executionId"]: e["physicalPlanDescription"] for e in recorded if e["Event"].endswith("SQLExecutionStart")}
    [check] = [e for e in recorded if e["Event"] == "SparkListenerJobStart"
               and e["Properties"].get("spark.job.description") == description]
    return check, plans[int(check["Properties"]["spark.sql.execution.id"])]


def test_the_jvm_path_on_the_cluster_needs_nothing_shipped(standalone_cluster, tmp_path):
    """logetl's jar goes with the application (spark.jars): the executors, in their own JVMs under the
    worker, fetch it and load the kernel from it, with no Python environment shipped, their Python a bare
    one (no logetl, no pyarrow). The check is a JVM job of one task per core; no query of the run hands a
    row to Python; the checked-in bytes."""
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    master = standalone_cluster["master"]
    env = {"PYSPARK_PYTHON": str(bare / "bin" / "python")}
    common = ["--hdfs", "--master", master, "--conf", "spark.executor.memory=1g", "--conf", "spark.cores.max=2"]
    logged, recorded = event_log(tmp_path)
    p = logetl("branch", *common, *logged, "--input", CORPUS_LOG, "--output1", str(tmp_path / "b1"),
               "--output2", str(tmp_path / "b2"), "--trap", str(tmp_path / "trap"), env=env)
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert notices(p.stderr) == ["logetl: Spark parses with logetl's native kernel in the executors' JVMs"]
    assert parts(tmp_path / "b1") == corpus("branch.tsv") == parts(tmp_path / "b2")
    assert parts(tmp_path / "trap") == corpus("trap.log")
    events = recorded()
    check, plan = check_job(events, "logetl: can the executors' JVMs run logetl's kernel?")
    assert [s["Number of Tasks"] for s in check["Stage Infos"]] == [2]
    assert "MapPartitions" in plan
    # a cluster's driver, which runs no task, compiles with C1 only (on the command line Spark's launcher
    # gave the driver's JVM: spark.driver.extraJavaOptions)
    from logetl.engines.spark.session import DRIVER_C1

    [environment] = [e for e in events if e["Event"] == "SparkListenerEnvironmentUpdate"]
    assert DRIVER_C1 in environment["Spark Properties"]["spark.driver.extraJavaOptions"].split()
    plans = [e["physicalPlanDescription"] for e in events if e["Event"].endswith("SQLExecutionStart")]
    assert len(plans) >= 2 and not [p for p in plans if "Python" in p or "Arrow" in p]
    assert any("MapPartitions" in p and "InsertIntoHadoopFsRelationCommand" in p for p in plans)
    p = logetl("join", *common, CORPUS_LOG, str(tmp_path / "j"), env=env)
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert notices(p.stderr) == ["logetl: Spark parses with logetl's native kernel in the executors' JVMs"]
    assert parts(tmp_path / "j") == corpus("join.tsv")
    # the executors ran in their own JVMs, under the worker, with logetl's jar fetched into their directory
    app = sorted(os.listdir(standalone_cluster["logs"] / "work"))[-1]
    executors = standalone_cluster["logs"] / "work" / app
    fetched = [f for e in os.listdir(executors) for f in os.listdir(executors / e) if f.startswith("logetl-jvm-")]
    assert fetched and all(f.endswith(".jar") for f in fetched), fetched
    # on the throughput collector, as logetl asked (the worker writes each executor's command first)
    commands = [line for e in os.listdir(executors) for line in (executors / e / "stderr").read_text().splitlines()
                if line.startswith("Spark Executor Command:")]
    assert commands and all('"-XX:+UseParallelGC"' in c for c in commands), commands


def test_the_executors_start_from_the_drivers_class_archive(standalone_cluster, tmp_path):
    """A cluster on loopback: its workers are this machine's, with the same Spark. The first run records
    the driver's class archive; the next run's executors load Spark's classes from it too, beside the
    user's own options. The same bytes, the same stderr. The cache's name holds a space and a quote: the options
    that name the archive are one word each, for the driver's launcher and for the executors'."""
    cache = tmp_path / "the 'cache"
    master = standalone_cluster["master"]
    common = ["--hdfs", "--master", master, "--conf", "spark.executor.memory=1g", "--conf", "spark.cores.max=2"]

    def run(name, *extra):
        p = logetl("filter", *common, *extra, "--input", CORPUS_LOG, "--output", str(tmp_path / name),
                   env={"LOGETL_CACHE_DIR": str(cache)})
        assert p.returncode == 0, p.stderr.decode()[-3000:]
        lines = [line for line in p.stderr.decode().replace(str(tmp_path / name), "OUT").splitlines()
                 if " s" not in line and "INFO" not in line]
        return parts(tmp_path / name), lines

    def executor_commands():
        app = sorted(os.listdir(standalone_cluster["logs"] / "work"))[-1]
        executors = standalone_cluster["logs"] / "work" / app
        return [line for e in os.listdir(executors) for line in (executors / e / "stderr").read_text().splitlines()
                if line.startswith("Spark Executor Command:")]

    recording, err_recording = run("recording")
    archives = [n for n in os.listdir(cache) if n.endswith(".jsa")]
    assert len(archives) == 1 and archives[0].startswith("spark-driver-"), os.listdir(cache)
    path = cache / archives[0]
    assert executor_commands() and not [c for c in executor_commands() if "SharedArchiveFile" in c]
    # the user's own JVM options stay beside it: here a log of where each class came from
    loaded = tmp_path / "classes-{{EXECUTOR_ID}}.log"
    using, err_using = run("using", "--conf", f"spark.executor.extraJavaOptions=-Xlog:class+load=info:file={loaded}")
    assert using == recording == corpus("filter.tsv")
    assert err_using == err_recording
    commands = executor_commands()
    assert commands and all(f'"-XX:SharedArchiveFile={path}"' in c for c in commands), commands
    logs = [f for f in os.listdir(tmp_path) if f.startswith("classes-")]
    assert logs
    for name in logs:
        [conf] = [line for line in (tmp_path / name).read_text().splitlines()
                  if line.split()[1:2] == ["org.apache.spark.SparkConf"]]
        assert conf.endswith("source: shared objects file (top)"), conf


def test_python_workers_parse_on_the_cluster_with_a_packed_venv(standalone_cluster, packed_venv, tmp_path):
    """logetl shipped to the executors with spark.archives (--archives of spark-submit): each executor
    unpacks the venv into its working directory as ./environment, and PYSPARK_PYTHON points its Python
    workers there. Forced to the Python workers' path, the session's check finds the kernel there, same
    bytes."""
    master = standalone_cluster["master"]
    env = {"PYSPARK_PYTHON": "./environment/bin/python"}
    common = ["--hdfs", "--master", master, "--conf", "spark.executor.memory=1g", "--conf", "spark.cores.max=2",
              "--conf", f"spark.archives={packed_venv}#environment", "--conf", "logetl.parse=python"]
    logged, recorded = event_log(tmp_path)
    p = logetl("branch", *common, *logged, "--input", CORPUS_LOG, "--output1", str(tmp_path / "b1"),
               "--output2", str(tmp_path / "b2"), "--trap", str(tmp_path / "trap"), env=env)
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert notices(p.stderr) == ["logetl: Spark parses with logetl's native kernel in the executors' Python workers "
                                 "(--conf logetl.parse=python)"]
    assert parts(tmp_path / "b1") == corpus("branch.tsv") == parts(tmp_path / "b2")
    assert parts(tmp_path / "trap") == corpus("trap.log")
    # the session's check was a mapInArrow job (the parse's kind of Python worker, which the step's tasks
    # then reuse) of one task per core of the application (spark.cores.max=2)
    check, plan = check_job(recorded(), "logetl: can the executors' Python workers run logetl's kernel?")
    assert [s["Number of Tasks"] for s in check["Stage Infos"]] == [2]
    assert "MapInArrow" in plan
    p = logetl("join", *common, CORPUS_LOG, str(tmp_path / "j"), env=env)
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert notices(p.stderr) == ["logetl: Spark parses with logetl's native kernel in the executors' Python workers "
                                 "(--conf logetl.parse=python)"]
    assert parts(tmp_path / "j") == corpus("join.tsv")
    # the executors, in their own JVMs under the worker, unpacked the venv and ran its Python
    app = sorted(os.listdir(standalone_cluster["logs"] / "work"))[-1]
    executors = standalone_cluster["logs"] / "work" / app
    unpacked = [executors / e / "environment" for e in os.listdir(executors)]
    assert unpacked and all((u / "bin" / "python").exists() for u in unpacked), unpacked


def test_an_archive_spark_cannot_fetch_is_one_line_exit_2(standalone_cluster, tmp_path):
    """An archive the driver cannot fetch (a scheme no file system serves): it is added to the session
    once it runs (so that the driver unpacks it while the executors start), and its failure is one line,
    exit 2, before anything runs. Before, the SparkContext failed with a stack trace."""
    master = standalone_cluster["master"]
    archive = "nosuch://nowhere/logetl-env.tar.gz#environment"
    p = logetl("filter", "--hdfs", "--master", master, "--conf", "spark.executor.memory=1g", "--conf",
               "spark.cores.max=2", "--conf", f"spark.archives={archive}", "--input", CORPUS_LOG, "--output",
               str(tmp_path / "f"), env={"PYSPARK_PYTHON": "./environment/bin/python", "LOGETL_MONITOR": "off"})
    assert p.returncode == 2
    assert p.stderr.decode().splitlines() == [
        f'Error: cannot ship --conf spark.archives={archive} to the executors: No FileSystem for scheme "nosuch"']
    assert not os.path.exists(tmp_path / "f")


def test_fallback_on_a_cluster_whose_executors_lack_logetl(standalone_cluster, tmp_path):
    """No JDK on the driver's machine (no jar: test_spark_jvm.jre_only) and a bare Python for the
    executors (no logetl): the session's checks see both, the run takes the built-in path and says why in
    one line; the same bytes."""
    from test_spark_jvm import jre_only

    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    master = standalone_cluster["master"]
    p = logetl("branch", "--hdfs", "--master", master, "--conf", "spark.executor.memory=1g", "--conf",
               "spark.cores.max=2", "--conf", "logetl.jvm.cds=off", "--input", CORPUS_LOG, "--output1",
               str(tmp_path / "b1"), "--output2", str(tmp_path / "b2"), "--trap", str(tmp_path / "trap"),
               env={"PYSPARK_PYTHON": str(bare / "bin" / "python"), **jre_only(tmp_path)})
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert notices(p.stderr) == [
        "logetl: Spark parses with its built-in regular expressions: the executors cannot run logetl's kernel (in "
        f"their JVMs: no javac beside {tmp_path}/jre/bin/java (building the kernel for the JVM needs a JDK, not "
        "only a JRE); in their Python workers: ModuleNotFoundError: No module named 'logetl')"]
    assert "Traceback" not in p.stderr.decode()
    assert parts(tmp_path / "b1") == corpus("branch.tsv") == parts(tmp_path / "b2")
    assert parts(tmp_path / "trap") == corpus("trap.log")


def test_a_worker_that_cannot_start_is_named_in_the_notice_and_nothing_else_is_printed(standalone_cluster, tmp_path):
    """The executors' Python workers cannot start (no such program), and there is no JDK to build the JVM's
    kernel with: the Python check's task fails on every attempt, with Spark's logging off while it runs, so
    stderr holds the documented notice and the run's summary only (the monitor's lines are off), no stack
    trace; the built-in path, same bytes."""
    from test_spark_jvm import jre_only

    master = standalone_cluster["master"]
    p = logetl("branch", "--hdfs", "--master", master, "--conf", "spark.executor.memory=1g", "--conf",
               "spark.cores.max=2", "--conf", "logetl.jvm.cds=off", "--input", CORPUS_LOG, "--output1",
               str(tmp_path / "b1"), "--output2", str(tmp_path / "b2"),
               env={"PYSPARK_PYTHON": "/no/such/python", "LOGETL_MONITOR": "off", **jre_only(tmp_path)})
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    lines = p.stderr.decode().splitlines()
    assert lines[0] == ("logetl: Spark parses with its built-in regular expressions: the executors cannot run "
                        f"logetl's kernel (in their JVMs: no javac beside {tmp_path}/jre/bin/java (building the kernel "
                        "for the JVM needs a JDK, not only a JRE); in their Python workers: Cannot run program "
                        "\"/no/such/python\": error=2, No such file or directory)")
    assert lines[1].startswith("logetl branch: SUCCESSFUL in ")
    assert all(line.startswith("  ") for line in lines[2:]), p.stderr.decode()
    assert parts(tmp_path / "b1") == corpus("branch.tsv") == parts(tmp_path / "b2")
