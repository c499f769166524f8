"""Log formats: Apache ``LogFormat`` and nginx ``log_format`` strings compiled to a token program.

The default, ``combined``, is the original expression of the line contract (``logetl.contract``),
unchanged: its own semantics, its own hand-written kernel, for its five fields ``ip, time, request, response,
size``. It has two more, ``referer`` and ``user_agent``, read from the tail of the line after the size (the
text the expression's ``.*`` ignores): when that tail is `` "referer" "user agent"`` (each quoted as Apache
writes it: up to the first ``"`` not escaped by a backslash, the escapes kept as written), then the end of
the line or a space and anything (nginx's ``"$http_x_forwarded_for"``, a response time, ...), and neither
field holds a TAB or CR, they are its two quoted values; otherwise the line is still a record and both are
null (a TSV output writes null as the empty field). The tail never makes a line malformed, so the three
programs, which read only the five fields, see exactly the records the expression gives. Every other format -- the presets ``common``,
``vhost_combined``, ``nginx``, or any Apache/nginx format string -- compiles to a **token program**: a
sequence of literals and fields, matched against the whole line (after the contract's line rules: one
trailing CR removed, strict UTF-8) by one left-to-right scan without backtracking.

Token semantics (the one definition; the pure-Python matcher ``LogFormat.scan``, the native kernel
``_scan.c`` and the regular expression ``LogFormat.regex`` that Spark runs all implement exactly this):

=============  ==========================================  =====================================
token          what it accepts                             regular expression
=============  ==========================================  =====================================
literal        exactly its characters                      the characters, escaped
quoted         a field between ``"`` and ``"``: Apache     ``[^"\\\\]*+(?:\\\\.[^"\\\\]*+)*+``
(backslash)    escaping (``\\"`` and ``\\\\`` and ``\\xhh``;
               also nginx ``escape=json``): up to the
               first ``"`` not escaped by a backslash
quoted         a field between ``"`` and ``"``, nginx      ``[^"]*``
(plain)        escaping (``escape=default`` writes ``"``
               as ``\\x22``; also ``escape=none``): up to
               the first ``"``
bracketed      a field between ``[`` and ``]`` (Apache     ``[^\\]]*``
               ``%t`` is ``[``, the field, ``]``): up to
               the first ``]``
token          any other field followed by a literal:      ``[^d]*``
               up to the first ``d``, the first character
               of that literal
rest           a field that ends the format: the rest of   ``.*``
               the line
rest, one      a field that ends the format and never      ``[^ ]*``
word           holds a space (``ONE_WORD_*``: a count,
               time, status, port): up to the first
               space, where the line must end
split          a field followed by a one-character         ``[^d]*`` (greedy), the port after
               separator ``s`` and a port (``%v:%p``,      it ``[^ds]*`` (``.*`` and ``[^s]*``
               ``$remote_addr:$remote_port``): up to the   when the port ends the line)
               LAST ``s`` before the port's end ``d``
=============  ==========================================  =====================================

Every field may be empty. Each field ends at the first character its class cannot take (a split field:
at the last separator before the port's end, since it may hold the separator -- an IPv6 address
``[2001:db8::1]:443`` -- and the port, digits only, cannot), and the next token must then match there; so
the scan is deterministic and equals a full match of the regular expression. Two fields with nothing
between them are refused when the format is compiled. A line is malformed (reason as in the contract)
when it is not valid UTF-8, when it does not match (a sample names the field that failed and its byte
offset), or when any field of the format holds a TAB or CR. Every other line is a record: a flow's ``read``
keeps a ``size`` of ``-`` (the three programs drop those records in a step of their own,
``drop_size_dash``; formats without ``size`` drop nothing). Field values are the text as the server wrote
it (escapes are not decoded).

Field names come from ``APACHE`` and ``NGINX`` (directive/variable -> name); a request header
``%{X-Foo}i`` / ``$http_x_foo`` is ``x_foo``; any other nginx variable keeps its name. A name that
occurs twice gets ``_2``, ``_3``, ... Format strings are ASCII.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace

from logetl import contract
from logetl.errors import UsageError
from logetl.expressions import FIELD_NAME, FIELD_NAME_RULE
from logetl.vendors import (HAPROXY_NOTICES, JSON_NAMES, SHAPES as _SHAPES, VENDOR, VENDOR_DECODE,  # noqa: F401
                             VENDOR_HEADERS, VENDOR_OTHERS, VENDOR_SHAPES, percent_decode)


class FormatError(UsageError):
    """A format string or format file that cannot be compiled; the message names the problem and where."""


# --- tokens ---------------------------------------------------------------------------------------------

TOKEN, QUOTED, BRACKETED, REST, SPLIT = "token", "quoted", "bracketed", "rest", "split"
#: the kinds the presets use beyond format strings (see "Preset tokens" in the module docstring)
NTH, MAYBE, QOR, PREFIX = "nth", "maybe", "qor", "prefix"


@dataclass(frozen=True)
class Literal:
    text: str


@dataclass(frozen=True)
class Field:
    name: str
    kind: str                  # token | quoted | bracketed | rest | split
    stop: str | None           # the character that ends it ('"' for quoted; rest: None, or ' ' for a
                               # one-word value (ONE_WORD_*), after which the line must end; split: the
                               # separator before the port, whose last occurrence ends it)
    escaped: bool = False      # quoted with backslash escapes (Apache, nginx escape=json)
    source: str = ""           # the directive or variable it came from
    end: str | None = None     # split: the character that ends the port after it (None: the line's end)
    exclude: str = ""          # the port after a split field: the separator, which the port cannot hold
    until: str = ""            # token: ends at this literal's first occurrence (not its first character);
                               # maybe: the opening character then the literal after the closing one;
                               # prefix: the literal that ends it
    count: int = 0             # nth: how many `stop` characters the field holds
    padded: bool = False       # nth: a time with space-padded conversions (%e, %k, %l): the field may start
                               # with `stop`s and holds `count` runs of them (a run: one or more in a row)


@dataclass(frozen=True)
class Opt:
    """Not a field: the line may end here, every later field then empty (older layouts of a preset)."""


@dataclass(frozen=True)
class Mismatch:
    """Why a line does not match: ``offset`` (byte) and the field at fault (None: the format's start)."""

    offset: int
    field: str | None
    expected: str

    def __str__(self) -> str:
        where = f"field {self.field!r}" if self.field else "start of line"
        return f"{where} at byte {self.offset}: {self.expected}"


# --- field names --------------------------------------------------------------------------------------

#: Apache mod_log_config directive (letter, with its {argument} where it matters) -> field name
APACHE = {
    "h": "ip", "a": "client_ip", "{c}a": "peer_ip", "A": "local_ip", "{c}h": "peer_host",
    "l": "ident", "u": "user", "t": "time", "r": "request",
    ">s": "response", "s": "response", "<s": "original_status",
    "b": "size", "B": "bytes", "O": "bytes_sent", "I": "bytes_received", "S": "bytes_transferred",
    "D": "duration_us", "T": "duration_s", "{s}T": "duration_s", "{ms}T": "duration_ms", "{us}T": "duration_us",
    "v": "vhost", "V": "server_name", "p": "port", "{canonical}p": "port", "{local}p": "local_port",
    "{remote}p": "remote_port", "P": "pid", "{pid}P": "pid", "{tid}P": "tid", "{hextid}P": "tid",
    "U": "path", "q": "query", "m": "method", "H": "protocol", "f": "filename", "X": "connection_status",
    "k": "keepalives", "L": "log_id", "R": "handler",
}
#: Apache directives taking a {NAME}: letter -> prefix of the field name (headers have none)
APACHE_NAMED = {"i": "", "o": "resp_", "e": "env_", "n": "note_", "C": "cookie_", "t": "time", "^ti": "",
                "^to": "resp_", "x": "", "c": "ssl_"}   # x, c: mod_ssl's %{SSL_PROTOCOL}x, %{version}c
#: directives whose value is a port (mod_log_config writes them with "%u": digits only), and the nginx
#: variables that are one (digits, or empty on a UNIX socket): a separator before one cannot lie inside it
APACHE_PORTS = {"p", "{canonical}p", "{local}p", "{remote}p"}
NGINX_PORTS = {"server_port", "remote_port", "realip_remote_port", "proxy_port"}
#: directives (by letter) and variables whose values never hold a space: counts, times, statuses, ports,
#: process ids. As a format's last field such a value ends at the line's end or at a space, after which the
#: line does not match: a combined line read with ``--format common`` is then no_match (counted, trapped,
#: shown with its byte offset) instead of a size holding the referer and the user agent
ONE_WORD_APACHE = set("bBDIOSTkpPs")
ONE_WORD_NGINX = {"status", "body_bytes_sent", "bytes_sent", "request_length", "request_time", "msec",
                  "connection", "connection_requests", "pid", "pipe"} | NGINX_PORTS
#: characters a port's value may hold; a separator before a port must not be one of them (nor '"' or '[',
#: which make the port a quoted or bracketed field)
PORT_CHARS = set("0123456789-\"[")
#: request headers with names of their own
HEADERS = {"referer": "referer", "user_agent": "user_agent"}

#: nginx variable -> field name (any other variable keeps its name; $http_x_foo -> x_foo)
NGINX = {
    "remote_addr": "ip", "time_local": "time", "request": "request", "status": "response",
    "body_bytes_sent": "size", "remote_user": "user", "http_referer": "referer",
    "http_user_agent": "user_agent", "http_x_forwarded_for": "x_forwarded_for",
}

#: the presets; ``combined`` is the contract's original expression (see LEGACY)
PRESETS = {
    "common": '%h %l %u %t "%r" %>s %b',
    "combined": '%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-Agent}i"',
    "vhost_combined": '%v:%p %h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-Agent}i"',
    "nginx": '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
             '"$http_referer" "$http_user_agent" "$http_x_forwarded_for"',
}
DEFAULT = "combined"


def _snake(name: str) -> str:
    """``X-Forwarded-For`` -> ``x_forwarded_for``; empty when the name has no letter or digit."""
    return re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_")


# --- the compiled format ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogFormat:
    """A compiled format. ``legacy`` is the original ``combined`` expression (``contract.parse_line``);
    otherwise ``tokens`` is the token program."""

    name: str                              # preset name, or "apache" / "nginx" for a format string
    text: str                              # the format string (for combined: the contract's expression)
    syntax: str                            # "legacy", "apache" or "nginx"
    tokens: tuple = ()
    fields: tuple[str, ...] = contract.FIELDS + contract.TAIL_FIELDS
    header: str = ""                       # a line starting with it is a header line (counted apart)
    #: layouts of the format's lines that are not requests (``VENDOR_OTHERS``): a line that does not match
    #: the format but one of these does is counted apart (``OTHER``)
    others: tuple = ()
    #: the fields percent-decoded where they are written (``VENDOR_DECODE``); a line whose decoded fields
    #: are not UTF-8 is malformed (``invalid_utf8``), as a line that is not UTF-8 is
    decode: tuple[str, ...] = ()
    #: (field, shape) pairs (``VENDOR_SHAPES``): a line whose field is not of its shape does not match
    shapes: tuple[tuple[str, str], ...] = ()
    #: the columns change within a log (``w3c``: each ``#Fields:`` line): see ``W3CFormat``
    segmented = False

    @property
    def legacy(self) -> bool:
        return self.syntax == "legacy"

    def describe(self) -> str:
        if self.legacy:
            return "combined (the original expression)"
        label = self.name if self.name in PRESETS or self.name in VENDOR else self.syntax
        return f"{label} format {self.text!r}"

    # -- the program ----------------------------------------------------------------------------------

    def regex(self) -> str:
        """The token program as a regular expression without anchors or flags, valid for Python's ``re``
        (3.11+) and Java's ``java.util.regex``: one group per field, in order (``combined``: the original
        expression, whose five groups are its first five fields; with the tail's, ``contract.TAIL_PATTERN``)."""
        if self.legacy:
            return contract.PATTERN[1:-1]
        out, opened, shapes = [], 0, dict(self.shapes)
        for tok in self.tokens:
            if not isinstance(tok, (Literal, Opt)) and tok.name in shapes:   # (a plain token: see compile_vendor)
                word = "".join(_esc(c) for c in (tok.stop or "") + " ")
                out.append("([-+]?[0-9]+)" if shapes[tok.name] == "n" else f"([^{word}]*)")
            elif isinstance(tok, Literal):
                out.append("".join(_esc(c) for c in tok.text))
            elif isinstance(tok, Opt):
                out.append("(?:")
                opened += 1
            elif tok.kind in (NTH, MAYBE, QOR, PREFIX):
                out.append(_preset_regex(tok))
            elif tok.kind == TOKEN and tok.until:
                d, rest = _esc(tok.until[0]), "".join(_esc(c) for c in tok.until[1:])
                out.append(f"((?:[^{d}]++|{d}(?!{rest}))*+)")
            elif tok.kind == SPLIT:
                # greedy: backtracks to the last separator before the port's end (Java's greedy loop on
                # one character class backtracks without recursing, so long fields are safe on Spark)
                out.append("(.*)" if tok.end is None else f"([^{_esc(tok.end)}]*)")
            elif tok.kind == REST:
                stops = "".join(_esc(c) for c in (tok.stop or "") + tok.exclude)
                out.append(f"([^{stops}]*)" if stops else "(.*)")
            elif tok.escaped:
                out.append(r'([^"\\]*+(?:\\.[^"\\]*+)*+)')
            else:
                out.append(f"([^{_esc(tok.stop)}{''.join(_esc(c) for c in tok.exclude)}]*)")
        return "".join(out) + ")?" * opened

    def group_refs(self) -> list[str]:
        """Per field, the replacement that writes it from ``regex``'s groups (``$3``; a field quoted or bare
        has two groups, one of which did not take part: ``$3$4``, Java writing nothing for that one)."""
        refs, g = [], 0
        for tok in self.tokens:
            if isinstance(tok, (Literal, Opt)):
                continue
            n = 2 if tok.kind == QOR else 1
            refs.append("".join(f"${g + j + 1}" for j in range(n)))
            g += n
        return refs

    def python_regex(self) -> re.Pattern:
        """Compiled for ``fullmatch`` on the decoded line (ASCII classes, ``.`` matches anything)."""
        return re.compile(self.regex(), re.ASCII | re.DOTALL)

    def spark_regex(self) -> str:
        return "(?s)^" + self.regex() + r"\z"

    def scan(self, b: bytes, starts: list | None = None):
        """The reference matcher: the fields (bytes) of one line without its CR, or a ``Mismatch``, or
        ``HEADER`` for a header line, or ``OTHER`` for a line that is not a request (``others``);
        ``starts``, when given, receives each field's byte offset."""
        got = self._scan(b, starts)
        if isinstance(got, Mismatch) and any(not isinstance(o._scan(b), Mismatch) for o in self.others):
            return OTHER
        return got

    def _scan(self, b: bytes, starts: list | None = None):
        starts = [] if starts is None else starts
        pos, n, vals, last = 0, len(b), [], None
        if self.header and b.startswith(self.header.encode("ascii")):
            return HEADER
        for tok in self.tokens:
            if isinstance(tok, Opt):
                if pos == n:      # an older layout ends here: the later fields are empty
                    starts += [n] * (len(self.fields) - len(vals))
                    vals += [b""] * (len(self.fields) - len(vals))
                    break
                continue
            if not isinstance(tok, Literal) and tok.kind in (NTH, MAYBE, QOR, PREFIX):
                last = tok.name
                got = _preset_scan(tok, b, pos)
                if isinstance(got, str):
                    return Mismatch(pos, tok.name, got)
                vals.append(got[0])
                starts.append(got[2])
                pos = got[1]
                continue
            if isinstance(tok, Literal):
                lit = tok.text.encode("ascii")
                if not b.startswith(lit, pos):
                    return Mismatch(pos, last, f"expected {tok.text!r}")
                pos += len(lit)
                continue
            last = tok.name
            if tok.kind == REST:
                # a one-word field ends at a space; the check after the loop refuses what follows it
                k = n if tok.stop is None or (k := b.find(tok.stop.encode("ascii"), pos)) < 0 else k
            elif tok.kind == SPLIT:
                e = n if tok.end is None else b.find(tok.end.encode("ascii"), pos)
                if e < 0:
                    return Mismatch(pos, tok.name, f"no {tok.end!r} after it")
                k = b.rfind(tok.stop.encode("ascii"), pos, e)
                if k < 0:
                    where = "before the end of the line" if tok.end is None else f"before the {tok.end!r} after it"
                    return Mismatch(pos, tok.name, f"no {tok.stop!r} {where}")
            elif tok.escaped:
                k, j = -1, pos
                while True:
                    k = b.find(b'"', j)
                    if k < 0:
                        return Mismatch(pos, tok.name, 'no closing \'"\'')
                    t = k - 1
                    while t >= pos and b[t] == 0x5C:
                        t -= 1
                    if (k - 1 - t) % 2 == 0:
                        break
                    j = k + 1
            else:
                k = b.find((tok.until or tok.stop).encode("ascii"), pos)
                if k < 0:
                    return Mismatch(pos, tok.name, f"no {tok.until or tok.stop!r} after it")
            vals.append(b[pos:k])
            starts.append(pos)
            pos = k
        if pos != n:
            return Mismatch(pos, last, "text after the end of the format")
        for name, shape in self.shapes:
            k = self.fields.index(name)
            if not _SHAPES[shape][0].fullmatch(vals[k]):
                return Mismatch(starts[k], name, _SHAPES[shape][1])
        return vals

    def parse_line(self, raw: bytes) -> tuple[str | None, ...]:
        """All fields of one raw line (without ``\\n``), or raise ``contract.Malformed``; for ``combined``
        the tail's two, None when it is not well-formed."""
        if self.legacy:
            fields = contract.parse_line(raw)
            return fields + contract.parse_tail(raw, fields)
        raw, _ = contract.line_text(raw)
        vals = self.scan(raw)
        if vals is HEADER:
            raise Header()
        if vals is OTHER:
            raise NotRequest()
        if isinstance(vals, Mismatch):
            raise contract.Malformed(contract.NO_MATCH)
        if any(b"\t" in v or b"\r" in v for v in vals):
            raise contract.Malformed(contract.TAB_OR_CR)
        if self.decode:
            vals = [percent_decode(v) if f in self.decode else v for f, v in zip(self.fields, vals)]
        try:
            return tuple(v.decode("utf-8") for v in vals)
        except UnicodeDecodeError:   # (a decoded field: the line itself is UTF-8)
            raise contract.Malformed(contract.INVALID_UTF8) from None

    def why(self, raw: bytes) -> str | None:
        """For a malformed-line sample: where the line stops matching (None for the legacy expression,
        or a line that matches)."""
        if self.legacy:
            return None
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        starts: list = []
        m = self.scan(bytes(raw), starts)
        if m is HEADER or m is OTHER:
            return None
        if isinstance(m, Mismatch):
            return str(m)
        for name, v in zip(self.fields, m):
            for c in (b"\t", b"\r"):
                if c in v:
                    return f"field {name!r} at byte {starts[self.fields.index(name)] + v.index(c)}: {c.decode()!r}"
        return None

    def size_index(self) -> int:
        return self.fields.index("size") if "size" in self.fields else -1

    def nullable(self, name: str) -> bool:
        """Whether field ``name`` may be null: the tail fields of ``combined`` (see the module docstring)."""
        return self.legacy and name in contract.TAIL_FIELDS

    def native_program(self) -> tuple:
        """The token program as the native kernel takes it: (kind, literal bytes, stop byte) per token,
        kind 0 literal, 1 token/quoted (plain)/bracketed, 2 quoted (backslash), 3 rest, 4 split (the
        literal is the port's end character, empty for the line's end; stop the separator)."""
        prog = [(10, self.header.encode("ascii"), 0)] if self.header else []
        for tok in self.tokens:
            if isinstance(tok, Opt):
                prog.append((6, b"", 0))
            elif isinstance(tok, Literal):
                prog.append((0, tok.text.encode("ascii"), 0))
            elif tok.kind == NTH:
                # padded: a NUL byte first (never a format's character), then one byte a run of `stop`s
                prog.append((5, (b"\0" if tok.padded else b"") + tok.stop.encode("ascii") * tok.count, ord(tok.stop)))
            elif tok.kind == MAYBE:
                prog.append((7, tok.until.encode("ascii"), ord(tok.stop)))
            elif tok.kind == QOR:
                prog.append((8, b"", ord(tok.stop)))
            elif tok.kind == PREFIX:
                prog.append((9, tok.until.encode("ascii"), ord(tok.stop)))
            elif tok.kind == SPLIT:
                prog.append((4, (tok.end or "").encode("ascii"), ord(tok.stop)))
            elif tok.kind == REST:
                prog.append((3, b"", ord(tok.stop) if tok.stop else 0))
            elif tok.escaped:
                prog.append((2, b"", ord('"')))
            else:
                prog.append((1, tok.until.encode("ascii"), ord(tok.stop)))
        if self.shapes:   # (the kernel's T_SHAPE: a mark, no token)
            prog.append((19, b"".join(bytes((self.fields.index(f), ord(c))) for f, c in self.shapes), 0))
        if self.decode:   # (the kernel's T_DECODE: a mark, no token)
            prog.append((18, bytes(self.fields.index(f) for f in self.decode), 0))
        for other in self.others:   # (the kernel's T_ELSE: an alternative, matched when the line is not a record)
            prog.append((17, b"", 0))
            prog.extend(other.native_program())
        return tuple(prog)

    def others_regex(self) -> str | None:
        """One regular expression (Spark's, anchored) that the lines ``others`` take match; None without."""
        if not self.others:
            return None
        return "(?s)^(?:" + "|".join(f"(?:{o.regex()})" for o in self.others) + r")\z"


class Header(Exception):
    """A header line of the format (CloudFront's ``#Version:``): not a record, not malformed."""


class NotRequest(Exception):
    """A line of the format that is not a request (HAProxy's TCP-mode lines and notices: ``LogFormat.others``):
    not a record, not malformed, counted apart."""


@dataclass(frozen=True)
class W3CFormat(LogFormat):
    """The ``w3c`` preset (``logetl.w3c``): its columns come from the log's ``#Fields:`` lines, so a line is
    read with the columns of the last one before it. ``parse_line``, ``why`` and ``native_program`` read
    a line with ``cols`` (default: IIS's default fields)."""

    segmented = True

    def describe(self) -> str:
        return "w3c format (columns from each '#Fields:' line)"

    def regex(self) -> str:
        raise FormatError("the w3c format has no regular expression: its columns change with each '#Fields:' "
                          "line (it needs logetl's kernel)")

    def parse_line(self, raw: bytes, cols: tuple | None = None) -> tuple[str | None, ...]:
        from logetl import w3c

        return w3c.parse_line(raw, cols)

    def why(self, raw: bytes, cols: tuple | None = None) -> str | None:
        from logetl import w3c

        # (a sample is taken without the columns of its segment: what it says holds whatever they are)
        cols = w3c.columns(w3c.DEFAULT_FIELDS) if cols is None else cols
        raw = bytes(raw[:-1] if raw.endswith(b"\r") else raw)
        if w3c.scan(raw, cols) is None:
            return "its values do not match the columns of the '#Fields:' line before it"
        return None

    def native_program(self, cols: tuple | None = None) -> tuple:
        from logetl import w3c

        return w3c.program(w3c.columns(w3c.DEFAULT_FIELDS) if cols is None else cols)[0]


def _w3c_format() -> W3CFormat:
    from logetl import w3c

    return W3CFormat("w3c", w3c.DEFAULT_FIELDS, "preset", (), w3c.FIELDS, header="#")


#: what ``LogFormat.scan`` gives for a header line
HEADER = object()
#: what ``LogFormat.scan`` gives for a line that is not a request (``LogFormat.others``)
OTHER = object()


def _preset_regex(tok: Field) -> str:
    """The regular expression of a preset token (the kinds ``NTH``, ``MAYBE``, ``QOR`` and ``PREFIX``)."""
    d = _esc(tok.stop)
    if tok.kind == NTH and tok.padded:
        # possessive, as the kernel is: the leading stops, then each run of stops, are taken whole
        return f"({d}*+(?:[^{d}]++{d}++){{{tok.count}}}[^{d}]++)"
    if tok.kind == NTH:
        return f"((?:[^{d}]*{d}){{{tok.count}}}[^{d}]*)"
    if tok.kind == MAYBE:
        after = "".join(_esc(c) for c in tok.until[1:])
        return f"(?:{_esc(tok.until[0])}([^{d}]*){d}{after})?"
    if tok.kind == QOR:
        return r'(?:"([^"\\]*+(?:\\.[^"\\]*+)*+)"|(?!")([^' + d + ']*))'
    end = "".join(_esc(c) for c in tok.until)
    # possessive, as the kernel is: a prefix found is taken, never given back for a match without one
    return f"(?:((?:(?!{_esc(' ')}{d}|{end}).)*+){end})?+"


def _preset_scan(tok: Field, b: bytes, pos: int):
    """A preset token at ``pos`` of line ``b``: (value, position after it, the value's start), or why it does not match."""
    n = len(b)
    stop = tok.stop.encode("ascii")
    if tok.kind == NTH and tok.padded:
        k = pos
        while b.startswith(stop, k):
            k += 1
        for _ in range(tok.count):
            if (k := b.find(stop, k)) < 0:
                return f"fewer than {tok.count + 1} runs of {tok.stop!r} after it"
            while b.startswith(stop, k):
                k += 1
        if (k := b.find(stop, k)) < 0:
            return f"fewer than {tok.count + 1} runs of {tok.stop!r} after it"
        return b[pos:k], k, pos
    if tok.kind == NTH:
        k = pos - 1
        for _ in range(tok.count + 1):
            k = b.find(stop, k + 1)
            if k < 0:
                return f"fewer than {tok.count + 1} {tok.stop!r} after it"
        return b[pos:k], k, pos
    if tok.kind == MAYBE:
        opening, after = tok.until[0].encode("ascii"), tok.until[1:].encode("ascii")
        if b.startswith(opening, pos) and (k := b.find(stop, pos + 1)) >= 0 and b.startswith(after, k + 1):
            return b[pos + 1:k], k + 1 + len(after), pos + 1
        return b"", pos, pos
    if tok.kind == QOR:
        if not b.startswith(b'"', pos):
            k = b.find(stop, pos)
            return (b[pos:k], k, pos) if k >= 0 else (b[pos:], n, pos)
        j = pos + 1
        while True:
            k = b.find(b'"', j)
            if k < 0:
                return "no closing '\"'"
            t = k - 1
            while t > pos and b[t] == 0x5C:
                t -= 1
            if (k - 1 - t) % 2 == 0:
                return b[pos + 1:k], k + 1, pos + 1
            j = k + 1
    end = tok.until.encode("ascii")
    a, lim = b.find(end, pos), b.find(b" " + stop, pos)
    if a >= 0 and (lim < 0 or a < lim):
        return b[pos:a], a + len(end), pos
    return b"", pos, pos


def missing_field(fmt: "LogFormat", name: str) -> str:
    """The one-line refusal of a flow that asks log format ``fmt`` for a field ``name`` it lacks: the
    format, its fields, and the presets that have the field (so that ``--format`` can name one)."""
    label = fmt.name if fmt.name in PRESETS or fmt.name in VENDOR or fmt.name in JSON_NAMES or fmt.name == "w3c" \
        or fmt.legacy else repr(fmt.text)
    having = [p for p in (*PRESETS, *VENDOR, "w3c", *JSON_NAMES) if name in compile_format(p).fields]
    if not having:
        where = "no preset has it (a format string with it does: see --format)"
    elif len(having) == 1:
        where = f"the preset {having[0]} has it"
    else:
        where = f"the presets {', '.join(having[:-1])} and {having[-1]} have it"
    return f"the log format {label} has no field {name!r} (its fields: {', '.join(fmt.fields)}); {where}"


def _one_word(source: str) -> bool:
    """Whether the directive or variable ``source`` writes values without spaces (``ONE_WORD_*``)."""
    if source.startswith("$"):
        return source.strip("${}") in ONE_WORD_NGINX
    return source[-1:] in ONE_WORD_APACHE


def _esc(c: str) -> str:
    if c.isalnum() or c == "_":
        return c
    if c == "\t":
        return r"\t"
    return "\\" + c


# --- compiling format strings ----------------------------------------------------------------------------

LEGACY = LogFormat("combined", contract.PATTERN, "legacy")


#: strftime conversions that write several conversions (as Apache's apr_strftime expands them; %c as the C
#: locale writes it, the locale Apache logs in)
_STRFTIME = {"T": "%H:%M:%S", "D": "%m/%d/%y", "R": "%H:%M", "r": "%I:%M:%S %p", "F": "%Y-%m-%d",
             "c": "%a %b %e %H:%M:%S %Y", "n": "\n", "t": "\t", "%": "%%"}
#: a conversion: glibc's flag (``_`` pads with spaces, ``-`` not at all, ``0`` with zeros), width, modifier
_CONVERSION = re.compile(r"%([_\-0^#]?)[0-9]*[EO]?(.)", re.DOTALL)
#: conversions that write a one-digit value after a space (day of month, hour 0-23, hour 1-12)
_SPACE_PADDED = set("ekl")


def _strftime_shape(fmt: str, stop: str) -> tuple[int, bool, str | None]:
    """How the time that ``%{fmt}t`` writes holds ``stop`` characters: (count, padded, ambiguous).
    Conversions write digits, names and signs, no space, but a space-padded one (``%e``, ``%k``, ``%l``,
    ``%_d``, ...) writes one before a one-digit value. Not padded (or ``stop`` is not a space): the field
    holds exactly ``count`` stops (its literal text's; ``begin:``/``end:`` and ``sec``/``msec``/... write
    none). Padded: it may start with spaces and holds ``count`` runs of them (the literal text's runs after
    its start), which is exact when each padded conversion starts the layout or follows a literal space;
    ``ambiguous`` names the first that does not (``" "`` when the layout ends with a space)."""
    for prefix in ("begin:", "end:"):
        fmt = fmt.removeprefix(prefix)
    for _ in range(3):
        fmt = re.sub(r"%([TDRrFcnt%])", lambda m: _STRFTIME[m.group(1)] if m.group(1) != "%" else "\0", fmt)
    # the layout's shape: its literal text, each conversion one character no format holds (\2 a space-padded
    # one, else \1)
    shape, padded, ambiguous, pos = [], False, None, 0
    for m in _CONVERSION.finditer(fmt):
        shape.append(fmt[pos:m.start()].replace("\0", "%"))
        pad = m.group(1) == "_" or (m.group(1) not in ("-", "0") and m.group(2) in _SPACE_PADDED)
        if pad and stop == " " and ambiguous is None and "".join(shape)[-1:] not in ("", " "):
            ambiguous = m.group(0)
        padded = padded or pad
        shape.append("\2" if pad else "\1")
        pos = m.end()
    text = "".join(shape) + fmt[pos:].replace("\0", "%")
    if not (padded and stop == " "):
        return (text.count(stop) if stop else 0), False, None
    if ambiguous is None and text.endswith(" "):
        ambiguous = " "
    return len(re.findall(" +", text.lstrip(" "))), True, ambiguous


def _special_field(fname: str, source: str, special: str | None, after: str, nxt, ends_opt: bool) -> Field:
    """A field of a kind the literals around it do not decide: a preset's (``special``: ``NTH``'s
    ``nth:N``, ``MAYBE``, ``QOR``, ``PREFIX``), one ending at its next literal's first occurrence
    (``until``), or one after which an older layout may end the line (``ends_opt``: to its stop or the end)."""
    if special == QOR:
        return Field(fname, QOR, after or " ", False, source)
    if special == MAYBE:
        return Field(fname, MAYBE, "}", False, source, until="{ ")
    if special == PREFIX:
        return Field(fname, PREFIX, "[", False, source, until=": ")
    if special and special.startswith(NTH + ":"):
        count, _, pad = special[len(NTH) + 1:].partition(":")
        return Field(fname, NTH, after, False, source, count=int(count), padded=pad == "padded")
    if ends_opt or nxt is None:
        return Field(fname, REST, after or None, False, source)
    return Field(fname, TOKEN, after, False, source, until=nxt[1] if len(nxt[1]) > 1 else "")


def _program(items: list, text: str, syntax: str, name: str, escaped_quotes: bool) -> LogFormat:
    """items: ("lit", str), ("opt",) (an older layout may end the line there), or ("field", name, source,
    position, is_port[, special]) (special: see ``_special_field``). Adjacent literals merge; field kinds
    follow from the literals around them."""
    merged: list = []
    for it in items:
        if it[0] == "lit" and merged and merged[-1][0] == "lit":
            merged[-1] = ("lit", merged[-1][1] + it[1])
        elif not (it[0] == "lit" and it[1] == ""):
            merged.append(it)
    tokens: list = []
    seen: dict[str, int] = {}
    fields = []
    exclude = ""     # the separator that the port after a split field cannot hold
    for i, it in enumerate(merged):
        if it[0] == "lit":
            tokens.append(Literal(it[1]))
            continue
        if it[0] == "opt":
            tokens.append(Opt())
            continue
        _, fname, source, position, _is_port, *special = it
        special = special[0] if special else None
        prev = next((m for m in reversed(merged[:i]) if m[0] != "opt"), None)
        nxt = next((m for m in merged[i + 1:] if m[0] != "opt"), None)
        ends_opt = i + 1 < len(merged) and merged[i + 1][0] == "opt"
        # a preset's optional field (braces, a syslog prefix) ends itself: a field may follow it directly
        if nxt is not None and nxt[0] == "field" and special not in (MAYBE, PREFIX):
            raise FormatError(f"{nxt[2]} at position {nxt[3]} follows {source} with nothing between them: "
                              "a field must be followed by text that ends it")
        if fname in seen:
            seen[fname] += 1
            fname = f"{fname}_{seen[fname]}"
        else:
            seen[fname] = 1
        if FIELD_NAME.fullmatch(fname) is None:      # an nginx variable's own name: $_x
            raise FormatError(f"{source} at position {position} of the format gives the field name {fname!r}: a "
                              f"field name is {FIELD_NAME_RULE}")
        alike = next((f for f in fields if f.lower() == fname.lower()), None)
        if alike is not None:                        # $ip and $IP
            raise FormatError(f"{source} at position {position} of the format gives the field name {fname!r}, "
                              f"which differs only in case from {alike!r} (Spark, Hive and DuckDB take them for one)")
        before = prev[1][-1:] if prev and prev[0] == "lit" else ""
        after = nxt[1][:1] if nxt and nxt[0] == "lit" else ""
        if special and special.startswith("time:"):
            # (quoted, bracketed or the format's last field: the time's own spaces do not matter)
            n, padded, ambiguous = _strftime_shape(special[len("time:"):], after) \
                if before + after not in ('""', "[]") and nxt is not None else (0, False, None)
            if ambiguous:
                why = (f"{ambiguous} writes a one-digit value after a space, and that space cannot be told from "
                       f"the one after the time; write a space before {ambiguous}, or its zero-padded form"
                       if ambiguous != " " else "it pads a value with a space and ends with a space, so where "
                       "it ends cannot be told")
                raise FormatError(f"time layout {source} at position {position} of the format: {why}; or bracket "
                                  "or quote the time")
            special = f"{NTH}:{n}:padded" if padded else f"{NTH}:{n}" if n else None
        if special == "until" and (before + after in ('""', "[]") or nxt is None or len(nxt[1]) < 2):
            special = None    # quoted or bracketed, or its literal is one character: as any field
        if special is not None or ends_opt:
            tokens.append(_special_field(fname, source, special, after, nxt, ends_opt))
            fields.append(fname)
            exclude = ""
            continue
        port = merged[i + 2] if i + 2 < len(merged) else None
        # the port's end: the first character of the literal after it (None: the port ends the line)
        port_end = merged[i + 3][1][:1] if port is not None and i + 3 < len(merged) and merged[i + 3][0] == "lit" else None
        if nxt is None:
            tokens.append(Field(fname, REST, " " if _one_word(source) else None, False, source, exclude=exclude))
            exclude = ""
        elif before == '"' and after == '"':
            tokens.append(Field(fname, QUOTED, '"', escaped_quotes, source))
        elif before == "[" and after == "]":
            tokens.append(Field(fname, BRACKETED, "]", False, source))
        elif (len(nxt[1]) == 1 and after not in PORT_CHARS and port is not None and port[0] == "field" and port[4] and port_end != after
              and not exclude):   # (not when this field is itself the port after a split field)
            # a one-character separator, then a port (%v:%p, $remote_addr:$remote_port): the field ends at
            # the separator's LAST occurrence before the port's end, since the field may hold it (an IPv6
            # address, bracketed or not: [2001:db8::1]:443) and the port, digits only, cannot
            tokens.append(Field(fname, SPLIT, after, False, source, end=port_end))
            fields.append(fname)
            exclude = after
            continue
        else:
            tokens.append(Field(fname, TOKEN, after, False, source, exclude=exclude))
            exclude = ""
        fields.append(fname)
    if not fields:
        raise FormatError(f"format {text!r} has no field (no %-directive or $variable)")
    return LogFormat(name, text, syntax, tuple(tokens), tuple(fields))


_APACHE_DIRECTIVE = re.compile(r"%([<>]?)(!?[0-9,]*)(?:\{([^}]*)\})?([<>]?)(\^t[io]|[a-zA-Z%])")
#: what a directive that _APACHE_DIRECTIVE refuses got through: its modifiers and {NAME}, '}' or not
_APACHE_UNFINISHED = re.compile(r"%[<>]?!?[0-9,]*(?:\{[^}]*\}?)?[<>]?")


def _unfinished(text: str, i: int) -> FormatError:
    """The error for a directive at ``i`` that does not end in a letter: it quotes the directive whole, up to
    where it stops (``%{User-Agent}`` lacks its letter; ``%{Referer`` its '}'), so the user sees which one."""
    m = _APACHE_UNFINISHED.match(text, i)
    part, end = m.group(0), m.end()
    if end < len(text) and text[end] == "^":     # %^ti / %^to with another letter
        return FormatError(f"unknown directive {text[i:end + 3]!r} at position {i + 1} of the format")
    why = "no closing '}'" if "{" in part and not part.endswith("}") else "no directive letter after it"
    return FormatError(f"unfinished directive {part!r} at position {i + 1} of the format: {why}")


def compile_apache(text: str, name: str = "apache") -> LogFormat:
    """An Apache ``LogFormat`` string (as the directive's argument: ``\\"`` is ``"``, ``\\t`` a TAB)."""
    _check_ascii(text)
    items: list = []
    lit: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "n":
                raise FormatError(f"\\n at position {i + 1} of the format: a log line cannot hold a newline")
            lit.append({"t": "\t"}.get(nxt, nxt))
            i += 2
            continue
        if c != "%":
            lit.append(c)
            i += 1
            continue
        m = _APACHE_DIRECTIVE.match(text, i)
        if m is None:
            raise _unfinished(text, i)
        mod1, _conditions, arg, mod2, letter = m.groups()
        directive = m.group(0)
        if letter == "%":
            lit.append("%")
            i = m.end()
            continue
        mod = mod1 or mod2
        key = f"{{{arg}}}{letter}" if arg is not None else f"{mod if letter == 's' else ''}{letter}"
        if key in APACHE:
            fname = APACHE[key]
        elif arg is not None and letter in APACHE_NAMED:
            if letter == "t":
                fname = "time"
            else:
                # the field is named after the {NAME}: one without a letter or digit would give a field
                # named after nothing (%{}i once became a field called 'field')
                if arg == "":
                    raise FormatError(f"directive {directive!r} at position {i + 1} of the format has an empty "
                                      "{NAME}")
                snake = _snake(arg)
                if not snake:
                    raise FormatError(f"directive {directive!r} at position {i + 1} of the format: its {{NAME}} "
                                      f"{arg!r} has no letter or digit to name the field by")
                fname = HEADERS.get(snake, snake) if letter in ("i", "^ti") else APACHE_NAMED[letter] + snake
        elif arg is None and letter in APACHE_NAMED and letter != "t":
            raise FormatError(f"directive {directive!r} at position {i + 1} needs a {{NAME}}")
        else:
            raise FormatError(f"unknown directive {directive!r} at position {i + 1} of the format")
        if letter == "s" and not mod and "%>s" in text:
            fname = "original_status"     # %s beside %>s: the original status
        items.append(("lit", "".join(lit)))
        lit = []
        if letter == "t" and arg in (None, "", "begin", "end"):
            # %t writes [time]; so do %{}t, %{begin}t and %{end}t (mod_log_config's log_request_time takes
            # an empty format, and begin/end without a format after them, as the CLF time in brackets)
            items += [("lit", "["), ("field", fname, directive, i + 1, False), ("lit", "]")]
        elif letter == "t":
            items.append(("field", fname, directive, i + 1, False, "time:" + arg))
        else:
            items.append(("field", fname, directive, i + 1, key in APACHE_PORTS, "until" if key in ("l", "u") else None))
        i = m.end()
    items.append(("lit", "".join(lit)))
    return _program(items, text, "apache", name, escaped_quotes=True)


_NGINX_VARIABLE = re.compile(r"\$(?:\{([A-Za-z0-9_]+)\}|([A-Za-z0-9_]+))")


def compile_nginx(text: str, name: str = "nginx", escape: str = "default") -> LogFormat:
    """An nginx ``log_format`` string (the concatenated quoted strings of the directive)."""
    _check_ascii(text)
    if escape not in ("default", "json", "none"):
        raise FormatError(f"unknown nginx escape={escape!r} (default, json or none)")
    items: list = []
    pos = 0
    for m in _NGINX_VARIABLE.finditer(text):
        items.append(("lit", text[pos:m.start()]))
        var = m.group(1) or m.group(2)
        if var in NGINX:
            fname = NGINX[var]
        elif var.startswith("http_"):
            fname = var[len("http_"):]
            if not fname:   # $http_ names no header, and would give a field without a name
                raise FormatError(f"variable {m.group(0)!r} at position {m.start() + 1} of the format names no "
                                  "header ($http_NAME)")
        else:
            fname = var
        items.append(("field", fname, m.group(0), m.start() + 1, var in NGINX_PORTS,
                      "until" if var == "remote_user" else None))
        pos = m.end()
    rest = text[pos:]
    if "$" in rest:
        raise FormatError(f"'$' without a variable name at position {pos + rest.index('$') + 1} of the format")
    items.append(("lit", rest))
    return _program(items, text, "nginx", name, escaped_quotes=escape == "json")


def _check_ascii(text: str) -> None:
    for i, c in enumerate(text):
        if not (" " <= c <= "~" or c == "\t"):
            raise FormatError(f"character {c!r} at position {i + 1} of the format: formats are printable ASCII")


_VENDOR_ITEM = re.compile(r"\{(\?|[a-z_]+)(?::([a-z]+))?\}")


def compile_vendor(name: str) -> LogFormat:
    """A vendor preset (``VENDOR``) as a token program."""
    def shaped(fmt: LogFormat) -> LogFormat:
        shapes = tuple((f, c) for f, c in VENDOR_SHAPES.get(name, ()) if f in fmt.fields)
        assert all(t.kind in (TOKEN, REST) and not t.until and not t.escaped for t in fmt.tokens   # (see regex)
                   if not isinstance(t, (Literal, Opt)) and t.name in dict(shapes))
        return replace(fmt, shapes=shapes)

    fmt = shaped(_compile_template(VENDOR[name], name))
    others = tuple(shaped(_compile_template(text, name)) for text in VENDOR_OTHERS.get(name, ()))
    return replace(fmt, header=VENDOR_HEADERS.get(name, ""), others=others, decode=VENDOR_DECODE.get(name, ()))


def _compile_template(text: str, name: str) -> LogFormat:
    """A layout in the vendor presets' notation (``{field}``, ``{field:kind}``, ``{?}``) as a token program."""
    items: list = []
    pos = 0
    for m in _VENDOR_ITEM.finditer(text):
        items.append(("lit", text[pos:m.start()]))
        if m.group(1) == "?":
            items.append(("opt",))
        else:
            kind = m.group(2)
            items.append(("field", m.group(1), m.group(0), m.start() + 1, kind == "port",
                          None if kind in (None, "port") else kind))
        pos = m.end()
    items.append(("lit", text[pos:]))
    return _program(items, text, "preset", name, escaped_quotes=True)


def compile_format(spec: str | None) -> LogFormat:
    """A preset name, an Apache ``LogFormat`` string (it has a ``%`` directive) or an nginx
    ``log_format`` string (it has a ``$variable``). ``None`` and ``combined`` are the original
    expression."""
    if spec is None or spec == DEFAULT:
        return LEGACY
    if spec == "auto":
        raise FormatError("--format auto recognises the format from the start of a run's --input: it cannot "
                          "be used here (give a format)")
    if spec == "w3c":
        return _w3c_format()
    if spec in VENDOR:
        return compile_vendor(spec)
    if spec in JSON_NAMES or spec.startswith("json:"):
        from logetl import jsonformats
        return jsonformats.compile_json(spec)
    if spec in PRESETS:
        text = PRESETS[spec]
        return compile_nginx(text, spec) if spec == "nginx" else compile_apache(text, spec)
    if "%" in spec:
        return compile_apache(spec)
    if "$" in spec:
        return compile_nginx(spec)
    raise FormatError(f"format {spec!r} is neither a preset "
                      f"({', '.join(sorted((*PRESETS, *VENDOR, 'w3c', *JSON_NAMES)))}), "
                      "a JSON mapping (json:NAME=KEY.PATH,...) nor a format string with a %-directive (Apache) or a "
                      "$variable (nginx)")


def resolve(format_spec: str | None = None, format_file: str | None = None) -> LogFormat:
    """What ``--format`` / ``--format-file`` ask for (at most one of them)."""
    if format_spec is not None and format_file is not None:
        raise FormatError("--format and --format-file cannot go together: give one")
    if format_file is not None:
        if not os.path.exists(format_file.partition("#")[0]):
            raise FormatError(f"format file {format_file.partition('#')[0]!r} does not exist")
        from logetl.formatfiles import read_format_file

        return read_format_file(format_file)
    return compile_format(format_spec)
