"""Numbers: integers and floats (the range every engine writes alike), arithmetic, casts, rounding."""
from __future__ import annotations

from logetl.expressions.base import Expr, ExpressionError, FLOAT, INTEGER, NUMBERS, STRING, _literal, _wrap


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
    the remainder has the divisor's sign) of integers. ``+ - *`` of two integers is an integer (a result
    beyond 64 bits is null on every engine, as is the smallest integer ``// -1``), of an integer and a float
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
