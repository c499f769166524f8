"""Log formats: Apache ``LogFormat`` and nginx ``log_format`` strings compiled to a token program.

The default, ``combined``, is the original expression of the line contract (``logetl.contract``),
unchanged: its own semantics, its own hand-written kernel. Every other format -- the presets ``common``,
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
=============  ==========================================  =====================================

Every field may be empty. Each field ends at the first character its class cannot take, and the next
token must then match there; so the scan is deterministic and equals a full match of the regular
expression. Two fields with nothing between them are refused when the format is compiled. A line is
malformed (reason as in the contract) when it is not valid UTF-8, when it does not match (a sample names
the field that failed and its byte offset), or when any field of the format holds a TAB or CR. Records
whose ``size`` field is exactly ``-`` are then dropped, as in the contract (formats without ``size``
drop nothing). Field values are the text as the server wrote it (escapes are not decoded).

Field names come from ``APACHE`` and ``NGINX`` (directive/variable -> name); a request header
``%{X-Foo}i`` / ``$http_x_foo`` is ``x_foo``; any other nginx variable keeps its name. A name that
occurs twice gets ``_2``, ``_3``, ... Format strings are ASCII.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from logetl import contract
from logetl.errors import UsageError


class FormatError(UsageError):
    """A format string or format file that cannot be compiled; the message names the problem and where."""


# --- tokens ---------------------------------------------------------------------------------------------

TOKEN, QUOTED, BRACKETED, REST = "token", "quoted", "bracketed", "rest"


@dataclass(frozen=True)
class Literal:
    text: str


@dataclass(frozen=True)
class Field:
    name: str
    kind: str                  # token | quoted | bracketed | rest
    stop: str | None           # the character that ends it (None for rest, '"' for quoted)
    escaped: bool = False      # quoted with backslash escapes (Apache, nginx escape=json)
    source: str = ""           # the directive or variable it came from


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
                "^to": "resp_"}
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
    return re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_") or "field"


# --- the compiled format ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogFormat:
    """A compiled format. ``legacy`` is the original ``combined`` expression (``contract.parse_line``);
    otherwise ``tokens`` is the token program."""

    name: str                              # preset name, or "apache" / "nginx" for a format string
    text: str                              # the format string (for combined: the contract's expression)
    syntax: str                            # "legacy", "apache" or "nginx"
    tokens: tuple = ()
    fields: tuple[str, ...] = contract.FIELDS

    @property
    def legacy(self) -> bool:
        return self.syntax == "legacy"

    def describe(self) -> str:
        if self.legacy:
            return "combined (the original expression)"
        label = self.name if self.name in PRESETS else self.syntax
        return f"{label} format {self.text!r}"

    # -- the program ----------------------------------------------------------------------------------

    def regex(self) -> str:
        """The token program as a regular expression without anchors or flags, valid for Python's ``re``
        (3.11+) and Java's ``java.util.regex``: one group per field, in order."""
        if self.legacy:
            return contract.PATTERN[1:-1]
        out = []
        for tok in self.tokens:
            if isinstance(tok, Literal):
                out.append("".join(_esc(c) for c in tok.text))
            elif tok.kind == REST:
                out.append("(.*)")
            elif tok.escaped:
                out.append(r'([^"\\]*+(?:\\.[^"\\]*+)*+)')
            else:
                out.append(f"([^{_esc(tok.stop)}]*)")
        return "".join(out)

    def python_regex(self) -> re.Pattern:
        """Compiled for ``fullmatch`` on the decoded line (ASCII classes, ``.`` matches anything)."""
        return re.compile(self.regex(), re.ASCII | re.DOTALL)

    def spark_regex(self) -> str:
        return "(?s)^" + self.regex() + r"\z"

    def scan(self, b: bytes):
        """The reference matcher: the fields (bytes) of one line without its CR, or a ``Mismatch``."""
        pos, n, vals, last = 0, len(b), [], None
        for tok in self.tokens:
            if isinstance(tok, Literal):
                lit = tok.text.encode("ascii")
                if not b.startswith(lit, pos):
                    return Mismatch(pos, last, f"expected {tok.text!r}")
                pos += len(lit)
                continue
            last = tok.name
            if tok.kind == REST:
                k = n
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
                k = b.find(tok.stop.encode("ascii"), pos)
                if k < 0:
                    return Mismatch(pos, tok.name, f"no {tok.stop!r} after it")
            vals.append(b[pos:k])
            pos = k
        if pos != n:
            return Mismatch(pos, last, "text after the end of the format")
        return vals

    def parse_line(self, raw: bytes) -> tuple[str, ...]:
        """All fields of one raw line (without ``\\n``), or raise ``contract.Malformed``."""
        if self.legacy:
            return contract.parse_line(raw)
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            raise contract.Malformed(contract.INVALID_UTF8) from None
        vals = self.scan(raw)
        if isinstance(vals, Mismatch):
            raise contract.Malformed(contract.NO_MATCH)
        if any(b"\t" in v or b"\r" in v for v in vals):
            raise contract.Malformed(contract.TAB_OR_CR)
        return tuple(v.decode("utf-8") for v in vals)

    def why(self, raw: bytes) -> str | None:
        """For a malformed-line sample: where the line stops matching (None for the legacy expression,
        or a line that matches)."""
        if self.legacy:
            return None
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        m = self.scan(bytes(raw))
        if isinstance(m, Mismatch):
            return str(m)
        for name, v in zip(self.fields, m):
            for c in (b"\t", b"\r"):
                if c in v:
                    return f"field {name!r} at byte {self.offset_of(m, name) + v.index(c)}: {c.decode()!r}"
        return None

    def offset_of(self, vals, name) -> int:
        """Byte offset where field ``name`` starts, given the field values of a line that matched."""
        pos, i = 0, 0
        for tok in self.tokens:
            if isinstance(tok, Literal):
                pos += len(tok.text)
            else:
                if tok.name == name:
                    return pos
                pos += len(vals[i])
                i += 1
        raise KeyError(name)

    def size_index(self) -> int:
        return self.fields.index("size") if "size" in self.fields else -1

    def native_program(self) -> tuple:
        """The token program as the native kernel takes it: (kind, literal bytes, stop byte) per token,
        kind 0 literal, 1 token/quoted (plain)/bracketed, 2 quoted (backslash), 3 rest."""
        prog = []
        for tok in self.tokens:
            if isinstance(tok, Literal):
                prog.append((0, tok.text.encode("ascii"), 0))
            elif tok.kind == REST:
                prog.append((3, b"", 0))
            elif tok.escaped:
                prog.append((2, b"", ord('"')))
            else:
                prog.append((1, b"", ord(tok.stop)))
        return tuple(prog)


