"""``--incremental``: a log grows and rotates over many runs; each run reads only the new
complete lines; the concatenation of an output's parts equals one Branch over all lines, also when every
run is SIGKILLed at a random file-system mutation (``tests/support/crashpoint.py``, each run a fork of a
process that has imported logetl: ``tests/support/forkserver.py``) and run again.
"""
from __future__ import annotations

import gzip
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys

import forkserver
import pytest

from conftest import logetl, read
from logetl import generate
from logetl.io.inputs import InputReadError, log_order

ENV = {"LOGETL_MONITOR": "off", "PYTHONDONTWRITEBYTECODE": "1"}
OUTS = ("o1", "o2", "trap")
BRANCH = ["branch", "--incremental", "--input", "logs", "--output1", "o1", "--output2", "o2", "--trap", "trap"]


def concatenation(path) -> bytes:
    """An incremental output's result: its part files concatenated in name order, after checking that the
    directory holds exactly the parts its _INCREMENTAL names, the state, and an empty _SUCCESS."""
    state = json.loads(read(os.path.join(path, "_INCREMENTAL")))
    found = sorted(os.path.relpath(os.path.join(d, n), path) for d, _, ns in os.walk(path) for n in ns)
    assert found == sorted(state["parts"] + ["_INCREMENTAL", "_SUCCESS"]), (found, state["parts"])
    assert read(os.path.join(path, "_SUCCESS")) == b""
    return b"".join(read(os.path.join(path, p)) for p in sorted(state["parts"]))


def listing(path) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, n), path) for d, _, ns in os.walk(path) for n in ns)


class Log:
    """A web server's access log in ``root/logs``: lines appended (possibly ending mid-line), rotated by
    rename, compressed, copytruncated, as logrotate does. ``written`` is every byte ever written, in order."""

    def __init__(self, root):
        self.dir = os.path.join(root, "logs")
        os.makedirs(self.dir, exist_ok=True)
        pool = list(generate.lines(2400, seed=13))
        # a few malformed lines of each reason for the trap, and records with size '-'
        for i in range(0, len(pool), 97):
            pool[i] = b"not an access log line %d" % i
        pool[500] = pool[500].replace(b" HTTP/1.", b" HTTP/1.\xff", 1)
        self.pool = [line + b"\n" for line in pool]
        self.next = 0
        self.pending = b""        # the rest of a line whose start is already written
        self.held = 0

    def path(self, name="access.log"):
        return os.path.join(self.dir, name)

    def append(self, n: int, partial: bool = False) -> None:
        data = self.pending
        self.pending = b""
        data += b"".join(self.pool[self.next:self.next + n])
        self.next += n
        if partial:
            line = self.pool[self.next]
            self.next += 1
            cut = len(line) // 2
            data += line[:cut]
            self.pending = line[cut:]
        self.held = len(data) - (data.rfind(b"\n") + 1)   # bytes of a half-written line at the end
        with open(self.path(), "ab") as f:
            f.write(data)

    def rename_rotation(self, abandon: bool = True) -> None:
        """``access.log`` -> ``access.log.1`` (older rotations shifted up), a new empty ``access.log``. A
        line left half-written stays so (``abandon``: the writer died), else the writer, still holding the
        renamed file open, finishes it there with ``finish_rotated``."""
        self.shift()
        os.rename(self.path(), self.path("access.log.1"))
        open(self.path(), "wb").close()
        if abandon:
            self.pending = b""

    def finish_rotated(self) -> None:
        with open(self.path("access.log.1"), "ab") as f:
            f.write(self.pending)
        self.pending = b""

    def copytruncate(self) -> None:
        self.shift()
        shutil.copyfile(self.path(), self.path("access.log.1"))
        os.truncate(self.path(), 0)
        self.pending = b""

    def shift(self) -> None:
        """Older rotations move up by one, ``access.log.1`` compressed on the way (delaycompress)."""
        names = sorted((n for n in os.listdir(self.dir) if n.startswith("access.log.")),
                       key=lambda n: -int(n.split(".")[2]))
        for n in names:
            k = int(n.split(".")[2])
            if n.endswith(".gz"):
                os.rename(self.path(n), self.path(f"access.log.{k + 1}.gz"))
            else:
                self.gzip(n, f"access.log.{k + 1}.gz")

    def gzip(self, name: str, to: str | None = None) -> None:
        with open(self.path(name), "rb") as f, gzip.open(self.path(to or name + ".gz"), "wb") as g:
            shutil.copyfileobj(f, g)
        os.remove(self.path(name))

    def everything(self) -> bytes:
        """The lines of the log's files in log order (what one Branch over all of them reads)."""
        out = []
        for p in log_order([os.path.join(self.dir, n) for n in os.listdir(self.dir)]):
            data = gzip.open(p).read() if p.endswith(".gz") else read(p)
            out.append(data if data.endswith(b"\n") or not data else data + b"\n")
        return b"".join(out)


