"""Output taps, committed atomically, on any file system of ``logetl.io.fs``.

An output is a directory holding ``part-00000`` (Spark: ``part-00000``, ``part-00001``, ... whose
concatenation in name order is the result; with a suffix for formats other than TSV; with a header line,
each part starts with it) and an empty ``_SUCCESS``. It is staged in a hidden sibling
directory (same file system) and moved into place with one rename: readers see either no result or the
whole result with its ``_SUCCESS``, never a partial ``part-*``, whenever the process dies. Staging
directories left by killed runs are removed by the next run on the same output.

logetl deletes only what it created: ``--overwrite`` replaces a directory only when it holds nothing but
an earlier output's files (``part-*``, ``_SUCCESS``, an incremental output's ``_INCREMENTAL``, and their
``.crc`` companions); anything else in it is
refused, naming the first such entry. Stale staging directories are recognised by their exact name
(``.NAME.logetl-PID-XXXXXXXX``) and a writer process that is gone.

A partitioned output (``FIELD=VALUE/.../part-…``) is replaced partition by partition, and keeps the
partitions of its fields (and format) that a run does not write. What an earlier output of another shape
left there (``part-*`` files beside the partitions, partitions by other fields, parts of another format,
an incremental state) is logetl's but none of this output's: it is refused without ``--overwrite``, naming
it, and removed with it (``layout_scan``), so that readers of the directory find this output only.
"""
from __future__ import annotations

import hashlib
import os
import re
import uuid

from logetl.errors import RunFailed, UsageError, signals_held

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
    if "\x00" in text:               # escaped by neither Hive nor Spark, and no file system takes it
        shown = repr(str(value)[:40]) + ("..." if len(str(value)) > 40 else "")
        raise RunFailed(f"partition field {field!r}: the value {shown} holds a NUL byte, which no directory name "
                        "can hold (replace it before the sink, or partition by another field)")
    name = f"{field}={text}"
    if len(name.encode()) > 255:     # a file system's limit for one name (else: errno 36 mid-run)
        raise RunFailed(f"partition field {field!r}: the value {str(value)[:40]!r}... makes a directory name "
                        "longer than 255 bytes (partition by a shorter field)")
    return name


#: the part files' suffix of each sink format
SUFFIXES = {"tsv": "", "csv": ".csv", "parquet": ".parquet", "jsonl": ".jsonl"}

#: the text formats of fields in columns: (separator, line end). CSV is RFC 4180's: ``,`` and CRLF
DELIMITED = {"tsv": ("\t", "\n"), "csv": (",", "\r\n")}


def header_line(format: str, fields) -> bytes:
    """The first line of a part file of ``format`` (``DELIMITED``) with a header: the field names. A field
    name is ASCII letters, digits, ``_`` and ``-``: never quoted."""
    separator, end = DELIMITED[format]
    return (separator.join(fields) + end).encode("ascii")


def _bare(name: str) -> str:
    """The file a ``.NAME.crc`` checksum (Hadoop's) is of, else ``name``."""
    return name[1:-4] if name.startswith(".") and name.endswith(".crc") else name


def _is_part(name: str, format: str) -> bool:
    """Whether ``name`` is a part file of ``format`` (TSV parts have no suffix)."""
    suffix = SUFFIXES[format]
    return _PART.fullmatch(name) is not None and (name.endswith(suffix) if suffix else "." not in name)


