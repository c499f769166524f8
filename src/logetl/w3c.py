"""The ``w3c`` preset: the W3C extended log format as IIS writes it.

A W3C log says what its columns are in a ``#Fields:`` directive line, and says it again whenever they change
(IIS writes a new block of directives, ``#Software:``, ``#Version:``, ``#Date:``, ``#Fields:``, when it
starts and when its logging settings change). Every line that starts with ``#`` is a directive: a header
line, counted apart, neither a record nor malformed. The other lines are records: their values separated by
single spaces, in the order of the last ``#Fields:`` line before them (before any, IIS's default fields,
``DEFAULT_FIELDS``); a value may be quoted (``"..."``, up to the first ``"`` not escaped by a backslash); a
value of exactly ``-`` is empty; ``+`` in the user agent and the referer is a space (IIS writes a space in
them as ``+``).

A run's records have one schema whatever the headers say: ``FIELDS``, every field IIS logs, named in logetl's
vocabulary (``NAMES``); a field the current header lacks is empty; a column the table does not know is read
(the line must have it) and left out. ``time`` is the ``date`` and ``time`` columns as written, joined by
their space (``2024-01-02 03:04:05``) when they stand next to each other, as IIS writes them; else the time
column alone. ``date`` and ``time_of_day`` are each column on its own. ``request`` is the ``cs-method`` and
``cs-uri-stem`` columns joined the same way (``GET /index.html``: the method and the path, as the three
programs read a request's start), empty when they do not stand side by side in that order.

Each run of lines between ``#Fields:`` lines is parsed by a token program built from its header
(``program``): a field per column, quoted or bare (``qor``), then a joined ``time`` and an empty field for
each field the header lacks. The kernel switches programs at each ``#Fields:`` line (``segments``).
"""
from __future__ import annotations

from logetl import contract

#: W3C field name (lowercase) -> logetl's field name
NAMES = {
    "c-ip": "ip", "cs-method": "method", "cs-uri-stem": "path", "cs-uri-query": "query",
    "sc-status": "response", "sc-bytes": "size", "cs(referer)": "referer", "cs(referrer)": "referer",
    "cs(user-agent)": "user_agent",
    "date": "date", "time": "time_of_day", "s-ip": "server_ip", "s-port": "port", "cs-username": "user",
    "s-sitename": "site_name", "s-computername": "server_name", "cs-version": "protocol", "cs-host": "host",
    "cs(cookie)": "cookie", "sc-substatus": "sc_substatus", "sc-win32-status": "sc_win32_status",
    "cs-bytes": "bytes_received", "time-taken": "time_taken", "x-forwarded-for": "x_forwarded_for",
    "cs(x-forwarded-for)": "x_forwarded_for",
}
#: the fields of every w3c record, in this order (``time`` is made of ``date`` and ``time``, ``request`` of
#: ``cs-method`` and ``cs-uri-stem``)
FIELDS = ("ip", "time", "request", "method", "path", "query", "response", "size", "referer", "user_agent", "date",
          "time_of_day", "server_ip", "port", "user", "site_name", "server_name", "protocol", "host", "cookie",
          "sc_substatus", "sc_win32_status", "bytes_received", "time_taken", "x_forwarded_for")
#: the fields whose ``+`` are spaces
PLUS = ("referer", "user_agent")
#: the columns IIS logs by default: what lines before any ``#Fields:`` line are read with
DEFAULT_FIELDS = ("date time s-ip cs-method cs-uri-stem cs-uri-query s-port cs-username c-ip cs(User-Agent) "
                  "cs(Referer) sc-status sc-substatus sc-win32-status time-taken")
DIRECTIVE = b"#"
#: the most fields a kernel program has (_kernel.h's MAX_FIELDS)
MAX_FIELDS = 64
FIELDS_DIRECTIVE = b"#Fields:"

# the kernel's token kinds (_kernel.h; 11-13 are a JSON program's, _json.h)
_LIT, _QOR, _SKIP, _JOIN, _EMPTY, _DASH_EMPTY = 0, 8, 10, 14, 15, 16


