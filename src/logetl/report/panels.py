"""The report's panels as one logetl flow: the parsed log's records, with the fields every panel reads
(``base``), go to one SQL step (``panels_query``) whose rows, one per panel and key, are the flow's one
output (JSON Lines), so that the local engine (DuckDB) and Spark compute them with the same description and
the same answers, within their memory. ``split`` gives each panel its rows; ``build.assemble`` turns them
into the report's dict.

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


#: the panels of the flow's one output, each a grouping set of the query: {panel: (the key field of the
#: panel's rows, the SQL of that key)}; ``general`` is the grouping of every record
KEYS = {"visitors": ("day", "day"), "requests": ("target", "target"), "not_found": ("target", "target"),
        "hosts": ("client", "client"), "visit_time": ("hour", "hour"), "referring_sites": ("site", "site"),
        "status_codes": ("status", "status"), "agents": ("agent", "agent")}
#: the record fields the panels' query reads
COLUMNS = ("day", "hour", "bytes", "agent", "status", "target", "client", "visitor", "counted")


#: the panels whose key is one of the visitor's own (its client, day and agent): read from ``visits``
OF_VISITS = {"general": "'all'", "visitors": "day", "hosts": "client", "agents": "agent"}
#: the records grouped per visitor once, for the panels of ``OF_VISITS``
VISITS = ("visits AS (SELECT visitor, day, client, agent, count(*) AS hits, sum(bytes) AS bytes, "
          "max(CASE WHEN counted THEN 1 ELSE 0 END) AS counted FROM input GROUP BY visitor, day, client, agent)")


def _panel_select(name: str) -> str:
    """One panel's rows: the records grouped per key and visitor (hits, bytes, and 1 when one of the
    visitor's requests counts it), then per key, a key's visitors the number of its rows with 1. A key that
    is the visitor's own (``OF_VISITS``) reads the per-visitor rows of ``visits``, grouped once for all."""
    days = "CAST(NULL AS VARCHAR) AS first_day, CAST(NULL AS VARCHAR) AS last_day"
    if name in OF_VISITS:
        per_visitor = (f"SELECT {OF_VISITS[name]} AS label, hits, bytes, counted, day AS first_day, day AS last_day "
                       "FROM visits")
        if name == "general":
            days = "min(first_day) AS first_day, max(last_day) AS last_day"
    else:
        key = "CAST(hour AS VARCHAR)" if name == "visit_time" else KEYS[name][0]
        where = {"not_found": " WHERE status = '404'", "referring_sites": " WHERE site IS NOT NULL"}.get(name, "")
        per_visitor = (f"SELECT {key} AS label, visitor, count(*) AS hits, sum(bytes) AS bytes, "
                       f"max(CASE WHEN counted THEN 1 ELSE 0 END) AS counted FROM input{where} "
                       f"GROUP BY {key}, visitor")
    return (f"SELECT '{name}' AS panel, label, sum(hits) AS hits, sum(counted) AS visitors, sum(bytes) AS bytes, "
            f"{days} FROM ({per_visitor}) AS {name}_visits GROUP BY label")


def panels_query(names) -> str:
    """The query of the panels ``names`` (of ``KEYS``, and ``general``) over the records of ``base`` (the
    table ``input``): one row per panel and key, ``panel label hits visitors bytes first_day last_day``
    (the label as text; the days those of ``general``, whose label is ``all``).

    Each panel is two plain groupings (``_panel_select``), which DuckDB (and Spark) keep within their
    memory and spill past it: the records per key and visitor, then those rows per key. Nothing holds a
    set of visitors per key, and no grouping holds the visitors' strings: a visitor is its 64-bit key
    (``base``), its day, client and agent the keys of the panels that need them. The panels keyed by the
    visitor's own client, day or agent (and ``general``) share one grouping per visitor (``visits``, a CTE
    DuckDB computes once): a visitor has one client, day and agent, so its rows per (key, visitor) are its
    rows per visitor."""
    selects = "\nUNION ALL\n".join(_panel_select(name) for name in names)
    return (f"WITH {VISITS}\n" + selects) if any(n in OF_VISITS for n in names) else selects


def _panel_names(fields: tuple[str, ...]) -> list[str]:
    names = ["general", "visitors", "requests", "not_found", "visit_time", "status_codes", "agents"]
    if "ip" in fields:
        names.append("hosts")
    if "referer" in fields:
        names.append("referring_sites")
    return names


def _records(fmt, names, **filters):
    """``base``'s records, with the referring site when a panel needs it, reduced to what the query reads."""
    records = base(fmt, **filters)
    columns = list(COLUMNS)
    if "referring_sites" in names:
        records = records.derive(name="referring_site", site=L.url_host(L.col("referer")))
        columns.append("site")
    return records.select(*columns, name="report_columns")


def panels_flow(fmt, **filters) -> L.Flow:
    """The flow of every panel the log's format allows (``base``'s filters apply to all of them): one SQL
    step (``panels_query``) whose rows, one per panel and key, are the output ``panels``."""
    names = _panel_names(L.read(fmt).fields)
    rows = _records(fmt, names, **filters).sql(panels_query(names), name="panels")
    return L.Flow("report", [rows.write("panels", format="jsonl")], "the traffic report's panels")


def split(rows: list[dict], fields: tuple[str, ...]) -> dict[str, list[dict]]:
    """The rows of the output ``panels`` of a log of ``fields``, per panel, as ``build.assemble`` reads
    them: ``{key field, hits, visitors, bytes}`` (``general``: ``{hits, visitors, bytes, start, end}``);
    a panel with no row is an empty list."""
    out: dict[str, list[dict]] = {name: [] for name in _panel_names(fields)}
    for r in rows:
        panel = r["panel"]
        sums = {"hits": r["hits"], "visitors": r["visitors"], "bytes": r["bytes"]}
        if panel == "general":
            out.setdefault(panel, []).append({**sums, "start": r["first_day"], "end": r["last_day"]})
            continue
        field = KEYS[panel][0]
        out.setdefault(panel, []).append({field: int(r["label"]) if field == "hour" else r["label"], **sums})
    return out


def agents_flow(fmt, **filters) -> L.Flow:
    """The distinct user agents of the records ``base`` keeps (before the humans/crawlers split), with
    their hits, visitors and bytes: what the classification reads first when ``--who`` picks one side."""
    rows = _records(fmt, ["agents"], **filters).sql(panels_query(["agents"]), name="agents")
    return L.Flow("report_agents", [rows.write("panels", format="jsonl")], "the report's user agents")
