"""Logic and comparison: comparisons, ``and``/``or``/``not`` (three-valued, as SQL), nulls, lists of
values, ``coalesce`` and the conditional ``when(...).then(...).otherwise(...)``."""
from __future__ import annotations

from logetl.expressions.base import BOOLEAN, Expr, ExpressionError, FLOAT, Lit, NUMBERS, _need, _wrap


# --- logic and comparison ----------------------------------------------------------------------------

class Compare(Expr):
    """``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=`` of two values of one type: strings in UTF-8 byte
    order, numbers numerically (an integer and a float compare as numbers: the integer is converted to
    the nearest float first); booleans with ``==``/``!=`` only. Null when either side is null."""

    OPS = ("==", "!=", "<", "<=", ">", ">=")

    def __init__(self, op: str, left: Expr, right: Expr):
        assert op in self.OPS
        self.op, self.args = op, (left, right)

    def check(self, types):
        a, b = (x.check(types) for x in self.args)
        if a != b and not (a in NUMBERS and b in NUMBERS):
            raise ExpressionError(f"cannot compare {self.args[0].describe()} ({a}) with "
                                  f"{self.args[1].describe()} ({b}): use to_int() or a {a} literal")
        if a == BOOLEAN and self.op not in ("==", "!="):
            raise ExpressionError(f"{self.describe()}: booleans compare with == and != only")
        return BOOLEAN

    def describe(self):
        return f"{self.args[0].describe()} {self.op} {self.args[1].describe()}"


class And(Expr):
    """Both true (three-valued: false and null is false)."""

    def __init__(self, left: Expr, right: Expr):
        self.args = (left, right)

    def check(self, types):
        for a in self.args:
            _need(a, types, BOOLEAN, "and")
        return BOOLEAN

    def describe(self):
        return f"({self.args[0].describe()} and {self.args[1].describe()})"


class Or(Expr):
    """Either true (three-valued: true or null is true)."""

    def __init__(self, left: Expr, right: Expr):
        self.args = (left, right)

    def check(self, types):
        for a in self.args:
            _need(a, types, BOOLEAN, "or")
        return BOOLEAN

    def describe(self):
        return f"({self.args[0].describe()} or {self.args[1].describe()})"


class Not(Expr):
    """Negation; null stays null."""

    def __init__(self, arg: Expr):
        self.args = (arg,)

    def check(self, types):
        _need(self.args[0], types, BOOLEAN, "not")
        return BOOLEAN

    def describe(self):
        inner = self.args[0]
        if isinstance(inner, IsNull):
            return f"{inner.args[0].describe()} is not null"
        return f"not {inner.describe()}"


class IsNull(Expr):
    """True when the value is null (never null itself)."""

    def __init__(self, arg: Expr):
        self.args = (arg,)

    def check(self, types):
        self.args[0].check(types)
        return BOOLEAN

    def describe(self):
        return f"{self.args[0].describe()} is null"


class IsIn(Expr):
    """True when the value equals one of ``values`` (literals of its type); null when it is null."""

    def __init__(self, arg: Expr, values: tuple):
        if not values:
            raise ExpressionError("is_in needs at least one value")
        self.args, self.values = (arg,), tuple(Lit(v).value for v in values)

    def check(self, types):
        t = self.args[0].check(types)
        for v in self.values:
            if Lit(v).type != t:
                raise ExpressionError(f"is_in: {v!r} is not a {t} like {self.args[0].describe()}")
        return BOOLEAN

    def describe(self):
        return f"{self.args[0].describe()} in ({', '.join(Lit(v).describe() for v in self.values)})"


class Coalesce(Expr):
    """The first value that is not null (all of one type)."""

    def __init__(self, *args):
        if len(args) < 2:
            raise ExpressionError("coalesce needs at least two values")
        self.args = tuple(_wrap(a) for a in args)

    def check(self, types):
        kinds = {a.check(types) for a in self.args}
        if len(kinds) > 1:
            raise ExpressionError(f"{self.describe()}: values of different types ({', '.join(sorted(kinds))})")
        return kinds.pop()

    def describe(self):
        return f"coalesce({', '.join(a.describe() for a in self.args)})"


class Case(Expr):
    """``when(c1).then(v1).when(c2).then(v2).otherwise(v)``: the value of the first branch whose condition
    is true (a null condition is not true), else ``otherwise``'s value, else null. The values are of one
    type, or integers and floats (then all are floats). Built with ``logetl.api.when``."""

    def __init__(self, branches, otherwise=None):
        self.branches = tuple((c, _wrap(v)) for c, v in branches)
        for c, _ in self.branches:
            if not isinstance(c, Expr):
                raise ExpressionError(f"when takes a boolean expression, not {c!r}")
        self.otherwise_value = None if otherwise is None else _wrap(otherwise)
        self.args = tuple(x for b in self.branches for x in b) + (
            () if self.otherwise_value is None else (self.otherwise_value,))

    def when(self, condition) -> "When":
        """Another branch, tried when the ones before are not taken."""
        if self.otherwise_value is not None:
            raise ExpressionError(f"{self.describe()}: when after otherwise")
        return When(condition, self.branches)

    def otherwise(self, value) -> "Case":
        """The value when no branch is taken (without it: null)."""
        if self.otherwise_value is not None:
            raise ExpressionError(f"{self.describe()}: otherwise given twice")
        return Case(self.branches, value)

    def values(self) -> list[Expr]:
        return [v for _, v in self.branches] + ([] if self.otherwise_value is None else [self.otherwise_value])

    def check(self, types):
        for c, _ in self.branches:
            _need(c, types, BOOLEAN, "when")
        kinds = [v.check(types) for v in self.values()]
        if len(set(kinds)) == 1:
            return kinds[0]
        if set(kinds) <= set(NUMBERS):
            return FLOAT
        shown = ", ".join(f"{v.describe()} ({t})" for v, t in zip(self.values(), kinds))
        raise ExpressionError(f"{self.describe()}: the values are of different types: {shown}")

    def describe(self):
        text = " ".join(f"when {c.describe()} then {v.describe()}" for c, v in self.branches)
        tail = "" if self.otherwise_value is None else f" otherwise {self.otherwise_value.describe()}"
        return f"case {text}{tail} end"


class When:
    """A condition waiting for its value: ``when(c)`` needs ``.then(value)`` to be an expression."""

    def __init__(self, condition, branches=()):
        if not isinstance(condition, Expr):
            raise ExpressionError(f"when takes a boolean expression, not {condition!r}")
        self.condition, self.branches = condition, tuple(branches)

    def then(self, value) -> Case:
        """The value when the condition is true."""
        return Case(self.branches + ((self.condition, value),))

    def __repr__(self) -> str:
        return f"<when({self.condition.describe()}) without .then(value)>"

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise ExpressionError(f"when({self.condition.describe()}) needs .then(value) before .{name}")


def when(condition) -> When:
    """The start of a conditional: ``when(c).then(v)`` (see ``Case``)."""
    return When(condition)
