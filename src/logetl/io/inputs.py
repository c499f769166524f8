"""Input taps on the local file system: resolving paths and reading them as whole-line chunks.

An input is a file, a directory (its visible files; names starting with ``_`` or ``.`` are ignored, like
Hadoop's) or a glob (its matches). The files of a directory or glob are read in *log order* (``log_order``):
rotations of one log oldest first, then the log itself, everything else in name order. ``.gz`` and ``.bz2``
are decompressed by extension. Files are read in order as one stream of lines: a file's last line ends at
the end of the file even without ``\\n``.
"""
from __future__ import annotations

import bz2
import gzip
import os
import re
import zlib
from collections.abc import Iterator

from logetl.errors import RunFailed, UsageError, reason
from logetl.io.fs import LOCAL

CHUNK = 4 << 20   # small chunks keep peak memory low and give the parse threads even work


class InputError(UsageError):
    """An input path that cannot be read; the message names it."""


class InputReadError(RunFailed, ValueError):
    """An input that failed while it was being read (a corrupt compressed file, an I/O error): the run
    fails (exit 1); the message names the file. A ``ValueError`` too, for the callers that catch that."""


def _visible(name: str) -> bool:
    return not (name.startswith("_") or name.startswith("."))


#: a rotation of log NAME: ``NAME.N`` (logrotate's numbering: a higher N is older) or ``NAME-YYYYMMDD``
#: (logrotate's dateext), either possibly compressed
_NUMBERED = re.compile(r"(.+)\.(\d+)(?:\.gz|\.bz2)?")
_DATED = re.compile(r"(.+)-(\d{8})(?:\.gz|\.bz2)?")


def _log_key(path: str) -> tuple:
    """The sort key of log order: (directory, the log's name, rank within the log's files)."""
    directory, name = os.path.split(path)
    m = _NUMBERED.fullmatch(name)
    if m:
        return directory, m.group(1), 0, -int(m.group(2)), name
    m = _DATED.fullmatch(name)
    if m:
        return directory, m.group(1), 1, int(m.group(2)), name
    return directory, name, 2, 0, name


def log_order(paths: list[str]) -> list[str]:
    """``paths`` in log order, so that lines come in the order they were written: within a directory, the
    files of one log NAME sorted numbered rotations first, highest N (oldest) first (``NAME.3.gz``,
    ``NAME.2``, ``NAME.1``), then dated rotations, oldest date first (``NAME-20260101.gz``), then ``NAME``
    itself; logs (and unrelated files) by name; directories by name."""
    return sorted(paths, key=_log_key)


#: the input path that means standard input (local engine only)
STDIN = "-"
#: why it is refused on another engine (here, and by ``job.run_flow`` before Spark starts)
STDIN_LOCAL_ONLY = "--input - (standard input) works on the local engine only: on Spark give a path"


def resolve(path: str, fs) -> list[str]:
    if path == STDIN:
        if fs is not LOCAL:
            raise InputError(STDIN_LOCAL_ONLY)
        return [STDIN]
    if fs.isdir(path):
        files = []
        for name, kind in fs.entries(path):
            # subdirectories are not read; anything else that is no file (a symbolic link to a removed
            # rotation, a FIFO) was skipped without a word. The kinds come with the listing (on HDFS, a
            # status query an entry was a round trip each)
            if not _visible(name) or kind == "dir":
                continue
            if kind != "file":
                raise InputError(f"input directory {path!r} holds {fs.join(path, name)!r}, which is not a regular "
                                 "file (a broken symbolic link?)")
            files.append(fs.join(path, name))
        files = log_order(files)
        if not files:
            raise InputError(f"input directory {path!r} holds no visible files")
    elif fs.isfile(path):
        files = [path]
    elif fs.has_magic(path):
        files = log_order([p for p in fs.glob(path) if fs.isfile(p) and _visible(p.rstrip("/").rsplit("/", 1)[-1])])
        if not files:
            raise InputError(f"input glob {path!r} matches no files")
    elif fs.exists(path):
        raise InputError(f"input {path!r} is not a regular file or directory")
    else:
        raise InputError(f"input {path!r} does not exist")
    for f in files:
        if not fs.readable(f):
            raise InputError(f"input file {f!r} is not readable")
    return files


def open_input(path: str):
    if path == STDIN:   # a duplicate of fd 0: closing it leaves the process's stdin alone
        import os

        return open(os.dup(0), "rb", buffering=0)
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    if path.endswith(".bz2"):
        return bz2.open(path, "rb")
    return open(path, "rb", buffering=0)


def compressed(path: str) -> bool:
    return path.endswith((".gz", ".bz2"))