def scenario(log: Log):
    """What happens to the log before each run (10 runs)."""
    yield lambda: log.append(400, partial=True)                      # ends mid-line
    yield lambda: log.append(300, partial=True)                      # finishes it, ends mid-line again

    def rename():
        log.append(100)
        log.rename_rotation()                                        # rename rotation
        log.append(200, partial=True)
    yield rename
    yield lambda: (log.gzip("access.log.1"), log.append(150))       # gzip of the rotated file
    yield lambda: log.append(0, partial=True)                        # nothing new: only half a line

    def copytruncate():
        log.append(0)
        log.copytruncate()                                           # copytruncate (the copy: a new inode)
        log.append(250, partial=True)
    yield copytruncate

    def rotate_mid_line():
        log.append(200, partial=True)
        log.rename_rotation(abandon=False)       # the writer is mid-line in access.log.1: the half line waits
    yield rotate_mid_line

    def finish_and_compress():
        log.finish_rotated()                     # ... finishes it there, then writes to the new log
        log.append(100)
        log.shift()                              # access.log.1 -> access.log.2.gz: read from where run 7 stopped
    yield finish_and_compress
    yield lambda: log.append(300)
    yield lambda: None                                               # nothing new at all


def run(root, cmd, crash_at: int = 0, count_file=None) -> subprocess.CompletedProcess:
    env = {**os.environ, **ENV, "LOGETL_CRASH_AT": str(crash_at)}
    if count_file:
        env["LOGETL_CRASH_COUNT"] = str(count_file)
    return forkserver.run(cmd, cwd=root, env=env, timeout=120)   # crashpoint.py in a fork of a warm process


def snapshot(root) -> dict:
    return {o: (listing(os.path.join(root, o)), concatenation(os.path.join(root, o))) for o in OUTS}


def test_a_growing_rotating_log_over_ten_runs_gives_one_branch_over_all_lines_even_when_each_run_is_killed(
        tmp_path):
    plain = tmp_path / "plain"
    log = Log(plain)
    expected, counts, stderrs, sizes, held = [], [], [], [], []
    for change in scenario(log):
        change()
        p = run(plain, BRANCH, count_file=tmp_path / "count")
        assert p.returncode == 0, p.stderr
        stderrs.append(p.stderr.decode())
        counts.append(int(read(tmp_path / "count")))
        sizes.append({n: os.path.getsize(os.path.join(log.dir, n)) for n in os.listdir(log.dir)})
        held.append(log.held)
        expected.append(snapshot(plain))
    assert len(expected) == 10
    assert sorted(os.listdir(log.dir)) == ["access.log", "access.log.2.gz", "access.log.3.gz", "access.log.4.gz"]
    assert "logetl: nothing new since run 4: the outputs are unchanged\n" in stderrs[4]
    assert "logetl: nothing new since run 8: the outputs are unchanged\n" in stderrs[9]
    assert expected[4] == expected[3] and expected[9] == expected[8]
    # what each run says it read: run 3 continues the renamed file where run 2 stopped, then the new log
    said = [re.search(r"^logetl: incremental run .*$", e, re.M) for e in stderrs]
    n = lambda text: int(text.replace(",", ""))   # noqa: E731
    r2 = re.fullmatch(r"logetl: incremental run 2 \(after run 1\): reading access\.log from byte ([\d,]+) to "
                      r"([\d,]+)", said[1].group(0))
    r3 = re.fullmatch(r"logetl: incremental run 3 \(after run 2\): reading access\.log\.1 from byte ([\d,]+) to "
                      r"([\d,]+) \(was access\.log\); access\.log from byte 0 to ([\d,]+) \(new file\)",
                      said[2].group(0))
    assert r2 and r3, said[:3]
    assert n(r3.group(1)) == n(r2.group(2)) and n(r3.group(2)) == sizes[2]["access.log.1"]
    assert n(r3.group(3)) == sizes[2]["access.log"] - held[2] and held[2] > 0
    assert said[3].group(0) == (f"logetl: incremental run 4 (after run 3): reading access.log.1.gz from byte "
                                f"{sizes[2]['access.log.1']:,} to its end (was access.log.1, now compressed, inode "
                                f"changed); access.log from byte {n(r3.group(3)):,} to {sizes[3]['access.log']:,}")
    assert said[4] is None and said[9] is None
    # each output gained one part per run with something new, named by run
    assert [n for n in expected[-1]["o1"][0] if n.startswith("part-")] == [
        f"part-{k:06d}-00000" for k in range(1, 9)]

    # one Branch (not incremental) over all the lines the log ever held
    ref = logetl("branch", "-q", "--input", "logs", "--output1", "r1", "--output2", "r2", "--trap", "rt",
                 cwd=plain, env=ENV)
    assert ref.returncode == 0, ref.stderr
    for mine, theirs in (("o1", "r1"), ("o2", "r2"), ("trap", "rt")):
        assert expected[-1][mine][1] == read(plain / theirs / "part-00000"), mine
    assert expected[-1]["trap"][1].count(b"\n") >= 20

    # the same, each run killed at a random file-system mutation, then run again
    killed = tmp_path / "killed"
    log = Log(killed)
    rng = random.Random(13)
    for i, change in enumerate(scenario(log)):
        change()
        n = rng.randint(1, counts[i])
        k = run(killed, BRANCH, crash_at=n)
        assert k.returncode == -signal.SIGKILL, (i, n, k.stderr)
        for o in OUTS:       # every output whole: the last run's or this run's (absent only before run 1)
            if i or os.path.exists(killed / o):
                got = (listing(killed / o), concatenation(killed / o))
                assert got in ([expected[i - 1][o]] if i else []) + [expected[i][o]], (i, n, o)
        again = run(killed, BRANCH)
        assert again.returncode == 0, (i, n, again.stderr)
        assert snapshot(killed) == expected[i], (i, n)
    leftovers = sorted(set(os.listdir(killed)) - {"logs", *OUTS})
    assert leftovers == []


