"""An input that fails while it is read (a truncated gzip) fails the run with one line naming the file, on
every engine: on Spark not its 200-line job error, nor the task-failure logs of its executor, scheduler
and writer on stderr."""
from __future__ import annotations

import gzip

import pytest

from conftest import parts

import logetl.api as L
from logetl.io.inputs import InputReadError
from logetl.console import summary
from logetl.job import run_flow
from logetl.listener import FlowListener

#: each engine's reason for a gzip that ends before its end-of-stream marker
REASONS = {"local": "Compressed file ended before the end-of-stream marker was reached",
           "spark": "Unexpected end of input stream"}


def test_a_truncated_gzip_fails_the_run_in_one_line_naming_the_file(engine, tmp_path, capfd):
    lines = b"".join(f'10.0.0.{i % 250} - - [17/May/2015:10:00:00 +0000] "GET /{i} HTTP/1.1" 200 {i} "-" "a"\n'
                     .encode() for i in range(5000))
    log = tmp_path / "trunc.log.gz"
    log.write_bytes(gzip.compress(lines)[:-400])
    logs = L.read()
    flow = L.Flow("pr", [logs.write("a"), logs.select("ip", "size").write("b")])
    capfd.readouterr()
    finished = Finished()
    with pytest.raises(InputReadError) as caught:
        run_flow(flow, str(log), {"a": str(tmp_path / "a"), "b": str(tmp_path / "b")}, engine=engine,
                 monitor=False, quiet=True, listener=finished)
    assert str(caught.value) == f"cannot read input {str(log)!r}: {REASONS[engine]}"
    err = capfd.readouterr().err
    assert "ERROR" not in err and "Exception" not in err, err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    counts = summary(finished.run, {}).splitlines()[1:4]
    if engine == "local":
        # the local engine counts each chunk it parsed (here none: the input is one chunk, which failed)
        assert (finished.run.counted, finished.run.lines_read) == (True, 0)
        assert counts == ["  lines read                       0", "  malformed lines                  0",
                          "  dropped (size '-')               0"]
    else:
        # Spark returns the step's counters with its successful action only: not known, not 0
        assert (finished.run.counted, finished.run.lines_read, finished.run.dropped_size_dash,
                finished.run.malformed_share) == (False, None, None, None)
        assert {k: v for k, v in finished.run.steps[0].to_dict().items()
                if k in ("status", "lines_read", "malformed", "dropped_size_dash")} == {
            "status": "FAILED", "lines_read": None, "malformed": None, "dropped_size_dash": None}
        assert counts == ["  lines read             not counted  (step parse failed before its counters came back)",
                          "  malformed lines        not counted",
                          "  dropped (size '-')     not counted"]


class Finished(FlowListener):
    """Keeps the finished run (a failed run_flow raises: its FlowRun is not returned)."""

    def flow_finished(self, run):
        self.run = run


def small_file_system(tmp_path, size: str):
    """``tmp_path/small``, a file system of ``size`` (tmpfs: needs root); the test unmounts it."""
    import os
    import subprocess

    from conftest import require

    small = tmp_path / "small"
    small.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(small)], capture_output=True).returncode == 0
    require(mounted, "a small file system needs root (mount -t tmpfs)")
    return small


def records(tmp_path, prefix: str):
    """A log of 40,000 records from 250 clients, requests ``GET PREFIX<i>``."""
    log = tmp_path / "in.log"
    log.write_bytes(b"".join(f'10.0.0.{i % 250} - - [17/May/2015:10:00:00 +0000] "GET {prefix}{i} HTTP/1.1" 200 '
                             f'{i} "-" "a"\n'.encode() for i in range(40_000)))
    return log


