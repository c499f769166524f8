"""Portable expressions: what a filter keeps, what ``derive`` computes, what an aggregate reads.

Each class only *describes* a value computed from one record's fields; every engine compiles it through
its own table (``logetl.engines.local_expressions.COMPILE``, ``logetl.engines.spark_expressions.COMPILE``),
one entry per class, so adding an expression is one class here plus one entry per engine. An engine that
lacks an entry refuses the flow before running, naming the expression.

Types are checked when the flow is defined: ``string``, ``integer`` (64-bit), ``float`` (64-bit, always
finite, see ``FLOAT_LIMIT``) and ``boolean``. Parsed fields are strings; ``to_int``, ``to_float`` and
``to_string`` (or ``cast``) convert. Integers and floats mix in ``+ - *``, comparisons and conditionals
(the integer becomes the nearest float); ``/`` is always a float. A float is written as the shortest
decimal that reads back as the same float, without an exponent (``render_float``). Null (a missing value) follows SQL: a comparison or function of null is null, a filter
keeps only records whose predicate is true, ``and``/``or`` are three-valued, a sink writes null as the
empty field. Every expression's semantics is written in its docstring and is the same on every engine;
``tests/test_expressions.py`` runs each one on both engines and compares the bytes.
"""
from __future__ import annotations

import re

STRING = "string"
INTEGER = "integer"
BOOLEAN = "boolean"
FLOAT = "float"
#: the types that take part in arithmetic and compare with each other
NUMBERS = (INTEGER, FLOAT)

#: the longest run of digits ``to_int`` accepts: every 18-digit number fits in 64 bits
INT_DIGITS = 18
INT_PATTERN = rf"^-?[0-9]{{1,{INT_DIGITS}}}$"


class ExpressionError(ValueError):
    """An expression that cannot be computed (wrong type, unknown field, unsupported regex, ...)."""


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


def _wrap(value) -> "Expr":
    if isinstance(value, Expr):
        return value
    return Lit(value)