def test_refusals_are_one_line_before_anything_runs(tmp_path):
    (tmp_path / "in.log").write_bytes(b"".join(line + b"\n" for line in generate.lines(50, seed=1)))

    def refused(*args):
        p = logetl(*args, cwd=tmp_path, env=ENV)
        assert p.returncode == 2 and p.stdout == b"", p
        return p.stderr.decode()

    assert refused("filter", "--incremental", "--input", "in.log", "--output", "f") == (
        "Error: --incremental: operator 'unique_ip' (unique) needs all of the data, not only the new lines\n")
    assert refused("join", "--incremental", "in.log", "j") == (
        "Error: --incremental: operator 'unique_ip' (unique) needs all of the data, not only the new lines\n")
    assert refused("branch", "--hdfs", "--incremental", "--input", "in.log", "--output1", "a", "--output2",
                   "b") == "Error: --incremental runs on the local engine\n"
    assert refused("branch", "--incremental", "--input", "-", "--output1", "a", "--output2", "b") == (
        "Error: --incremental reads files: standard input cannot be read again\n")
    assert not any(os.path.exists(tmp_path / d) for d in ("f", "j", "a", "b"))

    # an output of a run that was not incremental
    assert logetl("branch", "-q", "--input", "in.log", "--output1", "a", "--output2", "b", cwd=tmp_path,
                  env=ENV).returncode == 0
    assert refused("branch", "--incremental", "--input", "in.log", "--output1", "a", "--output2", "b") == (
        f"Error: output1 directory {str(tmp_path / 'a')!r} is not empty and holds no _INCREMENTAL: it was not "
        "written by an incremental run (--overwrite starts it afresh)\n")
    # an incremental output of another flow (here: the same program writing JSON Lines)
    assert logetl("branch", "-q", "--incremental", "--overwrite", "--input", "in.log", "--output1", "a",
                  "--output2", "b", cwd=tmp_path, env=ENV).returncode == 0
    theirs = json.loads(read(tmp_path / "a" / "_INCREMENTAL"))["flow"]["definition"]
    err = refused("branch", "--incremental", "--output-format", "jsonl", "--input", "in.log", "--output1", "a",
                  "--output2", "b")
    assert err.startswith(f"Error: output1 {str(tmp_path / 'a')!r} holds the incremental state of another flow "
                          f"(definition {theirs}, this flow's is ") and err.endswith(
        "): choose another directory, or --overwrite to start afresh\n"), err


def _branch(root, *extra):
    p = logetl(*BRANCH, *extra, cwd=root, env=ENV)
    assert p.returncode == 0, p.stderr
    return p.stderr.decode()


def test_an_output_one_run_ahead_is_rolled_back_and_rebuilt_and_two_runs_apart_is_refused(tmp_path):
    log = Log(tmp_path)
    log.append(300, partial=True)
    _branch(tmp_path)
    saved = tmp_path / "saved"
    for o in ("o2", "trap"):
        shutil.copytree(tmp_path / o, saved / o)
    log.append(300)
    _branch(tmp_path)
    # as if the run 2 was killed after committing o1: o2 and the trap still hold run 1
    for o in ("o2", "trap"):
        shutil.rmtree(tmp_path / o)
        shutil.copytree(saved / o, tmp_path / o)
    log.append(200)
    err = _branch(tmp_path)
    assert "logetl: output1 is one run ahead (run 2; an earlier run was stopped while committing): its run 2 " \
           "is made again\n" in err
    assert "logetl: incremental run 2 (after run 1): reading access.log from byte " in err
    ref = logetl("branch", "-q", "--input", "logs", "--output1", "r1", "--output2", "r2", "--trap", "rt",
                 cwd=tmp_path, env=ENV)
    assert ref.returncode == 0
    for mine, theirs in (("o1", "r1"), ("o2", "r2"), ("trap", "rt")):
        assert concatenation(tmp_path / mine) == read(tmp_path / theirs / "part-00000")
        assert json.loads(read(tmp_path / mine / "_INCREMENTAL"))["parts"] == [
            "part-000001-00000", "part-000002-00000"]
    # the line counters of the runs each output holds: run 2's counted once, though o1 had committed it
    totals = [json.loads(read(tmp_path / o / "_INCREMENTAL"))["totals"] for o in OUTS]
    assert totals[0] == totals[1] == totals[2]
    assert totals[0]["lines_read"] == read(log.path()).count(b"\n")
    assert totals[0]["malformed"] == concatenation(tmp_path / "trap").count(b"\n") > 0
    log.append(100)
    _branch(tmp_path)                                            # run 3
    shutil.rmtree(tmp_path / "o2")
    shutil.copytree(saved / "o2", tmp_path / "o2")               # o2 at run 1, o1 at run 3
    p = logetl(*BRANCH, cwd=tmp_path, env=ENV)
    assert p.returncode == 2
    assert p.stderr.decode() == ("Error: the outputs are more than one run apart or do not follow each other: "
                                 "output1 (run 3), output2 (run 1), trap (run 3); --overwrite starts them afresh\n")


