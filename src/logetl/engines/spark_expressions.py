"""The Spark engine's table of expressions and aggregates: each ``logetl.expressions`` class compiles to a
PySpark ``Column`` here, one entry per class (``COMPILE`` and ``AGGREGATES``), built from Spark's built-in
functions only (no Python UDF: records never leave the JVM).

Semantics are those the classes' docstrings state, byte for byte the local engine's. Where Spark differs
by default the entry says how it is made to agree. Spark 4 runs with ANSI mode on, where an invalid cast,
a division by zero or a map lookup of a missing key fails the query: every such step here is guarded
(``when`` a regex or a test says it is valid), and the casts are ``try_cast`` besides, so no record can
fail a run (only 64-bit overflow does, which the docstrings leave undefined).
"""
from __future__ import annotations

from logetl import expressions as E

#: ``Substring`` without a length: the rest of the string (Spark caps start + length at this)
REST = 2_147_483_647

# Java's ``$`` also matches before a final line terminator, so the anchored patterns go through
# ``portable_regex`` (``$`` as ``\z``, ``(?s)`` first), as user regexes do
INT_REGEX = E.portable_regex(E.INT_PATTERN)
LOG_TIME_REGEX = E.portable_regex(E.LOG_TIME_PATTERN)


def _F():
    # imported on first use: the table loads (and the engine's registry keys are known) without Spark
    from pyspark.sql import functions as F

    return F


def column(name: str):
    """A field by its exact name (back-quoted, so that a name with a dot is not a struct access)."""
    return _F().col("`" + name.replace("`", "``") + "`")




def _value(value):
    """A literal value as a Column of its portable type (integers 64-bit, whatever their size)."""
    F = _F()
    if isinstance(value, int) and not isinstance(value, bool):
        return F.lit(value).cast("long")
    return F.lit(value)


def _compare(c, e):
    a, b = (c(x) for x in e.args)
    # Spark compares strings by their UTF-8 bytes (the default UTF8_BINARY collation), longs numerically
    return {"==": a.__eq__, "!=": a.__ne__, "<": a.__lt__, "<=": a.__le__, ">": a.__gt__,
            ">=": a.__ge__}[e.op](b)


def _floor_adjust(r, b):
    """True where a truncated remainder ``r`` (Java's: the dividend's sign) differs from Python's modulo
    (the divisor's sign): it is not zero and its sign is not the divisor's."""
    return (r != 0) & ((r < 0) != (b < 0))


def _arithmetic(c, e):
    F = _F()
    a, b = (c(x) for x in e.args)
    if e.op in ("+", "-", "*"):
        return {"+": a.__add__, "-": a.__sub__, "*": a.__mul__}[e.op](b)
    # Spark's ``div`` and ``%`` truncate toward zero and fail on a zero divisor under ANSI: the divisor is
    # tested first (a CASE branch is only evaluated when its condition holds), then the quotient is
    # floored and the remainder moved to the divisor's sign, as Python's // and %
    r = a % b
    if e.op == "//":
        result = F.call_function("div", a, b) - F.when(_floor_adjust(r, b), 1).otherwise(0).cast("long")
    else:
        result = F.when(_floor_adjust(r, b), r + b).otherwise(r)
    return F.when(b != 0, result)


def _to_int(c, e):
    F = _F()
    a = c(e.args[0])
    if c.type_of(e.args[0]) == E.INTEGER:
        return a
    # the pattern first: Spark's cast would also accept " 5", "+5" and "5\n" (it trims)
    return F.when(a.rlike(INT_REGEX), a.try_cast("long"))


def _split_pattern(delimiter: str) -> str:
    """A Java regex matching ``delimiter`` literally: every ASCII character that is not a letter or a digit
    is escaped (a backslash before such a character is always the character itself; ``\\Q..\\E`` would
    break on a delimiter holding ``\\E``)."""
    return "".join("\\" + ch if ch.isascii() and not ch.isalnum() else ch for ch in delimiter)


def _split_part(c, e):
    F = _F()
    # limit -1 keeps trailing empty pieces (as Polars does); get: null past the end, where [] fails
    pieces = F.split(c(e.args[0]), _split_pattern(e.delimiter), -1)
    return F.get(pieces, F.lit(e.n - 1))


def _concat(c, e):
    F = _F()
    # concat is null when any argument is; integers are written in decimal
    return F.concat(*[c(a) if c.type_of(a) == E.STRING else c(a).cast("string") for a in e.args])


