"""The expressions' base: the types, the errors, ``Expr`` (its operators and methods), the compilers'
base, field references and literals."""
from __future__ import annotations

import re

from logetl.diagnostics import Mistakes, closest
from logetl.errors import UsageError


STRING = "string"


INTEGER = "integer"


BOOLEAN = "boolean"


FLOAT = "float"


#: the types that take part in arithmetic and compare with each other
NUMBERS = (INTEGER, FLOAT)


#: the longest run of digits ``to_int`` accepts: every 18-digit number fits in 64 bits
INT_DIGITS = 18


INT_PATTERN = rf"^-?[0-9]{{1,{INT_DIGITS}}}$"


class ExpressionError(UsageError, ValueError):
    """An expression that cannot be computed (wrong type, unknown field, unsupported regex, ...): a usage
    error (exit 2), raised when the flow is defined. A ``ValueError`` too, for the callers that catch that."""


#: what a field name is: ASCII letters, digits, ``_`` and ``-``, the first a letter or a digit. The name is a
#: directory's (``FIELD=VALUE``, partitioned outputs), a JSON key, a Parquet column and a Spark column; a
#: leading ``_`` is the engines' own columns' (Spark's ``_order``, ``_input``, ``_status``; the local
#: engine's ``_p``; ``__logetl_...``), where a field of that name would be taken for one of them
FIELD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


FIELD_NAME_RULE = "ASCII letters, digits, _ and -, starting with a letter or digit"


def field_name(name) -> str:
    """``name`` when it is a valid field name, else ``ExpressionError`` naming it (one message for all)."""
    if not isinstance(name, str) or FIELD_NAME.fullmatch(name) is None:
        raise ExpressionError(f"invalid field name {name!r} ({FIELD_NAME_RULE})")
    return name


# --- mistakes: names and Python operators that are not part of the expressions (logetl.diagnostics) ----------

class UnknownName(ExpressionError, AttributeError):
    """A name that is not there (a function of ``logetl.api``, a method of an expression); the message names
    the nearest one that is. An ``AttributeError`` too, so that ``hasattr`` and ``getattr(..., default)``
    keep their meaning."""


def _wrap(value) -> "Expr":
    if isinstance(value, Expr):
        return value
    return Lit(value)


class Expr(Mistakes):
    """Base of all expressions. ``args`` are the sub-expressions; ``check`` returns the result type for
    the given field types, raising ``ExpressionError`` naming what is wrong."""

    args: tuple["Expr", ...] = ()
    __hash__ = object.__hash__      # == builds an expression, so identity is the hash

    def check(self, types: dict[str, str]) -> str:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def walk(self):
        """This expression and all of its sub-expressions, depth first."""
        yield self
        for a in self.args:
            yield from a.walk()

    def fields(self) -> list[str]:
        """The fields this expression reads, in first-use order."""
        seen = []
        for e in self.walk():
            if isinstance(e, Col) and e.name not in seen:
                seen.append(e.name)
        return seen

    def __repr__(self) -> str:
        return f"<expression {self.describe()}>"

    def __bool__(self):
        raise ExpressionError(f"{self.describe()} is an expression, not a Python truth value "
                              "(use & | ~ instead of and/or/not)")

    # --- operators ---------------------------------------------------------------------------------
    def __eq__(self, other): return Compare("==", self, _wrap(other))      # type: ignore[override]
    def __ne__(self, other): return Compare("!=", self, _wrap(other))      # type: ignore[override]
    def __lt__(self, other): return Compare("<", self, _wrap(other))
    def __le__(self, other): return Compare("<=", self, _wrap(other))
    def __gt__(self, other): return Compare(">", self, _wrap(other))
    def __ge__(self, other): return Compare(">=", self, _wrap(other))
    def __and__(self, other): return And(self, _wrap(other))
    def __rand__(self, other): return And(_wrap(other), self)
    def __or__(self, other): return Or(self, _wrap(other))
    def __ror__(self, other): return Or(_wrap(other), self)
    def __invert__(self): return Not(self)
    def __add__(self, other): return Arithmetic("+", self, _wrap(other))
    def __radd__(self, other): return Arithmetic("+", _wrap(other), self)
    def __sub__(self, other): return Arithmetic("-", self, _wrap(other))
    def __rsub__(self, other): return Arithmetic("-", _wrap(other), self)
    def __mul__(self, other): return Arithmetic("*", self, _wrap(other))
    def __rmul__(self, other): return Arithmetic("*", _wrap(other), self)
    def __floordiv__(self, other): return Arithmetic("//", self, _wrap(other))
    def __rfloordiv__(self, other): return Arithmetic("//", _wrap(other), self)
    def __mod__(self, other): return Arithmetic("%", self, _wrap(other))
    def __rmod__(self, other): return Arithmetic("%", _wrap(other), self)
    def __truediv__(self, other): return Arithmetic("/", self, _wrap(other))
    def __rtruediv__(self, other): return Arithmetic("/", _wrap(other), self)

    # --- methods -----------------------------------------------------------------------------------
    def is_null(self) -> "IsNull": return IsNull(self)
    def is_not_null(self) -> "Not": return Not(IsNull(self))
    def is_in(self, values) -> "IsIn": return IsIn(self, _values(values))
    def starts_with(self, prefix: str) -> "StartsWith": return StartsWith(self, prefix)
    def ends_with(self, suffix: str) -> "EndsWith": return EndsWith(self, suffix)
    def contains(self, text: str, ignore_case: bool = False) -> "Contains":
        return Contains(self, text, ignore_case)

    def matches(self, pattern: str, ignore_case: bool = False) -> "Matches":
        return Matches(self, pattern, ignore_case)

    def extract(self, pattern: str, group: int = 1) -> "Extract": return Extract(self, pattern, group)
    def substring(self, start: int, length: int | None = None) -> "Substring": return Substring(self, start, length)
    def lower(self) -> "Lower": return Lower(self)
    def upper(self) -> "Upper": return Upper(self)
    def split_part(self, delimiter: str, n: int) -> "SplitPart": return SplitPart(self, delimiter, n)
    def to_int(self) -> "ToInt": return ToInt(self)
    # numbers
    def to_float(self) -> "ToFloat": return ToFloat(self)
    def to_string(self) -> "ToString": return ToString(self)
    def round(self, digits: int = 0) -> "Round": return Round(self, digits)
    def cast(self, type_: str) -> "Expr": return cast(self, type_)


