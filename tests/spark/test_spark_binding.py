"""Binding inputs on Spark (``HadoopFS``): a directory of many files is listed, checked and fingerprinted
in a few JVM round trips a file, and what binding learns is what the local file system says."""
from __future__ import annotations

import os
import sys

import pytest

from conftest import corpus, parts
from logetl import programs
from logetl.errors import UsageError
from logetl.io import fs as local_fs
from logetl.io.outputs import OutputError
from logetl.job import JobError, bind


@pytest.fixture
def hadoop(spark_session):
    from logetl.engines.spark.fs import HadoopFS

    return HadoopFS(spark_session)


def _kinds(directory) -> None:
    """A file, a link to it, a directory, a link to that, a broken link, a FIFO and a hidden file."""
    directory.mkdir()
    (directory / "a.log").write_bytes(b"x\n")
    (directory / "b.log").symlink_to(directory / "a.log")
    (directory / "sub").mkdir()
    (directory / "sub-link").symlink_to(directory / "sub")
    (directory / "gone.log").symlink_to(directory / "removed.log")
    os.mkfifo(directory / "pipe")
    (directory / ".hidden").write_bytes(b"y\n")


def test_local_entries_name_each_entrys_kind(tmp_path):
    _kinds(tmp_path / "d")
    assert local_fs.LOCAL.entries(str(tmp_path / "d")) == [
        (".hidden", "file"), ("a.log", "file"), ("b.log", "file"), ("gone.log", "other"), ("pipe", "other"),
        ("sub", "dir"), ("sub-link", "dir")]


def test_a_local_directory_is_listed_on_spark_as_the_local_engine_lists_it(tmp_path, hadoop):
    """Hadoop's own listing of a local directory (one listing, the statuses' kinds: what a listing and a
    status query an entry gave before) leaves a broken link out and takes a FIFO for a file; a local path
    on Spark is listed by the operating system instead, as the local engine lists it."""
    _kinds(tmp_path / "d")
    d = str(tmp_path / "d")
    before = [(n, "file" if hadoop.isfile.__wrapped__(hadoop, f"{d}/{n}") else
               "dir" if hadoop.isdir.__wrapped__(hadoop, f"{d}/{n}") else "other") for n in hadoop.listdir.__wrapped__(hadoop, d)]
    assert hadoop.entries.__wrapped__(hadoop, d) == before == [
        (".hidden", "file"), ("a.log", "file"), ("b.log", "file"), ("pipe", "file"), ("sub", "dir"),
        ("sub-link", "dir")]
    assert hadoop.entries(d) == hadoop.entries(f"file://{d}") == local_fs.LOCAL.entries(d)
    link, gone = f"{d}/b.log", f"{d}/gone.log"
    assert [hadoop.islink(link), hadoop.exists(gone), hadoop.isfile(f"{d}/pipe")] == [True, True, False]
    assert [hadoop.islink.__wrapped__(hadoop, link), hadoop.exists.__wrapped__(hadoop, gone),
            hadoop.isfile.__wrapped__(hadoop, f"{d}/pipe")] == [False, False, True]


def test_a_local_files_status_is_hadoops(tmp_path, hadoop):
    """Its size, and its modification time in Hadoop's milliseconds (the fingerprints of earlier runs hold
    those), asked of the operating system."""
    f = tmp_path / "a.log"
    f.write_bytes(b"x" * 1234)
    os.utime(f, ns=(1_700_000_000_123_456_789, 1_700_000_000_987_654_321))
    st = hadoop._status(str(f))
    assert hadoop.stat(str(f)) == (int(st.getLen()), int(st.getModificationTime()) * 1_000_000) == (
        1234, 1_700_000_000_987_000_000)


