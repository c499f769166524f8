"""Binding inputs on Spark (``HadoopFS``): a directory of many files is listed, checked and fingerprinted
in a few JVM round trips a file, and what binding learns is what the local file system says."""
from __future__ import annotations

import os
import sys

import pytest

from logetl import programs
from logetl.io import fs as local_fs
from logetl.job import JobError, bind


@pytest.fixture
def hadoop(spark_session):
    from logetl.engines.spark import HadoopFS

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


def test_hadoop_entries_are_what_a_status_query_an_entry_said(tmp_path, hadoop):
    """One listing gives the kinds that a listing and a status query an entry gave before. Hadoop's local
    file system leaves a broken link out of a listing, and takes a FIFO for a file (neither a directory
    nor a link): as it did."""
    _kinds(tmp_path / "d")
    d = str(tmp_path / "d")
    before = [(n, "file" if hadoop.isfile(f"{d}/{n}") else "dir" if hadoop.isdir(f"{d}/{n}") else "other")
              for n in hadoop.listdir(d)]
    assert hadoop.entries(d) == before == [
        (".hidden", "file"), ("a.log", "file"), ("b.log", "file"), ("pipe", "file"), ("sub", "dir"),
        ("sub-link", "dir")]


@pytest.mark.parametrize("path, prefix", [
    ("/a/b", ""), ("a/b", ""), ("file:/a", "file:"), ("file:///a", "file:"), ("hdfs://nn:8020/a/b", "hdfs://nn:8020"),
    ("hdfs:/a", "hdfs:"), ("s3a://bucket/k", "s3a://bucket"), ("//host/a", "//host"), ("a:b/c", "a:"),
    ("/a:b/c", ""), ("viewfs://cluster", "viewfs://cluster")])
def test_a_path_names_its_file_system_by_its_scheme_and_authority(path, prefix):
    """Hadoop's ``Path`` parse: a scheme if a colon comes before the first slash, then ``//`` and an
    authority up to the next slash; no scheme and no authority is the default file system."""
    from logetl.engines.spark import _FS_PREFIX

    assert _FS_PREFIX.match(path).group(0) == prefix


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
    monkeypatch.setattr(local_fs.os, "access", lambda path, mode: path != str(f) and mode != os.R_OK)
    with pytest.raises(JobError, match=r"^input file '.*secret.log' is not readable$"):
        bind(programs.get("filter"), str(tmp_path), {"output": str(tmp_path / "o")}, engine="spark", fs=hadoop)


def _calls(monkeypatch) -> list[int]:
    """A counter of the JVM calls made (each a round trip). Not counted: the releases of the Java objects
    Python dropped (a round trip each too), which py4j makes on a thread of its own when it gets to them,
    so that how many land in a count varies from run to run."""
    import py4j.clientserver
    from py4j.protocol import MEMORY_COMMAND_NAME

    made = [0]
    real = py4j.clientserver.ClientServerConnection.send_command

    def counted(self, command, *args, **kwargs):
        made[0] += not command.startswith(MEMORY_COMMAND_NAME)
        return real(self, command, *args, **kwargs)

    monkeypatch.setattr(py4j.clientserver.ClientServerConnection, "send_command", counted)
    return made


def test_binding_a_directory_costs_a_few_jvm_calls_a_file(tmp_path, hadoop, monkeypatch):
    """Each further file of a directory costs 14 JVM calls to bind (four for its entry in the listing, four
    for its status, five for its qualified names), besides the releases of the Java objects they return;
    with those, 55 round trips a file before, 15-24 now (``bench/spark_many_files.py``: 2,000 files bound
    in 14.5 s before, 2.5 s now)."""
    made = _calls(monkeypatch)
    cost = {}
    for n in (10, 50):
        d = tmp_path / f"in{n}"
        d.mkdir()
        for i in range(n):
            (d / f"f{i:03d}.log").write_bytes(b"x\n")
        hadoop._names.cache_clear()
        before = made[0]
        taps = bind(programs.get("filter"), str(d), {"output": str(tmp_path / f"o{n}")}, engine="spark", fs=hadoop)
        assert taps.input_sizes == [2] * n
        cost[n] = made[0] - before
    per_file = (cost[50] - cost[10]) / 40
    print(f"JVM calls: {cost}, {per_file:.2f} a file", file=sys.stderr)
    assert per_file <= 14, cost