def _skip(f, n: int) -> int:
    """Reads and drops the first ``n`` (uncompressed) bytes of a compressed stream; returns how many there
    were (fewer at its end)."""
    scratch = bytearray(min(n, 1 << 20))
    view = memoryview(scratch)
    done = 0
    while done < n:
        got = f.readinto(view[: min(len(scratch), n - done)])
        if not got:
            break
        done += got
    return done


def underlying_fd(f) -> int:
    """The descriptor of the file under ``open_input``'s object (a gzip or bz2 stream's compressed file)."""
    return (getattr(f, "fileobj", None) or getattr(f, "_fp", None) or f).fileno()


def _same_file(fd: int, ident: dict) -> bool:
    """Whether the open file ``fd`` is the one ``ident`` describes (``open_planned``)."""
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != (ident["dev"], ident["ino"]):
        return False
    if "fp" in ident:       # an inode number is reused once its file is removed: its first bytes tell
        import hashlib

        head = os.pread(fd, ident["fp_len"], 0)
        return len(head) == ident["fp_len"] and hashlib.sha256(head).hexdigest() == ident["fp"]
    return (st.st_size, st.st_mtime_ns) == (ident["size"], ident["mtime_ns"])


def _renamed_to(path: str, ident: dict) -> str | None:
    """Where the file ``ident`` that was at ``path`` is now in the same directory (a rename rotation:
    ``access.log`` -> ``access.log.1``), or None when it is gone from there."""
    try:
        with os.scandir(os.path.dirname(path) or ".") as listing:
            for entry in listing:
                if entry.inode() == ident["ino"] and entry.path != path:
                    return entry.path
    except OSError:
        return None
    return None


def open_planned(path: str, ident: dict | None, opener=None):
    """Opens the very file an incremental run planned to read at ``path``, with ``opener`` (default
    ``open_input``; an ``os.open``-like opener returns a descriptor). ``ident`` says which file that is:
    its device and inode, and its first bytes (``fp_len``, their SHA-256 ``fp``) or, compressed (a file
    written once), its size and modification time (``mtime_ns``). Renamed since (a rotation between the
    plan and the read), it is opened under its new name in the same directory: the planned offsets are
    offsets in that file, never in the new one at ``path``. Gone altogether, the run cannot read what it
    planned: ``InputReadError`` (nothing is committed, and the next run plans again from the same state).
    Other errors are the opener's."""
    opener = opener or open_input
    if ident is None:
        return opener(path)
    for target in (path, None):
        if target is None:
            target = _renamed_to(path, ident)
            if target is None:
                break
        try:
            f = opener(target)
        except FileNotFoundError:
            continue
        try:
            if _same_file(f if isinstance(f, int) else underlying_fd(f), ident):
                return f
        except BaseException:
            os.close(f) if isinstance(f, int) else f.close()
            raise
        os.close(f) if isinstance(f, int) else f.close()
    raise InputReadError(f"cannot read input {path!r}: it was rotated away after the run was planned (nothing "
                         "was committed; run again)")


def plain(path: str) -> bool:
    """Whether ``path`` can be read by ``regions``: a regular, uncompressed file."""
    return path != STDIN and not compressed(path) and os.path.isfile(path)


def open_plain(path: str, ident: dict | None = None) -> int:
    """A descriptor of the plain file ``path``; ``ident``: the file an incremental run planned to read
    there (``open_planned``)."""
    try:
        return open_planned(path, ident, lambda p: os.open(p, os.O_RDONLY))
    except OSError as exc:
        raise InputReadError(f"cannot open input {path!r}: {reason(exc)}") from None


def regions(fd: int, path: str, chunk: int = CHUNK, start: int = 0, bound: int | None = None):
    """The whole-line pieces of a plain file (open as ``fd``) as ``(offset, length, final)``, for
    ``read_region`` to read in another thread: only the pieces' boundaries are found here (a small read
    around each), so that the bulk of the reading runs beside the parse, off the thread that runs the
    operators. The pieces hold the bytes ``read_chunks`` yields for the same ``start`` and ``bound``: up
    to the file's size now (its unterminated last line counts), or complete lines up to ``bound``."""
    size = os.fstat(fd).st_size
    end = size if bound is None else min(bound, size)
    if bound is not None:   # bounded: complete lines only, even when the file turned out shorter
        end = _last_newline(fd, start, end, path) + 1
    pos = start
    while pos < end:
        nl = _next_newline(fd, pos + chunk - 1, end, path) if pos + chunk < end else -1
        stop = end if nl < 0 else nl + 1
        yield pos, stop - pos, stop >= end
        pos = stop


