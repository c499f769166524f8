"""A line longer than ``LOGETL_MAX_LINE`` is malformed (``too_long``): counted, sampled and trapped whole, on
every kind of input and on both engines, and read in bounded memory; reading a long line from a stream
stays linear in its length. The limit is lowered here so that the lines are small."""
from __future__ import annotations

import bz2
import gzip
import os
import threading

import pytest

from conftest import parts

import logetl.api as L
from logetl import contract
from logetl.engines import local as local_engine
from logetl.io import inputs
from logetl.job import run_flow

LIMIT = 1000


def _line(i: int, request: int = 12) -> bytes:
    """A valid line whose request is ``request`` bytes of ``x`` after ``GET /``."""
    return (f'10.0.0.{i % 250} - - [17/May/2015:10:00:{i % 60:02d} +0000] "GET /{"x" * request} HTTP/1.1" '
            f'200 {i} "-" "a"').encode()


def _exactly(n: int, i: int) -> bytes:
    """A valid line of exactly ``n`` bytes (without its ``\\n``)."""
    base = _line(i, 0)
    return _line(i, n - len(base))


#: the lines of the test log, each with whether it is too long (a line of LIMIT bytes is not; LIMIT + 1 is)
LINES = [
    (_line(1), False),
    (_exactly(LIMIT, 2), False),
    (_exactly(LIMIT + 1, 3), True),
    (b"junk, not a log line", False),                   # no_match: trapped between the long ones, in order
    (_line(5, 3000), True),                             # a valid line, too long: too_long wins
    (_line(6), False),
    (b"\xff\xfe" + b"y" * 300_000 + b"\r", True),       # longer than a chunk and the limit: read on in pieces
    (_line(8), False),
    (b"z" * 5000, True),                                # the last line, without its \n
]


def _log(lines=LINES, last_newline: bool = False) -> bytes:
    data = b"\n".join(text for text, _ in lines)
    return data + (b"\n" if last_newline else b"")


def _expected_samples(where: str) -> list[tuple]:
    return [(f"{where}:{n}", contract.TOO_LONG, f"{len(text):,} bytes: {contract.display(text[:inputs.HEAD])}")
            for n, (text, long) in enumerate(LINES, 1) if long]


def _trap_bytes(lines=LINES) -> bytes:
    return b"".join(text + b"\n" for text, long in lines if long or text.startswith(b"junk"))


def _run(engine, path, tmp_path, name="run"):
    logs = L.read()
    flow = L.Flow("longlines", [logs.write("out")])
    out, trap = tmp_path / f"{name}-out", tmp_path / f"{name}-trap"
    run = run_flow(flow, str(path), {"out": str(out)}, engine=engine, trap=str(trap), monitor=False, quiet=True)
    return run, parts(out), parts(trap)


@pytest.fixture
def small_limit(monkeypatch):
    monkeypatch.setenv("LOGETL_MAX_LINE", str(LIMIT))
    # small chunks: the 300 kB line is longer than a chunk and the limit together, and read on in pieces
    monkeypatch.setattr(local_engine.LocalEngine, "chunk_bytes", 4096)


def _clean_output(tmp_path) -> bytes:
    """The output of the lines that are not too long, read by the local engine (no limit reached)."""
    clean = tmp_path / "clean.log"
    clean.write_bytes(b"".join(text + b"\n" for text, long in LINES if not long))
    return _run("local", clean, tmp_path, "clean")[1]


def _write_input(kind: str, tmp_path, data: bytes) -> str:
    if kind == "plain":
        p = tmp_path / "in.log"
        p.write_bytes(data)
    elif kind == "gz":
        p = tmp_path / "in.log.gz"
        p.write_bytes(gzip.compress(data))
    elif kind == "bz2":
        p = tmp_path / "in.log.bz2"
        p.write_bytes(bz2.compress(data))
    else:       # a directory of two files (read in name order), the long lines in both
        p = tmp_path / "logs"
        p.mkdir()
        cut = data.index(b"junk")
        (p / "a.log").write_bytes(data[:cut])
        (p / "b.log").write_bytes(data[cut:])
    return str(p)


