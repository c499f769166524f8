"""What a careless user or a crash must never cost: logetl deletes only what it created, cleanup
is crash-safe whatever the directory order, a rerun after a kill between publishing and exit succeeds, bad
environment values and paths are one line, and a log in the wrong layout does not pass unnoticed."""
from __future__ import annotations

import gzip
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import CORPUS, DEFAULT_SIGNALS, SUPPORT, corpus, logetl, parts, read, require
from logetl.job import run_program
from logetl.listener import FAILED, FlowListener

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")


def one_line(proc) -> str:
    err = proc.stderr.decode()
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


def tree(root) -> dict[str, bytes]:
    out = {}
    for d, _, files in os.walk(root):
        for n in files:
            p = os.path.join(d, n)
            out[os.path.relpath(p, root)] = read(p)
    return out


# --- 1. logetl deletes only what it created ------------------------------------------------------------------

def test_work_dir_with_other_files_and_the_input_inside_is_left_as_it_was(engine, tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"
    (scratch / "sub").mkdir(parents=True)
    (scratch / "keep.txt").write_bytes(b"mine")
    (scratch / "sub" / ".env").write_bytes(b"SECRET=1")
    (scratch / "in.log").write_bytes(corpus("corpus.log"))
    before = tree(scratch)
    # a failure first, so that the working directory holds a checkpoint; then the restart
    monkeypatch.setenv("LOGETL_FAIL_AT", "join")
    with pytest.raises(Exception, match="injected failure"):
        run_program("join", str(scratch / "in.log"), {"output": str(tmp_path / "out")}, engine=engine,
                    work_dir=str(scratch))
    monkeypatch.delenv("LOGETL_FAIL_AT")
    mine = [n for n in os.listdir(scratch) if n.startswith("logetl-work-")]
    assert len(mine) == 1, os.listdir(scratch)
    result = run_program("join", str(scratch / "in.log"), {"output": str(tmp_path / "out")}, engine=engine,
                         work_dir=str(scratch))
    assert result.restarted_after == "checkpoint"
    assert parts(tmp_path / "out") == corpus("join.tsv")
    assert tree(scratch) == before                 # every file of the user's, nothing of logetl's
    assert sorted(os.listdir(scratch)) == ["in.log", "keep.txt", "sub"]


def test_work_dir_equal_to_or_inside_an_output_is_refused(tmp_path):
    for work in ("out2", "out2/deeper"):
        p = logetl("branch", "--input", CORPUS_LOG, "--output1", "out1", "--output2", "out2", "--work-dir", work,
                   cwd=str(tmp_path))
        assert p.returncode == 2
        assert one_line(p) == (f"Error: --work-dir {work!r} and output2 'out2' overlap: keep them apart")
        assert os.listdir(tmp_path) == []


def test_checkpoint_dir_holding_only_dot_files_is_refused_and_kept(tmp_path):
    keep = tmp_path / "repo"
    (keep / ".git").mkdir(parents=True)
    (keep / ".git" / "config").write_bytes(b"[core]")
    (keep / ".env").write_bytes(b"SECRET=1")
    before = tree(keep)
    p = logetl("join", "--checkpoint-dir", str(keep), CORPUS_LOG, str(tmp_path / "out"))
    assert p.returncode == 2
    assert one_line(p) == (f"Error: checkpoint directory {str(keep)!r} holds '.env': not a logetl checkpoint "
                           "(choose an absent or empty directory)")
    assert tree(keep) == before and not (tmp_path / "out").exists()


def test_checkpoint_dir_of_a_former_output_is_refused(tmp_path):
    """part-* and _SUCCESS alone do not make a checkpoint: they may be a result the user keeps."""
    keep = tmp_path / "old-result"
    keep.mkdir()
    (keep / "part-00000").write_bytes(b"a result\n")
    (keep / "_SUCCESS").write_bytes(b"")
    p = logetl("join", "--checkpoint-dir", str(keep), CORPUS_LOG, str(tmp_path / "out"))
    assert p.returncode == 2
    assert "without logetl's _LOGETL_CHECKPOINT marker: not a logetl checkpoint" in one_line(p)
    assert read(keep / "part-00000") == b"a result\n"


def test_an_empty_checkpoint_dir_of_the_user_is_used_and_kept(engine, tmp_path):
    keep = tmp_path / "kept"
    keep.mkdir()
    inode = os.stat(keep).st_ino
    run_program("join", CORPUS_LOG, {"output": str(tmp_path / "out")}, engine=engine, checkpoint_dir=str(keep))
    names = sorted(os.listdir(keep))
    assert "_COMPLETE" in names and "_LOGETL_CHECKPOINT" in names
    assert os.stat(keep).st_ino == inode, "the user's directory was replaced"
    # and a second flow reuses it: only the checkpoint's files are replaced
    run_program("join", CORPUS_LOG, {"output": str(tmp_path / "out2")}, engine=engine, checkpoint_dir=str(keep))
    assert os.stat(keep).st_ino == inode
    assert parts(tmp_path / "out2") == corpus("join.tsv")


def test_a_directory_at_the_default_working_path_that_logetl_did_not_make_is_refused(tmp_path):
    squatter = tmp_path / ".out.logetl-work"
    squatter.mkdir()
    (squatter / "data.csv").write_bytes(b"1,2\n")
    p = logetl("join", CORPUS_LOG, str(tmp_path / "out"))
    assert p.returncode == 2
    assert one_line(p) == (f"Error: working directory {str(squatter)!r} exists and was not made by logetl "
                           "(no .logetl-workdir in it): remove it or choose another --work-dir")
    assert read(squatter / "data.csv") == b"1,2\n"


def test_a_stale_staging_name_is_removed_only_when_it_is_exactly_logetls(tmp_path):
    """Killed runs' staging directories go; a user's directory with a similar name stays."""
    out = tmp_path / "out"
    stale = tmp_path / ".out.logetl-999999999-0a1b2c3d"      # the pid is gone
    lookalike = tmp_path / ".out.logetl-999999999-notmine"
    for d in (stale, lookalike):
        d.mkdir()
        (d / "part-00000").write_bytes(b"x")
    assert logetl("filter", "--input", CORPUS_LOG, "--output", str(out)).returncode == 0
    assert not stale.exists() and read(lookalike / "part-00000") == b"x"


# --- 2. crash-safe cleanup, whatever the directory order ----------------------------------------------------

class Crash(BaseException):
    """Stands for SIGKILL in the middle of a cleanup (BaseException: nothing may catch it)."""


@pytest.mark.parametrize("order", ["parts first", "marker first"])
def test_cleanup_interrupted_in_any_directory_order_never_feeds_a_rerun_an_incomplete_checkpoint(
        tmp_path, monkeypatch, order):
    from logetl.io.fs import LocalFS

    def rmtree_then_crash(self, path):
        """Deletes the first file of the working directory in the chosen order, then dies, as on a volume
        whose directory order put that file first."""
        files = sorted((os.path.join(d, n) for d, _, ns in os.walk(path) for n in ns if "/stored/" in d),
                       key=lambda p: (os.path.basename(p) == "_COMPLETE") == (order == "parts first"))
        if "logetl-work" not in path or not files:
            if os.path.isdir(path):
                return shutil.rmtree(path, ignore_errors=True)
            return os.remove(path) if os.path.lexists(path) else None
        os.remove(files[0])
        raise Crash(path)

    with monkeypatch.context() as patched, pytest.raises(Crash):
        patched.setattr(LocalFS, "rmtree", rmtree_then_crash)
        run_program("join", CORPUS_LOG, {"output": str(tmp_path / "out")})
    assert parts(tmp_path / "out") == corpus("join.tsv")       # published before the cleanup
    rerun = logetl("join", CORPUS_LOG, str(tmp_path / "out"))
    assert rerun.returncode == 0, rerun.stderr
    assert parts(tmp_path / "out") == corpus("join.tsv")
    assert sorted(n for n in os.listdir(tmp_path)) == ["out"]


# --- 3. a rerun after a kill between publishing and exit ------------------------------------------------------

def test_rerun_after_a_kill_between_publishing_and_exit_succeeds_with_a_notice(tmp_path):
    log = tmp_path / "in.log"
    log.write_bytes(corpus("corpus.log"))
    count = tmp_path / "count"
    cmd = [sys.executable, os.path.join(SUPPORT, "crashpoint.py"), "join", str(log), str(tmp_path / "out")]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "LOGETL_MONITOR": "off"}
    subprocess.run(cmd, env={**env, "LOGETL_CRASH_COUNT": str(count)}, check=True, capture_output=True)
    shutil.rmtree(tmp_path / "out")
    # the last mutation of a run is the removal of its retired working directory
    killed = subprocess.run(cmd, env={**env, "LOGETL_CRASH_AT": read(count).decode()}, capture_output=True)
    assert killed.returncode == -signal.SIGKILL
    assert parts(tmp_path / "out") == corpus("join.tsv")
    again = logetl("join", str(log), str(tmp_path / "out"))
    assert again.returncode == 0, again.stderr
    assert again.stderr.decode().splitlines()[0] == (
        "logetl: an earlier run of this flow was killed while or after publishing its outputs; "
        "this run replaces them")
    assert parts(tmp_path / "out") == corpus("join.tsv")
    # a completed run leaves nothing to recognise: the same command is refused as before
    third = logetl("join", str(log), str(tmp_path / "out"))
    assert third.returncode == 2 and "is not empty (use --overwrite to replace it)" in one_line(third)


