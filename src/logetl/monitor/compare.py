"""Two runs side by side: what the run comparison page (``/runs/A/compare/B``) and its API show.

``compare(a, b)`` gives sections of rows ``{"label", "kind", "a", "b", "differs"}``; ``a`` and ``b`` are
raw values (None: the run does not have it, e.g. a document from before inputs were recorded), ``kind``
says how to show them (``int``, ``share``, ``seconds``, ``bytes``, ``time``, ``text``). Counts, texts and
statuses differ when they are not equal; start times never count as a difference; durations differ when they differ by more than a tenth of the larger
(and 0.05 s): two runs of the same flow never take exactly the same time, and a highlight on every time
would hide the differences that matter.
"""
from __future__ import annotations

import datetime as dt
import json

from logetl.monitor.documents import uncounted

#: times (step and run durations) are highlighted past this relative difference ...
TIME_TOLERANCE = 0.10
#: ... and this absolute one (seconds)
TIME_FLOOR = 0.05


def _differs(kind: str, a, b) -> bool:
    if kind == "time":   # when a run started is no difference between runs
        return False
    if kind == "seconds" and isinstance(a, (int, float)) and isinstance(b, (int, float)):
        gap = abs(a - b)
        return gap > TIME_FLOOR and gap > TIME_TOLERANCE * max(abs(a), abs(b))
    return a != b


def _row(label: str, kind: str, a, b) -> dict:
    return {"label": label, "kind": kind, "a": a, "b": b, "differs": _differs(kind, a, b)}


def _dict(value) -> dict:
    """An object field of a stored document, or {}: documents stored before ``documents.validate`` checked
    these fields may hold anything, and a page must still show what it can."""
    return value if isinstance(value, dict) else {}


def _list(value) -> list:
    return value if isinstance(value, list) else []


def _steps(run: dict) -> dict[str, dict]:
    return {s["name"]: s for s in _list(run.get("steps")) if isinstance(s, dict) and isinstance(s.get("name"), str)}


def _took(step: dict | None):
    if not step or step.get("status") == "SKIPPED":
        return None
    start, end = step.get("started_at"), step.get("finished_at")
    return end - start if _numeric(start) and _numeric(end) else None


def _union(*keys_lists) -> list:
    """Keys in first-seen order over several sequences."""
    seen: dict = {}
    for keys in keys_lists:
        for k in keys:
            seen.setdefault(k, None)
    return list(seen)


