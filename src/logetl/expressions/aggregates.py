"""Aggregates (``group_by``): count, sum, min, max, distinct count, first/last in an order, average,
median and percentiles."""
from __future__ import annotations

from logetl.expressions.base import BOOLEAN, Col, Expr, ExpressionError, FLOAT, INTEGER, Lit, NUMBERS, _wrap, field_name
from logetl.expressions.logic import Case
from logetl.expressions.numbers import render_float


# --- aggregates (group_by) ----------------------------------------------------------------------------

class Aggregate:
    """Base of the aggregate functions of ``group_by``: an engine-neutral description, compiled by each
    engine's table like the expressions. ``arg`` is the expression aggregated (None for ``count()``).

    ``where`` (a boolean expression) restricts every aggregate to the group's records where it is true:
    ``count(where=c)`` counts them, ``sum(x, where=c)`` sums ``x`` over them. It is ``arg`` made null
    elsewhere (``when(where).then(arg)``; ``count()``'s argument is then the literal 1), so an engine
    compiles it as any other argument."""

    word = ""

    def __init__(self, arg=None, where=None):
        self.value = None if arg is None else (Col(arg) if isinstance(arg, str) else _wrap(arg))
        self.where = where
        if where is not None and not isinstance(where, Expr):
            raise ExpressionError(f"{self.word}: where must be a boolean expression, not {where!r}")
        self.arg = self.value if where is None else \
            Case(((where, Lit(1) if self.value is None else self.value),))

    def check(self, types) -> str:
        return INTEGER

    def describe(self) -> str:
        inner = "" if self.value is None else self.value.describe()
        if self.where is not None:
            inner += f"{', ' if inner else ''}where {self.where.describe()}"
        return f"{self.word}({inner})"


def _exact_sum(agg: "Aggregate", types: dict) -> None:
    """The argument of a sum or an average: an integer (summed exactly, in 64 bits)."""
    t = agg.arg.check(types)
    if t == FLOAT:
        raise ExpressionError(f"{agg.describe()}: {agg.value.describe()} is float; a float sum depends on the "
                              "order of its additions, which engines do not share: sum integers (e.g. "
                              "(x * 1000).round().to_int()), or use median/percentile")
    if t != INTEGER:
        raise ExpressionError(f"{agg.word}: {agg.value.describe()} is {t}, not integer")



class Count(Aggregate):
    """``count()``: the group's records; ``count(x)``: those where ``x`` is not null; ``count(where=c)``:
    those where ``c`` is true."""

    word = "count"

    def check(self, types):
        if self.arg is not None:
            self.arg.check(types)
        return INTEGER


class Sum(Aggregate):
    """The sum of an integer over the group, nulls left out; null when every value is null. Floats are
    refused: a float sum depends on the order of the additions, which differs between engines and runs
    (round to an integer of a finer unit first, e.g. ``(x * 1000).round().to_int()``)."""

    word = "sum"

    def __init__(self, arg, where=None):
        super().__init__(arg, where)

    def check(self, types):
        _exact_sum(self, types)
        return INTEGER


class _Extreme(Aggregate):
    """What ``min`` and ``max`` share (neither is a kind of the other: engines tell them apart by class)."""

    def __init__(self, arg, where=None):
        super().__init__(arg, where)

    def check(self, types):
        t = self.arg.check(types)
        if t == BOOLEAN:
            raise ExpressionError(f"{self.word}: {self.arg.describe()} is boolean")
        return t


class Min(_Extreme):
    """The smallest value that is not null (strings in byte order, timestamps in time order); null when
    all are null."""

    word = "min"


class Max(_Extreme):
    """The largest value that is not null; null when all are null."""

    word = "max"


class CountDistinct(Aggregate):
    """The number of distinct values that are not null."""

    word = "count_distinct"

    def __init__(self, arg, where=None):
        super().__init__(arg, where)

    def check(self, types):
        self.arg.check(types)
        return INTEGER