PARTITIONED = '''import logetl.api as L
from logetl.contract import FIELDS


def flow(fmt=None):
    return L.Flow("by_status", [L.read(fmt, fields=FIELDS).write("out", partition_by="response")])
'''


def test_a_partitioned_output_gains_new_parts_inside_each_partition_it_writes(tmp_path):
    (tmp_path / "by_status.py").write_text(PARTITIONED)
    log = Log(tmp_path)
    log.append(40)
    cmd = ["run", "by_status.py", "-q", "--incremental", "--input", "logs", "--output", "out=out"]
    assert logetl(*cmd, cwd=tmp_path, env=ENV).returncode == 0
    first = set(listing(tmp_path / "out"))
    log.append(800)
    assert logetl(*cmd, cwd=tmp_path, env=ENV).returncode == 0
    names = listing(tmp_path / "out")
    assert first - {"_INCREMENTAL"} <= set(names)   # the earlier parts are kept, unchanged names
    assert "response=200/part-000001-00000" in names and "response=200/part-000002-00000" in names
    # a status that appears only in the new lines gets a partition holding only the new run's part
    only_new = {n.split("/")[0] for n in names if n.endswith("part-000002-00000")} - {
        n.split("/")[0] for n in first}
    assert only_new, names
    for leaf in only_new:
        assert [n for n in names if n.startswith(leaf + "/")] == [f"{leaf}/part-000002-00000"]
    full = logetl("run", "by_status.py", "-q", "--input", "logs", "--output", "out=full", cwd=tmp_path, env=ENV)
    assert full.returncode == 0
    leaves = sorted({n.split("/")[0] for n in names if "/" in n})
    assert leaves == sorted(n for n in os.listdir(tmp_path / "full") if "=" in n)
    concatenation(tmp_path / "out")
    for leaf in leaves:
        mine = b"".join(read(tmp_path / "out" / n) for n in names if n.startswith(leaf + "/"))
        assert mine == read(tmp_path / "full" / leaf / "part-00000"), leaf


def test_rotations_are_read_oldest_first_then_the_log(tmp_path):
    names = ["access.log", "access.log.1", "access.log.10.gz", "access.log.2.gz", "error.log-20260102",
             "error.log-20251231.gz", "error.log", "zeta", "alpha.txt", "app.log.3.bz2"]
    for n in names:
        (tmp_path / n).write_bytes(b"")
    from logetl.io.fs import LOCAL
    from logetl.io.inputs import resolve

    assert [os.path.basename(p) for p in resolve(str(tmp_path), LOCAL)] == [
        "access.log.10.gz", "access.log.2.gz", "access.log.1", "access.log", "alpha.txt", "app.log.3.bz2",
        "error.log-20251231.gz", "error.log-20260102", "error.log", "zeta"]


def test_a_compressed_file_beside_its_uncompressed_twin_waits_for_the_next_run(tmp_path):
    log = Log(tmp_path)
    log.append(100)
    _branch(tmp_path)
    log.append(50)
    log.rename_rotation()
    log.append(30)
    # logrotate is compressing access.log.1: the .gz is being written while the original is still there
    with open(log.path("access.log.1"), "rb") as f, gzip.open(log.path("access.log.1.gz"), "wb") as g:
        g.write(f.read()[:1000])
    err = _branch(tmp_path)
    assert "access.log.1.gz left for the next run (its uncompressed twin is still there)" in err
    os.remove(log.path("access.log.1.gz"))
    log.gzip("access.log.1")
    assert "logetl: nothing new since run 2" in _branch(tmp_path)
    # a log that ends mid-line, its writer gone, is rotated and compressed: that last line counts then
    log.append(10, partial=True)
    _branch(tmp_path)
    log.rename_rotation()
    log.shift()
    err = _branch(tmp_path)
    assert "reading access.log.2.gz from byte " in err and re.search(r"\n  lines read +1\n", err), err
    assert json.loads(read(tmp_path / "o1" / "_INCREMENTAL"))["run"] == 4
    ref = logetl("branch", "-q", "--input", "logs", "--output1", "r1", "--output2", "r2", cwd=tmp_path, env=ENV)
    assert ref.returncode == 0
    assert concatenation(tmp_path / "o1") == read(tmp_path / "r1" / "part-00000")


def test_a_run_with_nothing_new_changes_no_output_and_says_so_to_every_listener(tmp_path):
    from logetl.job import run_program

    log = Log(tmp_path)
    log.append(60, partial=True)
    outs = {"output1": str(tmp_path / "o1"), "output2": str(tmp_path / "o2")}
    first = run_program("branch", log.dir, outs, incremental=True, monitor=False, quiet=True)
    assert first.notices == [f"incremental run 1 (from the start): reading access.log from byte 0 to "
                             f"{os.path.getsize(log.path()) - log.held:,}"]
    before = {o: (listing(tmp_path / o), os.stat(tmp_path / o / "_INCREMENTAL").st_ino) for o in ("o1", "o2")}
    again = run_program("branch", log.dir, outs, incremental=True, monitor=False, quiet=True)
    # the notice is on the run, which the console shows and the monitor records (its documents carry it)
    assert again.status == "SUCCESSFUL" and again.lines_read == 0
    assert again.notices == ["nothing new since run 1: the outputs are unchanged"]
    assert again.to_dict()["notices"] == again.notices
    assert {o: (listing(tmp_path / o), os.stat(tmp_path / o / "_INCREMENTAL").st_ino) for o in ("o1", "o2")} \
        == before
    assert sorted(os.listdir(tmp_path)) == ["logs", "o1", "o2"]


