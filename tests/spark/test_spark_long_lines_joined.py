"""On Spark, a line longer than ``LOGETL_MAX_LINE`` is malformed (``too_long``) on every parse path, also in a
step whose sinks the executors write themselves, joined (``SparkEngine._joined_sinks``): the trap the
executors join gets the line's own bytes, without the mark the driver puts before it (``_marked``). Counts,
samples, outputs and trap are the local engine's, and worked out by hand here."""
from __future__ import annotations

import gzip

import pytest

import logetl.api as L
from conftest import parts
from logetl import contract
from logetl.io import inputs as local_inputs
from logetl.job import run_flow

LIMIT = 1024


def _line(i: int, request: int = 12) -> bytes:
    """A valid line whose request is ``request`` bytes of ``x`` after ``GET /``."""
    return (f'10.0.0.{i} - - [17/May/2015:10:00:{i:02d} +0000] "GET /{"x" * request} HTTP/1.1" '
            f'200 {i} "-" "a"').encode()


def _exactly(n: int, i: int) -> bytes:
    """A valid line of exactly ``n`` bytes (without its ``\\n``)."""
    return _line(i, n - len(_line(i, 0)))


#: the lines of the log, each with whether it is too long (a line of LIMIT bytes is not; LIMIT + 1 is)
LINES = [
    (_line(1), False),
    (_exactly(LIMIT, 2), False),
    (_line(3, 10_000), True),                            # a valid line of 10 KB: too_long wins
    (b"junk, not a log line", False),                    # no_match, trapped between the long ones, in order
    (b"\xff\xfe" + "é".encode() * 6000 + b"\r", True),   # invalid UTF-8, non-ASCII and a CR: too_long too
    (_exactly(LIMIT + 1, 6), True),
    (_line(7), False),
    (b"z" * 2000, True),                                 # the last line, without its \n
]

LOG = b"\n".join(text for text, _ in LINES)
#: the trap: the malformed lines, whole and in input order
TRAP = b"".join(text + b"\n" for text, long in LINES if long or text.startswith(b"junk"))
#: what the sinks hold: the records (the combined format's fields) of the lines neither too long nor junk
RECORDS = b"".join(b"\t".join([b"10.0.0.%d" % i, b"17/May/2015:10:00:%02d +0000" % i,
                               text.split(b'"')[1], b"200", b"%d" % i, b"-", b"a"]) + b"\n"
                   for i, (text, long) in enumerate(LINES, 1) if not long and not text.startswith(b"junk"))


def branch() -> L.Flow:
    """Two sinks of the records as parsed: their lines made and joined by the executors (the native paths)."""
    parsed = L.read()
    return L.Flow("longlines", [parsed.write("a", name="sink_a"), parsed.branch("copy").write("b", name="sink_b")])


def filtered() -> L.Flow:
    """A filter before one sink: the one-pass step writes tagged parsed rows, not joined ones."""
    parsed = L.read()
    return L.Flow("longlines", [parsed.filter(L.col("response") == "200", name="ok").write("a", name="sink_a"),
                                parsed.branch("copy").write("b", name="sink_b")])


@pytest.mark.parametrize("parse, kind, flow, joins", [
    ("jvm", "plain", branch, True), ("jvm", "gz", branch, True),
    ("python", "plain", branch, True), ("python", "gz", branch, True),
    ("builtin", "gz", branch, False), ("jvm", "gz", filtered, False),
], ids=["jvm-plain", "jvm-gz", "python-plain", "python-gz", "builtin-gz", "jvm-gz-filtered"])
def test_a_too_long_line_is_counted_sampled_and_trapped_whole_on_every_spark_path(
        spark_session, tmp_path, monkeypatch, parse, kind, flow, joins):
    from logetl.engines.spark import engine as spark_engine

    monkeypatch.setenv("LOGETL_MAX_LINE", str(LIMIT))
    joined = []
    real = spark_engine.SparkEngine._joined_rows
    monkeypatch.setattr(spark_engine.SparkEngine, "_joined_rows",
                        lambda self, ctx, step, sinks: joined.append(sinks) or real(self, ctx, step, sinks))
    path = tmp_path / ("in.log.gz" if kind == "gz" else "in.log")
    path.write_bytes(gzip.compress(LOG) if kind == "gz" else LOG)
    results = {}
    for engine in ("local", "spark"):
        outs = {tap: str(tmp_path / f"{engine}-{tap}") for tap in ("a", "b")}
        options = {"engine_options": {"conf": {"logetl.parse": parse}}} if engine == "spark" else {}
        results[engine] = run_flow(flow(), str(path), outs, engine=engine, trap=str(tmp_path / f"{engine}-trap"),
                                   monitor=False, quiet=True, **options)
    assert bool(joined) == joins
    for engine, run in results.items():
        assert parts(tmp_path / f"{engine}-a") == parts(tmp_path / f"{engine}-b") == RECORDS, engine
        assert parts(tmp_path / f"{engine}-trap") == TRAP, engine
        assert (run.lines_read, dict(run.malformed)) == (len(LINES), {"too_long": 4, "no_match": 1}), engine
    local, spark = results["local"], results["spark"]
    assert [s.counters for s in spark.steps] == [s.counters for s in local.steps]
    expected = [(contract.TOO_LONG, f"{len(text):,} bytes: {contract.display(text[:local_inputs.HEAD])}")
                for text, long in LINES if long]
    assert [(r, t) for _, r, t in spark.malformed_samples if r == contract.TOO_LONG] == expected
    assert [(r, t) for _, r, t in spark.malformed_samples] == [(r, t) for _, r, t in local.malformed_samples]
    assert {w for w, _, _ in spark.malformed_samples} == {str(path)}
