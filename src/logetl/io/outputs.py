"""Output taps, committed atomically, on any file system of ``logetl.io.fs``.

An output is a directory holding ``part-00000`` (Spark: ``part-00000``, ``part-00001``, ... whose
concatenation in name order is the result) and an empty ``_SUCCESS``. It is staged in a hidden sibling
directory (same file system) and moved into place with one rename: readers see either no result or the
whole result with its ``_SUCCESS``, never a partial ``part-*``, whenever the process dies. Staging
directories left by killed runs are removed by the next run on the same output.

logetl deletes only what it created: ``--overwrite`` replaces a directory only when it holds nothing but
an earlier output's files (``part-*``, ``_SUCCESS``, an incremental output's ``_INCREMENTAL``, and their
``.crc`` companions); anything else in it is
refused, naming the first such entry. Stale staging directories are recognised by their exact name
(``.NAME.logetl-PID-XXXXXXXX``) and a writer process that is gone.
"""
from __future__ import annotations

import hashlib
import os
import re
import uuid

from logetl.errors import RunFailed, UsageError

PART = "part-00000"
SUCCESS = "_SUCCESS"
#: an incremental output's state (``logetl.incremental``)
INCREMENTAL = "_INCREMENTAL"
NAME_MAX = 255            # bytes in one path component (Linux, HDFS)
_SHORT = 100              # longer names are shortened in the names of logetl's own siblings


class OutputError(UsageError):
    """An output path that cannot be used; the message names it."""


_PART = re.compile(r"part-\d{5}.*")
_PARTITION = re.compile(r"[^.=][^=]*=[^=]+")
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
#: what Hive and Spark escape in a partition value (ExternalCatalogUtils.escapePathName)
_ESCAPED = set(chr(c) for c in range(1, 0x20)) | set('"#%\'*/:=?\\\x7f{[]^')


def partition_name(field: str, value) -> str:
    """The directory of one partition value, as Hive and Spark name it: ``FIELD=VALUE`` with the value's
    special characters as ``%XX``; null and the empty string are the default partition."""
    if value is None or value == "":
        text = DEFAULT_PARTITION
    elif isinstance(value, bool):
        text = "true" if value else "false"
    else:
        text = "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in str(value))
    name = f"{field}={text}"
    if len(name.encode()) > 255:     # a file system's limit for one name (else: errno 36 mid-run)
        raise RunFailed(f"partition field {field!r}: the value {str(value)[:40]!r}... makes a directory name "
                        "longer than 255 bytes (partition by a shorter field)")
    return name


def is_output_entry(directory: str, name: str, fs) -> bool:
    """Whether ``name`` in ``directory`` is what an output written by logetl (or Spark) holds: a regular
    file ``part-NNNNN…`` or ``_SUCCESS``, the ``.crc`` checksum of one, or a partition directory
    (``FIELD=VALUE``) holding nothing else."""
    bare = name[1:-4] if name.startswith(".") and name.endswith(".crc") else name
    where = fs.join(directory, name)
    if fs.islink(where):
        return False
    if _PARTITION.fullmatch(name) and fs.isdir(where):
        entries = fs.listdir(where)
        return bool(entries) and all(n not in (SUCCESS, INCREMENTAL) and is_output_entry(where, n, fs)
                                     for n in entries)
    return (bare in (SUCCESS, INCREMENTAL) or _PART.fullmatch(bare) is not None) and fs.isfile(where)


def foreign_entry(path: str, fs, allow: tuple[str, ...] = ()) -> str | None:
    """The first entry of directory ``path`` that is not part of an output (nor in ``allow``), or None."""
    for name in fs.listdir(path):
        if name not in allow and not is_output_entry(path, name, fs):
            return name
    return None


def output_listing(path: str, fs) -> dict[str, int] | None:
    """What an output directory holds: its part files and ``_SUCCESS``, by name, with their sizes (None
    when it is absent or holds something else)."""
    if not fs.isdir(path) or fs.islink(path) or foreign_entry(path, fs) is not None:
        return None
    files: dict[str, int] = {}

    def walk(directory: str, prefix: str) -> None:
        for n in fs.listdir(directory):
            where = fs.join(directory, n)
            if fs.isdir(where):
                walk(where, f"{prefix}{n}/")
            elif not n.endswith(".crc"):
                files[prefix + n] = fs.stat(where)[0]

    walk(path, "")
    return files or None


def short_name(name: str) -> str:
    """``name`` as it appears in the names of logetl's siblings: bounded, so that the sibling's name fits
    in NAME_MAX even for an output name of 255 bytes."""
    if len(name.encode()) <= _SHORT:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    return name.encode()[:80].decode(errors="ignore") + "~" + digest


