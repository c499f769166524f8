"""logetl's kernel in the executors' JVMs (``spark_jvm``, ``java/logetl/spark``, ``_jni.c``): its rows are the
Python workers' (``spark_native.parse_batches`` and ``join_batches``, themselves checked against the line
kernel in test_spark_native) row for row, on the corpus, the real sample, every format's hand-worked lines
and generated near-miss lines, in batches of every size; the jar's build, its cache and the reasons it
cannot be built; the session's check. (The programs on this path: test_spark_native; on a standalone
cluster: test_spark_cluster.)"""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CORPUS, corpus, logetl, parts, read, require, spark_missing
from format_cases import CASES, NGINX_ISSUE
from logetl import contract, formats
from test_formats import FORMAT_IDS, near_lines

pa = pytest.importorskip("pyarrow")
pytest.importorskip("logetl._scan", reason="the native kernel is not built (no C compiler)")

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")
FIELD_ROWS = ("_status", "value", "_sample", "_input")


def spec_of(fmt, keep, drops: bool = True) -> tuple:
    from logetl.engines.spark.engine import SparkEngine

    class Node:   # what _native_spec reads of a Parse node (the programs': size '-' dropped)
        format, fields, drops_size_dash = fmt, tuple(keep), drops

    return SparkEngine._native_spec(Node)


def lines_frame(spark, lines: list[bytes], inputs: list[int], partitions: int = 1):
    """The lines as the engine gives them to the parse (``value`` binary, the raw bytes; ``_input`` int), in
    ``partitions`` partitions of consecutive lines."""
    rows = spark.sparkContext.parallelize(list(zip(lines, inputs)), partitions)
    return spark.createDataFrame(rows, "value binary, _input int")


def python_batches(lines: list[bytes], inputs: list[int], batch: int, large: bool = False):
    binary = pa.large_binary() if large else pa.binary()
    return [pa.RecordBatch.from_arrays([pa.array(lines[i:i + batch], binary), pa.array(inputs[i:i + batch], pa.int32())],
                                       names=["value", "_input"]) for i in range(0, len(lines), batch)]


def in_batches_of(spark, batch: int):
    from logetl.engines.spark.session import _session_conf
    from logetl.engines.spark.jvm import BATCH

    return _session_conf(spark, {BATCH: str(batch)})


def jvm_parsed_frame(spark, spec, lines, inputs, batch, partitions=1):
    """The JVM's parse of ``lines`` in batches of ``batch`` (taken when the frame is made), not yet run."""
    from logetl.engines.spark import jvm as spark_jvm
    from logetl.engines.spark.native import field_column

    n = len(spec[1])
    schema = ", ".join([f"{field_column(i)} binary" for i in range(n)]
                       + ["_status tinyint", "value binary", "_sample boolean", "_input int"])
    with in_batches_of(spark, batch):
        return spark_jvm.parsed(lines_frame(spark, lines, inputs, partitions), schema, spec)


def jvm_parsed(spark, spec, lines, inputs, batch, partitions=1):
    return [tuple(r) for r in jvm_parsed_frame(spark, spec, lines, inputs, batch, partitions).collect()]


def python_parsed(spec, lines, inputs, batch):
    from logetl.engines.spark.native import parse_batches

    rows = []
    for out in parse_batches(spec, iter(python_batches(lines, inputs, batch))):
        n = out.num_columns - 4
        columns = [c.to_pylist() for c in out.columns]
        for values in zip(*columns):
            rows.append((*(None if v is None else v.encode() for v in values[:n]), *values[n:]))
    return rows


def jvm_joined_frame(spark, spec, lines, inputs, batch, sinks, trap=True):
    from logetl.engines.spark import jvm as spark_jvm
    from logetl.engines.spark.native import joined_schema

    with in_batches_of(spark, batch):
        return spark_jvm.joined(lines_frame(spark, lines, inputs), joined_schema(), spec, sinks, trap)


