"""The floor of logetl's parse on Spark: what any run costs before it writes a byte.

    python bench/spark_floor.py LOG MASTER [SETTING=VALUE ...]

A fresh process starts logetl's own session (``SparkEngine``: its driver JVM class archive, logetl's jar
with the application), reads every line of LOG and parses it with logetl's kernel in the executors' JVMs
(``spark_jvm``, the default path), in the splits a run's parse takes (``parse_split_bytes``), into a
``noop`` sink (no check, no output, no counters), and stops. A run cannot be faster than this:
bench/spark.py compares it to the hand-written jobs, so that a ratio that is not met can be told apart
from one that cannot be.
"""
import os
import sys

from pyspark.sql import functions as F

from logetl import contract, formats
from logetl.engines.spark import jvm as spark_jvm
from logetl.engines.spark.engine import SparkEngine
from logetl.engines.spark.native import field_column


def main():
    log, master, settings = sys.argv[1], sys.argv[2], sys.argv[3:]
    engine = SparkEngine(master=master, conf=dict(kv.split("=", 1) for kv in settings))
    spark = engine.shipped()
    for key, value in engine.split_settings([os.path.getsize(log)]).items():
        spark.conf.set(key, value)
    lines = spark.read.option("lineSep", "\n").text(log).select(F.col("value").cast("binary").alias("value"),
                                                                  F.lit(0).alias("_input"))
    fmt = formats.compile_format(None)
    schema = ", ".join([f"{field_column(i)} binary" for i in range(len(contract.FIELDS))]
                       + ["_status tinyint", "value binary", "_sample boolean", "_input int"])
    parsed = spark_jvm.parsed(lines, schema, (None, tuple(range(len(fmt.fields))), 4))
    parsed.write.format("noop").mode("overwrite").save()
    engine.shutdown()


if __name__ == "__main__":
    main()
