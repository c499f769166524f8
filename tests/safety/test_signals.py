"""A run asked to end by a signal stops as a Ctrl-C stops it: SIGTERM (``kill``, ``timeout``, a scheduler,
a service manager) and SIGHUP (a closed terminal) were left to Python's default, which ended the process
where it stood: no line, the staged output left beside the user's, the monitor's record RUNNING for ever.
Real processes, real signals. (A signal while a Spark job runs: test_signals_spark.py; here, the deferral
of a signal inside a py4j call, without a JVM.)"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import CORPUS, DEFAULT_SIGNALS, corpus, parts, read
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


# --- the deferral itself, without a JVM: a call "inside py4j" is what _in_java_call says ----------------------

@pytest.fixture
def inside_java(monkeypatch):
    from logetl.engines.spark import signals as spark_signals

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


# --- every moment of a command: one line and the exit code, nothing half-made left -------------------------

ENV_OFF = {**os.environ, "LOGETL_MONITOR": "off"}


def _handled(pid: int) -> bool:
    """Whether logetl's handlers are set in process ``pid``: SIGTERM caught (logetl sets it with the others
    from the first line of its own that runs; before, the Python interpreter is still starting), or
    ignored (the command is done: the signal changes nothing)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            masks = {k: int(v, 16) for k, v in (line.split() for line in f if line.startswith(("SigCgt:", "SigIgn:")))}
    except (OSError, ValueError):
        return False
    return bool((masks.get("SigCgt:", 0) | masks.get("SigIgn:", 0)) & (1 << (signal.SIGTERM - 1)))


