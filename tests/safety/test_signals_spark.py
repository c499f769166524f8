"""A signal while a Spark job runs: logetl waits for the job inside a py4j call, where Python would raise
the signal's exception (tracebacks; SIGTERM made a FAILED run, "Answer from Java side is empty"). The signal
is held until the call returns, the job is cancelled, the run stops with one line and its record says so,
the driver JVM ends with it. Real processes, real signals, the real JVM. (The same on the local engine, and
at every moment of a run: test_signals.py.)"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from conftest import parts, read, require, spark_missing
from test_signals import SIGNALS, recorded, start

#: a run over a long log stopped, and its rerun, on each signal: minutes
pytestmark = pytest.mark.slow


def running_tasks(home) -> bool:
    """Whether the monitor has heard of the run's Spark tasks running (its progress, counted in tasks)."""
    import json
    import sqlite3

    try:    # read only: opening a Store would set up the schema the run is setting up
        with sqlite3.connect(f"file:{home}/monitor.db?mode=ro", uri=True) as db:
            found = db.execute("SELECT progress FROM runs WHERE progress IS NOT NULL").fetchall()
    except sqlite3.OperationalError:    # not made yet
        return False
    return any(p["unit"] == "tasks" and (p["total"] or 0) > 0 for p in (json.loads(r[0]) for r in found))


def _jvm_of(pid: int) -> int | None:
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            for child in f.read().split():
                with open(f"/proc/{child}/cmdline", "rb") as c:
                    if b"java" in c.read().split(b"\0")[0]:
                        return int(child)
    return None


def _ended(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@pytest.fixture(scope="module")
def long_log(tmp_path_factory):
    """A log whose Spark parse takes long enough to be interrupted (1,000,000 lines), and the local engine's
    filter output of it: made once for the signals that interrupt it."""
    base = tmp_path_factory.mktemp("long-log")
    log = base / "access.log"
    subprocess.run([sys.executable, "-m", "logetl", "generate", "--lines", "1000000", "--seed", "5", str(log)],
                   check=True, capture_output=True)
    p = subprocess.run([sys.executable, "-m", "logetl", "filter", "--input", str(log), "--output", str(base / "local")],
                       env={**os.environ, "LOGETL_HOME": str(base / "home")}, capture_output=True)
    assert p.returncode == 0, p.stderr
    return log, base / "local"


@pytest.mark.spark
@pytest.mark.parametrize("signum,code,why,group", [(*SIGNALS[0], False), (*SIGNALS[1], False), (*SIGNALS[1], True)],
                         ids=["SIGINT", "SIGTERM", "SIGTERM-to-the-group"])
def test_a_signal_during_a_spark_job_cancels_it_and_stops_the_run(tmp_path, long_log, signum, code, why, group):
    """The signal reaches logetl alone (as ``kill`` sends it), or its whole process group (as ``timeout``
    and a service manager send it: the driver JVM, in the group too, ended under the run's cleanup), while
    the step's job runs."""
    missing = spark_missing()
    require(missing is None, missing or "")
    work, home = tmp_path / "w", tmp_path / "home"
    work.mkdir()
    log, local = long_log
    args = ["filter", "--hdfs", "--master", "local[1]", "--input", str(log), "--output", "o"]
    with open(tmp_path / "err", "wb") as err_file:
        p = start(args, work, home, stderr=err_file, start_new_session=group)
    try:
        deadline = time.monotonic() + 120
        while not running_tasks(home):   # the step's job runs: logetl waits for it inside a JVM call
            assert time.monotonic() < deadline and p.poll() is None, read(tmp_path / "err")
            time.sleep(0.2)
        jvm = _jvm_of(p.pid)
        assert jvm is not None
        if group:
            os.killpg(p.pid, signum)
        else:
            p.send_signal(signum)
        assert p.wait(timeout=120) == code, read(tmp_path / "err")
    finally:
        p.kill()
    err = read(tmp_path / "err").decode()
    lines = err.splitlines()
    assert "Traceback" not in err and "ERROR" not in err, err
    assert lines[1].startswith("logetl filter: STOPPED in ")
    assert [line.split()[:3] for line in lines if line.startswith("  step ")] == [["step", "parse", "STOPPED"]]
    assert f"  error: {why}" in lines
    assert lines[-1] == f"logetl: {why}; no output was committed"
    assert sorted(os.listdir(work)) == [".o.logetl-work"]
    assert recorded(home) == ("STOPPED", why)
    deadline = time.monotonic() + 30
    while not _ended(jvm):
        assert time.monotonic() < deadline, f"the driver JVM {jvm} outlived logetl"
        time.sleep(0.1)
    # the rerun completes, with the local engine's bytes
    p = start(args, work, home, stderr=subprocess.PIPE)
    assert p.wait(timeout=300) == 0, p.stderr.read()
    assert parts(work / "o") == parts(local)
    assert sorted(os.listdir(work)) == ["o"]
