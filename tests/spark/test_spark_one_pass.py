"""The Spark engine's one-pass steps: a step whose parsed records reach TSV sinks (or only stores for later
steps) through per-record operators only writes every output, its trap and its malformed-line samples with
one Spark action, nothing persisted (``SparkEngine._execute_one_pass``). Bytes, counters and samples must be
the local engine's."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import logetl.api as L
from conftest import CORPUS, corpus, logetl, parts, require, spark_missing
from logetl.contract import FIELDS
from logetl.job import run_flow

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")
#: the corpus's records as a flow reads them: the 27 Branch writes and the one of size '-' it drops (47 lines,
#: 19 of them malformed: tests/data/corpus/counts.json)
FLOW_RECORDS = 28


def two_branches() -> L.Flow:
    """Every per-record operator on the way to two sinks of different fields, one of them empty."""
    parsed = L.read(fields=FIELDS)
    big = (parsed.filter(L.col("response") == "200", name="ok")
           .derive(n=L.col("size").to_int(), name="as_int")
           .filter(L.col("n") > 1000, name="big")
           .rename(ip="client", name="client")
           .derive(kind=L.concat(L.col("response"), L.lit("/"), L.col("client")), name="kind")
           .select("kind", "n", "request", name="fields"))
    nothing = parsed.branch("all").filter(L.col("response") == "999", name="none")
    return L.Flow("two", [big.write("big", name="sink_big"), nothing.write("none", name="sink_none"),
                          parsed.branch("copy").write("copy", name="sink_copy")])


def run_both(tmp_path, flow):
    results = {}
    for engine in ("local", "spark"):
        outs = {tap: str(tmp_path / f"{engine}-{tap}") for tap in ("big", "none", "copy")}
        results[engine] = run_flow(flow, CORPUS_LOG, outs, engine=engine, trap=str(tmp_path / f"{engine}-trap"))
    return results


def test_a_one_pass_step_gives_the_local_engines_bytes_counters_and_samples(spark_session, tmp_path,
                                                                              monkeypatch):
    from logetl.engines.spark import engine as spark_engine

    one_pass = []
    real = spark_engine.SparkEngine._execute_one_pass
    monkeypatch.setattr(spark_engine.SparkEngine, "_execute_one_pass",
                        lambda self, *a: one_pass.append(a[1].name) or real(self, *a))
    results = run_both(tmp_path, two_branches())
    assert one_pass == ["parse"]   # the whole flow is one step, written in one pass
    for tap in ("big", "none", "copy", "trap"):
        assert parts(tmp_path / f"spark-{tap}") == parts(tmp_path / f"local-{tap}"), tap
    assert parts(tmp_path / "spark-none") == b""
    assert parts(tmp_path / "spark-trap") == corpus("trap.log")
    local, spark = results["local"], results["spark"]
    assert spark.written == local.written
    # (an operator that saw no record has no counters on the local engine, zeros on Spark's)
    seen = lambda run: [{op: c for op, c in s.counters.items() if any(c.values())} for s in run.steps]
    assert seen(spark) == seen(local)
    assert spark.steps[0].counters["sink_none"] == {"in": 0, "out": 0}
    assert (spark.lines_read, spark.malformed, spark.dropped_size_dash) == \
        (local.lines_read, local.malformed, local.dropped_size_dash)
    # the samples: the same lines, reasons and texts; the file named as on the local engine (not as Spark's
    # file system names it, file:/...), without the line number (not counted on Spark)
    assert [(r, t) for _, r, t in spark.malformed_samples] == [(r, t) for _, r, t in local.malformed_samples]
    assert [w for w, _, _ in spark.malformed_samples] == [w.rsplit(":", 1)[0] for w, _, _ in local.malformed_samples]
    assert {w for w, _, _ in spark.malformed_samples} == {CORPUS_LOG}


def test_samples_that_hold_a_cr_are_read_whole(spark_session, tmp_path):
    """The samples a one-pass step writes are one line each, split at LF only: a sample line holding a CR
    (a field with a CR in it, line 20 of the corpus) is one sample, not two broken ones."""
    lines = corpus("corpus.log").split(b"\n")
    log = tmp_path / "cr.log"
    log.write_bytes(b"\n".join([lines[19], lines[0], lines[18]]) + b"\n")
    results = {}
    for engine in ("local", "spark"):
        outs = {tap: str(tmp_path / f"{engine}-{tap}") for tap in ("big", "none", "copy")}
        results[engine] = run_flow(two_branches(), str(log), outs, engine=engine, trap=str(tmp_path / f"{engine}-trap"))
    assert [s[1:] for s in results["spark"].malformed_samples] == [s[1:] for s in results["local"].malformed_samples]
    assert [r for _, r, _ in results["spark"].malformed_samples] == ["tab_or_cr_in_field", "tab_or_cr_in_field"]


def test_one_pass_keeps_input_order_when_the_writer_would_sort(tmp_path):
    """Each task writes its rows of every output in input order. Spark's writer falls back to sorting a
    task's remaining rows by output once it holds as many open files as allowed, and a sort that spills
    does not keep the order of equal keys: forced spills every 500 rows would scramble a Branch that hit
    the limit (a command of its own: the spill threshold is a setting of the Spark application)."""
    missing = spark_missing()
    require(missing is None, missing or "")
    log = tmp_path / "in.log"
    subprocess.run([sys.executable, "-m", "logetl", "generate", "--lines", "20000", "--seed", "5", str(log)],
                   check=True)
    args = ["--input", str(log), "--trap", "{}/trap", "--output1", "{}/b1", "--output2", "{}/b2"]
    for engine in ("local", "spark"):
        where = tmp_path / engine
        flags = ["--hdfs", "--master", "local[2]", "--conf", "spark.shuffle.spill.numElementsForceSpillThreshold=500",
                 "--conf", "spark.sql.files.maxPartitionBytes=1500000"] if engine == "spark" else []
        p = logetl("branch", "-q", *flags, *[a.format(where) for a in args])
        assert p.returncode == 0, p.stderr.decode()[-2000:]
    for out in ("b1", "b2", "trap"):
        assert parts(tmp_path / "spark" / out) == parts(tmp_path / "local" / out), out
    assert len(os.listdir(tmp_path / "spark" / "b1")) > 2   # several tasks wrote parts


def three_stores(conflict: bool = False) -> L.Flow:
    """A first step that stores for the next one, nothing else: a Unique of per-record rows, a checkpoint
    no record reaches, and a checkpoint of derived fields; they share the field ``ip`` (one column of the
    file they are written through). ``conflict``: the empty store's ``n`` is a string where the other's
    is an integer, which one file cannot hold (the step is then written the usual way)."""
    parsed = L.read(fields=FIELDS)
    ok = parsed.filter(L.col("response") == "200", name="ok").select("ip", name="ip_only") \
        .unique(name="distinct_ip")
    empty = (parsed.filter(L.col("response") == "999", name="none")
             .derive(n=L.col("size") if conflict else L.col("size").to_int(), name="none_n")
             .select("ip", "n", name="none_fields").checkpoint("empty"))
    scored = parsed.derive(n=L.col("size").to_int(), name="as_int").checkpoint("scored")
    joined = scored.join(ok, on=("ip", "ip"), name="join").select("ip", "n", "request", name="fields") \
        .sort(L.desc("n"), name="by_n")
    return L.Flow("stores", [joined.write("joined", name="sink_joined"), empty.write("none", name="sink_none")])


def test_a_step_that_only_stores_is_one_pass_and_gives_the_local_engines_bytes_and_counters(
        spark_session, tmp_path, monkeypatch):
    from logetl.engines.spark import engine as spark_engine

    one_pass = []
    real = spark_engine.SparkEngine._execute_one_pass
    monkeypatch.setattr(spark_engine.SparkEngine, "_execute_one_pass",
                        lambda self, *a: one_pass.append(a[1].name) or real(self, *a))
    for conflict in (False, True):
        one_pass.clear()
        results = {}
        for engine in ("local", "spark"):
            outs = {tap: str(tmp_path / f"{conflict}-{engine}-{tap}") for tap in ("joined", "none")}
            results[engine] = run_flow(three_stores(conflict), CORPUS_LOG, outs, engine=engine,
                                       trap=str(tmp_path / f"{conflict}-{engine}-trap"))
        assert one_pass == ([] if conflict else ["parse"])   # the first step
        for tap in ("joined", "none", "trap"):
            assert parts(tmp_path / f"{conflict}-spark-{tap}") == parts(tmp_path / f"{conflict}-local-{tap}"), tap
        assert parts(tmp_path / f"{conflict}-spark-trap") == corpus("trap.log")
        assert parts(tmp_path / f"{conflict}-spark-none") == b""
        assert parts(tmp_path / f"{conflict}-spark-joined").count(b"\n") == FLOW_RECORDS   # each ip has a 200
        local, spark = results["local"], results["spark"]
        assert spark.written == local.written
        seen = lambda run: [{op: c for op, c in s.counters.items() if any(c.values())} for s in run.steps]
        assert seen(spark) == seen(local)
        assert spark.steps[0].counters["distinct_ip"] == local.steps[0].counters["distinct_ip"] == {"in": 24, "out": 12}
        assert (spark.lines_read, spark.malformed) == (local.lines_read, local.malformed)
        assert [(r, t) for _, r, t in spark.malformed_samples] == [(r, t) for _, r, t in local.malformed_samples]


def fields_only() -> L.Flow:
    """Sinks that take the parse's records as they are: all fields, some of them reordered and renamed,
    one through a plain branch; nothing filtered, nothing computed."""
    parsed = L.read(fields=FIELDS)
    chosen = parsed.select("size", "ip", "request", name="chosen").rename(ip="client", name="renamed")
    return L.Flow("fields", [chosen.write("chosen", name="sink_chosen"),
                             parsed.branch("copy").write("copy", name="sink_copy"),
                             parsed.write("all", name="sink_all")])


@pytest.mark.parametrize("parse", ["jvm", "python"])
def test_sinks_of_the_parse_as_it_is_are_joined_by_the_executors(spark_session, tmp_path, monkeypatch, parse):
    """A one-pass step whose sinks take the parse's records with no filter and nothing computed has its
    TSV lines made and joined by the executors (their JVMs, or their Python workers: ``join_batches``), a
    few rows per batch: the local engine's bytes, counters and samples, over two inputs (the samples name
    theirs), one of them empty and one with more malformed lines than samples, and batches of a few lines
    (many rows per output)."""
    from logetl.engines.spark import engine as spark_engine

    joined = []
    real = spark_engine.SparkEngine._joined_rows
    monkeypatch.setattr(spark_engine.SparkEngine, "_joined_rows",
                        lambda self, ctx, step, sinks: joined.append(sinks) or real(self, ctx, step, sinks))
    lines = corpus("corpus.log").split(b"\n")
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.log").write_bytes(corpus("corpus.log"))
    (inputs / "b.log").write_bytes(b"")
    (inputs / "c.log").write_bytes(b"\n".join(lines[15:] + lines[:15]) + b"not a line\n\xff\xfe\n" * 4)
    spark_session.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "7")
    try:
        results = {}
        for engine in ("local", "spark"):
            outs = {tap: str(tmp_path / f"{engine}-{tap}") for tap in ("chosen", "copy", "all")}
            results[engine] = run_flow(fields_only(), str(inputs), outs, engine=engine,
                                       trap=str(tmp_path / f"{engine}-trap"),
                                       **({"engine_options": {"conf": {"logetl.parse": parse}}} if engine == "spark" else {}))
    finally:
        spark_session.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert joined == [((4, 0, 2), (0, 1, 2, 3, 4), (0, 1, 2, 3, 4))]
    for tap in ("chosen", "copy", "all", "trap"):
        assert parts(tmp_path / f"spark-{tap}") == parts(tmp_path / f"local-{tap}"), tap
    assert parts(tmp_path / "spark-copy").count(b"\n") == 2 * FLOW_RECORDS
    assert parts(tmp_path / "spark-trap").endswith(b"not a line\n\xff\xfe\n" * 4)
    local, spark = results["local"], results["spark"]
    assert spark.written == local.written
    assert [s.counters for s in spark.steps] == [s.counters for s in local.steps]
    assert (spark.lines_read, spark.malformed, spark.dropped_size_dash) == \
        (local.lines_read, local.malformed, local.dropped_size_dash)
    assert [(r, t) for _, r, t in spark.malformed_samples] == [(r, t) for _, r, t in local.malformed_samples]
    assert [w for w, _, _ in spark.malformed_samples] == [w.rsplit(":", 1)[0] for w, _, _ in local.malformed_samples]


@pytest.mark.parametrize("parse", ["jvm", "python", "builtin"])
@pytest.mark.parametrize("flow", [two_branches, fields_only], ids=["filtered", "joined"])
def test_many_input_files_are_parsed_by_one_operator_over_their_union(spark_session, tmp_path, monkeypatch,
                                                                      flow, parse):
    """The inputs are read (here, 30 small files: one packed read, ``test_spark_packed_inputs``) and the
    reads unioned in input order; the parse is one operator over that union, each line's input index going
    through it. Parsing each read before the union planned one operator per file (500 small files: 146 s
    against 103 s with the union). Over 30 small inputs, malformed lines in a few of them: one
    mapInArrow on the native path (none on the built-in one), and the local engine's bytes, counters and
    samples, each sample naming its own input."""
    from pyspark.sql.classic.dataframe import DataFrame

    lines = corpus("corpus.log").split(b"\n")[:-1]
    inputs = tmp_path / "in"
    inputs.mkdir()
    for i in range(30):
        bad = b"not a line %d\n" % i if i in (3, 17, 29) else b""
        (inputs / f"{i:02d}.log").write_bytes(b"".join(x + b"\n" for x in lines[i % 20: i % 20 + 3]) + bad)
    mapped = []   # the parse's operators: a mapInArrow on the Python workers, a mapPartitions of the JVM's
    real = DataFrame.mapInArrow
    monkeypatch.setattr(DataFrame, "mapInArrow", lambda self, *a, **k: mapped.append("python") or real(self, *a, **k))
    from logetl.engines.spark import jvm as spark_jvm

    for name in ("parsed", "joined"):
        made = getattr(spark_jvm, name)
        monkeypatch.setattr(spark_jvm, name, lambda *a, made=made, **k: mapped.append("jvm") or made(*a, **k))
    results = {}
    for engine in ("local", "spark"):
        outs = {tap: str(tmp_path / f"{engine}-{tap}") for tap in (s.tap for s in flow().sinks)}
        results[engine] = run_flow(flow(), str(inputs), outs, engine=engine, trap=str(tmp_path / f"{engine}-trap"),
                                   **({"engine_options": {"conf": {"logetl.parse": parse}}} if engine == "spark" else {}))
    assert mapped == ([] if parse == "builtin" else [parse])
    for tap in [*(s.tap for s in flow().sinks), "trap"]:
        assert parts(tmp_path / f"spark-{tap}") == parts(tmp_path / f"local-{tap}"), tap
    assert parts(tmp_path / "spark-trap").endswith(b"not a line 29\n")
    local, spark = results["local"], results["spark"]
    assert spark.written == local.written
    assert (spark.lines_read, spark.malformed) == (local.lines_read, local.malformed)
    assert spark.lines_read == 93
    assert [(r, t) for _, r, t in spark.malformed_samples] == [(r, t) for _, r, t in local.malformed_samples]
    assert [w for w, _, _ in spark.malformed_samples] == [w.rsplit(":", 1)[0] for w, _, _ in local.malformed_samples]
    # the samples come from several inputs, each named (a wrong index would name another file)
    assert len({w for w, _, _ in spark.malformed_samples}) > 1
    for where, _, text in spark.malformed_samples:
        assert text.encode() + b"\n" in open(where, "rb").read()


def test_stored_parts_are_read_with_the_schema_in_their_footer_and_no_job(spark_session, tmp_path):
    """Spark's Parquet writer keeps the written frame's schema in each part's footer: the engine reads it
    there (in the driver), so reading a store back runs no job; Spark's own inference ran one per read
    (three one-task jobs in a 2M-line Join). A footer past the first 64 KB read (1,500 columns) is read
    whole; a part that is not Spark's (pyarrow's) has no such schema, and Spark infers it, as before."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from logetl.engines.spark.fs import HadoopFS
    from logetl.engines.spark.engine import SparkEngine

    engine, fs, sc = SparkEngine(), HadoopFS(spark_session), spark_session.sparkContext
    narrow = spark_session.createDataFrame([(1, "a", b"\xff", True, 7), (None, None, None, False, 8)],
                                           "n tinyint, s string, raw binary, ok boolean, _order bigint")
    wide = spark_session.createDataFrame([tuple(range(1500))], ", ".join(f"column_{i:04}_of_a_wide_store int"
                                                                         for i in range(1500)))
    for name, frame in (("narrow", narrow.repartition(2)), ("wide", wide)):
        frame.write.parquet(str(tmp_path / name))
    assert len(fs.read_tail(str(tmp_path / "wide" / sorted(os.listdir(tmp_path / "wide"))[-1]), 1 << 30)) > 1 << 16

    for name, frame in (("narrow", narrow), ("wide", wide)):
        group = f"read-{name}"
        sc.setJobGroup(group, "reading a store back")
        try:
            read = engine._read_parts(fs, str(tmp_path / name))
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
        assert list(sc.statusTracker().getJobIdsForGroup(group)) == [], name
        assert read.schema == frame.schema, name
        assert sorted(read.collect(), key=repr) == sorted(frame.collect(), key=repr), name

    (tmp_path / "arrow").mkdir()
    pq.write_table(pa.table({"s": ["x", "y"]}), tmp_path / "arrow" / "part-00000.parquet")
    assert engine._written_schema(fs, str(tmp_path / "arrow" / "part-00000.parquet")) is None
    sc.setJobGroup("read-arrow", "reading a part that is not Spark's")
    try:
        read = engine._read_parts(fs, str(tmp_path / "arrow"))
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert len(sc.statusTracker().getJobIdsForGroup("read-arrow")) == 1   # Spark's inference, as before
    assert [r.s for r in read.collect()] == ["x", "y"]