def jvm_joined(spark, spec, lines, inputs, batch, sinks, trap=True):
    return [tuple(r) for r in jvm_joined_frame(spark, spec, lines, inputs, batch, sinks, trap).collect()]


def collect_cases(frames: list) -> list[list[tuple]]:
    """The rows of each frame, all of them in one Spark job: the frames (one schema) in one union, each
    row tagged with its frame's number; a union's partitions come in its frames' order, so each frame's
    rows keep their own order."""
    from pyspark.sql import functions as F

    union = None
    for k, frame in enumerate(frames):
        tagged = frame.withColumn("_case", F.lit(k))
        union = tagged if union is None else union.union(tagged)
    rows: list[list[tuple]] = [[] for _ in frames]
    for r in union.collect():
        rows[r["_case"]].append(tuple(r)[:-1])
    return rows


def python_joined(spec, lines, inputs, batch, sinks, trap=True):
    from logetl.engines.spark.native import join_batches

    return [tuple(row.values()) for out in join_batches(spec, sinks, trap, iter(python_batches(lines, inputs, batch)))
            for row in out.to_pylist()]


def both_paths_agree(spark, fmt, keep, lines: list[bytes], batches=(1, 3, 10_000), drops: bool = True):
    """The JVM's rows equal the Python workers' for ``lines`` (each line's input: its batch's number, as a
    batch is a part of one file), in batches of each size: the parsed rows, and the joined rows of three
    sinks (every field, some in another order, every field again) with the trap; and the joined rows
    without the trap (no trap rows; the samples and counters still come). Two Spark jobs whatever the
    number of batch sizes: the parsed rows of every size in one, the joined rows in the other."""
    spec = spec_of(fmt, keep, drops)
    n = len(keep)
    sinks = (tuple(range(n)), tuple(reversed(range(min(3, n)))), tuple(range(n)))
    parsed, joined, want_parsed, want_joined = [], [], [], []
    for batch in batches:
        inputs = [i // batch for i in range(len(lines))]
        parsed.append(jvm_parsed_frame(spark, spec, lines, inputs, batch))
        want_parsed.append(python_parsed(spec, lines, inputs, batch))
        joined.append(jvm_joined_frame(spark, spec, lines, inputs, batch, sinks))
        want_joined.append(python_joined(spec, lines, inputs, batch, sinks))
    inputs = [0] * len(lines)
    joined.append(jvm_joined_frame(spark, spec, lines, inputs, 7, sinks[:1], trap=False))
    want_joined.append(python_joined(spec, lines, inputs, 7, sinks[:1], trap=False))
    for batch, got, want in zip(batches, collect_cases(parsed), want_parsed):
        assert got == want, batch
    for case, got, want in zip([*batches, "7, no trap"], collect_cases(joined), want_joined):
        assert got == want, case


def test_the_jvm_kernel_gives_the_python_workers_rows_on_the_corpus(spark_session):
    lines = contract.split_lines(corpus("corpus.log"))
    both_paths_agree(spark_session, formats.compile_format(None), contract.FIELDS, lines)
    # some fields, in another order, of the original expression
    both_paths_agree(spark_session, formats.compile_format(None), ("size", "ip"), lines, batches=(4,))


def test_the_jvm_kernel_gives_the_python_workers_rows_with_the_tail_fields(spark_session):
    """A flow's read of combined: size '-' kept, referer and user agent null where the tail is not well-formed."""
    from test_records import HEAD, TAIL_CASES

    lines = contract.split_lines(corpus("corpus.log")) + [(HEAD + text).encode() for text, *_ in TAIL_CASES]
    fmt = formats.compile_format(None)
    both_paths_agree(spark_session, fmt, fmt.fields, lines, drops=False)
    both_paths_agree(spark_session, fmt, ("user_agent", "size", "referer"), lines, batches=(4,), drops=False)


def test_the_jvm_kernel_gives_the_python_workers_rows_on_the_real_sample(spark_session, sample):
    lines = contract.split_lines(read(sample))
    both_paths_agree(spark_session, formats.compile_format(None), contract.FIELDS, lines, batches=(1000, 10_000))


@pytest.mark.parametrize("spec", list(CASES), ids=[FORMAT_IDS.get(s, s) for s in CASES])
def test_the_jvm_kernel_gives_the_python_workers_rows_on_the_format_cases(spark_session, spec):
    fmt = formats.compile_format(spec)
    lines = [raw for _, raw, _ in CASES[spec]] + [b"", b"\r", b"\xff"]
    for keep in (fmt.fields, tuple(reversed(fmt.fields[:3]))):   # all fields; some, in another order
        both_paths_agree(spark_session, fmt, keep, lines, batches=(2, 10_000))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_jvm_kernel_gives_the_python_workers_rows_on_generated_lines(spark_session, data):
    fmt = formats.compile_format(NGINX_ISSUE)
    lines = [line.replace(b"\n", b"") for line in data.draw(st.lists(near_lines(fmt), min_size=1, max_size=30))]
    both_paths_agree(spark_session, fmt, fmt.fields, lines, batches=(data.draw(st.integers(1, 8)),))


def test_samples_are_each_partitions_first_malformed_lines(spark_session):
    """Each task flags (or sends) the first five malformed lines of its own partition, as the Python
    workers do: three partitions of the corpus, each with more malformed lines than that."""
    lines = contract.split_lines(corpus("corpus.log")) * 3
    inputs = [0] * len(lines)
    spec = spec_of(formats.compile_format(None), contract.FIELDS)
    frame = lines_frame(spark_session, lines, inputs, 3)
    slices = [len(p) for p in frame.rdd.glom().collect()]
    assert len(slices) == 3 and min(slices) > 0
    got = jvm_parsed(spark_session, spec, lines, inputs, 10_000, partitions=3)
    want, at = [], 0
    for size in slices:   # each partition as a task of the Python workers sees it
        want += python_parsed(spec, lines[at:at + size], inputs[at:at + size], 10_000)
        at += size
    assert got == want
    flagged = [i for i, row in enumerate(got) if row[len(spec[1]) + 2]]
    assert len(flagged) == 15


def test_a_batch_ends_at_8_mb_of_lines_whatever_its_count(spark_session):
    """A batch holds at most the Arrow batch's lines, and stops once 8 MB of lines are in it (one line more
    when a line alone is longer): a 9 MB line between small ones is parsed as any other."""
    from logetl.engines.spark.native import COUNTERS

    ok = corpus("corpus.log").split(b"\n")[0]
    long = b"x" * (9 << 20)
    lines = [ok, long, ok, ok]
    spec = spec_of(formats.compile_format(None), contract.FIELDS)
    rows = jvm_joined(spark_session, spec, lines, [0] * 4, 10_000, ((0, 1, 2, 3, 4),))
    counters = [r[4:] for r in rows if r[0] == -1]
    # batches: [ok, long] (8 MB reached after the long line), then [ok, ok]
    assert counters == [(2, 0, 1, 0, 0, 1, 0, 0), (2, 0, 0, 0, 0, 2, 0, 0)]
    assert len(COUNTERS) == 8
    assert [r[1] for r in rows if r[0] == 2] == [long]   # the sample: the long line, whole


# --- the jar: built once, cached, and why it cannot be -------------------------------------------------------

def test_the_jar_is_built_once_into_the_cache_and_holds_the_classes_and_the_library(tmp_path, monkeypatch):
    missing = spark_missing()
    require(missing is None, missing or "")
    from logetl.engines.spark import jvm as spark_jvm

    monkeypatch.setenv("LOGETL_CACHE_DIR", str(tmp_path / "cache"))
    path = spark_jvm.jar()
    assert os.path.dirname(path) == str(tmp_path / "cache")
    assert os.listdir(tmp_path / "cache") == [os.path.basename(path)]   # no temporary left
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
    assert {"logetl/spark/Kernel.class", "logetl/spark/NativeParse.class", "logetl/spark/liblogetl_jvm.so"} <= names
    built = os.stat(path).st_mtime_ns
    assert spark_jvm.jar() == path and os.stat(path).st_mtime_ns == built   # cached: not built again


def jre_only(tmp_path) -> dict:
    """An environment whose java has no JDK beside it (a JRE: no javac), and an empty logetl cache (so no
    jar built before): logetl cannot build its jar there. The driver's class archive is off (an empty
    cache would record one)."""
    from logetl.engines.spark.jvm import _jdk

    real = os.path.join(_jdk(), "bin", "java")
    home = tmp_path / "jre"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text(f'#!/bin/sh\nexec {real} "$@"\n')
    (home / "bin" / "java").chmod(0o755)
    return {"JAVA_HOME": str(home), "LOGETL_CACHE_DIR": str(tmp_path / "empty-cache")}


def test_a_failed_build_names_the_compilers_error_and_is_remembered(tmp_path, monkeypatch):
    """The C compiler fails: the reason is its first line that says an error (not "In file included from"),
    and the next run says it again without building (until the sources or the tools change)."""
    missing = spark_missing()
    require(missing is None, missing or "")
    from logetl.engines.spark import jvm as spark_jvm

    calls = tmp_path / "calls"
    cc = tmp_path / "failing-cc"
    cc.write_text(f"#!/bin/sh\necho x >> {calls}\necho 'In file included from _jni.c:1:' >&2\n"
                  "echo '_kernel.h:9:1: error: something is wrong' >&2\nexit 1\n")
    cc.chmod(0o755)
    monkeypatch.setenv("LOGETL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(cc))
    for _ in range(2):
        with pytest.raises(spark_jvm.Unavailable) as caught:
            spark_jvm.jar()
        assert str(caught.value) == "failing-cc failed building the kernel for the JVM: _kernel.h:9:1: error: something is wrong"
    assert calls.read_text() == "x\n"   # built once
    assert [n for n in os.listdir(tmp_path / "cache") if n.endswith(".jar")] == []


@pytest.fixture
def conf_dir(tmp_path, monkeypatch):
    """An empty Spark configuration directory (``SPARK_CONF_DIR``: its ``spark-defaults.conf`` is what a
    launched driver reads), and no ``PYSPARK_SUBMIT_ARGS``."""
    missing = spark_missing()
    require(missing is None, missing or "")
    where = tmp_path / "conf"
    where.mkdir()
    monkeypatch.setenv("SPARK_CONF_DIR", str(where))
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    return where


def test_the_jar_goes_first_in_the_jars_the_driver_would_have_had(conf_dir, monkeypatch):
    """spark.jars given with --conf, else spark-defaults.conf's (a --conf replaces the file's value) or
    that of a properties file given to spark-submit, or --jars in PYSPARK_SUBMIT_ARGS (which replaces
    spark.jars whole): logetl's jar is added first to whichever the JVM would take, never instead of it."""
    from logetl.engines.spark.jvm import with_jar

    assert with_jar({"a": "1"}, "/l.jar") == {"a": "1", "spark.jars": "/l.jar"}
    assert with_jar({"spark.jars": "/u.jar"}, "/l.jar") == {"spark.jars": "/l.jar,/u.jar"}
    (conf_dir / "spark-defaults.conf").write_text("# a comment\nspark.master  local[2]\nspark.jars   /d1.jar,/d2.jar\n")
    assert with_jar({}, "/l.jar") == {"spark.jars": "/l.jar,/d1.jar,/d2.jar"}
    assert with_jar({"spark.jars": "/u.jar"}, "/l.jar") == {"spark.jars": "/l.jar,/u.jar"}
    (conf_dir / "spark-defaults.conf").write_text("spark.jars=/d.jar\n")
    assert with_jar({}, "/l.jar") == {"spark.jars": "/l.jar,/d.jar"}
    (conf_dir / "p.properties").write_text("spark.jars /p.jar\n")
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"--properties-file {conf_dir / 'p.properties'} pyspark-shell")
    assert with_jar({}, "/l.jar") == {"spark.jars": "/l.jar,/p.jar"}
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--jars /s.jar --conf x=y pyspark-shell")
    assert with_jar({"spark.jars": "/u.jar"}, "/l.jar") == {"spark.jars": "/u.jar"}
    assert os.environ["PYSPARK_SUBMIT_ARGS"] == "--jars /l.jar,/s.jar --conf x=y pyspark-shell"


def test_the_executors_of_a_cluster_get_the_throughput_collector_unless_one_is_named(conf_dir, monkeypatch):
    """-XX:+UseParallelGC is added to the executors' options the JVM would take (--conf's, else
    spark-defaults.conf's), unless those or the default options name a collector, or PYSPARK_SUBMIT_ARGS
    sets either (it replaces what logetl gives)."""
    from logetl.engines.spark.session import with_executor_options

    opts = "spark.executor.extraJavaOptions"
    assert with_executor_options({"a": "1"}) == {"a": "1", opts: "-XX:+UseParallelGC"}
    assert with_executor_options({opts: "-Dx=1"}) == {opts: "-Dx=1 -XX:+UseParallelGC"}
    assert with_executor_options({opts: "-XX:+UseG1GC -Dx=1"}) == {opts: "-XX:+UseG1GC -Dx=1"}
    assert with_executor_options({"spark.executor.defaultJavaOptions": "-XX:+UseZGC"}) == \
        {"spark.executor.defaultJavaOptions": "-XX:+UseZGC"}
    (conf_dir / "spark-defaults.conf").write_text("spark.executor.extraJavaOptions  -Dfrom=defaults\n")
    assert with_executor_options({}) == {opts: "-Dfrom=defaults -XX:+UseParallelGC"}
    assert with_executor_options({opts: "-Dx=1"}) == {opts: "-Dx=1 -XX:+UseParallelGC"}
    (conf_dir / "spark-defaults.conf").write_text("spark.executor.defaultJavaOptions -XX:+UseSerialGC\n")
    assert with_executor_options({}) == {}
    (conf_dir / "spark-defaults.conf").write_text("")
    assert with_executor_options({opts: "-XX:-UseParallelGC"}) == {opts: "-XX:-UseParallelGC"}
    for setting in ("--conf spark.executor.extraJavaOptions=-Dy=2", "--conf spark.executor.defaultJavaOptions=-Dy=2"):
        monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"{setting} pyspark-shell")
        assert with_executor_options({}) == {}
    # a properties file given to spark-submit is read in place of spark-defaults.conf
    (conf_dir / "spark-defaults.conf").write_text("spark.executor.extraJavaOptions -Dfrom=defaults\n")
    props = conf_dir / "mine.properties"
    props.write_text("spark.executor.extraJavaOptions=-Dfrom=mine\n")
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"--properties-file {props} pyspark-shell")
    assert with_executor_options({}) == {opts: "-Dfrom=mine -XX:+UseParallelGC"}
    props.write_text("spark.executor.defaultJavaOptions=-XX:+UseG1GC\n")
    assert with_executor_options({}) == {}
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"--properties-file={props} --load-spark-defaults pyspark-shell")
    assert with_executor_options({}) == {}
    props.write_text("")
    assert with_executor_options({}) == {opts: "-Dfrom=defaults -XX:+UseParallelGC"}


