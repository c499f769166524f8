"""The public API: define a flow of your own, then run it with ``logetl run FLOW.py`` (or from Python with
``logetl.job.run_flow(flow, input, {tap: path})``), on the local engine or on Spark.

A flow is a pipe assembly, in the spirit of Cascading's pipes and Beam's transforms: the builder calls
only *describe* the computation, fields and types are checked at once (a mistake fails when the flow is
defined, before any data is read), and every engine runs the same description with the same bytes::

    import logetl.api as L

    def flow(fmt):
        logs = L.read(fmt)              # ip, time, request, response, size, referer, user_agent
        hourly = (logs.derive(hour=L.hour(L.col("time")))
                      .filter(L.col("hour").is_not_null())
                      .group_by("hour", "response").agg(count=L.count())
                      .sort("hour", "response"))
        return L.Flow("status_by_hour", [hourly.write("counts")])

The operators, each documented with its memory and ordering contract (``logetl.assembly``):
``read`` (a source with a log format), ``drop_size_dash`` (the three programs' rule), ``filter``,
``select``, ``rename``, ``derive``, ``unique``, ``group_by(...).agg(...)``, ``join`` (inner, left), ``sort``,
``limit``, ``top``, ``checkpoint``, ``branch`` and ``write`` (a sink). The expressions
(``logetl.expressions``) are the portable set both engines compile: comparisons, ``& | ~``, ``is_in``, ``starts_with``/``ends_with``/``contains``,
``matches`` (a portable regex subset), ``substring``, ``lower``/``upper``, ``split_part``, ``concat``,
``to_int``, arithmetic, ``coalesce``, ``crc32``, ``day`` and ``hour``.
"""
from __future__ import annotations

from logetl import formats
from logetl.assembly import AssemblyError, Flow, Parse, Pipe, Source
from logetl.expressions import (
    Coalesce, Col, Concat, Count, CountDistinct, Crc32, Day, Expr, ExpressionError, Hour, Lit, Max, Min, Sum)

__all__ = [
    "Flow", "Pipe", "Expr", "AssemblyError", "ExpressionError", "read", "col", "lit", "asc", "desc",
    "concat", "coalesce", "crc32", "day", "hour", "count", "sum", "min", "max", "count_distinct",
]


def read(format=None, fields=None, tap: str = "input", name: str | None = None) -> Parse:
    """The flow's input, parsed with log format ``format``: a ``logetl.formats.LogFormat`` (what
    ``logetl run`` passes a flow function), a preset name (``combined``, ``common``, ``vhost_combined``,
    ``nginx``), an Apache ``LogFormat`` or nginx ``log_format`` string, or None for ``combined``.
    ``fields``: the format's fields to keep, in that order (default: all; ``combined`` has ``ip, time,
    request, response, size, referer, user_agent``, the last two null on a line without a well-formed
    ``"referer" "user agent"`` tail: ``logetl.formats``). Malformed lines are counted and trapped; every
    other line is a record (a size of ``-`` included: the three programs drop those in a step of their own,
    ``.drop_size_dash()``). A field the format lacks is refused, naming the presets that have it. ``tap`` names the input in ``explain`` and the
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
    """A constant string, integer or boolean."""
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


def count(value=None) -> Count:
    """``count()``: records in the group; ``count(x)``: records where ``x`` is not null."""
    return Count(value)


def sum(value) -> Sum:  # noqa: A001 - the aggregate's name
    return Sum(value)


def min(value) -> Min:  # noqa: A001
    return Min(value)


def max(value) -> Max:  # noqa: A001
    return Max(value)


def count_distinct(value) -> CountDistinct:
    return CountDistinct(value)
