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
import sys
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


# --- the command line's signals, from its first line to its exit ------------------------------------------------

#: the signals the command line answers with one line and ``128 + N`` (``command_signals``)
COMMAND_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_command: dict = {"taken": (), "said": "", "depth": 0, "program": False}


#: what the line of a command stopped by a signal adds (``logetl: interrupted; no output was committed``)
STOPPED_SAYS = {**dict.fromkeys(("branch", "filter", "join", "run"), "no output was committed"),
                "generate": "nothing was written"}


def said_when_stopped(args) -> str:
    """What the line of a stopped command adds, by the command its arguments ``args`` name."""
    return STOPPED_SAYS.get(next((a for a in args if not a.startswith("-")), ""), "")


def _why(signum: int) -> str:
    return "interrupted" if signum == signal.SIGINT else f"terminated by {signal.Signals(signum).name}"


def say_stopped(why: str, said: str = "") -> None:
    """Writes the one line of a stopped command to descriptor 2 (even when ``sys.stderr`` is gone or
    closed: a stop must not turn into a traceback)."""
    with contextlib.suppress(OSError):
        os.write(2, f"logetl: {why}{'; ' + said if said else ''}\n".encode())


def _exit_at_once(signum, frame):
    """Before the command starts its work (Python still importing, Click parsing the options), nothing is
    made yet: the process ends here, one line, ``128 + signum``. At once (``os._exit``): an exception
    raised here would land in whatever is being imported, which may catch it, wrap it or print it."""
    say_stopped(_why(signum), _command["said"])
    os._exit(128 + signum)


def exit_stopped(code: int) -> None:
    """Ends a command stopped by a signal with ``code``. In the ``logetl`` program, at once once its
    output is flushed (``os._exit``): after a KeyboardInterrupt that was caught and said, CPython 3.11
    sometimes still ended the process by SIGINT instead of ``code`` (seen: exit -2 instead of 130, the
    line printed, for about one Ctrl-C in a hundred early in a run; it marks the process so when such an
    interrupt passes through code it runs from C). Elsewhere (``logetl.cli.main`` called by a program):
    ``SystemExit``."""
    if not _command["program"]:
        raise SystemExit(code)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def command_signals(said: str = "", program: bool = False) -> None:
    """Makes SIGINT, SIGTERM and SIGHUP end the ``logetl`` command with one line and exit ``128 + N``
    (130, 143, 129) from this moment on, where their disposition is still the default (a signal the caller
    ignores, ``nohup``'s SIGHUP, stays ignored). ``said``: what the line adds (``"no output was
    committed"``); ``program``: the process is the ``logetl`` program. Called by the program as early as it can (``logetl/__init__.py``, the first
    of its modules to run); ``interrupting_signals`` then raises them while the command works. Left to
    Python, SIGINT during the imports printed a ``KeyboardInterrupt`` traceback, SIGTERM and SIGHUP ended
    the process without a word. Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        return
    _command["said"], _command["program"] = said, program
    taken = []
    for signum in COMMAND_SIGNALS:
        now = signal.getsignal(signum)
        if now is _exit_at_once or now is (signal.default_int_handler if signum == signal.SIGINT else
                                           signal.SIG_DFL):
            signal.signal(signum, _exit_at_once)
            taken.append(signum)
    _command["taken"] = tuple(taken)


@contextlib.contextmanager
def interrupting_signals():
    """While the command works, the signals ``command_signals`` took raise in the main thread:
    ``KeyboardInterrupt`` (SIGINT) or ``Terminated``, which every part of a run handles (what it staged is
    removed, its record says STOPPED); the command line then says one line. When the block ends the
    command's result is made: a signal then changes nothing (it is ignored for the moments the process has
    left). A block inside another is the outer one's."""
    taken = _command["taken"] if threading.current_thread() is threading.main_thread() else ()
    _command["depth"] += 1
    if _command["depth"] > 1 or not taken:
        try:
            yield
        finally:
            _command["depth"] -= 1
        return
    raising = {signum: signal.default_int_handler if signum == signal.SIGINT else raise_terminated
               for signum in taken}
    try:
        with signal_handlers(raising):
            yield
    finally:
        _command["depth"] -= 1
        for signum in taken:
            if signal.getsignal(signum) in (_exit_at_once, raising[signum]):
                signal.signal(signum, signal.SIG_IGN)


def command_done() -> None:
    """The command's result is made (a run's outputs committed): from now on the signals
    ``command_signals`` took are ignored for the moments the process has left, which would otherwise say
    that the command was stopped."""
    if threading.current_thread() is threading.main_thread():
        for signum in _command["taken"]:
            signal.signal(signum, signal.SIG_IGN)


@contextlib.contextmanager
def signals_of_command(said: str = ""):
    """``command_signals`` for the block (the command line's ``main`` run in a process that is not the
    ``logetl`` program, e.g. a test's), the handlers before put back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {signum: signal.getsignal(signum) for signum in COMMAND_SIGNALS}
    taken = _command["taken"]
    if not taken:
        command_signals(said)
    try:
        yield
    finally:
        if not taken:
            for signum, handler in before.items():
                signal.signal(signum, handler)
            _command["taken"] = ()


@contextlib.contextmanager
def signals_held():
    """Holds SIGINT, SIGTERM and SIGHUP back for the block (a few system calls that must happen together,
    such as taking a lock and recording that it is held); one that comes meanwhile is handled as the
    block ends. Off the main thread nothing changes (signals are handled in the main thread).

    Blocking the signals in the main thread is not enough: the kernel then hands a signal sent to the
    process to another thread (Polars', a writer's, the monitor's), and Python runs the handler in the main
    thread all the same, inside the block. So for the block the handlers that would raise are replaced by
    one that only notes the signal, and the handler it replaced is called with it as the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []

    def note(signum, frame):
        came.append(signum)

    before = {signum: signal.getsignal(signum) for signum in COMMAND_SIGNALS}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, COMMAND_SIGNALS)
    try:
        for signum, handler in before.items():
            if callable(handler):
                signal.signal(signum, note)
        yield
    finally:
        for signum, handler in before.items():
            if callable(handler) and signal.getsignal(signum) is note:
                signal.signal(signum, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if came and callable(before[came[0]]):
            before[came[0]](came[0], None)     # (a signal still blocked meanwhile is handled by it too)


def interrupt_of(exc: BaseException) -> KeyboardInterrupt | None:
    """The signal's interrupt that ``exc`` was raised for, if any: Python wraps an exception raised while a
    class is made (3.11: ``RuntimeError: Error calling __set_name__``), and a module being imported may
    turn what it catches into an error of its own."""
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


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


def message(exc: BaseException) -> str:
    """An exception as the end of an error line: its message, or its type's name when it has none (a
    ``MemoryError`` says nothing), so that no line ends in an empty ``: ``."""
    return str(exc).strip() or type(exc).__name__


def out_of_space_reason(exc: BaseException) -> str:
    """The reason of a write that failed for want of space: the OS's text (a quota's too), or the text of
    ENOSPC when the error came from a writer that keeps only a message (Polars)."""
    return getattr(exc, "strerror", None) or os.strerror(errno.ENOSPC)


def debug() -> bool:
    """``LOGETL_DEBUG``: show the traceback beside an error's one line (``logetl.settings``)."""
    from logetl import settings

    return settings.DEBUG.read()
