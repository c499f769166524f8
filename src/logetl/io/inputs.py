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
    for offset, length, final, _ in pieces(fd, path, chunk, start, bound):
        yield offset, length, final


def pieces(fd: int, path: str, chunk: int = CHUNK, start: int = 0, bound: int | None = None,
           limit: int | None = None):
    """``regions`` as ``(offset, length, final, long)``; with a ``limit``, a line longer than it whose end is
    not within ``limit`` bytes of a piece's nominal end is a piece of its own, ``long`` true, its
    ``length`` without its ``\\n``: found by reading on in windows, never held whole. (Shorter long lines
    stay in their piece, at most ``chunk + limit`` bytes: ``split_long`` finds them.)"""
    size = os.fstat(fd).st_size
    end = size if bound is None else min(bound, size)
    if bound is not None:   # bounded: complete lines only, even when the file turned out shorter
        end = _last_newline(fd, start, end, path) + 1
    pos = start
    while pos < end:
        if pos + chunk >= end:
            yield pos, end - pos, True, False
            return
        reach = pos + chunk - 1
        horizon = end if limit is None else min(end, reach + limit + 1)
        nl = _next_newline(fd, reach, horizon, path)
        if nl >= 0 or horizon >= end:
            stop = end if nl < 0 else nl + 1
            yield pos, stop - pos, stop >= end, False
            pos = stop
            continue
        # no line end within ``limit`` bytes of ``reach``: the line that holds it is too long
        first = _last_newline(fd, pos, reach, path) + 1
        if first > pos:
            yield pos, first - pos, False, False
        nl = _next_newline(fd, horizon, end, path, 1 << 20)
        stop = end if nl < 0 else nl
        yield first, stop - first, nl < 0 or nl + 1 >= end, True
        pos = end if nl < 0 else nl + 1


#: the bytes of a too-long line that its sample shows
HEAD = 300


class LongLine:
    """A line longer than the limit (malformed, ``too_long``), kept aside rather than parsed: ``size``
    bytes without its ``\\n``, ``head`` its first bytes (for its sample); ``copy_to(out)`` writes it whole,
    a piece at a time. Its bytes are ``data`` (a line found inside a piece), or ``size`` bytes of the open
    file ``fd`` from ``offset`` (a range of a plain file, or the temporary file a stream's line was spooled
    to), or nowhere (a stream's line that nothing keeps: ``keep`` false). ``n_lines`` and ``n_records``
    say what it counts as among parsed chunks: one line, no record."""

    n_lines = 1
    n_records = 0

    def __init__(self, size: int, head: bytes, data=None, fd: int | None = None, offset: int = 0,
                 path: str = "", spool=None):
        self.size, self.head, self.data, self.fd, self.offset, self.path = size, head, data, fd, offset, path
        self.spool = spool

    @classmethod
    def of_file(cls, fd: int, offset: int, size: int, path: str) -> "LongLine":
        """The range of a plain file, read again when it is copied (a descriptor of its own: the scan
        closes its one when it has read the file)."""
        return cls(size, _pread(fd, min(HEAD, size), offset, path), fd=os.dup(fd), offset=offset, path=path)

    def copy_to(self, out, piece: int = 1 << 20) -> None:
        if self.data is not None:
            out.write(self.data)
            return
        if self.fd is None:
            raise ValueError("a too-long line that was not kept cannot be copied")
        done = 0
        while done < self.size:
            data = _pread(self.fd, min(piece, self.size - done), self.offset + done, self.path)
            if not data:
                raise InputReadError(f"cannot read input {self.path!r}: it became shorter while it was read")
            out.write(data)
            done += len(data)

    def __del__(self):
        self.close()

    def close(self) -> None:
        if self.spool is not None:
            self.spool.close()
        elif self.fd is not None:
            os.close(self.fd)
        self.fd = self.spool = self.data = None


