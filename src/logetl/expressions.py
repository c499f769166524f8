"""Portable expressions: what a filter keeps, what ``derive`` computes, what an aggregate reads.

Each class only *describes* a value computed from one record's fields; every engine compiles it through
its own table (``logetl.engines.local.expressions.COMPILE``, ``logetl.engines.spark.expressions.COMPILE``),
one entry per class, so adding an expression is one class here plus one entry per engine. An engine that
lacks an entry refuses the flow before running, naming the expression.

Types are checked when the flow is defined: ``string``, ``integer`` (64-bit), ``float`` (64-bit, always
finite, see ``FLOAT_LIMIT``), ``boolean`` and ``timestamp`` (an instant in UTC, to the second:
``timestamp`` of a log time, ``trunc``, ``epoch``, ``day_of_week``, ``hour_of_day``; see the section on
times). Parsed fields are strings; ``to_int``, ``to_float`` and ``to_string`` (or ``cast``) convert.
Integers and floats mix in ``+ - *``, comparisons and conditionals (the integer becomes the nearest
float); ``/`` is always a float. A float is written as the shortest decimal that reads back as the same
float, without an exponent (``render_float``). Null (a missing value) follows SQL: a comparison or function of null is null, a filter
keeps only records whose predicate is true, ``and``/``or`` are three-valued, a sink writes null as the
empty field. Every expression's semantics is written in its docstring and is the same on every engine;
``tests/test_expressions.py`` runs each one on both engines and compares the bytes.

Strings (the section at the end): regex capture (``extract``), matching ignoring ASCII case, the parts of
a request line or URL (``Method``, ``Path``, ``QueryString``, ``QueryParam``, ``UrlHost``), percent-decoding
(``UrlDecode``) and the aggregates ``first``/``last`` in a given order (``tests/test_vocabulary_strings.py``).
"""
from __future__ import annotations

import re

