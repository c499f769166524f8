"""The Spark engine, by concern: the engine itself (``engine``), the expressions' compiler (``expressions``),
the driver JVM's launch and class archive (``launch``, ``cds``), logetl's kernel in the executors' JVMs
(``jvm``) or Python workers (``native``), stage progress (``progress``) and signals (``signals``).

Importing the package imports none of them: the executors' Python workers import only ``native``, and
``SparkEngine`` is loaded when first asked for.
"""
from __future__ import annotations


def __getattr__(name: str):
    if name == "SparkEngine":
        from logetl.engines.spark.engine import SparkEngine
        return SparkEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
