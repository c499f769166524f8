"""The Spark engine's table of expressions and aggregates: each ``logetl.expressions`` class compiles to a
PySpark ``Column`` here, one entry per class (``COMPILE`` and ``AGGREGATES``), built from Spark's built-in
functions only (no Python UDF: records never leave the JVM).

Semantics are those the classes' docstrings state, byte for byte the local engine's. Where Spark differs
by default the entry says how it is made to agree. Spark 4 runs with ANSI mode on, where an invalid cast,
a division by zero or a map lookup of a missing key fails the query: every such step here is guarded
(``when`` a regex or a test says it is valid), and the casts are ``try_cast`` besides, so no record can
fail a run (only 64-bit overflow does, which the docstrings leave undefined). The string section (capture,
URL parts, percent-decoding, ``first``/``last``) is at the end.

Times are computed in the session time zone UTC, which the engine sets for every step (``SESSION``), and
a timestamp is written as text by ``text`` (``TEXT``, by type), so that no result depends on a zone.
"""
from __future__ import annotations

from logetl import expressions as E

#: ``Substring`` without a length: the rest of the string (Spark caps start + length at this)
REST = 2_147_483_647

# Java's ``$`` also matches before a final line terminator, so the anchored patterns go through
# ``portable_regex`` (``$`` as ``\z``, ``(?s)`` first), as user regexes do
INT_REGEX = E.portable_regex(E.INT_PATTERN)
LOG_TIME_REGEX = E.portable_regex(E.LOG_TIME_PATTERN)
#: the layouts of a log time without a zone (``Timestamp``), the calendar folded in
ISO_TIME_REGEX = E.portable_regex(E.ISO_TIME_VALID)
MS_TIME_REGEX = E.portable_regex(E.MS_TIME_VALID)
ISO_OFFSET_REGEX = E.portable_regex(E.ISO_OFFSET_VALID)
EPOCH_REGEX = E.portable_regex(E.EPOCH_VALID)


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
    a, b = _operands(c, e)
    # Spark compares strings by their UTF-8 bytes (the default UTF8_BINARY collation), longs numerically
    return {"==": a.__eq__, "!=": a.__ne__, "<": a.__lt__, "<=": a.__le__, ">": a.__gt__,
            ">=": a.__ge__}[e.op](b)


def _floor_adjust(r, b):
    """True where a truncated remainder ``r`` (Java's: the dividend's sign) differs from Python's modulo
    (the divisor's sign): it is not zero and its sign is not the divisor's."""
    return (r != 0) & ((r < 0) != (b < 0))


def _arithmetic(c, e):
    F = _F()
    a, b = _operands(c, e)
    if e.op == "/":
        # the divisor is tested first: ANSI mode fails a division by zero, and a CASE branch is lazy
        return float_result(F.when(b != 0, a.cast("double") / b.cast("double")))
    if c.type_of(e) == E.FLOAT:
        return float_result({"+": a.__add__, "-": a.__sub__, "*": a.__mul__}[e.op](b))
    if e.op in ("+", "-", "*"):
        # try_*: a result beyond 64 bits is null (as on the local engine), not ANSI mode's failed job
        return {"+": F.try_add, "-": F.try_subtract, "*": F.try_multiply}[e.op](a, b)
    # Spark's ``div`` and ``%`` truncate toward zero and fail on a zero divisor under ANSI: the divisor is
    # tested first (a CASE branch is only evaluated when its condition holds), then the quotient is
    # floored and the remainder moved to the divisor's sign, as Python's // and %
    r = a % b
    if e.op == "//":
        # the one quotient beyond 64 bits, the smallest integer divided by -1, is null (tested first: ANSI
        # mode fails it)
        result = F.when((a != F.lit(-(1 << 63))) | (b != -1), F.call_function("div", a, b)
                        - F.when(_floor_adjust(r, b), 1).otherwise(0).cast("long"))
    else:
        result = F.when(_floor_adjust(r, b), r + b).otherwise(r)
    return F.when(b != 0, result)