from logetl.diagnostics import Mistakes, closest

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
    """True when ``text`` occurs in the string (a literal, not a pattern). With ``ignore_case``, ASCII
    letters match either case (``compiled``: the regex both engines run then, see ``fold_ascii_case``)."""

    word = "contains"

    def __init__(self, arg: Expr, text: str, ignore_case: bool = False):
        super().__init__(arg, text)
        self.ignore_case = _flag(ignore_case, "contains' ignore_case")
        self.compiled = portable_regex(fold_ascii_case(regex_escape(text))) if ignore_case else None

    def describe(self):
        return super().describe() + (" ignoring case" if self.ignore_case else "")


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
    and ``$`` for a whole match). Only the portable subset (``portable_regex``) is accepted. With
    ``ignore_case``, ASCII letters match either case; other characters only themselves
    (``fold_ascii_case``)."""

    def __init__(self, arg: Expr, pattern: str, ignore_case: bool = False):
        self.args, self.pattern = (arg,), _literal(pattern, str, "a regex")
        self.ignore_case = _flag(ignore_case, "matches' ignore_case")
        self.compiled = portable_regex(pattern)
        if ignore_case:
            self.compiled = portable_regex(fold_ascii_case(pattern))

    def check(self, types):
        _need(self.args[0], types, STRING, "matches")
        return BOOLEAN

    def describe(self):
        return f"{self.args[0].describe()} matches {self.pattern!r}" + (" ignoring case" if self.ignore_case else "")


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


# --- times: UTC instants, truncation ------------------------------------------------------------------
# A ``timestamp`` is an instant in UTC, to the second (held as microseconds: Polars' Datetime("us", "UTC"),
# Spark's TimestampType; no operation makes a fraction of a second). Written as ``2015-05-17T10:05:03Z``
# in TSV and JSON Lines, as Parquet's timestamp (microseconds, adjusted to UTC).

TIMESTAMP = "timestamp"

#: the instants a timestamp holds: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z, in epoch seconds
MIN_EPOCH, MAX_EPOCH = -62135596800, 253402300799
#: the units of ``trunc`` and ``trunc_local``
TIME_UNITS = ("minute", "hour", "day", "week", "month")
#: how ``trunc_local`` writes each unit: the first characters of ``YYYY-MM-DDTHH:MM`` (``day`` and
#: ``hour`` as ``day()`` and ``hour()`` write them)
LOCAL_WIDTH = {"minute": 16, "hour": 13, "day": 10, "week": 10, "month": 7}


def _unit(unit, what: str) -> str:
    if unit not in TIME_UNITS:
        raise ExpressionError(f"{what}: unit {unit!r} is not one of {', '.join(TIME_UNITS)}")
    return unit


class Timestamp(Expr):
    """The UTC instant of an access-log time ``dd/Mon/yyyy:HH:MM:SS ±hhmm``: the time as written minus
    its zone (``10:05:03 +0200`` is ``08:05:03Z``; across a day, month or year when the zone says so).
    Null unless the time is valid (see ``_LogTime``: the rule of ``day`` and ``hour``) and its instant
    falls in years 0001-9999 in UTC (``01/Jan/0001:00:30:00 +0100`` is null)."""

    def __init__(self, arg: Expr):
        self.args = (_wrap(arg),)

    def check(self, types):
        _need(self.args[0], types, STRING, "timestamp")
        return TIMESTAMP

    def describe(self):
        return f"timestamp({self.args[0].describe()})"


class FromEpoch(Expr):
    """The instant ``n`` seconds after 1970-01-01T00:00:00Z (before it when negative); null outside
    years 0001-9999 (``MIN_EPOCH`` to ``MAX_EPOCH``)."""

    def __init__(self, arg: Expr):
        self.args = (_wrap(arg),)

    def check(self, types):
        _need(self.args[0], types, INTEGER, "from_epoch")
        return TIMESTAMP

    def describe(self):
        return f"from_epoch({self.args[0].describe()})"


class Epoch(Expr):
    """Seconds from 1970-01-01T00:00:00Z to the instant (negative before it): an integer."""

    def __init__(self, arg: Expr):
        self.args = (_wrap(arg),)

    def check(self, types):
        t = self.args[0].check(types)
        if t != TIMESTAMP:
            raise ExpressionError(f"epoch: {self.args[0].describe()} is {t}, not timestamp"
                                  + (" (timestamp() makes one of a log time)" if t == STRING else ""))
        return INTEGER

    def describe(self):
        return f"epoch({self.args[0].describe()})"


class Trunc(Expr):
    """The instant truncated in UTC to the start of its ``unit``: ``minute``, ``hour``, ``day``, ``week``
    (Monday 00:00Z, ISO 8601 weeks: a week may start in the year before) or ``month`` (the 1st, 00:00Z).
    A timestamp."""

    def __init__(self, arg: Expr, unit: str):
        self.args, self.unit = (_wrap(arg),), _unit(unit, "trunc")

    def check(self, types):
        t = self.args[0].check(types)
        if t != TIMESTAMP:
            raise ExpressionError(f"trunc: {self.args[0].describe()} is {t}, not timestamp"
                                  + (" (timestamp() for UTC, or trunc_local() for the time as written)"
                                     if t == STRING else ""))
        return TIMESTAMP

    def describe(self):
        return f"trunc({self.args[0].describe()}, {self.unit!r})"


class TruncLocal(Expr):
    """An access-log time truncated *as written* (in its own zone, the zone left out) to the start of its
    ``unit``, as a string: ``minute`` ``YYYY-MM-DDTHH:MM``, ``hour`` ``YYYY-MM-DDTHH`` (as ``hour``),
    ``day`` ``YYYY-MM-DD`` (as ``day``), ``week`` the ``YYYY-MM-DD`` of its Monday (ISO 8601 weeks),
    ``month`` ``YYYY-MM``. Null unless the time is valid (see ``_LogTime``)."""

    def __init__(self, arg: Expr, unit: str):
        self.args, self.unit = (_wrap(arg),), _unit(unit, "trunc_local")

    def check(self, types):
        _need(self.args[0], types, STRING, "trunc_local")
        return STRING

    def describe(self):
        return f"trunc_local({self.args[0].describe()}, {self.unit!r})"


class _TimePart(Expr):
    """A part of a time: of a timestamp in UTC, of an access-log time (a string) as written, null unless
    the time is valid (see ``_LogTime``). An integer."""

    word = ""

    def __init__(self, arg: Expr):
        self.args = (_wrap(arg),)

    def check(self, types):
        t = self.args[0].check(types)
        if t not in (TIMESTAMP, STRING):
            raise ExpressionError(f"{self.word}: {self.args[0].describe()} is {t}, not a timestamp or a log time")
        return INTEGER

    def describe(self):
        return f"{self.word}({self.args[0].describe()})"


class DayOfWeek(_TimePart):
    """The ISO 8601 day of the week: 1 Monday to 7 Sunday (of a timestamp in UTC, of a log time as
    written)."""

    word = "day_of_week"


class HourOfDay(_TimePart):
    """The hour of the day, 0 to 23 (of a timestamp in UTC, of a log time as written)."""

    word = "hour_of_day"


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


# --- strings: capture, case-insensitive match, URL parts ----------------------------------------------

def _flag(value, what: str) -> bool:
    if not isinstance(value, bool):
        raise ExpressionError(f"{what} must be True or False, not {value!r}")
    return value


def regex_escape(text: str) -> str:
    """A portable regex matching ``text`` literally (a backslash before each of the subset's escapable
    characters)."""
    return "".join("\\" + ch if ch in _ESCAPABLE else ch for ch in text)


def _class_char(pattern: str, j: int) -> tuple[str, int]:
    """The character at ``pattern[j]`` inside a class (an escape stands for its character), and where the
    next one starts."""
    if pattern[j] == "\\":
        return pattern[j + 1], j + 2
    return pattern[j], j + 1


def _class_text(c: str) -> str:
    return "\\" + c if c in _ESCAPABLE else c


def _fold_class(pattern: str, i: int) -> tuple[str, int]:
    """The class starting at ``pattern[i]`` (``[``) with the other case of every ASCII letter it holds
    added, and the offset after it. The class is written again from its parsed ranges, every special
    character escaped, so that what is added cannot join a range of the original."""
    j = i + 1
    negated = pattern[j] == "^"
    j += negated
    ranges = []
    while pattern[j] != "]":
        lo, j = _class_char(pattern, j)
        hi = lo
        if pattern[j] == "-" and pattern[j + 1] != "]":
            hi, j = _class_char(pattern, j + 1)
        ranges.append((lo, hi))
    added = []
    for lo, hi in ranges:
        for first, last, shift in (("a", "z", -32), ("A", "Z", 32)):
            a, b = max(lo, first), min(hi, last)
            if a <= b:
                added.append((chr(ord(a) + shift), chr(ord(b) + shift)))
    body = "".join(_class_text(lo) if lo == hi else f"{_class_text(lo)}-{_class_text(hi)}"
                   for lo, hi in ranges + added)
    return "[" + "^" * negated + body + "]", j + 1


def fold_ascii_case(pattern: str) -> str:
    """A portable ``pattern`` (already checked by ``portable_regex``) rewritten to ignore the case of ASCII
    letters: a letter becomes the class of both cases (``a`` -> ``[aA]``), a class gains the other case of
    the letters it holds (``[^a-c_]`` -> ``[^a-c_A-C]``, so a negated class excludes both cases). Other
    characters match only themselves: Java's ``(?i)`` folds ASCII alone while Rust's folds Unicode (even
    ``k`` with the Kelvin sign), so neither flag is used and the rewrite is the one definition both run."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i:i + 2])
            i += 2
        elif c == "[":
            text, i = _fold_class(pattern, i)
            out.append(text)
        elif c == "{":                       # a quantifier: digits and a comma
            j = pattern.index("}", i) + 1
            out.append(pattern[i:j])
            i = j
        elif c == "(" and pattern.startswith("(?:", i):
            out.append("(?:")
            i += 3
        elif "a" <= c <= "z" or "A" <= c <= "Z":
            out.append(f"[{c.lower()}{c.upper()}]")
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _group_shape(pattern: str) -> tuple[int, set[int]]:
    """(the number of capturing groups of a portable ``pattern``, the groups that take part in every match
    of it): a group does unless it, or a group around it, is repeated with a minimum of 0 (``? * {0,n}``),
    or an alternative ``|`` is written beside it (at the level of any group around it, or the top)."""
    frames = [[None, False, []]]          # per open group: [its number or None, holds a |, groups inside]
    optional = set()
    count, i, n = 0, 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i = _fold_class(pattern, i)[1]
            continue
        if c == "(":
            number = None
            if not pattern.startswith("(?:", i):
                count += 1
                number = count
            frames.append([number, False, []])
            i += 3 if number is None else 1
            continue
        if c == ")":
            number, alternated, inside = frames.pop()
            mine = inside + ([number] if number else [])
            if re.match(r"[?*]|\{0+[,}]", pattern[i + 1:]):     # repeated with a minimum of 0
                optional.update(mine)
            if alternated:                                        # the groups of one alternative
                optional.update(inside)
            frames[-1][2].extend(mine)
            i += 1
            continue
        if c == "|":
            frames[-1][1] = True
        i += 1
    if frames[0][1]:
        optional.update(frames[0][2])
    return count, {g for g in range(count + 1) if g not in optional}


class Extract(Expr):
    """The text of capturing group ``group`` (counted from 1 by opening parenthesis; 0: the whole match)
    of the first match of ``pattern`` (the portable subset, as ``matches``). Null when the value is null or
    the pattern does not match; the empty string when the group matched empty or did not take part in
    the match (``(a)?b`` on ``b``: Spark cannot tell these apart, so neither engine does)."""

    def __init__(self, arg: Expr, pattern: str, group: int = 1):
        self.args, self.pattern = (_wrap(arg),), _literal(pattern, str, "extract's regex")
        self.compiled = portable_regex(pattern)
        self.group = _literal(group, int, "extract's group")
        groups, certain = _group_shape(pattern)
        if not 0 <= group <= groups:
            raise ExpressionError(f"extract: regex {pattern!r} has {groups} group{'s' * (groups != 1)}, "
                                  f"not a group {group}")
        #: the group takes part in every match, so no match is the only null (one regex pass locally)
        self.certain = group in certain

    def check(self, types):
        _need(self.args[0], types, STRING, "extract")
        return STRING

    def describe(self):
        return f"extract({self.args[0].describe()}, {self.pattern!r}, {self.group})"


# A request line is ``METHOD TARGET PROTOCOL``: three non-empty parts, one space between each (a line
# with more or fewer parts, ``-``, or the empty string is no request line). The URL functions take a
# request line (its target) or a target or URL written alone: a value with a space is read as a request
# line. A target is origin-form (``/path?query``), absolute-form (``scheme://authority/path?query``),
# or neither (``*``, ``host:443``, ``-``): the URL parts of a value that is neither are null.
SCHEME = r"[A-Za-z][A-Za-z0-9+.\-]*://"
REQUEST_LINE = portable_regex(r"^([^ ]+) ([^ ]+) ([^ ]+)$")
#: the path of an origin-form target, or of an absolute-form one whose path is not empty (group 1)
URL_PATH = portable_regex("^(?:" + SCHEME + r"[^/?#]*)?(/[^?#]*)")
#: an absolute-form target whose path is empty (its path is then ``/``)
URL_EMPTY_PATH = portable_regex("^" + SCHEME + r"[^/?#]*(?:[?#]|$)")
#: the query string (group 1): after the first ``?``, up to a ``#``
URL_QUERY = portable_regex("^(?:" + SCHEME + r"[^/?#]*(?:/[^?#]*)?|/[^?#]*)\?([^#]*)")
#: the host of an absolute-form target: after the authority's last ``@``, an IP literal in brackets
#: (group 1) or a name (group 2), before an optional ``:port``
URL_HOST = portable_regex("^" + SCHEME + r"(?:[^/?#]*@)?(?:\[([^\]/?#@]+)\]|([^:/?#@\[\]]+))(?:[:/?#]|$)")
#: percent-decoding: the two hex digits after a ``%`` that are decoded (a byte that is not a control
#: character: 20-7E, 80-FF), and the UTF-8 byte sequences (RFC 3629) of a decoded value, on its bytes in
#: lower-case hex (every alternative consumes whole bytes from the start, so the pairs stay aligned)
DECODED_ESCAPE = portable_regex(r"^(?:[2-6][0-9A-Fa-f]|7[0-9A-Ea-e]|[89A-Fa-f][0-9A-Fa-f])")
UTF8_HEX = portable_regex(
    r"^(?:[0-7][0-9a-f]|c[2-9a-f][89ab][0-9a-f]|d[0-9a-f][89ab][0-9a-f]|e0[ab][0-9a-f][89ab][0-9a-f]"
    r"|e[1-9a-cef][89ab][0-9a-f][89ab][0-9a-f]|ed[89][0-9a-f][89ab][0-9a-f]"
    r"|f0[9ab][0-9a-f](?:[89ab][0-9a-f]){2}|f[1-3][89ab][0-9a-f](?:[89ab][0-9a-f]){2}"
    r"|f48[0-9a-f](?:[89ab][0-9a-f]){2})*$")


class Method(_StringMap):
    """The method of a request line (``GET`` in ``GET /a HTTP/1.1``), as written; null when the value is
    not a request line (three non-empty parts, one space between each)."""

    word = "method"

    def __init__(self, arg: Expr):
        super().__init__(_wrap(arg))


class Path(_StringMap):
    """The path of a request line's target, or of a target or URL written alone (a value with a space is
    read as a request line): from the first ``/`` of an origin-form target (``/a/b?q`` -> ``/a/b``), or
    after the authority of an absolute-form one (``http://h/a?q`` -> ``/a``; ``/`` when it is empty:
    ``http://h?q`` -> ``/``), up to the first ``?`` or ``#``, as written (``%3F`` stays encoded: see
    ``url_decode``). Null when the value is null, a malformed request line, or a target of another form
    (``*``, ``host:443``, ``-``, the empty string)."""

    word = "path"

    def __init__(self, arg: Expr):
        super().__init__(_wrap(arg))


class QueryString(_StringMap):
    """The query string of a request line's target, or of a target or URL (read as ``path`` reads them):
    the text after the first ``?`` up to a ``#`` or the end, as written; the empty string after a bare
    ``?``; null when there is no ``?`` or the value is not such a target."""

    word = "query_string"

    def __init__(self, arg: Expr):
        super().__init__(_wrap(arg))


class QueryParam(Expr):
    """The value of the first parameter named ``name`` in the query string (``query_string``): the
    parameters are the pieces between ``&``, each ``name=value`` or a bare ``name`` (whose value is the
    empty string); the name is compared with the text before its ``=`` exactly, as written (case and
    percent-escapes count). The value is percent-decoded with ``+`` as a space, as in a form
    (``url_decode``, null when the decoded bytes are not UTF-8), or as written with ``decode=False``.
    Null when there is no query string or no parameter of that name."""

    def __init__(self, arg: Expr, name: str, decode: bool = True):
        self.args = (_wrap(arg),)
        self.name = _literal(name, str, "query_param's name")
        if not name or set(name) & set("&=#"):
            raise ExpressionError(f"query_param's name must be non-empty, without & = or #, not {name!r}")
        self.decode = _flag(decode, "query_param's decode")
        #: group 1: ``=value`` or the empty string of a bare name (it takes part in every match)
        self.compiled = portable_regex("(?:^|&)" + regex_escape(name) + "(=[^&]*|)(?:&|$)")

    def check(self, types):
        _need(self.args[0], types, STRING, "query_param")
        return STRING

    def describe(self):
        tail = "" if self.decode else ", decode=False"
        return f"query_param({self.args[0].describe()}, {self.name!r}{tail})"


class UrlHost(_StringMap):
    """The host of an absolute-form URL or request target (``scheme://authority...``; a value with a space
    is read as a request line): the authority's part after its last ``@``, without a ``:port``, an IP
    literal without its brackets (``http://[::1]:80/`` -> ``::1``), ASCII letters in lower case (other
    characters as written). Null when the value is not absolute-form or the host is empty or malformed
    (``http:///x``, ``http://[::1``)."""

    word = "url_host"

    def __init__(self, arg: Expr):
        super().__init__(_wrap(arg))


class UrlDecode(Expr):
    """Percent-decoding: each ``%`` and two hex digits (either case) is the byte they write, and the bytes
    are read as UTF-8. A ``%`` not followed by two hex digits stays as written, and so does the escape of
    a control character (``%00``-``%1F``, ``%7F``: a decoded value never holds a TAB, CR or LF). With
    ``plus_as_space`` (a form's query string), ``+`` is a space (``%2B`` stays a plus). Null when the
    value is null or its decoded bytes are not UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing
    past U+10FFFF); ``coalesce(url_decode(x), x)`` keeps those as written."""

    def __init__(self, arg: Expr, plus_as_space: bool = False):
        self.args = (_wrap(arg),)
        self.plus_as_space = _flag(plus_as_space, "url_decode's plus_as_space")

    def check(self, types):
        _need(self.args[0], types, STRING, "url_decode")
        return STRING

    def describe(self):
        return f"url_decode({self.args[0].describe()}{', plus_as_space' if self.plus_as_space else ''})"


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
