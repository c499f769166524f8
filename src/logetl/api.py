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
``limit``, ``top``, ``checkpoint``, ``branch``, ``sql`` (a query in DuckDB's SQL over the records, as the
table ``input``) and ``write`` (a sink). The expressions
(``logetl.expressions``) are the portable set both engines compile: comparisons, ``& | ~``, ``is_in``, ``starts_with``/``ends_with``/``contains``,
``matches`` (a portable regex subset), ``substring``, ``lower``/``upper``, ``split_part``, ``concat``,
``to_int``, arithmetic, ``coalesce``, ``crc32``, ``day`` and ``hour``; for strings and URLs, ``extract``
(a regex group), ``matches``/``contains`` with ``ignore_case``, ``method``, ``path``, ``query_string``,
``query_param``, ``url_host``, ``url_decode``, and the aggregates ``first``/``last`` in a given order;
numbers: a ``float`` type with true division ``/``, ``round``, ``to_float``/``to_string``/``cast``, and
conditionals ``when(c).then(v)....otherwise(v)``. The aggregates: ``count``, ``sum``, ``min``, ``max``, ``count_distinct``, ``avg``, ``median``
and ``percentile``, each restricted to the records where a condition holds with ``where=``
(``count(where=L.col("response") == "404")``).

Times: ``timestamp(time)`` makes a log time a UTC instant (a ``timestamp``, written
``2015-05-17T10:05:03Z``); ``epoch``, ``from_epoch``, ``trunc`` (UTC) and ``trunc_local`` (as written),
``day_of_week`` and ``hour_of_day``; ``min``/``max``, sorts, joins and comparisons take timestamps. The
``visits`` operator numbers each client's visits (a new one after a gap of inactivity).
"""
from __future__ import annotations

from logetl import formats
from logetl.assembly import AssemblyError, Flow, Parse, Pipe, Source
from logetl.expressions import (
    Coalesce, Col, Concat, Count, CountDistinct, Crc32, Day, Expr, ExpressionError, Hash64, Hour, Lit, Max, Min,
    Sum)
from logetl.diagnostics import nearest
from logetl.expressions import UnknownName
from logetl.expressions import DayOfWeek, Epoch, FromEpoch, HourOfDay, Timestamp, Trunc, TruncLocal
from logetl.expressions import Avg, Median, Percentile, When  # numbers
from logetl.expressions import cast as _cast
from logetl.expressions import when as _when

__all__ = [
    "Flow", "Pipe", "Expr", "AssemblyError", "ExpressionError", "read", "col", "lit", "asc", "desc",
    "concat", "coalesce", "crc32", "hash64", "day", "hour", "count", "sum", "min", "max", "count_distinct",
]


def _field(value):
    """A field name as its column (``path("request")``, ``trunc("ts", "day")``), an expression as it is:
    the functions of one value take either (a string literal is ``lit("...")``)."""
    return Col(value) if isinstance(value, str) else value


def read(format=None, fields=None, tap: str = "input", name: str | None = None) -> Parse:
    """The flow's input, parsed with log format ``format``: a ``logetl.formats.LogFormat`` (what
    ``logetl run`` passes a flow function), a preset name (``combined``, ``common``, ``vhost_combined``,
    ``nginx``, ``alb``, ``elb``, ``s3``, ``haproxy``, ``cloudfront``), an Apache ``LogFormat`` or nginx ``log_format`` string, or None for ``combined``.
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
    return Crc32(_field(value))


def hash64(*values) -> Hash64:
    """A 64-bit hash of the strings taken together, for counting distinct combinations compactly; its
    numbers are the engine's own (see ``Hash64``)."""
    return Hash64(*(_field(v) for v in values))


def day(time) -> Day:
    """``YYYY-MM-DD`` of an access-log time field; null when the time is not valid."""
    return Day(_field(time))


def hour(time) -> Hour:
    """``YYYY-MM-DDTHH`` of an access-log time field; null when the time is not valid."""
    return Hour(_field(time))


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


# --- strings: capture, case-insensitive match, URL parts -----------------------------------------------

from logetl.expressions import First, Last, Method, Path, QueryParam, QueryString, UrlDecode, UrlHost  # noqa: E402

__all__ += ["method", "path", "query_string", "query_param", "url_host", "url_decode", "first", "last"]


def method(request) -> Method:
    """The method of a request line (``GET /a HTTP/1.1`` -> ``GET``); null unless the value is two or
    three non-empty parts with one space between each (``GET /a``, without a protocol, is one too)."""
    return Method(_field(request))


