"""Checkpoint restart and fault tolerance: a failed Join resumes after its checkpoint; no failure, however
abrupt, leaves a partial result; anything changed starts from scratch."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from conftest import CORPUS, corpus, parts, read
from logetl.engines.base import InjectedFailure
from logetl.job import run_program
from logetl.listener import SKIPPED, SUCCESSFUL, FlowListener

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")


class Notes(FlowListener):
    def __init__(self):
        self.notices, self.finished = [], []

    def notice(self, run, message):
        # the restart notices; on Spark every run also says which parse path it takes (test_spark_native)
        if not message.startswith("Spark parses with"):
            self.notices.append(message)

    def step_finished(self, run, step):
        self.finished.append((step.name, step.status))


def fail_join(tmp_path, engine, monkeypatch, **kw):
    monkeypatch.setenv("LOGETL_FAIL_AT", "join")
    with pytest.raises(Exception, match="injected failure at step 'join'"):
        run_program("join", CORPUS_LOG, {"output": str(tmp_path / "out")}, engine=engine, **kw)
    monkeypatch.delenv("LOGETL_FAIL_AT")
    assert not os.path.exists(tmp_path / "out")


def test_rerun_after_a_failure_at_join_restarts_after_the_checkpoint(engine, tmp_path, monkeypatch):
    fail_join(tmp_path, engine, monkeypatch, trap=str(tmp_path / "trap"))
    notes = Notes()
    result = run_program("join", CORPUS_LOG, {"output": str(tmp_path / "out")}, engine=engine, listener=notes,
                         trap=str(tmp_path / "trap"))
    assert result.status == SUCCESSFUL
    assert result.restarted_after == "checkpoint"
    # the only notice: on Spark, no parse path is chosen (or announced) when no step that runs parses
    (notice,) = result.notices
    assert notice.startswith("restarting after checkpoint 'checkpoint': skipping step(s) parse")
    assert notes.finished == [("parse", SKIPPED), ("join", SUCCESSFUL)]
    assert parts(tmp_path / "out") == corpus("join.tsv")
    # what the skipped step did is still reported: counts, and the trapped lines
    assert result.lines_read == 47 and sum(result.malformed.values()) == 19
    assert parts(tmp_path / "trap") == corpus("trap.log")
    assert not os.path.exists(tmp_path / ".out.logetl-work"), "the anonymous checkpoint outlived the run"


def test_cli_prints_the_restart_line(tmp_path):
    args = [sys.executable, "-m", "logetl", "join", CORPUS_LOG, str(tmp_path / "out")]
    failed = subprocess.run(args, capture_output=True, env={**os.environ, "LOGETL_FAIL_AT": "join"})
    assert failed.returncode == 1
    again = subprocess.run(args, capture_output=True)
    assert again.returncode == 0, again.stderr
    err = again.stderr.decode()
    assert err.startswith("logetl: restarting after checkpoint 'checkpoint': skipping step(s) parse, "
                          "completed by the failed run ")
    assert "step parse          SKIPPED" in err
    assert parts(tmp_path / "out") == corpus("join.tsv")


def test_changed_input_starts_from_scratch_and_says_why(engine, tmp_path, monkeypatch):
    log = tmp_path / "in.log"
    log.write_bytes(corpus("corpus.log"))
    monkeypatch.setenv("LOGETL_FAIL_AT", "join")
    with pytest.raises(InjectedFailure):
        run_program("join", str(log), {"output": str(tmp_path / "out")}, engine=engine)
    monkeypatch.delenv("LOGETL_FAIL_AT")
    # drop the first line (an images request of 10.0.0.3): the result must reflect the new input
    changed = corpus("corpus.log").split(b"\n", 1)[1]
    log.write_bytes(changed)
    notes = Notes()
    result = run_program("join", str(log), {"output": str(tmp_path / "out")}, engine=engine, listener=notes)
    assert result.restarted_after is None
    (notice,) = notes.notices
    assert notice.startswith("not restarting the earlier failed run: input ")
    assert notice.endswith(f"{str(log)}' changed (size, modification time or inode); starting from scratch")
    assert notes.finished == [("parse", SUCCESSFUL), ("join", SUCCESSFUL)]
    expected = corpus("join.tsv").replace(
        b"10.0.0.3\t10.0.0.3\t17/May/2015:10:05:03 +0000\tGET /images/a.png HTTP/1.1\t200\t123\t91\n", b"")
    assert parts(tmp_path / "out") == expected != corpus("join.tsv")


def test_a_log_replaced_with_the_same_size_and_time_starts_from_scratch(engine, tmp_path, monkeypatch):
    # the replacement has the old log's size and modification time (touch -d, cp -p): the restart used
    # the checkpoint made from the old log, and the result was the old log's
    log = tmp_path / "in.log"
    log.write_bytes(corpus("corpus.log"))
    before = os.stat(log)
    monkeypatch.setenv("LOGETL_FAIL_AT", "join")
    with pytest.raises(Exception, match="injected failure"):
        run_program("join", str(log), {"output": str(tmp_path / "out")}, engine=engine)
    monkeypatch.delenv("LOGETL_FAIL_AT")
    other = corpus("corpus.log").replace(b"10.0.0.3 ", b"10.0.0.9 ")
    assert len(other) == before.st_size
    log.write_bytes(other)
    os.utime(log, ns=(before.st_atime_ns, before.st_mtime_ns))
    notes = Notes()
    result = run_program("join", str(log), {"output": str(tmp_path / "out")}, engine=engine, listener=notes)
    assert result.restarted_after is None
    (notice,) = notes.notices      # the input as the engine's file system names it (on Spark file:/...)
    assert notice.startswith("not restarting the earlier failed run: input '")
    assert notice.endswith(f"{str(log)}' changed (size, modification time or inode); starting from scratch")
    run_program("join", str(log), {"output": str(tmp_path / "fresh")}, engine=engine)
    assert parts(tmp_path / "out") == parts(tmp_path / "fresh") != corpus("join.tsv")


def test_changed_option_starts_from_scratch(engine, tmp_path, monkeypatch):
    fail_join(tmp_path, engine, monkeypatch)
    notes = Notes()
    result = run_program("join", CORPUS_LOG, {"output": str(tmp_path / "out")}, engine=engine, listener=notes,
                         trap=str(tmp_path / "trap"))
    assert result.restarted_after is None
    assert "option trap changed" in notes.notices[0]
    assert parts(tmp_path / "out") == corpus("join.tsv")


def test_an_incomplete_checkpoint_is_never_used(engine, tmp_path, monkeypatch):
    fail_join(tmp_path, engine, monkeypatch)
    stored = tmp_path / ".out.logetl-work" / "stored" / "checkpoint"
    os.remove(stored / "_COMPLETE")
    for part in stored.iterdir():       # and what is there is garbage
        part.write_bytes(b"not arrow")
    notes = Notes()
    result = run_program("join", CORPUS_LOG, {"output": str(tmp_path / "out")}, engine=engine, listener=notes)
    assert result.restarted_after is None
    assert notes.finished == [("parse", SUCCESSFUL), ("join", SUCCESSFUL)]
    assert parts(tmp_path / "out") == corpus("join.tsv")


def test_checkpoint_dir_keeps_the_checkpoint_and_restarts_from_it(engine, tmp_path, monkeypatch):
    keep = tmp_path / "kept"
    fail_join(tmp_path, engine, monkeypatch, checkpoint_dir=str(keep))
    assert (keep / "_COMPLETE").exists()
    result = run_program("join", CORPUS_LOG, {"output": str(tmp_path / "out")}, engine=engine,
                         checkpoint_dir=str(keep))
    assert result.restarted_after == "checkpoint"
    assert parts(tmp_path / "out") == corpus("join.tsv")
    assert (keep / "_COMPLETE").exists(), "a bound checkpoint stays after success"
    assert not os.path.exists(tmp_path / ".out.logetl-work")


def test_a_kill_while_the_checkpoint_dir_was_being_completed_does_not_stop_the_rerun(tmp_path, monkeypatch):
    # killed between writing the marker's temporary file and renaming it: the same command failed for good
    # ("holds '_COMPLETE.tmp-25816': not a logetl checkpoint")
    keep = tmp_path / "kept"
    fail_join(tmp_path, "local", monkeypatch, checkpoint_dir=str(keep))
    complete = (keep / "_COMPLETE").read_text()
    os.remove(keep / "_COMPLETE")
    (keep / "_COMPLETE.tmp-4242").write_text(complete[:5])
    result = run_program("join", CORPUS_LOG, {"output": str(tmp_path / "out")}, checkpoint_dir=str(keep))
    assert result.status == SUCCESSFUL and result.restarted_after is None
    assert parts(tmp_path / "out") == corpus("join.tsv")
    assert not (keep / "_COMPLETE.tmp-4242").exists() and (keep / "_COMPLETE").exists()


def test_checkpoint_dir_refuses_a_directory_of_other_files(tmp_path):
    keep = tmp_path / "kept"
    keep.mkdir()
    (keep / "precious.txt").write_bytes(b"mine")
    from logetl.job import JobError
    with pytest.raises(JobError, match="not a logetl checkpoint"):
        run_program("join", CORPUS_LOG, {"output": str(tmp_path / "out")}, checkpoint_dir=str(keep))
    assert read(keep / "precious.txt") == b"mine"


# --- SIGKILL at seeded moments -------------------------------------------------------------------------------

def _outputs(program, tmp_path):
    if program == "branch":
        return ["--input", "{log}", "--output1", str(tmp_path / "o1"), "--output2", str(tmp_path / "o2")], \
               [tmp_path / "o1", tmp_path / "o2"]
    if program == "filter":
        return ["--input", "{log}", "--output", str(tmp_path / "o1")], [tmp_path / "o1"]
    return ["{log}", str(tmp_path / "o1")], [tmp_path / "o1"]


def _check_invariant(out_dirs, expected: dict):
    """An output path holds nothing, or the whole result with its _SUCCESS: never a part without it."""
    for d in out_dirs:
        if not d.exists():
            continue
        assert parts(d) == expected[d.name]


@pytest.fixture(scope="module")
def long_log(tmp_path_factory):
    """A log long enough for a kill to land inside a run (300,000 lines), made once for every program and
    engine: the runs only read it."""
    log = tmp_path_factory.mktemp("restart") / "in.log"
    subprocess.run([sys.executable, "-m", "logetl", "generate", "--lines", "300000", "--seed", "3", str(log)],
                   check=True)
    return log


@pytest.mark.slow   # six killed runs and their reruns per program (three on Spark), each over 300,000 lines
@pytest.mark.parametrize("program", ["branch", "filter", "join"])
def test_sigkill_at_any_moment_leaves_no_partial_result_and_the_rerun_succeeds(engine, tmp_path, program, long_log):
    log = long_log
    args, out_dirs = _outputs(program, tmp_path)
    base = [sys.executable, "-m", "logetl", program, "-q"]
    if engine != "local":
        base.append("--hdfs")
    cmd = base + [a.replace("{log}", str(log)) for a in args]
    # the uninterrupted run: expected bytes and duration
    start = time.monotonic()
    subprocess.run(cmd, check=True)
    duration = time.monotonic() - start
    expected = {d.name: parts(d) for d in out_dirs}
    for d in out_dirs:
        subprocess.run(["rm", "-rf", str(d)], check=True)

    rng = random.Random(f"{program}-{engine}")
    for _attempt in range(6 if engine == "local" else 3):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.0, duration * 1.05))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        _check_invariant(out_dirs, expected)
        left = [n for n in os.listdir(tmp_path) if n.startswith(".o")]
        if all(d.exists() for d in out_dirs) and not left:
            # killed after it had finished and cleaned up: start the next round afresh
            for d in out_dirs:
                subprocess.run(["rm", "-rf", str(d)], check=True)
            continue
        # killed before publishing, or after it but before its working directory was gone (the published
        # outputs are then recognised as this flow's and replaced with the same bytes)
        # the rerun of the same command completes and gives the uninterrupted bytes
        again = subprocess.run(cmd, capture_output=True)
        assert again.returncode == 0, again.stderr
        _check_invariant(out_dirs, expected)
        assert all(d.exists() for d in out_dirs)
        for d in out_dirs:
            subprocess.run(["rm", "-rf", str(d)], check=True)
    leftovers = [n for n in os.listdir(tmp_path) if n.startswith(".o")]
    assert leftovers == [], leftovers