def test_a_change_through_hadoops_file_system_that_fails_is_an_oserror_of_one_line(spark_session, tmp_path):
    """What HadoopFS changes fails as LocalFS's would: an OSError with Java's root cause, not a Py4J error
    with its stack trace (a full file system: ENOSPC, see test_read_failures)."""
    from logetl.engines.spark.fs import HadoopFS

    fs = HadoopFS(spark_session)
    (tmp_path / "file").write_bytes(b"x")
    below = str(tmp_path / "file" / "sub")
    failures = []
    for change in (lambda: fs.makedirs(below), lambda: fs.touch(below), lambda: fs.write_text_atomic(below, "x")):
        with pytest.raises(OSError) as caught:
            change()
        failures.append(str(caught.value))
    assert failures == [f"cannot make directory {below!r}: Parent path is not a directory: {tmp_path}/file",
                        f"cannot write {below!r}: Destination exists and is not a directory: {tmp_path}/file",
                        f"cannot write {below!r}: Destination exists and is not a directory: {tmp_path}/file"]
    assert (tmp_path / "file").read_bytes() == b"x"


def test_split_sizes_of_a_parse_come_in_whole_waves():
    """``parse_split_bytes``, of the largest file read on its own: none while Spark's own splits of it take
    one wave of the cores; past that, the fewest whole waves of one split per core with splits of at most
    ``most`` bytes, all of a size."""
    from logetl.engines.spark.parse import parse_split_bytes

    mb = 1024 * 1024
    assert parse_split_bytes(200 * mb, 2, 128 * mb, 256 * mb) is None        # Spark: 2 splits of 100 MB
    assert parse_split_bytes(256 * mb, 2, 128 * mb, 256 * mb) is None
    assert parse_split_bytes(450 * mb, 2, 128 * mb, 256 * mb) == 225 * mb    # Spark: 128, 128, 128, 66
    assert parse_split_bytes(450 * mb + 1, 2, 128 * mb, 256 * mb) == 225 * mb + 1
    assert parse_split_bytes(2250 * mb, 2, 128 * mb, 256 * mb) == 225 * mb   # 5 waves, not 18 splits
    assert parse_split_bytes(1000 * mb, 8, 128 * mb, 256 * mb) is None       # Spark: one wave of 8
    assert parse_split_bytes(2000 * mb, 8, 128 * mb, 256 * mb) == 250 * mb   # one wave of 8, not 16 splits
    assert parse_split_bytes(1000 * mb, 1, 128 * mb, 256 * mb) == 250 * mb   # 4 waves of 1
    assert parse_split_bytes(300 * mb, 0, 128 * mb, 256 * mb) == 150 * mb    # (no cores known: one)


