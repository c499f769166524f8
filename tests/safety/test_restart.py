"""Checkpoint restart: a failed Join resumes after its checkpoint, an incomplete checkpoint is never used,
anything changed starts from scratch. (Kills at random moments of a run: test_restart_kills.py.)"""
from __future__ import annotations

import os
import subprocess
import sys

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
