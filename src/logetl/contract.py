"""The line contract: how one access-log line becomes a record. Identical for every program and engine.

- Lines are separated by ``\\n``; one trailing ``\\r`` is removed; a last line without ``\\n`` counts.
- A line must match ``PATTERN`` as a whole, with ASCII meanings for ``\\w \\s \\S \\d`` (as in Java's regex
  engine, which the original programs ran on) and ``.`` matching any character. Groups 1-5 are
  ``FIELDS``, kept as strings.
- A line longer than ``LOGETL_MAX_LINE`` bytes is malformed (``TOO_LONG``), whatever it holds.
- A line is malformed when it is not valid UTF-8, does not match, or a parsed field holds a TAB or CR
  (checked in that order; the first failing check is the reason). Malformed lines are counted by reason
  and trapped, never fatal.
- The three programs then drop the records whose ``size`` is exactly ``-`` (counted as
  ``dropped_size_dash``): their step ``drop_size_dash`` (``logetl.assembly.DropSizeDash``). A flow's
  ``read`` keeps them.

The combined layout's tail, after the expression's size: ``TAIL_FIELDS`` (``referer``, ``user_agent``), read
by ``parse_tail``. They are not part of the expression, so they never make a line malformed: a line whose
tail is not ``TAIL`` (`` "referer" "user agent"``, each quoted as Apache writes it -- up to the first ``"`` not
escaped by a backslash, the escapes kept as written -- then the end of the line or a space and anything)
or whose referer or user agent holds a TAB or CR is still a record, with both fields null.

``parse_line`` is the reference implementation, written straight from the expression; the native kernel
(``_scan.c``) and the Spark engine are tested against it.
"""
from __future__ import annotations

import re

PATTERN = r'^([^ ]*) \S+ \S+ \[([\w:/]+\s[+\-]\d{4})\] "(.+?)" (\d{3}) ([^ ]*).*$'
REGEX = re.compile(PATTERN, re.ASCII | re.DOTALL)

FIELDS = ("ip", "time", "request", "response", "size")

#: an Apache quoted field (``%{Referer}i``): up to the first '"' not escaped by a backslash; no TAB or CR
QUOTED = r'[^"\\\t\r]*+(?:\\[^\t\r][^"\\\t\r]*+)*+'
#: the tail after the size (where the expression's ``.*`` begins), as a group of its own: referer, user agent
TAIL = f' "({QUOTED})" "({QUOTED})"(?![^ ])'
TAIL_REGEX = re.compile(TAIL, re.ASCII | re.DOTALL)
TAIL_FIELDS = ("referer", "user_agent")
#: the original expression with its tail: groups 1-5 as PATTERN's (the tail, optional, cannot change them:
#: the size ends at its first space and the tail starts with one), 6 the tail, 7 and 8 its fields
TAIL_PATTERN = PATTERN[:-len(".*$")] + f"({TAIL})?.*$"

INVALID_UTF8 = "invalid_utf8"
NO_MATCH = "no_match"
TAB_OR_CR = "tab_or_cr_in_field"
#: Reason names in the order they are checked; the native kernel reports them as 1, 2, 3.
REASONS = (INVALID_UTF8, NO_MATCH, TAB_OR_CR)
#: A line longer than ``LOGETL_MAX_LINE`` bytes (without its ``\n``): malformed before it is parsed, and
#: trapped whole; it is never held in memory whole (the readers read it on in pieces).
TOO_LONG = "too_long"


class Malformed(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def split_lines(data: bytes) -> list[bytes]:
    """Raw lines of a whole input: split on ``\\n`` only; a final piece without ``\\n`` is a line."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def line_text(raw: bytes) -> tuple[bytes, str]:
    """A raw line (without its ``\\n``) as every format reads it: its bytes without a final CR, and their
    text; ``Malformed(INVALID_UTF8)`` when they are not UTF-8."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    try:
        return raw, raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Malformed(INVALID_UTF8) from None


def parse_line(raw: bytes) -> tuple[str, str, str, str, str]:
    """Parse one raw line (without its ``\\n``) into the five fields, or raise ``Malformed``."""
    raw, text = line_text(raw)
    m = REGEX.fullmatch(text)
    if m is None:
        raise Malformed(NO_MATCH)
    fields = m.groups()
    for value in fields:
        if "\t" in value or "\r" in value:
            raise Malformed(TAB_OR_CR)
    return fields


def parse_tail(raw: bytes, fields: tuple[str, ...]) -> tuple[str | None, str | None]:
    """The tail fields (referer, user agent) of a line that ``parse_line`` parsed into ``fields``: both None
    when the tail after the size is not ``TAIL`` (see the module docstring)."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    text = raw.decode("utf-8")
    m = REGEX.fullmatch(text)
    assert m is not None and m.groups() == tuple(fields)
    t = TAIL_REGEX.match(text, m.end(5))
    return (t.group(1), t.group(2)) if t else (None, None)


def keeps(fields: tuple[str, ...]) -> bool:
    """False for the records the contract drops after parsing (size exactly ``-``)."""
    return fields[4] != "-"


def display(raw) -> str:
    """A (malformed) line as it can be shown on one terminal line: bad bytes and controls escaped,
    at most 300 bytes of it."""
    if isinstance(raw, (bytes, bytearray, memoryview)):
        text = bytes(raw[:300]).decode("utf-8", "backslashreplace")
    else:
        text = str(raw)[:300]
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