def test_a_full_file_system_fails_the_run_in_one_line_naming_it(engine, tmp_path, capfd):
    """A write that fails for want of space names the places whose file system is full, on every engine:
    on Spark not its 180-line job error with the traceback of PySpark's daemon (BrokenPipeError) before it."""
    import errno
    import os
    import subprocess


    small = small_file_system(tmp_path, "1m")
    log = records(tmp_path, "/")   # 3.3 MB of records
    logs = L.read()
    flow = L.Flow("full", [logs.write("a"), logs.select("ip", "size").write("b")])
    capfd.readouterr()
    finished = Finished()
    try:
        with pytest.raises(OSError) as caught:
            run_flow(flow, str(log), {"a": str(small / "a"), "b": str(tmp_path / "b")}, engine=engine,
                     monitor=False, quiet=True, listener=finished)
        left = sorted(os.listdir(small))
        # the failed run closed its files (the exception, held here, keeps its frames alive)
        held = [target for target in (_link(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd"))
                if target.startswith(str(small))]
    finally:
        # lazily: Spark's task writer keeps the file it failed to close open in the (shared) JVM
        subprocess.run(["umount", "--lazy", str(small)], check=True)
    assert caught.value.errno == errno.ENOSPC
    free = finished.run.full.rsplit("(", 1)[1]
    assert finished.run.full == (f"a {str(small / 'a')!r} and the working directory "
                                 f"'{small}/.a.logetl-work' ({free}")
    assert free.startswith("their file system has ") and free.endswith(" MB free)")
    err = capfd.readouterr().err
    assert "Traceback" not in err and "ERROR" not in err and "Exception" not in err, err
    assert not (tmp_path / "b").exists() and left == [".a.logetl-work"]
    assert held == []


def test_a_full_checkpoint_dir_fails_the_run_in_one_line_naming_it_and_the_rerun_completes(engine, tmp_path, capfd):
    """Join's checkpoint bound to a directory on a full file system: one line naming it, on every engine. On
    Spark the parts are moved there from the working directory (another file system: Hadoop copies), and
    the copy's failure was a Java stack trace ending in "An error occurred while calling o718.rename";
    on the local engine the line named no place ("[Errno 28] No space left on device"). With room again,
    the rerun writes what a run without the checkpoint directory writes."""
    import errno
    import subprocess

    from logetl.job import run_program

    small = small_file_system(tmp_path, "64k")
    log = records(tmp_path, "/images/")
    out, checkpoint = {"output": str(tmp_path / "out")}, str(small / "cp")
    capfd.readouterr()
    finished = Finished()
    try:
        with pytest.raises(OSError) as caught:
            run_program("join", str(log), out, engine=engine, checkpoint_dir=checkpoint, monitor=False, quiet=True,
                        listener=finished)
        err = capfd.readouterr().err
        subprocess.run(["mount", "-o", "remount,size=64m", str(small)], check=True)
        again = run_program("join", str(log), out, engine=engine, checkpoint_dir=checkpoint, monitor=False, quiet=True)
    finally:
        subprocess.run(["umount", "--lazy", str(small)], check=True)
    assert caught.value.errno == errno.ENOSPC
    free = finished.run.full.rsplit("(", 1)[1]
    assert finished.run.full == f"--checkpoint-dir {checkpoint!r} ({free}"
    assert free.startswith("its file system has ") and free.endswith(" MB free)")
    assert "Traceback" not in err and "ERROR" not in err and "Exception" not in err, err
    assert again.status == "SUCCESSFUL"
    plain = run_program("join", str(log), {"output": str(tmp_path / "plain")}, engine=engine, monitor=False, quiet=True)
    assert plain.written == again.written == {"output": 16_800}
    assert parts(tmp_path / "out") == parts(tmp_path / "plain")


def _link(path: str) -> str:
    import os

    try:
        return os.readlink(path)
    except OSError:
        return ""


def test_the_jvm_stderr_drops_only_the_daemons_broken_pipe_traceback_and_a_broadcast_not_stored(capfd):
    """What logetl passes on of the Spark driver JVM's stderr: a traceback of PySpark's daemon ending in
    BrokenPipeError (a worker cut off by a failed job) is dropped whole, and so is Spark's log line of a
    broadcast it could not store (its exception fails the call, which the run's error line says); any other
    traceback, and every other line, is passed on as it came."""
    import os

    from logetl.engines.spark.launch import JvmStderr

    daemon = [b"Traceback (most recent call last):\n",
              b'  File "/x/pyspark.zip/pyspark/daemon.py", line 264, in manager\n',
              b'  File "/x/pyspark.zip/pyspark/daemon.py", line 95, in worker\n',
              b"BrokenPipeError: [Errno 32] Broken pipe\n"]
    other = [b"Traceback (most recent call last):\n", b'  File "/u/flow.py", line 3, in f\n',
             b"BrokenPipeError: [Errno 32] Broken pipe\n"]
    # recorded from a driver that ran out of memory (128 MB, planning 250 input files' scans)
    broadcast = b"26/11/24 22:45:51 ERROR TorrentBroadcast: Store broadcast broadcast_89 fail, remove all pieces of the broadcast\n"
    lines = [b"WARNING: Using incubator modules: jdk.incubator.vector\n", b"26/11/24 ERROR x: y\n", *daemon,
             broadcast, *other, b"last line\n"]
    capfd.readouterr()
    stderr = JvmStderr()
    # a second write end, opened before launched() closes the pipe's own (after it, the reader could see
    # the end of the pipe first, close its end, and the write would fail: CI42 did once)
    write = os.open(f"/proc/self/fd/{stderr.read_fd}", os.O_WRONLY)
    stderr.launched()
    os.write(write, b"".join(lines))
    os.close(write)
    stderr._thread.join(10)
    assert capfd.readouterr().err.encode() == b"26/11/24 ERROR x: y\n" + b"".join(other) + b"last line\n"


#: what the driver's py4j call raised when 2,000 small input files ran it out of memory (recorded from
#: ``logetl filter --hdfs --master local[1] --conf spark.driver.memory=512m --input DIR ...``; 3 of its 64
#: "at" lines kept)
RECORDED_OUT_OF_MEMORY = (
    "An error occurred while calling o62400.text.\n"
    ": java.lang.OutOfMemoryError: GC overhead limit exceeded\n"
    "\tat scala.collection.immutable.BitmapIndexedSetNode.mergeTwoKeyValPairs(HashSet.scala:751)\n"
    "\tat scala.collection.immutable.HashSetBuilder.update(HashSet.scala:2026)\n"
    "\tat scala.collection.Iterator$$anon$10.hasNext(Iterator.scala:611)\n")


#: the same failure as a task's (the driver's "most recent failure" of a stage), as a write's cause, and
#: Java's other reasons, which more heap does not cure (the forms of Spark's and Java's texts)
TASK_OUT_OF_MEMORY = ("Job aborted due to stage failure: Task 0 in stage 1.0 failed 1 times, most recent failure: "
                      "Lost task 0.0 in stage 1.0 (TID 1) (127.0.0.1 executor driver): java.lang.OutOfMemoryError: "
                      "Java heap space\n\tat java.base/java.util.Arrays.copyOf(Arrays.java:3541)\n")
WRITE_OUT_OF_MEMORY = ("[TASK_WRITE_FAILED] Task failed while writing rows to file:/o/_temporary. SQLSTATE: 58030\n"
                       "Caused by: java.lang.OutOfMemoryError: Java heap space\n")
METASPACE = "An error occurred while calling o9.text.\n: java.lang.OutOfMemoryError: Metaspace\n"
#: a failure whose text quotes data that names the error: not one
QUOTED = ("[CAST_INVALID_INPUT] The value 'GET /java.lang.OutOfMemoryError: x' of the type \"STRING\" cannot be "
          "cast to \"INT\"\n")
DRIVER = "Spark ran out of memory ({}): give the driver more (it had {}: e.g. {})"


@pytest.mark.parametrize("text, master, memory, launched, line", [
    (RECORDED_OUT_OF_MEMORY, "local[1]", {"spark.driver.memory": "512m"}, True,
     DRIVER.format("GC overhead limit exceeded", "512m", "--conf spark.driver.memory=1g")),
    (RECORDED_OUT_OF_MEMORY, "local[*]", {}, True,
     DRIVER.format("GC overhead limit exceeded", "1g", "--conf spark.driver.memory=2g")),
    (RECORDED_OUT_OF_MEMORY, "local[*]", {}, False,   # spark-submit's driver: its memory is spark-submit's
     DRIVER.format("GC overhead limit exceeded", "1g", "spark-submit --driver-memory 2g")),
    (RECORDED_OUT_OF_MEMORY, "spark://127.0.0.1:7077", {"spark.driver.memory": "1536m", "spark.executor.memory": "3g"},
     True, DRIVER.format("GC overhead limit exceeded", "1536m", "--conf spark.driver.memory=3g")
     + " or the executors more (they had 3g: e.g. --conf spark.executor.memory=6g)"),
    (TASK_OUT_OF_MEMORY, "local-cluster[2,1,1024]", {}, True,   # executors of their own
     DRIVER.format("Java heap space", "1g", "--conf spark.driver.memory=2g")
     + " or the executors more (they had 1g: e.g. --conf spark.executor.memory=2g)"),
    (WRITE_OUT_OF_MEMORY, "local[2]", {}, True, DRIVER.format("Java heap space", "1g", "--conf spark.driver.memory=2g")),
    (METASPACE, "local[2]", {}, True, "Spark ran out of memory (Metaspace)"),
    (QUOTED, "local[2]", {}, True, None),
    ("An error occurred while calling o1.text.\n: java.io.IOException: x", "local[2]", {}, True, None),
])
def test_a_jvm_out_of_memory_is_one_line_naming_the_setting_that_gives_it_more(text, master, memory, launched, line):
    """Java's OutOfMemoryError (its text as the failed call gives it, with its trace) as the run's one line:
    which memory ran out, how much it had and a setting that doubles it, before a read's or a write's line
    (the task that failed them ran out of memory). On a local master the tasks run in the driver; on a
    cluster the executors may be the ones, and both are named. A reason more heap does not cure names no
    setting; a text that merely quotes the name is not one."""
    from logetl.engines.spark.errors import _memory_failure
    from logetl.errors import RunFailed

    failure = _memory_failure(text, master, memory, launched)
    if line is None:
        assert failure is None
    else:
        assert isinstance(failure, RunFailed) and str(failure) == line


@pytest.mark.parametrize("size, twice", [("512m", "1g"), ("1g", "2g"), ("1024", "2g"), ("768M", "1536m"),
                                         ("3g", "6g"), ("2048k", "4m"), ("1t", "2048g"), ("1gb", "2g"),
                                         ("1073741824b", "2g"), ("lots", None)])
def test_twice_a_spark_memory_size(size, twice):
    from logetl.engines.spark.errors import _twice

    assert _twice(size) == twice



def half_malformed(tmp_path):
    """A log of 40,000 lines, every other one malformed (80 bytes each: 1.7 MB trapped)."""
    log = tmp_path / "in.log"
    log.write_bytes(b"".join(f'10.0.0.{i % 250} - - [17/May/2015:10:00:00 +0000] "GET /{i} HTTP/1.1" 200 {i} "-" "a"\n'
                             f"garbage line number {i} {'x' * 60}\n".encode() for i in range(20_000)))
    return log


@pytest.mark.parametrize("size, output_format", [
    ("1m", "parquet"),      # the parts' writes fail during the parse: their open files cannot flush
    ("3m", "jsonl"),        # the parse fits: the copy of the trapped lines into the staged trap fails
])
def test_a_full_file_system_with_a_trap_names_the_places_and_leaves_no_staged_output(tmp_path, size, output_format):
    """Outputs and trap on a file system that fills: the run fails in one line naming the user's places and
    what their file system has free (not the run's internal files), and what it staged is gone; what stays is
    the working directory, which a rerun restarts from."""
    import os
    import subprocess

    from logetl.errors import RunFailed

    logs = L.read()
    flow = L.Flow("full", [logs.select("ip").write("a"), logs.select("ip", "size").write("b")])
    log = half_malformed(tmp_path)
    small = small_file_system(tmp_path, size)
    finished = Finished()
    try:
        with pytest.raises(OSError) as caught:
            run_flow(flow, str(log), {"a": str(small / "a"), "b": str(small / "b")}, trap=str(small / "t"),
                     output_format=output_format, monitor=False, quiet=True, listener=finished)
        left = sorted(os.listdir(small))
    finally:
        subprocess.run(["umount", "--lazy", str(small)], check=True)
    assert not isinstance(caught.value, RunFailed)
    free = finished.run.full.rsplit("(", 1)[1]
    assert finished.run.full == (f"a {str(small / 'a')!r} and b {str(small / 'b')!r} and trap {str(small / 't')!r} "
                                 f"and the working directory '{small}/.a.logetl-work' ({free}")
    assert free.startswith("their file system has ") and free.endswith(" MB free)")
    assert finished.run.error == f"No space left on device: {finished.run.full}"
    assert left == [".a.logetl-work"]
