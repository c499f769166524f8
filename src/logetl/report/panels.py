"""The report's panels as one logetl flow: every panel is a ``group_by`` of the parsed log written to an
output of its own (JSON Lines), so that the local engine and Spark compute them with the same description
and the same answers. ``assemble`` turns those outputs into the report's dict.

Definitions (GoAccess's, where it has them; the guide ``docs/guides/report.md`` says the same):

- a **request** (hit) is a parsed record whose time is valid; a malformed line, or a record whose time is
  not a valid ``dd/Mon/yyyy:HH:MM:SS ±zzzz``, is a *failed request*;
- a record's **day** and **hour** are read as written in the log (no time-zone conversion); for the
  presets whose vendors write another layout (``UTC_TIMES``: ALB, ELB, CloudFront, W3C, Caddy, Traefik,
  HAProxy), those of its instant in UTC, the zone they write (HAProxy's clock as written);
- its **bytes** are its size, a size of ``-`` counting 0;
- a **visitor** is one client (``ip``), day and user agent (as written; none when the format has no user
  agent). As GoAccess counts them by default, requests answered with a 4xx status count no visitor (they
  are hits and bytes all the same): a panel's ``visitors`` is the number of distinct visitors among its
  records with a status outside 400-499;
- ``requests`` and ``not_found`` are keyed by the request's target as written (``GET /a?b=1 HTTP/1.1`` is
  ``/a?b=1``; the whole request field when it is not a ``METHOD TARGET PROTOCOL`` line; the path and its
  query when the format writes them apart), ``not_found``
  being the requests answered 404;
- ``referring_sites`` by the host of the referer URL (requests without one are left out of that panel).
"""
from __future__ import annotations

import logetl.api as L

#: the panels computed by the flow, each an output of the flow: {output: (label field, label expression)}
KEYED = ("visitors", "requests", "not_found", "hosts", "visit_time", "referring_sites", "status_codes",
         "agents")
#: the field of the log each panel needs (a format without it has no such panel)
NEEDS = {"referring_sites": "referer"}


#: the presets whose time is not an access-log time ``dd/Mon/yyyy:HH:MM:SS ±zzzz``: their days and hours are
#: those of ``L.timestamp``'s instant, in UTC, the zone these vendors write (HAProxy writes none: its clock
#: as written). CloudFront and W3C write the date and the time in two columns.
UTC_TIMES = {"alb": ("time",), "elb": ("time",), "haproxy": ("time",), "caddy": ("time",),
             "traefik": ("time",), "cloudfront": ("date", "time"), "w3c": ("date", "time_of_day")}
#: the fields of the log the panels read; the others are left out before the panels' own fields are made,
#: so that a format's field of the same name (ALB's ``target``) cannot clash with them
READ = ("ip", "time", "date", "time_of_day", "request", "path", "query", "response", "size", "referer",
        "user_agent")


def _day_and_hour(fmt) -> tuple:
    """The record's day (``YYYY-MM-DD``) and hour of day (0-23): of the access-log time as written, or of the
    instant of a vendor's time (``UTC_TIMES``); for a JSON mapping, whichever of the two reads its time."""
    as_written = (L.day(L.col("time")), L.hour_of_day(L.col("time")))
    columns = UTC_TIMES.get(fmt.name, ("time",))
    instant = L.timestamp(*(L.col(c) for c in columns))
    utc = (instant.to_string().substring(1, 10), L.hour_of_day(instant))
    if fmt.name in UTC_TIMES:
        return utc
    if fmt.name == "json":         # a mapping: its time may be written in any of timestamp's layouts
        return L.coalesce(as_written[0], utc[0]), L.coalesce(as_written[1], utc[1])
    return as_written


def _target(fields: tuple[str, ...]):
    """The request's target as written: of the request line (``GET /a?b=1 HTTP/1.1`` is ``/a?b=1``; the
    whole field when it is not such a line), or the path and its query (``/a?b=1``) when the format writes
    them apart (CloudFront, W3C: no request line, or one without the query)."""
    if "path" in fields:
        path = L.coalesce(L.col("path"), L.lit(""))
        if "query" not in fields:
            return path
        query = L.col("query")
        return (L.when(query.is_null() | (query == "") | (query == "-")).then(path)
                .otherwise(L.concat(path, L.lit("?"), query)))
    if "request" in fields:
        request = L.col("request")
        return L.when(L.method(request).is_not_null()).then(request.split_part(" ", 2)).otherwise(request)
    return L.lit("-")


def _expressions(fmt, fields: tuple[str, ...]) -> dict:
    """The derived fields every panel reads: day, hour, bytes, the visitor key, the request target."""
    agent = L.coalesce(L.col("user_agent"), L.lit("")) if "user_agent" in fields else L.lit("")
    size = L.coalesce(L.col("size").to_int(), L.lit(0)) if "size" in fields else L.lit(0)
    status = L.col("response") if "response" in fields else L.lit("-")
    day, hour = _day_and_hour(fmt)
    return {
        "day": day,
        "hour": hour,
        "bytes": size,
        "agent": agent,
        "status": status,
        "target": _target(fields),
    }