def _to_int(c, e):
    F = _F()
    a = c(e.args[0])
    if c.type_of(e.args[0]) == E.INTEGER:
        return a
    if c.type_of(e.args[0]) == E.FLOAT:
        return a.try_cast("long")       # truncated toward zero; null outside 64 bits
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
    E.Contains: lambda c, e: c(e.args[0]).rlike(e.compiled) if e.ignore_case else c(e.args[0]).contains(e.text),
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
    E.Hash64: lambda c, e: _F().xxhash64(*(c(a) for a in e.args)),
    E.Day: _day,
    E.Hour: _hour,
}


# --- numbers: float, casts, rounding, conditionals ------------------------------------------------------

FLOAT_REGEX = E.portable_regex(E.FLOAT_PATTERN)
#: Java's Double.toString in scientific notation (what a cast to string writes below 1e-3 and from 1e7)
_SCIENTIFIC = r"^(-?)([0-9])\.([0-9]+)E(-?[0-9]+)$"


def float_result(x):
    """A float expression's value as the portable float (``expressions.FLOAT_LIMIT``): null unless below
    the limit in magnitude (NaN compares above every number in Spark, so it is left out too), 0.0 below
    the smallest normal float (so ``-0.0`` is ``0.0``)."""
    F = _F()
    size = F.abs(x)
    return F.when(size < E.FLOAT_LIMIT, F.when(size >= E.FLOAT_MIN_NORMAL, x).otherwise(F.lit(0.0)))


def _operands(c, e):
    """The two sides of a comparison or an arithmetic operation, both as doubles when one is a float."""
    kinds = [c.type_of(x) for x in e.args]
    values = [c(x) for x in e.args]
    if E.FLOAT in kinds and all(k in E.NUMBERS for k in kinds):
        values = [v.cast("double") for v in values]
    return values


def _let(value, body):
    """``body(v)`` with ``v`` bound to ``value``, computed once: the variable of a higher-order function's
    lambda. Written out, the text of a float repeats its parts so often that four float columns make a
    generated method beyond the JVM's 64 KB (Spark then logs the compiler's failure and runs the stage
    without code generation)."""
    F = _F()
    return F.transform(F.array(value), body).getItem(0)


def _integral_digits(ax):
    """The shortest decimal digits of a float ``ax`` from 2**53 to ``FLOAT_LIMIT`` (an integer), padded with
    zeros to an integer: its exact value ``N`` (a multiple of a power of two below 2**63, shifted), then
    ``N`` rounded half up to 15, 16, then 17 significant digits, the first that reads back as ``ax``. Java
    before 19 writes some of these floats with a digit too many (``1.23456789012345677E18`` for
    1.2345678901234568e18)."""
    F = _F()
    shift = F.greatest(F.floor(F.log2(ax)) - 60, F.lit(0)).cast("int")
    mantissa = (ax / F.pow(F.lit(2.0), shift)).cast("long")          # exact: an integer below 2**63
    power = F.call_function("shiftleft", F.lit(1).cast("long"), shift)
    exact = (mantissa.cast("decimal(20,0)") * power.cast("decimal(20,0)")).cast("decimal(38,0)").cast("string")

    def rounded(digits):
        n = F.length(digits)

        def to(p):
            up = F.when(digits.substr(F.lit(p + 1), F.lit(1)) >= "5", F.lit(1)).otherwise(F.lit(0)).cast("long")
            return F.when(n > p, F.concat((digits.substr(F.lit(1), F.lit(p)).try_cast("long") + up).cast("string"),
                                          F.repeat(F.lit("0"), n - p))).otherwise(digits)

        def first(texts):
            chosen = texts[2]
            for i in (1, 0):
                chosen = F.when(texts[i].try_cast("double") == ax, texts[i]).otherwise(chosen)
            return chosen

        return _let(F.array(to(15), to(16), to(17)), first)

    return _let(exact, rounded)