def layout_scan(path: str, partition_by: tuple[str, ...], format: str, fs,
                written: frozenset[str] = frozenset()) -> tuple[set[str], list[str]]:
    """What an earlier output at ``path`` (holding only output entries, ``foreign_entry``) holds for a
    sink partitioned by ``partition_by`` that writes ``format``. Of that shape are ``_SUCCESS``,
    directories ``FIELD=VALUE`` of the fields in order, and in the innermost ones part files of the format
    (and their checksums); ``written`` (relative paths) are the partitions this run replaces.

    Returns (the directories, relative, ``""`` the output itself, that hold a partition of that shape this
    run does not write: what a publish keeps; the entries that are not of that shape: an unpartitioned
    output's ``part-*``, partitions by other fields, parts of another format, ``_INCREMENTAL``, each
    outermost file or directory once). A directory of the shape that keeps nothing is one stale entry when
    no written partition is under it, else neither (the publish replaces it whole)."""
    kept_dirs: set[str] = set()

    def walk(directory: str, rel: str, depth: int) -> list[str]:
        kept, stale = False, []
        for name in fs.listdir(directory):
            where, r = fs.join(directory, name), rel + name
            if depth == 0 and _bare(name) == SUCCESS:
                continue
            if depth < len(partition_by):
                if r in written:
                    continue
                if _PARTITION.fullmatch(name) and name.split("=", 1)[0] == partition_by[depth] \
                        and fs.isdir(where) and not fs.islink(where):
                    below = walk(where, r + "/", depth + 1)
                    if r in kept_dirs:
                        kept, stale = True, stale + below
                    elif not any(w.startswith(r + "/") for w in written):
                        stale.append(r)
                    continue
            elif _is_part(_bare(name), format) and fs.isfile(where):
                kept = kept or name == _bare(name)
                continue
            stale.append(r)
        if kept:
            kept_dirs.add(rel.rstrip("/"))
        return stale

    stale = walk(path, "", 0)
    return kept_dirs, stale


def is_output_entry(directory: str, name: str, fs, staging: bool = False) -> bool:
    """Whether ``name`` in ``directory`` is what an output written by logetl (or Spark) holds: a regular
    file ``part-NNNNN…`` or ``_SUCCESS``, the ``.crc`` checksum of one, or a partition directory
    (``FIELD=VALUE``) holding nothing else. ``staging``: ``directory`` is logetl's staging directory, where
    a partition directory may be empty (a run killed while writing or publishing it)."""
    bare = _bare(name)
    where = fs.join(directory, name)
    if fs.islink(where):
        return False
    if _PARTITION.fullmatch(name) and fs.isdir(where):
        entries = fs.listdir(where)
        return (bool(entries) or staging) and all(
            n not in (SUCCESS, INCREMENTAL) and is_output_entry(where, n, fs, staging) for n in entries)
    return (bare in (SUCCESS, INCREMENTAL) or _PART.fullmatch(bare) is not None) and fs.isfile(where)


def foreign_entry(path: str, fs, allow: tuple[str, ...] = (), staging: bool = False) -> str | None:
    """The first entry of directory ``path`` that is not part of an output (nor in ``allow``), or None."""
    for name in fs.listdir(path):
        if name not in allow and not is_output_entry(path, name, fs, staging):
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


def layout_name(partition_by: tuple[str, ...], format: str) -> str:
    """How messages name the shape of a partitioned output: "a tsv output partitioned by day, kind"."""
    return f"a {format} output partitioned by {', '.join(partition_by)}"


def check_output(path: str, overwrite: bool, option: str, fs, partition_by: tuple[str, ...] = (),
                 format: str = "tsv") -> None:
    """Refuses, naming the user's path, an output that cannot be written or must not be replaced.
    ``partition_by`` and ``format``: the sink's, when it writes partitions (an earlier output of another
    shape is named: ``--overwrite`` replaces it rather than adding partitions to it)."""
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
                stale = layout_scan(path, partition_by, format, fs)[1] if partition_by else []
                if stale:
                    raise OutputError(f"{option} directory {path!r} is not empty and holds {stale[0]!r}, which is "
                                      f"not part of {layout_name(partition_by, format)} (use --overwrite to "
                                      "replace it)")
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
                and foreign_entry(where, fs, allow=("_temporary", ".replaced"), staging=True) is None:
            fs.rmtree(where)


def discard_own_staging(path: str, fs) -> None:
    """Removes the staging directories of ``path`` that this process made: for a run stopped before it
    knew them (``Engine.close``); a directory of another process, or of the user's, stays."""
    parent = fs.parent(fs.abspath(path))
    if not fs.isdir(parent):
        return
    base = _staging_base(path, fs)
    for name in fs.listdir(parent):
        m = _STAGING.fullmatch(name[len(base):]) if name.startswith(base) else None
        if m and int(m.group(1)) == os.getpid() and fs.isdir(fs.join(parent, name)):
            fs.rmtree(fs.join(parent, name))