@pytest.mark.parametrize("odd", ["broken link", "fifo"])
def test_what_is_no_file_in_an_input_directory_is_refused_on_spark_as_locally(tmp_path, hadoop, odd):
    """It was skipped without a word on Spark (Hadoop's listing left a broken link out, and a FIFO read as
    an empty file)."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.log").write_bytes(b"x\n")
    if odd == "fifo":
        os.mkfifo(d / "b.log")
    else:
        (d / "b.log").symlink_to(tmp_path / "gone.log")
    for fs in (local_fs.LOCAL, hadoop):
        with pytest.raises(JobError) as refused:
            bind(programs.get("filter"), str(d), {"output": str(tmp_path / "o")}, engine="spark", fs=fs)
        assert str(refused.value) == (f"input directory {str(d)!r} holds {str(d / 'b.log')!r}, which is not a "
                                      "regular file (a broken symbolic link?)")


def test_a_fifo_input_and_a_linked_output_are_refused_on_spark_as_locally(tmp_path, hadoop):
    """A FIFO given as the input read as an empty file on Spark, and a symbolic link given as an output was
    written through."""
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "a.log").write_bytes(b"x\n")
    (tmp_path / "real").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    for fs in (local_fs.LOCAL, hadoop):
        with pytest.raises(JobError) as refused:
            bind(programs.get("filter"), str(tmp_path / "pipe"), {"output": str(tmp_path / "o")}, engine="spark",
                 fs=fs)
        assert str(refused.value) == f"input {str(tmp_path / 'pipe')!r} is not a regular file or directory"
        with pytest.raises(OutputError) as refused:
            bind(programs.get("filter"), str(tmp_path / "a.log"), {"output": str(tmp_path / "linked")},
                 engine="spark", fs=fs)
        assert str(refused.value) == (f"output {str(tmp_path / 'linked')!r} is a symbolic link: give the directory "
                                      "it points to")


@pytest.mark.parametrize("path, prefix", [
    ("/a/b", ""), ("a/b", ""), ("file:/a", "file:"), ("file:///a", "file:"), ("hdfs://nn:8020/a/b", "hdfs://nn:8020"),
    ("hdfs:/a", "hdfs:"), ("s3a://bucket/k", "s3a://bucket"), ("//host/a", "//host"),
    ("/a:b/c", ""), ("viewfs://cluster", "viewfs://cluster")])
def test_a_path_names_its_file_system_by_its_scheme_and_authority(path, prefix, spark_session):
    """Hadoop's ``Path`` parse: a scheme if a colon comes before the first slash, then ``//`` and an
    authority up to the next slash; no scheme and no authority is the default file system. The prefix is
    the scheme and authority Hadoop's own ``Path`` finds."""
    from logetl.engines.spark.fs import _FS_PREFIX

    assert _FS_PREFIX.match(path).group(0) == prefix
    uri = spark_session._jvm.org.apache.hadoop.fs.Path(path).toUri()
    scheme, authority = uri.getScheme(), uri.getAuthority()
    assert prefix == (f"{scheme}:" if scheme is not None else "") + (f"//{authority}" if authority else "")


def test_a_file_system_is_looked_up_once_and_names_once(tmp_path, hadoop, spark_session):
    (tmp_path / "a b.log").write_bytes(b"x\n")
    local = str(tmp_path / "a b.log")
    assert hadoop.abspath(local) == f"file:{local}"
    assert hadoop.file_uris(local) == [f"file://{local.replace(' ', '%20')}", f"file:{local.replace(' ', '%20')}"]
    assert hadoop.abspath(f"file:{local}") == f"file:{local}"
    assert list(hadoop._filesystems) == ["", "file:"]
    assert hadoop._names.cache_info().misses == 2


def test_strings_are_a_java_arrays_in_one_call(hadoop, spark_session):
    array = spark_session._jvm.org.apache.hadoop.util.StringUtils.split("a b,c,ü", ",")
    assert hadoop.strings(array) == ["a b", "c", "ü"]
    assert hadoop.strings(spark_session._jvm.org.apache.hadoop.util.StringUtils.split("", ",")) == []


def test_a_local_inputs_readability_is_the_operating_systems(tmp_path, hadoop, monkeypatch):
    """Root reads a file of mode 000, as the local engine and Spark's read do (Hadoop's ``access`` said no);
    what the operating system refuses is refused, naming the file."""
    f = tmp_path / "secret.log"
    f.write_bytes(b"x\n")
    f.chmod(0)
    assert hadoop.readable(str(f)) == os.access(f, os.R_OK) == local_fs.LOCAL.readable(str(f))
    f.chmod(0o644)
    assert hadoop.readable(str(f)) is True
    monkeypatch.setattr(local_fs.os, "access", lambda path, mode: not (path == str(f) and mode == os.R_OK))
    with pytest.raises(JobError, match=r"^input file '.*secret.log' is not readable$"):
        bind(programs.get("filter"), str(tmp_path), {"output": str(tmp_path / "o")}, engine="spark", fs=hadoop)


def test_binding_a_directory_costs_a_few_jvm_calls_a_file(tmp_path, hadoop):
    """Each further file of a local directory costs 5 JVM calls to bind (its qualified names; Hadoop's
    answers about a local file come from the operating system: ``_locally``), besides the releases of the
    Java objects they return. Before, 33 (``bench/spark_many_files.py`` counts them)."""
    from logetl.engines.spark.fs import counting_jvm_calls

    cost = {}
    for n in (10, 50):
        d = tmp_path / f"in{n}"
        d.mkdir()
        for i in range(n):
            (d / f"f{i:03d}.log").write_bytes(b"x\n")
        hadoop._names.cache_clear()
        with counting_jvm_calls() as made:
            taps = bind(programs.get("filter"), str(d), {"output": str(tmp_path / f"o{n}")}, engine="spark", fs=hadoop)
        assert taps.input_sizes == [2] * n
        cost[n] = made[0]
    per_file = (cost[50] - cost[10]) / 40
    print(f"JVM calls: {cost}, {per_file:.2f} a file", file=sys.stderr)
    assert cost[10] > 0 and per_file <= 5, cost