def float_text(x):
    """A float Column's text (``expressions.render_float``): Spark's cast to string (Java's
    ``Double.toString``: the digits that read back as the same double), from scientific notation
    (``1.0E20``, ``-1.5E-5``) into positional (``100000000000000000000.0``, ``-0.000015``); from 2**53 to
    ``FLOAT_LIMIT`` the digits of ``_integral_digits``."""
    F = _F()

    def positional(parts):          # sign, digits, digits before the point
        sign, digits, point = parts[0], parts[1], parts[2].try_cast("int")
        n = F.length(digits)
        return (F.when(point <= 0, F.concat(sign, F.lit("0."), F.repeat(F.lit("0"), -point), digits))
                .when(point >= n, F.concat(sign, digits, F.repeat(F.lit("0"), point - n), F.lit(".0")))
                .otherwise(F.concat(sign, digits.substr(F.lit(1), point), F.lit("."),
                                    digits.substr(point + 1, F.lit(REST)))))

    def written(t):
        parts = F.array(F.regexp_extract(t, _SCIENTIFIC, 1),
                        F.concat(F.regexp_extract(t, _SCIENTIFIC, 2),
                                 F.regexp_replace(F.regexp_extract(t, _SCIENTIFIC, 3), "0+$", "")),
                        (F.regexp_extract(t, _SCIENTIFIC, 4).try_cast("int") + 1).cast("string"))
        return F.when(t.rlike(_SCIENTIFIC), _let(parts, positional)).otherwise(t)

    def text(v):
        ax = F.abs(v)
        integral = F.concat(F.when(v < 0, F.lit("-")).otherwise(F.lit("")), _integral_digits(ax), F.lit(".0"))
        return F.when((ax >= E.FLOAT_INTEGRAL * 2) & (ax < E.FLOAT_LIMIT), integral).otherwise(
            _let(v.cast("string"), written))

    return _let(x, text)


#: the text of a value of each type that is not a string, as ``to_string`` and the TSV and JSON Lines sinks
#: write it (integers in decimal, booleans true/false: Spark's casts to string)
TEXT = {
    E.INTEGER: lambda x: x.cast("string"),
    E.BOOLEAN: lambda x: x.cast("string"),
    E.FLOAT: float_text,
}


def _to_float(c, e):
    F = _F()
    a, kind = c(e.args[0]), c.type_of(e.args[0])
    if kind == E.FLOAT:
        return a
    if kind == E.INTEGER:
        return a.cast("double")
    # the pattern first: Spark's cast would also accept " 5", "5d", "Infinity" and "NaN"
    return float_result(F.when(a.rlike(FLOAT_REGEX), a.try_cast("double")))


def _to_string(c, e):
    kind = c.type_of(e.args[0])
    return c(e.args[0]) if kind == E.STRING else TEXT[kind](c(e.args[0]))


def _round(c, e):
    F = _F()
    x = c(e.args[0])
    if c.type_of(e.args[0]) == E.INTEGER:
        return x
    scale = float(10 ** e.digits)
    y = x * F.lit(scale)
    # Spark's own round goes through the decimal text of the double: the steps of the local engine instead
    whole = F.when(y >= 0, F.floor(y)).otherwise(F.ceil(y)).cast("double")     # toward zero
    frac = y - whole                                                             # exact
    step = F.when(frac >= 0.5, F.lit(1.0)).when(frac <= -0.5, F.lit(-1.0)).otherwise(F.lit(0.0))
    return float_result(F.when(F.abs(y) >= E.FLOAT_INTEGRAL, x).otherwise((whole + step) / F.lit(scale)))


def _case(c, e):
    F = _F()
    floats = c.type_of(e) == E.FLOAT

    def value(v):
        return c(v).cast("double") if floats else c(v)

    (first, v0), *rest = e.branches
    chain = F.when(c(first), value(v0))
    for cond, v in rest:
        chain = chain.when(c(cond), value(v))
    return chain if e.otherwise_value is None else chain.otherwise(value(e.otherwise_value))