def _numeric(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _total(values) -> int:
    return sum(v for v in values if isinstance(v, int) and not isinstance(v, bool))


def _operator_order(*runs: dict) -> dict[str, int]:
    """Operators in flow order (the graph's ``order``), the first run's first: counters are stored by name."""
    order: dict[str, int] = {}
    for run in runs:
        nodes = _list(_dict(run.get("graph")).get("nodes"))
        for n in sorted((n for n in nodes if isinstance(n, dict) and n.get("type") == "operator"
                         and isinstance(n.get("name"), str)),
                        key=lambda n: n.get("order") if isinstance(n.get("order"), int) else 0):
            order.setdefault(n.get("name"), len(order))
    return order


def _malformed(steps: dict[str, dict]) -> dict[str, int]:
    """Malformed lines by reason, over the steps."""
    total: dict[str, int] = {}
    for s in steps.values():
        for reason, n in _dict(s.get("malformed")).items():
            total[reason] = total.get(reason, 0) + _total([n])
    return total


def _option(value):
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return value


def compare(a: dict, b: dict) -> dict:
    """Runs ``a`` and ``b`` (as ``Store.get_run`` gives them) side by side."""
    sa, sb = _steps(a), _steps(b)
    counted_a, counted_b = (not any(uncounted(s) for s in x.values()) for x in (sa, sb))

    def known(counted: bool, value):   # a count of a run with a step not counted is unknown, not the others' sum
        return value if counted else None

    bad_a, bad_b = _malformed(sa), _malformed(sb)
    lines_a = known(counted_a, _total(s.get("lines_read") for s in sa.values()))
    lines_b = known(counted_b, _total(s.get("lines_read") for s in sb.values()))

    def share(bad, lines):
        return _total(bad.values()) / lines if lines else None

    run = [
        _row("application", "text", a.get("application"), b.get("application")),
        _row("program", "text", a.get("program"), b.get("program")),
        _row("engine", "text", a.get("engine"), b.get("engine")),
        _row("status", "text", a.get("status"), b.get("status")),
        _row("started", "time", a.get("started_at"), b.get("started_at")),
        _row("duration", "seconds", a.get("duration"), b.get("duration")),
        _row("flow definition hash", "text", a.get("flow_hash"), b.get("flow_hash")),
        _row("lines read", "int", lines_a, lines_b),
        _row("malformed lines", "int", known(counted_a, _total(bad_a.values())),
             known(counted_b, _total(bad_b.values()))),
        _row("malformed share", "share", share(bad_a, lines_a), share(bad_b, lines_b)),
        _row("dropped (size '-')", "int", known(counted_a, _total(s.get("dropped_size_dash") for s in sa.values())),
             known(counted_b, _total(s.get("dropped_size_dash") for s in sb.values()))),
        _row("records written", "int", a.get("records_written"), b.get("records_written")),
        _row("warning", "text", a.get("warning"), b.get("warning")),
        _row("error", "text", a.get("error"), b.get("error")),
    ]
    ins_a = {i["path"]: i.get("size") for i in _list(a.get("inputs")) if isinstance(_dict(i).get("path"), str)}
    ins_b = {i["path"]: i.get("size") for i in _list(b.get("inputs")) if isinstance(_dict(i).get("path"), str)}
    inputs = [{"label": path, "kind": "bytes", "a": ins_a.get(path), "b": ins_b.get(path),
               "differs": path not in ins_a or path not in ins_b or ins_a[path] != ins_b[path]}
              for path in _union(ins_a, ins_b)]
    if ins_a or ins_b:
        inputs.append(_row("total", "bytes", _total(ins_a.values()), _total(ins_b.values())))
    opts_a, opts_b = _dict(a.get("options")), _dict(b.get("options"))
    options = [_row(k, "text", _option(opts_a.get(k)), _option(opts_b.get(k))) for k in sorted(_union(opts_a, opts_b))]
    steps, counters = [], []
    order = _operator_order(a, b)
    for name in _union(sa, sb):
        x, y = sa.get(name), sb.get(name)
        steps.append(_row(f"{name}: status", "text", x and x.get("status"), y and y.get("status")))
        steps.append(_row(f"{name}: time", "seconds", _took(x), _took(y)))
        cx, cy = _dict(_dict(x).get("counters")), _dict(_dict(y).get("counters"))
        for op in sorted(_union(cx, cy), key=lambda o: order.get(o, len(order))):
            for key in ("in", "out"):
                counters.append(_row(f"{name} / {op}: records {key}", "int",
                                     _dict(cx.get(op)).get(key), _dict(cy.get(op)).get(key)))
    malformed = [_row(reason, "int", known(counted_a, bad_a.get(reason, 0)), known(counted_b, bad_b.get(reason, 0)))
                 for reason in sorted(_union(bad_a, bad_b))]
    wa, wb = _dict(a.get("written")), _dict(b.get("written"))
    written = [_row(tap, "int", wa.get(tap), wb.get(tap)) for tap in _union(wa, wb)]
    sections = [("Run", run), ("Inputs", inputs), ("Options", options), ("Steps", steps),
                ("Counters per operator", counters), ("Malformed lines by reason", malformed),
                ("Records written", written)]
    return {"a": a["run_id"], "b": b["run_id"],
            "sections": [{"title": t, "rows": rows} for t, rows in sections],
            "differences": sum(r["differs"] for _, rows in sections for r in rows)}


def show(kind: str, value) -> str:
    """A value as the page shows it."""
    if value is None:
        return "—"
    if kind == "int" and isinstance(value, int):
        return f"{value:,}"
    if kind == "bytes" and isinstance(value, int):
        return f"{value:,} B"
    if kind == "share" and isinstance(value, (int, float)):
        return f"{value:.2%}"
    if kind == "seconds" and isinstance(value, (int, float)):
        return f"{value:.2f} s"
    if kind == "time" and isinstance(value, (int, float)):
        try:
            return dt.datetime.fromtimestamp(value, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        except (OverflowError, OSError, ValueError):   # stored before times were checked (1e300): as a number
            return f"{value:g} (epoch seconds)"
    return str(value)


def delta(row: dict) -> str:
    """B against A for counts, sizes and times (``+120 (+2.4%)``), else empty."""
    a, b = row["a"], row["b"]
    if row["kind"] not in ("int", "bytes", "seconds") or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b)) or a == b:
        return ""
    d = b - a
    text = f"{d:+,.2f} s" if row["kind"] == "seconds" else f"{d:+,}"
    return text + (f" ({d / a:+.1%})" if a else "")