def test_a_link_in_a_hadoop_listing_is_followed(tmp_path, hadoop):
    """A status in a listing that is a link (a ViewFS mount point is listed as one; Hadoop's local listing
    follows links itself) has its target's kind, as a status query gave before; a broken one is "other"."""
    (tmp_path / "a.log").write_bytes(b"x\n")
    (tmp_path / "d").mkdir()

    class Link:   # a listed link, to a path Hadoop's status query follows
        def __init__(self, target):
            self.target = target

        def isFile(self):
            return False

        isDirectory = isFile

        def isSymlink(self):
            return True

        def getPath(self):
            return hadoop._Path(self.target)

    assert [hadoop._kind(Link(str(tmp_path / n))) for n in ("a.log", "d", "gone")] == ["file", "dir", "other"]


def test_the_engine_keeps_one_file_system_a_session(spark_session):
    from logetl.engines.spark.engine import SparkEngine

    engine = SparkEngine()
    fs = engine.filesystem()
    assert engine.filesystem() is fs and fs.spark is spark_session
    engine.shutdown()   # (the session is not the engine's: it stays)
    assert engine._fs is None and engine.filesystem() is not fs


def test_a_local_name_holding_an_escape_is_its_own_on_spark(tmp_path, hadoop):
    """Hadoop spells a local path unencoded: read as a URI, the output ``o%41`` was ``oA``, and its own part
    file, given as the input through a link (so found where it really is, ``o%41``), was not seen to be
    inside it."""
    out = tmp_path / "o%41"
    out.mkdir()
    (out / "_SUCCESS").write_bytes(b"")
    (out / "part-00000").write_bytes(b"x\n")
    (tmp_path / "link").symlink_to(out)
    given = str(tmp_path / "link" / "part-00000")
    assert hadoop.local(str(out)) == str(out)
    for fs in (local_fs.LOCAL, hadoop):
        with pytest.raises(JobError) as refused:
            bind(programs.get("filter"), given, {"output": str(out)}, engine="spark", fs=fs, overwrite=True)
        assert str(refused.value) == f"output {str(out)!r} contains input file {given!r}"


def test_a_local_name_that_is_not_utf8_is_refused_on_spark_naming_it(tmp_path, hadoop):
    """The local engine reads it; Spark cannot be sent its name (it was left out of Hadoop's listing)."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.log").write_bytes(b"x\n")
    odd = os.fsdecode(os.fsencode(str(d)) + b"/b\xff.log")
    with open(os.fsencode(odd), "wb") as f:
        f.write(b"y\n")
    assert bind(programs.get("filter"), str(d), {"output": str(tmp_path / "o")}, fs=local_fs.LOCAL).inputs[1] == odd
    with pytest.raises(UsageError) as refused:
        bind(programs.get("filter"), str(d), {"output": str(tmp_path / "o")}, engine="spark", fs=hadoop)
    assert str(refused.value) == f"path {odd!r} is not UTF-8: Spark cannot name it; rename it"


def test_a_broken_link_in_an_output_is_refused_on_spark_as_locally(tmp_path, hadoop):
    """Hadoop's listing left it out: the output looked like an earlier one of logetl's, to be replaced."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "_SUCCESS").write_bytes(b"")
    (out / "part-00000").write_bytes(b"x\n")
    (out / "notes").symlink_to(tmp_path / "gone")
    (tmp_path / "a.log").write_bytes(b"x\n")
    for fs in (local_fs.LOCAL, hadoop):
        with pytest.raises(OutputError) as refused:
            bind(programs.get("filter"), str(tmp_path / "a.log"), {"output": str(out)}, engine="spark", fs=fs,
                 overwrite=True)
        assert str(refused.value) == (f"output directory {str(out)!r} is not empty and holds 'notes', which is not "
                                      "part of a logetl output: choose another directory (--overwrite replaces only "
                                      "earlier outputs)")


def test_a_malformed_lines_sample_names_a_globbed_file_as_it_is_named(tmp_path, spark_session):
    """A glob's matches are Hadoop's paths (``file:/...``, not encoded): read as URIs, ``x%41.log`` was
    ``xA.log`` in the samples and the trap."""
    from logetl.job import run_flow

    d = tmp_path / "in"
    d.mkdir()
    (d / "x%41.log").write_bytes(corpus("corpus.log").split(b"\n")[0] + b"\nnot a line\n")
    results = {}
    for engine in ("local", "spark"):
        results[engine] = run_flow(programs.get("filter"), str(d / "x*.log"), {"output": str(tmp_path / f"{engine}-o")},
                                   engine=engine, trap=str(tmp_path / f"{engine}-trap"))
    assert [w for w, _, _ in results["spark"].malformed_samples] == [str(d / "x%41.log")]
    assert [w.rsplit(":", 1)[0] for w, _, _ in results["local"].malformed_samples] == [str(d / "x%41.log")]
    assert parts(tmp_path / "spark-trap") == parts(tmp_path / "local-trap") != b""