COMPILE.update({
    E.ToFloat: _to_float,
    E.ToString: _to_string,
    E.Round: _round,
    E.Case: _case,
})


class Compiler(E.Compiler):
    """Compiles one operator's expressions to a Spark Column (``logetl.expressions.Compiler``). A field is
    its column by name, or, given ``fields`` (name -> Column), that Column: how the engine composes a chain
    of per-record operators into expressions over the frame at its start (its one-pass write)."""

    table = COMPILE

    def __init__(self, types: dict[str, str], fields: dict | None = None, order=None):
        super().__init__(types)
        self.fields = fields
        #: the input order's Column (``_order``) where the input has one: ``first``/``last`` break ties by it
        self.order = order

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


# --- strings: capture, case-insensitive match, URL parts ---------------------------------------------------

_UPPER, _LOWER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz"


def _capture(x, regex: str, group: int):
    """Group ``group`` of ``regex``'s first match, null when it does not match: ``regexp_extract`` alone
    gives "" for no match (and for a group that did not take part: ``Extract``'s documented "")."""
    F = _F()
    return F.when(x.rlike(regex), F.regexp_extract(x, regex, group))


def _target(x):
    """A request line's target (null unless it is one), or the value itself when it has no space."""
    F = _F()
    return F.when(x.contains(" "), _capture(x, E.REQUEST_LINE, 2)).otherwise(x)


def _path(c, e):
    F = _F()
    t = _target(c(e.args[0]))
    return F.coalesce(_capture(t, E.URL_PATH, 1), F.when(t.rlike(E.URL_EMPTY_PATH), F.lit("/")))


def _query_param(c, e):
    F = _F()
    value = _capture(_capture(_target(c(e.args[0])), E.URL_QUERY, 1), e.compiled, 1)
    value = F.when(value.startswith("="), value.substr(F.lit(2), F.lit(REST))).otherwise(value)
    return _url_decode(value, plus_as_space=True) if e.decode else value


def _url_host(c, e):
    F = _F()
    t = _target(c(e.args[0]))
    # either group is "" when the other alternative matched (neither can match empty): "" is no host
    host = F.coalesce(*[F.nullif(F.regexp_extract(t, E.URL_HOST, g), F.lit("")) for g in (1, 2)])
    return F.translate(host, _UPPER, _LOWER)                 # ASCII letters only


def _url_decode(x, plus_as_space: bool):
    """As the local engine decodes (``local_expressions._hex_decoded``), with Spark's built-ins: pieces
    split at ``%`` go to hex, the decoded escapes' digits as they are; decoded when the hex is UTF-8. Not
    ``url_decode``: it takes ``+`` for a space everywhere, fails on a ``%`` without two hex digits, and
    replaces bytes that are not UTF-8 with U+FFFD. Only values holding a ``%`` are split (CASE is lazy)."""
    F = _F()
    if plus_as_space:
        x = F.translate(x, "+", " ")

    def hexed(s):
        return F.lower(F.hex(F.encode(s, "UTF-8")))

    pieces = F.transform(F.split(x, "%", -1), lambda p, i: F.when(i == 0, hexed(p)).when(
        p.rlike(E.DECODED_ESCAPE), F.concat(F.lower(p.substr(1, 2)), hexed(p.substr(3, REST)))).otherwise(
        F.concat(F.lit("25"), hexed(p))))
    joined = F.array_join(pieces, "")
    decoded = F.when(joined.rlike(E.UTF8_HEX), F.decode(F.unhex(joined), "UTF-8"))
    return F.when(x.contains("%"), decoded).otherwise(x)


COMPILE.update({
    # rlike first: regexp_extract gives "" where nothing matches
    E.Extract: lambda c, e: _capture(c(e.args[0]), e.compiled, e.group),
    E.Method: lambda c, e: _capture(c(e.args[0]), E.REQUEST_LINE, 1),
    E.Path: _path,
    E.QueryString: lambda c, e: _capture(_target(c(e.args[0])), E.URL_QUERY, 1),
    E.QueryParam: _query_param,
    E.UrlHost: _url_host,
    E.UrlDecode: lambda c, e: _url_decode(c(e.args[0]), e.plus_as_space),
})


