"""The moments a stop must not part: a SIGTERM sent exactly between the calls of each sequence that makes,
publishes or retires something beside the user's files, in the run's own process (a file-system call
made to send it first). A stopped run leaves at most its working directory (``.o1.logetl-work``), whole
and marked as logetl's, which the rerun removes; the rerun gives the bytes of a run never stopped.

``test_crash_points`` sends SIGTERM at every file-system mutation of whole runs; these name each window
and what the stop leaves there, and why."""
from __future__ import annotations

import os
import signal

import pytest

from conftest import CORPUS, parts, read
from logetl import errors
from logetl.io.fs import LOCAL
from logetl.job import run_flow
from logetl.programs import branch

LOG = read(os.path.join(CORPUS, "corpus.log"))
#: an earlier output's input: other bytes than the run's, so that old and new outputs differ
EARLIER_LOG = b"".join(LOG.splitlines(keepends=True)[:40])
OUTPUTS = ("o1", "o2", "trap")
WORKDIR = ".o1.logetl-work"


@pytest.fixture
def stops():
    """SIGTERM stops the run as it stops the ``logetl`` program (``Terminated`` raised where it comes)."""
    with errors.signal_handlers({signal.SIGTERM: errors.raise_terminated}):
        yield


def sigterm_before(monkeypatch, owner, name: str, when) -> list:
    """Makes ``owner.name`` send this process SIGTERM just before its first call for which ``when(*args)``
    holds: it is raised there, before the call, unless the caller holds signals (then the call is made and
    the stop comes as the caller lets signals go). Returns the arguments of that call, once made."""
    original = getattr(owner, name)
    sent: list = []

    def call(*args, **kwargs):
        if not sent and when(*args):
            sent.append(args)
            os.kill(os.getpid(), signal.SIGTERM)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, call)
    return sent


def branch_run(root, overwrite: bool = False, log: str = "in.log"):
    return run_flow(branch.flow(), str(root / log), {"output1": str(root / "o1"), "output2": str(root / "o2")},
                    trap=str(root / "trap"), overwrite=overwrite, monitor=False, quiet=True)


@pytest.fixture
def root(tmp_path):
    (tmp_path / "in.log").write_bytes(LOG)
    return tmp_path


@pytest.fixture(scope="module")
def expected(tmp_path_factory):
    """The outputs of runs never stopped: of ``LOG`` and of ``EARLIER_LOG``."""
    out = {}
    for name, data in (("new", LOG), ("old", EARLIER_LOG)):
        where = tmp_path_factory.mktemp(name)
        (where / "in.log").write_bytes(data)
        branch_run(where)
        out[name] = {o: parts(where / o) for o in OUTPUTS}
    assert out["new"] != out["old"] and all(out["new"].values()) and all(out["old"].values())
    return out


def assert_rerun_finishes(root, expected, overwrite: bool = False) -> None:
    """The same run again: the bytes of a run never stopped, and nothing of logetl's left beside them."""
    branch_run(root, overwrite=overwrite)
    assert {o: parts(root / o) for o in OUTPUTS} == expected["new"]
    assert sorted(os.listdir(root)) == sorted(["in.log", *OUTPUTS, *(["old.log"] if (root / "old.log").exists() else [])])


def test_a_held_signal_waits_even_when_another_thread_takes_it(stops):
    """The main thread blocks the signals, so the kernel gives a signal sent to the process to a thread that
    does not (as a writer's, the monitor's or a native library's threads do not); Python then runs its
    handler in the main thread all the same, inside the block. Held, it waits for the block's end there
    too."""
    import threading
    import time

    leave = threading.Event()

    def other():               # made before the block: the signals are not blocked in it
        while not leave.is_set():
            time.sleep(0.0005)

    thread = threading.Thread(target=other)
    thread.start()
    went_on = False
    try:
        with pytest.raises(errors.Terminated):
            with errors.signals_held():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)          # the other thread takes the signal meanwhile
                went_on = True
    finally:
        leave.set()
        thread.join()
    assert went_on
    assert signal.getsignal(signal.SIGTERM) is errors.raise_terminated


def test_a_stop_as_the_working_directory_is_made_leaves_it_whole(root, stops, monkeypatch, expected):
    """The working directory is made as ``NAME.new-PID-…`` with its marker, then renamed: a stop between
    those calls waits for the rename, so what is left is the whole directory (its marker in it), never
    the half-made copy."""
    sent = sigterm_before(monkeypatch, LOCAL, "touch", lambda p: ".logetl-work.new-" in p)
    with pytest.raises(errors.Terminated):
        branch_run(root)
    assert sent
    assert sorted(os.listdir(root)) == [WORKDIR, "in.log"]
    assert os.listdir(root / WORKDIR) == [".logetl-workdir"]
    assert_rerun_finishes(root, expected)


