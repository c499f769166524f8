"""``logetl report``: runs the panels' flow (``panels``) on either engine, classifies the user agents it
found (``classify``) and writes ``DIR/report.json`` (and ``DIR/index.html`` when the page renderer is
installed). The flow's outputs are JSON Lines files in a working directory inside ``DIR``, removed once
the report is written. Everything in ``DIR`` is read and written through the engine's file system
(``Engine.filesystem``): with Spark, ``DIR`` may be any place its Hadoop file system reaches (``file://``,
``hdfs://``, ...), and the panels' rows are read back from there.

With ``who`` ``humans`` or ``crawlers``, a first flow finds the distinct user agents of the records the
filters keep, the driver classifies them, and the panels' flow keeps the records whose agent is (or is
not) one of the crawlers': two passes over the log. With ``all`` (the default), one pass computes every
panel and the per-agent rows the shares come from.
"""
from __future__ import annotations

import ast
import json
import os

from logetl import formats
from logetl.errors import UsageError
from logetl.report import geoip as geo
from logetl.report import html
from logetl.report import panels, persist
from logetl.report.classify import Classifier

WHO = ("all", "humans", "crawlers")
REPORT = "report.json"
PAGE = "index.html"
WORK = ".report-panels"


class ReportError(UsageError):
    """A report option that cannot be used; the message names it."""


def parse_where(text: str, fmt: formats.LogFormat):
    """A ``--where`` flow expression, in Python syntax over the log format's fields and ``logetl.api``'s
    functions: ``response == "404"``, ``path(request).starts_with("/blog/") & (size != "-")``. One
    ``ReportError`` line for text that is not such an expression."""
    import logetl.api as L
    from logetl.assembly import AssemblyError
    from logetl.expressions import Expr, ExpressionError

    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ReportError(f"--where: not an expression: {text!r} ({exc.msg})") from None
    for node in ast.walk(tree):     # names, calls, operators and literals only: no attribute of a non-name
        if isinstance(node, ast.Name) and node.id.startswith("_"):
            raise ReportError(f"--where: unknown name {node.id!r} in {text!r}")
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise ReportError(f"--where: unknown name {node.attr!r} in {text!r}")
    names = {n: getattr(L, n) for n in L._public_names()}
    names.update({f: L.col(f) for f in fmt.fields})
    try:
        value = eval(compile(tree, "--where", "eval"), {"__builtins__": {}}, names)  # noqa: S307 - the user's own expression, as a flow file is
    except NameError as exc:
        raise ReportError(f"--where: {exc} (the fields are {', '.join(fmt.fields)})") from None
    except Exception as exc:  # noqa: BLE001 - an expression error of any kind is one line
        raise ReportError(f"--where: {exc}") from None
    if not isinstance(value, Expr):
        raise ReportError(f"--where: {text!r} is not a condition on the log's fields")
    try:        # its fields and types, checked now: a mistake is a usage error, before any data is read
        L.read(fmt).filter(value, name="where")
    except (AssemblyError, ExpressionError) as exc:
        why = str(exc).removeprefix("filter 'where': ")
        raise ReportError(f"--where: {why}") from None
    return value


def check_date(option: str, value: str | None) -> str | None:
    """``YYYY-MM-DD``, a real date, or one ``ReportError`` line."""
    import datetime

    if value is None:
        return None
    try:
        if len(value) != 10:
            raise ValueError
        datetime.date.fromisoformat(value)
    except ValueError:
        raise ReportError(f"{option}: {value!r} is not a date YYYY-MM-DD") from None
    return value


def read_rows(directory: str, fs=None) -> list[dict]:
    """The records of a JSON Lines output, its part files in name order, read through ``fs`` (the engine's
    file system; the local disk when None)."""
    from logetl.io.fs import LOCAL

    fs = fs or LOCAL
    rows = []
    for name in sorted(n for n in fs.listdir(directory) if n.startswith("part-")):
        path = fs.join(directory, name)
        if fs is LOCAL:
            with open(path, encoding="utf-8") as f:
                rows.extend(json.loads(line) for line in f if line.strip())
        else:
            text = (fs.read_bytes(path) or b"").decode("utf-8")
            rows.extend(json.loads(line) for line in text.splitlines() if line.strip())
    return rows