def test_the_cores_a_split_size_counts_on_are_known_ones_only():
    """``SparkEngine._cores``: a local master's threads; a cluster's cores asked for (or more registered);
    None with dynamic allocation or with nothing asked for (a few executors may have registered yet)."""
    from logetl.engines.spark.engine import SparkEngine

    class Context:
        def __init__(self, master, parallelism, **conf):
            self.master, self.defaultParallelism = master, parallelism
            self.conf = {k.replace("_", "."): v for k, v in conf.items()}

        def getConf(self):
            return type("Conf", (), {"get": lambda _, key: self.conf.get(key)})()

    cores = lambda *a, **conf: SparkEngine._cores(type("Spark", (), {"sparkContext": Context(*a, **conf)})())
    assert cores("local[2]", 2) == 2
    assert cores("local[*]", 8) == 8
    assert cores("spark://h:7077", 2) is None
    assert cores("spark://h:7077", 2, spark_cores_max="16") == 16
    assert cores("spark://h:7077", 24, spark_cores_max="16") == 24
    assert cores("yarn", 2, spark_executor_instances="4", spark_executor_cores="3") == 12
    assert cores("yarn", 2, spark_executor_instances="4") is None
    assert cores("yarn", 2, spark_cores_max="16", spark_dynamicAllocation_enabled="true") is None
    assert cores("local-cluster[2,1,1024]", 2) is None
    assert cores("spark://h:7077", 2, spark_cores_max="many") is None