def _stop_at(args, cwd, delay: float) -> list[tuple[subprocess.Popen, bool, str]]:
    """Starts the command once per signal (at the same time), sends each its signal after ``delay``
    seconds: (process, whether logetl's handlers were set then, stderr) of each, in ``SIGNALS`` order."""
    procs = []
    for signum, _, _ in SIGNALS:
        (cwd / signum.name).mkdir(parents=True)
        procs.append(subprocess.Popen([*DEFAULT_SIGNALS, sys.executable, "-m", "logetl", *args], cwd=cwd / signum.name,
                                      env=ENV_OFF, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    time.sleep(delay)
    ours = []
    for p, (signum, _, _) in zip(procs, SIGNALS):
        ours.append(_handled(p.pid))
        p.send_signal(signum)
    return [(p, mine, p.communicate(timeout=120)[1].decode()) for p, mine in zip(procs, ours)]


def _rerun(args, roots) -> list[subprocess.Popen]:
    """The same command again in each of ``roots`` (at the same time)."""
    return [subprocess.Popen([sys.executable, "-m", "logetl", *args], cwd=r, env=ENV_OFF, stderr=subprocess.PIPE)
            for r in roots]


def test_a_signal_at_any_moment_of_a_run_ends_it_with_one_line_and_its_exit_code(tmp_path):
    """A sweep of moments, from the start of the process to the end of a short run, for each signal:
    once logetl's first line has run, every stop is the one line and 128 + N (or, once the outputs are
    committed, exit 0), never a traceback or Click's "Aborted!"; each output is absent or whole. Beside
    them a stop leaves at most the working directory ``.o1.logetl-work``, whole (its marker in it): made
    as the run claims it, kept by a stopped run because its record says whose outputs a run stopped while
    publishing has published, and removed by the rerun, which gives the same bytes. Nothing else: the
    half-made copy of the working directory (``.new-``) and a retired one (``.trash-``), the staging
    directories, an earlier output set aside, a temporary record (``.tmp-PID``) and the lock files are
    made and renamed in blocks a signal waits for, or removed by the stopped run's own cleanup. Before
    logetl's first line the Python interpreter is still starting: the signal is Python's (no line), and
    nothing is made."""
    from logetl import generate

    (tmp_path / "in.log").write_bytes(b"".join(line + b"\n" for line in generate.lines(60000, seed=4)))
    args = ["branch", "-q", "--input", "../../in.log", "--output1", "o1", "--output2", "o2"]
    # how long the command takes, three at a time as below
    began = time.monotonic()
    refs = []
    for n in range(len(SIGNALS)):
        (tmp_path / "ref" / str(n)).mkdir(parents=True)
        refs.append(subprocess.Popen([sys.executable, "-m", "logetl", *args], cwd=tmp_path / "ref" / str(n),
                                     env=ENV_OFF))
    assert [p.wait(timeout=120) for p in refs] == [0] * len(refs)
    duration = time.monotonic() - began
    expected = parts(tmp_path / "ref" / "0" / "o1")
    assert parts(tmp_path / "ref" / "0" / "o2") == expected
    said, before_logetl, completed = [], 0, 0
    # 27 moments up to 1.3 times the measured duration, and more while no run has reached its commit: on
    # a busy machine a run takes longer than the reference runs did
    for k in range(60):
        if k >= 27 and completed:
            break
        delay = duration * k / 20
        stopped = []
        for (p, ours, err), (signum, code, why) in zip(_stop_at(args, tmp_path / str(k), delay), SIGNALS):
            root = tmp_path / str(k) / signum.name
            left = sorted(os.listdir(root))
            where = (round(delay, 3), signum.name, p.returncode, err, left)
            if not ours:        # the interpreter was starting: nothing of logetl's ran
                before_logetl += 1
                if p.returncode == 0:
                    # CPython lost the signal: a KeyboardInterrupt raised in one of its import callbacks is
                    # printed as "Exception ignored" and dropped, and the command then runs to its end
                    assert "Exception ignored" in err and left == ["o1", "o2"], where
                    assert parts(root / "o1") == parts(root / "o2") == expected, where
                else:
                    assert left == [], where
                continue
            assert "Traceback" not in err and "Aborted!" not in err, where
            lines = err.splitlines()
            if p.returncode == 0:       # the signal came after the commit: the run's result stands
                completed += 1
                assert left == ["o1", "o2"] and parts(root / "o1") == parts(root / "o2") == expected, where
                continue
            assert p.returncode == code, where
            assert lines in ([f"logetl: {why}; no output was committed"],
                             [f"logetl: {why} while publishing the outputs; run the same command again to finish"]), where
            for o in ("o1", "o2"):
                assert not (root / o).exists() or parts(root / o) == expected, where
                if lines[0].endswith("no output was committed"):
                    assert not (root / o).exists(), where
            assert set(left) <= {"o1", "o2", ".o1.logetl-work"}, where
            if ".o1.logetl-work" in left:       # whole: the marker is in it from the rename that made it
                inside = [os.path.relpath(os.path.join(d, n), root / ".o1.logetl-work")
                          for d, ds, fs in os.walk(root / ".o1.logetl-work") for n in ds + fs]
                assert ".logetl-workdir" in inside and not [n for n in inside if ".tmp-" in n], (where, inside)
            elif lines[0].endswith("to finish"):
                pytest.fail(f"stopped while publishing without the working directory's record: {where}")
            said.append((k, lines[0]))
            stopped.append(root)
        for p, root in zip(_rerun(args, stopped), stopped):
            assert p.wait(timeout=120) == 0, (root, p.stderr.read())
            assert sorted(os.listdir(root)) == ["o1", "o2"], root
            assert parts(root / "o1") == parts(root / "o2") == expected, root
    # most moments are logetl's, the stops come early and late in the run, and the last ones after its commit
    assert len(said) + completed > before_logetl, (len(said), completed, before_logetl)
    assert min(k for k, _ in said) < 10 <= max(k for k, _ in said) and completed, (said, completed)


SLOW_FLOW = """import os, time
import logetl.api as L

open("loading", "w").close()
time.sleep(60)


def flow(fmt):
    return L.Flow("slow", [L.read(fmt).write("out")])
"""

RAISING_FLOW = """import logetl.api as L


class Stop(BaseException):
    pass


raise Stop("the flow file's own")
"""


@pytest.mark.parametrize("signum,code,why", SIGNALS, ids=lambda v: getattr(v, "name", None))
def test_a_signal_while_a_flow_file_is_imported_is_one_line_and_makes_nothing(tmp_path, signum, code, why):
    (tmp_path / "flow.py").write_text(SLOW_FLOW)
    (tmp_path / "in.log").write_bytes(corpus("corpus.log"))
    p = subprocess.Popen([*DEFAULT_SIGNALS, sys.executable, "-m", "logetl", "run", "flow.py", "--input", "in.log",
                          "--output", "out=out"], cwd=tmp_path, env=ENV_OFF, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not (tmp_path / "loading").exists():
        assert time.monotonic() < deadline and p.poll() is None, "the flow file was never imported"
        time.sleep(0.01)
    p.send_signal(signum)
    err = p.communicate(timeout=60)[1].decode()
    assert (p.returncode, err) == (code, f"logetl: {why}; no output was committed\n")
    assert sorted(os.listdir(tmp_path)) == ["flow.py", "in.log", "loading"]


def test_a_flow_file_raising_a_baseexception_of_its_own_is_one_line(tmp_path):
    (tmp_path / "flow.py").write_text(RAISING_FLOW)
    p = subprocess.run([sys.executable, "-m", "logetl", "run", "flow.py", "--input", CORPUS_LOG, "--output",
                        "out=out"], cwd=tmp_path, env=ENV_OFF, capture_output=True)
    assert (p.returncode, p.stderr.decode()) == (2, "Error: flow.py:8: Stop: the flow file's own\n")
    p = subprocess.run([sys.executable, "-m", "logetl", "explain", "flow.py"], cwd=tmp_path, env=ENV_OFF,
                       capture_output=True)
    assert (p.returncode, p.stderr.decode()) == (2, "Error: flow.py:8: Stop: the flow file's own\n")


@pytest.mark.parametrize("signum,code,why", SIGNALS, ids=lambda v: getattr(v, "name", None))
def test_generate_stopped_while_it_writes_leaves_the_old_file_and_no_temporary(tmp_path, signum, code, why):
    (tmp_path / "g.log").write_bytes(b"the user's old log\n")
    p = subprocess.Popen([*DEFAULT_SIGNALS, sys.executable, "-m", "logetl", "generate", "--lines", "20000000",
                          "--overwrite", "g.log"], cwd=tmp_path, env=ENV_OFF, stderr=subprocess.PIPE)
    temporary = tmp_path / ".g.log.logetl-generate"
    deadline = time.monotonic() + 60
    while not (temporary.exists() and temporary.stat().st_size > 0):
        assert time.monotonic() < deadline and p.poll() is None, "generate never wrote"
        time.sleep(0.01)
    p.send_signal(signum)
    err = p.communicate(timeout=60)[1].decode()
    assert (p.returncode, err) == (code, f"logetl: {why}; nothing was written\n")
    assert sorted(os.listdir(tmp_path)) == ["g.log"] and read(tmp_path / "g.log") == b"the user's old log\n"
    # to standard output: what it got is not the whole log, and it says so
    p = subprocess.Popen([*DEFAULT_SIGNALS, sys.executable, "-m", "logetl", "generate", "--lines", "20000000",
                          "-"], cwd=tmp_path, env=ENV_OFF, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert len(p.stdout.read(1 << 20)) == 1 << 20
    p.send_signal(signum)
    err = p.communicate(timeout=60)[1].decode()      # (read to its end: a closed pipe would stop it first)
    assert (p.returncode, err) == (code, f"logetl: {why}; the log sent to standard output is incomplete\n")