# --- 14. one line for every user error -------------------------------------------------------------------------

@pytest.mark.parametrize("var,value,expected", [
    ("LOGETL_PROGRESS_AFTER", "abc", "Error: LOGETL_PROGRESS_AFTER='abc' is not a number"),
    ("LOGETL_PROGRESS_AFTER", "-1", "Error: LOGETL_PROGRESS_AFTER='-1' must be a number >= 0"),
])
def test_a_bad_environment_value_is_one_line_naming_the_variable(tmp_path, var, value, expected):
    p = logetl("filter", "--input", CORPUS_LOG, "--output", str(tmp_path / "o"), env={var: value})
    assert p.returncode == 2
    assert one_line(p) == expected
    assert not (tmp_path / "o").exists()


def test_an_output_under_a_file_names_the_users_path(tmp_path):
    (tmp_path / "afile").write_bytes(b"x")
    out = tmp_path / "afile" / "out"
    p = logetl("filter", "--input", CORPUS_LOG, "--output", str(out))
    assert p.returncode == 2
    assert one_line(p) == f"Error: output {str(out)!r}: {str(tmp_path / 'afile')!r} is not a directory"


def test_long_output_names(tmp_path):
    ok = tmp_path / ("o" * 250)
    p = logetl("join", CORPUS_LOG, str(ok))
    assert p.returncode == 0, p.stderr
    assert parts(ok) == corpus("join.tsv")
    assert sorted(os.listdir(tmp_path)) == ["o" * 250]
    too_long = tmp_path / ("o" * 256)
    p = logetl("join", CORPUS_LOG, str(too_long))
    assert p.returncode == 2
    assert one_line(p) == (f"Error: output {str(too_long)!r}: the name {'o' * 40!r}... is longer than 255 bytes")