def test_a_parse_larger_than_a_wave_is_read_in_whole_waves_unless_the_split_size_is_set(spark_session, tmp_path,
                                                                                           monkeypatch):
    """The largest input file that Spark would split into more than a wave of tasks makes logetl's split
    size: whole waves of one split per core. For the test, logetl takes Spark's split to be 64 KB (Spark's
    own stays 128 MB) and caps its own at 128 KB, and Spark's cost of opening a file is 1 KB (so that the
    two files are read one by one, each capped at its share per core): the 600 KB file is 3 waves of 2
    splits of 100 KB, the 200 KB one 2 splits; the local engine's bytes. A split size the user set is
    Spark's to use (here 64 KB: Spark's own rule); the session has its own values back after each step."""
    from logetl.engines.spark.engine import SparkEngine
    from logetl.engines.spark.session import _session_conf

    kb = 1024
    monkeypatch.setattr(SparkEngine, "_spark_split", staticmethod(lambda conf: 64 * kb))
    monkeypatch.setattr(SparkEngine, "PARSE_SPLIT_MOST", 128 * kb)
    one = corpus("corpus.log")
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.log").write_bytes(one * -(-600 * kb // len(one)))
    (inputs / "b.log").write_bytes(one * -(-200 * kb // len(one)))
    sizes = [os.path.getsize(inputs / n) for n in ("a.log", "b.log")]

    def spark_tasks(split: int) -> int:   # Spark's splits of each file read on its own (FilePartition)
        most = lambda size: min(split, max(kb, (size + kb) // 2))
        return sum(-(-size // most(size)) for size in sizes)

    def parse_tasks(name: str) -> int:   # the tasks of the scan of the run's parse: its first job's stage
        outs = {"output1": str(tmp_path / f"{name}-1"), "output2": str(tmp_path / f"{name}-2")}
        run = run_flow(branch_flow(), str(inputs), outs, engine="spark")
        tracker = spark_session.sparkContext.statusTracker()
        first = min(tracker.getJobIdsForGroup(f"logetl-{run.run_id}-parse"))
        return tracker.getStageInfo(min(tracker.getJobInfo(first).stageIds)).numTasks

    run_flow(branch_flow(), str(inputs), {"output1": str(tmp_path / "local-1"), "output2": str(tmp_path / "local-2")})
    with _session_conf(spark_session, {"spark.sql.files.openCostInBytes": str(kb)}):
        split = -(-sizes[0] // 6)
        assert parse_tasks("waves") == spark_tasks(split) == 6 + 2
        assert spark_session.conf.get("spark.sql.files.maxPartitionBytes", None) is None
        with _session_conf(spark_session, {"spark.sql.files.maxPartitionBytes": str(64 * kb)}):
            assert parse_tasks("set") == spark_tasks(64 * kb) == 10 + 4
            assert spark_session.conf.get("spark.sql.files.maxPartitionBytes") == str(64 * kb)
    for name in ("waves", "set"):
        assert parts(tmp_path / f"{name}-1") == parts(tmp_path / "local-1") == parts(tmp_path / f"{name}-2")


def branch_flow() -> L.Flow:
    from logetl.programs import branch

    return branch.flow()


def test_a_setting_put_back_after_a_failed_step_does_not_hide_the_steps_error():
    """``_session_conf`` puts the session's values back after its block, each on its own; when the block
    failed and the JVM no longer answers (it died in the block), the block's error is the one raised (so
    that the run's failure is reported as itself), with a note of what was not put back; after a block
    that succeeded, a failure to put a value back is raised."""
    from logetl.engines.spark.session import _session_conf

    class Gone:   # a session whose JVM died in the block: values are read and set before, not after
        def __init__(self):
            self.values, self.alive = {}, True

        def get(self, key, default=None):
            return self.values.get(key, default)

        def set(self, key, value):
            if not self.alive:
                raise ConnectionError("Answer from Java side is empty")
            self.values[key] = value

        unset = lambda self, key: self.set(key, None)

    spark = type("Spark", (), {})()
    spark.conf = Gone()
    with pytest.raises(MemoryError, match="the step's own") as caught:
        with _session_conf(spark, {"k": "v", "k2": "v2"}):
            assert spark.conf.values == {"k": "v", "k2": "v2"}
            spark.conf.alive = False
            raise MemoryError("the step's own")
    assert caught.value.__notes__ == ["(the session's k, k2 could not be put back: Answer from Java side is empty)"]
    spark.conf = Gone()
    with pytest.raises(ConnectionError, match="Answer from Java side is empty"):
        with _session_conf(spark, {"k": "v"}):
            spark.conf.alive = False


def test_the_sessions_end_leaves_the_accumulator_servers_shutdown_to_a_thread():
    """PySpark's stop() shuts its accumulator server down and waits for the server's loop, which looks every
    0.5 s: the engine's shutdown has it done by a daemon thread instead, which ends the loop and closes the
    socket all the same."""
    require(spark_missing() is None, spark_missing() or "")
    import threading

    from pyspark.accumulators import _start_update_server

    from logetl.engines.spark.session import ACCUMULATOR_SHUTDOWN_THREAD
    from logetl.engines.spark.engine import SparkEngine

    class Context:   # what the engine's shutdown touches of a SparkContext
        _accumulatorServer = _start_update_server("token", False)

        def setLogLevel(self, level):
            pass

    class Session:   # a session whose stop() shuts the accumulator server as PySpark's does
        sparkContext = Context()

        def stop(self):
            self.sparkContext._accumulatorServer.shutdown()

    server = Context._accumulatorServer
    ran_in, done = [], threading.Event()
    real = server.shutdown
    server.shutdown = lambda: (ran_in.append(threading.current_thread()), real(), done.set())
    engine = SparkEngine(master="local[1]")
    engine._spark, engine._owns_session = Session(), True
    engine.shutdown()
    assert done.wait(30)
    assert [(t.name, t.daemon) for t in ran_in] == [(ACCUMULATOR_SHUTDOWN_THREAD, True)]
    assert server.server_shutdown and server.socket.fileno() == -1
    assert engine._spark is None


def test_a_unix_socket_accumulator_server_is_shut_down_as_pyspark_does(tmp_path):
    """A server on a Unix domain socket (``spark.python.unix.domain.socket.enabled``) removes its socket file
    when its shutdown ends: left to a thread the process may not wait for, the file would stay behind.
    Its shutdown stays PySpark's own."""
    require(spark_missing() is None, spark_missing() or "")
    from pyspark.accumulators import _start_update_server

    from logetl.engines.spark.session import _accumulators_stopped_aside

    path = str(tmp_path / "accumulators.sock")

    class Context:
        _accumulatorServer = _start_update_server(None, True, path)

    server = Context._accumulatorServer
    _accumulators_stopped_aside(Context)
    assert "shutdown" not in vars(server)
    server.shutdown()
    assert not os.path.exists(path)


def test_a_local_driver_keeps_c2_and_the_setting_that_keeps_it_on_a_cluster(spark_session):
    """On a local master the driver's JVM runs the tasks: the session the engine launched has the JVM's
    tiered compilers (and the throughput collector); ``logetl.jvm.jit=tiered`` keeps them on a cluster too
    (test_spark_cluster.py: a cluster's driver gets C1 only)."""
    from logetl.engines.spark.session import DRIVER_C1
    from logetl.engines.spark.engine import SparkEngine

    arguments = list(spark_session._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert DRIVER_C1 not in arguments and "-XX:+UseParallelGC" in arguments
    engine, tiered = SparkEngine(), SparkEngine(conf={"logetl.jvm.jit": "tiered"})
    assert [engine._driver_compilers(m) for m in ("spark://127.0.0.1:7077", "local-cluster[2,1,1024]", "yarn")] \
        == [[DRIVER_C1]] * 3
    assert [engine._driver_compilers(m) for m in ("local", "local[2]", "local[*]", None)] == [[]] * 4
    assert tiered._driver_compilers("spark://127.0.0.1:7077") == [] and "logetl.jvm.jit" not in tiered.conf
