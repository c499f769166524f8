"""Many small input files on Spark: consecutive small files are one scan (``SparkEngine._packed``), sorted
back to input order; larger files are scans of their own. Whatever the files' sizes, names and splits,
the outputs are the local engine's bytes, in input order, and each malformed-line sample names its file."""
from __future__ import annotations

import bz2
import gzip
import itertools
import os

import pytest

import logetl.api as L
from conftest import corpus, parts
from logetl.contract import FIELDS
from logetl.engines.spark.parse import _runs
from logetl.job import run_flow


def copy_and_filter() -> L.Flow:
    """Every record in input order (the order is the test), and a filtered projection of them."""
    parsed = L.read(fields=FIELDS)
    ok = parsed.filter(L.col("response") == "200", name="ok").select("ip", "request", name="fields")
    return L.Flow("packed", [parsed.branch("copy").write("copy", name="sink_copy"), ok.write("ok", name="sink_ok")])


@pytest.mark.parametrize("sizes, small, runs", [
    ([], 4, []),
    ([3], 4, [(0, 1)]),
    ([5], 4, [(0, 1)]),
    ([1, 2, 4], 4, [(0, 3)]),
    ([1, 9, 1], 4, [(0, 1), (1, 2), (2, 3)]),
    ([0, 1, 9, 9, 1, 1, 1, 9, 2], 4, [(0, 2), (2, 3), (3, 4), (4, 7), (7, 8), (8, 9)]),
])
def test_consecutive_small_files_are_one_read_and_larger_ones_reads_of_their_own(sizes, small, runs):
    assert _runs(sizes, small) == runs


def _inputs(directory) -> None:
    """40 small files (more than the 32 paths past which Spark lists with a job), with awkward names (a
    space, an escape, ``#``, a comma, a non-ASCII letter, parentheses), malformed lines in some, an empty one, a small gzip and a small bzip2 file, and two copies of
    the corpus (100 KB each) among them."""
    lines = corpus("corpus.log").split(b"\n")[:-1]
    n = len(lines)
    directory.mkdir()
    names = ["a 00.log", "a%20b 01.log", "a#c 02.log", "a,d 03.log", "aü 04.log", "a(5).log", "a5.log"]
    names += [f"b{i:02d}.log" for i in range(len(names), 40)]
    for i, name in enumerate(names):
        bad = b"not a line %d\n" % i if i in (1, 3, 11, 23, 37) else b""
        body = b"".join(lines[(i * 7 + k) % n] + b"\n" for k in range(4)) + bad
        if i == 14:
            body = b"\xff\xfe not utf-8\n" + body
        (directory / name).write_bytes(b"" if i == 9 else body)
    some = b"".join(x + b"\n" for x in lines[20:26])
    (directory / "b12.log").unlink()
    (directory / "b12.log.gz").write_bytes(gzip.compress(some))
    (directory / "b30.log").unlink()
    (directory / "b30.log.bz2").write_bytes(bz2.compress(b"".join(x + b"\n" for x in lines[26:32])))
    (directory / "b17.log").write_bytes(corpus("corpus.log"))
    (directory / "b25.log").write_bytes(b"".join(x + b"\n" for x in reversed(lines)))   # other lines at the splits


@pytest.mark.parametrize("parse", ["jvm", "python", "builtin"])
@pytest.mark.parametrize("split", [None, "16k"], ids=["default", "splits-of-16k"])
def test_packed_small_files_and_split_large_ones_give_the_local_engines_bytes(spark_session, tmp_path, monkeypatch,
                                                                             parse, split):
    """Default settings: every file is at most 4 MB (``openCostInBytes``), so all 40 are one scan. With
    ``maxPartitionBytes`` 16 KB, small means at most 16 KB: the two 100 KB files are scans of their own,
    each in 7 splits, between three scans of the small files around them. Every sink, the trap and the
    counters are the local engine's; the samples name their own files."""
    from pyspark.sql.readwriter import DataFrameReader

    from logetl.engines.spark.session import _session_conf

    _inputs(tmp_path / "in")
    scans = []
    real = DataFrameReader.text
    monkeypatch.setattr(DataFrameReader, "text", lambda self, paths, *a, **k: scans.append(paths) or real(self, paths, *a, **k))
    results = {}
    settings = {"spark.sql.files.maxPartitionBytes": split} if split else {}
    for engine in ("local", "spark"):
        outs = {tap: str(tmp_path / f"{engine}-{tap}") for tap in ("copy", "ok")}
        with _session_conf(spark_session, settings):
            results[engine] = run_flow(copy_and_filter(), str(tmp_path / "in"), outs, engine=engine,
                                       trap=str(tmp_path / f"{engine}-trap"),
                                       **({"engine_options": {"conf": {"logetl.parse": parse}}} if engine == "spark" else {}))
    if split:
        # the scans' sizes: runs of consecutive files of at most 16 KB, each larger file alone
        files = sorted(os.listdir(tmp_path / "in"))
        small = [os.path.getsize(tmp_path / "in" / f) <= 16 * 1024 for f in files]
        expected = [n for is_small, group in itertools.groupby(small) for n in
                    ([len(list(group))] if is_small else [1] * len(list(group)))]
        assert [len(s) if isinstance(s, list) else 1 for s in scans] == expected
        assert {"b17.log", "b25.log"} <= {f for f, is_small in zip(files, small) if not is_small}
        assert len(expected) >= 5 and max(expected) > 1
    else:
        assert [len(s) for s in scans] == [40]
    for tap in ("copy", "ok", "trap"):
        assert parts(tmp_path / f"spark-{tap}") == parts(tmp_path / f"local-{tap}"), tap
    copy = parts(tmp_path / "spark-copy")
    assert copy.count(b"\n") == results["local"].written["copy"] > 2 * 27   # the corpus has 27 records
    local, spark = results["local"], results["spark"]
    assert spark.written == local.written
    assert (spark.lines_read, spark.malformed) == (local.lines_read, local.malformed)
    assert [(r, t) for _, r, t in spark.malformed_samples] == [(r, t) for _, r, t in local.malformed_samples]
    assert [w for w, _, _ in spark.malformed_samples] == [w.rsplit(":", 1)[0] for w, _, _ in local.malformed_samples]
    assert len({w for w, _, _ in spark.malformed_samples}) >= 3   # awkward names among them
    for where, _, text in spark.malformed_samples:
        assert text.encode() + b"\n" in open(where, "rb").read()


