"""The floor of logetl's native parse path on Spark: what any run of it costs before parsing a byte.

    python bench/spark_floor.py LOG MASTER [SETTING=VALUE ...]

A fresh process starts logetl's own session (``SparkEngine``: its driver JVM class archive, the packed
venv of spark.archives added while the executors start), sends every line of LOG through ``mapInArrow``
to the executors' Python workers, which give back nothing (a ``noop`` sink: no parse, no output, no
check), and stops. The native path cannot be faster than this: bench/spark.py compares it to the
hand-written jobs, so that a ratio that is not met can be told apart from one that cannot be.
"""
import sys

from pyspark.sql import functions as F

from logetl.engines.spark import SparkEngine


def main():
    log, master, settings = sys.argv[1], sys.argv[2], sys.argv[3:]
    engine = SparkEngine(master=master, conf=dict(kv.split("=", 1) for kv in settings))
    spark = engine.shipped()
    lines = spark.read.option("lineSep", "\n").text(log).select(F.col("value").cast("binary").alias("value"))
    nothing = lines.mapInArrow(lambda batches: (b.slice(0, 0) for b in batches), "value binary")
    nothing.write.format("noop").mode("overwrite").save()
    engine.shutdown()


if __name__ == "__main__":
    main()
