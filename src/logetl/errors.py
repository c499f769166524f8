"""The one root of user-facing errors, with the exit code on the class (as Click's ``ClickException``).

Anything raised as a ``LogetlError`` reaches the person as one line (``Error: <message>``) and the
process exits with the class's ``exit_code``; anything else is a bug and shows its traceback only with
``LOGETL_DEBUG=1`` (otherwise one line that says so). Exit codes:

- 0 success;
- 1 a run that failed (``RunFailed``; the summary above says which step and why);
- 2 a usage error (``UsageError``): a bad or missing option, a missing or unreadable input, an output
  that cannot be used, an unavailable engine, a bad environment variable;
- 130 interrupted (Ctrl-C / SIGINT): nothing was published;
- 143 terminated (SIGTERM: ``kill``, ``timeout``, a scheduler or a service manager stopping the run) and
  129 (SIGHUP: its terminal went away), handled as Ctrl-C is (``Terminated``): nothing was published.
"""
from __future__ import annotations

import contextlib
import errno
import os
import signal
import threading

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class LogetlError(Exception):
    """A user-facing error: one line, ``exit_code``."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(LogetlError):
    """The user asked for something that cannot be done; nothing ran."""

    exit_code = EXIT_USAGE


class RunFailed(LogetlError):
    """A run started and failed; nothing was published."""

    exit_code = EXIT_FAILED


class Terminated(KeyboardInterrupt):
    """A run asked to end by a signal (SIGTERM, SIGHUP) while it goes. It is a ``KeyboardInterrupt`` so that
    every place that handles Ctrl-C handles it the same way: the run stops, what it made is removed, its
    record says STOPPED (and why), the Spark JVM goes with it. Left to Python's default, the signal ended
    the process where it stood: the working directories stayed and the monitor showed the run RUNNING for
    ever. The process then exits ``128 + signum``, as a shell reports a process the signal ended."""

    def __init__(self, signum: int):
        super().__init__(signum)     # (args: what pickling and copying rebuild it from)
        self.signum = signum
        self.exit_code = 128 + signum

    def __str__(self) -> str:
        return f"terminated by {signal.Signals(self.signum).name}"


#: the signals that ask a run to end (``ended_by_signals``)
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def raise_terminated(signum, frame):
    """The handler of SIGTERM and SIGHUP while a run goes (``ended_by_signals``)."""
    raise Terminated(signum)


@contextlib.contextmanager
def signal_handlers(handlers: dict):
    """Sets ``handlers`` (signal -> handler) for the block and puts back the ones before, with those signals
    blocked while they are swapped: one that came half-way would run a half-set state, or leave a handler of
    the block installed for good. A handler that someone replaced meanwhile is left to them. Main thread
    only (only it can set handlers)."""
    if not handlers:
        yield
        return
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, handlers)
    try:
        before = {signum: signal.signal(signum, handler) for signum, handler in handlers.items()}
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, handlers)
        try:
            for signum, handler in before.items():
                if signal.getsignal(signum) is handlers[signum]:
                    signal.signal(signum, handler)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def ended_by_signals():
    """While the block runs, SIGTERM and SIGHUP raise ``Terminated`` in the main thread (where Python runs
    signal handlers) instead of ending the process on the spot. A signal the caller set to be ignored
    (``nohup``'s SIGHUP) stays ignored, and one a program embedding logetl handles stays its own; off the
    main thread nothing changes."""
    main = threading.current_thread() is threading.main_thread()
    return signal_handlers({signum: raise_terminated for signum in ENDING_SIGNALS
                            if main and signal.getsignal(signum) == signal.SIG_DFL})


def stop_reason(exc: BaseException) -> str:
    """What a stopped run's record says: "interrupted" (Ctrl-C), or "terminated by SIGTERM"."""
    return str(exc) if isinstance(exc, Terminated) else "interrupted"


class EnvError(UsageError):
    """An environment variable with a value logetl cannot use; the message names the variable."""


def reason(exc: BaseException) -> str:
    """Why an I/O operation failed, for a message: an OSError's own text without its errno and path, or
    the exception's message (a truncated gzip stream raises EOFError, zlib.error or OSError, and only
    OSError has ``strerror``)."""
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def out_of_space_reason(exc: BaseException) -> str:
    """The reason of a write that failed for want of space: the OS's text (a quota's too), or the text of
    ENOSPC when the error came from a writer that keeps only a message (Polars)."""
    return getattr(exc, "strerror", None) or os.strerror(errno.ENOSPC)


def env_float(name: str, default: float, minimum: float = 0.0) -> float:
    """A number from the environment; a bad value is an ``EnvError`` naming the variable."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise EnvError(f"{name}={raw!r} is not a number") from None
    if value != value or value < minimum:
        raise EnvError(f"{name}={raw!r} must be a number >= {minimum:g}")
    return value


def debug() -> bool:
    return os.environ.get("LOGETL_DEBUG", "").lower() in ("1", "true", "yes", "on")