def base(fmt, where=None, date_from: str | None = None, date_until: str | None = None, agents=None,
         keep_agents: bool = True):
    """The records every panel counts: parsed with ``fmt``, their time valid, then ``where`` (an
    expression on the log's fields), ``date_from``/``date_until`` (``YYYY-MM-DD``, inclusive) and, when
    ``agents`` is a set of user agents, only the records whose agent is (``keep_agents``) or is not in it.
    Returns the pipe, with fields ``day hour bytes agent status target client visitor counted`` added
    (``visitor``: a 64-bit hash of client, day and agent, ``L.hash64``)."""
    records = L.read(fmt)
    fields = records.fields
    if where is not None:
        records = records.filter(where, name="where")
    if set(fields) - set(READ):
        fields = tuple(f for f in fields if f in READ)
        records = records.select(*fields, name="report_read")
    derived = _expressions(fmt, fields)
    records = records.derive(name="report_fields", **derived)
    records = records.filter(L.col("day").is_not_null(), name="valid_time")
    if date_from is not None:
        records = records.filter(L.col("day") >= L.lit(date_from), name="from")
    if date_until is not None:
        records = records.filter(L.col("day") <= L.lit(date_until), name="until")
    if agents is not None:
        member = L.col("agent").is_in(sorted(agents)) if agents else L.lit(False)
        records = records.filter(member if keep_agents else ~member,
                                 name="crawlers" if keep_agents else "humans")
    client = L.coalesce(L.col("ip"), L.lit("-")) if "ip" in fields else L.lit("-")
    records = records.derive(name="client", client=client)
    return records.derive(
        name="visitor_key",
        visitor=L.hash64(L.col("client"), L.col("day"), L.col("agent")),
        counted=~L.col("status").starts_with("4"))


def _measures() -> dict:
    """Hits, distinct visitors and bytes of records (a record-keyed panel)."""
    return {"hits": L.count(), "visitors": L.count_distinct(L.col("visitor"), where=L.col("counted")),
            "bytes": L.sum(L.col("bytes"))}


def _rolled() -> dict:
    """Hits, visitors and bytes of per-visitor rows (``visits``): a visitor is one row, counted when one of
    its requests is."""
    return {"hits": L.sum(L.col("hits")), "visitors": L.count(where=L.col("counted") > 0),
            "bytes": L.sum(L.col("bytes"))}


def visits(records):
    """One row per visitor (client, day, agent) with its hits, bytes and ``counted`` requests (those with
    a status outside 400-499): every panel keyed by one of the visitor's parts (days, clients, agents, the
    totals) is a grouping of these rows, far fewer than the records."""
    return records.group_by("client", "day", "agent", name="per_visitor").agg(
        hits=L.count(), bytes=L.sum(L.col("bytes")), counted=L.count(where=L.col("counted")))


def panels_flow(fmt, **filters) -> L.Flow:
    """The flow of every panel the log's format allows (``base``'s filters apply to all of them)."""
    records = base(fmt, **filters)
    fields = L.read(fmt).fields
    per_visitor = visits(records)
    sinks = [
        per_visitor.derive(name="everything", everything=L.lit("all")).group_by("everything", name="general")
        .agg(**_rolled(), start=L.min(L.col("day")), end=L.max(L.col("day"))).write("general", format="jsonl"),
        per_visitor.group_by("day", name="per_day").agg(**_rolled()).write("visitors", format="jsonl"),
        records.group_by("target", name="per_request").agg(**_measures()).write("requests", format="jsonl"),
        records.filter(L.col("status") == "404", name="not_found").group_by("target", name="per_not_found")
        .agg(**_measures()).write("not_found", format="jsonl"),
        records.group_by("hour", name="per_hour").agg(**_measures()).write("visit_time", format="jsonl"),
        records.group_by("status", name="per_status").agg(**_measures()).write("status_codes", format="jsonl"),
        per_visitor.group_by("agent", name="per_agent").agg(**_rolled()).write("agents", format="jsonl"),
    ]
    if "ip" in fields:
        sinks.append(per_visitor.group_by("client", name="per_client").agg(**_rolled())
                     .write("hosts", format="jsonl"))
    if "referer" in fields:
        sinks.append(records.derive(name="referring_site", site=L.url_host(L.col("referer")))
                     .filter(L.col("site").is_not_null(), name="with_referer")
                     .group_by("site", name="per_site").agg(**_measures()).write("referring_sites", format="jsonl"))
    return L.Flow("report", sinks, "the traffic report's panels")


def agents_flow(fmt, **filters) -> L.Flow:
    """The distinct user agents of the records ``base`` keeps (before the humans/crawlers split), with
    their hits, visitors and bytes: what the classification reads first when ``--who`` picks one side."""
    records = base(fmt, **filters)
    return L.Flow("report_agents", [visits(records).group_by("agent", name="per_agent").agg(**_rolled())
                                    .write("agents", format="jsonl")], "the report's user agents")