def path(url) -> Path:
    """The path of a request line's target (a value with a space is read as a request line) or of a target
    or URL: ``GET /a/b?q=1 HTTP/1.1`` -> ``/a/b``, ``http://h/a#f`` -> ``/a``, ``http://h`` -> ``/``; as
    written (``url_decode`` decodes it); null for a malformed request line, ``*``, ``-`` or another form
    (``logetl.expressions.Path``)."""
    return Path(_field(url))


def query_string(url) -> QueryString:
    """The text after the first ``?`` of a request line's target or of a URL, up to a ``#``: ``""`` after a
    bare ``?``, null when there is none (``logetl.expressions.QueryString``)."""
    return QueryString(_field(url))


def query_param(url, name: str, decode: bool = True) -> QueryParam:
    """The first value of query parameter ``name`` (compared as written) of a request line or URL,
    percent-decoded with ``+`` as a space (``decode=False``: as written); ``""`` for a bare ``name`` or
    ``name=``; null when it is absent (``logetl.expressions.QueryParam``)."""
    return QueryParam(_field(url), name, decode)


def url_host(url) -> UrlHost:
    """The host of an absolute URL or absolute-form request target, without user, port or IP-literal
    brackets, ASCII letters lower-cased: ``http://User@WWW.Example.com:8080/x`` -> ``www.example.com``;
    null for a URL without one (``logetl.expressions.UrlHost``)."""
    return UrlHost(_field(url))


def url_decode(value, plus_as_space: bool = False) -> UrlDecode:
    """Percent-decoding (``%C3%A9`` -> ``é``); a ``%`` without two hex digits and escapes of control
    characters stay as written, ``+`` is a space only with ``plus_as_space``; null when the bytes are not
    UTF-8 (``logetl.expressions.UrlDecode``)."""
    return UrlDecode(_field(value), plus_as_space)


def first(value, order_by=None) -> First:
    """The value of the group's first record in the order of ``order_by`` (a field, or a list; ascending,
    null first), equal keys in input order: ``first("request", order_by="ts")``."""
    return First(value, order_by)


def last(value, order_by=None) -> Last:
    """The value of the group's last record in the order of ``order_by`` (the greatest keys; the last of
    equal ones in input order)."""
    return Last(value, order_by)


# --- times: UTC instants, truncation ------------------------------------------------------------------------

__all__ += ["timestamp", "from_epoch", "epoch", "trunc", "trunc_local", "day_of_week", "hour_of_day"]


def timestamp(time, clock=None) -> Timestamp:
    """The UTC instant of a log time field, a timestamp: ``17/May/2015:10:05:03 +0200`` (Apache, nginx, S3)
    is ``2015-05-17T08:05:03Z``; ``2018-07-02T22:23:00.186641Z`` (ALB, ELB) is ``2018-07-02T22:23:00Z``;
    ``06/Feb/2009:12:14:14.655`` (HAProxy, no zone: read as UTC) is ``2009-02-06T12:14:14Z``;
    ``2024-01-02T03:04:05+01:00`` (RFC 3339, Traefik) is ``2024-01-02T02:04:05Z``; ``1646861401.5241024``
    (a Unix epoch, Caddy's ``ts``) is ``2022-03-09T21:30:01Z``. With two
    fields, a date and a time in UTC (CloudFront's ``timestamp("date", "time")``): ``2019-12-04`` and
    ``21:02:31`` are ``2019-12-04T21:02:31Z``. A fraction of a second is dropped; null when the time is not
    valid (the calendar's rule of ``day``). See ``logetl.expressions.Timestamp``."""
    return Timestamp(_field(time), None if clock is None else _field(clock))


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


# --- a name that is not in the API ---------------------------------------------------------------------------

def _public_names() -> list[str]:
    """What a flow can call on ``logetl.api``: ``__all__`` and every public function defined here."""
    here = globals()
    defined = [n for n, v in here.items() if not n.startswith("_") and callable(v)
               and getattr(v, "__module__", None) == __name__]
    return sorted(set(__all__) | set(defined))


def __getattr__(name: str):
    """``L.whn(...)``: one ``UnknownName`` error naming the nearest function of the API, not Python's
    "module has no attribute" (an ``AttributeError`` still, for ``hasattr`` and ``from ... import``)."""
    if name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    raise UnknownName(f"logetl.api has no function {name!r}{nearest(name, _public_names())}")