def _values(values) -> tuple:
    """``is_in``'s list of literals. A string is refused (it is not a list of its characters), and a set's
    values are sorted so that the flow's definition, and so its restart, is the same in every process."""
    if isinstance(values, (str, bytes)):
        raise ExpressionError(f"is_in takes a list of values, not the string {values!r}: is_in([{values!r}])")
    if isinstance(values, (set, frozenset)):
        return tuple(sorted(values, key=lambda v: (type(v).__name__, v)))
    if not isinstance(values, (list, tuple)):
        raise ExpressionError(f"is_in takes a list of values, not {values!r}: is_in([{values!r}])")
    return tuple(values)


class Compiler:
    """Compiles the expressions of one operator of one run through an engine's table (``table``: expression
    class -> function(compiler, expression)); ``compiler(expr)`` is the engine's value (a Polars
    expression, a Spark Column). Per-run state, where an expression needs any, lives in what a compilation
    makes (one compiler per operator of a run), never in the engine."""

    table: dict = {}

    def __init__(self, types: dict[str, str]):
        self.types = types

    def __call__(self, expr):
        try:
            fn = self.table[type(expr)]
        except KeyError:
            raise TypeError(type(expr).__name__) from None
        return fn(self, expr)

    def type_of(self, expr) -> str:
        return expr.check(self.types)


def _need(expr: Expr, types: dict, want: str, what: str) -> None:
    got = expr.check(types)
    if got != want:
        raise ExpressionError(f"{what}: {expr.describe()} is {got}, not {want}")


def _literal(value, kind: type, what: str):
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ExpressionError(f"{what} must be a literal {kind.__name__}, not {value!r}")
    return value


# --- values --------------------------------------------------------------------------------------------

class Col(Expr):
    """The value of field ``name``."""

    def __init__(self, name: str):
        self.name = field_name(name)

    def check(self, types):
        if self.name not in types:
            near = closest(self.name, types)
            hint = f"did you mean {near!r}? " if near else ""
            raise ExpressionError(f"no field {self.name!r} ({hint}fields: {', '.join(types)})")
        return types[self.name]

    def describe(self):
        return self.name


class Lit(Expr):
    """A constant: a string, an integer (64-bit), a float (64-bit, in the range ``FLOAT_LIMIT`` states;
    ``-0.0`` is ``0.0``) or a boolean. There is no null literal: use ``is_null()`` and ``coalesce``."""

    def __init__(self, value):
        if value is None:
            raise ExpressionError("there is no null literal: use is_null() or coalesce()")
        if isinstance(value, bool):
            self.type = BOOLEAN
        elif isinstance(value, int):
            if not -(1 << 63) <= value < (1 << 63):
                raise ExpressionError(f"integer literal {value} does not fit in 64 bits")
            self.type = INTEGER
        elif isinstance(value, float):
            value = float_literal(value)
            self.type = FLOAT
        elif isinstance(value, str):
            self.type = STRING
        else:
            raise ExpressionError(f"a literal must be a string, an integer, a float or a boolean, not {value!r}")
        self.value = value

    def check(self, types):
        return self.type

    def describe(self):
        if self.type == FLOAT:
            return render_float(self.value)
        return repr(self.value) if self.type == STRING else str(self.value).lower() \
            if self.type == BOOLEAN else str(self.value)


# the names of modules that import this one's: imported once its own are defined
from logetl.expressions.logic import And, Compare, IsIn, IsNull, Not, Or  # noqa: E402, I001
from logetl.expressions.numbers import (  # noqa: E402, I001
    Arithmetic, Round, ToFloat, ToInt, ToString, cast, float_literal, render_float)
from logetl.expressions.strings import (  # noqa: E402, I001
    Contains, EndsWith, Extract, Lower, Matches, SplitPart, StartsWith, Substring, Upper)