def _log_time(c, e):
    """(valid, year, month number, day, hour) of an access-log time as Columns; the parts are read by
    position, and only used where ``valid`` holds (no Spark date parsing: it accepts other forms)."""
    F = _F()
    t = c(e.args[0])
    y, d, h = t.substr(8, 4), t.substr(1, 2), t.substr(13, 2)
    months = F.create_map(*[x for i, m in enumerate(E.MONTHS) for x in (F.lit(m), F.lit(f"{i + 1:02d}"))])
    mon = months[t.substr(4, 3)]
    yi, mi, di = (x.try_cast("long") for x in (y, mon, d))
    leap = ((yi % 4 == 0) & (yi % 100 != 0)) | (yi % 400 == 0)
    days = (F.when(mi == 2, F.when(leap, 29).otherwise(28))
            .when(mi.isin(4, 6, 9, 11), 30).otherwise(31))
    # nested: the calendar check only runs on a string of the valid form (a CASE branch is lazy)
    valid = F.when(t.rlike(LOG_TIME_REGEX), di <= days).otherwise(False)
    return valid, y, mon, d, h


def _day(c, e):
    F = _F()
    valid, y, mon, d, _ = _log_time(c, e)
    return F.when(valid, F.concat_ws("-", y, mon, d))


def _hour(c, e):
    F = _F()
    valid, y, mon, d, h = _log_time(c, e)
    return F.when(valid, F.concat(y, F.lit("-"), mon, F.lit("-"), d, F.lit("T"), h))


COMPILE = {
    E.Col: lambda c, e: c.field(e.name),
    E.Lit: lambda c, e: _value(e.value),
    E.Compare: _compare,
    E.And: lambda c, e: c(e.args[0]) & c(e.args[1]),           # three-valued in Spark SQL
    E.Or: lambda c, e: c(e.args[0]) | c(e.args[1]),
    E.Not: lambda c, e: ~c(e.args[0]),
    E.IsNull: lambda c, e: c(e.args[0]).isNull(),
    # SQL IN: null for a null value; false for a miss (the list holds no null)
    E.IsIn: lambda c, e: c(e.args[0]).isin(*[_value(v) for v in e.values]),
    E.StartsWith: lambda c, e: c(e.args[0]).startswith(e.text),
    E.EndsWith: lambda c, e: c(e.args[0]).endswith(e.text),
    E.Contains: lambda c, e: c(e.args[0]).contains(e.text),
    # rlike is Java's find(): a match anywhere, as Polars' contains
    E.Matches: lambda c, e: c(e.args[0]).rlike(e.compiled),
    # characters are code points on both engines
    E.Substring: lambda c, e: c(e.args[0]).substr(
        _F().lit(e.start), _F().lit(REST if e.length is None else e.length)),
    E.Lower: lambda c, e: _F().lower(c(e.args[0])),
    E.Upper: lambda c, e: _F().upper(c(e.args[0])),
    E.SplitPart: _split_part,
    E.Concat: _concat,
    E.ToInt: _to_int,
    E.Arithmetic: _arithmetic,
    E.Coalesce: lambda c, e: _F().coalesce(*[c(a) for a in e.args]),
    # CRC-32 of the UTF-8 bytes: a string cast to binary is its UTF-8 encoding; the result is 0..2**32-1
    E.Crc32: lambda c, e: _F().crc32(c(e.args[0]).cast("binary")),
    E.Day: _day,
    E.Hour: _hour,
}


class Compiler(E.Compiler):
    """Compiles one operator's expressions to a Spark Column (``logetl.expressions.Compiler``). A field is
    its column by name, or, given ``fields`` (name -> Column), that Column: how the engine composes a chain
    of per-record operators into expressions over the frame at its start (its one-pass write)."""

    table = COMPILE

    def __init__(self, types: dict[str, str], fields: dict | None = None):
        super().__init__(types)
        self.fields = fields

    def field(self, name: str):
        return column(name) if self.fields is None else self.fields[name]


def _count(c, agg):
    F = _F()
    return F.count(F.lit(1)) if agg.arg is None else F.count(c(agg.arg))


#: aggregate class -> function(compiler, aggregate) -> an aggregate Column. Spark's sum is null when every
#: value is null (as documented), its min and max compare strings by bytes, count_distinct skips nulls.
AGGREGATES = {
    E.Count: _count,
    E.Sum: lambda c, agg: _F().sum(c(agg.arg)),
    E.Min: lambda c, agg: _F().min(c(agg.arg)),
    E.Max: lambda c, agg: _F().max(c(agg.arg)),
    E.CountDistinct: lambda c, agg: _F().count_distinct(c(agg.arg)),
}


# --- times: UTC instants, truncation ------------------------------------------------------------------------
# Every conversion is arithmetic on epoch seconds (``timestamp_seconds``, ``unix_seconds``) and on day
# numbers (``make_date``/``unix_date``/``date_from_unix_date``, dates having no zone): nothing reads the
# session's time zone, so the results are the same whatever zone the machine or the session is in. Each
# step that could fail under ANSI (``make_date`` of a day that does not exist, a map lookup of a missing
# month) is inside ``when`` the time is valid.

DAY, WEEK = 86_400, 7 * 86_400
#: 1970-01-01 was a Thursday: the Monday of its ISO week is 3 days before it
MONDAY = -3 * DAY


