"""What an expression answers to what is not part of the expressions: a Python operator it does not define,
a method it does not have (``Mistakes``, a base of ``logetl.expressions.Expr``), and the nearest name there
is (``closest``, ``nearest``: the API's functions, the fields, a pipe's methods). Each is one
``ExpressionError`` naming the expression and the operand, where Python would raise a ``TypeError`` or an
``AttributeError`` naming its classes; a flow file shows it as one line with its file and line
(``logetl.flowfile``)."""
from __future__ import annotations

import difflib
import os
import sys


def _expression_error(message: str | None = None):
    """``ExpressionError`` (``message``: one of them), defined with the expressions, which import this module."""
    from logetl.expressions import ExpressionError

    return ExpressionError if message is None else ExpressionError(message)


def _unknown_name(message: str):
    from logetl.expressions import UnknownName

    return UnknownName(message)


def closest(name: str, candidates) -> str | None:
    """The candidate closest to ``name``: the same but for case, else difflib's best match, else None."""
    names = sorted(set(candidates))
    same_case = [c for c in names if c.lower() == name.lower()]
    found = same_case or difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return found[0] if found else None


def nearest(name: str, candidates) -> str:
    """`` (did you mean 'X'?)`` for the candidate closest to ``name`` (``closest``), else ``""``."""
    found = closest(name, candidates)
    return f" (did you mean {found!r}?)" if found else ""


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _user_line() -> tuple[str, int] | None:
    """(file, line) of the innermost caller outside logetl: where the user wrote the expression."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
    return None if frame is None else (frame.f_code.co_filename, frame.f_lineno)


def _located(check):
    """``check`` with its ``ExpressionError`` marked with where the failing expression was written
    (``origin``): the innermost expression at fault marks it first."""
    def located(self, types):
        try:
            return check(self, types)
        except _expression_error() as exc:
            if getattr(exc, "origin", None) is None:
                exc.origin = self.__dict__.get("_origin")
            raise
    located.__wrapped__ = check
    located.__doc__ = check.__doc__
    located._located = True
    return located


def _operand(value) -> str:
    return value.describe() if isinstance(value, Mistakes) else repr(value)


def _key(key) -> str:
    if isinstance(key, slice):
        return ":".join("" if v is None else repr(v) for v in (key.start, key.stop)) \
            + ("" if key.step is None else f":{key.step!r}")
    return repr(key)


class Mistakes:
    """What ``Expr`` answers to what is not an expression: a Python operator it does not define and a
    method it does not have are one ``ExpressionError`` naming the expression and the operand (and the
    nearest method), where Python would raise a ``TypeError`` naming its classes. A base of ``Expr``, so
    that an operator or a method ``Expr`` (or a subclass) defines always wins over these. It also records
    where each expression was written (``_origin``), so that the error its type check raises when a flow
    is defined names that line (``origin``)."""

    def __new__(cls, *args, **kwargs):
        self = super().__new__(cls)
        self._origin = _user_line()
        return self

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        check = cls.__dict__.get("check")
        if check is not None and not getattr(check, "_located", False):
            cls.check = _located(check)

    def __getattr__(self, name: str):
        # only reached for a name the expression does not have; private and special names are Python's
        # (copy, pickle and hasattr probe them) and stay a plain AttributeError
        if name.startswith("_") or id(self) in _DESCRIBING:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        methods = [n for n in dir(type(self)) if not n.startswith("_")]
        raise _unknown_name(f"the expression {self._shown()} has no method {name!r}{nearest(name, methods)}")

    def _shown(self) -> str:
        """``describe()``, guarded: a half-made expression (its ``__init__`` failed) is named by its class."""
        _DESCRIBING.add(id(self))
        try:
            return self.describe()
        except Exception:
            return type(self).__name__
        finally:
            _DESCRIBING.discard(id(self))

    def _binary(self, op: str, other, reflected: bool = False):
        left, right = (_operand(other), self._shown()) if reflected else (self._shown(), _operand(other))
        hint = f" (multiply instead: {left} * {left})" if op == "**" and not reflected else ""
        raise _expression_error(f"{left} {op} {right}: expressions have no {op} operator{hint}")

    def __truediv__(self, other): self._binary("/", other)
    def __rtruediv__(self, other): self._binary("/", other, True)
    def __pow__(self, other, modulo=None): self._binary("**", other)
    def __rpow__(self, other): self._binary("**", other, True)
    def __matmul__(self, other): self._binary("@", other)
    def __rmatmul__(self, other): self._binary("@", other, True)
    def __lshift__(self, other): self._binary("<<", other)
    def __rlshift__(self, other): self._binary("<<", other, True)
    def __rshift__(self, other): self._binary(">>", other)
    def __rrshift__(self, other): self._binary(">>", other, True)
    def __xor__(self, other): self._binary("^", other)
    def __rxor__(self, other): self._binary("^", other, True)

    def __neg__(self):
        raise _expression_error(f"-{self._shown()}: expressions have no unary - (subtract from 0 instead: "
                              f"0 - {self._shown()})")

    def __pos__(self):
        raise _expression_error(f"+{self._shown()}: expressions have no unary +")

    def __abs__(self):
        raise _expression_error(f"abs({self._shown()}): expressions have no abs()")

    def __getitem__(self, key):
        raise _expression_error(f"{self._shown()}[{_key(key)}]: expressions cannot be indexed "
                              "(substring(start, length) takes characters, from 1)")

    def __contains__(self, item):
        raise _expression_error(f"{_operand(item)} in {self._shown()}: expressions have no in operator "
                              f"(contains({_operand(item)}) or is_in([...]))")

    def __int__(self):
        raise _expression_error(f"{self._shown()} is an expression, not a Python number (to_int() makes an "
                              "integer of a string)")

    __float__ = __int__
    __iter__ = None      # not a sequence, although it has __getitem__


_DESCRIBING: set[int] = set()
