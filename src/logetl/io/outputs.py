"""Output taps, committed atomically, on any file system of ``logetl.io.fs``.

An output is a directory holding ``part-00000`` (Spark: ``part-00000``, ``part-00001``, ... whose
concatenation in name order is the result) and an empty ``_SUCCESS``. It is staged in a hidden sibling
directory (same file system) and moved into place with one rename: readers see either no result or the
whole result with its ``_SUCCESS``, never a partial ``part-*``, whenever the process dies. Staging
directories left by killed runs are removed by the next run on the same output.
"""
from __future__ import annotations

import os
import uuid

from logetl.io.fs import LOCAL

PART = "part-00000"
SUCCESS = "_SUCCESS"


class OutputError(ValueError):
    """An output path that cannot be used; the message names it."""


def check_output(path: str, overwrite: bool, option: str = "output", fs=LOCAL) -> None:
    if fs.isdir(path):
        if fs.listdir(path) and not overwrite:
            raise OutputError(f"{option} directory {path!r} is not empty (use --overwrite to replace it)")
    elif fs.exists(path):
        raise OutputError(f"{option} {path!r} exists and is not a directory")
    denied = fs.writable_ancestor(path)
    if denied:
        raise OutputError(f"{option} {path!r}: cannot write to {denied!r}")


def _staging_base(path: str, fs) -> str:
    """The start of the names of ``path``'s staging directories (its siblings)."""
    return f".{fs.basename(path)}.logetl-"


def clean_stale(path: str, fs=LOCAL) -> None:
    """Removes staging directories of ``path`` whose process is gone (a run killed before commit)."""
    parent = fs.parent(path)
    if not fs.isdir(parent):
        return
    base = _staging_base(path, fs)
    for name in fs.listdir(parent):
        if not name.startswith(base):
            continue
        pid = name[len(base):].split("-", 1)[0]
        if pid.isdigit() and not fs.pid_alive(int(pid)):
            fs.rmtree(fs.join(parent, name))


class StagedOutput:
    """One output directory being written. ``staging`` is where to write (``part`` for a single part
    file); ``commit`` publishes it."""

    def __init__(self, path: str, overwrite: bool = False, fs=LOCAL, create: bool = True):
        self.fs = fs
        self.path = fs.abspath(path)
        self.overwrite = overwrite
        fs.makedirs(fs.parent(self.path))
        clean_stale(self.path, fs)
        self.staging = fs.join(fs.parent(self.path),
                               f"{_staging_base(self.path, fs)}{os.getpid()}-{uuid.uuid4().hex[:8]}")
        if create:
            fs.makedirs(self.staging)
        self.part = fs.join(self.staging, PART)

    def commit(self) -> None:
        fs = self.fs
        if not any(n.startswith("part-") for n in fs.listdir(self.staging)):
            fs.touch(self.part)
        fs.touch(fs.join(self.staging, SUCCESS))
        trash = None
        if fs.isdir(self.path) and fs.listdir(self.path):
            if not self.overwrite:
                raise OutputError(f"output directory {self.path!r} became non-empty during the run")
            trash = self.staging + ".old"
            fs.rename(self.path, trash)
        fs.replace_dir(self.staging, self.path)
        if trash:
            fs.rmtree(trash)

    def discard(self) -> None:
        self.fs.rmtree(self.staging)
