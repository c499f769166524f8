"""Typed views of parsed records, for Python code that reads parsed fields. Local engine, Polars.

The parse keeps every field as the text the server wrote (``logetl.formats``); ``typed(frame)`` gives a
frame in which the fields named in ``TYPES`` have types:

- integers (``response``, ``size``, ``bytes*``, ``duration_us``, ``port``, ...): ``Int64``; ``-``, the empty
  string and anything that is not a decimal integer are null;
- seconds (``request_time``, ``duration_s`` when fractional, ``upstream_response_time``): ``Float64``,
  ``-`` null (nginx writes ``0.004``; an upstream list ``0.1, 0.2`` is null);
- ``time`` (``%t`` / ``$time_local``, ``17/May/2015:10:05:03 +0000``): a UTC timestamp
  (``Datetime("us", "UTC")``), the zone applied; unparsable is null;
- ``request`` stays, and ``method``, ``path``, ``protocol`` are added (unless the format has them): the text
  before the first space, the text after the last space when it starts with ``HTTP/`` (else null: an
  HTTP/0.9 request ``GET /``), and what lies between; a request without a space gives nulls;
- ``client`` is added when the records have ``ip``: the address ``X-Forwarded-For`` names for the request
  (``client_address``): the right-most address of ``x_forwarded_for`` + ``ip`` that is not a trusted proxy
  (``trusted``: addresses and networks, e.g. ``["10.0.0.0/8", "192.0.2.1"]``). With no trusted proxies the
  forwarded-for list is not believed and ``client`` is ``ip``.
"""
from __future__ import annotations

import ipaddress
from functools import lru_cache

INTEGER_FIELDS = ("response", "original_status", "size", "bytes", "bytes_sent", "bytes_received",
                  "bytes_transferred", "duration_us", "duration_ms", "port", "local_port", "remote_port", "pid",
                  "keepalives", "status", "body_bytes_sent", "request_length", "connection")
SECONDS_FIELDS = ("request_time", "upstream_response_time", "upstream_connect_time", "upstream_header_time")
TIME_FORMAT = "%d/%b/%Y:%H:%M:%S %z"

#: field -> type of its view (fields not named stay strings)
TYPES = {**{f: "Int64" for f in INTEGER_FIELDS}, **{f: "Float64" for f in SECONDS_FIELDS},
         "duration_s": "Int64", "time": "Datetime(us, UTC)", "method": "String", "path": "String",
         "protocol": "String", "client": "String"}


def _networks(trusted) -> tuple:
    return tuple(ipaddress.ip_network(t, strict=False) for t in (trusted or ()))


def _address(text: str):
    text = text.strip()
    if text.startswith("[") and "]" in text:          # [v6]:port
        text = text[1:text.index("]")]
    elif text.count(":") == 1:                        # v4:port
        text = text.split(":")[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def client_address(ip: str | None, forwarded_for: str | None, trusted=()) -> str | None:
    """The client of a request that reached the server from ``ip`` with header ``X-Forwarded-For``
    ``forwarded_for``: walking the chain ``forwarded_for`` entries then ``ip`` from the right, the first
    address that is not in a trusted network. A chain entirely of trusted proxies gives its left-most entry;
    an entry that is not an address stops the walk there (it cannot be checked)."""
    networks = trusted if isinstance(trusted, tuple) and all(hasattr(n, "network_address") for n in trusted) \
        else _networks(trusted)
    chain = []
    if forwarded_for and forwarded_for != "-" and networks:
        chain = [p.strip() for p in forwarded_for.split(",") if p.strip()]
    if ip is not None:
        chain.append(ip)
    if not chain:
        return None
    for entry in reversed(chain):
        addr = _address(entry)
        if addr is None or not any(addr in n for n in networks):
            return entry
    return chain[0]


def typed(frame, trusted=()):
    """``frame`` (a Polars DataFrame or LazyFrame of string fields) with the typed views described above."""
    import polars as pl

    names = frame.collect_schema().names() if hasattr(frame, "collect_schema") else frame.columns
    exprs = []
    for f in names:
        kind = TYPES.get(f)
        col = pl.col(f)
        if kind == "Int64":
            exprs.append(pl.when(col.str.contains(r"^-?[0-9]+$")).then(col.cast(pl.Int64, strict=False))
                         .otherwise(None).alias(f))
        elif kind == "Float64":
            exprs.append(pl.when(col.str.contains(r"^[0-9]+(\.[0-9]+)?$")).then(col.cast(pl.Float64, strict=False))
                         .otherwise(None).alias(f))
        elif f == "time":
            exprs.append(col.str.strptime(pl.Datetime("us", "UTC"), TIME_FORMAT, strict=False).alias(f))
    out = frame.with_columns(exprs) if exprs else frame
    if "request" in names:
        parts = pl.col("request").str.extract_groups(r"^([^ ]+) (?:(.*) (HTTP/[^ ]*)|(.*))$")
        add = {"method": parts.struct.field("1"),
               "path": pl.coalesce(parts.struct.field("2"), parts.struct.field("4")),
               "protocol": parts.struct.field("3")}
        out = out.with_columns([e.alias(k) for k, e in add.items() if k not in names])
    if "ip" in names and "client" not in names:
        networks = _networks(trusted)
        xff = "x_forwarded_for" if "x_forwarded_for" in names else None

        @lru_cache(maxsize=1 << 16)
        def one(ip, fwd):
            return client_address(ip, fwd, networks)

        if xff is None or not networks:
            out = out.with_columns(pl.col("ip").alias("client"))
        else:
            out = out.with_columns(pl.struct("ip", xff).map_elements(
                lambda r: one(r["ip"], r[xff]), return_dtype=pl.String).alias("client"))
    return out
