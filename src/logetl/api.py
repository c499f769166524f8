"""The public API: define a flow of your own, then run it with ``logetl run FLOW.py`` (or from Python with
``logetl.job.run_flow(flow, input, {tap: path})``), on the local engine or on Spark.

A flow is a pipe assembly, in the spirit of Cascading's pipes and Beam's transforms: the builder calls
only *describe* the computation, fields and types are checked at once (a mistake fails when the flow is
defined, before any data is read), and every engine runs the same description with the same bytes::

    import logetl.api as L

    def flow(fmt):
        logs = L.read(fmt)                                       # ip, time, request, response, size
        hourly = (logs.derive(hour=L.hour(L.col("time")))
                      .filter(L.col("hour").is_not_null())
                      .group_by("hour", "response").agg(count=L.count())
                      .sort("hour", "response"))
        return L.Flow("status_by_hour", [hourly.write("counts")])

The operators, each documented with its memory and ordering contract (``logetl.assembly``):
``read`` (a source with a log format), ``filter``, ``select``, ``rename``, ``derive``, ``unique``,
``group_by(...).agg(...)``, ``join`` (inner, left), ``sort``, ``limit``, ``top``, ``checkpoint``,
``branch`` and ``write`` (a sink). The expressions (``logetl.expressions``) are the portable set both
engines compile: comparisons, ``& | ~``, ``is_in``, ``starts_with``/``ends_with``/``contains``,
``matches`` (a portable regex subset), ``substring``, ``lower``/``upper``, ``split_part``, ``concat``,
``to_int``, arithmetic, ``coalesce``, ``crc32``, ``day`` and ``hour``; numbers: a ``float`` type with true
division ``/``, ``round``, ``to_float``/``to_string``/``cast``, and conditionals ``when(c).then(v)...
.otherwise(v)``. The aggregates: ``count``, ``sum``, ``min``, ``max``, ``count_distinct``, ``avg``, ``median``
and ``percentile``, each restricted to the records where a condition holds with ``where=``
(``count(where=L.col("response") == "404")``).
"""
from __future__ import annotations

from logetl import formats
from logetl.assembly import AssemblyError, Flow, Parse, Pipe, Source
from logetl.expressions import (
    Coalesce, Col, Concat, Count, CountDistinct, Crc32, Day, Expr, ExpressionError, Hour, Lit, Max, Min, Sum)
from logetl.expressions import Avg, Median, Percentile, When  # numbers
from logetl.expressions import cast as _cast
from logetl.expressions import when as _when

__all__ = [
    "Flow", "Pipe", "Expr", "AssemblyError", "ExpressionError", "read", "col", "lit", "asc", "desc",
    "concat", "coalesce", "crc32", "day", "hour", "count", "sum", "min", "max", "count_distinct",
]


def read(format=None, fields=None, tap: str = "input", name: str | None = None) -> Parse:
    """The flow's input, parsed with log format ``format``: a ``logetl.formats.LogFormat`` (what
    ``logetl run`` passes a flow function), a preset name (``combined``, ``common``, ``vhost_combined``,
    ``nginx``), an Apache ``LogFormat`` or nginx ``log_format`` string, or None for ``combined``.
    ``fields``: the format's fields to keep, in that order (default: all; ``combined`` has ``ip, time,
    request, response, size``). Malformed lines are counted and trapped; records whose size is ``-`` are
    dropped (the line contract), whichever fields are kept. ``tap`` names the input in ``explain`` and the
    monitor; a flow reads one input (a run binds one, ``--input``): read it once and branch."""
    fmt = format if isinstance(format, formats.LogFormat) or format is None else formats.compile_format(format)
    if isinstance(fields, str):     # not a list of its characters ("the log format has no field 'i'")
        raise AssemblyError(f"read: fields takes a list of field names, not the string {fields!r}: "
                            f"fields=[{fields!r}]")
    if fields is not None and not isinstance(fields, (list, tuple)):
        raise AssemblyError(f"read: fields takes a list of field names, not {fields!r}")
    for f in fields or ():
        if not isinstance(f, str):
            raise AssemblyError(f"read: a field is a name, not {f!r}")
    return Parse(name or "parse", Source(tap, tap), fmt, keep=tuple(fields) if fields else None)


