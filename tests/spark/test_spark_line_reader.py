"""On Spark, logetl's line reader (``java/logetl/spark/Lines.java``) reads the input's lines in memory bounded by
``LOGETL_MAX_LINE``: a longer line is counted, sampled and trapped as on the local engine, byte for byte,
wherever it is (first, in the middle, last with or without its ``\\n``, across the splits of a file), and
never held whole. The limit is lowered here so that the lines are small; one slow test reads a line of
200 MB in a driver of 512 MB."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

import logetl.api as L
from conftest import parts
from logetl import contract
from logetl.io import inputs as local_inputs
from logetl.job import run_flow

LIMIT = 1024


def _line(i: int, request: int = 12) -> bytes:
    """A valid line whose request is ``request`` bytes of ``x`` after ``GET /``."""
    return (f'10.0.{i // 250}.{i % 250} - - [17/May/2015:10:00:{i % 60:02d} +0000] "GET /{"x" * request} '
            f'HTTP/1.1" 200 {i} "-" "a"').encode()


def _exactly(n: int, i: int) -> bytes:
    """A valid line of exactly ``n`` bytes (without its ``\\n``)."""
    return _line(i, n - len(_line(i, 0)))


def _lines() -> list[tuple[bytes, bool]]:
    """The log's lines, each with whether it is too long: long lines first, in the middle (some longer than
    a split, some around a split's end), at the limit and one byte over, and last."""
    lines = [(_line(0, 5000), True), (b"\xff" + "é".encode() * 700 + b"\r", True)]
    for i in range(1, 120):
        if i % 17 == 0:
            lines.append((_exactly(LIMIT, i), False))
        elif i % 17 == 1:
            lines.append((_exactly(LIMIT + 1, i), True))
        elif i % 23 == 0:
            lines.append((b"q" * (9000 + i), True))              # longer than two splits of 4 KB
        elif i % 29 == 0:
            lines.append((b"junk, not a log line %d" % i, False))
        else:
            lines.append((_line(i), False))
    lines.append((b"\t" * (LIMIT + 1), True))                   # too long wins over tab_or_cr_in_field
    lines.append((_line(500, 3000), True))                      # the last line
    return lines


LINES = _lines()


def _log(last_newline: bool) -> bytes:
    return b"\n".join(text for text, _ in LINES) + (b"\n" if last_newline else b"")


TRAP = b"".join(text + b"\n" for text, long in LINES if long or text.startswith(b"junk"))


def _records() -> bytes:
    """The combined format's fields of the lines kept, worked out here."""
    out = []
    for text, long in LINES:
        if long or text.startswith(b"junk"):
            continue
        host, _, _, rest = text.split(b" ", 3)
        when, rest = rest[1:].split(b"] ", 1)
        request, rest = rest[1:].split(b'" ', 1)
        status, size, rest = rest.split(b" ", 2)
        out.append(b"\t".join([host, when, request, status, size, b"-", b"a"]) + b"\n")
    return b"".join(out)


