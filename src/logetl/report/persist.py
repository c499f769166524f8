"""``logetl report --incremental``: the report's aggregates kept beside it in ``DIR/.report-state``, so
that a run reads only the lines that are new since the last one and writes the same report as a run over
every line.

The state is the outputs of one flow (``state_flow``) run with ``--incremental`` (``logetl.incremental``,
``PER_RUN``): each run adds, as new part files, the aggregates of its new lines only, and the outputs'
``_INCREMENTAL`` records the input files' offsets and the runs' line counters (``totals``), published with
the parts in one step: every line is counted exactly once, whatever step a killed run stopped at. The
driver then merges the parts (``merge``) into the rows the panels' flow (``panels.panels_flow``) would have
written over every line, and ``build.assemble`` makes the report of them.

What is kept is mergeable: distinct visitors are not added up but kept as sets.

- ``visits``: one row per visitor (client, day, user agent, and the visitor's 64-bit key) with its hits,
  bytes and ``counted`` requests (a status outside 400-499). The totals, visitors per day, hosts and user
  agents (hence operating systems, browsers, crawlers and the humans/crawlers split) are groupings of it.
- one table per record-keyed panel (``requests``, ``not_found``, ``visit_time``, ``status_codes``,
  ``referring_sites``): one row per (key, visitor) with hits, bytes and ``counted``; a key's visitors are
  its distinct visitors with ``counted`` above 0.

Each run adds at most one row per visitor and per (key, visitor) seen in its new lines: the state grows
with the distinct visitors and keys of each run, not with its lines. ``--who`` and ``--geoip`` are applied
when the report is made from the state (every side and every host is kept), so they may change from run
to run; the log format, ``--where``, ``--from`` and ``--until`` decide which lines are counted, and a run
given other ones than the state's is refused, naming the option, unless ``--rebuild`` starts the state
afresh.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import logetl.api as L
from logetl.report import panels

STATE = ".report-state"
OPTIONS = "options.json"
#: the record-keyed panels: {output: (key field, the report's row's key)}
KEYED = {"requests": "target", "not_found": "target", "visit_time": "hour", "status_codes": "status",
         "referring_sites": "site"}
#: the options whose value decides which lines the state counts: {option: what the state records}
MEANING = ("--format", "--where", "--from", "--until")


def _per_visitor(records, key: str, name: str):
    return records.group_by(key, "visitor", name=name).agg(
        hits=L.count(), bytes=L.sum(L.col("bytes")), counted=L.count(where=L.col("counted")))


def state_flow(fmt, **filters) -> L.Flow:
    """The flow whose outputs are the state's tables (see the module), over the records ``panels.base``
    keeps with ``filters`` (``where``, ``date_from``, ``date_until``; never an agents' side)."""
    records = panels.base(fmt, **filters)
    fields = L.read(fmt).fields
    sinks = [
        records.group_by("client", "day", "agent", "visitor", name="per_visitor").agg(
            hits=L.count(), bytes=L.sum(L.col("bytes")), counted=L.count(where=L.col("counted")))
        .write("visits", format="jsonl"),
        _per_visitor(records, "target", "per_request").write("requests", format="jsonl"),
        _per_visitor(records.filter(L.col("status") == "404", name="not_found"), "target", "per_not_found")
        .write("not_found", format="jsonl"),
        _per_visitor(records, "hour", "per_hour").write("visit_time", format="jsonl"),
        _per_visitor(records, "status", "per_status").write("status_codes", format="jsonl"),
    ]
    if "referer" in fields:
        sinks.append(_per_visitor(records.derive(name="referring_site", site=L.url_host(L.col("referer")))
                                  .filter(L.col("site").is_not_null(), name="with_referer"), "site", "per_site")
                     .write("referring_sites", format="jsonl"))
    return L.Flow("report_state", sinks, "the traffic report's mergeable aggregates")


def options_of(fmt, where: str | None, date_from: str | None, date_until: str | None) -> dict:
    """What the state records of the options that decide which lines it counts."""
    return {"--format": fmt.name, "--where": where, "--from": date_from, "--until": date_until}


def check_options(recorded: dict | None, given: dict, state_dir: str) -> None:
    """Refuses, naming the first option that differs, options other than those the state was made with."""
    from logetl.report.build import ReportError

    for option in MEANING:
        if recorded is not None and recorded.get(option) != given[option]:
            was, now = recorded.get(option), given[option]
            raise ReportError(f"{option}: the report's state in {state_dir} was made with {_shown(was)}, this "
                              f"run gives {_shown(now)}: give the same, or --rebuild to read every line again")


def _shown(value: str | None) -> str:
    return "none" if value is None else repr(value)


def _sum(into: dict, key, row: dict) -> None:
    s = into.get(key)
    if s is None:
        into[key] = [row["hits"], row["bytes"] or 0, row["counted"]]
    else:
        s[0] += row["hits"]
        s[1] += row["bytes"] or 0
        s[2] += row["counted"]


@dataclass
class Merged:
    """The state's tables, each run's parts added up: visits {(client, day, agent, visitor): [hits, bytes,
    counted]} and, per record-keyed panel, {(key, visitor): [hits, bytes, counted]}."""

    visits: dict = field(default_factory=dict)
    keyed: dict = field(default_factory=dict)

    @classmethod
    def of(cls, tables: dict[str, list[dict]]) -> Merged:
        merged = cls()
        for r in tables["visits"]:
            _sum(merged.visits, (r["client"], r["day"], r["agent"], r["visitor"]), r)
        for tap, key in KEYED.items():
            if tap in tables:
                into = merged.keyed.setdefault(tap, {})
                for r in tables[tap]:
                    _sum(into, (r[key], r["visitor"]), r)
        return merged


def _rolled(rows) -> dict:
    """Hits, visitors (those with a counted request) and bytes of per-visitor sums ``[hits, bytes, counted]``
    (as ``panels._rolled``)."""
    return {"hits": sum(r[0] for r in rows), "visitors": sum(1 for r in rows if r[2] > 0),
            "bytes": sum(r[1] for r in rows)}


def _grouped(items, label: str) -> list[dict]:
    """Rows ``{label, hits, visitors, bytes}`` of ``(key, [hits, bytes, counted])`` items grouped by key."""
    groups: dict = {}
    for key, sums in items:
        groups.setdefault(key, []).append(sums)
    return [{label: k, **_rolled(v)} for k, v in groups.items()]


def rows_of(merged: Merged, fields: tuple[str, ...], side=None) -> tuple[dict[str, list[dict]], list[dict]]:
    """The rows the panels' flow writes over every line (its outputs, ``panels.panels_flow``), and the
    per-agent rows of every side (``panels.agents_flow``), from the merged state. ``side``: None (every
    record), or a predicate on a user agent that keeps a visitor's records (``--who``)."""
    visits = merged.visits
    agents = _grouped(((k[2], v) for k, v in visits.items()), "agent")
    kept = {k: v for k, v in visits.items() if side is None or side(k[2])}
    visitors = {k[3] for k in kept}
    rows = {"agents": _grouped(((k[2], v) for k, v in kept.items()), "agent"),
            "visitors": _grouped(((k[1], v) for k, v in kept.items()), "day"),
            "general": []}
    if kept:
        days = [k[1] for k in kept]
        rows["general"] = [{**_rolled(list(kept.values())), "start": min(days), "end": max(days)}]
    if "ip" in fields:
        rows["hosts"] = _grouped(((k[0], v) for k, v in kept.items()), "client")
    for tap, label in KEYED.items():
        if tap in merged.keyed:
            rows[tap] = _grouped(((k[0], v) for k, v in merged.keyed[tap].items()
                                  if side is None or k[1] in visitors), label)
    return rows, agents


@dataclass
class Counted:
    """The line counters of every run the state holds, as ``build.assemble`` reads a flow's run."""

    lines_read: int
    malformed: dict
    dropped: dict
    inputs: list[dict]
    apart: int = 0      # header lines and non-HTTP lines: neither requests nor failed ones

    def left_out(self) -> dict[str, int]:
        return dict(self.dropped)


def counters(totals: dict | None, inputs: list[dict], excluded: int | None) -> Counted:
    """The runs' ``totals`` (``incremental.run_totals``), and ``excluded`` records left out by ``--who``
    (None: every side kept)."""
    from logetl.report.build import ReportError

    if totals is None:
        raise ReportError("the report's state holds no line counters: --rebuild reads every line again")
    dropped = dict(totals["left_out"])
    if excluded is not None:
        dropped["who"] = excluded
    return Counted(totals["lines_read"], {"malformed": totals["malformed"]}, dropped, inputs,
                   totals.get("apart", 0))


def read_options(state_dir: str) -> dict | None:
    path = os.path.join(state_dir, OPTIONS)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_options(state_dir: str, options: dict) -> None:
    """Whole or not at all (written aside, then renamed)."""
    os.makedirs(state_dir, exist_ok=True)
    from logetl.io.fs import LOCAL

    LOCAL.write_text_atomic(os.path.join(state_dir, OPTIONS), json.dumps(options, indent=1), encoding="utf-8")


def totals_of(output_dir: str) -> dict | None:
    """The runs' line counters an output's state holds (``incremental``'s ``_INCREMENTAL``)."""
    from logetl.io.outputs import INCREMENTAL

    with open(os.path.join(output_dir, INCREMENTAL), encoding="utf-8") as f:
        return json.load(f).get("totals")