def _long(value):
    return _F().lit(value).cast("long")


def _div(a, b: int):
    """Floor division by a positive constant (Spark's ``div`` truncates toward zero)."""
    return _F().call_function("div", a - _F().pmod(a, _long(b)), _long(b))


def _written(c, e):
    """(the wall clock as written, in seconds from 1970-01-01T00:00 of its own zone; the zone's offset in
    seconds) of a log time, both null unless it is valid."""
    F = _F()
    valid, y, mon, d, h = _log_time(c, e)
    t = c(e.args[0])
    num = lambda col: col.try_cast("long")      # noqa: E731
    days = F.unix_date(F.make_date(num(y).cast("int"), num(mon).cast("int"), num(d).cast("int")))
    clock = days.cast("long") * DAY + num(h) * 3600 + num(t.substr(16, 2)) * 60 + num(t.substr(19, 2))
    offset = ((num(t.substr(23, 2)) * 3600 + num(t.substr(25, 2)) * 60)
              * F.when(t.substr(22, 1) == "-", _long(-1)).otherwise(_long(1)))
    return F.when(valid, clock), F.when(valid, offset)


def _instant(seconds):
    """A timestamp of epoch ``seconds``, null outside years 0001-9999."""
    F = _F()
    return F.when(seconds.between(E.MIN_EPOCH, E.MAX_EPOCH), F.timestamp_seconds(seconds))


def _truncate(seconds, unit: str):
    """Epoch ``seconds`` (of UTC, or of a wall clock) truncated to the start of ``unit``."""
    F = _F()
    if unit == "month":     # the 1st of the day's month: of a date, which has no zone
        first = F.trunc(F.date_from_unix_date(_div(seconds, DAY).cast("int")), "month")
        return F.unix_date(first).cast("long") * DAY
    size = {"minute": 60, "hour": 3600, "day": DAY, "week": WEEK}[unit]
    start = MONDAY if unit == "week" else 0
    return seconds - F.pmod(seconds - _long(start), _long(size))


def _clock_text(seconds, width: int = 19):
    """``YYYY-MM-DDTHH:MM:SS`` of epoch ``seconds``, its first ``width`` characters (the date's parts from
    a date, which has no zone; the time's from the seconds of the day)."""
    F = _F()
    date = F.date_from_unix_date(_div(seconds, DAY).cast("int"))
    of_day = F.pmod(seconds, _long(DAY))
    pad = lambda value, n: F.lpad(value.cast("string"), n, "0")      # noqa: E731
    text = F.concat(pad(F.year(date), 4), F.lit("-"), pad(F.month(date), 2), F.lit("-"), pad(F.dayofmonth(date), 2),
                    F.lit("T"), pad(_div(of_day, 3600), 2), F.lit(":"), pad(_div(F.pmod(of_day, _long(3600)), 60), 2),
                    F.lit(":"), pad(F.pmod(of_day, _long(60)), 2))
    return text if width == 19 else F.substring(text, 1, width)


def _seconds_of(c, e):
    """Epoch seconds of a timestamp (UTC), or of a log time's wall clock as written."""
    if c.type_of(e.args[0]) == E.TIMESTAMP:
        return _F().unix_seconds(c(e.args[0]))
    return _written(c, e)[0]


def _timestamp(c, e):
    clock, offset = _written(c, e)
    return _instant(clock - offset)


def text(kind: str, value):
    """How a value of type ``kind`` is written as text (TSV, JSON Lines): a timestamp as
    ``2015-05-17T10:05:03Z``; the other types as they are (TSV casts them to string)."""
    render = TEXT.get(kind)
    return value if render is None else render(value)


#: type -> how a value of it is written in TSV and JSON Lines (the types not here: Spark's cast to string)
TEXT = {E.TIMESTAMP: lambda value: _F().concat(_clock_text(_F().unix_seconds(value)), _F().lit("Z"))}

COMPILE.update({
    E.Timestamp: _timestamp,
    E.FromEpoch: lambda c, e: _instant(c(e.args[0])),
    E.Epoch: lambda c, e: _F().unix_seconds(c(e.args[0])),
    E.Trunc: lambda c, e: _F().timestamp_seconds(_truncate(_F().unix_seconds(c(e.args[0])), e.unit)),
    E.TruncLocal: lambda c, e: _clock_text(_truncate(_written(c, e)[0], e.unit), E.LOCAL_WIDTH[e.unit]),
    # ISO: Monday 1 (1970-01-01, day 0, a Thursday: 4)
    E.DayOfWeek: lambda c, e: _F().pmod(_div(_seconds_of(c, e), DAY) + _long(3), _long(7)) + _long(1),
    E.HourOfDay: lambda c, e: _div(_F().pmod(_seconds_of(c, e), _long(DAY)), 3600),
})
