"""Runs the logetl command line under ``crashpoint.py`` in a fork of a warm process: ``run`` has the shape of
``subprocess.run([sys.executable, "crashpoint.py", *args], capture_output=True, ...)`` and gives the same
``CompletedProcess`` (exit code, or ``-N`` for a death by signal N; stdout and stderr as bytes).

Most of a fresh ``logetl report`` is Python importing its libraries (Polars, DuckDB, pyarrow, sqlglot, the
user-agent parser): about 2 of its 3 seconds. The tests that kill a run at every file-system mutation start
the command hundreds of times, so each test worker starts one server process (the zygote) that imports
``logetl.cli`` and those libraries once and then forks a child per command. The child starts where a fresh
``python crashpoint.py`` would be once its imports are done:

- the imports only: the zygote runs no command, so every cache and module-level state of logetl is as
  imported, and no thread runs (Polars' pool, DuckDB's and Arrow's threads start on first use). Before each
  fork the zygote checks that it has exactly one thread, and refuses the request otherwise: a fork copies
  only the thread that forks, and a lock another thread held would stay held in the child for good.
- the environment replaced wholesale by the request's (``os.environ`` and the C ``environ``), with what the
  imports themselves set (``logetl.cli``'s ``OPENBLAS_NUM_THREADS``) added where the request does not set it,
  as in a fresh process; ``sys.dont_write_bytecode`` from ``PYTHONDONTWRITEBYTECODE``. Variables other than
  ``LOGETL_*`` and that one may be read by a library as it is imported, which happened in the zygote: a
  request whose other variables differ from the zygote's gets a zygote of its own (started anew).
- the working directory, descriptors 0, 1 and 2 (standard input, and two files that the caller reads as
  stdout and stderr), ``sys.argv`` (``["logetl", *args]``, as ``crashpoint.py`` sets it), its own pid.
- signal handlers and the signal mask as the zygote had them from its start, which are a fresh
  interpreter's (the zygote changes none, and checks before each fork that none changed); ``random`` is
  reseeded by Python after the fork.
- the crash-point hook (``crashpoint.install``) installed in the child only, after the fork.
- the end of a Python program: ``SystemExit``'s code (``None`` 0, a number itself, anything else printed
  and 1), an uncaught exception's traceback and exit 1 (a ``KeyboardInterrupt``: death by SIGINT, as
  Python does), then the non-daemon threads joined, the ``atexit`` handlers, the standard streams flushed,
  and ``os._exit`` (the zygote's own ``atexit`` handlers and buffers are not the child's to run).

What differs from a fresh process, by design: the interpreter's start and the imports themselves are not
run per command (the tests of the real ``python -m logetl`` cover those: a signal during the imports, the
exit codes, a closed standard stream), and a file-system mutation made while importing a module would not
be counted by the hook (the imports open files only for reading).
"""
from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time

#: what the zygote imports before it forks: the command line, and the libraries its commands import on
#: first use (what makes a fresh start slow). Not Polars: importing it starts a thread of its own (its
#: out-of-core memory manager's cleaner), which a fork would not copy; the child imports it
PRELOAD = (
    "logetl.cli", "logetl.job", "logetl.flowfile", "logetl.incremental", "logetl.workdir",
    "logetl.engines.local.engine", "logetl.io.writers", "logetl.io.parquet", "logetl.monitor.reporter",
    "logetl.monitor.store", "logetl.report.build", "logetl.report.classify", "logetl.report.html",
    "logetl.report.persist", "logetl.sql.dialect", "numpy", "pyarrow", "pyarrow.ipc", "pyarrow.parquet",
    "duckdb", "sqlglot", "sqlalchemy", "sqlalchemy.dialects.sqlite", "jinja2", "yaml", "ua_parser",
    "ua_parser_builtins.lazy", "crawlerdetect", "zoneinfo", "logetl.console",
)
#: set in the zygote only, while it imports: Arrow's allocator (jemalloc) otherwise starts a background
#: thread as pyarrow loads. The child's allocator keeps that setting (no background purging of freed pages)
ZYGOTE_ONLY = {"JE_ARROW_MALLOC_CONF": "background_thread:false"}

#: the variables a child may have other than the zygote's: logetl reads its own only through
#: ``logetl.settings`` when a command runs, never as a module is imported; pytest names each test in its
#: own (which would otherwise start a zygote per test)
_OWN = ("LOGETL_", "PYTEST_CURRENT_TEST")
_BYTECODE = "PYTHONDONTWRITEBYTECODE"


class ForkServerError(RuntimeError):
    """The zygote could not start or serve a request (a thread running, a handler changed)."""


# --- the test's side --------------------------------------------------------------------------------------------

_server = None


def _base(env: dict) -> dict:
    return {k: v for k, v in env.items() if not k.startswith(_OWN) and k != _BYTECODE}


