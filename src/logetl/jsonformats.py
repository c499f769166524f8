"""JSON-lines logs: one JSON object a line, its fields read by key path.

The presets ``caddy`` (Caddy v2's ``http.log.access`` logger), ``traefik`` (Traefik's JSON access log) and
``nginx_json`` (nginx ``log_format json_combined escape=json``, see ``NGINX_JSON``) map keys to the field
vocabulary; ``json:NAME=KEY.PATH,...`` maps any JSON log's keys (``parse_mapping``).

A line is read as Python's ``json.loads`` reads it (whitespace around the object allowed, strict strings,
``NaN``/``Infinity`` refused) and must be one JSON object. Each field takes the value at its key path: a
string decoded (``\\uXXXX`` with surrogate pairs, ``\\"``, ``\\\\``, ``\\/``, ``\\n`` ...), a number,
``true`` or ``false`` as written (``200`` stays ``200``, ``1.50`` stays ``1.50``), an array its first
element's value (Caddy's header arrays), and ``null``, an object, an empty array or a missing key the empty
value. A key met twice: the last one counts. Then the derived fields: ``request`` (``METHOD URI PROTO``)
when a method and a URI are mapped, or ``method``, ``uri`` and ``protocol`` split from a mapped request line;
``path`` and ``query`` split from the URI at its first ``?``. A line that is not valid UTF-8 is
``invalid_utf8``; one that is not a JSON object, or whose mapped string decodes to a lone surrogate, is
``no_match`` (the sample says where and why); one with a field whose decoded value holds a TAB, CR or LF is
``tab_or_cr_in_field``, as with every format (records are tab-separated). The native kernel (``_json.h``)
implements exactly this; ``JsonFormat.scan`` is the reference.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from logetl import contract
from logetl.expressions import FIELD_NAME, FIELD_NAME_RULE
from logetl.formats import FormatError, LogFormat, Mismatch

#: native token kinds (see _json.h)
T_JSON, T_JKEY, T_JDERIVE = 11, 12, 13
MAX_FIELDS = 64
MAX_SEGS = 16

#: the nginx ``log_format`` the ``nginx_json`` preset reads (the JSON layout most often published for nginx)
NGINX_JSON = """log_format json_combined escape=json
  '{'
    '"time_local":"$time_local",'
    '"remote_addr":"$remote_addr",'
    '"remote_user":"$remote_user",'
    '"request":"$request",'
    '"status": "$status",'
    '"body_bytes_sent":"$body_bytes_sent",'
    '"request_time":"$request_time",'
    '"http_referrer":"$http_referer",'
    '"http_user_agent":"$http_user_agent"'
  '}';"""

#: the JSON presets: field name -> key path (the derived fields follow from these)
JSON_PRESETS = {
    "caddy": (
        ("ip", "request.remote_ip"), ("client_ip", "request.client_ip"), ("remote_port", "request.remote_port"),
        ("time", "ts"), ("method", "request.method"), ("uri", "request.uri"), ("protocol", "request.proto"),
        ("host", "request.host"), ("response", "status"), ("size", "size"), ("referer", "request.headers.Referer"),
        ("user_agent", "request.headers.User-Agent"), ("duration", "duration"), ("bytes_read", "bytes_read"),
        ("tls_server_name", "request.tls.server_name"), ("level", "level"), ("logger", "logger"), ("msg", "msg"),
    ),
    "traefik": (
        ("ip", "ClientHost"), ("client_port", "ClientPort"), ("time", "StartUTC"), ("method", "RequestMethod"),
        ("uri", "RequestPath"), ("protocol", "RequestProtocol"), ("host", "RequestHost"),
        ("response", "DownstreamStatus"), ("size", "DownstreamContentSize"), ("referer", "request_Referer"),
        ("user_agent", "request_User-Agent"), ("duration", "Duration"), ("origin_status", "OriginStatus"),
        ("origin_size", "OriginContentSize"), ("origin_duration", "OriginDuration"), ("router", "RouterName"),
        ("service", "ServiceName"), ("service_url", "ServiceURL"), ("entry_point", "entryPointName"),
        ("request_count", "RequestCount"), ("retry_attempts", "RetryAttempts"), ("start_local", "StartLocal"),
    ),
    "nginx_json": (
        ("time", "time_local"), ("ip", "remote_addr"), ("user", "remote_user"), ("request", "request"),
        ("response", "status"), ("size", "body_bytes_sent"), ("request_time", "request_time"),
        ("referer", "http_referrer"), ("user_agent", "http_user_agent"),
    ),
}
#: the keys by which ``--format auto`` knows each preset's lines (all of them at the object's top level)
SIGNATURES = {
    "caddy": ("request", "status", "size", "ts"),
    "traefik": ("ClientHost", "RequestMethod", "DownstreamStatus"),
    "nginx_json": ("time_local", "remote_addr", "request", "status"),
}


@dataclass(frozen=True)
class JsonField:
    """A field of a JSON format: a key path, or (``how``) derived from earlier fields (``sources``: their
    indexes): ``r`` request, ``p`` path, ``q`` query, ``m`` method, ``u`` uri, ``v`` protocol."""

    name: str
    path: tuple[str, ...] = ()
    how: str = ""
    sources: tuple[int, ...] = ()


def _derived(mapped: dict[str, tuple]) -> list[tuple[str, str, tuple[str, ...]]]:
    """The fields derived from the mapped ones: (name, how, source names), in an order where sources come
    first."""
    out, have = [], set(mapped)
    if "request" in have:
        for name, how in (("method", "m"), ("uri", "u"), ("protocol", "v")):
            if name not in have:
                out.append((name, how, ("request",)))
                have.add(name)
    elif {"method", "uri"} <= have:
        out.append(("request", "r", ("method", "uri", "protocol")))
        have.add("request")
    if "uri" in have:
        for name, how in (("path", "p"), ("query", "q")):
            if name not in have:
                out.append((name, how, ("uri",)))
                have.add(name)
    return out


def _split_path(path: str, item: str) -> tuple[str, ...]:
    """``a.b\\.c`` -> ("a", "b.c"): keys split at dots, a backslash escaping the next character."""
    segs, cur, i = [], [], 0
    while i < len(path):
        c = path[i]
        if c == "\\" and i + 1 < len(path):
            cur.append(path[i + 1])
            i += 2
            continue
        if c == ".":
            segs.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    segs.append("".join(cur))
    if any(s == "" for s in segs):
        raise _error(f"json mapping item {item!r} has an empty key in its path (a '.' doubled or at an end)")
    if len(segs) > MAX_SEGS:
        raise _error(f"json mapping item {item!r} has a path of {len(segs)} keys (at most {MAX_SEGS})")
    return tuple(segs)


def _error(msg: str) -> FormatError:
    return FormatError(msg)


def _split_items(text: str) -> list[str]:
    """The mapping's items, split at commas not escaped by a backslash (escapes kept for ``_split_path``)."""
    items, cur, i = [], [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            cur.append(text[i:i + 2])
            i += 2
            continue
        if text[i] == ",":
            items.append("".join(cur))
            cur = []
        else:
            cur.append(text[i])
        i += 1
    items.append("".join(cur))
    return items


def parse_mapping(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``NAME=KEY.PATH,NAME=KEY.PATH,...`` (after ``json:``) -> ((name, path), ...). A key holding ``.``,
    ``,`` or ``\\`` writes it after a backslash. Raises ``FormatError`` with one line naming the bad item."""
    if not text.strip():
        raise _error("--format json: maps no field: write json:NAME=KEY.PATH,... (e.g. json:ip=remote_ip,"
                     "path=request.uri)")
    pairs, seen = [], {}
    for item in _split_items(text):
        name, eq, path = item.partition("=")
        name = name.strip()
        if not eq:
            raise _error(f"json mapping item {item!r} has no '=': write NAME=KEY.PATH")
        if FIELD_NAME.fullmatch(name) is None:
            raise _error(f"json mapping item {item!r} gives the field name {name!r}: a field name is "
                         f"{FIELD_NAME_RULE}")
        if not path:
            raise _error(f"json mapping item {item!r} has no key path after '='")
        alike = seen.get(name.lower())
        if alike is not None:
            raise _error(f"json mapping item {item!r}: the field {name!r} is mapped twice" if alike == name else
                         f"json mapping item {item!r}: the field name {name!r} differs only in case from "
                         f"{alike!r} (Spark, Hive and DuckDB take them for one)")
        seen[name.lower()] = name
        pairs.append((name, _split_path(path, item)))
    return tuple(pairs)


def build(name: str, text: str, pairs) -> "JsonFormat":
    """The JSON format of mapped (name, path) pairs, with its derived fields."""
    mapped = dict(pairs)
    parts = [mapped[n] for n in ("method", "uri", "protocol") if n in mapped]
    if len(set(parts)) < len(parts):
        raise _error(f"format {text!r} maps two of method, uri and protocol to one key: each is its own key")
    fields = [JsonField(n, p) for n, p in pairs]
    for dname, how, srcs in _derived(mapped):
        index = {f.name: i for i, f in enumerate(fields)}
        fields.append(JsonField(dname, (), how, tuple(index.get(s, -1) for s in srcs)))
    fields = [f if -1 not in f.sources else JsonField(f.name, f.path, f.how, _with_empty(f, fields))
              for f in fields]
    if len(fields) > MAX_FIELDS:
        raise _error(f"format {text!r} has {len(fields)} fields with the derived ones (at most {MAX_FIELDS})")
    return JsonFormat(name, text, "json", tuple(fields), tuple(f.name for f in fields))


def _with_empty(f: JsonField, fields: list) -> tuple[int, ...]:
    """A request made without a protocol field: its third source is the method's, never used as a protocol
    (the kernel needs three indexes; ``_request`` skips a protocol whose index repeats the method's)."""
    return tuple(s if s >= 0 else f.sources[0] for s in f.sources)


def compile_json(spec: str) -> "JsonFormat":
    """A JSON preset's name or ``json:MAPPING``."""
    if spec in JSON_PRESETS:
        return build(spec, spec, tuple((n, tuple(p.split("."))) for n, p in JSON_PRESETS[spec]))
    return build("json", spec, parse_mapping(spec[len("json:"):]))


# --- the reference reader ----------------------------------------------------------------------------------

class NotJson(Exception):
    """Why a line is not read as a JSON object (for a malformed-line sample)."""


def _refuse(name: str):
    raise ValueError(f"{name} is not JSON")


def _value(v) -> str:
    if isinstance(v, str):
        return v
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, list):
        return _value(v[0]) if v else ""
    return ""        # null, an object


def _load(text: str) -> dict:
    try:
        obj = json.loads(text, parse_int=str, parse_float=str, parse_constant=_refuse)
    except json.JSONDecodeError as exc:
        raise NotJson(f"not JSON at byte {len(text[:exc.pos].encode('utf-8', 'surrogatepass'))}: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:
        raise NotJson(f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise NotJson("not a JSON object (a JSON value of another kind)")
    return obj


def _derive(how: str, src: list[str]) -> str:
    a = src[0]
    if how == "r":
        return "" if not a or not src[1] else " ".join(x for x in (a, src[1], src[2]) if x)
    if how in "pq":
        path, q, query = a.partition("?")
        return path if how == "p" else query
    if " " not in a:
        return ""
    first, last = a.index(" "), a.rindex(" ")
    if how == "m":
        return a[:first]
    if how == "u":
        return a[first + 1:last] if last > first else a[first + 1:]
    return a[last + 1:] if last > first else ""


def read_fields(fields: tuple[JsonField, ...], text: str) -> list[str]:
    """The values of ``fields`` in one decoded line; ``NotJson`` when the line is not a JSON object or a
    value is not UTF-8 (a lone surrogate)."""
    obj = _load(text)
    vals: list[str] = []
    for f in fields:
        if f.how:
            src = [vals[i] for i in f.sources]
            if f.how == "r" and f.sources[2] == f.sources[0]:
                src[2] = ""
            vals.append(_derive(f.how, src))
            continue
        v = obj
        for seg in f.path:
            v = v.get(seg, None) if isinstance(v, dict) else None
        s = _value(v)
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            raise NotJson(f"field {f.name!r}: its string holds a lone surrogate (\\ud800-\\udfff), which is not "
                          "UTF-8") from None
        vals.append(s)
    return vals


def native_program(fields: tuple[JsonField, ...]) -> tuple:
    """The JSON program as the kernel takes it (see _json.h)."""
    prog = [(T_JSON, b"", 0)]
    for f in fields:
        if f.how:
            prog.append((T_JDERIVE, bytes(f.sources), ord(f.how)))
        else:
            prog.append((T_JKEY, b"".join(s.encode("utf-8") + b"\0" for s in f.path), 0))
    return tuple(prog)


def looks_like(preset: str, raw: bytes) -> bool:
    """Whether a line is a JSON object with the keys of ``preset``'s signature (for ``--format auto``)."""
    if not raw.lstrip().startswith(b"{"):
        return False
    try:
        obj = _load(raw.rstrip(b"\r").decode("utf-8"))
    except (NotJson, UnicodeDecodeError):
        return False
    return all(k in obj for k in SIGNATURES[preset])



@dataclass(frozen=True)
class JsonFormat(LogFormat):
    """A JSON-lines format: ``tokens`` are its ``JsonField`` s (see the module docstring)."""

    def describe(self) -> str:
        return f"{self.name} format (JSON lines)" if self.name in JSON_PRESETS else f"json format {self.text!r}"

    def regex(self) -> str:
        raise FormatError(f"the {self.describe()} is read by logetl's kernel only: Spark's built-in regular "
                          "expressions cannot read JSON (let the executors run the kernel: --conf "
                          "logetl.parse=native)")

    def scan(self, b: bytes, starts: list | None = None):
        """The fields (bytes) of one line without its CR, or a ``Mismatch`` saying why it is not read."""
        try:
            vals = read_fields(self.tokens, b.decode("utf-8"))
        except NotJson as exc:
            return Mismatch(0, None, str(exc))
        if starts is not None:
            starts += [0] * len(vals)
        return [v.encode("utf-8") for v in vals]

    def parse_line(self, raw: bytes) -> tuple[str | None, ...]:
        _, text = contract.line_text(raw)
        try:
            vals = read_fields(self.tokens, text)
        except NotJson:
            raise contract.Malformed(contract.NO_MATCH) from None
        if any("\t" in v or "\r" in v or "\n" in v for v in vals):
            raise contract.Malformed(contract.TAB_OR_CR)
        return tuple(vals)

    def why(self, raw: bytes) -> str | None:
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            vals = read_fields(self.tokens, bytes(raw).decode("utf-8"))
        except NotJson as exc:
            return str(exc)
        except UnicodeDecodeError:
            return None
        for name, v in zip(self.fields, vals):
            for c, label in (("\t", "a TAB"), ("\r", "a CR"), ("\n", "an LF")):
                if c in v:
                    return f"field {name!r} holds {label} once decoded"
        return None

    def native_program(self) -> tuple:
        return native_program(self.tokens)