def _ordered(c, agg):
    """``first``/``last``: the value at the least/greatest (order keys, input order); a struct compares
    field by field, null first, as ``sort`` orders; ``min_by``/``max_by`` keep a null value."""
    F = _F()
    keys = [c(E.Col(k)) for k in agg.order_by] + ([c.order] if c.order is not None else [])
    value = c(agg.arg)
    if not keys:   # an input with no defined order (after unique or group_by): some record's value
        return F.first(value) if isinstance(agg, E.First) else F.last(value)
    return (F.min_by if isinstance(agg, E.First) else F.max_by)(value, F.struct(*keys))


AGGREGATES.update({E.First: _ordered, E.Last: _ordered})


# --- times: UTC instants, truncation ------------------------------------------------------------------------
# The engine runs every step with the session's time zone set to UTC (``SESSION``): Spark's time functions
# (``date_trunc``, ``date_format``, ``hour``, ``weekday``) then work in UTC, whatever zone the machine or the
# user's session is in, and each reads its argument once (the one-pass write composes a chain of operators
# into one expression per output, where every use of an argument is a copy of its whole expression). A log
# time's wall clock is made as the timestamp of that wall clock in UTC (``make_timestamp`` in zone "UTC"),
# its instant that minus the zone's offset, in seconds (a zone from -2359 to +2359: more than Java's zones
# take). Each step that could fail under ANSI (``make_timestamp`` of a day that does not exist, a map
# lookup of a missing month) is inside ``when`` the time is valid.

#: the session settings every step runs with (``SparkEngine.execute_step``)
SESSION = {"spark.sql.session.timeZone": "UTC"}
#: ``date_format``'s pattern of a timestamp's text, and of each unit of ``trunc_local``
TIMESTAMP_PATTERN = "yyyy-MM-dd'T'HH:mm:ss'Z'"
LOCAL_PATTERN = {"minute": "yyyy-MM-dd'T'HH:mm", "hour": "yyyy-MM-dd'T'HH", "day": "yyyy-MM-dd",
                 "week": "yyyy-MM-dd", "month": "yyyy-MM"}


def _clock(c, e):
    """(the wall clock as written, as the timestamp of that wall clock in UTC; the zone's offset in seconds)
    of a log time; the clock is null unless the time is valid."""
    F = _F()
    valid, y, mon, d, h = _log_time(c, e)
    t = c(e.args[0])
    num = lambda col: col.try_cast("int")      # noqa: E731
    clock = F.make_timestamp(num(y), num(mon), num(d), num(h), num(t.substr(16, 2)), num(t.substr(19, 2)),
                             F.lit("UTC"))
    offset = ((t.substr(23, 2).try_cast("long") * 3600 + t.substr(25, 2).try_cast("long") * 60)
              * F.when(t.substr(22, 1) == "-", F.lit(-1)).otherwise(F.lit(1)))
    return F.when(valid, clock), offset


def _instant(seconds):
    """A timestamp of epoch ``seconds``, null outside years 0001-9999."""
    F = _F()
    return F.when(seconds.between(E.MIN_EPOCH, E.MAX_EPOCH), F.timestamp_seconds(seconds))


