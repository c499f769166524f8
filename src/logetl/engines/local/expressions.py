"""The local engine's table of expressions and aggregates: each ``logetl.expressions`` class compiles to
a Polars expression here, one entry per class (``COMPILE`` and ``AGGREGATES``). Semantics are those the
classes' docstrings state; where Polars differs from them by default (nulls in ``is_in``, division by
zero) the entry says how it is made to agree. The string section (capture, URL parts, percent-decoding,
``first``/``last``) is at the end, with the hooks ``GroupByOp`` calls for aggregates that read more than
one value (``aggregate_input``). A type's Polars dtype is in ``DTYPES``; a type with a text of its own in
TSV, CSV and JSON Lines (a float, a timestamp) in ``SINK_TEXT``.
"""
from __future__ import annotations

import zlib

from logetl import expressions as E



def _pl():
    import polars as pl

    return pl


#: type -> its Polars dtype (a function of the polars module, imported on first use)
DTYPES = {E.STRING: lambda pl: pl.String, E.INTEGER: lambda pl: pl.Int64, E.BOOLEAN: lambda pl: pl.Boolean,
          E.FLOAT: lambda pl: pl.Float64}


def _dtype(kind: str):
    return DTYPES[kind](_pl())




def _lit(c, e):
    return _pl().lit(e.value, dtype=_dtype(e.type))


def _compare(c, e):
    a, b = _operands(c, e)
    return {"==": a.__eq__, "!=": a.__ne__, "<": a.__lt__, "<=": a.__le__, ">": a.__gt__,
            ">=": a.__ge__}[e.op](b)