@pytest.mark.parametrize("kind", ["plain", "gz", "bz2", "directory"])
def test_a_line_over_the_limit_is_counted_sampled_and_trapped_whole(engine, small_limit, tmp_path, kind):
    path = _write_input(kind, tmp_path, _log())
    run, out, trap = _run(engine, path, tmp_path)
    assert out == _clean_output(tmp_path)
    assert trap == _trap_bytes()
    assert run.lines_read == len(LINES)
    assert dict(run.malformed) == {"too_long": 4, "no_match": 1}
    long_samples = [s for s in run.malformed_samples if s[1] == contract.TOO_LONG]
    if engine == "local" and kind != "directory":
        assert long_samples == _expected_samples(path)
    elif engine == "local":
        a, b = os.path.join(path, "a.log"), os.path.join(path, "b.log")
        assert [w for w, _, _ in long_samples] == [f"{a}:3", f"{b}:2", f"{b}:4", f"{b}:6"]
    assert [s[1:] for s in long_samples] == [s[1:] for s in _expected_samples(path)]


def test_a_line_over_the_limit_from_standard_input(small_limit, tmp_path):
    """Standard input (a pipe, read in whatever pieces it gives) as a file."""
    data = _log()
    r, w = os.pipe()

    def feed():
        with os.fdopen(w, "wb") as f:
            f.write(data)

    writer = threading.Thread(target=feed)
    writer.start()
    saved = os.dup(0)
    try:
        os.dup2(r, 0)
        os.close(r)
        run, out, trap = _run("local", "-", tmp_path)
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        writer.join()
    assert out == _clean_output(tmp_path)
    assert trap == _trap_bytes()
    assert (run.lines_read, dict(run.malformed)) == (len(LINES), {"too_long": 4, "no_match": 1})
    assert [s for s in run.malformed_samples if s[1] == contract.TOO_LONG] == _expected_samples("-")


def test_without_a_trap_a_too_long_line_is_counted_and_not_kept(engine, small_limit, tmp_path):
    """Two sinks of the records as parsed: on Spark, the executors write them (and count the lines)."""
    p = tmp_path / "in.log.gz"
    p.write_bytes(gzip.compress(_log()))
    logs = L.read()
    run = run_flow(L.Flow("longlines", [logs.write("a"), logs.write("b")]), str(p),
                   {"a": str(tmp_path / "a"), "b": str(tmp_path / "b")}, engine=engine, monitor=False, quiet=True)
    assert parts(tmp_path / "a") == parts(tmp_path / "b") == _clean_output(tmp_path)
    assert (run.lines_read, dict(run.malformed)) == (len(LINES), {"too_long": 4, "no_match": 1})
    long_samples = [s[1:] for s in run.malformed_samples if s[1] == contract.TOO_LONG]
    assert long_samples == [s[1:] for s in _expected_samples(str(p))]


# --- the readers: bounded memory, linear time ----------------------------------------------------------------

class _Counting:
    """A file object that counts the reads asked of it and the most bytes one asked for."""

    def __init__(self, f):
        self.f, self.reads, self.most = f, 0, 0

    def readinto(self, view):
        self.reads += 1
        self.most = max(self.most, len(view))
        return self.f.readinto(view)

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def _counting_reader(monkeypatch):
    opened = []
    real = inputs.open_input

    def open_counting(path):
        opened.append(_Counting(real(path)))
        return opened[-1]

    monkeypatch.setattr(inputs, "open_input", open_counting)
    return opened


