"""String functions: tests, the regular expressions Java and Rust (Polars) agree on, capture,
matching ignoring ASCII case, substrings, case, splitting, concatenation, CRC-32."""
from __future__ import annotations

import functools
import re

from logetl.expressions.base import BOOLEAN, Expr, ExpressionError, FLOAT, INTEGER, STRING, _literal, _need, _wrap


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


def portable_regex(pattern: str, sized: bool = True) -> str:
    """Checks that ``pattern`` uses only the documented subset and returns the form both engines compile:
    ``(?s)`` first (``.`` matches any character) and ``$`` as ``\\z`` (Java's ``$`` would also match
    before a final line terminator).

    The subset: literal characters; ``\\`` before one of ``. ^ $ | ? * + ( ) [ ] { } \\ / -``; ``.``;
    ``^`` and ``$``; classes ``[abc]``, ``[^a-z0-9_]`` of literal characters, ranges and those escapes;
    groups ``( )`` and ``(?: )``; ``|``; quantifiers ``* + ? {n} {n,} {n,m}``, each optionally lazy (``?``).
    Not in it (the engines differ, or one lacks them): ``\\d \\w \\s \\b`` and other escapes, back
    references, look-around, flags such as ``(?i)``, possessive quantifiers, POSIX and nested classes.
    With ``sized`` (the default), a pattern with counted repetition is also compiled once to check its size
    (``_too_large``)."""
    out, i, depth = ["(?s)"], 0, 0

    def fail(why: str):
        raise ExpressionError(f"regex {pattern!r}: {why} at offset {i} (see the portable regex subset in the flows guide)")

    n = len(pattern)
    quantifiable = counted = False
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n or pattern[i + 1] not in _ESCAPABLE:
                fail(f"escape \\{pattern[i + 1:i + 2]} is not portable")
            out.append(pattern[i:i + 2])
            i, quantifiable = i + 2, True
        elif c == "[":
            j = _class_end(pattern, i, fail)
            out.append(pattern[i:j + 1])
            i, quantifiable = j + 1, True
        elif c == "(":
            if depth == MAX_NESTING:
                fail(f"groups nested more than {MAX_NESTING} deep are not portable")
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
                counts = _counted_repetition(pattern, i, fail)
                counted = True
                out.append(counts)
                i += len(counts)
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
    compiled = "".join(out)
    if sized and (counted or len(compiled) > 10_000):
        too_large = _too_large(compiled)      # only counted repetition or a long pattern can be
        if too_large:
            raise ExpressionError(f"regex {pattern!r}: {too_large}")
    return compiled


def _class_end(pattern: str, i: int, fail) -> int:
    """The offset of the ``]`` closing the class that starts at ``pattern[i]``, its contents checked
    against the portable subset (``fail`` names what is not)."""
    n, j = len(pattern), i + 1
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
    return j


def _counted_repetition(pattern: str, i: int, fail) -> str:
    """The quantifier ``{n}``, ``{n,}`` or ``{n,m}`` at ``pattern[i]``, checked (``fail`` names what is not
    portable)."""
    m = re.match(r"\{(\d+)(,(\d*))?\}", pattern[i:])
    if not m or (m.group(3) and int(m.group(3)) < int(m.group(1))):
        fail("a bad {n,m} quantifier")
    if int(m.group(1)) > 1000 or (m.group(3) and int(m.group(3)) > 1000):
        fail("repetition counts above 1000 are not portable")
    return m.group(0)


#: how deep groups may nest: Rust's regex crate (Polars') refuses 250 levels of nesting (Java takes more)
MAX_NESTING = 100


@functools.lru_cache(maxsize=256)
def _too_large(compiled: str) -> str | None:
    """Why the regex library of the local engine (Rust's ``regex`` crate, through Polars) refuses the portable
    ``compiled`` pattern, None when it compiles. Its compiled program has a size limit (10 MB) that nested
    counted repetition reaches quickly (``(a{1000}){1000}``); Java compiles such patterns without expanding
    them, so a pattern either refuses is refused for both engines when the flow is defined. Where Polars is
    not installed (a Spark executor's environment holds only what its parse needs), there is no local
    engine to refuse it: None."""
    try:
        import polars as pl
    except ImportError:
        return None

    try:
        pl.Series([""]).str.contains(compiled)
    except pl.exceptions.ComputeError as exc:
        limit = re.search(r"exceeds size limit of (\d+) bytes", str(exc))
        if limit:
            return (f"compiles to more than the {int(limit.group(1)):,} bytes the local engine's regex library "
                    f"takes (repeat fewer times, or nest fewer counted repetitions)")
        lines = [line[len("error: "):] for line in str(exc).splitlines() if line.startswith("error: ")]
        return lines[0] if lines else str(exc).splitlines()[0]
    return None


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


class Hash64(Expr):
    """A 64-bit hash of one or more strings taken together (give it no nulls: engines hash them apart): equal
    values give equal hashes, different values almost surely different ones (two of a billion distinct
    combinations collide with a chance of about 3 in 100). What it is for: counting distinct combinations
    compactly (``count_distinct(hash64(ip, day, agent))`` holds 8 bytes a combination, not the strings).
    The numbers themselves are the engine's (Polars' hash on the local engine, ``xxhash64`` on Spark) and
    may change with its version: compare them within one run, never keep or compare them across engines."""

    def __init__(self, *args: Expr):
        if not args:
            raise ExpressionError("hash64 needs at least one value")
        self.args = tuple(_wrap(a) for a in args)

    def check(self, types):
        for a in self.args:
            _need(a, types, STRING, "hash64")
        return INTEGER

    def describe(self):
        return f"hash64({', '.join(a.describe() for a in self.args)})"


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