def test_a_line_whose_file_has_no_index_fails_the_run(spark_session, tmp_path, monkeypatch):
    """The index is joined to the lines by the file's name in the scan: were a name to come out otherwise,
    its lines would have no index, and the run fails naming the file rather than dropping or misplacing
    them."""
    from logetl.engines.spark.fs import HadoopFS
    from logetl.engines.spark.engine import SparkEngine

    _inputs(tmp_path / "in")
    # the packed scan of Spark's text source: what reads the lines where the driver has no logetl jar
    monkeypatch.setattr(SparkEngine, "line_reader", lambda self: False)
    monkeypatch.setattr(SparkEngine, "_scanned", lambda self, scan, *given: scan)   # it would see it first
    real = HadoopFS.file_uris
    monkeypatch.setattr(HadoopFS, "file_uris", lambda self, p: [] if p.endswith("b08.log") else real(self, p))
    with pytest.raises(Exception, match=r"logetl cannot tell which input this file is: file:/\S*/in/b08\.log"):
        run_flow(copy_and_filter(), str(tmp_path / "in"), {t: str(tmp_path / t) for t in ("copy", "ok")},
                 engine="spark")
    assert not (tmp_path / "copy").exists() and not (tmp_path / "ok").exists()


def test_a_file_split_inside_a_packed_scan_keeps_its_lines_in_order(spark_session, tmp_path):
    """A file is packed when it was small as it was bound; a log that grew since may be split by the scan.
    The sort's key has where each split starts: the split file's lines come back in their order, between
    the files before and after it, across the three ranges of the sort."""
    from logetl.engines.spark.engine import SparkEngine
    from logetl.engines.spark.session import _session_conf

    lines = corpus("corpus.log").split(b"\n")[:-1]
    files = []
    for name, body in [("a.log", lines[:3]), ("grown.log", lines + lines[::-1]), ("c.log", lines[3:5])]:
        (tmp_path / name).write_bytes(b"".join(x + b"\n" for x in body))
        files.append(str(tmp_path / name))
    engine = SparkEngine()
    sizes = [os.path.getsize(f) for f in files]
    settings = {"spark.sql.files.maxPartitionBytes": "16k", "spark.sql.files.openCostInBytes": "1k"}
    with _session_conf(spark_session, settings):
        assert engine._packed_partitions(sizes) == 3   # three ranges: Spark samples the lines for their bounds
        packed = engine._packed(spark_session.read.option("lineSep", "\n"), 5, files, sizes)
        assert packed.rdd.getNumPartitions() == 3
        got = [(bytes(r.value), r._input) for r in packed.selectExpr("cast(value as binary) value", "_input").collect()]
    expected = [(x, 5) for x in lines[:3]] + [(x, 6) for x in lines + lines[::-1]] + [(x, 7) for x in lines[3:5]]
    assert got == expected


SKIPS = "skips files whose names start with '_' or '.' or end with '._COPYING_'"
PATTERN = "takes '[', ']', '*', '?', '{' and '}' in a name for a pattern"


@pytest.mark.parametrize("name, alone, why", [("_hidden.log", True, SKIPS), ("b08.log._COPYING_", False, SKIPS),
                                              ("a5[0].log", True, PATTERN), ("a[5].log", False, PATTERN)])
def test_a_file_spark_would_skip_or_mistake_fails_the_run_naming_it(spark_session, tmp_path, name, alone, why):
    """Spark's file index skips names it takes for hidden or unfinished, even given one by one, and takes a
    name with brackets for a pattern (``a[5].log`` read ``a5.log``, which the inputs hold too; ``a5[0].log``
    matches ``a50.log``): a run given such a file, by its own name or among a directory's small files,
    fails naming it, where its lines would have been missing, or another file's, without a word."""
    from logetl.io.inputs import InputReadError

    _inputs(tmp_path / "in")
    (tmp_path / "in" / "a50.log").write_bytes(corpus("corpus.log")[:3000])
    (tmp_path / "in" / name).write_bytes(corpus("corpus.log")[:3000])
    given = tmp_path / "in" / name if alone else tmp_path / "in"
    with pytest.raises(InputReadError) as failed:
        run_flow(copy_and_filter(), str(given), {t: str(tmp_path / t) for t in ("copy", "ok")}, engine="spark")
    assert str(failed.value) == f"cannot read input {str(tmp_path / 'in' / name)!r} on Spark: Spark {why}; rename it"
    assert not (tmp_path / "copy").exists() and not (tmp_path / "ok").exists()