def _run(flow, input_path: str, work: str, run_flow, options: dict, fs):
    outputs = {s.tap: fs.join(work, s.tap) for s in flow.sinks}
    run = run_flow(flow, input_path, outputs, overwrite=True, work_dir=fs.join(work, ".work"),
                   output_format="jsonl", **options)
    return run, {tap: read_rows(path, fs) for tap, path in outputs.items()}


def _engine(options: dict):
    """The engine's runner for the report's file system (None for the local engine: the local disk). It is
    made before the flow runs, so that a Spark session it starts serves the report's runs and is stopped
    once (``shutdown``) when the report is written."""
    from logetl.engines import get_engine
    from logetl.io.fs import LOCAL
    from logetl.job import engine_options_for

    engine = options.get("engine", "local")
    if engine == "local":
        return None, LOCAL
    runner = get_engine(engine)(**engine_options_for(engine, options.get("engine_options")))
    return runner, runner.filesystem()


def build(input_path: str, out_dir: str, fmt: formats.LogFormat, *, who: str = "all", where: str | None = None,
          date_from: str | None = None, date_until: str | None = None, geoip: str | None = None,
          overwrite: bool = False, run_options: dict | None = None, incremental: bool = False,
          rebuild: bool = False) -> dict:
    """Writes ``out_dir/report.json`` (and ``index.html`` when ``logetl.report.html`` is installed) for the
    log(s) at ``input_path``; returns the report. ``run_options``: ``job.run_flow``'s options (engine, trap,
    listener, monitor, ...). ``incremental``: read only the lines that are new since the last incremental
    report in ``out_dir``, whose aggregates its state keeps (``persist``); ``rebuild``: start that state
    afresh, reading every line."""
    from logetl.job import run_flow

    if who not in WHO:
        raise ReportError(f"--who: {who!r} is not one of {', '.join(WHO)}")
    if who != "all" and input_path == "-":
        raise ReportError(f"--who {who} reads the log twice: give it a file, directory or glob, not standard input")
    check_date("--from", date_from)
    check_date("--until", date_until)
    if geoip is not None:
        geo.check(geoip)           # a bad database is refused before the log is read
    filters = {"where": parse_where(where, fmt) if where else None, "date_from": date_from,
               "date_until": date_until}
    options = dict(run_options or {})
    if rebuild and not incremental:
        raise ReportError("--rebuild starts the state of --incremental afresh: give --incremental too")
    if incremental:
        return _incremental(input_path, out_dir, fmt, who, filters, persist.options_of(fmt, where, date_from,
                                                                                       date_until),
                            geoip, overwrite, rebuild, options)
    runner, fs = _engine(options)
    try:
        target = fs.join(out_dir, REPORT)
        if fs.exists(target) and not overwrite:
            raise ReportError(f"{target} exists: use --overwrite to replace it")
        work = fs.join(out_dir, WORK)
        report = _panels(input_path, work, fmt, who, filters, options, fs, run_flow)
        if geoip is not None:
            report.update(geo.panels(report["hosts"], geoip))
        fs.makedirs(out_dir)
        _write(fs, target, json.dumps(report, ensure_ascii=False, indent=1) + "\n")
        _write(fs, fs.join(out_dir, PAGE), html.render(report))
        fs.rmtree(work)
    finally:
        if runner is not None:
            runner.shutdown()
    return report