def test_a_stop_while_an_earlier_working_directory_is_removed_leaves_nothing(root, stops, monkeypatch, expected):
    """A working directory an earlier failed run left is retired (renamed ``NAME.trash-PID-…``) and then
    removed, which may be long: a stop during the removal leaves the retired copy to the stopped run's own
    cleanup, which removes it. Nothing is left (the run had not made its own working directory yet)."""
    monkeypatch.setenv("LOGETL_FAIL_AT", branch.flow().steps[0].name)
    with pytest.raises(errors.RunFailed):
        branch_run(root)
    monkeypatch.delenv("LOGETL_FAIL_AT")
    assert sorted(os.listdir(root)) == [WORKDIR, "in.log"]
    sent = sigterm_before(monkeypatch, LOCAL, "remove",
                          lambda p: ".logetl-work.trash-" in p and p.endswith(".logetl-workdir"))
    with pytest.raises(errors.Terminated):
        branch_run(root)
    assert sent
    assert sorted(os.listdir(root)) == ["in.log"]
    assert_rerun_finishes(root, expected)


@pytest.mark.parametrize("moment", ["at-the-rename", "at-the-removal"])
def test_a_stop_as_an_output_replaces_an_earlier_one(root, stops, monkeypatch, expected, moment):
    """``--overwrite``: the earlier output is renamed aside (``.o1.logetl-PID-….old``) and the new one
    renamed into place, a pair of calls a stop must not part (the output would be absent); then the earlier
    one is removed, which may be long. A stop at the first rename, or during the removal, leaves ``o1``
    new and whole, the outputs not yet published as they were (``o2`` and the trap: the earlier ones),
    nothing aside (the stopped run's cleanup removes the earlier ``o1``) and the working directory, whose
    record tells the rerun that ``o1`` is this flow's. The run says it stopped while publishing."""
    (root / "old.log").write_bytes(EARLIER_LOG)
    branch_run(root, log="old.log")
    o1 = str(root / "o1")
    if moment == "at-the-rename":
        sent = sigterm_before(monkeypatch, LOCAL, "rename", lambda src, dst: src == o1)
    else:
        sent = sigterm_before(monkeypatch, LOCAL, "rmtree", lambda p: p.startswith(str(root / ".o1.logetl-"))
                              and p.endswith(".old"))
    with pytest.raises(errors.Terminated):
        run = None
        run = branch_run(root, overwrite=True)
    assert sent and run is None
    assert sorted(os.listdir(root)) == [WORKDIR, "in.log", "o1", "o2", "old.log", "trap"]
    assert {o: parts(root / o) for o in OUTPUTS} == {"o1": expected["new"]["o1"], "o2": expected["old"]["o2"],
                                                     "trap": expected["old"]["trap"]}
    assert_rerun_finishes(root, expected, overwrite=True)


def test_a_stop_before_a_record_is_renamed_into_place_leaves_no_temporary(tmp_path, stops, monkeypatch):
    """A record is written aside (``NAME.tmp-PID``) and renamed over the old one: stopped before the
    rename, the old record stays and the temporary is removed (a bound ``--checkpoint-dir``, a report's
    state and the monitor's outbox are kept after the run: nothing may pile up in them)."""
    target = tmp_path / "record.json"
    target.write_text("old")
    sent = sigterm_before(monkeypatch, os, "replace", lambda src, dst: dst == str(target))
    with pytest.raises(errors.Terminated):
        LOCAL.write_text_atomic(str(target), "new")
    assert sent
    assert os.listdir(tmp_path) == ["record.json"] and target.read_text() == "old"


def test_a_stop_as_the_sql_result_directory_is_made_leaves_nothing(tmp_path, stops, monkeypatch):
    """``logetl sql``'s temporary result directory is made and known in one held block: a stop as it is
    made still removes it."""
    import tempfile

    from logetl.sql import shell

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    sent = sigterm_before(monkeypatch, tempfile, "mkdtemp", lambda *args: True)
    with pytest.raises(errors.Terminated):
        with shell.result_directory(None):
            pytest.fail("the stop came after the directory was handed over")
    assert sent and os.listdir(tmp_path) == []