@pytest.mark.parametrize("parse", ["jvm", "python", "builtin"])
@pytest.mark.parametrize("last_newline", [True, False], ids=["final-newline", "no-final-newline"])
def test_lines_too_long_across_splits_give_the_local_engines_bytes(spark_session, tmp_path, monkeypatch, parse,
                                                                    last_newline):
    """Splits of 4 KB: the 145 KB log is read in 37 partitions, and many a long line spans several."""
    from logetl.engines.spark.session import _session_conf

    monkeypatch.setenv("LOGETL_MAX_LINE", str(LIMIT))
    path = tmp_path / "in.log"
    path.write_bytes(_log(last_newline))
    results = {}
    for engine in ("local", "spark"):
        options = {"engine_options": {"conf": {"logetl.parse": parse}}} if engine == "spark" else {}
        with _session_conf(spark_session, {"spark.sql.files.maxPartitionBytes": "4k",
                                           "spark.sql.files.openCostInBytes": "1k"}):
            results[engine] = run_flow(L.Flow("longlines", [L.read().write("out")]), str(path),
                                       {"out": str(tmp_path / f"{engine}-out")}, engine=engine,
                                       trap=str(tmp_path / f"{engine}-trap"), monitor=False, quiet=True, **options)
    long = sum(1 for _, is_long in LINES if is_long)
    for engine, run in results.items():
        assert parts(tmp_path / f"{engine}-out") == _records(), engine
        assert parts(tmp_path / f"{engine}-trap") == TRAP, engine
        assert (run.lines_read, dict(run.malformed)) == (len(LINES), {"too_long": long, "no_match": 4}), engine
    local, spark = results["local"], results["spark"]
    assert [s.counters for s in spark.steps] == [s.counters for s in local.steps]
    assert [(r, t) for _, r, t in spark.malformed_samples] == [(r, t) for _, r, t in local.malformed_samples]
    assert spark.malformed_samples[:2] == [
        (str(path), contract.TOO_LONG, f"{len(text):,} bytes: {contract.display(text[:local_inputs.HEAD])}")
        for text, _ in LINES[:2]]


def test_the_reader_holds_no_line_over_the_limit(spark_session, tmp_path, monkeypatch):
    """The rows the reader gives: each line within the limit as it is; a longer one as a placeholder of
    its place, its size and its first bytes, never more; in input order over the partitions."""
    from logetl.engines.spark import jvm as spark_jvm
    from logetl.engines.spark.parse import MARKER, placeholder

    data = _log(False)
    path = tmp_path / "in.log"
    path.write_bytes(data)
    uri = "file://" + str(path)
    df = spark_jvm.lines(spark_session, [uri], [len(data)], 4096, 1024, LIMIT, local_inputs.HEAD,
                         MARKER.encode())
    assert df.rdd.getNumPartitions() == -(-len(data) // 4096)
    rows = [bytes(r.value) for r in df.collect()]
    assert len(rows) == len(LINES)
    offset = 0
    for row, (text, long) in zip(rows, LINES):
        if long:
            assert placeholder(row) == (len(text), text[:local_inputs.HEAD])
            assert row.startswith(MARKER.encode() + b"%d %d %d:%s" % (offset, len(text), len(uri), uri.encode()))
        else:
            assert row == text
        offset += len(text) + 1


@pytest.mark.slow
def test_a_line_of_200_mb_is_trapped_by_a_driver_of_512_mb(spark_session, tmp_path):
    """``local[2]`` in a driver JVM of 512 MB (about the least Spark starts with), the default limit (64M): the
    200 MB line (written a piece at a time) is counted, sampled and trapped whole, its bytes never held at
    once. (Spark's text source, which holds a line whole, runs out of heap on the same run.)"""
    path, piece = tmp_path / "big.log", b"y" * (1 << 20)
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        for text in (_line(1), _line(2)):
            f.write(text + b"\n")
        f.write(b"GET /")
        digest.update(b"GET /")
        for _ in range(200):
            f.write(piece)
            digest.update(piece)
        f.write(b"\n" + _line(3) + b"\n")
    size = 5 + 200 * len(piece)
    env = {k: v for k, v in os.environ.items() if k != "LOGETL_MAX_LINE"}
    done = subprocess.run(
        [sys.executable, "-m", "logetl.cli", "filter", "--input", str(path), "--output", str(tmp_path / "out"), "--trap",
         str(tmp_path / "trap"), "--hdfs", "--master", "local[2]", "--conf", "spark.driver.memory=512m"],
        capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    trap = [tmp_path / "trap" / n for n in sorted(os.listdir(tmp_path / "trap")) if n.startswith("part-")]
    got = hashlib.sha256()
    total = 0
    for p in trap:
        with open(p, "rb") as f:
            while chunk := f.read(1 << 20):
                got.update(chunk)
                total += len(chunk)
    digest.update(b"\n")
    assert (total, got.hexdigest()) == (size + 1, digest.hexdigest())
    assert f"too_long: {size:,} bytes: GET /yyy" in done.stderr + done.stdout
