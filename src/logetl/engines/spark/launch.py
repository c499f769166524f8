"""Launching the Spark driver JVM that logetl starts itself: its standard error passes through this
process, so that a run says what it has to say and nothing else.

- A launch that fails (a setting spark-submit refuses, such as ``spark.executor.memory=lots``, or a JVM
  option java refuses) printed a Java stack trace, then PySpark's "Java gateway process exited". Now the
  JVM's stderr is held while it starts: if it exits before it answers, its own message (the exception's,
  or java's first line) becomes the run's one error line; if it starts, what it held is shown.
- A JVM that exits with status 0 before it answers (``spark.driver.extraJavaOptions=-version``) kept
  PySpark's launch waiting forever; logetl watches the JVM while PySpark waits and stops when it is gone.
- A JVM that never answers (a debugger's ``suspend=y`` in ``spark.driver.extraJavaOptions``) is waited
  for; a Ctrl-C stops the wait and the JVM with it (PySpark starts it with SIGINT ignored: it outlived
  logetl, holding its ports and the terminal).
- Spark's launcher adds ``--add-modules=jdk.incubator.vector`` to every driver it starts, and the JVM
  announces it on stderr ("WARNING: Using incubator modules: ..."): a line on every run, ``-q`` too, that
  says nothing to a user. That exact line is dropped, and so is the traceback of a ``BrokenPipeError`` in
  PySpark's daemon (``pyspark/daemon.py``), which a Python worker cut off by a failed job prints, and
  Spark's log line of a broadcast it could not store (``TorrentBroadcast``, whatever the failure: it is
  rethrown to the call, the job or the stage that made the broadcast, which the run's error line says);
  everything else the JVM writes (Spark's errors, its log at ``LOGETL_SPARK_LOG_LEVEL``) is passed on to
  this process's stderr as it comes.

The gateway is PySpark's own (``launch_gateway``, whose ``popen_kwargs`` exist for this), handed to
``SparkContext`` before the session is built, as PySpark does when it launches it itself.
"""
from __future__ import annotations

import os
import re
import select
import signal
import threading
import time

#: what the JVM prints because Spark's launcher asks for an incubator module (jdk.incubator.vector)
INCUBATOR = re.compile(rb"WARNING: Using incubator modules: [\w.,]+\r?\n")
#: the last line of the traceback PySpark's daemon prints when a failed job cuts its worker off
DAEMON_BROKEN_PIPE = re.compile(rb"BrokenPipeError: \[Errno 32\] Broken pipe\r?\n?$")
#: Spark's log line of a broadcast it failed to store, for any failure, which it then rethrows to whatever
#: made the broadcast (seen when the driver ran out of memory planning many input files' scans)
BROADCAST_NOT_STORED = re.compile(
    rb"\S+ \S+ ERROR TorrentBroadcast: Store broadcast broadcast_\d+ fail, remove all pieces of the broadcast\r?\n")
#: how a JVM that failed in its main thread (spark-submit refusing an argument) says why
MAIN_FAILED = re.compile(r'Exception in thread "main" [\w.$]+: (.+)')