def col(name: str) -> Col:
    """The value of a field."""
    return Col(name)


def lit(value) -> Lit:
    """A constant string, integer, float (finite) or boolean."""
    return Lit(value)


def asc(field: str) -> tuple[str, bool]:
    """An ascending sort key (the default for a bare field name)."""
    return (field, False)


def desc(field: str) -> tuple[str, bool]:
    """A descending sort key."""
    return (field, True)


def concat(*values) -> Concat:
    return Concat(*values)


def coalesce(*values) -> Coalesce:
    return Coalesce(*values)


def crc32(value) -> Crc32:
    return Crc32(value)


def day(time) -> Day:
    """``YYYY-MM-DD`` of an access-log time field; null when the time is not valid."""
    return Day(time)


def hour(time) -> Hour:
    """``YYYY-MM-DDTHH`` of an access-log time field; null when the time is not valid."""
    return Hour(time)


def count(value=None, where=None) -> Count:
    """``count()``: records in the group; ``count(x)``: records where ``x`` is not null; ``where=c``: of
    those, the ones where ``c`` is true."""
    return Count(value, where)


def sum(value, where=None) -> Sum:  # noqa: A001 - the aggregate's name
    """The sum of an integer (``where=c``: over the records where ``c`` is true)."""
    return Sum(value, where)


def min(value, where=None) -> Min:  # noqa: A001
    return Min(value, where)


def max(value, where=None) -> Max:  # noqa: A001
    return Max(value, where)


def count_distinct(value, where=None) -> CountDistinct:
    return CountDistinct(value, where)


# --- numbers: float, casts, rounding, conditionals, avg/median/percentile ------------------------------

__all__ += ["when", "to_float", "to_string", "cast", "round", "avg", "median", "percentile"]


def when(condition) -> When:
    """The start of a conditional: ``when(c1).then(v1).when(c2).then(v2).otherwise(v)`` is the value of
    the first branch whose condition is true (a null condition is not), else ``otherwise``'s value, else
    null. The values are of one type, or integers and floats (then all are floats)."""
    return _when(condition)


def to_float(value) -> Expr:
    """A float from a string such as ``12``, ``-0.5`` or ``1.5e3`` (null for any other string), an
    integer, or a float (see ``expressions.ToFloat``)."""
    return _cast(value if isinstance(value, Expr) else Col(value), "float")


def to_string(value) -> Expr:
    """A value's text as a TSV output writes it (floats as ``0.5``, ``3.0``: see ``render_float``)."""
    return _cast(value if isinstance(value, Expr) else Col(value), "string")


def cast(value, type_: str) -> Expr:
    """``value`` (an expression, or a field's name) as ``"string"``, ``"integer"`` or ``"float"``: the
    same as ``to_string``, ``to_int`` and ``to_float``."""
    return _cast(value if isinstance(value, Expr) else Col(value), type_)


def round(value, digits: int = 0) -> Expr:  # noqa: A001 - the function's name
    """A float rounded to ``digits`` places (0 to 15), ties away from zero: ``round(2.5)`` is 3.0,
    ``round(-0.5)`` is -1.0 (see ``expressions.Round``); an integer stays as it is."""
    return (value if isinstance(value, Expr) else Col(value)).round(digits)


def avg(value, where=None) -> Avg:
    """The mean of an integer over the group, as a float (the exact sum divided by the count); null when
    every value is null."""
    return Avg(value, where)


def median(value, where=None) -> Median:
    """The exact median of a number over the group, as a float: the middle value, or the mean of the two
    middle values (``statistics.median``)."""
    return Median(value, where)


def percentile(value, p, where=None) -> Percentile:
    """The exact ``p``-th quantile (0 to 1) of a number over the group, as a float, interpolated linearly
    between the two nearest values (see ``expressions.Percentile``)."""
    return Percentile(value, p, where)