def long_lines(data, limit: int, end: int | None = None) -> list[tuple[int, int]]:
    """The lines of ``data[:end]`` (bytes or a bytearray) longer than ``limit`` bytes without their ``\\n``,
    as ``(start, stop)`` (``stop`` at the ``\\n`` or the end). Only every ``limit // 2``-th window is looked
    into (a line that long leaves one of them without a ``\\n``): a few searches for a piece of short
    lines, so that the check costs nothing beside the parse."""
    end = len(data) if end is None else end
    step = max(limit // 2, 1)
    found, pos = [], 0
    while pos < end:
        if data.find(b"\n", pos, min(pos + step, end)) >= 0:
            pos += step
            continue
        first = data.rfind(b"\n", 0, pos) + 1
        stop = data.find(b"\n", pos, end)
        stop = end if stop < 0 else stop
        if stop - first > limit:
            found.append((first, stop))
        pos = stop + 1
    return found


def split_long(data, final: bool, limit: int) -> list:
    """A piece of whole lines as the pieces to parse (memoryviews; the last keeps ``final``) around its
    lines longer than ``limit`` (each a ``LongLine``); ``[data]`` when it has none."""
    # (``read_chunks`` yields views from the start of their buffers, searched as the buffers themselves)
    base = data.obj if isinstance(data, memoryview) else data
    end = len(data)
    spans = long_lines(base, limit, end)
    if not spans:
        return [data]
    view, out, pos = memoryview(base)[:end], [], 0
    for first, stop in spans:
        if first > pos:
            out.append(view[pos:first])
        out.append(LongLine(stop - first, bytes(view[first:first + HEAD]), data=view[first:stop]))
        pos = stop + 1
    if pos < end:
        out.append(view[pos:end])
    return out


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


def _fill(f, view, path: str) -> int:
    """Reads into ``view`` until it is full or the input ends (a pipe gives 64 KiB a read: a chunk is read
    whole before it is searched for its last line end); returns how many bytes were read."""
    done = 0
    try:
        while done < len(view):
            got = f.readinto(view[done:])
            if not got:
                break
            done += got
    except (OSError, EOFError, zlib.error) as exc:
        raise InputReadError(f"cannot read input {path!r}: {reason(exc)}") from None
    return done


def _spool(f, held, chunk: int, path: str, keep: bool, left: int | None):
    """The rest of a too-long line whose first bytes are ``held``, read on in pieces of ``chunk`` bytes (and
    written to a temporary file when ``keep``): ``(LongLine or None, what followed its \\n, bytes read,
    whether the input ended)``. None when a bounded read (``left`` bytes left) ends inside the line."""
    import tempfile

    spool = tempfile.TemporaryFile(prefix="logetl-line-") if keep else None
    size, head, read = len(held), bytes(held[:HEAD]), 0
    if spool is not None:
        spool.write(held)
    rest, ended = b"", False
    while True:
        want = chunk if left is None else min(chunk, left - read)
        buf = bytearray(want)
        n = _fill(f, memoryview(buf), path) if want else 0
        read += n
        i = buf.find(b"\n", 0, n)
        piece = memoryview(buf)[: n if i < 0 else i]
        if spool is not None:
            spool.write(piece)
        size += len(piece)
        if i >= 0:
            rest = bytes(buf[i + 1:n])
            break
        if n < want or not want:
            ended = True
            if left is not None:    # bounded: complete lines only
                if spool is not None:
                    spool.close()
                return None, b"", read, True
            break
    if spool is not None:
        spool.flush()
    line = LongLine(size, head, fd=spool.fileno() if spool is not None else None, path=path, spool=spool)
    return line, rest, read, ended


def read_chunks(files: list[str], chunk: int = CHUNK, on_bytes=None, ranges: dict | None = None,
                reached: dict | None = None, identities: dict | None = None, limit: int | None = None,
                keep: bool = True) -> Iterator[tuple[memoryview, bool]]:
    """Yields ``(data, final)``: data (a buffer) holds whole lines; ``final`` marks the last piece of a file,
    which may end without ``\\n``. ``on_bytes(n)`` is told how many (compressed) bytes were consumed.

    ``ranges`` (incremental runs): path -> ``(start, end)``, the (uncompressed) bytes of the file to read;
    ``end`` None reads to the end of the file (its unterminated last line counts), else ``end`` follows a
    ``\\n`` and nothing past it is read (a file that turns out shorter yields only its complete lines).
    ``reached[path]`` is then set to the offset after the last byte yielded. ``identities``: path -> the
    file planned to be read there (``open_planned``).

    ``limit``: a partial line that grows past it is a ``LongLine`` yielded in its place (as data), read on
    in pieces and spooled to a temporary file (``keep``; else only counted), never held whole.

    Each chunk is read straight into a buffer of its own (the consumer may still hold earlier ones),
    after the partial line carried over from the previous read: no copy of the chunk is made. A partial
    line longer than a chunk is read on into a buffer as big again, so that a line of L bytes is copied
    about log2(L / chunk) times, not once per chunk (which made reading it quadratic)."""
    for path in files:
        start, bound = ranges.get(path, (0, None)) if ranges else (0, None)
        try:
            f = open_planned(path, (identities or {}).get(path))
        except OSError as exc:
            raise InputReadError(f"cannot open input {path!r}: {reason(exc)}") from None
        with f:
            base = yield from _chunks_of(f, path, start, bound, chunk, on_bytes, limit, keep)
        if reached is not None:
            reached[path] = base


def _chunks_of(f, path: str, start: int, bound: int | None, chunk: int, on_bytes, limit: int | None, keep: bool):
    """``read_chunks`` of one open file; returns the offset after the last byte yielded."""
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

    def consumed(n):
        nonlocal last_pos
        if on_bytes is not None:
            pos = raw.tell() if raw is not None and hasattr(raw, "tell") else last_pos + n
            on_bytes(pos - last_pos)
            last_pos = pos

    while True:
        room = max(chunk, len(carry))
        if limit is not None:   # no more than it takes to pass the limit: a too-long line's buffers stay small
            room = min(room, max(chunk, limit + 1 - len(carry)))
        want = room if left is None else min(room, left)
        buf = bytearray(len(carry) + want)
        buf[: len(carry)] = carry
        view = memoryview(buf)
        n = _fill(f, view[len(carry):], path) if want else 0
        consumed(n)
        end = len(carry) + n
        if left is not None:
            left -= n
        cut = buf.rfind(b"\n", 0, end) + 1
        if limit is not None and end - cut > limit:
            # the partial line is too long: what comes before it, then the line, read on and kept aside
            if cut:
                yield view[:cut], False
                base += cut
            if left == 0:       # bounded: complete lines only
                return base
            line, carry, read, ended = _spool(f, view[cut:end], chunk, path, keep, left)
            consumed(read)
            if left is not None:
                left -= read
            if line is None:
                return base
            yield line, ended
            base += line.size + (0 if ended else 1)
            if ended:
                return base
            continue
        if n == 0 or left == 0:
            if left is not None:
                # bounded: complete lines only, even when the file ended early (truncated meanwhile)
                end = cut
            if end:
                yield view[:end], True
            return base + end
        carry = view[cut:end]   # (a view: copied once, into the next buffer)
        if cut:
            yield view[:cut], False
            base += cut