def test_a_corrupt_gzip_input_fails_the_run_naming_the_file(tmp_path):
    bad = tmp_path / "access.log.gz"
    data = gzip.compress(corpus("corpus.log") * 50)
    bad.write_bytes(data[: len(data) // 2] + b"\x00" * 64 + data[len(data) // 2 + 64:])
    p = logetl("filter", "--input", str(bad), "--output", str(tmp_path / "o"))
    assert p.returncode == 1
    last = p.stderr.decode().splitlines()[-1]
    assert last.startswith(f"Error: filter failed: cannot read input {str(bad)!r}: "), p.stderr
    assert "Traceback" not in p.stderr.decode() and not (tmp_path / "o").exists()


@pytest.mark.parametrize("suffix", [".gz", ".bz2"])
def test_a_truncated_compressed_input_fails_the_run_in_one_line_naming_the_file(tmp_path, suffix):
    # a cut-off stream ends with EOFError, which has no strerror: the message was an AttributeError's
    import bz2

    pack = gzip.compress if suffix == ".gz" else bz2.compress
    bad = tmp_path / f"access.log{suffix}"
    data = pack(corpus("corpus.log") * 50)
    bad.write_bytes(data[: len(data) // 2])
    p = logetl("filter", "--input", str(bad), "--output", str(tmp_path / "o"))
    assert p.returncode == 1
    assert "Traceback" not in p.stderr.decode()
    assert p.stderr.decode().splitlines()[-1] == (f"Error: filter failed: cannot read input {str(bad)!r}: "
                                                  "Compressed file ended before the end-of-stream marker was reached")
    assert not (tmp_path / "o").exists()


def test_a_run_started_with_stderr_closed_runs_as_with_it_sent_nowhere(tmp_path):
    # Python leaves sys.stderr None: the console's isatty() failed every run, and descriptor 2 was free
    # for the next file opened
    out = tmp_path / "o"
    p = subprocess.run(["bash", "-c", f"{sys.executable} -m logetl filter --input {CORPUS_LOG} --output {out} 2>&-; "
                        "echo \"status=$?\""], capture_output=True)
    assert p.stdout.decode().splitlines() == ["status=0"]
    assert parts(out) == corpus("filter.tsv")


def test_a_closed_stderr_pipe_does_not_turn_a_committed_run_into_a_failure(tmp_path):
    out = tmp_path / "o"
    cmd = (f"{sys.executable} -m logetl filter --input {CORPUS_LOG} --output {out} 2>&1 | head -1; "
           "echo \"status=${PIPESTATUS[0]}\"")
    p = subprocess.run(["bash", "-c", cmd], capture_output=True)
    lines = p.stdout.decode().splitlines()
    assert lines[0].startswith("logetl: warning:") or lines[0].startswith("logetl filter: SUCCESSFUL"), lines
    assert lines[-1] == "status=0"
    assert parts(out) == corpus("filter.tsv")


def test_logetl_debug_shows_the_traceback(tmp_path):
    p = logetl("join", CORPUS_LOG, str(tmp_path / "o"), env={"LOGETL_FAIL_AT": "join", "LOGETL_DEBUG": "1"})
    assert p.returncode == 1
    err = p.stderr.decode()
    assert "Traceback (most recent call last)" in err and "InjectedFailure" in err
    assert err.splitlines()[-1] == "Error: join failed: injected failure at step 'join' (LOGETL_FAIL_AT)"


def test_interrupt_exits_130_and_publishes_nothing(tmp_path):
    log = tmp_path / "big.log"
    log.write_bytes(corpus("corpus.log") * 20000)     # 940,000 lines: a few seconds of parsing
    proc = subprocess.Popen([*DEFAULT_SIGNALS, sys.executable, "-m", "logetl", "join", str(log), str(tmp_path / "o")],
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not any(n.startswith(f".o.logetl-{proc.pid}-") for n in os.listdir(tmp_path)):
        assert time.monotonic() < deadline and proc.poll() is None, "the run never staged its output"
        time.sleep(0.005)
    proc.send_signal(signal.SIGINT)     # the output is staged: the run is under way
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.decode().splitlines()[-1] == "logetl: interrupted; no output was committed"
    assert not (tmp_path / "o").exists()


# --- 15. a log in another layout does not pass unnoticed -----------------------------------------------------

NGINX = b'203.0.113.9 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5 "-" "curl" 0.003 "10.0.0.1"\n'


def test_every_line_malformed_warns_in_the_summary(tmp_path):
    log = tmp_path / "vhost.log"
    log.write_bytes((b"www.example.com:443 " + NGINX) * 3)
    p = logetl("filter", "--input", str(log), "--output", str(tmp_path / "o"))
    assert p.returncode == 0
    assert ("  warning: every line is malformed (3 of 3): is the input an access log in the expected layout?"
            in p.stderr.decode().splitlines())


class Statuses(FlowListener):
    def __init__(self):
        self.final = None

    def flow_finished(self, run):
        self.final = (run.status, run.error)
        self.written = dict(run.written)


def test_max_malformed_fails_the_run_and_publishes_nothing(engine, tmp_path):
    listener = Statuses()
    with pytest.raises(Exception) as caught:
        run_program("join", CORPUS_LOG, {"output": str(tmp_path / "out")}, engine=engine, listener=listener,
                    trap=str(tmp_path / "trap"), max_malformed=0.4)
    message = ("40.4% of the lines are malformed (19 of 47), above --max-malformed 0.4; nothing was published")
    assert str(caught.value) == message
    assert listener.final == (FAILED, message)
    # what the listeners (the monitor's "records written", its trend) see of a run that published nothing:
    # nothing written (the staged records once counted as written)
    assert listener.written == {}
    assert not (tmp_path / "out").exists() and not (tmp_path / "trap").exists()
    # Branch writes its outputs in the step that parses, before the threshold is checked
    with pytest.raises(Exception, match="above --max-malformed 0.4"):
        run_program("branch", CORPUS_LOG, {"output1": str(tmp_path / "b1"), "output2": str(tmp_path / "b2")},
                    engine=engine, listener=listener, max_malformed=0.4)
    assert listener.final == (FAILED, message) and listener.written == {}
    assert not (tmp_path / "b1").exists() and not (tmp_path / "b2").exists()
    # at or under the threshold the run succeeds
    run_program("join", CORPUS_LOG, {"output": str(tmp_path / "out")}, engine=engine, max_malformed=0.41)
    assert parts(tmp_path / "out") == corpus("join.tsv")


def test_max_malformed_on_the_command_line(tmp_path):
    p = logetl("branch", "--max-malformed", "0.1", "--input", CORPUS_LOG, "--output1", str(tmp_path / "a"),
               "--output2", str(tmp_path / "b"))
    assert p.returncode == 1
    err = p.stderr.decode().splitlines()
    assert "logetl branch: FAILED" in err[0]
    assert "  error: 40.4% of the lines are malformed (19 of 47), above --max-malformed 0.1; nothing was published" \
        in err
    assert err[-1] == ("Error: branch failed: 40.4% of the lines are malformed (19 of 47), above --max-malformed "
                       "0.1; nothing was published")
    assert not (tmp_path / "a").exists()
    bad = logetl("branch", "--max-malformed", "2", "--input", CORPUS_LOG, "--output1", "a", "--output2", "b",
                 cwd=str(tmp_path))
    assert bad.returncode == 2 and "--max-malformed" in bad.stderr.decode() and b"Traceback" not in bad.stderr


# --- found by review: what else must never be lost or misread ------------------------------------------------

def test_a_checkpoint_dir_shared_by_two_flows_never_restarts_one_from_the_others_checkpoint(tmp_path,
                                                                                         monkeypatch):
    one, two = tmp_path / "one.log", tmp_path / "two.log"
    one.write_bytes(corpus("corpus.log"))
    two.write_bytes(corpus("corpus.log").replace(b"10.0.0.3", b"10.9.9.3"))
    keep = str(tmp_path / "cp")
    monkeypatch.setenv("LOGETL_FAIL_AT", "join")
    for log, out in ((one, "a"), (two, "b")):
        with pytest.raises(Exception, match="injected failure"):
            run_program("join", str(log), {"output": str(tmp_path / out)}, checkpoint_dir=keep)
    monkeypatch.delenv("LOGETL_FAIL_AT")
    result = run_program("join", str(one), {"output": str(tmp_path / "a")}, checkpoint_dir=keep)
    assert result.restarted_after is None          # the checkpoint there is the other flow's
    assert parts(tmp_path / "a") == corpus("join.tsv")


def test_a_result_someone_else_published_during_a_failed_commit_is_never_replaced(tmp_path, monkeypatch):
    from logetl.io.outputs import StagedOutput

    real_commit = StagedOutput.commit

    def someone_writes_first(self):
        if self.path.endswith("/o2"):
            os.makedirs(self.path)
            with open(os.path.join(self.path, "part-00000"), "wb") as f:
                f.write(b"someone else's result\n")
        return real_commit(self)

    args = ("branch", CORPUS_LOG, {"output1": str(tmp_path / "o1"), "output2": str(tmp_path / "o2")})
    with monkeypatch.context() as patched, pytest.raises(Exception, match="became non-empty during the run"):
        patched.setattr(StagedOutput, "commit", someone_writes_first)
        run_program(*args)
    assert parts(tmp_path / "o1") == corpus("branch.tsv")        # published before the failure
    p = logetl("branch", "--input", CORPUS_LOG, "--output1", str(tmp_path / "o1"), "--output2",
               str(tmp_path / "o2"))
    assert p.returncode == 2
    assert one_line(p) == (f"Error: output2 directory {str(tmp_path / 'o2')!r} is not empty (use --overwrite to "
                           "replace it)")
    assert read(tmp_path / "o2" / "part-00000") == b"someone else's result\n"


def test_two_interruptions_in_a_row_keep_the_published_outputs_recognised(tmp_path):
    log = tmp_path / "in.log"
    log.write_bytes(corpus("corpus.log"))
    count = tmp_path / "count"
    cmd = [sys.executable, os.path.join(SUPPORT, "crashpoint.py"), "join", "-q", str(log), str(tmp_path / "out")]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "LOGETL_MONITOR": "off"}
    subprocess.run(cmd, env={**env, "LOGETL_CRASH_COUNT": str(count)}, check=True, capture_output=True)
    shutil.rmtree(tmp_path / "out")
    killed = subprocess.run(cmd, env={**env, "LOGETL_CRASH_AT": read(count).decode()}, capture_output=True)
    assert killed.returncode == -signal.SIGKILL
    second = logetl("join", str(log), str(tmp_path / "out"), env={"LOGETL_FAIL_AT": "join"})
    assert second.returncode == 1
    third = logetl("join", str(log), str(tmp_path / "out"))
    assert third.returncode == 0, third.stderr
    assert parts(tmp_path / "out") == corpus("join.tsv")


@pytest.mark.parametrize("args,message", [
    (["branch", "--input", CORPUS_LOG, "--output1", "a", "--output2", "a/b"],
     "Error: output1 'a' and output2 'a/b' overlap: keep them apart"),
    (["filter", "--input", CORPUS_LOG, "--output", "o", "--trap", "o/trap"],
     "Error: output 'o' and trap 'o/trap' overlap: keep them apart"),
    (["join", "--checkpoint-dir", "cp", "--work-dir", "cp", CORPUS_LOG, "o"],
     "Error: --work-dir 'cp' and --checkpoint-dir 'cp' overlap: keep them apart"),
    (["join", "--work-dir", "afile", CORPUS_LOG, "o"],
     "Error: --work-dir 'afile' exists and is not a directory"),
    (["join", "--work-dir", "afile/sub", CORPUS_LOG, "o"],
     "Error: --work-dir 'afile/sub': cannot make a directory in '{tmp}/afile'"),
    # checked before running as --work-dir is (it failed after the first step, exit 1; a read-only file
    # system alike)
    (["join", "--checkpoint-dir", "afile/cp", CORPUS_LOG, "o"],
     "Error: --checkpoint-dir 'afile/cp': cannot make a directory in '{tmp}/afile'"),
    (["filter", "--input", CORPUS_LOG, "--output", "link"],
     "Error: output 'link' is a symbolic link: give the directory it points to"),
])
def test_more_paths_that_are_refused_before_running(tmp_path, args, message):
    (tmp_path / "afile").write_bytes(b"x")
    (tmp_path / "target").mkdir()
    os.symlink(tmp_path / "target", tmp_path / "link")
    p = logetl(*args, cwd=str(tmp_path))
    assert p.returncode == 2
    assert one_line(p) == message.replace("{tmp}", str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["afile", "link", "target"]


def test_overwrite_keeps_a_users_directory_named_like_a_part(tmp_path):
    out = tmp_path / "out"
    (out / "part-time-jobs").mkdir(parents=True)
    (out / "part-time-jobs" / "cv.txt").write_bytes(b"cv")
    (out / "part-00000").write_bytes(b"old\n")
    p = logetl("filter", "--overwrite", "--input", CORPUS_LOG, "--output", str(out))
    assert p.returncode == 2 and "holds 'part-time-jobs', which is not part of a logetl output" in one_line(p)
    assert read(out / "part-time-jobs" / "cv.txt") == b"cv"


def test_directories_that_only_look_like_logetls_leftovers_are_kept(tmp_path):
    names = [".out.logetl-work.published-" + "0123456789ABCDEF" * 2, ".out.logetl-work.trash-999999-deadbeef",
             ".out.logetl-work.new-999998-cafebabe", ".out.logetl-999997-0badf00d",
             ".out.logetl-999997-0badf00d.old"]
    for n in names:
        (tmp_path / n).mkdir()
        (tmp_path / n / "thesis.tex").write_bytes(b"\\documentclass{book}")
    p = logetl("filter", "--input", CORPUS_LOG, "--output", str(tmp_path / "out"))
    assert p.returncode == 0, p.stderr
    for n in names:
        assert read(tmp_path / n / "thesis.tex") == b"\\documentclass{book}"


def test_an_interrupt_after_the_outputs_are_committed_changes_nothing(tmp_path):
    class CtrlC(FlowListener):
        def flow_finished(self, run):
            raise KeyboardInterrupt

    result = run_program("join", CORPUS_LOG, {"output": str(tmp_path / "out")}, listener=CtrlC())
    assert result.status == "SUCCESSFUL"
    assert result.notices[-1] == "interrupted after the outputs were committed"
    assert parts(tmp_path / "out") == corpus("join.tsv")
    assert sorted(os.listdir(tmp_path)) == ["out"]


@pytest.fixture
def bind_mount(tmp_path):
    """``tmp_path/real`` also seen as ``tmp_path/bind`` (a bind mount: one directory, two real paths)."""
    (tmp_path / "real").mkdir()
    (tmp_path / "bind").mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "--bind", str(tmp_path / "real"), str(tmp_path / "bind")], capture_output=True).returncode == 0
    require(mounted, "a bind mount needs root (mount --bind)")
    try:
        yield tmp_path
    finally:
        subprocess.run(["umount", str(tmp_path / "bind")], check=True)


def test_two_outputs_that_are_one_directory_through_a_bind_mount_are_refused(bind_mount):
    """The same directory by two real paths (a bind mount): refused before running. It ran, published the
    first output, then failed on the second (exit 1 with an output published)."""
    p = logetl("branch", "--input", CORPUS_LOG, "--output1", "real/z", "--output2", "bind/z", cwd=str(bind_mount))
    assert p.returncode == 2
    assert one_line(p) == "Error: output1 'real/z' and output2 'bind/z' are the same directory (through a mount): " \
                          "keep them apart"
    assert os.listdir(bind_mount / "real") == []


@pytest.mark.parametrize("args, error", [
    (["--output1", "real/z", "--output2", "bind/z/sub"],
     "output1 'real/z' and output2 'bind/z/sub' overlap (through a mount): keep them apart"),
    (["--output1", "bind/z/sub", "--output2", "real/z"],
     "output1 'bind/z/sub' and output2 'real/z' overlap (through a mount): keep them apart"),
    (["--output1", "real/z", "--output2", "o2", "--trap", "bind/z/trap"],
     "output1 'real/z' and trap 'bind/z/trap' overlap (through a mount): keep them apart"),
    (["--output1", "real/z", "--output2", "o2", "--work-dir", "bind/z/work"],
     "--work-dir 'bind/z/work' and output1 'real/z' overlap (through a mount): keep them apart"),
], ids=["output-in-output", "output-around-output", "trap", "work-dir"])
def test_a_directory_inside_another_through_a_bind_mount_is_refused(bind_mount, args, error):
    """One path nested in another only through a bind mount (their spellings do not nest): refused before
    running, nothing made. It ran, and failed at the commit once the inner output's staging directory had
    made the outer one non-empty (exit 1, working directories left in both)."""
    p = logetl("branch", "--input", CORPUS_LOG, *args, cwd=str(bind_mount))
    assert (p.returncode, one_line(p)) == (2, f"Error: {error}")
    assert sorted(os.listdir(bind_mount)) == ["bind", "real"]
    assert os.listdir(bind_mount / "real") == []


@pytest.mark.spark
def test_on_spark_too_an_output_inside_another_through_a_bind_mount_is_refused(bind_mount):
    """Spark's local paths (file:, as its Hadoop file system spells them) are compared by where they are
    too; before, by their spelling only."""
    from conftest import spark_missing

    missing = spark_missing()
    require(missing is None, missing or "")
    p = logetl("branch", "--hdfs", "--master", "local[1]", "--input", CORPUS_LOG, "--output1", "real/z",
               "--output2", "bind/z/sub", cwd=str(bind_mount))
    assert (p.returncode, one_line(p)) == (
        2, "Error: output1 'real/z' and output2 'bind/z/sub' overlap (through a mount): keep them apart")
    assert os.listdir(bind_mount / "real") == []


def test_a_checkpoint_dir_inside_an_output_through_a_bind_mount_is_refused(bind_mount):
    p = logetl("join", CORPUS_LOG, "real/j", "--checkpoint-dir", "bind/j/c", cwd=str(bind_mount))
    assert (p.returncode, one_line(p)) == (
        2, "Error: --checkpoint-dir 'bind/j/c' and output 'real/j' overlap (through a mount): keep them apart")
    assert os.listdir(bind_mount / "real") == []


def test_paths_apart_through_a_bind_mount_are_not_refused(bind_mount):
    """Two outputs side by side, one named through the mount: a run as any other."""
    p = logetl("branch", "--input", CORPUS_LOG, "--output1", "real/a", "--output2", "bind/b", cwd=str(bind_mount))
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(bind_mount / "real")) == ["a", "b"]
    assert parts(bind_mount / "real" / "a") == corpus("branch.tsv") == parts(bind_mount / "bind" / "b")


def test_an_input_inside_an_output_through_a_bind_mount_is_refused(bind_mount):
    """An earlier output's part read as the input of a run that would replace that output (--overwrite),
    named through a bind mount: refused, the part kept."""
    first = logetl("branch", "--input", CORPUS_LOG, "--output1", "real/z", "--output2", "o2", cwd=str(bind_mount))
    assert first.returncode == 0
    kept = read(bind_mount / "real" / "z" / "part-00000")
    p = logetl("branch", "--input", "bind/z/part-00000", "--output1", "real/z", "--output2", "o3", "--overwrite",
               cwd=str(bind_mount))
    assert (p.returncode, one_line(p)) == (2, "Error: output1 'real/z' contains input file 'bind/z/part-00000' "
                                              "(through a mount)")
    assert read(bind_mount / "real" / "z" / "part-00000") == kept
    assert sorted(os.listdir(bind_mount)) == ["bind", "o2", "real"]


def test_a_full_file_system_is_named(tmp_path):
    """A write that fails for want of space names the output whose file system is full (the error of a
    write to an open file names no file: "branch failed: [Errno 28] No space left on device")."""
    (tmp_path / "small").mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(tmp_path / "small")], capture_output=True).returncode == 0
    require(mounted, "a small file system needs root (mount -t tmpfs)")
    log = tmp_path / "in.log"
    log.write_bytes(b"".join(read(CORPUS_LOG).splitlines(keepends=True)[:3]) * 30_000)   # ~4 MB of records
    try:
        p = logetl("branch", "--input", str(log), "--output1", "small/o1", "--output2", "o2", "-q", cwd=str(tmp_path))
        left = os.listdir(tmp_path / "small")
        # the checkpoint's parts are written by Polars, whose error keeps the OS's only in its text
        stored = logetl("join", "-q", "--work-dir", "small/w", str(log), "j", cwd=str(tmp_path))
    finally:
        subprocess.run(["umount", str(tmp_path / "small")], check=True)
    assert p.returncode == 1
    assert one_line(p) == ("Error: branch failed: No space left on device: output1 'small/o1' and the working "
                           f"directory '{tmp_path}/small/.o1.logetl-work' (their file system has 0.0 MB free)")
    # nothing published, the staged outputs discarded (the working directory stays for a rerun)
    assert not os.path.exists(tmp_path / "o2") and left == [".o1.logetl-work"]
    assert stored.returncode == 1
    assert one_line(stored).startswith(f"Error: join failed: No space left on device: the working directory "
                                       f"'{tmp_path}/small/w/logetl-work-"), one_line(stored)