def test_the_executors_class_archive_is_added_unless_their_options_name_one(conf_dir):
    """The options of the archive the executors start from follow the collector's, unless the given or
    default options name an archive or sharing (the user's own CDS setting stays alone)."""
    from logetl.engines.spark.session import with_executor_options

    opts = "spark.executor.extraJavaOptions"
    use = ["-XX:SharedArchiveFile=/cache/spark-driver-k.jsa", "-Xlog:cds*=off"]
    shared = " ".join(use)
    assert with_executor_options({}, use) == {opts: f"-XX:+UseParallelGC {shared}"}
    assert with_executor_options({}, []) == {opts: "-XX:+UseParallelGC"}
    assert with_executor_options({opts: "-XX:+UseG1GC"}, use) == {opts: f"-XX:+UseG1GC {shared}"}
    for own in ("-Xshare:off", "-XX:SharedArchiveFile=/mine.jsa", "-XX:ArchiveClassesAtExit=/x.jsa",
                "-XX:+AutoCreateSharedArchive"):
        assert with_executor_options({opts: own}, use) == {opts: f"{own} -XX:+UseParallelGC"}
        assert with_executor_options({"spark.executor.defaultJavaOptions": own}, use) == \
            {"spark.executor.defaultJavaOptions": own, opts: "-XX:+UseParallelGC"}
    assert with_executor_options({opts: "-Xshare:off -XX:+UseG1GC"}, use) == {opts: "-Xshare:off -XX:+UseG1GC"}


