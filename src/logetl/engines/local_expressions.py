"""The local engine's table of expressions and aggregates: each ``logetl.expressions`` class compiles to
a Polars expression here, one entry per class (``COMPILE`` and ``AGGREGATES``). Semantics are those the
classes' docstrings state; where Polars differs from them by default (nulls in ``is_in``, division by
zero) the entry says how it is made to agree.
"""
from __future__ import annotations

import zlib

from logetl import expressions as E

MEMO_ROWS = 250_000       # crc32 forgets the values it computed past this many: ~40 MB of Python dict at most


def _pl():
    import polars as pl

    return pl


def _dtype(kind: str):
    pl = _pl()
    return {E.STRING: pl.String, E.INTEGER: pl.Int64, E.BOOLEAN: pl.Boolean, E.FLOAT: pl.Float64}[kind]




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
    if e.op in ("//", "%"):
        # Polars' integer // and % are floor division and modulo, as documented; a zero divisor is null
        return pl.when(b != 0).then(a // b if e.op == "//" else a % b)
    return {"+": a.__add__, "-": a.__sub__, "*": a.__mul__}[e.op](b)


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
    memo: dict[str, int] = {}

    def crc(series):
        # CRC-32 in C (zlib) once per distinct value: values such as client addresses repeat a lot, and
        # the memo carries over batches (and is forgotten past MEMO_ROWS values, to bound memory)
        values = series.unique().drop_nulls().to_list()
        if len(memo) + len(values) > MEMO_ROWS:
            memo.clear()
        for v in values:
            if v not in memo:
                memo[v] = zlib.crc32(v.encode("utf-8"))
        keys = list(memo) if len(memo) <= 4 * len(values) else values
        return series.replace_strict(keys, [memo[k] for k in keys], default=None, return_dtype=pl.Int64)

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
    E.Contains: lambda c, e: c(e.args[0]).str.contains(e.text, literal=True),
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
    7.0 would be 17.57142857142857, not 17.571428571428573), so a ``constant`` divisor is repeated to the
    frame's length first."""
    return a / (_pl().repeat(b, _pl().len()) if constant else b)


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