class JvmStderr:
    """A pipe the JVM writes its stderr to, read by a thread of this process: held until ``started``,
    then passed on to fd 2 line by line. Writes to fd 2 that fail (a closed pipe) are ignored, and the
    pipe is still drained, so the JVM never blocks on its stderr."""

    def __init__(self):
        self.read_fd, self.write_fd = os.pipe()
        self._lock = threading.Lock()
        self._held: list[bytes] | None = []
        self._traceback: list[bytes] | None = None
        self._thread = threading.Thread(target=self._pump, name="logetl-jvm-stderr", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        pending = b""
        while True:
            try:
                data = os.read(self.read_fd, 65536)
            except OSError:
                data = b""
            if not data:
                break
            pending += data
            lines = pending.splitlines(keepends=True)
            pending = lines.pop() if not lines[-1].endswith(b"\n") else b""
            for line in lines:
                self._line(line)
        if pending:
            self._line(pending)
        for line in self._traceback or ():    # cut off: shown as it was
            self._pass(line)
        os.close(self.read_fd)

    def _line(self, line: bytes) -> None:
        if INCUBATOR.fullmatch(line) or BROADCAST_NOT_STORED.fullmatch(line):
            return
        if self._traceback is not None or line.rstrip(b"\r\n") == b"Traceback (most recent call last):":
            # a Python traceback is held whole: PySpark's daemon prints one (BrokenPipeError) when a task's
            # worker is cut off because the job failed, which the run's one error line already says
            block = (self._traceback or []) + [line]
            if line.startswith((b" ", b"Traceback")) and len(block) < 200:
                self._traceback = block
                return
            self._traceback = None
            if DAEMON_BROKEN_PIPE.match(block[-1]) and any(b"pyspark/daemon.py" in b for b in block):
                return
            for held in block:
                self._pass(held)
            return
        self._pass(line)

    def _pass(self, line: bytes) -> None:
        with self._lock:
            if self._held is not None:
                self._held.append(line)
                return
        _write(line)

    def launched(self) -> None:
        """The JVM answered: what it said while starting is shown, and from now on as it comes."""
        os.close(self.write_fd)
        with self._lock:
            held, self._held = self._held, None
        for line in held or ():
            _write(line)

    def failure(self) -> str | None:
        """The JVM exited before it answered: the one line that says why, from all it wrote (it exited, so
        the pipe ends once its last writer is gone)."""
        os.close(self.write_fd)
        self._thread.join(10)
        with self._lock:
            text = b"".join(self._held or ()).decode("utf-8", "replace")
        return launch_failure(text)


def launch_failure(text: str) -> str | None:
    """The message of a failed JVM launch: the exception of its main thread (spark-submit's refusal), else
    its first line that is no stack frame (java's own, e.g. "Invalid maximum heap size: -Xmxlots")."""
    lines = [line.strip() for line in text.splitlines()]
    for line in lines:
        m = MAIN_FAILED.match(line)
        if m:
            return m.group(1).strip()
    return next((line for line in lines if line and not line.startswith("at ")), None)


def _write(line: bytes) -> None:
    try:
        os.write(2, line)
    except OSError:
        pass


def launch(conf: dict[str, str]):
    """Launches the driver JVM with ``conf`` (what the session builder would pass to spark-submit) and
    makes it the gateway the next ``SparkContext`` uses. Raises ``RuntimeError`` with the JVM's one line
    when it does not start."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    spark_conf = SparkConf(loadDefaults=False)
    for k, v in conf.items():
        spark_conf.set(k, v)
    stderr = JvmStderr()
    launched: dict = {}

    def start() -> None:
        try:
            # a session of its own: a signal sent to logetl's process group (``timeout``, a service
            # manager's stop, a hangup) is logetl's to handle, and would have ended the JVM under the run's
            # cleanup (PySpark ignores only SIGINT in it); the JVM still ends with logetl (its stdin closes)
            launched["gateway"] = launch_gateway(spark_conf, popen_kwargs={"stderr": stderr.write_fd,
                                                                           "start_new_session": True})
        except Exception as exc:
            launched["error"] = exc

    before = _children()
    # PySpark waits for the JVM's answer while ``not proc.poll()``: a JVM that exits with status 0 before
    # it answers (spark.driver.extraJavaOptions=-version) kept it waiting forever. It waits in a thread of
    # its own; this one watches the JVM (the new child process) and stops waiting once it is gone.
    thread = threading.Thread(target=start, name="logetl-jvm-launch", daemon=True)
    thread.start()
    jvm = None          # a pidfd of the JVM: it names that process only, even once its pid is reused
    gone = False
    try:
        while thread.is_alive():
            thread.join(0.1)
            if jvm is None:
                jvm = _spawned(before)
            elif thread.is_alive() and _exited(jvm):
                thread.join(1.0)   # (a JVM that failed with another status: PySpark says so itself)
                gone = thread.is_alive()
                break
    except BaseException:
        # stopped while the JVM has not answered (Ctrl-C): PySpark starts it with SIGINT ignored, and a JVM
        # that never answers (spark.driver.extraJavaOptions with a debugger's suspend=y) outlived this
        # process, holding its ports; it is this launch's, and goes with it (one that PySpark is about to
        # start is waited for, briefly)
        deadline = time.monotonic() + 2
        while jvm is None and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
            jvm = _spawned(before)
        _stop(jvm)
        raise
    finally:
        if jvm is not None:
            os.close(jvm)
    if gone:
        why = stderr.failure()
        raise RuntimeError(f"the JVM exited before it answered{f', saying: {why}' if why else ''}")
    if "error" in launched:
        why = stderr.failure()
        exc = launched["error"]
        raise RuntimeError(why or (str(exc).strip().splitlines() or [type(exc).__name__])[0]) from None
    stderr.launched()
    SparkContext._ensure_initialized(gateway=launched["gateway"])


def _spawned(before: set[int]) -> int | None:
    """A pidfd of the JVM this launch started: the new child process that is Spark's (spark-submit, then
    the java it becomes), or None while there is none (or no /proc, or no pidfd: nothing is watched)."""
    for pid in sorted(_children() - before):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"spark" not in f.read():
                    continue
            return os.pidfd_open(pid)
        except (OSError, AttributeError):
            continue
    return None


def _exited(pidfd: int) -> bool:
    """Whether the process has ended (its pidfd is readable then)."""
    return bool(select.select([pidfd], [], [], 0)[0])


def _stop(pidfd: int | None) -> None:
    """Ends the JVM this launch started: SIGTERM, then SIGKILL if it is still there after 5 s or on a
    second Ctrl-C (PySpark's launch, still waiting in its thread, reaps it)."""
    if pidfd is None:
        return
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGTERM)
        try:
            deadline = time.monotonic() + 5
            while not _exited(pidfd) and time.monotonic() < deadline:
                time.sleep(0.05)
        except KeyboardInterrupt:
            pass
        if not _exited(pidfd):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _children() -> set[int]:
    """This process's child processes (Linux's /proc; none known elsewhere, where nothing is watched)."""
    found: set[int] = set()
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as f:
                found.update(int(pid) for pid in f.read().split())
    except OSError:
        pass
    return found