def _pread(fd: int, n: int, offset: int, path: str) -> bytes:
    try:
        return os.pread(fd, n, offset)
    except OSError as exc:
        raise InputReadError(f"cannot read input {path!r}: {reason(exc)}") from None


def _next_newline(fd: int, pos: int, end: int, path: str, window: int = 1 << 16) -> int:
    """The offset of the first ``\\n`` at or after ``pos`` and before ``end``, or -1."""
    while pos < end:
        data = _pread(fd, min(window, end - pos), pos, path)
        if not data:
            return -1
        i = data.find(b"\n")
        if i >= 0:
            return pos + i
        pos += len(data)
    return -1


def _last_newline(fd: int, start: int, end: int, path: str, window: int = 1 << 16) -> int:
    """The offset of the last ``\\n`` in ``[start, end)``, or ``start - 1``."""
    pos = end
    while pos > start:
        lo = max(start, pos - window)
        data = _pread(fd, pos - lo, lo, path)
        i = data.rfind(b"\n")
        if i >= 0:
            return lo + i
        pos = lo
    return start - 1


def read_region(fd: int, offset: int, length: int, path: str) -> bytes:
    """The bytes of one piece of ``regions`` (in the parse thread: ``os.pread`` releases the GIL and fills
    a new bytes object without zeroing it first)."""
    data = _pread(fd, length, offset, path)
    while len(data) < length:   # a short read (a signal, a network file system): read the rest
        more = _pread(fd, length - len(data), offset + len(data), path)
        if not more:
            raise InputReadError(f"cannot read input {path!r}: it became shorter while it was read")
        data += more
    return data


def read_chunks(files: list[str], chunk: int = CHUNK, on_bytes=None, ranges: dict | None = None,
                reached: dict | None = None, identities: dict | None = None) -> Iterator[tuple[memoryview, bool]]:
    """Yields ``(data, final)``: data (a buffer) holds whole lines; ``final`` marks the last piece of a file,
    which may end without ``\\n``. ``on_bytes(n)`` is told how many (compressed) bytes were consumed.

    ``ranges`` (incremental runs): path -> ``(start, end)``, the (uncompressed) bytes of the file to read;
    ``end`` None reads to the end of the file (its unterminated last line counts), else ``end`` follows a
    ``\\n`` and nothing past it is read (a file that turns out shorter yields only its complete lines).
    ``reached[path]`` is then set to the offset after the last byte yielded. ``identities``: path -> the
    file planned to be read there (``open_planned``).

    Each chunk is read straight into a buffer of its own (the consumer may still hold earlier ones),
    after the partial line carried over from the previous read: no copy of the chunk is made."""
    for path in files:
        start, bound = ranges.get(path, (0, None)) if ranges else (0, None)
        try:
            f = open_planned(path, (identities or {}).get(path))
        except OSError as exc:
            raise InputReadError(f"cannot open input {path!r}: {reason(exc)}") from None
        with f:
            raw = getattr(f, "fileobj", None) or getattr(f, "_fp", None)
            base = start      # the file offset of buf[0]; what was yielded ends at ``base``
            try:
                if start and compressed(path):
                    base = _skip(f, start)
                elif start:
                    f.seek(start)
            except (OSError, EOFError, zlib.error) as exc:
                raise InputReadError(f"cannot read input {path!r}: {reason(exc)}") from None
            left = None if bound is None else max(bound - base, 0)
            carry = b""
            last_pos = raw.tell() if raw is not None and hasattr(raw, "tell") else 0
            while True:
                want = chunk if left is None else min(chunk, left)
                buf = bytearray(len(carry) + want)
                buf[: len(carry)] = carry
                view = memoryview(buf)
                try:
                    n = f.readinto(view[len(carry):]) if want else 0
                except (OSError, EOFError, zlib.error) as exc:
                    raise InputReadError(f"cannot read input {path!r}: {reason(exc)}") from None
                if on_bytes is not None:
                    pos = raw.tell() if raw is not None and hasattr(raw, "tell") else last_pos + n
                    on_bytes(pos - last_pos)
                    last_pos = pos
                end = len(carry) + n
                if left is not None:
                    left -= n
                if n == 0 or left == 0:
                    if left is not None:
                        # bounded: complete lines only, even when the file ended early (truncated meanwhile)
                        end = buf.rfind(b"\n", 0, end) + 1
                    if end:
                        yield view[:end], True
                    base += end
                    break
                cut = buf.rfind(b"\n", 0, end) + 1
                carry = bytes(view[cut:end])
                if cut:
                    yield view[:cut], False
                    base += cut
            if reached is not None:
                reached[path] = base
