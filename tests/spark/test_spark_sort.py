"""Spark sorts in parallel: Sort is a global sort, range-partitioned by its keys, so no partition
holds all the rows; the output is one part per non-empty key range, and the parts concatenated in name
order are the local engine's bytes. Real Spark (the shared ``local[2]`` session, 4 shuffle partitions)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import parts
from logetl.job import run_program

LINES = 200_000     # the Join's sorted rows (about 7 MB) outgrow what adaptive execution merges into one task


@pytest.fixture(scope="module")
def big_log(tmp_path_factory):
    path = tmp_path_factory.mktemp("spark-sort") / "access.log"
    subprocess.run([sys.executable, "-m", "logetl", "generate", "--lines", str(LINES), "--seed", "3", str(path)],
                   check=True, capture_output=True)
    return str(path)


def run_both(program, log, tmp_path):
    """The program on both engines: (local result, local bytes, spark result, spark output directory)."""
    results = {}
    for engine in ("local", "spark"):
        out = str(tmp_path / f"{program}-{engine}")
        results[engine] = (run_program(program, log, {"output": out}, engine=engine, monitor=False), out)
    (local, local_out), (spark, spark_out) = results["local"], results["spark"]
    assert sorted(os.listdir(local_out)) == ["_SUCCESS", "part-00000"]
    return local, parts(local_out), spark, spark_out


def non_empty_parts(directory) -> list[str]:
    names = sorted(n for n in os.listdir(directory) if n.startswith("part-"))
    assert names == [f"part-{i:05d}" for i in range(len(names))], names   # numbered without gaps
    return [n for n in names if os.path.getsize(os.path.join(directory, n))]


def same_counters(local, spark):
    assert spark.lines_read == local.lines_read
    assert spark.malformed == local.malformed
    assert spark.written == local.written
    # every operator's records in and out, including those below the sort: the range exchange samples its
    # input in a job of its own, which must not count those records twice
    assert [s.counters for s in spark.steps] == [s.counters for s in local.steps]


def test_join_writes_several_sorted_parts_that_concatenate_to_the_local_bytes(spark_session, big_log, tmp_path):
    local, expected, spark, out = run_both("join", big_log, tmp_path)
    assert len(non_empty_parts(out)) > 1, "one task sorted all the rows"
    assert parts(out) == expected
    same_counters(local, spark)


def test_filter_sorts_in_parallel_too(spark_session, big_log, tmp_path):
    """Filter's few thousand addresses fit in one task, so adaptive execution merges the key ranges into one
    part; without that merging the ranges show: several parts, still the local engine's bytes."""
    spark_session.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
    try:
        local, expected, spark, out = run_both("filter", big_log, tmp_path)
    finally:
        spark_session.conf.unset("spark.sql.adaptive.coalescePartitions.enabled")
    assert len(non_empty_parts(out)) > 1, "one task sorted all the rows"
    assert parts(out) == expected
    same_counters(local, spark)


def test_the_sort_plan_range_partitions_by_the_keys_then_input_order(spark_session):
    from pyspark.sql import functions as F

    from logetl import programs
    from logetl.engines.spark.operators import ORDER
    from logetl.engines.spark.engine import SparkEngine

    df = spark_session.range(0, 1000, numPartitions=3).select(
        (F.col("id") % 7).alias("score"), F.col("id").alias(ORDER))
    node = programs.get("join").node("sort_score")     # score descending, stable
    plan = SparkEngine()._apply(node, [df])._jdf.queryExecution().executedPlan().toString()
    assert "rangepartitioning(score#" in plan and "DESC NULLS LAST, _order#" in plan, plan
    assert ", 4)" in plan, plan            # spark.sql.shuffle.partitions key ranges, not one
    assert "SinglePartition" not in plan and "RoundRobinPartitioning(1)" not in plan, plan


def test_part_files_are_numbered_in_task_order_past_100000_tasks():
    from logetl.engines.spark.operators import _part_key

    spark_names = ["part-100000-u-c000.txt", "part-99999-u-c001.txt", "part-00007-u-c000.txt.gz",
                   "part-99999-u-c000.txt"]
    assert sorted(spark_names, key=_part_key) == [
        "part-00007-u-c000.txt.gz", "part-99999-u-c000.txt", "part-99999-u-c001.txt", "part-100000-u-c000.txt"]