def _notices(stderr: str) -> list[str]:
    """The notice lines of a run's stderr (the summary's lines start with ``logetl branch:`` or spaces)."""
    return [line for line in stderr.splitlines() if line.startswith("logetl: ")]


def _state(path) -> dict:
    return json.loads(read(os.path.join(path, "_INCREMENTAL")))


def test_a_trap_that_runs_did_not_write_resumes_and_no_output_is_made_again(tmp_path):
    """A run without --trap does not write the trap: given again, the trap is not "behind" (no run was stopped),
    so nothing is rolled back or read again; it resumes, and says which runs' malformed lines it lacks. A
    trap that its run did write but was killed before committing (after the other outputs) is still
    recovered by making that run again."""
    log = Log(tmp_path)
    log.append(100)                              # lines 0, 77 and 97 are malformed
    _branch(tmp_path)                            # run 1, with the trap
    log.append(100)                              # line 194
    no_trap = logetl(*BRANCH[:-2], cwd=tmp_path, env=ENV)          # run 2, without
    assert no_trap.returncode == 0, no_trap.stderr
    before = {o: (listing(tmp_path / o), os.stat(tmp_path / o / "_INCREMENTAL").st_ino) for o in OUTS}
    lacks = ("logetl: trap was last written by run 1: the malformed lines of run 2, which did not write it, are "
             "missing from it; it resumes with the lines read from now on")
    assert _notices(_branch(tmp_path)) == [lacks, "logetl: nothing new since run 2: the outputs are unchanged"]
    assert {o: (listing(tmp_path / o), os.stat(tmp_path / o / "_INCREMENTAL").st_ino) for o in OUTS} == before
    end2 = _state(tmp_path / "o1")["inputs"][0]["offset"]
    saved = tmp_path / "saved-trap"
    shutil.copytree(tmp_path / "trap", saved)
    log.append(100)                              # lines 225 and 291
    reading = (f"logetl: incremental run 3 (after run 2): reading access.log from byte {end2:,} to "
               f"{os.path.getsize(log.path()):,}")
    assert _notices(_branch(tmp_path)) == [reading, lacks]      # run 3: only the new lines, for every output
    # as if run 3 was killed after committing the other outputs: they are made again, the trap still resumes
    shutil.rmtree(tmp_path / "trap")
    shutil.copytree(saved, tmp_path / "trap")
    assert _notices(_branch(tmp_path)) == [reading, lacks] + [
        f"logetl: output{k} is one run ahead (run 3; an earlier run was stopped while committing): its run 3 is "
        "made again" for k in (1, 2)]
    assert _state(tmp_path / "trap")["run"] == 3 and _state(tmp_path / "trap")["previous"]["run"] == 1
    assert concatenation(tmp_path / "trap") == b"".join(log.pool[i] for i in (0, 77, 97, 225, 291))
    ref = logetl("branch", "-q", "--input", "logs", "--output1", "r1", "--output2", "r2", cwd=tmp_path, env=ENV)
    assert ref.returncode == 0
    for mine, theirs in (("o1", "r1"), ("o2", "r2")):
        assert concatenation(tmp_path / mine) == read(tmp_path / theirs / "part-00000")
        assert _state(tmp_path / mine)["parts"] == ["part-000001-00000", "part-000002-00000", "part-000003-00000"]

    # run 4 writes the trap but is killed after committing the other outputs: made again, trap included
    shutil.rmtree(saved)
    shutil.copytree(tmp_path / "trap", saved)
    log.append(100)                              # line 388
    _branch(tmp_path)
    shutil.rmtree(tmp_path / "trap")
    shutil.copytree(saved, tmp_path / "trap")
    err = _notices(_branch(tmp_path))
    assert err[1:] == ["logetl: output1 is one run ahead (run 4; an earlier run was stopped while committing): "
                       "its run 4 is made again",
                       "logetl: output2 is one run ahead (run 4; an earlier run was stopped while committing): "
                       "its run 4 is made again"], err
    assert concatenation(tmp_path / "trap") == b"".join(log.pool[i] for i in (0, 77, 97, 225, 291, 388))
    assert [_state(tmp_path / o)["run"] for o in OUTS] == [4, 4, 4]

    # a trap directory that no run wrote yet starts now
    p = logetl(*BRANCH[:-1], "trap2", cwd=tmp_path, env=ENV)
    assert p.returncode == 0 and _notices(p.stderr.decode()) == [
        "logetl: trap is new: the malformed lines of runs 1 to 4, which did not write it, are missing from it; it "
        "starts with the lines read from now on", "logetl: nothing new since run 4: the outputs are unchanged"]


