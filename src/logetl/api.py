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
``to_int``, arithmetic, ``coalesce``, ``crc32``, ``day`` and ``hour``.

Times: ``timestamp(time)`` makes a log time a UTC instant (a ``timestamp``, written
``2015-05-17T10:05:03Z``); ``epoch``, ``from_epoch``, ``trunc`` (UTC) and ``trunc_local`` (as written),
``day_of_week`` and ``hour_of_day``; ``min``/``max``, sorts, joins and comparisons take timestamps. The
``visits`` operator numbers each client's visits (a new one after a gap of inactivity).
"""
from __future__ import annotations

from logetl import formats
from logetl.assembly import AssemblyError, Flow, Parse, Pipe, Source
from logetl.expressions import (
    Coalesce, Col, Concat, Count, CountDistinct, Crc32, Day, Expr, ExpressionError, Hour, Lit, Max, Min, Sum)
from logetl.expressions import DayOfWeek, Epoch, FromEpoch, HourOfDay, Timestamp, Trunc, TruncLocal

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


# --- times: UTC instants, truncation ------------------------------------------------------------------------

__all__ += ["timestamp", "from_epoch", "epoch", "trunc", "trunc_local", "day_of_week", "hour_of_day"]


def timestamp(time) -> Timestamp:
    """The UTC instant of an access-log time field (``17/May/2015:10:05:03 +0200`` is
    ``2015-05-17T08:05:03Z``), a timestamp; null when the time is not valid (the rule of ``day``)."""
    return Timestamp(_field(time))


def from_epoch(seconds) -> FromEpoch:
    """The timestamp ``seconds`` (an integer) after 1970-01-01T00:00:00Z; null outside years 0001-9999."""
    return FromEpoch(_field(seconds))


def epoch(instant) -> Epoch:
    """Seconds from 1970-01-01T00:00:00Z to a timestamp: an integer."""
    return Epoch(_field(instant))


def trunc(instant, unit: str) -> Trunc:
    """A timestamp truncated in UTC to the start of its ``unit``: ``minute``, ``hour``, ``day``, ``week``
    (Monday, ISO 8601) or ``month``."""
    return Trunc(_field(instant), unit)


def trunc_local(time, unit: str) -> TruncLocal:
    """An access-log time truncated as written (in its own zone) to ``unit``, as a string:
    ``2015-05-17T10:05`` (minute), ``2015-05-17T10`` (hour), ``2015-05-17`` (day), the Monday's
    ``2015-05-11`` (week), ``2015-05`` (month); null when the time is not valid."""
    return TruncLocal(_field(time), unit)


def day_of_week(time) -> DayOfWeek:
    """1 (Monday) to 7 (Sunday): of a timestamp in UTC, of an access-log time as written."""
    return DayOfWeek(_field(time))


def hour_of_day(time) -> HourOfDay:
    """0 to 23: of a timestamp in UTC, of an access-log time as written."""
    return HourOfDay(_field(time))


def _field(value):
    """A field name as its column (``trunc("ts", "day")``), an expression as it is."""
    return Col(value) if isinstance(value, str) else value