class Expr:
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
    def contains(self, text: str) -> "Contains": return Contains(self, text)
    def matches(self, pattern: str) -> "Matches": return Matches(self, pattern)
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
    expression, a Spark Column). Per-run state, such as crc32's memo, lives in what a compilation makes,
    never in the engine."""

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
            raise ExpressionError(f"no field {self.name!r} (fields: {', '.join(types)})")
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


class _StringTest(Expr):
    """A string predicate with one literal operand."""

    word = ""

    def __init__(self, arg: Expr, text: str):
        self.args, self.text = (arg,), _literal(text, str, f"the operand of {self.word}")

    def check(self, types):
        _need(self.args[0], types, STRING, self.word)
        return BOOLEAN

    def describe(self):
        return f"{self.args[0].describe()} {self.word.replace('_', ' ')} {self.text!r}"


class StartsWith(_StringTest):
    """True when the string begins with ``text`` (compared as characters)."""

    word = "starts_with"


class EndsWith(_StringTest):
    """True when the string ends with ``text``."""

    word = "ends_with"


class Contains(_StringTest):
    """True when ``text`` occurs in the string (a literal, not a pattern)."""

    word = "contains"


# --- regular expressions: the subset Java and Rust (Polars) agree on ---------------------------------

_META = set(".^$|?*+()[]{}\\")
_ESCAPABLE = set(".^$|?*+()[]{}\\/-")


def portable_regex(pattern: str) -> str:
    """Checks that ``pattern`` uses only the documented subset and returns the form both engines compile:
    ``(?s)`` first (``.`` matches any character) and ``$`` as ``\\z`` (Java's ``$`` would also match
    before a final line terminator).

    The subset: literal characters; ``\\`` before one of ``. ^ $ | ? * + ( ) [ ] { } \\ / -``; ``.``;
    ``^`` and ``$``; classes ``[abc]``, ``[^a-z0-9_]`` of literal characters, ranges and those escapes;
    groups ``( )`` and ``(?: )``; ``|``; quantifiers ``* + ? {n} {n,} {n,m}``, each optionally lazy (``?``).
    Not in it (the engines differ, or one lacks them): ``\\d \\w \\s \\b`` and other escapes, back
    references, look-around, flags such as ``(?i)``, possessive quantifiers, POSIX and nested classes."""
    out, i, depth = ["(?s)"], 0, 0

    def fail(why: str):
        raise ExpressionError(f"regex {pattern!r}: {why} at offset {i} (see the portable subset in the README)")

    n = len(pattern)
    quantifiable = False
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n or pattern[i + 1] not in _ESCAPABLE:
                fail(f"escape \\{pattern[i + 1:i + 2]} is not portable")
            out.append(pattern[i:i + 2])
            i, quantifiable = i + 2, True
        elif c == "[":
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                fail("a class starting with ] is not portable (escape it)")
            start = j
            while j < n and pattern[j] != "]":
                if pattern[j] == "\\":
                    if j + 1 >= n or pattern[j + 1] not in _ESCAPABLE:
                        fail(f"escape \\{pattern[j + 1:j + 2]} in a class is not portable")
                    j += 2
                    continue
                if pattern[j] == "[" or pattern.startswith("&&", j):
                    fail("nested classes, POSIX classes and && are not portable")
                j += 1
            if j >= n:
                fail("unterminated class")
            if j == start:
                fail("empty class")
            out.append(pattern[i:j + 1])
            i, quantifiable = j + 1, True
        elif c == "(":
            if pattern.startswith("(?:", i):
                out.append("(?:")
                i += 3
            elif pattern.startswith("(?", i):
                fail("flags, look-around and named groups are not portable")
            else:
                out.append("(")
                i += 1
            depth, quantifiable = depth + 1, False
        elif c == ")":
            if depth == 0:
                fail("unbalanced )")
            out.append(")")
            depth, i, quantifiable = depth - 1, i + 1, True
        elif c in "*+?{":
            if not quantifiable:
                fail("nothing to repeat")
            if c == "{":
                m = re.match(r"\{(\d+)(,(\d*))?\}", pattern[i:])
                if not m or (m.group(3) and int(m.group(3)) < int(m.group(1))):
                    fail("a bad {n,m} quantifier")
                if int(m.group(1)) > 1000 or (m.group(3) and int(m.group(3)) > 1000):
                    fail("repetition counts above 1000 are not portable")
                out.append(m.group(0))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
            if i < n and pattern[i] == "?":          # lazy: the same match/no-match answer
                out.append("?")
                i += 1
            elif i < n and pattern[i] in "*+?{":
                fail("possessive and stacked quantifiers are not portable")
            quantifiable = False
        elif c == "$":
            out.append(r"\z")
            i, quantifiable = i + 1, False
        elif c == "^":
            out.append("^")
            i, quantifiable = i + 1, False
        elif c == "|":
            out.append("|")
            i, quantifiable = i + 1, False
        elif c == "]" or c == "}":
            fail(f"an unescaped {c}")
        else:
            out.append(c)
            i, quantifiable = i + 1, True
    if depth:
        fail("unbalanced (")
    return "".join(out)


class Matches(Expr):
    """True when the regular expression ``pattern`` matches somewhere in the string (anchor it with ``^``
    and ``$`` for a whole match). Only the portable subset (``portable_regex``) is accepted."""

    def __init__(self, arg: Expr, pattern: str):
        self.args, self.pattern = (arg,), _literal(pattern, str, "a regex")
        self.compiled = portable_regex(pattern)

    def check(self, types):
        _need(self.args[0], types, STRING, "matches")
        return BOOLEAN

    def describe(self):
        return f"{self.args[0].describe()} matches {self.pattern!r}"


# --- string functions ---------------------------------------------------------------------------------

class Substring(Expr):
    """``length`` characters (all the rest when None) from character ``start``, counted from 1."""

    def __init__(self, arg: Expr, start: int, length: int | None = None):
        self.args = (arg,)
        self.start = _literal(start, int, "substring's start")
        if start < 1:
            raise ExpressionError(f"substring's start counts from 1, not {start}")
        if length is not None and (_literal(length, int, "substring's length") < 0):
            raise ExpressionError(f"substring's length must be >= 0, not {length}")
        self.length = length

    def check(self, types):
        _need(self.args[0], types, STRING, "substring")
        return STRING

    def describe(self):
        tail = "" if self.length is None else f", {self.length}"
        return f"substring({self.args[0].describe()}, {self.start}{tail})"


class _StringMap(Expr):
    word = ""

    def __init__(self, arg: Expr):
        self.args = (arg,)

    def check(self, types):
        _need(self.args[0], types, STRING, self.word)
        return STRING

    def describe(self):
        return f"{self.word}({self.args[0].describe()})"


class Lower(_StringMap):
    """Lower case. ASCII letters map the same on every engine; other letters follow the engine's
    Unicode tables (Rust's and Java's agree except for a few special cases)."""

    word = "lower"


class Upper(_StringMap):
    """Upper case (see ``Lower`` for letters outside ASCII)."""

    word = "upper"


class SplitPart(Expr):
    """The ``n``-th piece (from 1) of the string split at every ``delimiter`` (a literal); null when the
    string has fewer pieces."""

    def __init__(self, arg: Expr, delimiter: str, n: int):
        self.args = (arg,)
        self.delimiter = _literal(delimiter, str, "split_part's delimiter")
        if not delimiter:
            raise ExpressionError("split_part's delimiter must not be empty")
        self.n = _literal(n, int, "split_part's part number")
        if n < 1:
            raise ExpressionError(f"split_part counts parts from 1, not {n}")

    def check(self, types):
        _need(self.args[0], types, STRING, "split_part")
        return STRING

    def describe(self):
        return f"split_part({self.args[0].describe()}, {self.delimiter!r}, {self.n})"


class Concat(Expr):
    """The strings (integers in decimal) joined; null when any is null."""

    def __init__(self, *args: Expr):
        if not args:
            raise ExpressionError("concat needs at least one value")
        self.args = tuple(_wrap(a) for a in args)

    def check(self, types):
        for a in self.args:
            t = a.check(types)
            if t not in (STRING, INTEGER):
                hint = f" (concat(to_string({a.describe()})) writes its text)" if t == FLOAT else ""
                raise ExpressionError(f"concat: {a.describe()} is not a string or an integer{hint}")
        return STRING

    def describe(self):
        return f"concat({', '.join(a.describe() for a in self.args)})"


class ToInt(Expr):
    """An integer from a string that is an optional ``-`` and 1 to 18 ASCII digits; null otherwise (so
    ``-``, ``+5``, `` 5``, ``1e3`` and longer numbers are null). An integer stays as it is. A float is
    truncated toward zero (``2.7`` -> 2, ``-2.7`` -> -2); null when the result is outside 64 bits."""

    def __init__(self, arg: Expr):
        self.args = (arg,)

    def check(self, types):
        t = self.args[0].check(types)
        if t not in (STRING, INTEGER, FLOAT):
            raise ExpressionError(f"to_int: {self.args[0].describe()} is {t}")
        return INTEGER

    def describe(self):
        return f"to_int({self.args[0].describe()})"


class Arithmetic(Expr):
    """``+ - *`` of numbers, true division ``/``, and floor division ``//`` and modulo ``%`` (as Python's:
    the remainder has the divisor's sign) of integers. ``+ - *`` of two integers is an integer (results
    beyond 64 bits are not defined: the local engine wraps, Spark fails the run), of an integer and a float
    or two floats a float; ``/`` is always a float (``7 / 2`` is ``3.5``). Null when either side is null
    or the divisor is 0 (for ``/``, ``//`` and ``%`` alike); a float result beyond the float range is
    null, below the smallest normal float 0.0 (see ``FLOAT_LIMIT``)."""

    OPS = ("+", "-", "*", "/", "//", "%")

    def __init__(self, op: str, left: Expr, right: Expr):
        assert op in self.OPS
        self.op, self.args = op, (left, right)

    def check(self, types):
        kinds = [a.check(types) for a in self.args]
        if self.op in ("//", "%"):
            for a, t in zip(self.args, kinds):
                if t != INTEGER:
                    hint = " (use / for a float quotient)" if t == FLOAT else ""
                    raise ExpressionError(f"{self.describe()}: {a.describe()} is {t}, not integer{hint}")
            return INTEGER
        if not all(t in NUMBERS for t in kinds):
            raise ExpressionError(f"{self.describe()}: {self.op} takes integers and floats; "
                                  f"{self.args[0].describe()} is {kinds[0]}, {self.args[1].describe()} is {kinds[1]}")
        return FLOAT if self.op == "/" or FLOAT in kinds else INTEGER

    def describe(self):
        return f"{self.args[0].describe()} {self.op} {self.args[1].describe()}"


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


class Crc32(Expr):
    """CRC-32 (IEEE 802.3, as ``zlib.crc32``) of the string's UTF-8 bytes: an integer from 0 to 2**32-1,
    the same on every machine and engine."""

    def __init__(self, arg: Expr):
        self.args = (_wrap(arg),)

    def check(self, types):
        _need(self.args[0], types, STRING, "crc32")
        return INTEGER

    def describe(self):
        return f"crc32({self.args[0].describe()})"


# --- the access log's time ----------------------------------------------------------------------------

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
#: a valid access-log time, ``dd/Mon/yyyy:HH:MM:SS ±hhmm`` (the day is checked against the month apart)
LOG_TIME_PATTERN = (r"^(0[1-9]|[12][0-9]|3[01])/(" + "|".join(MONTHS) + r")/"
                    r"([0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3}):"
                    r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9] [+-]([01][0-9]|2[0-3])[0-5][0-9]$")


def _log_time_valid() -> str:
    """``LOG_TIME_PATTERN`` with the calendar folded in: one regular expression that matches exactly the
    valid times (days 29-31 only in the months that have them, 29 February only in leap years of the
    proleptic Gregorian calendar). One pass of a regex engine decides validity, with no arithmetic."""
    thirty_one = "|".join(m for i, m in enumerate(MONTHS) if i in (0, 2, 4, 6, 7, 9, 11))
    not_feb = "|".join(m for m in MONTHS if m != "Feb")
    year = r"(?:[0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})"
    # divisible by 4 and not by 100, or by 400 (0000 is not a year)
    leap = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
    rest = r":(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9] [+-](?:[01][0-9]|2[0-3])[0-5][0-9]$"
    return (r"^(?:(?:(?:0[1-9]|1[0-9]|2[0-8])/(?:" + "|".join(MONTHS) + r")|(?:29|30)/(?:" + not_feb
            + r")|31/(?:" + thirty_one + r"))/" + year + r"|29/Feb/" + leap + r")" + rest)


LOG_TIME_VALID = _log_time_valid()


class _LogTime(Expr):
    """Parts of an access-log time ``dd/Mon/yyyy:HH:MM:SS ±hhmm`` as written (no zone conversion); null
    unless the time is valid: ``dd`` a real day of that month and year (proleptic Gregorian calendar),
    ``Mon`` one of Jan..Dec, year 0001-9999, ``HH`` 00-23, ``MM`` and ``SS`` 00-59, one space, a zone
    ``+`` or ``-`` with ``hh`` 00-23 and ``mm`` 00-59, nothing before or after."""

    word = ""

    def __init__(self, arg: Expr):
        self.args = (_wrap(arg),)

    def check(self, types):
        _need(self.args[0], types, STRING, self.word)
        return STRING

    def describe(self):
        return f"{self.word}({self.args[0].describe()})"


class Day(_LogTime):
    """``YYYY-MM-DD`` of an access-log time (see ``_LogTime`` for when it is null)."""

    word = "day"


class Hour(_LogTime):
    """``YYYY-MM-DDTHH`` of an access-log time (see ``_LogTime`` for when it is null)."""

    word = "hour"


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
    """The smallest value that is not null (strings in byte order); null when all are null."""

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


# --- numbers: float, casts, rounding, conditionals, avg/median/percentile ------------------------------
# A float is an IEEE 754 double in a range that every engine writes alike: finite, of magnitude below
# FLOAT_LIMIT (2**121, about 2.66e36), and 0 or at least FLOAT_MIN_NORMAL (no subnormal, no -0.0). A
# literal is checked, and every expression that makes a float passes its result through the engines'
# ``float_result``: beyond the limit it is null, below the smallest normal float it is 0.0. So no output
# ever spells inf, nan or -0.0, equal floats are equal bytes everywhere, and the text of every float is
# the same on every engine (Java before 19 writes some larger integral floats and the smallest subnormal
# with a digit more than the shortest).

#: floats are below this in magnitude; and 0 or at least the smallest normal double
FLOAT_LIMIT = 2.0 ** 121
FLOAT_MIN_NORMAL = 2.2250738585072014e-308
#: the first float magnitude from which every float is an integer
FLOAT_INTEGRAL = 2.0 ** 52
#: what ``to_float`` accepts: an optional ``-``, digits, optionally ``.`` and digits, optionally an
#: exponent ``e``/``E`` with an optional sign and 1 to 4 digits (no spaces, no ``+`` first, no ``inf``/``nan``)
FLOAT_PATTERN = r"^-?[0-9]+(\.[0-9]+)?([eE][+\-]?[0-9]{1,4})?$"
#: ``round``'s digits: from 0 (to an integer) to this
ROUND_DIGITS = 15


def float_literal(value: float) -> float:
    """``value`` as a float literal: below ``FLOAT_LIMIT`` in magnitude; a subnormal and ``-0.0`` are
    ``0.0``."""
    if not abs(value) < FLOAT_LIMIT:
        raise ExpressionError(f"a float literal must be finite and below 2**121 in magnitude, not {value!r}")
    return value if abs(value) >= FLOAT_MIN_NORMAL else 0.0


def render_float(value: float) -> str:
    """The text of a float in TSV and JSON Lines outputs, ``to_string`` and ``concat`` on every engine: the
    shortest decimal that reads back as the same float (Python's ``repr``), written without an exponent
    and with at least one digit after the point: ``0.5``, ``3.0``, ``-2.25``, ``0.0001``,
    ``100000000000000000000.0``, ``0.30000000000000004``."""
    from decimal import Decimal

    text = format(Decimal(repr(value)), "f")
    return text if "." in text else text + ".0"


def _number(expr: Expr, types: dict, what: str) -> str:
    t = expr.check(types)
    if t not in NUMBERS:
        raise ExpressionError(f"{what}: {expr.describe()} is {t}, not a number (integer or float)")
    return t


def _exact_sum(agg: "Aggregate", types: dict) -> None:
    """The argument of a sum or an average: an integer (summed exactly, in 64 bits)."""
    t = agg.arg.check(types)
    if t == FLOAT:
        raise ExpressionError(f"{agg.describe()}: {agg.value.describe()} is float; a float sum depends on the "
                              "order of its additions, which engines do not share: sum integers (e.g. "
                              "(x * 1000).round().to_int()), or use median/percentile")
    if t != INTEGER:
        raise ExpressionError(f"{agg.word}: {agg.value.describe()} is {t}, not integer")


class ToFloat(Expr):
    """A float from a string written as ``FLOAT_PATTERN`` says (``12``, ``-0.5``, ``1.5e3``), the nearest
    float to that decimal; null for any other string and for a number beyond the float range
    (``FLOAT_LIMIT``; below the smallest normal float it is 0.0). An integer
    becomes the nearest float (exact up to 2**53); a float stays as it is."""

    def __init__(self, arg: Expr):
        self.args = (_wrap(arg),)

    def check(self, types):
        t = self.args[0].check(types)
        if t not in (STRING, INTEGER, FLOAT):
            raise ExpressionError(f"to_float: {self.args[0].describe()} is {t}")
        return FLOAT

    def describe(self):
        return f"to_float({self.args[0].describe()})"


class ToString(Expr):
    """The text of a value as a TSV output writes it: a string as it is, an integer in decimal, a float
    as ``render_float`` says, a boolean ``true``/``false``; null stays null."""

    def __init__(self, arg: Expr):
        self.args = (_wrap(arg),)

    def check(self, types):
        self.args[0].check(types)
        return STRING

    def describe(self):
        return f"to_string({self.args[0].describe()})"


#: ``cast``'s target types and the expression each one is
CASTS = {STRING: ToString, INTEGER: ToInt, FLOAT: ToFloat}


def cast(expr: Expr, type_: str) -> Expr:
    """``expr`` as type ``type_`` (``"string"``, ``"integer"`` or ``"float"``): ``to_string``, ``to_int`` or
    ``to_float``."""
    if type_ not in CASTS:
        raise ExpressionError(f"cast: no type {type_!r} (types: {', '.join(CASTS)})")
    return CASTS[type_](_wrap(expr))


class Round(Expr):
    """A float rounded to ``digits`` decimal places (0 to ``ROUND_DIGITS``), ties away from zero:
    ``x * 10**digits`` (one floating-point multiplication) is rounded to the nearest integer, a half going
    away from zero (``0.5`` -> 1, ``1.5`` -> 2, ``2.5`` -> 3, ``-0.5`` -> -1), then divided by
    ``10**digits``. Ties are those of that product as a float: ``1.005 * 100`` is 100.49999999999999, so
    ``round(1.005, 2)`` is ``1.0``; ``2.675 * 100`` is exactly 267.5, so ``round(2.675, 2)`` is ``2.68``
    (Python's ``round``, which looks at the stored value 2.67499999…, gives 2.67). A float whose product
    is ``2**52`` or more has no fraction to round and stays as it is. An integer stays as it is (an
    integer)."""

    def __init__(self, arg: Expr, digits: int = 0):
        self.args = (_wrap(arg),)
        self.digits = _literal(digits, int, "round's digits")
        if not 0 <= digits <= ROUND_DIGITS:
            raise ExpressionError(f"round's digits go from 0 to {ROUND_DIGITS}, not {digits}")

    def check(self, types):
        return _number(self.args[0], types, "round")

    def describe(self):
        return f"round({self.args[0].describe()}, {self.digits})"


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