class _Server:
    def __init__(self, env: dict):
        self.base = _base(env)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock = ours
        self.buffer = b""
        self.cpu = 0.0
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), str(theirs.fileno())],
                                     pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, env={**env, **ZYGOTE_ONLY})
        theirs.close()
        atexit.register(self.close)     # the zygote ends when the worker does, not at a collector's whim
        ready = self._reply(deadline=time.monotonic() + 300)
        if ready.get("error"):
            self.close()
            raise ForkServerError(ready["error"])

    def _reply(self, deadline: float | None = None) -> dict:
        while b"\n" not in self.buffer:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self.sock], [], [], timeout)[0]:
                raise TimeoutError
            data = self.sock.recv(65536)
            if not data:
                raise ForkServerError(f"the fork server ended (exit {self.proc.wait()})")
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def run(self, args, cwd, env, timeout, stdin_fd, out_fd, err_fd) -> int:
        request = json.dumps({"args": [str(a) for a in args], "cwd": str(cwd), "env": env}).encode()
        socket.send_fds(self.sock, [request + b"\n"], [stdin_fd, out_fd, err_fd])
        started = self._reply()
        if started.get("error"):
            raise ForkServerError(started["error"])
        try:
            ended = self._reply(deadline=None if timeout is None else time.monotonic() + timeout)
        except TimeoutError:
            os.kill(started["pid"], signal.SIGKILL)
            self._reply()
            raise
        self.cpu = ended["cpu"]      # the child's CPU seconds, for measuring what a start costs
        return ended["returncode"]

    def close(self) -> None:
        self.sock.close()       # the zygote ends at the end of its requests
        self.proc.wait()
        atexit.unregister(self.close)


def run(args, *, cwd=None, env: dict | None = None, timeout: float | None = None,
        input: bytes | None = None) -> subprocess.CompletedProcess:
    """``python tests/support/crashpoint.py *args`` (``LOGETL_CRASH_AT``, ``LOGETL_CRASH_SIGNAL``,
    ``LOGETL_CRASH_COUNT`` in ``env``), run in a fork of this worker's zygote: what ``subprocess.run`` with
    ``capture_output=True`` gives. ``env``: the whole environment (default ``os.environ``); ``input``: the
    bytes of its standard input (default: empty)."""
    global _server
    env = dict(os.environ if env is None else env)
    if _server is not None and _server.base != _base(env):
        _server.close()
        _server = None
    if _server is None:
        _server = _Server(env)
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        if input:
            stdin.write(input)
            stdin.flush()
            stdin.seek(0)
        cmd = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "crashpoint.py"),
               *map(str, args)]
        try:
            code = _server.run(args, cwd or os.getcwd(), env, timeout, stdin.fileno(), out.fileno(), err.fileno())
        except TimeoutError:
            out.seek(0)
            err.seek(0)
            raise subprocess.TimeoutExpired(cmd, timeout, out.read(), err.read()) from None
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(cmd, code, out.read(), err.read())


# --- the zygote -------------------------------------------------------------------------------------------------

def _threads() -> list[str]:
    return sorted(os.listdir("/proc/self/task"))


def _handlers() -> dict:
    return {s: signal.getsignal(s) for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)}


def _zygote(fd: int) -> None:
    sock = socket.socket(fileno=fd)
    handlers, mask = _handlers(), signal.pthread_sigmask(signal.SIG_BLOCK, [])
    before = {k: v for k, v in os.environ.items() if k not in ZYGOTE_ONLY}
    try:
        import importlib

        for name in PRELOAD:
            importlib.import_module(name)
        import crashpoint
        for name in ZYGOTE_ONLY:
            os.environ.pop(name)
        if len(_threads()) != 1:
            raise ForkServerError(f"importing {PRELOAD} started threads: {_threads()}")
    except BaseException as exc:
        sock.sendall(json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode() + b"\n")
        raise
    #: what the imports set in the environment (a fresh process's imports would set it too)
    imported = {k: v for k, v in os.environ.items() if before.get(k) != v}
    sock.sendall(b'{"ready": true}\n')
    buffer, fds = b"", []
    while True:
        msg, got, _flags, _addr = socket.recv_fds(sock, 1 << 20, 3)
        if not msg:
            return
        buffer, fds = buffer + msg, fds + got
        if b"\n" not in buffer:
            continue        # the rest of a long request (its descriptors came with its first bytes)
        line, buffer = buffer.split(b"\n", 1)
        request = json.loads(line)
        problem = _unfit(request, before, handlers, mask)
        if problem:
            sock.sendall(json.dumps({"error": problem}).encode() + b"\n")
            for f in fds:
                os.close(f)
            fds = []
            continue
        pid = os.fork()
        if pid == 0:
            sock.close()
            _child(request, fds, imported, crashpoint)    # never returns
        for f in fds:
            os.close(f)
        fds = []
        sock.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        _, status, usage = os.wait4(pid, 0)
        sock.sendall(json.dumps({"returncode": os.waitstatus_to_exitcode(status),
                                 "cpu": usage.ru_utime + usage.ru_stime}).encode() + b"\n")


def _unfit(request: dict, before: dict, handlers: dict, mask) -> str:
    """Why the zygote cannot fork for ``request`` as a fresh process would start, or ''."""
    if len(_threads()) != 1:
        return f"the fork server runs threads: {_threads()} (a fork would copy only one)"
    if _handlers() != handlers or signal.pthread_sigmask(signal.SIG_BLOCK, []) != mask:
        return "the fork server's signal handlers or mask changed"
    if _base(request["env"]) != _base(before):
        return "the request's environment differs from the fork server's beyond LOGETL_* variables"
    return ""


def _child(request: dict, fds: list[int], imported: dict, crashpoint) -> None:
    code = 1
    try:
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update({**imported, **request["env"]})
        sys.dont_write_bytecode = bool(os.environ.get(_BYTECODE))
        sys.argv = ["logetl", *request["args"]]
        crashpoint.install()
        from logetl.cli import main

        code = _main(main)
        import threading

        threading._shutdown()          # what the interpreter does at its end: non-daemon threads joined
        import atexit

        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _main(main) -> int:
    """Runs ``main`` as the interpreter runs a program: its exit code."""
    try:
        main()
        return 0
    except SystemExit as exc:
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code
        print(exc.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        return 1
    except BaseException:
        sys.excepthook(*sys.exc_info())
        return 1


if __name__ == "__main__":
    _zygote(int(sys.argv[1]))
