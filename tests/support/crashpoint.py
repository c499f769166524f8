"""Runs the logetl command line and SIGKILLs it at its N-th file-system mutation (LOGETL_CRASH_AT=N), or
sends it another signal (LOGETL_CRASH_SIGNAL=TERM).

A ``sys.addaudithook`` hook counts every mutation Python performs on the file system: opening a file for
writing, creating, renaming, replacing, removing, truncating, linking, changing modes or times, and
shutil's tree operations. At the N-th it kills its own process with SIGKILL *before* the operation runs,
as a power cut or the OOM killer would. ``LOGETL_CRASH_COUNT=FILE`` writes the number of mutations of a run
that was not killed (the crash-point test iterates N up to it). Mutations made inside native code that
does not go through Python (Polars' own writers, SQLite) are not seen; logetl writes its outputs, stored
parts and markers through Python.

``python tests/support/crashpoint.py ARGS`` is one run in a fresh interpreter; ``forkserver.run(ARGS)`` is the
same run in a fork of a process that has imported logetl, which calls ``install`` in the child.
"""
import atexit
import os
import signal
import sys

MUTATIONS = {
    "os.rename", "os.remove", "os.rmdir", "os.mkdir", "os.truncate", "os.link", "os.symlink", "os.chmod",
    "os.chown", "os.utime", "shutil.rmtree", "shutil.copyfile", "shutil.copymode", "shutil.copystat",
    "shutil.move", "shutil.copytree",
}
WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

crash_at = 0
#: the signal sent at that mutation: SIGKILL, or LOGETL_CRASH_SIGNAL (TERM: what ``timeout`` sends)
crash_signal = signal.SIGKILL
count = 0


def _is_mutation(event: str, args) -> bool:
    if event == "open":
        _path, mode, flags = args
        if isinstance(mode, str):
            return any(c in mode for c in "wax+")
        return bool((flags or 0) & WRITING)
    return event in MUTATIONS


def _hook(event, args):
    global count
    if not _is_mutation(event, args):
        return
    count += 1
    if count == crash_at:
        os.kill(os.getpid(), crash_signal)   # SIGTERM's handler raises here, before the operation


def _report():
    target = os.environ.get("LOGETL_CRASH_COUNT")
    if target:
        total = count   # before this open, which the hook would count too
        with open(target, "w") as f:   # only when the run was not killed
            f.write(str(total))


def install() -> None:
    """Reads LOGETL_CRASH_AT and LOGETL_CRASH_SIGNAL, installs the hook and the count's report. In the
    process about to run the command, once: an audit hook cannot be removed (``forkserver.py`` installs it
    in each forked child, never in the process it forks from)."""
    global crash_at, crash_signal, count
    crash_at = int(os.environ.get("LOGETL_CRASH_AT", "0"))
    crash_signal = getattr(signal, "SIG" + os.environ.get("LOGETL_CRASH_SIGNAL", "KILL"))
    count = 0
    sys.addaudithook(_hook)
    atexit.register(_report)


if __name__ == "__main__":
    from logetl.cli import main

    install()
    sys.argv[0] = "logetl"
    main()
