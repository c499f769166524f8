"""A run asked to end by a signal stops as a Ctrl-C stops it: SIGTERM (``kill``, ``timeout``, a scheduler,
a service manager) and SIGHUP (a closed terminal) were left to Python's default, which ended the process
where it stood: no line, the staged output left beside the user's, the monitor's record RUNNING for ever.
On Spark, any of them (Ctrl-C too) landed inside a py4j call: tracebacks, and SIGTERM made a FAILED run
("Answer from Java side is empty"). Real processes, real signals, the real JVM."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import CORPUS, DEFAULT_SIGNALS, corpus, parts, read, require, spark_missing
from logetl.monitor.store import Store

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")
SIGNALS = [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated by SIGTERM"),
           (signal.SIGHUP, 129, "terminated by SIGHUP")]


def start(args, cwd, home, signals=DEFAULT_SIGNALS, **popen):
    return subprocess.Popen([*signals, sys.executable, "-m", "logetl", *args], cwd=cwd,
                            env={**os.environ, "LOGETL_HOME": str(home), "LOGETL_MONITOR": "on"}, **popen)


def staged(directory) -> bool:
    """Whether the run has staged its output ``o`` (``.o.logetl-PID-XXXXXXXX``; not its working directory
    or the lock it holds on ``o``)."""
    return any(re.fullmatch(r"\.o\.logetl-\d+-[0-9a-f]{8}", n) for n in os.listdir(directory))


def wait_until_staged(p, directory) -> None:
    deadline = time.monotonic() + 60
    while not staged(directory):
        assert time.monotonic() < deadline and p.poll() is None, "the run never staged its output"
        time.sleep(0.01)


def recorded(home) -> tuple:
    """The status and error of the one run the monitor's store under ``home`` holds."""
    store = Store(f"sqlite:///{home}/monitor.db")
    rows, _ = store.list_runs()
    assert len(rows) == 1, rows
    run = store.get_run(rows[0]["run_id"])
    return run["status"], run["error"]


@pytest.mark.parametrize("signum,code,why", SIGNALS, ids=lambda v: getattr(v, "name", None))
def test_a_signal_stops_a_local_run_and_its_record_says_so(tmp_path, signum, code, why):
    # standard input held open: the run is under way (its output staged) and cannot finish on its own
    work, home = tmp_path / "w", tmp_path / "home"
    work.mkdir()
    p = start(["filter", "--input", "-", "--output", "o"], work, home, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdin.write(corpus("corpus.log"))
    p.stdin.flush()
    wait_until_staged(p, work)
    p.send_signal(signum)
    _, err = p.communicate(timeout=60)
    lines = err.decode().splitlines()
    assert p.returncode == code, err
    assert "Traceback" not in err.decode()
    assert lines[0].startswith("logetl filter: STOPPED in ")
    assert f"  error: {why}" in lines
    assert lines[-1] == f"logetl: {why}; no output was committed"
    assert sorted(os.listdir(work)) == [".o.logetl-work"]    # what a rerun recognises and removes
    assert recorded(home) == ("STOPPED", why)
    # the rerun of the same command completes, with the bytes of a run that was never stopped
    p = start(["filter", "--input", CORPUS_LOG, "--output", "o"], work, home, stderr=subprocess.PIPE)
    assert p.wait(timeout=60) == 0, p.stderr.read()
    assert parts(work / "o") == corpus("filter.tsv")
    assert sorted(os.listdir(work)) == ["o"]


def test_a_sighup_the_caller_ignores_stays_ignored(tmp_path):
    # nohup: the run goes on after its terminal has gone
    work, home = tmp_path / "w", tmp_path / "home"
    work.mkdir()
    p = start(["filter", "--input", "-", "--output", "o"], work, home, stdin=subprocess.PIPE, stderr=subprocess.PIPE,
              signals=["env", "--default-signal=INT,TERM", "--ignore-signal=HUP"])
    p.stdin.write(corpus("corpus.log"))
    p.stdin.flush()
    wait_until_staged(p, work)
    p.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert p.poll() is None
    p.stdin.close()
    err = p.stderr.read()
    assert p.wait(timeout=60) == 0, err
    assert parts(work / "o") == corpus("filter.tsv")
    assert recorded(home) == ("SUCCESSFUL", None)


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


@pytest.mark.parametrize("signum,code,why,group", [(*SIGNALS[0], False), (*SIGNALS[1], False), (*SIGNALS[1], True)],
                         ids=["SIGINT", "SIGTERM", "SIGTERM-to-the-group"])
def test_a_signal_during_a_spark_job_cancels_it_and_stops_the_run(tmp_path, signum, code, why, group):
    """The signal reaches logetl alone (as ``kill`` sends it), or its whole process group (as ``timeout``
    and a service manager send it: the driver JVM, in the group too, ended under the run's cleanup), while
    the step's job runs."""
    missing = spark_missing()
    require(missing is None, missing or "")
    work, home = tmp_path / "w", tmp_path / "home"
    work.mkdir()
    log = tmp_path / "access.log"
    subprocess.run([sys.executable, "-m", "logetl", "generate", "--lines", "1000000", "--seed", "5", str(log)],
                   check=True, capture_output=True)
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
    p = start(["filter", "--input", str(log), "--output", str(tmp_path / "local")], work, home, stderr=subprocess.PIPE)
    assert p.wait(timeout=120) == 0, p.stderr.read()
    assert parts(work / "o") == parts(tmp_path / "local")
    assert sorted(os.listdir(work)) == ["o"]


# --- the deferral itself, without a JVM: a call "inside py4j" is what _in_java_call says ----------------------

@pytest.fixture
def inside_java(monkeypatch):
    from logetl.engines import spark_signals

    monkeypatch.setattr(spark_signals, "_in_java_call", lambda frame, py4j_dir: True)
    # as in a process started from a terminal (this test run may have inherited SIGINT ignored)
    before = {signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
              signal.SIGTERM: signal.signal(signal.SIGTERM, signal.SIG_DFL)}
    yield spark_signals
    for signum, handler in before.items():
        signal.signal(signum, handler)


def test_a_signal_inside_a_java_call_is_raised_when_the_block_ends(inside_java):
    from logetl import errors

    went_on = False
    with pytest.raises(errors.Terminated) as raised:
        with errors.ended_by_signals(), inside_java.between_java_calls():
            signal.raise_signal(signal.SIGTERM)
            assert inside_java.stopping()
            went_on = True
    assert went_on and raised.value.signum == signal.SIGTERM and raised.value.exit_code == 143
    assert str(raised.value) == "terminated by SIGTERM"
    # every handler is back, nothing is pending
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert not inside_java.stopping()


def test_a_second_signal_is_raised_at_once_and_alone(inside_java):
    from logetl import errors

    with pytest.raises(errors.Terminated) as raised:
        with errors.ended_by_signals(), inside_java.between_java_calls():
            signal.raise_signal(signal.SIGINT)      # deferred
            signal.raise_signal(signal.SIGTERM)     # raised here
            pytest.fail("the second signal did not stop the block")
    assert raised.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_block_in_another_thread_changes_nothing(inside_java):
    import threading

    inside, leave = threading.Event(), threading.Event()

    def other():
        with inside_java.between_java_calls():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=other)
    t.start()
    inside.wait(10)
    try:
        with pytest.raises(KeyboardInterrupt):
            with inside_java.between_java_calls():      # still the main thread's own block: it defers
                signal.raise_signal(signal.SIGINT)
                assert inside_java.stopping()
    finally:
        leave.set()
        t.join()