def _order_keys(order_by, word: str) -> tuple[str, ...]:
    """``first``/``last``'s ``order_by``: None, a field name or ``asc(name)``, or a list of those."""
    if order_by is None:
        return ()
    one = isinstance(order_by, str) or (isinstance(order_by, tuple) and len(order_by) == 2
                                        and isinstance(order_by[1], bool))
    keys = []
    for key in [order_by] if one else order_by if isinstance(order_by, (list, tuple)) else [order_by]:
        if isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], bool):
            if key[1]:
                raise ExpressionError(f"{word}: order_by is ascending only, not desc({key[0]!r}) "
                                      f"(use {'first' if word == 'last' else 'last'} for the other end)")
            key = key[0]
        if not isinstance(key, str):
            raise ExpressionError(f"{word}: order_by takes field names, not {key!r}")
        keys.append(field_name(key))
    if not keys:
        raise ExpressionError(f"{word}: order_by names no field")
    return tuple(keys)


class _Ordered(Aggregate):
    """What ``first`` and ``last`` share: the value of one record of the group, in the order of the
    ``order_by`` fields (ascending, null first as ``sort`` puts it), then of the input."""

    def __init__(self, arg, order_by=None):
        super().__init__(arg)
        self.order_by = _order_keys(order_by, self.word)

    def check(self, types):
        for key in self.order_by:
            Col(key).check(types)
        return self.arg.check(types)

    def describe(self):
        order = f", order_by={', '.join(self.order_by)}" if self.order_by else ""
        return f"{self.word}({self.arg.describe()}{order})"


class First(_Ordered):
    """The value (null included) of the group's first record in the order of ``order_by`` (ascending,
    null first), records with equal keys in input order; with no ``order_by``, the first in input order.
    After ``unique`` or ``group_by`` the input order is not defined: give keys that tell records apart."""

    word = "first"


class Last(_Ordered):
    """The value (null included) of the group's last record in the order of ``order_by`` (ascending, null
    first: the greatest keys), records with equal keys in input order (the last of them); with no
    ``order_by``, the last in input order (see ``First`` after ``unique`` or ``group_by``)."""

    word = "last"


class Avg(Aggregate):
    """The mean of an integer over the group, nulls left out, as a float: the exact 64-bit sum divided by
    the count (one correctly rounded division); null when every value is null. Floats are refused, as by
    ``sum``."""

    word = "avg"

    def __init__(self, arg, where=None):
        super().__init__(arg, where)

    def check(self, types):
        _exact_sum(self, types)
        return FLOAT


class Percentile(Aggregate):
    """The ``p``-th quantile (``0 <= p <= 1``) of a number over the group, nulls left out, as a float,
    exact (from every value, not a sketch): with the ``n`` values sorted ``v[0] <= ... <= v[n-1]`` and
    ``pos = (n - 1) * p``, ``lo = floor(pos)``, ``hi = ceil(pos)``, it is ``v[lo]`` when ``v[lo] == v[hi]``,
    else ``v[lo] + (pos - lo) * (v[hi] - v[lo])`` (linear interpolation, as Spark's ``percentile``,
    numpy's default and ``statistics.quantiles(method='inclusive')``); every step a float operation, in
    that order (the last digit depends on it).
    Null when every value is null. The engine keeps each group's distinct values with their counts."""

    word = "percentile"

    def __init__(self, arg, p, where=None):
        super().__init__(arg, where)
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
            raise ExpressionError(f"percentile: p must be a literal number from 0 to 1, not {p!r}")
        self.p = float(p)

    def check(self, types):
        t = self.arg.check(types)
        if t not in NUMBERS:
            raise ExpressionError(f"{self.describe()}: {self.value.describe()} is {t}, not a number "
                                  "(integer or float)")
        return FLOAT

    def describe(self):
        inner = self.value.describe() + f", {render_float(self.p)}"
        if self.where is not None:
            inner += f", where {self.where.describe()}"
        return f"{self.word}({inner})"


class Median(Percentile):
    """``percentile(x, 0.5)``: the middle value, or the mean of the two middle values (as
    ``statistics.median``)."""

    word = "median"

    def __init__(self, arg, where=None):
        super().__init__(arg, 0.5, where)

    def describe(self):
        return Aggregate.describe(self)