def test_a_file_uri_is_shown_as_the_path_the_user_gave():
    """Spark names local files as escaped ``file:`` URIs; messages name them as paths (one helper for all)."""
    from logetl.io.fs import local_path

    assert local_path("file:/tmp/my%20logs/a%25b.log") == "/tmp/my logs/a%b.log"
    assert local_path("file:///tmp/x.log") == "/tmp/x.log"
    assert local_path("/tmp/my%20logs/x.log") == "/tmp/my%20logs/x.log"     # a path is never unescaped
    assert local_path("hdfs://nn:8020/logs/x.log") == "hdfs://nn:8020/logs/x.log"


# --- two runs at once on the same outputs --------------------------------------------------------------------

def _names(root) -> list[str]:
    return sorted(os.listdir(root))


def _result(path) -> bytes:
    """An output's part files concatenated in name order (an incremental one holds its state too)."""
    names = sorted(os.listdir(path))
    assert set(names) - {"_SUCCESS", "_INCREMENTAL"} == {n for n in names if n.startswith("part-")}, names
    return b"".join(read(os.path.join(path, n)) for n in names if n.startswith("part-"))


def test_a_second_run_on_outputs_another_run_is_writing_stops_with_one_line_and_takes_nothing(tmp_path):
    """The first run holds its outputs from before it reads their state until it has cleaned up: a second
    run on them (here while the first has staged its output, its standard input held open) stops at once,
    exit 1, one line naming the output and the run that holds it, and nothing of the first run's is
    removed or changed; the first run then completes with the right bytes."""
    env = {**os.environ, "LOGETL_MONITOR": "off"}
    (tmp_path / "in.log").write_bytes(corpus("corpus.log"))
    first = subprocess.Popen([sys.executable, "-m", "logetl", "filter", "-q", "--input", "-", "--output", "o"],
                             cwd=tmp_path, env=env, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first.stdin.write(corpus("corpus.log"))
        first.stdin.flush()
        deadline = time.monotonic() + 60
        while not any(n.startswith(f".o.logetl-{first.pid}-") for n in os.listdir(tmp_path)):
            assert time.monotonic() < deadline and first.poll() is None, "the first run never staged its output"
            time.sleep(0.01)
        before = {n: tree(tmp_path / n) for n in _names(tmp_path)}
        for extra in ([], ["--overwrite"]):
            second = logetl("filter", "--input", "in.log", "--output", "o", *extra, cwd=tmp_path,
                            env={"LOGETL_MONITOR": "off"})
            assert second.returncode == 1 and second.stdout == b"", second
            assert one_line(second) == (f"Error: filter failed: output 'o' is being written by another logetl run "
                                        f"(process {first.pid}): wait for it to end, or choose another directory")
            assert {n: tree(tmp_path / n) for n in _names(tmp_path)} == before
        first.stdin.close()
        assert first.wait(timeout=60) == 0, first.stderr.read()
    finally:
        first.kill()
    assert parts(tmp_path / "o") == corpus("filter.tsv")
    assert _names(tmp_path) == ["in.log", "o"]


@pytest.mark.parametrize("mode", ["--overwrite", "--incremental"])
def test_runs_started_together_on_the_same_outputs_give_right_outputs_and_one_line_each(tmp_path, mode):
    """Pairs of runs started at the same moment, on the same outputs, many times: each one completes or
    stops with the line that names the other; the outputs are right after every round (an incremental
    output holds each line once), and nothing of logetl's is left beside them."""
    (tmp_path / "in.log").write_bytes(corpus("corpus.log") + b"\n")   # its last line complete: read now
    env = {**os.environ, "LOGETL_MONITOR": "off"}
    cmd = [sys.executable, "-m", "logetl", "branch", "-q", mode, "--input", "in.log", "--output1", "o1",
           "--output2", "o2", "--trap", "trap"]
    outcomes = []
    for _ in range(8):
        procs = [subprocess.Popen(cmd, cwd=tmp_path, env=env, stderr=subprocess.PIPE) for _ in range(2)]
        for p, other in zip(procs, procs[::-1]):
            err = p.communicate(timeout=120)[1].decode()
            outcomes.append(p.returncode)
            if p.returncode:
                assert p.returncode == 1 and err.splitlines() == [
                    f"Error: branch failed: {name} {path!r} is being written by another logetl run (process "
                    f"{other.pid}): wait for it to end, or choose another directory"
                    for name, path in (("output1", "o1"), ("output2", "o2"), ("trap", "trap")) if path in err], err
                assert len(err.splitlines()) == 1, err
            else:                 # (the corpus holds malformed lines on purpose; a run that starts while the
                # other removes its retired working directory, its outputs published, replaces them)
                assert all(line.startswith("logetl: warning: ") or line == (
                    "logetl: an earlier run of this flow was killed while or after publishing its outputs; this "
                    "run replaces them") for line in err.splitlines()), err
        assert _result(tmp_path / "o1") == _result(tmp_path / "o2") == corpus("branch.tsv")
        assert _result(tmp_path / "trap") == corpus("trap.log")
        assert _names(tmp_path) == ["in.log", "o1", "o2", "trap"]
    assert 0 in outcomes