def test_a_run_adds_no_part_without_records_and_an_output_without_records_keeps_one_empty_part(tmp_path):
    """Concatenating an output's parts gives its records, so a part without records is left out (also a
    Parquet part without rows, which is not 0 bytes). An output that has no records yet holds one empty part,
    as an output of a run that is not incremental does, until a run adds records."""
    log = Log(tmp_path)
    log.next = 1                                 # line 0 is malformed, lines 1 to 50 are not: run 1 traps nothing
    log.append(50)
    _branch(tmp_path)
    assert listing(tmp_path / "trap") == ["_INCREMENTAL", "_SUCCESS", "part-000001-00000"]
    assert concatenation(tmp_path / "trap") == b""
    log.append(50)                               # lines 77 and 97
    _branch(tmp_path)
    assert listing(tmp_path / "trap") == ["_INCREMENTAL", "_SUCCESS", "part-000002-00000"]
    assert concatenation(tmp_path / "trap") == log.pool[77] + log.pool[97]
    log.append(20)                               # no malformed line
    _branch(tmp_path)
    assert listing(tmp_path / "trap") == ["_INCREMENTAL", "_SUCCESS", "part-000002-00000"]
    for o in OUTS:                               # the state counts the records its parts hold
        assert _state(tmp_path / o)["records"] == concatenation(tmp_path / o).count(b"\n") > 0
    assert listing(tmp_path / "o1") == ["_INCREMENTAL", "_SUCCESS", "part-000001-00000", "part-000002-00000",
                                        "part-000003-00000"]

    import pyarrow.parquet as pq

    pql = Log(tmp_path / "pq")
    cmd = [*BRANCH, "--output-format", "parquet"]
    pql.append(1)                                # only a malformed line: no records
    assert logetl(*cmd, cwd=tmp_path / "pq", env=ENV).returncode == 0
    placeholder = tmp_path / "pq" / "o1" / "part-000001-00000.parquet"
    assert listing(tmp_path / "pq" / "o1") == ["_INCREMENTAL", "_SUCCESS", "part-000001-00000.parquet"]
    assert pq.read_table(placeholder).num_rows == 0 and pq.read_schema(placeholder).names == [
        "ip", "time", "request", "response", "size"]
    pql.append(40)
    assert logetl(*cmd, cwd=tmp_path / "pq", env=ENV).returncode == 0
    pql.next = 97
    pql.append(1)                                # only a malformed line again
    assert logetl(*cmd, cwd=tmp_path / "pq", env=ENV).returncode == 0
    assert listing(tmp_path / "pq" / "o1") == ["_INCREMENTAL", "_SUCCESS", "part-000002-00000.parquet"]
    assert pq.read_table(tmp_path / "pq" / "o1" / "part-000002-00000.parquet").num_rows == _state(
        tmp_path / "pq" / "o1")["records"] > 30
    assert listing(tmp_path / "pq" / "trap") == ["_INCREMENTAL", "_SUCCESS", "part-000001-00000",
                                                 "part-000003-00000"]


