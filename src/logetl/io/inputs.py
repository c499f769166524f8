"""Input taps on the local file system: resolving paths and reading them as whole-line chunks.

An input is a file, a directory (its visible files in name order; names starting with ``_`` or ``.`` are
ignored, like Hadoop's) or a glob (matches in name order). ``.gz`` and ``.bz2`` are decompressed by
extension. Files are read in order as one stream of lines: a file's last line ends at the end of the file
even without ``\\n``.
"""
from __future__ import annotations

import bz2
import glob
import gzip
import os
from collections.abc import Iterator

CHUNK = 4 << 20   # small chunks keep peak memory low and give the parse threads even work


class InputError(ValueError):
    """An input path that cannot be read; the message names it."""


def _visible(name: str) -> bool:
    return not (name.startswith("_") or name.startswith("."))


def resolve(path: str) -> list[str]:
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if _visible(n))
        files = [os.path.join(path, n) for n in names if os.path.isfile(os.path.join(path, n))]
        if not files:
            raise InputError(f"input directory {path!r} holds no visible files")
    elif os.path.isfile(path):
        files = [path]
    elif glob.has_magic(path):
        files = sorted(p for p in glob.glob(path) if os.path.isfile(p) and _visible(os.path.basename(p)))
        if not files:
            raise InputError(f"input glob {path!r} matches no files")
    elif os.path.exists(path):
        raise InputError(f"input {path!r} is not a regular file or directory")
    else:
        raise InputError(f"input {path!r} does not exist")
    for f in files:
        if not os.access(f, os.R_OK):
            raise InputError(f"input file {f!r} is not readable")
    return files


def open_input(path: str):
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    if path.endswith(".bz2"):
        return bz2.open(path, "rb")
    return open(path, "rb", buffering=0)


def total_size(files: list[str]) -> int:
    return sum(os.path.getsize(f) for f in files)


def read_chunks(files: list[str], chunk: int = CHUNK, on_bytes=None) -> Iterator[tuple[bytes, bool]]:
    """Yields ``(data, final)``: data holds whole lines; ``final`` marks the last piece of a file, which may
    end without ``\\n``. ``on_bytes(n)`` is told how many (compressed) bytes of input were consumed."""
    for path in files:
        try:
            f = open_input(path)
        except OSError as exc:
            raise InputError(f"cannot open input {path!r}: {exc.strerror or exc}") from None
        with f:
            carry = b""
            raw = getattr(f, "fileobj", None) or getattr(f, "_fp", None)
            last_pos = 0
            while True:
                try:
                    data = f.read(chunk)
                except (OSError, EOFError) as exc:
                    raise InputError(f"cannot read input {path!r}: {exc}") from None
                if on_bytes is not None:
                    pos = raw.tell() if raw is not None and hasattr(raw, "tell") else last_pos + len(data)
                    on_bytes(pos - last_pos)
                    last_pos = pos
                if not data:
                    if carry:
                        yield carry, True
                    break
                if carry:
                    data = carry + data
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    carry = data
                    continue
                if cut < len(data):
                    carry = data[cut:]
                    yield data[:cut], False
                else:
                    carry = b""
                    yield data, False
