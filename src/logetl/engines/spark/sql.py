"""The Spark engine's SQL node (``assembly.Sql``, of ``pipe.sql`` and ``logetl sql``): the query,
translated to Spark SQL by sqlglot (``dialect.to_spark``), over the node's input registered as a temporary
view of a name of its own (the query's table renamed to it).

The view holds the input's fields only (not the engine's ``_order``). Spark binds the query when
``spark.sql`` returns (the plan keeps the view's own plan), so the view is dropped at once, whether the
query bound or not: a run leaves no view in the session's catalog. Each column is cast to the node's
declared type (the local engine casts DuckDB's the same way: a DECIMAL literal as a float, a timestamp
without a zone as one in the session's zone, UTC). A query whose outermost clause is ``ORDER BY`` gives its
rows in that order: ``_order`` is numbered again after it, so that a ``limit`` or a sink that follows keeps
it; without one, the order is not defined.
"""
from __future__ import annotations

import itertools
import os
import threading

from logetl import expressions as E
from logetl.engines.spark.expressions import column
from logetl.sql.dialect import to_spark

#: logetl type -> the Spark SQL type a column of the query's result is cast to
SPARK_TYPES = {E.STRING: "string", E.INTEGER: "bigint", E.FLOAT: "double", E.BOOLEAN: "boolean",
               E.TIMESTAMP: "timestamp"}
#: the prefix of the temporary views SQL nodes register
VIEW_PREFIX = "logetl_sql_"

_views = itertools.count(1)
_views_lock = threading.Lock()


def sql_step(node, inputs):
    """The DataFrame of the query over ``inputs[0]`` (the Spark engine's ``OPERATORS`` entry)."""
    from pyspark.sql import functions as F

    from logetl.engines.spark.operators import _renumbered

    df = inputs[0]
    spark = df.sparkSession
    with _views_lock:
        view = f"{VIEW_PREFIX}{os.getpid()}_{next(_views)}"
    df.select(*[column(f) for f in node.previous[0].fields]).createOrReplaceTempView(view)
    try:
        result = spark.sql(to_spark(node.query, tables={node.table: view}))
    finally:
        spark.catalog.dropTempView(view)
    typed = result.select(*[F.col(f"`{c}`").cast(SPARK_TYPES[node.types[f]]).alias(f)
                            for c, f in zip(result.columns, node.fields)])
    return _renumbered(typed) if node.ordered else typed