def test_the_workers_are_here_only_for_a_local_cluster_or_a_loopback_master():
    from logetl.engines.spark.session import workers_here

    here = ["local-cluster[2,1,1024]", "spark://127.0.0.1:7077", "spark://localhost:7077", "spark://[::1]:7077",
            "spark://127.0.0.1:7077,127.0.0.2:7078", "spark://LOCALHOST:7077", "spark://[::1]:1,[::1]:2",
            "spark://127.0.0.1:7077, localhost:7078", "spark://localhost", "spark://[::1]"]
    elsewhere = ["spark://10.0.0.5:7077", "spark://master:7077", "spark://127.0.0.1:7077,10.0.0.5:7077",
                 "spark://[2001:db8::1]:7077", "spark://[::1]:7077,[2001:db8::1]:7077",
                 "yarn", "k8s://https://127.0.0.1:6443", "local[2]", "local"]
    assert [m for m in here if not workers_here(m)] == []
    assert [m for m in elsewhere if workers_here(m)] == []


def test_a_user_jar_in_spark_defaults_stays_beside_logetls(tmp_path):
    """A real session launched by logetl with a spark-defaults.conf that names a jar of the user's: the
    driver has both, and the JVMs parse."""
    missing = spark_missing()
    require(missing is None, missing or "")
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    user = tmp_path / "user.jar"
    with zipfile.ZipFile(user, "w") as z:
        z.writestr("user/marker.txt", "the user's")
    (conf_dir / "spark-defaults.conf").write_text(f"spark.jars {user}\n")
    code = ("from logetl.engines.spark.engine import SparkEngine; e = SparkEngine(master='local[1]'); s = e.session(); "
            "print(s.sparkContext.getConf().get('spark.jars')); print(e.choose_parse()[1]); e.shutdown()")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=300,
                       env={**os.environ, "SPARK_CONF_DIR": str(conf_dir)})
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    jars, notice = p.stdout.decode().splitlines()[-2:]
    from logetl.engines.spark.jvm import jar

    assert jars == f"{jar()},{user}"
    assert notice == "Spark parses with logetl's native kernel in the executors' JVMs"


