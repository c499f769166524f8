"""The Spark engine's operators: one function per assembly node (``OPERATORS``) from its inputs'
DataFrames to its own, and, for each per-record node, its view over a one-pass step's parsed rows (``VIEWS``)."""
from __future__ import annotations

import re

from logetl import assembly
from logetl.engines.spark.expressions import AGGREGATES, Compiler, column
from logetl.io.outputs import NAME_MAX
from logetl.engines.spark.errors import _ESCAPED_CLASS


ORDER = "_order"


def _bad_partition(field: str):
    """Whether a row's value of partition field ``field`` makes no directory name (the Column): it holds a
    NUL, or its name ``FIELD=VALUE``, escaped as ``partition_name`` escapes it, passes 255 bytes."""
    from pyspark.sql import functions as F

    value = column(field).cast("string")
    escaped = F.length(value) - F.length(F.regexp_replace(value, _ESCAPED_CLASS, ""))
    return value.rlike("\\x00") | (F.octet_length(value) + 2 * escaped > NAME_MAX - 1 - len(field.encode()))


def _metrics(observation) -> dict:
    """An observation's metrics, read after its action succeeded. A plan with no partitions (an empty
    input) reports none: it saw no rows, so every metric is zero."""
    try:
        return dict(observation.get)
    except Exception:
        return {}


def _part_key(name: str) -> tuple:
    """Where a part file Spark wrote falls in the output: by task (partition) number, then by file within
    the task (``c000``, ``c001``, ... when a task rolls over to a new file), numerically."""
    m = re.match(r"part-(\d+)-.*-c(\d+)(\..*)?$", name)
    return (int(m.group(1)), int(m.group(2)), name) if m else (-1, -1, name)


# --- the operator table ---------------------------------------------------------------------------------------
# Each entry: function(node, inputs) -> DataFrame, ``inputs`` the DataFrames of ``node.previous``. A frame
# carries ``_order`` while its order is defined (input order, or a sort's order); operators that define an
# order (Sort, Top, a join whose held side is ordered) re-assign it, so that what follows (Limit, another
# Sort, a sink's part order) follows theirs.

def _keep_order(df) -> list:
    return [ORDER] if ORDER in df.columns else []


def _renumbered(df):
    """``df`` with ``_order`` re-assigned in its partition order (partition index, then row within the
    partition: increasing along the order the partitions hold)."""
    from pyspark.sql import functions as F

    return df.withColumn(ORDER, F.monotonically_increasing_id())


def _sort_key(field: str, descending: bool):
    # null is the smallest value: first ascending, last descending
    return column(field).desc_nulls_last() if descending else column(field).asc_nulls_first()


def _pass(node, inputs):
    return inputs[0]            # Pipe, Checkpoint: the records as they are


def _filter(node, inputs):
    df = inputs[0]
    return df.filter(Compiler(node.previous[0].types)(node.predicate))   # null drops the record


def _select(node, inputs):
    df = inputs[0]
    return df.select(*[column(f) for f in node.keep], *_keep_order(df))


def _rename(node, inputs):
    df = inputs[0]
    # one projection: the renames happen at once, so a swap (a -> b, b -> a) is a swap
    return df.select(*[column(f).alias(node.mapping.get(f, f)) for f in df.columns])


def _derive(node, inputs):
    df = inputs[0]
    compile_ = Compiler(node.previous[0].types)
    # one projection: every computed field reads the input's fields
    return df.withColumns({f: compile_(e) for f, e in node.computed.items()})


def _unique(node, inputs):
    return inputs[0].select(*[column(f) for f in node.fields]).distinct()   # a hash shuffle; nulls equal


def _group_by(node, inputs):
    compile_ = Compiler(node.previous[0].types, order=column(ORDER) if ORDER in inputs[0].columns else None)
    aggs = [AGGREGATES[type(a)](compile_, a).alias(f) for f, a in node.aggregates.items()]
    return inputs[0].groupBy(*[column(k) for k in node.keys]).agg(*aggs)   # nulls form one group


HELD_KEY = "__logetl_held_key"


HELD_ORDER = "__logetl_held_order"


def _hash_join(node, inputs):
    from pyspark.sql import functions as F

    held, stream = inputs
    ordered_held = ORDER in held.columns and ORDER in stream.columns
    held = held.select(column(node.held_key).alias(HELD_KEY), *[column(f) for f in node.held_fields],
                       *([column(ORDER).alias(HELD_ORDER)] if ordered_held else []))
    # the held side is broadcast to every task of the streamed side, which is not moved: the output keeps
    # the streamed side's partitions and their order; an equality never matches a null key
    joined = stream.join(F.broadcast(held), column(node.stream_key) == column(HELD_KEY), node.how)
    out = joined.select(*[column(f) for f in node.fields], *_keep_order(stream),
                        *([HELD_ORDER] if ordered_held else []))
    if not ordered_held:
        return out
    # a streamed record's matches come in the hash table's order: put them in the held side's order
    # (within each partition: no shuffle), then number the records again, as several share one _order
    return _renumbered(out.sortWithinPartitions(ORDER, HELD_ORDER).drop(HELD_ORDER))


