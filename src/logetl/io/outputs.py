"""Output taps on the local file system, committed atomically.

An output is a directory holding ``part-00000`` and an empty ``_SUCCESS``. It is staged in a hidden sibling
directory (same file system) and moved into place with one ``rename``: readers see either no result or the
whole result with its ``_SUCCESS``, never a partial ``part-*``, whenever the process dies. Staging
directories left by killed runs are removed by the next run on the same output.
"""
from __future__ import annotations

import os
import shutil
import uuid

PART = "part-00000"
SUCCESS = "_SUCCESS"


class OutputError(ValueError):
    """An output path that cannot be used; the message names it."""


def check_output(path: str, overwrite: bool, option: str = "output") -> None:
    if os.path.isdir(path):
        if os.listdir(path) and not overwrite:
            raise OutputError(f"{option} directory {path!r} is not empty (use --overwrite to replace it)")
    elif os.path.lexists(path):
        raise OutputError(f"{option} {path!r} exists and is not a directory")
    parent = os.path.dirname(os.path.abspath(path))
    probe = parent
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.access(probe, os.W_OK):
        raise OutputError(f"{option} {path!r}: cannot write to {probe!r}")


def _staging_prefix(path: str) -> str:
    path = os.path.abspath(path)
    return os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.logetl-")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(path: str) -> None:
    """Removes staging directories of ``path`` whose process is gone (a run killed before commit)."""
    prefix = _staging_prefix(path)
    parent = os.path.dirname(prefix)
    if not os.path.isdir(parent):
        return
    base = os.path.basename(prefix)
    for name in os.listdir(parent):
        if not name.startswith(base):
            continue
        pid = name[len(base):].split("-", 1)[0]
        if pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)


class StagedOutput:
    """One output directory being written. ``part`` is the path to write; ``commit`` publishes it."""

    def __init__(self, path: str, overwrite: bool = False):
        self.path = os.path.abspath(path)
        self.overwrite = overwrite
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        clean_stale(self.path)
        self.staging = f"{_staging_prefix(self.path)}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        os.mkdir(self.staging)
        self.part = os.path.join(self.staging, PART)

    def commit(self) -> None:
        if not os.path.exists(self.part):
            open(self.part, "wb").close()
        with open(os.path.join(self.staging, SUCCESS), "wb") as f:
            f.flush()
            os.fsync(f.fileno())
        trash = None
        if os.path.isdir(self.path) and os.listdir(self.path):
            if not self.overwrite:
                raise OutputError(f"output directory {self.path!r} became non-empty during the run")
            trash = self.staging + ".old"
            os.rename(self.path, trash)
        # rename(2) replaces an empty directory atomically, and creates the path when absent.
        os.rename(self.staging, self.path)
        if trash:
            shutil.rmtree(trash, ignore_errors=True)

    def discard(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