@pytest.mark.parametrize("suffix", [".gz", ".bz2"])
def test_a_long_line_from_a_stream_is_read_in_a_bounded_number_of_reads(tmp_path, monkeypatch, suffix):
    """Without a limit, a line of 2 MB read in chunks of 1 KiB takes about log2(2 MB / 1 KiB) reads, each
    into a buffer twice the last (a read per chunk, each copying the line so far, made it quadratic)."""
    line = b"q" * (2 << 20)
    p = tmp_path / f"in{suffix}"
    p.write_bytes((gzip if suffix == ".gz" else bz2).compress(b"a\n" + line + b"\nb\n"))
    opened = _counting_reader(monkeypatch)
    pieces = [bytes(d) for d, _ in inputs.read_chunks([str(p)], 1024)]
    assert b"".join(pieces) == b"a\n" + line + b"\nb\n"
    assert opened[0].reads <= 16, opened[0].reads


def test_a_too_long_line_from_a_stream_is_read_in_pieces_and_spooled(tmp_path, monkeypatch):
    line = b"\xff" + b"q" * (3 << 20)
    p = tmp_path / "in.gz"
    p.write_bytes(gzip.compress(b"a\n" + line + b"\nb\nc"))
    opened = _counting_reader(monkeypatch)
    got = list(inputs.read_chunks([str(p)], 1024, limit=5000))
    long = [d for d, _ in got if isinstance(d, inputs.LongLine)]
    assert [bytes(d) for d, _ in got if not isinstance(d, inputs.LongLine)] == [b"a\n", b"b\nc"]
    assert [(x.size, x.head) for x in long] == [(len(line), line[:inputs.HEAD])]
    # no buffer larger than the limit and two chunks: the line went to a temporary file, a chunk at a time
    assert opened[0].most <= 5000 + 2 * 1024
    copy = _Sink()
    long[0].copy_to(copy)
    assert copy.data == line
    long[0].close()


def test_a_too_long_line_of_a_plain_file_is_found_without_reading_it_whole(tmp_path, monkeypatch):
    line = b"q" * (5 << 20)
    p = tmp_path / "in.log"
    data = b"a\n" + line + b"\nb\n"
    p.write_bytes(data)
    most = []
    real = inputs._pread
    monkeypatch.setattr(inputs, "_pread", lambda fd, n, off, path: (most.append(n), real(fd, n, off, path))[1])
    fd = os.open(str(p), os.O_RDONLY)
    try:
        found = list(inputs.pieces(fd, str(p), 1024, limit=5000))
    finally:
        os.close(fd)
    assert found == [(0, 2, False, False), (2, len(line), False, True), (3 + len(line), 2, True, False)]
    assert max(most) <= 1 << 20


@pytest.mark.parametrize("limit", [1, 2, 3, 7, 50])
def test_long_lines_finds_exactly_the_lines_over_the_limit(limit):
    lines = [b"", b"a" * limit, b"b" * (limit + 1), b"c", b"d" * (3 * limit + 2), b"e" * (limit - 1 if limit else 0)]
    data = b"\n".join(lines)
    spans, pos = [], 0
    for text in lines:
        if len(text) > limit:
            spans.append((pos, pos + len(text)))
        pos += len(text) + 1
    assert inputs.long_lines(data, limit) == spans


class _Sink:
    def __init__(self):
        self.data = b""

    def write(self, b):
        self.data += bytes(b)


def test_the_limit_is_a_size_from_16_bytes_to_1536m():
    from logetl import settings
    from logetl.errors import EnvError

    assert [settings.MAX_LINE.parse(v) for v in ("64M", "1G", "4096", "300KiB", "1536M")] == [
        64 << 20, 1 << 30, 4096, 300 << 10, 1536 << 20]
    for raw, said in [("2G", "LOGETL_MAX_LINE='2G' must be at least 16 bytes and at most 1536M"),
                      ("8", "LOGETL_MAX_LINE='8' must be at least 16 bytes and at most 1536M"),
                      ("lots", "LOGETL_MAX_LINE='lots' is not a size (examples: 64M, 1G, 4096)")]:
        with pytest.raises(EnvError) as caught:
            settings.MAX_LINE.parse(raw)
        assert str(caught.value) == said