def _arithmetic(c, e):
    pl = _pl()
    a, b = _operands(c, e)
    if e.op == "/":
        quotient = _divide(a.cast(pl.Float64), b.cast(pl.Float64), constant=not e.args[1].fields())
        return float_result(pl.when(b != 0).then(quotient))
    if c.type_of(e) == E.FLOAT:
        return float_result({"+": a.__add__, "-": a.__sub__, "*": a.__mul__}[e.op](b))
    if e.op == "%":
        # Polars' integer % is the modulo, as documented (never beyond 64 bits); a zero divisor is null
        return pl.when(b != 0).then(a % b)
    # + - * and // in 128 bits, then back to 64: a result beyond 64 bits is null, as on Spark (Polars'
    # 64-bit arithmetic wraps; the only // beyond is the smallest integer divided by -1)
    a, b = a.cast(pl.Int128), b.cast(pl.Int128)
    result = pl.when(b != 0).then(a // b) if e.op == "//" else {"+": a.__add__, "-": a.__sub__, "*": a.__mul__}[e.op](b)
    return result.cast(pl.Int64, strict=False)


def _to_int(c, e):
    pl = _pl()
    a = c(e.args[0])
    if c.type_of(e.args[0]) == E.INTEGER:
        return a
    if c.type_of(e.args[0]) == E.FLOAT:
        return a.cast(pl.Int64, strict=False)      # truncated toward zero; null outside 64 bits
    return pl.when(a.str.contains(E.INT_PATTERN)).then(a.cast(pl.Int64, strict=False))


def _crc32(c, e):
    pl = _pl()

    def crc(series):
        # zlib's CRC-32 of every value's bytes (a String's bytes are its UTF-8), mapped over the values: a
        # constant cost a value (about 0.13 us). Not once per distinct value through a memo: looking values
        # up and mapping them back costs Python work per distinct value of a batch, and a batch's distinct
        # client addresses grow with the log's client population, so the cost a line would grow with the log
        values = series.cast(pl.Binary).to_list()
        if series.has_nulls():
            crcs = [None if v is None else zlib.crc32(v) for v in values]
        else:
            crcs = list(map(zlib.crc32, values))
        return pl.Series(series.name, crcs, dtype=pl.Int64)

    return c(e.args[0]).map_batches(crc, return_dtype=pl.Int64)


def _log_time(c, e, width: int, render):
    """An access-log time's day or hour, computed once per distinct prefix: validity is one regex pass
    (``LOG_TIME_VALID``, the calendar folded in), and a valid time's day or hour depends only on its
    first ``width`` characters (``dd/Mon/yyyy`` or ``dd/Mon/yyyy:HH``), which repeat a lot."""
    pl = _pl()
    months = {m: f"{i + 1:02d}" for i, m in enumerate(E.MONTHS)}
    t = c(e.args[0])

    def per_prefix(series):
        distinct = series.unique().drop_nulls().to_list()
        return series.replace_strict(distinct, [render(x, months) for x in distinct], default=None,
                                     return_dtype=pl.String)

    return pl.when(t.str.contains(E.LOG_TIME_VALID)).then(t.str.slice(0, width)).map_batches(
        per_prefix, return_dtype=pl.String)


def _day(c, e):
    return _log_time(c, e, 11, lambda x, months: f"{x[7:11]}-{months[x[3:6]]}-{x[0:2]}")


def _hour(c, e):
    return _log_time(c, e, 14, lambda x, months: f"{x[7:11]}-{months[x[3:6]]}-{x[0:2]}T{x[12:14]}")


COMPILE = {
    E.Col: lambda c, e: _pl().col(e.name),
    E.Lit: _lit,
    E.Compare: _compare,
    E.And: lambda c, e: c(e.args[0]) & c(e.args[1]),
    E.Or: lambda c, e: c(e.args[0]) | c(e.args[1]),
    E.Not: lambda c, e: ~c(e.args[0]),
    E.IsNull: lambda c, e: c(e.args[0]).is_null(),
    E.IsIn: lambda c, e: c(e.args[0]).is_in(list(e.values)),     # null stays null in Polars >= 1.0
    E.StartsWith: lambda c, e: c(e.args[0]).str.starts_with(e.text),
    E.EndsWith: lambda c, e: c(e.args[0]).str.ends_with(e.text),
    E.Contains: lambda c, e: c(e.args[0]).str.contains(e.compiled) if e.ignore_case else
    c(e.args[0]).str.contains(e.text, literal=True),
    E.Matches: lambda c, e: c(e.args[0]).str.contains(e.compiled),
    E.Substring: lambda c, e: c(e.args[0]).str.slice(e.start - 1, e.length),
    E.Lower: lambda c, e: c(e.args[0]).str.to_lowercase(),
    E.Upper: lambda c, e: c(e.args[0]).str.to_uppercase(),
    E.SplitPart: lambda c, e: c(e.args[0]).str.split(e.delimiter).list.get(e.n - 1, null_on_oob=True),
    E.Concat: lambda c, e: _pl().concat_str([c(a) for a in e.args]),
    E.ToInt: _to_int,
    E.Arithmetic: _arithmetic,
    E.Coalesce: lambda c, e: _pl().coalesce([c(a) for a in e.args]),
    E.Crc32: _crc32,
    # the struct's hash mixes its fields' hashes in order (nulls included): one u64, as Int64's bits
    E.Hash64: lambda c, e: _pl().struct([c(a).alias(f"v{i}") for i, a in enumerate(e.args)]).hash(7)
    .reinterpret(signed=True),
    E.Day: _day,
    E.Hour: _hour,
}


# --- numbers: float, casts, rounding, conditionals ------------------------------------------------------

def float_result(x):
    """A float expression's value as the portable float (``expressions.FLOAT_LIMIT``): null unless finite
    and below the limit in magnitude, 0.0 below the smallest normal float (so ``-0.0`` is ``0.0``)."""
    pl = _pl()
    size = x.abs()
    return pl.when(x.is_finite() & (size < E.FLOAT_LIMIT)).then(
        pl.when(size >= E.FLOAT_MIN_NORMAL).then(x).otherwise(pl.lit(0.0)))


def _operands(c, e):
    """The two sides of a comparison or an arithmetic operation, both as floats when one is a float."""
    pl = _pl()
    kinds = [c.type_of(x) for x in e.args]
    values = [c(x) for x in e.args]
    if E.FLOAT in kinds and all(k in E.NUMBERS for k in kinds):
        values = [v.cast(pl.Float64) for v in values]
    return values


def _divide(a, b, constant: bool):
    """``a / b``, correctly rounded: Polars divides by a scalar as a multiplication by its reciprocal (123.0 /
    7.0 would be 17.57142857142857, not 17.571428571428573; 836.0 / 10000.0 0.08360000000000001), and a
    divisor repeated to the frame's length (``pl.repeat``) is still seen as a scalar. So a ``constant``
    divisor is made a column of its own: ``a * 0.0 + b`` is ``b`` for every finite ``a`` (a float here is
    always finite) and null where ``a`` is, whose quotient is null anyway."""
    return a / (a * 0.0 + b if constant else b)


def float_text(x):
    """A float expression's text (``expressions.render_float``): Polars writes the shortest decimal that
    reads back as the same float, positional for most magnitudes and with an exponent (``1e+20``,
    ``1e-7``) for the others; those few are written by ``render_float`` itself."""
    pl = _pl()

    def text(series):
        out = series.cast(pl.String)
        exponent = out.str.contains("e", literal=True).fill_null(False)
        if exponent.any():
            where = exponent.arg_true()
            out = out.scatter(where, [E.render_float(v) for v in series.gather(where).to_list()])
        return out

    return x.map_batches(text, return_dtype=pl.String)


#: the text of a value of each type that is not a string, as ``to_string`` and the TSV and JSON Lines sinks
#: write it (integers in decimal, booleans true/false)
TEXT = {
    E.INTEGER: lambda x: x.cast(_pl().String),
    E.BOOLEAN: lambda x: x.cast(_pl().String),
    E.FLOAT: float_text,
}


def _to_float(c, e):
    pl = _pl()
    a, kind = c(e.args[0]), c.type_of(e.args[0])
    if kind == E.FLOAT:
        return a
    if kind == E.INTEGER:
        return a.cast(pl.Float64)
    return float_result(pl.when(a.str.contains(E.FLOAT_PATTERN)).then(a.cast(pl.Float64, strict=False)))


def _to_string(c, e):
    kind = c.type_of(e.args[0])
    return c(e.args[0]) if kind == E.STRING else TEXT[kind](c(e.args[0]))


def _round(c, e):
    pl = _pl()
    x = c(e.args[0])
    if c.type_of(e.args[0]) == E.INTEGER:
        return x
    scale = float(10 ** e.digits)
    y = x * scale
    whole = pl.when(y >= 0).then(y.floor()).otherwise(y.ceil())       # toward zero
    frac = y - whole                                                   # exact
    step = pl.when(frac >= 0.5).then(1.0).when(frac <= -0.5).then(-1.0).otherwise(0.0)
    rounded = _divide(whole + step, pl.lit(scale), constant=True)
    return float_result(pl.when(y.abs() >= E.FLOAT_INTEGRAL).then(x).otherwise(rounded))


def _case(c, e):
    pl = _pl()
    floats = c.type_of(e) == E.FLOAT

    def value(v):
        return c(v).cast(pl.Float64) if floats else c(v)

    (first, v0), *rest = e.branches
    chain = pl.when(c(first)).then(value(v0))
    for cond, v in rest:
        chain = chain.when(c(cond)).then(value(v))
    if e.otherwise_value is None:
        return chain.otherwise(pl.lit(None, dtype=_dtype(c.type_of(e))))
    return chain.otherwise(value(e.otherwise_value))


COMPILE.update({
    E.ToFloat: _to_float,
    E.ToString: _to_string,
    E.Round: _round,
    E.Case: _case,
})


class Compiler(E.Compiler):
    """Compiles one operator's expressions to a Polars expression (``logetl.expressions.Compiler``)."""

    table = COMPILE


# --- aggregates: a partial state per batch, combined across batches and partitions -------------------------
# Each entry: (partial aggregation of input column ``v``, combination of partial column ``p``). Count
# distinct is not combinable this way: its values join the grouping keys of the partial stage (see
# GroupByOp), and the final stage counts them.

def _partial(agg, v):
    pl = _pl()
    if isinstance(agg, E.Count):
        return pl.len() if agg.arg is None else v.count()
    if isinstance(agg, E.Sum):
        # null (not 0) when every value is null: sum only where there is a value
        return pl.when(v.count() > 0).then(v.sum())
    # Max derives from Min (same type rule): test for Max
    return v.max() if isinstance(agg, E.Max) else v.min()


def _combine(agg, p):
    pl = _pl()
    if isinstance(agg, E.Count):
        return p.sum()
    if isinstance(agg, E.Sum):
        return pl.when(p.count() > 0).then(p.sum())
    return p.max() if isinstance(agg, E.Max) else p.min()


AGGREGATES = {E.Count: (_partial, _combine), E.Sum: (_partial, _combine), E.Min: (_partial, _combine),
              E.Max: (_partial, _combine), E.CountDistinct: None}


# --- strings: capture, case-insensitive match, URL parts ---------------------------------------------------

_UPPER, _LOWER = [chr(c) for c in range(65, 91)], [chr(c) for c in range(97, 123)]


def _extract(c, e):
    pl = _pl()
    x = c(e.args[0])
    value = x.str.extract(e.compiled, e.group)       # null: no match, or the group did not take part
    if e.certain:
        return value
    # a group that did not take part is "" (Spark cannot tell it from an empty match): a second pass
    # tells the records that match apart from those that do not
    return pl.when(x.str.contains(e.compiled)).then(value.fill_null(""))


def _capture(x, regex: str, group: int):
    """Group ``group`` of ``regex``'s first match, null when it does not match (the URL regexes' groups
    take part in every match, or are not empty when they do)."""
    return x.str.extract(regex, group)


def _target(x):
    """A request line's target (null unless it is one), or the value itself when it has no space."""
    pl = _pl()
    return pl.when(x.str.contains(" ", literal=True)).then(_capture(x, E.REQUEST_LINE, 2)).otherwise(x)


def _path(c, e):
    pl = _pl()
    t = _target(c(e.args[0]))
    return pl.coalesce([_capture(t, E.URL_PATH, 1), pl.when(t.str.contains(E.URL_EMPTY_PATH)).then(pl.lit("/"))])


def _query_param(c, e):
    query = _capture(_target(c(e.args[0])), E.URL_QUERY, 1)
    value = _capture(query, e.compiled, 1).str.strip_prefix("=")
    return _url_decode(value, plus_as_space=True) if e.decode else value


def _url_host(c, e):
    def host(x):
        t = _target(x)
        host = _pl().coalesce([_capture(t, E.URL_HOST, 1), _capture(t, E.URL_HOST, 2)])
        return host.str.replace_many(_UPPER, _LOWER)            # ASCII letters only

    return per_distinct(c(e.args[0]), host)


def per_distinct(x, fn):
    """``fn`` (of a String expression, giving a String) computed once per distinct value of ``x`` in a
    batch, then mapped back: for the regex-heavy functions of a request line or a URL, whose values repeat
    (a log's referers, agents and request lines are far fewer than its lines). Even when every value is
    distinct, finding the distinct values and mapping them back costs less than one of these regexes."""
    pl = _pl()

    def mapped(series):
        distinct = series.unique().drop_nulls()
        values = pl.DataFrame({"v": distinct}).select(fn(pl.col("v"))).to_series()
        return series.replace_strict(distinct, values, default=None, return_dtype=pl.String)

    return x.map_batches(mapped, return_dtype=pl.String, is_elementwise=True)


def _hex_decoded(x):
    """Percent-decoding of values that hold a ``%``, with Polars' string kernels: split at ``%``; the first
    piece, and a piece that does not start with a decoded escape (``DECODED_ESCAPE``) after its ``%``, go
    to hex as their UTF-8 bytes (``25`` for the ``%``); a piece that does gives its two hex digits as
    they are, then its rest in hex. The joined hex is the decoded bytes: decoded when they are UTF-8
    (``UTF8_HEX``), else null."""
    pl = _pl()
    pieces, e = x.str.split("%"), pl.element()
    rest = pieces.list.slice(1).list.eval(
        pl.when(e.str.contains(E.DECODED_ESCAPE))
        .then(pl.concat_str([e.str.slice(0, 2).str.to_lowercase(), e.str.slice(2).str.encode("hex")]))
        .otherwise(pl.concat_str([pl.lit("25"), e.str.encode("hex")]))).list.join("")
    hexed = pl.concat_str([pieces.list.first().str.encode("hex"), rest])
    utf8 = hexed.str.contains(E.UTF8_HEX)
    # the bytes that are not UTF-8 are not decoded at all (Polars' cast would fail the whole column)
    return pl.when(utf8).then(pl.when(utf8).then(hexed).otherwise(pl.lit("")).str.decode("hex").cast(pl.String))


def _decode_batch(series):
    """The values of ``series`` decoded: only those holding a ``%`` go through ``_hex_decoded``."""
    pl = _pl()
    has = series.str.contains("%", literal=True).fill_null(False)
    if not has.any():
        return series
    where = has.arg_true()
    decoded = pl.DataFrame({"x": series.gather(where)}).select(_hex_decoded(pl.col("x"))).to_series()
    out = series.clone()
    out.scatter(where, decoded)
    return out


def _url_decode(x, plus_as_space: bool):
    pl = _pl()
    if plus_as_space:
        x = x.str.replace_all("+", " ", literal=True)
    # elementwise: a constant is decoded once and broadcast
    return x.map_batches(_decode_batch, return_dtype=pl.String, is_elementwise=True)


COMPILE.update({
    E.Extract: _extract,
    E.Method: lambda c, e: per_distinct(c(e.args[0]), lambda x: _capture(x, E.REQUEST_LINE, 1)),
    E.Path: _path,
    E.QueryString: lambda c, e: _capture(_target(c(e.args[0])), E.URL_QUERY, 1),
    E.QueryParam: _query_param,
    E.UrlHost: _url_host,
    E.UrlDecode: lambda c, e: _url_decode(c(e.args[0]), e.plus_as_space),
})


def aggregate_input(c, agg):
    """The column ``GroupByOp`` aggregates for ``agg``: its argument, or for ``first``/``last`` a struct of
    the order keys (``k0``, ``k1``, ...) and the value (``v``)."""
    pl = _pl()
    if not isinstance(agg, (E.First, E.Last)):
        return c(agg.arg)
    return pl.struct([c(E.Col(k)).alias(f"k{i}") for i, k in enumerate(agg.order_by)] + [c(agg.arg).alias("v")])


def _pick(agg, s):
    """The first or last struct of ``s`` in the order of its keys, stable: partial states are combined in
    input order (batches arrive in order, and the spill keeps the order of what it combines), so equal
    keys resolve by input order within a batch and across them."""
    if agg.order_by:
        s = s.sort_by([s.struct.field(f"k{i}") for i in range(len(agg.order_by))], maintain_order=True,
                      nulls_last=False)
    return s.first() if isinstance(agg, E.First) else s.last()


#: (partial, combine, final): the state is the chosen record's struct; the final stage takes its value
AGGREGATES.update({
    E.First: (_pick, _pick, lambda agg, p: _pick(agg, p).struct.field("v")),
    E.Last: (_pick, _pick, lambda agg, p: _pick(agg, p).struct.field("v")),
})


# --- times: UTC instants, truncation ------------------------------------------------------------------------
# A log time is read by Polars' parser once the validity regex (the calendar folded in) has passed: its
# wall clock, as written, a naive Datetime; its instant, the clock minus its zone, a Datetime in UTC.
# Polars' dt functions on a UTC or naive Datetime depend on no zone of the machine's.

#: dt.truncate's interval of each unit; ISO weeks: Polars' "1w" starts on Monday
_EVERY = {"minute": "1m", "hour": "1h", "day": "1d", "week": "1w", "month": "1mo"}
TIMESTAMP_TEXT = "%Y-%m-%dT%H:%M:%SZ"


def _clock(c, e):
    """The wall clock of a log time as written, a naive Datetime; null unless the time is valid. The regex
    has checked the form and the calendar: Polars' parser of that one form only reads it (~20x faster than
    ``pl.datetime`` of the parts)."""
    pl = _pl()
    t = c(e.args[0])
    return pl.when(t.str.contains(E.LOG_TIME_VALID)).then(
        t.str.slice(0, 20).str.strptime(pl.Datetime("us"), "%d/%b/%Y:%H:%M:%S", strict=False))


def _instants(series):
    """The UTC instants of a Series of log times: null unless the time is valid and its instant falls in
    years 0001-9999. Series by Series, so that each step runs once (an expression used twice in one eager
    projection is computed twice); Polars' parser takes the zone (``%z``: -2359 to +2359) and converts.
    The other layouts (ISO 8601 ``...Z`` and ``...±hh:mm``, HAProxy's milliseconds, a Unix epoch) are read
    only when some time of the Series is not of the zoned one, each once its own regex (the calendar folded
    in) has passed."""
    pl = _pl()
    valid = series.str.contains(E.LOG_TIME_VALID)
    parsed = series.str.strptime(pl.Datetime("us", "UTC"), "%d/%b/%Y:%H:%M:%S %z", strict=False)
    kept = valid & parsed.dt.epoch("s").is_between(E.MIN_EPOCH, E.MAX_EPOCH)
    result = pl.when(kept).then(parsed)
    if not valid.fill_null(True).all():
        for regex, width, layout in ((E.ISO_TIME_VALID, 19, "%Y-%m-%dT%H:%M:%S"),
                                     (E.MS_TIME_VALID, 20, "%d/%b/%Y:%H:%M:%S")):
            clock = series.str.slice(0, width).str.strptime(pl.Datetime("us"), layout, strict=False)
            result = result.when(series.str.contains(regex)).then(clock.dt.replace_time_zone("UTC"))
        result = _offset_and_epoch(series, result)
    return pl.select(result).to_series()


def _offset_and_epoch(series, result):
    """``result`` (a when-chain) with RFC 3339's offset layout (the clock read as UTC, minus the offset:
    ``±hh:mm`` the last six characters) and a Unix epoch (its integer digits), each where its regex
    passes and its instant falls in years 0001-9999."""
    pl = _pl()
    clock = series.str.slice(0, 19).str.strptime(pl.Datetime("us"), "%Y-%m-%dT%H:%M:%S", strict=False)
    off = series.str.slice(-6)
    sign = pl.when(off.str.slice(0, 1) == "-").then(-1).otherwise(1)
    offset = sign * (off.str.slice(1, 2).cast(pl.Int64, strict=False) * 3600
                     + off.str.slice(4, 2).cast(pl.Int64, strict=False) * 60)
    zoned = clock.dt.epoch("s") - offset
    result = result.when(series.str.contains(E.ISO_OFFSET_VALID)).then(_in_range(zoned))
    seconds = series.str.extract(r"^([0-9]+)", 1).cast(pl.Int64, strict=False)
    return result.when(series.str.contains(E.EPOCH_VALID)).then(_in_range(seconds))


def _in_range(seconds):
    """A Datetime in UTC of epoch ``seconds``, null outside years 0001-9999."""
    pl = _pl()
    kept = pl.when(seconds.is_between(E.MIN_EPOCH, E.MAX_EPOCH)).then(seconds)
    return (kept * 1_000_000).cast(pl.Datetime("us", "UTC"))


def _timestamp(c, e):
    return c(e.args[0]).map_batches(_instants, return_dtype=_dtype(E.TIMESTAMP))


def _trunc_local(c, e):
    return _clock(c, e).dt.truncate(_EVERY[e.unit]).dt.strftime("%Y-%m-%dT%H:%M").str.slice(0, E.LOCAL_WIDTH[e.unit])


def _time_part(c, e, part):
    """``part`` (a function of a Datetime) of a timestamp in UTC, or of a log time as written."""
    t = c(e.args[0]) if c.type_of(e.args[0]) == E.TIMESTAMP else _clock(c, e)
    return part(t).cast(_pl().Int64)


def _text(kind: str, value):
    """How a value of type ``kind`` is written as text by the sinks (TSV, CSV, JSON Lines): a float as
    ``render_float``, a timestamp as ``2015-05-17T10:05:03Z``; the other types as they are."""
    render = SINK_TEXT.get(kind)
    return value if render is None else render(value)


#: type -> how a value of it is written in TSV, CSV and JSON Lines (the types not here: as Polars writes them)
SINK_TEXT = {E.FLOAT: float_text, E.TIMESTAMP: lambda value: value.dt.strftime(TIMESTAMP_TEXT)}
TEXT[E.TIMESTAMP] = SINK_TEXT[E.TIMESTAMP]

COMPILE.update({
    E.Timestamp: _timestamp,
    E.FromEpoch: lambda c, e: _in_range(c(e.args[0])),
    E.Epoch: lambda c, e: c(e.args[0]).dt.epoch("s"),
    E.Trunc: lambda c, e: c(e.args[0]).dt.truncate(_EVERY[e.unit]),
    E.TruncLocal: _trunc_local,
    E.DayOfWeek: lambda c, e: _time_part(c, e, lambda t: t.dt.weekday()),      # ISO: Monday 1
    E.HourOfDay: lambda c, e: _time_part(c, e, lambda t: t.dt.hour()),
})
DTYPES[E.TIMESTAMP] = lambda pl: pl.Datetime("us", "UTC")


# --- numbers: avg, median, percentile -----------------------------------------------------------------------
# avg's partial state is a struct of the exact sum and the count; an entry of three functions has a final
# step besides (state -> value). Median and percentile are not combinable as a state of fixed size: they
# are HISTOGRAM aggregates, whose values join the grouping keys of the partial stage with the count of
# their records (GroupByOp), so that memory holds each group's distinct values once (spilled by the keys
# as any partial state); the final stage reads each group's sorted values and counts.

HISTOGRAM = "histogram"


def _avg_partial(agg, v):
    return _pl().struct(v.sum().alias("s"), v.count().alias("n"))


def _avg_combine(agg, p):
    return _pl().struct(p.struct.field("s").sum().alias("s"), p.struct.field("n").sum().alias("n"))


def _avg_final(agg, p):
    pl = _pl()
    total, n = p.struct.field("s").sum(), p.struct.field("n").sum()
    return pl.when(n > 0).then(total.cast(pl.Float64) / n.cast(pl.Float64))


def percentile(agg, v, n):
    """``agg``'s percentile (``expressions.Percentile``) of one group from its rows of values ``v`` and
    their record counts ``n``, every step the float operation the docstring states (Spark's order)."""
    pl = _pl()
    known = v.is_not_null()
    values, counts = v.filter(known), n.filter(known)
    ordered, weights = values.sort(), counts.sort_by(values)
    below = weights.cum_sum()                      # records up to and including each value
    total = weights.sum()
    pos = (total - 1).cast(pl.Float64) * agg.p
    lo_rank, hi_rank = pos.floor(), pos.ceil()
    lo = ordered.filter(below > lo_rank).first().cast(pl.Float64)
    hi = ordered.filter(below > hi_rank).first().cast(pl.Float64)
    between = lo + (pos - lo_rank) * (hi - lo)
    return float_result(pl.when(total > 0).then(pl.when(lo == hi).then(lo).otherwise(between)))


AGGREGATES.update({
    E.Avg: (_avg_partial, _avg_combine, _avg_final),
    E.Percentile: HISTOGRAM,
    E.Median: HISTOGRAM,
})