def test_a_compressed_rotated_file_read_to_its_end_is_not_decompressed_again(tmp_path, monkeypatch):
    """Compressed after the run that read its uncompressed original to the end, a rotated file holds nothing
    new: the first run after decompresses it to make sure, records it, and later runs do not open it while its
    device, inode, size and modification time stay."""
    from logetl.io import inputs
    from logetl.job import run_program

    log = Log(tmp_path)
    outs = {"output1": str(tmp_path / "o1"), "output2": str(tmp_path / "o2")}

    def branch():
        return run_program("branch", log.dir, outs, trap=str(tmp_path / "trap"), incremental=True, monitor=False,
                           quiet=True)

    log.append(100)
    branch()
    log.append(50)
    log.rename_rotation()
    log.append(30)
    branch()                                     # run 2 reads access.log.1 to its end
    rotated = os.path.getsize(log.path("access.log.1"))
    log.gzip("access.log.1")
    opened = []
    real = inputs.open_input
    monkeypatch.setattr(inputs, "open_input", lambda path: (opened.append(os.path.basename(path)), real(path))[1])
    third = branch()
    assert third.notices == [
        f"incremental run 3 (after run 2): reading access.log.1.gz from byte {rotated:,} to its end (was "
        "access.log.1, now compressed, inode changed)",
        "nothing new since run 2: the outputs are unchanged but for their state, which records access.log.1.gz "
        "as read to the end (not decompressed again)"]
    assert "access.log.1.gz" in opened and third.lines_read == 0
    assert [_state(tmp_path / o)["run"] for o in OUTS] == [2, 2, 2]
    for _ in range(2):
        opened.clear()
        again = branch()
        assert again.notices == ["nothing new since run 2: the outputs are unchanged"]
        assert [n for n in opened if n.endswith(".gz")] == [] and again.lines_read == 0
    end = os.path.getsize(log.path())
    log.append(20)
    opened.clear()
    fourth = branch()                            # run 3: the new lines only; its state has the compressed file
    assert fourth.notices == [f"incremental run 3 (after run 2): reading access.log from byte {end:,} to "
                              f"{os.path.getsize(log.path()):,}"]
    assert [n for n in opened if n.endswith(".gz")] == []
    assert [e["compressed"] for e in _state(tmp_path / "o1")["inputs"]] == [True, False]
    assert "read_compressed" not in _state(tmp_path / "o1")
    opened.clear()
    assert branch().notices == ["nothing new since run 3: the outputs are unchanged"] and opened == ["access.log"]
    # a compressed file that changed (here: its modification time) is read again
    st = os.stat(log.path("access.log.1.gz"))
    os.utime(log.path("access.log.1.gz"), ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert branch().notices[0] == (f"incremental run 4 (after run 3): reading access.log.1.gz from byte "
                                   f"{rotated:,} to its end")
    ref = logetl("branch", "-q", "--input", "logs", "--output1", "r1", "--output2", "r2", "--trap", "rt",
                 cwd=tmp_path, env=ENV)
    assert ref.returncode == 0
    for mine, theirs in (("o1", "r1"), ("o2", "r2"), ("trap", "rt")):
        assert concatenation(tmp_path / mine) == read(tmp_path / theirs / "part-00000"), mine


def test_a_run_killed_while_recording_a_compressed_file_leaves_whole_outputs(tmp_path):
    """The run that records a compressed file read to its end for nothing replaces each output (state only):
    killed at any of its last file-system mutations (those of the commit), every output still holds run 2
    whole, and the runs after it neither read nor change anything."""
    template = tmp_path / "template"
    log = Log(template)
    log.append(100)
    log.append(50)
    assert run(template, BRANCH).returncode == 0
    log.rename_rotation()
    log.append(30)
    assert run(template, BRANCH).returncode == 0
    log.gzip("access.log.1")
    before = snapshot(template)
    counted = tmp_path / "counted"
    shutil.copytree(template, counted)
    assert run(counted, BRANCH, count_file=tmp_path / "count").returncode == 0
    total = int(read(tmp_path / "count"))
    plain = "logetl: nothing new since run 2: the outputs are unchanged"
    recorded = plain + (" but for their state, which records access.log.1.gz as read to the end (not "
                        "decompressed again)")
    for n in range(total - 26, total + 1, 3):
        root = tmp_path / f"killed-{n}"
        shutil.copytree(template, root)
        assert run(root, BRANCH, crash_at=n).returncode == -signal.SIGKILL, n
        assert snapshot(root) == before, n
        again = run(root, BRANCH)
        assert again.returncode == 0 and _notices(again.stderr.decode())[-1] in (plain, recorded), n
        last = run(root, BRANCH)
        assert last.returncode == 0 and _notices(last.stderr.decode()) == [plain], n
        assert snapshot(root) == before, n
        assert sorted(os.listdir(root)) == ["logs", *OUTS], n


# --- a copy beside the log, a rotation between the plan and the read ----------------------------------------

def _written_once(root, log: Log) -> None:
    """Every complete line the log was given is in the outputs exactly once: each output's concatenation
    equals one Branch over those lines (a copy that logrotate made holds some of them twice on disk)."""
    complete = log.next - (1 if log.pending else 0)
    (root / "written.log").write_bytes(b"".join(log.pool[:complete]))
    ref = logetl("branch", "-q", "--overwrite", "--input", "written.log", "--output1", "r1", "--output2", "r2",
                 "--trap", "rt", cwd=root, env=ENV)
    assert ref.returncode == 0, ref.stderr
    for mine, theirs in (("o1", "r1"), ("o2", "r2"), ("trap", "rt")):
        assert concatenation(root / mine) == read(root / theirs / "part-00000"), mine


def test_a_copy_beside_the_log_is_its_twin_and_no_line_is_read_twice(tmp_path):
    """logrotate's ``copytruncate`` copies the log, then truncates it; its ``copy`` copies it and leaves it.
    A run that sees the copy beside the original (between copy and truncate, during the copy, or for good)
    keeps reading the original where the state says, and takes the copy for its twin: the bytes it shares
    with the original are read there, once. After the truncation the copy continues from that offset."""
    log = Log(tmp_path)
    log.append(300, partial=True)
    _branch(tmp_path)                                            # run 1
    end1 = _state(tmp_path / "o1")["inputs"][0]["offset"]
    log.append(200)
    # copytruncate's window: the copy is whole, the log not truncated yet, and the server writes on
    shutil.copyfile(log.path(), log.path("access.log.1"))
    copied = os.path.getsize(log.path("access.log.1"))
    log.append(50, partial=True)
    end2 = os.path.getsize(log.path()) - log.held
    assert _notices(_branch(tmp_path)) == [                      # run 2
        f"logetl: incremental run 2 (after run 1): reading access.log from byte {end1:,} to {end2:,}",
        "logetl: access.log.1 is a copy of access.log (logrotate's copy or copytruncate): the lines they share "
        "are read once, from access.log"]
    twin = {e["path"]: e for e in _state(tmp_path / "o1")["inputs"]}[log.path("access.log.1")]
    assert twin["offset"] == end2 and twin["copy_of"] == log.path()
    _written_once(tmp_path, log)
    os.truncate(log.path(), 0)                                   # the truncation: the half line is lost
    log.pending = b""
    log.append(100)
    notes = _notices(_branch(tmp_path))                          # run 3: the new lines only
    assert notes[0] == (f"logetl: incremental run 3 (after run 2): reading access.log from byte 0 to "
                        f"{os.path.getsize(log.path()):,} (new file)"), notes
    _written_once(tmp_path, log)
    assert copied < end2

    # during the copy: the copy holds the first lines only, then the rest; the log is truncated after
    during = tmp_path / "during"
    log = Log(during)
    log.append(400)
    _branch(during)                                              # run 1
    log.append(100)
    data = read(log.path())
    half = data.rfind(b"\n", 0, len(data) // 3) + 1
    log_1 = log.path("access.log.1")
    with open(log_1, "wb") as f:
        f.write(data[:half])                                     # the first third, copied so far
    _branch(during)                                              # run 2: the copy is the log's twin
    with open(log_1, "ab") as f:
        f.write(data[half:])                                     # the copy ends
    _branch(during)                                              # run 3: the twin still, nothing new
    os.truncate(log.path(), 0)
    log.append(30)
    _branch(during)                                              # run 4
    _written_once(during, log)

    # logrotate's copy: the copy stays beside the log, which goes on growing, runs after runs; the next
    # rotation compresses the copy (shifted to access.log.2.gz) and makes a new one
    kept = tmp_path / "copy"
    log = Log(kept)
    log.append(200)
    _branch(kept)
    shutil.copyfile(log.path(), log.path("access.log.1"))
    for _ in range(2):
        log.append(100, partial=True)
        _branch(kept)
    log.shift()
    shutil.copyfile(log.path(), log.path("access.log.1"))
    log.append(50)
    _branch(kept)
    assert sorted(os.listdir(log.dir)) == ["access.log", "access.log.1", "access.log.2.gz"]
    _written_once(kept, log)


def test_a_rename_rotation_between_the_plan_and_the_read_reads_the_planned_file(tmp_path, monkeypatch):
    """The plan gives each file a range of bytes; the file read is the one planned (its device and inode),
    found again under its new name when it was renamed meanwhile. Gone altogether (compressed, then
    removed), the run fails, one line, nothing committed, and the next run reads it from its compressed
    copy: no line is lost or read twice."""
    from logetl import incremental
    from logetl.job import run_program

    log = Log(tmp_path)
    outs = {"output1": str(tmp_path / "o1"), "output2": str(tmp_path / "o2")}

    def branch():
        return run_program("branch", log.dir, outs, trap=str(tmp_path / "trap"), incremental=True, monitor=False,
                           quiet=True)

    log.append(300, partial=True)
    branch()                                                     # run 1
    log.append(200)
    planned = incremental.plan
    between = []

    def plan_then(*args, **kwargs):
        result = planned(*args, **kwargs)
        if between:
            between.pop(0)()      # what happens to the log after the plan, before the read
        return result

    monkeypatch.setattr(incremental, "plan", plan_then)

    def rotate():
        log.rename_rotation()
        log.append(600)           # the new log is longer than the planned offsets: read there, wrong lines

    between.append(rotate)
    run = branch()                                               # run 2
    assert run.status == "SUCCESSFUL" and between == []
    assert _state(tmp_path / "o1")["inputs"][-1]["ino"] == os.stat(log.path("access.log.1")).st_ino
    branch()                                                     # run 3: the rest of both
    _written_once(tmp_path, log)

    # the planned file is gone by the time it is read: the run fails, commits nothing, and says so
    log.append(100)
    before = snapshot(tmp_path)

    def rotate_away():
        log.rename_rotation()
        log.shift()               # access.log.1 -> access.log.2.gz, compressed: the planned inode is gone
        log.append(50)

    between.append(rotate_away)
    with pytest.raises(InputReadError) as failed:
        branch()
    assert str(failed.value) == (f"cannot read input {log.path()!r}: it was rotated away after the run was "
                                 "planned (nothing was committed; run again)")
    assert snapshot(tmp_path) == before
    branch()
    _written_once(tmp_path, log)
    # the same on the command line: one line, exit 1
    log.append(100)
    p = subprocess.run([sys.executable, "-c", HOOKED_RUN, *BRANCH], cwd=tmp_path, env={**os.environ, **ENV},
                       capture_output=True, timeout=120)
    assert p.returncode == 1 and p.stderr.decode().splitlines()[-1] == (
        "Error: branch failed: cannot read input 'logs/access.log': it was rotated away after the run was "
        "planned (nothing was committed; run again)"), p.stderr
    assert "Traceback" not in p.stderr.decode()
    assert logetl(*BRANCH, cwd=tmp_path, env=ENV).returncode == 0
    _written_once(tmp_path, log)


#: the command line, with a rotation that removes the planned file forced between the plan and the read
HOOKED_RUN = """
import gzip, os, shutil, sys
from logetl import incremental

planned = incremental.plan

def plan_then(*args, **kwargs):
    result = planned(*args, **kwargs)
    os.rename("logs/access.log", "logs/access.log.9")
    with open("logs/access.log.9", "rb") as f, gzip.open("logs/access.log.9.gz", "wb") as g:
        shutil.copyfileobj(f, g)
    os.remove("logs/access.log.9")
    open("logs/access.log", "wb").close()
    return result

incremental.plan = plan_then
from logetl.cli import main
sys.argv[0] = "logetl"
main()
"""