def columns(header: str | bytes) -> tuple[str, ...]:
    """The W3C names of a ``#Fields:`` line (or of its text after the directive)."""
    if isinstance(header, bytes):
        header = header.decode("utf-8", "replace")
    header = header.rstrip("\r\n")
    if header.startswith("#Fields:"):
        header = header[len("#Fields:"):]
    return tuple(header.split())


def _plan(cols: tuple[str, ...]):
    """Where each field of ``FIELDS`` comes from for columns ``cols``: ("col", i), ("join", i, j) or
    ("empty",)."""
    at = {}
    for i, c in enumerate(cols):
        name = NAMES.get(c.lower())
        if name is not None and name not in at:
            at[name] = i
    plan = {}
    for f in FIELDS:
        if f == "time":
            d, t = at.get("date"), at.get("time_of_day")
            if t is None:
                plan[f] = ("empty",)
            elif d is not None and d + 1 == t:
                plan[f] = ("join", d, t)
            else:
                plan[f] = ("join", t, t)
        elif f == "request":   # "GET /index.html": the method and the path, when IIS writes them side by side
            m, p = at.get("method"), at.get("path")
            plan[f] = ("join", m, p) if m is not None and p == m + 1 else ("empty",)
        else:
            plan[f] = ("col", at[f]) if f in at else ("empty",)
    return plan


def program(cols: tuple[str, ...]) -> tuple[tuple, tuple[int, ...]]:
    """The token program (as ``LogFormat.native_program`` gives it) of lines with columns ``cols``, and the
    indexes of ``FIELDS`` among its fields."""
    prog = [(_SKIP, DIRECTIVE, 0), (_DASH_EMPTY, b"", 0)]
    for i in range(len(cols)):
        if i:
            prog.append((_LIT, b" ", 0))
        prog.append((_QOR, b"", ord(" ")))
    plan, n, out = _plan(cols), len(cols), []
    extra = sum(plan[f][0] != "col" for f in FIELDS)
    if n + extra > MAX_FIELDS:
        from logetl.formats import FormatError

        raise FormatError(f"a '#Fields:' line of the w3c log names {n} columns: the w3c format reads at most "
                          f"{MAX_FIELDS - extra} with these ({' '.join(cols[:3])} ...)")
    if not cols:   # a header without columns: every line but a directive is malformed
        prog.append((_LIT, b"\0", 0))
    for f in FIELDS:
        how = plan[f]
        if how[0] == "col":
            out.append(how[1])
            continue
        prog.append((_JOIN, bytes([how[1], how[2]]), 0) if how[0] == "join" else (_EMPTY, b"", 0))
        out.append(n)
        n += 1
    return tuple(prog), tuple(out)


def _value(b: bytes, pos: int):
    """One value at ``pos`` (quoted or bare, as the kernel's ``qor``): (value, position after it) or None."""
    if b.startswith(b'"', pos):
        j = pos + 1
        while True:
            k = b.find(b'"', j)
            if k < 0:
                return None
            t = k - 1
            while t > pos and b[t] == 0x5C:
                t -= 1
            if (k - 1 - t) % 2 == 0:
                return b[pos + 1:k], k + 1
            j = k + 1
    k = b.find(b" ", pos)
    return (b[pos:], len(b)) if k < 0 else (b[pos:k], k)


def scan(b: bytes, cols: tuple[str, ...]):
    """The reference matcher: the fields (bytes, ``FIELDS``' order) of one line without its CR, None when it
    does not match, or ``"header"`` for a directive line."""
    if b.startswith(DIRECTIVE):
        return "header"
    vals, pos = [], 0
    for i in range(len(cols)):
        if i:
            if not b.startswith(b" ", pos):
                return None
            pos += 1
        got = _value(b, pos)
        if got is None:
            return None
        vals.append(got[0])
        pos = got[1]
    if pos != len(b) or not cols:
        return None
    out = []
    for f in FIELDS:
        how = _plan(cols)[f]
        if how[0] == "col":
            out.append(vals[how[1]])
        elif how[0] == "join":
            # the span of the line from the first column's start to the second's end
            out.append(_span(b, cols, how[1], how[2]))
        else:
            out.append(b"")
    return out