class StagedOutput:
    """One output directory being written. ``staging`` is where to write (``part`` for a single part
    file); ``commit`` publishes it."""

    def __init__(self, path: str, overwrite: bool, fs, create: bool = True, partition_by: tuple[str, ...] = (),
                 format: str = "tsv"):
        """``partition_by``: the sink's partition fields, when the staging directory holds partition
        directories (``format``: of their part files); publishing over an earlier output replaces those
        partitions and keeps the others of that shape."""
        self.fs = fs
        self.partition_by = tuple(partition_by)
        self.partitioned = bool(self.partition_by)
        self.format = format
        self.path = fs.abspath(path)
        self.overwrite = overwrite
        fs.makedirs(fs.parent(self.path))
        clean_stale(self.path, fs)
        self.staging = fs.join(fs.parent(self.path),
                               f"{_staging_base(self.path, fs)}{os.getpid()}-{uuid.uuid4().hex[:8]}")
        if create:
            fs.makedirs(self.staging)
        self.part = fs.join(self.staging, PART)
        #: the part files' suffix (``.parquet``, ``.jsonl``, ``.csv``): an output with no records gets an empty
        #: part (an engine writes the header line of an output that has one)
        self.suffix = ""
        self.listing: dict[str, int] = {}
        #: the earlier output ``commit`` replaced, until it is deleted (a stop may come before)
        self.replaced: str | None = None

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
        # two renames a stop must not part (it would leave the output absent, the earlier one aside); the
        # earlier output's removal after them may be long: a stop then leaves it to ``discard``
        with signals_held():
            if trash:
                fs.rename(self.path, trash)
            fs.replace_dir(self.staging, self.path)
            self.replaced = trash
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
        """Publishes over an earlier output: each partition this run wrote replaces the earlier one with
        one rename (the earlier is first moved aside into the staging directory, deleted with it), and
        partitions of this shape it did not write stay. What is not of this shape (``layout_scan``: an
        unpartitioned output's parts, partitions by other fields, parts of another format) is moved aside
        first, each entry with one rename. A directory that keeps nothing is replaced whole (when nothing
        of the earlier output stays, the output itself, as an unpartitioned one is), and a new one is moved
        in whole: no partition directory of the output is ever empty. A kill on the way leaves every
        partition whole (old or new) and the rest aside in the staging directory, which the next run
        removes (``clean_stale``); that run also removes what is left."""
        fs = self.fs
        leaves = frozenset(self._leaves(self.staging))
        kept, stale = layout_scan(self.path, self.partition_by, self.format, fs, written=leaves)
        if "" not in kept:
            trash = self.staging + ".old"
            with signals_held():          # as in ``commit``
                fs.rename(self.path, trash)
                fs.replace_dir(self.staging, self.path)
                self.replaced = trash
            fs.rmtree(trash)
            return
        aside = fs.join(self.staging, ".replaced")
        moved = [0]

        def put_aside(where: str) -> None:
            fs.makedirs(aside)
            fs.rename(where, fs.join(aside, str(moved[0])))
            moved[0] += 1

        def publish(rel: str, depth: int) -> None:
            source = fs.join(self.staging, rel) if rel else self.staging
            for name in fs.listdir(source):
                if not _PARTITION.fullmatch(name):
                    continue
                r = f"{rel}/{name}" if rel else name
                target = fs.join(self.path, r)
                if fs.exists(target) and depth + 1 < len(self.partition_by) and r in kept:
                    publish(r, depth + 1)
                    continue
                # the earlier partition aside and the new one in: a stop between would leave neither
                with signals_held():
                    if fs.exists(target):
                        put_aside(target)
                    fs.rename(fs.join(source, name), target)

        for rel in stale:
            put_aside(fs.join(self.path, rel))
        publish("", 0)
        fs.touch(fs.join(self.path, SUCCESS))
        fs.rmtree(self.staging)

    def discard(self) -> None:
        """Removes what the run staged, and the earlier output a stopped ``commit`` had not finished
        removing (set aside as ``.old``, once the new output was in place)."""
        self.fs.rmtree(self.staging)
        if self.replaced:
            self.fs.rmtree(self.replaced)