def _sort(node, inputs):
    # A global sort: Spark samples the keys, range-partitions the rows by them (every task sorts one key
    # range) and numbers the ranges in key order, so partition i precedes partition i+1. With _order last
    # the keys are a total order, so the result does not depend on where the sampled bounds fall (nor on
    # how adaptive execution coalesces adjacent ranges). _order is then re-assigned in sorted order.
    df = inputs[0]
    keys = [_sort_key(f, d) for f, d in node.keys] + [column(o).asc() for o in _keep_order(df)]
    return _renumbered(df.orderBy(*keys))


def _limit(node, inputs):
    from pyspark.sql import functions as F

    df = inputs[0]
    if node.n == 0:
        # Spark would replace a limit 0 (or a filter on a constant false) by an empty relation and skip its
        # input, and with it the counters observed there; a test it cannot fold passes nothing, after the
        # input has been counted in, as on the local engine
        return df.filter(F.spark_partition_id() < 0)
    if ORDER not in df.columns:
        return df.limit(node.n)     # an input with no defined order: some n records
    # the first n by _order: a top-n per task, then of those (no full sort, one small result partition)
    return df.orderBy(column(ORDER).asc()).limit(node.n)


def _top(node, inputs):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = inputs[0]
    order = [column(o).asc() for o in _keep_order(df)]
    by = [_sort_key(f, d) for f, d in node.by_keys] + order
    if not node.per:
        return _renumbered(df.orderBy(*by).limit(node.n))
    # a window per group (a hash shuffle by the group; Spark keeps only n rows per group and task before
    # it), then the output order: per ascending, by, input order
    rank = "__logetl_rank"
    window = Window.partitionBy(*[column(p) for p in node.per]).orderBy(*by)
    kept = df.withColumn(rank, F.row_number().over(window)).filter(F.col(rank) <= node.n).drop(rank)
    return _renumbered(kept.orderBy(*[_sort_key(p, False) for p in node.per], *by))


# --- times: visits


def _visits(node, inputs):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = inputs[0]
    order = [column(o).asc() for o in _keep_order(df)]
    t = column(node.time)
    # a window per client in time order, ties in input order: the previous record's time (lag), and the
    # visit as the running count of the records that start one
    window = Window.partitionBy(*[column(f) for f in node.by]).orderBy(t.asc_nulls_first(), *order)
    gap = F.unix_seconds(t) - F.unix_seconds(F.lag(t).over(window))
    starts = t.isNotNull() & F.coalesce(gap > node.gap_minutes * 60, F.lit(True))
    running = window.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    visit = F.when(t.isNotNull(), F.sum(starts.cast("long")).over(running))
    numbered = df.withColumn(node.field, visit)
    return _renumbered(numbered.orderBy(*[_sort_key(f, d) for f, d in node.keys], *order))


#: the Spark engine's operator table: one entry per assembly node class (Source, Parse and Sink are the
#: step's roots and actions, handled by ``execute_step``)
OPERATORS = {
    assembly.Pipe: _pass,
    assembly.Checkpoint: _pass,
    assembly.Filter: _filter,
    assembly.Select: _select,
    assembly.Rename: _rename,
    assembly.Derive: _derive,
    assembly.Unique: _unique,
    assembly.GroupBy: _group_by,
    assembly.HashJoin: _hash_join,
    assembly.Sort: _sort,
    assembly.Limit: _limit,
    assembly.Top: _top,
}


OPERATORS[assembly.Visits] = _visits


def _sql(node, inputs):
    from logetl.engines.spark.sql import sql_step  # it uses this module's _renumbered

    return sql_step(node, inputs)


OPERATORS[assembly.Sql] = _sql


def _pass_view(node, cond, cols):
    return cond, cols           # Pipe, Checkpoint, Sink: the records as they are


def _filter_view(node, cond, cols):
    from pyspark.sql import functions as F

    # null drops the record
    return cond & F.coalesce(Compiler(node.previous[0].types, cols)(node.predicate), F.lit(False)), cols


def _select_view(node, cond, cols):
    return cond, {f: cols[f] for f in node.keep}


def _rename_view(node, cond, cols):
    return cond, {node.mapping.get(f, f): c for f, c in cols.items()}


def _derive_view(node, cond, cols):
    compile_ = Compiler(node.previous[0].types, cols)   # every computed field reads the input's fields
    return cond, {**cols, **{f: compile_(e) for f, e in node.computed.items()}}


#: the one-pass planner's table: a per-record node (its traits) as expressions over the parsed rows, from
#: its input's (the condition a parsed row meets to reach it, its fields as Columns) to its own; one entry
#: per per-record node class, beside its entry in ``OPERATORS``
VIEWS = {
    assembly.Pipe: _pass_view,
    assembly.Checkpoint: _pass_view,
    assembly.Filter: _filter_view,
    assembly.Select: _select_view,
    assembly.Rename: _rename_view,
    assembly.Derive: _derive_view,
    assembly.Sink: _pass_view,
}