def test_the_batch_setting_off_means_the_default_batch():
    class Conf:
        def __init__(self, value):
            self.value = value

        def get(self, key, default):
            return self.value

    from logetl.engines.spark.jvm import _batch

    for value, lines in (("10", 10), ("0", 10000), ("-1", 10000)):
        assert _batch(type("Spark", (), {"conf": Conf(value)})()) == lines


def test_why_the_jar_cannot_be_built(tmp_path, monkeypatch):
    missing = spark_missing()
    require(missing is None, missing or "")
    from logetl.engines.spark import jvm as spark_jvm

    for k, v in jre_only(tmp_path).items():
        monkeypatch.setenv(k, v)
    with pytest.raises(spark_jvm.Unavailable) as caught:
        spark_jvm.jar()
    assert str(caught.value) == (f"no javac beside {tmp_path}/jre/bin/java (building the kernel for the JVM "
                                 "needs a JDK, not only a JRE)")
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("CC", "no-such-cc")
    with pytest.raises(spark_jvm.Unavailable) as caught:
        spark_jvm.jar()
    assert str(caught.value) == "no C compiler (no-such-cc) to build the kernel for the JVM"
    assert not os.path.exists(tmp_path / "empty-cache") or os.listdir(tmp_path / "empty-cache") == []


