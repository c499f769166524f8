"""The Spark engine's SQL step (``assembly.Sql``): the query, translated to Spark SQL by sqlglot
(``sqlstep._to_spark``), over the step's input registered as the temporary view ``input``.

The view holds the input's fields only (not the engine's ``_order``): Spark binds the query when
``spark.sql`` returns, so the view is dropped at once and the next SQL step of the flow registers its own.
Each column is cast to the step's declared type (the local engine casts DuckDB's the same way: a DECIMAL
literal as a float, a timestamp without a zone as one in the session's zone, UTC). A query whose
outermost clause is ``ORDER BY`` gives its rows in that order: ``_order`` is numbered again after it,
so that a ``limit`` or a sink that follows keeps it; without one, the order is not defined.
"""
from __future__ import annotations

from logetl import expressions as E
from logetl.engines.spark.expressions import column
from logetl.sqlstep import INPUT, _to_spark, ordered

#: logetl type -> the Spark SQL type a column of the query's result is cast to
SPARK_TYPES = {E.STRING: "string", E.INTEGER: "bigint", E.FLOAT: "double", E.BOOLEAN: "boolean",
               E.TIMESTAMP: "timestamp"}


def sql_step(node, inputs):
    """The DataFrame of the query over ``inputs[0]`` (the Spark engine's ``OPERATORS`` entry)."""
    from logetl.engines.spark.operators import _renumbered

    df = inputs[0]
    spark = df.sparkSession
    df.select(*[column(f) for f in node.previous[0].fields]).createOrReplaceTempView(INPUT)
    try:
        result = spark.sql(_to_spark(node.query))
    finally:
        spark.catalog.dropTempView(INPUT)
    typed = result.select(*[column(f).cast(SPARK_TYPES[t]).alias(f) for f, t in node.types.items()])
    return _renumbered(typed) if ordered(node.query) else typed