def check_output(path: str, overwrite: bool, option: str, fs) -> None:
    """Refuses, naming the user's path, an output that cannot be written or must not be replaced."""
    base = fs.basename(path)
    if len(base.encode()) > NAME_MAX:
        raise OutputError(f"{option} {path!r}: the name {base[:40]!r}... is longer than {NAME_MAX} bytes")
    if fs.islink(path):
        raise OutputError(f"{option} {path!r} is a symbolic link: give the directory it points to")
    if fs.isdir(path):
        if fs.listdir(path):
            foreign = foreign_entry(path, fs)
            if foreign is not None:
                raise OutputError(f"{option} directory {path!r} is not empty and holds {foreign!r}, which is not "
                                  "part of a logetl output: choose another directory (--overwrite replaces "
                                  "only earlier outputs)")
            if not overwrite:
                raise OutputError(f"{option} directory {path!r} is not empty (use --overwrite to replace it)")
    elif fs.exists(path):
        raise OutputError(f"{option} {path!r} exists and is not a directory")
    blocked = fs.non_directory_ancestor(path)
    if blocked:
        raise OutputError(f"{option} {path!r}: {blocked!r} is not a directory")
    denied = fs.writable_ancestor(path)
    if denied:
        raise OutputError(f"{option} {path!r}: cannot write to {denied!r}")


def _staging_base(path: str, fs) -> str:
    """The start of the names of ``path``'s staging directories (its siblings)."""
    return f".{short_name(fs.basename(path))}.logetl-"


_STAGING = re.compile(r"(\d+)-[0-9a-f]{8}(\.old)?")


def clean_stale(path: str, fs) -> None:
    """Removes staging directories of ``path`` whose process is gone (a run killed before commit): by
    their exact name, a writer that is gone, and what they hold (nothing but an output's files, and Spark's
    ``_temporary``), so a directory of the user's with a look-alike name stays."""
    parent = fs.parent(path)
    if not fs.isdir(parent):
        return
    base = _staging_base(path, fs)
    for name in fs.listdir(parent):
        if not name.startswith(base):
            continue
        m = _STAGING.fullmatch(name[len(base):])
        where = fs.join(parent, name)
        if m and not fs.pid_alive(int(m.group(1))) and fs.isdir(where) \
                and foreign_entry(where, fs, allow=("_temporary", ".replaced")) is None:
            fs.rmtree(where)


class StagedOutput:
    """One output directory being written. ``staging`` is where to write (``part`` for a single part
    file); ``commit`` publishes it."""

    def __init__(self, path: str, overwrite: bool, fs, create: bool = True, partitioned: bool = False):
        """``partitioned``: the staging directory holds partition directories; publishing over an earlier
        output replaces those partitions and keeps the others."""
        self.fs = fs
        self.partitioned = partitioned
        self.path = fs.abspath(path)
        self.overwrite = overwrite
        fs.makedirs(fs.parent(self.path))
        clean_stale(self.path, fs)
        self.staging = fs.join(fs.parent(self.path),
                               f"{_staging_base(self.path, fs)}{os.getpid()}-{uuid.uuid4().hex[:8]}")
        if create:
            fs.makedirs(self.staging)
        self.part = fs.join(self.staging, PART)
        #: the part files' suffix (``.parquet``, ``.jsonl``): an output with no records gets an empty part
        self.suffix = ""
        self.listing: dict[str, int] = {}

    def seal(self) -> "StagedOutput":
        """Completes the staged output (a part even when empty, ``_SUCCESS``); ``listing`` is then what
        it holds (recorded before it is published)."""
        fs = self.fs
        if not fs.isdir(self.staging):
            fs.makedirs(self.staging)
        if not self.partitioned and not any(n.startswith("part-") for n in fs.listdir(self.staging)):
            fs.touch(self.part + self.suffix)
        fs.touch(fs.join(self.staging, SUCCESS))
        self.listing = output_listing(self.staging, fs) or {}
        return self

    def commit(self) -> None:
        """Publishes the sealed output with one rename (an earlier output is replaced when allowed)."""
        fs = self.fs
        trash = None
        if fs.isdir(self.path) and fs.listdir(self.path):
            foreign = foreign_entry(self.path, fs)
            if not self.overwrite or foreign is not None:
                raise RunFailed(f"output directory {self.path!r} became non-empty during the run"
                                  + (f" (it holds {foreign!r})" if foreign else ""))
            if self.partitioned:
                self._replace_partitions()
                return
            trash = self.staging + ".old"
            fs.rename(self.path, trash)
        fs.replace_dir(self.staging, self.path)
        if trash:
            fs.rmtree(trash)

    def _leaves(self, directory: str, prefix: str = "") -> list[str]:
        """The partitions (relative paths of the directories holding part files) under ``directory``."""
        out = []
        for n in self.fs.listdir(directory):
            where = self.fs.join(directory, n)
            if _PARTITION.fullmatch(n) and self.fs.isdir(where):
                inner = self._leaves(where, f"{prefix}{n}/")
                out += inner if inner else []
                if any(_PART.fullmatch(m) for m in self.fs.listdir(where)):
                    out.append(prefix + n)
        return out

    def _replace_partitions(self) -> None:
        """Each partition this run wrote replaces the earlier one with one rename (the earlier is first
        moved aside into the staging directory, deleted with it); partitions it did not write stay."""
        fs = self.fs
        aside = fs.join(self.staging, ".replaced")
        for i, leaf in enumerate(self._leaves(self.staging)):
            target = fs.join(self.path, leaf)
            if fs.exists(target):
                fs.makedirs(aside)
                fs.rename(target, fs.join(aside, str(i)))
            fs.makedirs(fs.parent(target))
            fs.rename(fs.join(self.staging, leaf), target)
        fs.touch(fs.join(self.path, SUCCESS))
        fs.rmtree(self.staging)

    def discard(self) -> None:
        self.fs.rmtree(self.staging)
