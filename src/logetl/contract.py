"""The line contract: how one access-log line becomes a record. Identical for every program and engine.

- Lines are separated by ``\\n``; one trailing ``\\r`` is removed; a last line without ``\\n`` counts.
- A line must match ``PATTERN`` as a whole, with ASCII meanings for ``\\w \\s \\S \\d`` (as in Java's regex
  engine, which the original programs ran on) and ``.`` matching any character. Groups 1-5 are
  ``FIELDS``, kept as strings.
- A line is malformed when it is not valid UTF-8, does not match, or a parsed field holds a TAB or CR
  (checked in that order; the first failing check is the reason). Malformed lines are counted by reason
  and trapped, never fatal.
- Records whose ``size`` is exactly ``-`` are then dropped (counted as ``dropped_size_dash``).

``parse_line`` is the reference implementation, written straight from the expression; the native kernel
(``_scan.c``) and the Spark engine are tested against it.
"""
from __future__ import annotations

import re

PATTERN = r'^([^ ]*) \S+ \S+ \[([\w:/]+\s[+\-]\d{4})\] "(.+?)" (\d{3}) ([^ ]*).*$'
REGEX = re.compile(PATTERN, re.ASCII | re.DOTALL)

FIELDS = ("ip", "time", "request", "response", "size")

INVALID_UTF8 = "invalid_utf8"
NO_MATCH = "no_match"
TAB_OR_CR = "tab_or_cr_in_field"
#: Reason names in the order they are checked; the native kernel reports them as 1, 2, 3.
REASONS = (INVALID_UTF8, NO_MATCH, TAB_OR_CR)


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


def parse_line(raw: bytes) -> tuple[str, str, str, str, str]:
    """Parse one raw line (without its ``\\n``) into the five fields, or raise ``Malformed``."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Malformed(INVALID_UTF8) from None
    m = REGEX.fullmatch(text)
    if m is None:
        raise Malformed(NO_MATCH)
    fields = m.groups()
    for value in fields:
        if "\t" in value or "\r" in value:
            raise Malformed(TAB_OR_CR)
    return fields


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