# --- the choice, on the command line ----------------------------------------------------------------------

def notices(stderr: bytes) -> list[str]:
    return [l for l in stderr.decode().splitlines() if l.startswith("logetl: Spark parses")]


def test_without_a_jdk_the_python_workers_parse_and_jvm_forced_is_refused(tmp_path):
    missing = spark_missing()
    require(missing is None, missing or "")
    env = jre_only(tmp_path)
    cds = ["--conf", "logetl.jvm.cds=off"]
    p = logetl("branch", "--hdfs", "--master", "local[1]", *cds, "--input", CORPUS_LOG, "--output1",
               str(tmp_path / "b1"), "--output2", str(tmp_path / "b2"), "--trap", str(tmp_path / "t"), env=env)
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert notices(p.stderr) == [
        "logetl: Spark parses with logetl's native kernel in the executors' Python workers: it cannot run in "
        f"their JVMs (no javac beside {tmp_path}/jre/bin/java (building the kernel for the JVM needs a JDK, not "
        "only a JRE))"]
    assert parts(tmp_path / "b1") == corpus("branch.tsv") == parts(tmp_path / "b2")
    assert parts(tmp_path / "t") == corpus("trap.log")
    p = logetl("filter", "--hdfs", "--master", "local[1]", *cds, "--conf", "logetl.parse=jvm", "--input", CORPUS_LOG,
               "--output", str(tmp_path / "f"), env=env)
    assert p.returncode == 2
    assert p.stderr.decode().splitlines() == [
        "Error: --conf logetl.parse=jvm, but the executors' JVMs cannot run logetl's kernel: no javac beside "
        f"{tmp_path}/jre/bin/java (building the kernel for the JVM needs a JDK, not only a JRE)"]
    assert not os.path.exists(tmp_path / "f")


