"""Input taps on the local file system: resolving paths and reading them as whole-line chunks.

An input is a file, a directory (its visible files in name order; names starting with ``_`` or ``.`` are
ignored, like Hadoop's) or a glob (matches in name order). ``.gz`` and ``.bz2`` are decompressed by
extension. Files are read in order as one stream of lines: a file's last line ends at the end of the file
even without ``\\n``.
"""
from __future__ import annotations

import bz2
import gzip
import zlib
from collections.abc import Iterator

from logetl.errors import UsageError
from logetl.io.fs import LOCAL

CHUNK = 4 << 20   # small chunks keep peak memory low and give the parse threads even work


class InputError(UsageError):
    """An input path that cannot be read; the message names it."""


class InputReadError(ValueError):
    """An input that failed while it was being read (a corrupt compressed file, an I/O error): the run
    fails (exit 1); the message names the file."""


def _visible(name: str) -> bool:
    return not (name.startswith("_") or name.startswith("."))


#: the input path that means standard input (local engine only)
STDIN = "-"


def resolve(path: str, fs) -> list[str]:
    if path == STDIN:
        if fs is not LOCAL:
            raise InputError("--input - (standard input) works on the local engine only: on Spark give a path")
        return [STDIN]
    if fs.isdir(path):
        files = [fs.join(path, n) for n in fs.listdir(path) if _visible(n) and fs.isfile(fs.join(path, n))]
        if not files:
            raise InputError(f"input directory {path!r} holds no visible files")
    elif fs.isfile(path):
        files = [path]
    elif fs.has_magic(path):
        files = [p for p in fs.glob(path) if fs.isfile(p) and _visible(p.rstrip("/").rsplit("/", 1)[-1])]
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


def total_size(files: list[str], fs) -> int:
    """Bytes of the inputs; 0 (unknown) when one is standard input."""
    if STDIN in files:
        return 0
    return sum(fs.stat(f)[0] for f in files)


def read_chunks(files: list[str], chunk: int = CHUNK, on_bytes=None) -> Iterator[tuple[memoryview, bool]]:
    """Yields ``(data, final)``: data (a buffer) holds whole lines; ``final`` marks the last piece of a file,
    which may end without ``\\n``. ``on_bytes(n)`` is told how many (compressed) bytes were consumed.

    Each chunk is read straight into a buffer of its own (the consumer may still hold earlier ones),
    after the partial line carried over from the previous read: no copy of the chunk is made."""
    for path in files:
        try:
            f = open_input(path)
        except OSError as exc:
            raise InputReadError(f"cannot open input {path!r}: {exc.strerror or exc}") from None
        with f:
            raw = getattr(f, "fileobj", None) or getattr(f, "_fp", None)
            carry = b""
            last_pos = 0
            while True:
                buf = bytearray(len(carry) + chunk)
                buf[: len(carry)] = carry
                view = memoryview(buf)
                try:
                    n = f.readinto(view[len(carry):])
                except (OSError, EOFError, zlib.error) as exc:
                    raise InputReadError(f"cannot read input {path!r}: {exc.strerror or exc}") from None
                if on_bytes is not None:
                    pos = raw.tell() if raw is not None and hasattr(raw, "tell") else last_pos + n
                    on_bytes(pos - last_pos)
                    last_pos = pos
                end = len(carry) + n
                if n == 0:
                    if carry:
                        yield view[:end], True
                    break
                cut = buf.rfind(b"\n", 0, end) + 1
                carry = bytes(view[cut:end])
                if cut:
                    yield view[:cut], False