def _incremental(input_path: str, out_dir: str, fmt, who: str, filters: dict, meaning: dict, geoip: str | None,
                 overwrite: bool, rebuild: bool, options: dict) -> dict:
    """``--incremental``: the state flow (``persist.state_flow``) run over the new lines adds their
    aggregates to ``out_dir/.report-state``; the report is made from all of the state's, merged."""
    from logetl.incremental import PER_RUN, IncrementalError
    from logetl.job import run_flow

    if options.get("engine", "local") != "local":
        raise ReportError("--incremental runs on the local engine: it cannot go with --hdfs")
    if input_path == "-":
        raise ReportError("--incremental reads files: standard input cannot be read again")
    state_dir = os.path.join(out_dir, persist.STATE)
    target = os.path.join(out_dir, REPORT)
    problem = _not_writable(out_dir)
    if problem:
        raise ReportError(f"--incremental: {problem}")
    recorded = None if rebuild else persist.read_options(state_dir)
    if recorded is None and os.path.exists(target) and not overwrite and not rebuild \
            and not os.path.isdir(state_dir):
        raise ReportError(f"{target} exists and was not made by --incremental: use --overwrite to replace it")
    persist.check_options(recorded, meaning, state_dir)
    if recorded is None:
        persist.write_options(state_dir, meaning)
    flow = persist.state_flow(fmt, **filters)
    outputs = {s.tap: os.path.join(state_dir, s.tap) for s in flow.sinks}
    work = os.path.join(out_dir, WORK)
    try:
        run = run_flow(flow, input_path, outputs, overwrite=rebuild, work_dir=os.path.join(work, ".work"),
                       output_format="jsonl", incremental=PER_RUN, **options)
    except IncrementalError as exc:
        if "another flow" in str(exc):      # made by a logetl whose report counts otherwise
            raise ReportError(f"the report's state in {state_dir} was made by another version of the report's "
                              "definitions: --rebuild reads every line again") from None
        raise ReportError(f"{exc} (the report's state: --rebuild reads every line again)") from None
    tables = {tap: read_rows(path) for tap, path in outputs.items()}
    classifier = Classifier()
    crawler = (lambda agent: classifier.classify(agent).crawler is not None)  # noqa: E731
    side = None if who == "all" else (crawler if who == "crawlers" else (lambda agent: not crawler(agent)))
    rows, agents = persist.rows_of(persist.Merged.of(tables), _fields(fmt), side)
    excluded = None if side is None else sum(r["hits"] for r in agents) - sum(r["hits"] for r in rows["agents"])
    counted = persist.counters(persist.totals_of(outputs["visits"]), run.inputs, excluded)
    report = assemble(rows, agents, classifier, counted, who)
    if geoip is not None:
        report.update(geo.panels(report["hosts"], geoip))
    from logetl.io.fs import LOCAL

    _write(LOCAL, target, json.dumps(report, ensure_ascii=False, indent=1) + "\n")
    _write(LOCAL, os.path.join(out_dir, PAGE), html.render(report))
    if os.path.isdir(work):
        import shutil

        shutil.rmtree(work)
    return report


def _fields(fmt) -> tuple[str, ...]:
    """The fields of the records ``fmt`` parses."""
    import logetl.api as L

    return L.read(fmt).fields


def _not_writable(out_dir: str) -> str | None:
    """Why the report's directory (and its state) cannot be written, or None."""
    from logetl.io.fs import LOCAL

    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        return f"{out_dir!r} is not a directory"
    problem = LOCAL.non_directory_ancestor(os.path.join(out_dir, "x")) or LOCAL.writable_ancestor(
        os.path.join(out_dir, persist.STATE, "x"))
    return f"cannot make the report's state in {problem!r}" if problem else None


def _panels(input_path: str, work: str, fmt, who: str, filters: dict, options: dict, fs, run_flow) -> dict:
    """Runs the panels' flow (after the agents' flow when ``who`` picks a side) and assembles the report."""
    classifier = Classifier()
    fields = _fields(fmt)
    if who == "all":
        run, out = _run(panels.panels_flow(fmt, **filters), input_path, work, run_flow, options, fs)
        rows = panels.split(out["panels"], fields)
        agents = rows["agents"]
    else:
        _first, found = _run(panels.agents_flow(fmt, **filters), input_path, work, run_flow,
                            {**options, "trap": None}, fs)
        agents = panels.split(found["panels"], fields)["agents"]
        crawlers = {r["agent"] for r in agents if classifier.classify(r["agent"]).crawler is not None}
        run, out = _run(panels.panels_flow(fmt, agents=crawlers, keep_agents=who == "crawlers", **filters),
                        input_path, work, run_flow, options, fs)
        rows = panels.split(out["panels"], fields)
    return assemble(rows, agents, classifier, run, who)


def _write(fs, path: str, text: str) -> None:
    """Whole or not at all (written aside, then renamed): a reader never sees half a report."""
    from logetl.io.fs import LOCAL

    if fs is not LOCAL:
        fs.write_text_atomic(path, text)     # UTF-8
        return
    LOCAL.write_text_atomic(path, text, encoding="utf-8")