def _timestamp(c, e):
    """A log time's instant: of the zoned layout its clock minus the zone; of the layouts without a zone
    (ISO 8601 ``...Z`` and HAProxy's ``.mmm``, each recognised by its regex, the calendar folded in), the
    clock read in UTC (a fraction dropped); of RFC 3339's ``...±hh:mm`` that clock minus the offset; of a
    Unix epoch its integer digits. Every ``make_timestamp`` runs only where its layout is valid."""
    F = _F()
    clock, offset = _clock(c, e)
    t = c(e.args[0])
    num = lambda col: col.try_cast("int")      # noqa: E731
    months = F.create_map(*[x for i, m in enumerate(E.MONTHS) for x in (F.lit(m), F.lit(i + 1))])
    iso = F.make_timestamp(num(t.substr(1, 4)), num(t.substr(6, 2)), num(t.substr(9, 2)), num(t.substr(12, 2)),
                           num(t.substr(15, 2)), num(t.substr(18, 2)), F.lit("UTC"))
    ms = F.make_timestamp(num(t.substr(8, 4)), months[t.substr(4, 3)], num(t.substr(1, 2)), num(t.substr(13, 2)),
                          num(t.substr(16, 2)), num(t.substr(19, 2)), F.lit("UTC"))
    # RFC 3339's offset: the last six characters, ``±hh:mm``
    sign = F.when(F.substring(t, -6, 1) == "-", F.lit(-1)).otherwise(F.lit(1))
    zone = sign * (F.substring(t, -5, 2).try_cast("long") * 3600 + F.substring(t, -2, 2).try_cast("long") * 60)
    zoned = _instant(F.unix_seconds(iso) - zone)
    epoch = _instant(F.regexp_extract(t, "^([0-9]+)", 1).try_cast("long"))
    return (F.when(clock.isNotNull(), _instant(F.unix_seconds(clock) - offset))
            .when(t.rlike(ISO_TIME_REGEX), iso).when(t.rlike(MS_TIME_REGEX), ms)
            .when(t.rlike(ISO_OFFSET_REGEX), zoned).when(t.rlike(EPOCH_REGEX), epoch))


def _time_of(c, e):
    """A timestamp as it is (UTC), or a log time's wall clock (``_clock``)."""
    return c(e.args[0]) if c.type_of(e.args[0]) == E.TIMESTAMP else _clock(c, e)[0]


def text(kind: str, value):
    """How a value of type ``kind`` is written as text by the sinks (TSV, CSV, JSON Lines): a float as
    ``render_float``, a timestamp as ``2015-05-17T10:05:03Z``; the other types as they are (TSV casts them
    to string)."""
    render = SINK_TEXT.get(kind)
    return value if render is None else render(value)


#: type -> how a value of it is written in TSV, CSV and JSON Lines (the types not here: Spark's cast to string)
SINK_TEXT = {E.FLOAT: float_text, E.TIMESTAMP: lambda value: _F().date_format(value, TIMESTAMP_PATTERN)}
TEXT[E.TIMESTAMP] = SINK_TEXT[E.TIMESTAMP]

COMPILE.update({
    E.Timestamp: _timestamp,
    E.FromEpoch: lambda c, e: _instant(c(e.args[0])),
    E.Epoch: lambda c, e: _F().unix_seconds(c(e.args[0])),
    # in the session's zone, UTC; "week": the Monday of the ISO week
    E.Trunc: lambda c, e: _F().date_trunc(e.unit, c(e.args[0])),
    E.TruncLocal: lambda c, e: _F().date_format(_F().date_trunc(e.unit, _clock(c, e)[0]), LOCAL_PATTERN[e.unit]),
    E.DayOfWeek: lambda c, e: _F().weekday(_time_of(c, e)).cast("long") + 1,      # weekday: Monday 0
    E.HourOfDay: lambda c, e: _F().hour(_time_of(c, e)).cast("long"),
})


# --- numbers: avg, median, percentile -----------------------------------------------------------------------

def _avg(c, agg):
    F = _F()
    v = c(agg.arg)
    # the exact 64-bit sum, then one division (Spark's avg would sum the values as doubles)
    return F.when(F.count(v) > 0, F.sum(v).cast("double") / F.count(v).cast("double"))


def _percentile(c, agg):
    F = _F()
    # Spark's exact percentile (a map of each distinct value to its count), not percentile_approx
    return float_result(F.percentile(c(agg.arg), F.lit(agg.p)))


AGGREGATES.update({
    E.Avg: _avg,
    E.Percentile: _percentile,
    E.Median: _percentile,
})