def _esc(c: str) -> str:
    if c.isalnum() or c == "_":
        return c
    if c == "\t":
        return r"\t"
    return "\\" + c


# --- compiling format strings ----------------------------------------------------------------------------

LEGACY = LogFormat("combined", contract.PATTERN, "legacy")


def _program(items: list, text: str, syntax: str, name: str, escaped_quotes: bool) -> LogFormat:
    """items: ("lit", str) or ("field", name, source, position). Adjacent literals merge; field kinds
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
    for i, it in enumerate(merged):
        if it[0] == "lit":
            tokens.append(Literal(it[1]))
            continue
        _, fname, source, position = it
        prev = merged[i - 1] if i else None
        nxt = merged[i + 1] if i + 1 < len(merged) else None
        if nxt is not None and nxt[0] == "field":
            raise FormatError(f"{nxt[2]} at position {nxt[3]} follows {source} with nothing between them: "
                              "a field must be followed by text that ends it")
        if fname in seen:
            seen[fname] += 1
            fname = f"{fname}_{seen[fname]}"
        else:
            seen[fname] = 1
        before = prev[1][-1:] if prev else ""
        after = nxt[1][:1] if nxt else ""
        if nxt is None:
            tokens.append(Field(fname, REST, None, False, source))
        elif before == '"' and after == '"':
            tokens.append(Field(fname, QUOTED, '"', escaped_quotes, source))
        elif before == "[" and after == "]":
            tokens.append(Field(fname, BRACKETED, "]", False, source))
        else:
            tokens.append(Field(fname, TOKEN, after, False, source))
        fields.append(fname)
    if not fields:
        raise FormatError(f"format {text!r} has no field (no %-directive or $variable)")
    return LogFormat(name, text, syntax, tuple(tokens), tuple(fields))


_APACHE_DIRECTIVE = re.compile(r"%([<>]?)(!?[0-9,]*)(?:\{([^}]*)\})?([<>]?)(\^t[io]|[a-zA-Z%])")


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
            raise FormatError(f"unfinished directive {text[i:i + 6]!r} at position {i + 1} of the format")
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
                snake = _snake(arg)
                fname = HEADERS.get(snake, snake) if letter in ("i", "^ti") else APACHE_NAMED[letter] + snake
        elif arg is None and letter in APACHE_NAMED and letter != "t":
            raise FormatError(f"directive {directive!r} at position {i + 1} needs a {{NAME}}")
        else:
            raise FormatError(f"unknown directive {directive!r} at position {i + 1} of the format")
        if letter == "s" and not mod and "%>s" in text:
            fname = "original_status"     # %s beside %>s: the original status
        items.append(("lit", "".join(lit)))
        lit = []
        if letter == "t" and arg is None:  # %t writes [time]
            items += [("lit", "["), ("field", fname, directive, i + 1), ("lit", "]")]
        else:
            items.append(("field", fname, directive, i + 1))
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
        else:
            fname = var
        items.append(("field", fname, m.group(0), m.start() + 1))
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


def compile_format(spec: str | None) -> LogFormat:
    """A preset name, an Apache ``LogFormat`` string (it has a ``%`` directive) or an nginx
    ``log_format`` string (it has a ``$variable``). ``None`` and ``combined`` are the original
    expression."""
    if spec is None or spec == DEFAULT:
        return LEGACY
    if spec in PRESETS:
        text = PRESETS[spec]
        return compile_nginx(text, spec) if spec == "nginx" else compile_apache(text, spec)
    if "%" in spec:
        return compile_apache(spec)
    if "$" in spec:
        return compile_nginx(spec)
    raise FormatError(f"format {spec!r} is neither a preset ({', '.join(sorted(PRESETS))}) nor a format "
                      "string with a %-directive (Apache) or a $variable (nginx)")


# --- format files --------------------------------------------------------------------------------------

def _config_words(text: str, path: str, lineno: int) -> list[str]:
    """Splits a config line into words; quoted words lose their quotes (Apache keeps ``\\"`` inside a
    double-quoted word as ``\\"``, which the LogFormat parser then reads as ``"``)."""
    words, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if c == "#":
            break
        if c in "\"'":
            j, buf = i + 1, []
            while j < n and text[j] != c:
                if text[j] == "\\" and j + 1 < n:
                    buf.append(text[j:j + 2])
                    j += 2
                    continue
                buf.append(text[j])
                j += 1
            if j >= n:
                raise FormatError(f"{path}:{lineno}: unterminated {c} quote")
            words.append(("q", "".join(buf)))
            i = j + 1
            continue
        j = i
        while j < n and not text[j].isspace() and text[j] not in ";":
            j += 1
        if j == i:  # ';'
            words.append(("p", ";"))
            i += 1
            continue
        words.append(("w", text[i:j]))
        i = j
    return words


def read_format_file(spec: str) -> LogFormat:
    """``FILE`` or ``FILE#NAME``: a ``LogFormat "..." [nickname]`` line (Apache) or a
    ``log_format name [escape=...] '...' '...';`` directive (nginx, may span lines). A file with several
    needs ``#NAME``."""
    path, _, want = spec.partition("#")
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except OSError as exc:
        raise FormatError(f"cannot read format file {path!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise FormatError(f"format file {path!r} is not UTF-8 text") from None
    found: list[tuple[str, LogFormat]] = []
    i = 0
    while i < len(lines):
        words = _config_words(lines[i], path, i + 1)
        if words and words[0][0] == "w" and words[0][1].lower() == "logformat":
            args = words[1:]
            if not args or args[0][0] == "p":
                raise FormatError(f"{path}:{i + 1}: LogFormat without a format string")
            nick = args[1][1] if len(args) > 1 else ""
            fmt_text = args[0][1].replace('\\"', '"') if args[0][0] == "q" else args[0][1]
            found.append((nick, _located(lambda t=fmt_text: compile_apache(t), path, i + 1)))
        elif words and words[0][0] == "w" and words[0][1] == "log_format":
            start = i
            while not any(w == ("p", ";") for w in words) and i + 1 < len(lines):
                i += 1
                words += _config_words(lines[i], path, i + 1)
            args = [w for w in words[1:] if w != ("p", ";")]
            if not args:
                raise FormatError(f"{path}:{start + 1}: log_format without a name")
            nick, escape, parts = args[0][1], "default", []
            for kind, w in args[1:]:
                if kind == "w" and w.startswith("escape="):
                    escape = w[len("escape="):]
                else:
                    parts.append(w)
            fmt_text = "".join(parts)
            found.append((nick, _located(lambda t=fmt_text, e=escape: compile_nginx(t, "nginx", e), path, start + 1)))
        i += 1
    if not found:
        raise FormatError(f"format file {path!r} holds no LogFormat or log_format line")
    if want:
        for nick, fmt in found:
            if nick == want:
                return fmt
        raise FormatError(f"format file {path!r} has no format named {want!r} "
                          f"(it has: {', '.join(n or '(unnamed)' for n, _ in found)})")
    if len(found) > 1:
        raise FormatError(f"format file {path!r} holds {len(found)} formats "
                          f"({', '.join(n or '(unnamed)' for n, _ in found)}): choose one with "
                          f"--format-file '{path}#NAME'")
    return found[0][1]


def _located(make, path: str, lineno: int) -> LogFormat:
    try:
        return make()
    except FormatError as exc:
        raise FormatError(f"{path}:{lineno}: {exc}") from None


def resolve(format_spec: str | None = None, format_file: str | None = None) -> LogFormat:
    """What ``--format`` / ``--format-file`` ask for (at most one of them)."""
    if format_spec is not None and format_file is not None:
        raise FormatError("--format and --format-file cannot go together: give one")
    if format_file is not None:
        if not os.path.exists(format_file.partition("#")[0]):
            raise FormatError(f"format file {format_file.partition('#')[0]!r} does not exist")
        return read_format_file(format_file)
    return compile_format(format_spec)