def test_a_library_the_executors_cannot_load_is_named_and_the_python_workers_parse(tmp_path):
    """The check loads the kernel's library in the executors' JVMs: a jar whose library is not one (as one
    built for another platform would fail) is seen before anything is read; the run says so and takes the
    Python workers' path."""
    missing = spark_missing()
    require(missing is None, missing or "")
    from logetl.engines.spark import jvm as spark_jvm

    cache = tmp_path / "cache"
    cache.mkdir()
    good = spark_jvm.jar()
    bad = cache / os.path.basename(good)
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(bad, "w") as dst:
        for item in src.infolist():
            dst.writestr(item, b"not a library\n" * 512 if item.filename.endswith(".so") else src.read(item))
    env = {"LOGETL_CACHE_DIR": str(cache)}
    p = logetl("filter", "--hdfs", "--master", "local[1]", "--conf", "logetl.jvm.cds=off", "--input", CORPUS_LOG,
               "--output", str(tmp_path / "f"), env=env)
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert notices(p.stderr) == [
        "logetl: Spark parses with logetl's native kernel in the executors' Python workers: it cannot run in their "
        "JVMs (logetl's kernel library does not load: invalid ELF header)"]
    assert parts(tmp_path / "f") == corpus("filter.tsv")
    assert "Traceback" not in p.stderr.decode()


def test_the_jvm_path_is_the_default_where_it_can_run(tmp_path):
    missing = spark_missing()
    require(missing is None, missing or "")
    p = logetl("join", "--hdfs", "--master", "local[2]", "--trap", str(tmp_path / "t"), CORPUS_LOG, str(tmp_path / "j"))
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert p.stderr.decode().splitlines()[0] == "logetl: Spark parses with logetl's native kernel in the executors' JVMs"
    assert parts(tmp_path / "j") == corpus("join.tsv")
    assert parts(tmp_path / "t") == corpus("trap.log")
