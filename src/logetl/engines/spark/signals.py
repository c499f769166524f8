"""Stopping a Spark run between two calls to the JVM, never inside one.

Python runs a signal's handler in the main thread between two bytecodes, and an interrupt raised there
(Ctrl-C; SIGTERM and SIGHUP under the command line, ``errors.ended_by_signals``) lands wherever that
thread stands. On Spark it mostly stands inside a py4j call that waits for a job's answer on its socket.
Raised there, the exception cut py4j's read of the answer: py4j printed two tracebacks ("KeyboardInterrupt
while sending command", "reentrant call inside <_io.BufferedReader>" from PySpark's own SIGINT handler,
which cancels the jobs on that same connection) and shut that connection down, with the idle ones of other
threads (py4j matches them by the gateway's address, which they all share); a call of the run's cleanup
then failed with "Answer from Java side is empty" (so a SIGTERM made a FAILED run, not a STOPPED one).

``between_java_calls()``, around whatever the engine asks of Spark, defers such a signal while the main
thread is inside py4j: the running jobs are cancelled from another thread (with a connection of its own),
the call returns (a cancelled job's error), and the interrupt is raised when the block ends, in place of
that error. Outside py4j the interrupt is raised at once, as before; so is a second signal (a person who
presses Ctrl-C twice is not kept waiting). A handler set by the program embedding logetl is left alone.
"""
from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager

from logetl.errors import ENDING_SIGNALS, Terminated, raise_terminated, signal_handlers

#: the main thread's outermost block, while one runs: its pending interrupt (a list of at most one)
_active: dict = {"pending": None}


def _py4j_dir() -> str | None:
    try:
        import py4j
    except ImportError:
        return None
    return os.path.dirname(os.path.abspath(py4j.__file__)) + os.sep


def _in_java_call(frame, py4j_dir: str) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith(py4j_dir):
            return True
        frame = frame.f_back
    return False


def _raises_interrupt(signum: int, handler) -> bool:
    """Whether ``handler`` is one that stops the run by raising (what this module defers): Python's
    KeyboardInterrupt, PySpark's (which also cancels the jobs), the command line's ``Terminated``."""
    if signum == signal.SIGINT:
        return handler is signal.default_int_handler or \
            (getattr(handler, "__module__", None) or "").startswith("pyspark.")
    return handler is raise_terminated


def stopping() -> bool:
    """Whether a signal waits to be raised at the end of the main thread's block: what a JVM call returned
    meanwhile (a cancelled job's error) says nothing of the executors, and is not to be remembered."""
    return bool(_active["pending"])


def _cancel_jobs(until: threading.Event) -> None:
    """Cancels the running jobs (all of the session's, as PySpark's own Ctrl-C does), then every tenth of a
    second those that start after them, until the block ends: a signal that came while the main thread
    planned a job (a JVM call too) would otherwise wait for the whole job it then starts."""
    from pyspark import SparkContext

    while True:
        sc = SparkContext._active_spark_context
        if sc is not None:
            try:
                sc.cancelAllJobs()
            except Exception:   # the JVM is going already: the call returns by itself
                pass
        if until.wait(0.1):
            return


@contextmanager
def between_java_calls():
    """Defers Ctrl-C, SIGTERM and SIGHUP to the end of the block while the main thread is inside a JVM
    call (see above). A block inside another is the outer one's; off the main thread nothing changes."""
    py4j_dir = _py4j_dir()
    if _active["pending"] is not None or py4j_dir is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[BaseException] = []
    ended = threading.Event()

    def defer(signum, frame):
        exc = KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)
        if pending or not _in_java_call(frame, py4j_dir):
            pending.clear()     # a second signal: it is the one raised, now
            raise exc
        pending.append(exc)
        threading.Thread(target=_cancel_jobs, args=(ended,), name="logetl-cancel-jobs", daemon=True).start()

    handlers = {signum: defer for signum in (signal.SIGINT, *ENDING_SIGNALS)
                if _raises_interrupt(signum, signal.getsignal(signum))}
    _active["pending"] = pending
    try:
        with signal_handlers(handlers):
            yield
    finally:
        _active["pending"] = None
        ended.set()
        if pending:   # (the handlers are back: no signal adds to it now)
            raise pending[0]   # in place of the cancelled job's error, or after a call that returned anyway


@contextmanager
def sigint_kept():
    """Around the start of a SparkContext that logetl owns: PySpark sets its own SIGINT handler then, which
    cancels the jobs on the main thread's connection, busy with the call it interrupts (the tracebacks
    above); the handler that was there before (Python's, or ``between_java_calls``'s) is put back."""
    main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGINT) if main else None
    try:
        yield
    finally:
        if main and signal.getsignal(signal.SIGINT) is not before \
                and _raises_interrupt(signal.SIGINT, signal.getsignal(signal.SIGINT)):
            signal.signal(signal.SIGINT, before)