def _span(b: bytes, cols, first: int, last: int) -> bytes:
    """The text of the line from column ``first``'s value to column ``last``'s (quotes inside kept)."""
    pos, starts, ends = 0, [], []
    for i in range(len(cols)):
        if i:
            pos += 1
        quoted = b.startswith(b'"', pos)
        v, after = _value(b, pos)
        starts.append(pos + 1 if quoted else pos)
        ends.append(after - 1 if quoted else after)
        pos = after
    return b[starts[first]:ends[last]]


def parse_line(raw: bytes, cols: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """All fields (``FIELDS``) of one raw line read with columns ``cols`` (None: ``DEFAULT_FIELDS``), or raise
    ``contract.Malformed``; ``formats.Header`` for a directive line."""
    from logetl.formats import Header

    raw, _ = contract.line_text(raw)
    vals = scan(raw, columns(DEFAULT_FIELDS) if cols is None else cols)
    if vals == "header":
        raise Header()
    if vals is None:
        raise contract.Malformed(contract.NO_MATCH)
    if any(b"\t" in v or b"\r" in v for v in vals):
        raise contract.Malformed(contract.TAB_OR_CR)
    text = [("" if v == b"-" else v.decode("utf-8")) for v in vals]
    return tuple(t.replace("+", " ") if f in PLUS else t for f, t in zip(FIELDS, text))


def _searchable(data):
    """``data`` with ``find`` and ``rfind``: a memoryview (a piece of a stream's read, or of a chunk around a
    line too long) copied to bytes; its offsets stay the view's."""
    return data.tobytes() if isinstance(data, memoryview) else data


def _find_directive(data, start: int, end: int, last: bool = False) -> int:
    """The first (``last``: the last) ``#Fields:`` in ``data[start:end]``, or -1: its '#' looked for alone,
    a byte search (memchr) where the whole directive's is a substring search over every byte of a chunk,
    and a line of a W3C log rarely holds a '#'."""
    while start < end:
        k = data.rfind(b"#", start, end) if last else data.find(b"#", start, end)
        if k < 0 or data.startswith(FIELDS_DIRECTIVE, k, end):
            return k
        if last:
            end = k
        else:
            start = k + 1
    return -1


def last_fields(data, start: int = 0, end: int | None = None) -> tuple[int, bytes] | None:
    """The last ``#Fields:`` line in ``data[start:end]`` that starts a line (at ``start`` or after a
    ``\\n``): (its start, the line without its end), or None."""
    data = _searchable(data)
    end = len(data) if end is None else end
    at = end
    while True:
        k = _find_directive(data, start, at, last=True)
        if k < 0:
            return None
        if k == start or data[k - 1] == 0x0A:
            e = data.find(b"\n", k, end)
            return k, bytes(data[k:end if e < 0 else e])
        at = k


def segments(data, before: bytes | None) -> list[tuple[int, tuple[str, ...]]]:
    """The pieces of chunk ``data`` (whole lines) as (start, columns): the first with the columns of the
    ``#Fields:`` line ``before`` it (None: the default), then one from each ``#Fields:`` line in it."""
    data = _searchable(data)
    found = [(0, columns(before) if before is not None else columns(DEFAULT_FIELDS))]
    pos = 0
    while (k := _find_directive(data, pos, len(data))) >= 0:
        if k == 0 or data[k - 1] == 0x0A:
            e = data.find(b"\n", k)
            cols = columns(bytes(data[k:len(data) if e < 0 else e]))
            if k == 0:
                found[0] = (0, cols)
            else:
                found.append((k, cols))
        pos = k + 1
    return found