def _ranked(rows: list[dict], label: str, source: str | None = None, keys=("hits", "visitors", "bytes")):
    """Flat rows ``{label, hits, visitors, bytes}``, most hits first, then by label."""
    out = [{label: r[source or label], **{k: r[k] for k in keys}} for r in rows]
    return sorted(out, key=lambda r: (-r["hits"], str(r[label])))


def _rolled(agents: list[dict], family, label: str = "name") -> list[dict]:
    """Per-agent rows summed per family (``family(agent)``; None leaves the agent out)."""
    sums: dict[str, dict] = {}
    for r in agents:
        name = family(r["agent"])
        if name is None:
            continue
        s = sums.setdefault(name, {label: name, "hits": 0, "visitors": 0, "bytes": 0})
        for k in ("hits", "visitors", "bytes"):
            s[k] += r[k]
    return sorted(sums.values(), key=lambda r: (-r["hits"], r[label]))


def assemble(rows: dict[str, list[dict]], agents: list[dict], classifier: Classifier, run, who: str) -> dict:
    """The report's dict from the flow's outputs (see ``panels`` for every definition)."""
    kinds = {r["agent"]: classifier.classify(r["agent"]) for r in agents}
    sides = {"humans": {"hits": 0, "visitors": 0, "bytes": 0}, "crawlers": {"hits": 0, "visitors": 0, "bytes": 0}}
    for r in agents:
        side = sides["crawlers" if kinds[r["agent"]].crawler is not None else "humans"]
        for k in side:
            side[k] += r[k]
    total_hits = sum(s["hits"] for s in sides.values())
    shares = {k: (round(s["hits"] / total_hits, 4) if total_hits else 0.0) for k, s in sides.items()}
    kept = rows["agents"]
    for r in kept:
        if r["agent"] not in kinds:
            kinds[r["agent"]] = classifier.classify(r["agent"])
    malformed = sum(run.malformed.values()) if run.lines_read is not None else 0
    left_out = run.left_out()
    invalid_time = left_out.get("valid_time", 0)
    g = rows["general"][0] if rows["general"] else {"hits": 0, "visitors": 0, "bytes": 0, "start": None, "end": None}
    # a header line (CloudFront's, W3C's directives) or a non-HTTP line (HAProxy's TCP-mode lines and
    # notices) is no request, neither a valid nor a failed one
    apart = getattr(run, "header_lines", 0) + getattr(run, "non_http_lines", 0) + getattr(run, "apart", 0)
    requests = (run.lines_read or 0) - apart
    general = {
        "total_requests": requests,
        "valid_requests": requests - malformed - invalid_time,
        "failed_requests": malformed + invalid_time,
        "excluded_hits": sum(v for k, v in left_out.items() if k != "valid_time" and k != "not_found"
                             and k != "with_referer"),
        "hits": g["hits"],
        "unique_visitors": g["visitors"],
        "bandwidth": g["bytes"] or 0,
        "start_date": g["start"],
        "end_date": g["end"],
        "log_size": sum(i.get("size") or 0 for i in run.inputs),
        "who": who,
    }
    return {
        "general": general,
        "who": sides,
        "shares": shares,
        "visitors": sorted(({"day": r["day"], "hits": r["hits"], "visitors": r["visitors"], "bytes": r["bytes"]}
                            for r in rows["visitors"]), key=lambda r: r["day"]),
        "requests": _ranked(rows["requests"], "path", "target"),
        "not_found": _ranked(rows["not_found"], "path", "target"),
        "hosts": _ranked(rows.get("hosts", []), "host", "client"),
        "os": _rolled(kept, lambda a: kinds[a].os),
        "browsers": _rolled(kept, lambda a: kinds[a].browser),
        "visit_time": sorted(({"hour": f"{r['hour']:02d}", "hits": r["hits"], "visitors": r["visitors"],
                               "bytes": r["bytes"]} for r in rows["visit_time"]), key=lambda r: r["hour"]),
        "referring_sites": _ranked(rows.get("referring_sites", []), "site"),
        "status_codes": sorted(({"code": r["status"], "hits": r["hits"], "visitors": r["visitors"],
                                 "bytes": r["bytes"]} for r in rows["status_codes"]), key=lambda r: r["code"]),
        "crawlers": _rolled(kept, lambda a: kinds[a].crawler),
    }
