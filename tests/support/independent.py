"""Independent plain-Python results of the three example flows (``examples/top_clients.py``,
``status_by_hour.py``, ``error_clients.py``), written from their spec and the line contract's text, sharing
no code with logetl: the examples are tested against these, and these are checked against DuckDB
(tests/programs/test_independent.py).

The spec, as implemented here:

- Lines: split on ``\\n`` (a last line without it counts), one trailing ``\\r`` removed; a line is kept when
  it is valid UTF-8, matches the contract's expression as a whole (ASCII ``\\w \\s \\S \\d``, ``.`` matching
  anything) and none of its five fields holds a TAB or CR; every such line is a record (a flow keeps a size of
  ``-``: it is not a number, so it counts 0 in sums).
- Valid time: ``dd/Mon/yyyy:HH:MM:SS ±hhmm`` with a real day of that month and year (proleptic Gregorian),
  year 0001-9999, HH 00-23, MM and SS 00-59, zone hh 00-23 and mm 00-59, nothing else. Day and hour are
  read from the log's own time, never converted to another zone.
- integer(size): an optional ``-`` then 1 to 18 ASCII digits, else null; a null counts 0 in sums. Sums are
  Python integers (exact at any size).
- Strings are compared by their UTF-8 bytes; TSV rows are fields joined by TAB, each row ends with ``\\n``.
"""
from __future__ import annotations

import calendar
import re
from collections import Counter, defaultdict

# The contract's expression (src/logetl/contract.py), applied with ASCII classes and DOTALL as it says.
LINE = re.compile(r'([^ ]*) \S+ \S+ \[([\w:/]+\s[+\-]\d{4})\] "(.+?)" (\d{3}) ([^ ]*).*', re.ASCII | re.DOTALL)
MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}
# [0-9] rather than \d: Python's \d without re.ASCII would also take other scripts' digits.
TIME = re.compile(r"([0-9]{2})/([A-Z][a-z]{2})/([0-9]{4}):([0-9]{2}):([0-9]{2}):([0-9]{2}) [+-]([0-9]{2})([0-9]{2})")
SIZE = re.compile(r"-?[0-9]{1,18}")


def records(data: bytes):
    """The kept records of a whole raw log, as (ip, time, request, response, size) strings, in input order."""
    lines = data.split(b"\n")
    if lines[-1] == b"":     # the piece after the last \n; a non-empty one is a last line without \n
        lines.pop()
    for raw in lines:
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        m = LINE.fullmatch(text)
        if m is None:
            continue
        fields = m.groups()
        if any("\t" in f or "\r" in f for f in fields):
            continue
        yield fields


def day_hour(time: str) -> tuple[str, str] | None:
    """(``YYYY-MM-DD``, ``HH``) of a valid time field, or None when the time is not valid."""
    m = TIME.fullmatch(time)
    if m is None:
        return None
    dd, mon, yyyy, hh, mi, ss, zh, zm = m.groups()
    month = MONTHS.get(mon)
    year = int(yyyy)
    if month is None or year < 1:
        return None
    if not 1 <= int(dd) <= calendar.monthrange(year, month)[1]:
        return None
    if int(hh) > 23 or int(mi) > 59 or int(ss) > 59 or int(zh) > 23 or int(zm) > 59:
        return None
    return f"{yyyy}-{month:02d}-{dd}", hh


def integer(size: str) -> int | None:
    return int(size) if SIZE.fullmatch(size) else None


def counted(size: str) -> int:
    """A size as it counts in a sum: a size that is not a decimal number counts 0."""
    value = integer(size)
    return 0 if value is None else value


def utf8(s: str) -> bytes:
    return s.encode("utf-8")


def tsv(rows) -> bytes:
    return b"".join("\t".join(str(v) for v in row).encode("utf-8") + b"\n" for row in rows)


def top_clients(data: bytes) -> bytes:
    """Per day, the 10 clients with the most bytes: ``day ip bytes``, by day, bytes descending, ip."""
    per_day: dict[str, Counter] = defaultdict(Counter)
    for ip, time, _request, _response, size in records(data):
        when = day_hour(time)
        if when is not None:
            per_day[when[0]][ip] += counted(size)
    rows = []
    for day in sorted(per_day):     # ASCII YYYY-MM-DD: string order is byte order is date order
        ranked = sorted(per_day[day].items(), key=lambda kv: (-kv[1], utf8(kv[0])))
        rows += [(day, ip, total) for ip, total in ranked[:10]]
    return tsv(rows)


def status_by_hour(data: bytes) -> bytes:
    """Records per (hour, response): ``hour response count``, by hour, then response."""
    counts: Counter = Counter()
    for _ip, time, _request, response, _size in records(data):
        when = day_hour(time)
        if when is not None:
            counts[(f"{when[0]}T{when[1]}", response)] += 1
    keys = sorted(counts, key=lambda k: (utf8(k[0]), utf8(k[1])))
    return tsv((hour, response, counts[(hour, response)]) for hour, response in keys)


def error_clients(data: bytes) -> bytes:
    """Clients with at least one 4xx/5xx record: ``ip requests errors bytes``, by errors descending, requests
    descending, ip. Every kept record counts, whatever its time."""
    requests: Counter = Counter()
    errors: Counter = Counter()
    sizes: Counter = Counter()
    for ip, _time, _request, response, size in records(data):
        requests[ip] += 1
        errors[ip] += response[0] in "45"
        sizes[ip] += counted(size)
    ips = sorted((ip for ip in requests if errors[ip] > 0), key=lambda ip: (-errors[ip], -requests[ip], utf8(ip)))
    return tsv((ip, requests[ip], errors[ip], sizes[ip]) for ip in ips)
