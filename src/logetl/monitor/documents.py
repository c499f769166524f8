"""Run documents: what a run tells the monitor, as JSON.

A document is the whole state of one run at one moment (idempotent: a store keeps, per owner and run
id, the document with the highest ``seq``), so documents may be delivered late, twice or out of order.

    {"messaging_version": "1.0-eap-57", "format": "JSON", "seq": 3, "sent_at": 1763812345.1,
     "run": {"run_id": "5F0C...", "application": "logetl-join", "program": "join", "engine": "local",
             "owner": "alice", "tags": {"team": "web"}, "status": "RUNNING",
             "started_at": ..., "finished_at": null, "error": null,
             "graph": {"nodes": [...], "edges": [...]},
             "steps": [{"name": "parse", "status": "SUCCESSFUL", "started_at": ..., "finished_at": ...,
                        "counters": {"parse": {"in": 5000, "out": 4568}, ...},
                        "lines_read": 5000, "malformed": {}, "dropped_size_dash": 432}, ...],
             "written": {"output": 716}, "restarted_after": null,
             "malformed_share": 0.0, "warning": null, ...}}

``inputs`` ([{"path", "size"}]), ``options`` and ``flow_hash`` (the flow definition's SHA-256, 16 hex
digits) are what run comparison shows; ``progress`` ({"step", "done", "total", "unit", "percent", "rate",
"eta"}) is where a RUNNING run is. Documents without them (older versions) are taken as they are.

``warning`` (a string or null) says why a run deserves a look although it may have succeeded (a high
share of malformed lines); the store keeps it in a column, so the run list can mark the run.
"""
from __future__ import annotations

import json
import time

from logetl import assembly
from logetl.errors import UsageError
from logetl.listener import FlowRun

MESSAGING_VERSION = "1.0-eap-57"
FORMAT = "JSON"
STATUSES = ("PENDING", "RUNNING", "SUCCESSFUL", "FAILED", "STOPPED")


def graph(flow: assembly.Flow) -> dict:
    """Operators and steps as nodes; data flow between operators and dependencies between steps as edges."""
    nodes, edges = [], []
    for step in flow.steps:
        nodes.append({"id": f"step:{step.name}", "type": "step", "name": step.name, "index": step.index})
    for i, n in enumerate(flow.nodes):
        step = flow.step_of(n)
        nodes.append({"id": f"op:{n.name}", "type": "operator", "name": n.name, "kind": n.kind,
                      "step": step.name, "order": i, "description": n.describe(), "fields": list(n.fields)})
    for a, b in flow.edges():
        edges.append({"from": f"op:{a.name}", "to": f"op:{b.name}", "type": "data", "fields": list(a.fields)})
    for step in flow.steps:
        for before in sorted({flow.step_of(r).name for r in step.reads}):
            edges.append({"from": f"step:{before}", "to": f"step:{step.name}", "type": "dependency"})
    return {"nodes": nodes, "edges": edges}


#: at most this many input files are named in a document (a glob may match thousands)
MAX_INPUTS = 1000


def run_document(run: FlowRun, flow: assembly.Flow, *, application: str, owner: str, tags: dict,
                 seq: int, flow_graph: dict | None = None, inputs: list[str] | None = None,
                 outputs: dict[str, str] | None = None, progress: dict | None = None) -> dict:
    """``inputs`` (the files read) and ``outputs`` (tap -> directory) are the run's lineage; ``progress``
    (``listener.progress_of``'s dict) is kept only while the run is RUNNING."""
    body = run.to_dict()
    if inputs is not None and not body.get("inputs"):
        # the files read, as the comparison shows them ({"path", "size"}; the run's own record has sizes)
        body["inputs"] = [{"path": p, "size": None} for p in inputs[:MAX_INPUTS]]
    body["inputs"] = list((body.get("inputs") or [])[:MAX_INPUTS])
    if outputs is not None:
        body["outputs"] = dict(outputs)
    body.update({
        "application": application, "owner": owner, "tags": dict(tags),
        "graph": flow_graph if flow_graph is not None else graph(flow),
        "records_read": run.lines_read, "records_written": sum(run.written.values()),
        "duration": (run.finished_at - run.started_at) if run.started_at and run.finished_at else None,
        "progress": progress if run.status == "RUNNING" else None,
    })
    return {"messaging_version": MESSAGING_VERSION, "format": FORMAT, "seq": seq, "sent_at": time.time(),
            "run": body}


class DocumentError(UsageError, ValueError):
    """A document the monitor cannot take; the message says which field is wrong (the server answers 422).
    A ``ValueError`` too, for the callers that catch that."""


#: how deep a document's JSON may nest (a real one nests 5 deep); deeper is refused, not recursed into
MAX_DEPTH = 64
MAX_SEQ = 2**31 - 1
MAX_COUNT = 2**63 - 1
#: the longest each indexed text column may be (PostgreSQL enforces them); a run's application name is
#: checked against it before the run starts (``job.run_flow``), so the embedded store and a remote monitor
#: take the same names
LENGTHS = {"application": 200, "program": 50, "engine": 20, "owner": 200}


def unprintable(text: str) -> str | None:
    """The first character of ``text`` that has no place in a name (a control character such as a newline
    or an escape, a format character such as a bidirectional override, a line or paragraph separator),
    or None. Names are printed by the command line and shown in pages: such a character would rewrite
    what is around it."""
    import unicodedata

    for c in text:
        if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            return c
    return None


def name_problem(what: str, value: str, limit: int) -> str | None:
    """Why ``value`` cannot be a name (an application, an owner, a tag): empty, longer than ``limit``
    characters, or holding a character ``unprintable`` finds; the message names ``what`` and the value."""
    if not value.strip():
        return f"{what} must not be empty"
    if len(value) > limit:
        return f"{what} may have at most {limit} characters, not {len(value)}"
    if unprintable(value) is not None:
        return f"{what} must not contain control characters (newlines, escapes, ...): {value!r}"
    return None


def depth(value) -> int:
    """How deep a parsed JSON value nests (a scalar is 0), without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, dict):
            v = v.values()
        elif not isinstance(v, list):
            continue
        deepest = max(deepest, d)
        if d > MAX_DEPTH:
            return d
        todo.extend((x, d + 1) for x in v)
    return deepest


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")


#: the latest time a document may give (9999-12-31 23:59:59 UTC): later, and any time before the epoch, is no
#: run's time, and Python's datetime (the compare page, pruning's daily sums) cannot show it
MAX_TIME = 253402300799.0


def _time(v) -> bool:
    return _number(v) and 0 <= v <= MAX_TIME


def _whole(v) -> bool:
    """A count: a whole number from 0 to ``MAX_COUNT`` (JSON has no unsigned integers; a bool is not one)."""
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_COUNT


def _counts(value) -> bool:
    """An object of counts (``written``, a step's ``malformed``), as the comparison adds them up."""
    return isinstance(value, dict) and all(_whole(v) for v in value.values())


def _check_times(where: str, obj: dict) -> None:
    for key in ("started_at", "finished_at"):
        if obj.get(key) is not None and not _time(obj[key]):
            raise DocumentError(f"{where}.{key} must be a time in epoch seconds from 0 to {MAX_TIME:.0f} "
                                "(year 9999), or null")


def _check_parts(run: dict) -> None:
    """The fields the run page and the comparison read inside: the wrong shape is refused here, so that a
    stored document never makes a page fail (every field may be missing: older versions do not send it)."""
    inputs = run.get("inputs")
    if inputs is not None and not (isinstance(inputs, list) and all(
            isinstance(i, str) or isinstance(i, dict) and isinstance(i.get("path"), str)
            and (i.get("size") is None or _whole(i["size"])) for i in inputs)):
        raise DocumentError('run.inputs must be a list of paths or of {"path": string, "size": count or null}')
    if run.get("options") is not None and not isinstance(run["options"], dict):
        raise DocumentError("run.options must be an object")
    if run.get("written") is not None and not _counts(run["written"]):
        raise DocumentError(f"run.written must be an object of whole numbers from 0 to {MAX_COUNT}")
    if run.get("outputs") is not None and not isinstance(run["outputs"], dict):
        raise DocumentError("run.outputs must be an object")
    for key in ("nodes", "edges"):
        if not isinstance(run.get("graph", {}).get(key, []), list):
            raise DocumentError(f"run.graph.{key} must be a list")
    for i, step in enumerate(run.get("steps", [])):
        where = f"run.steps[{i}]"
        if not isinstance(step, dict) or not isinstance(step.get("name"), str):
            raise DocumentError(f"{where} must be an object with a name (a string)")
        _check_times(where, step)
        counters = step.get("counters")
        if counters is not None and not (isinstance(counters, dict) and all(_counts(c) for c in counters.values())):
            raise DocumentError(f'{where}.counters must be an object of operators\' counts '
                                f'({{"parse": {{"in": 10, "out": 8}}}}), each a whole number from 0 to {MAX_COUNT}')
        if step.get("malformed") is not None and not _counts(step["malformed"]):
            raise DocumentError(f"{where}.malformed must be an object of whole numbers from 0 to {MAX_COUNT}")
        for key in ("lines_read", "dropped_size_dash"):
            if step.get(key) is not None and not _whole(step[key]):
                raise DocumentError(f"{where}.{key} must be a whole number from 0 to {MAX_COUNT}, or null")


def validate(doc) -> dict:
    """Checks a received document's shape; returns it. Unknown extra fields are kept."""
    if not isinstance(doc, dict):
        raise DocumentError("a document is a JSON object")
    if depth(doc) > MAX_DEPTH:
        raise DocumentError(f"a document may nest at most {MAX_DEPTH} deep")
    if doc.get("messaging_version") != MESSAGING_VERSION:
        raise DocumentError(f"messaging_version must be {MESSAGING_VERSION!r}")
    if doc.get("format", FORMAT) != FORMAT:
        raise DocumentError(f"format must be {FORMAT!r}")
    seq = doc.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq <= MAX_SEQ:
        raise DocumentError(f"seq must be an integer from 0 to {MAX_SEQ}")
    run = doc.get("run")
    if not isinstance(run, dict):
        raise DocumentError("run must be an object")
    rid = run.get("run_id")
    if not (isinstance(rid, str) and len(rid) == 32 and all(c in "0123456789ABCDEF" for c in rid)):
        raise DocumentError("run.run_id must be 32 uppercase hex digits")
    if run.get("status") not in STATUSES:
        raise DocumentError(f"run.status must be one of {', '.join(STATUSES)}")
    for key in ("application", "program", "engine"):
        if not isinstance(run.get(key), str) or not run[key] or len(run[key]) > LENGTHS[key]:
            raise DocumentError(f"run.{key} must be a non-empty string of at most {LENGTHS[key]} characters")
    owner = run.get("owner")
    if owner is not None and (not isinstance(owner, str) or len(owner) > LENGTHS["owner"]):
        raise DocumentError(f"run.owner must be a string of at most {LENGTHS['owner']} characters, or null")
    _check_times("run", run)
    if run.get("duration") is not None and not (_number(run["duration"]) and run["duration"] >= 0):
        raise DocumentError("run.duration must be a number of seconds >= 0, or null")
    for key in ("records_read", "records_written"):
        if run.get(key) is not None and not _whole(run[key]):
            raise DocumentError(f"run.{key} must be a whole number from 0 to {MAX_COUNT}, or null")
    if run.get("warning") is not None and not isinstance(run["warning"], str):
        raise DocumentError("run.warning must be a string or null")
    if not isinstance(run.get("steps", []), list) or not isinstance(run.get("graph", {}), dict):
        raise DocumentError("run.steps must be a list and run.graph an object")
    if not isinstance(run.get("tags", {}), dict):
        raise DocumentError("run.tags must be an object")
    _check_parts(run)
    return doc


def input_paths(run: dict) -> list[str]:
    """The paths of a run's input files: ``inputs`` holds ``{"path", "size"}`` (documents of earlier
    versions of this layout held the paths themselves)."""
    found = []
    inputs = run.get("inputs")
    for i in inputs if isinstance(inputs, list) else []:   # anything else was stored before it was checked
        p = i.get("path") if isinstance(i, dict) else i
        if isinstance(p, str) and p:
            found.append(p)
    return found


def lineage_changes(doc: dict) -> bool:
    """Whether a stored document may change its run's lineage rows: a run's paths are known from its first
    document and its error at its end, so the documents in between (most of a long run's) skip the work."""
    return doc["seq"] <= 1 or doc["run"]["status"] != "RUNNING"


def lineage_of(doc: dict) -> list[dict]:
    """The rows the lineage search finds a run by: its input files, its output directories, its error."""
    run = doc.get("run") or {}
    rid = run.get("run_id")
    rows = []
    rows += [{"run_id": rid, "role": "input", "value": p} for p in input_paths(run)]
    outputs = run.get("outputs")
    if isinstance(outputs, dict):
        rows += [{"run_id": rid, "role": "output", "value": p} for p in outputs.values() if isinstance(p, str) and p]
    if isinstance(run.get("error"), str) and run["error"]:
        rows.append({"run_id": rid, "role": "error", "value": run["error"]})
    return rows


def _count(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_COUNT else None


def uncounted(step: dict) -> bool:
    """Whether a run's step was not counted (``StepRun.lines_read`` None): its lines read are null."""
    return "lines_read" in step and step["lines_read"] is None


def quality(run: dict) -> dict:
    """The run list's data-quality columns, from the steps of a (validated) run: lines read, malformed
    lines, their share of the lines read, dropped records (size '-'). Counted from the steps, so documents
    of every version give them; a step field of the wrong type counts as nothing. A step whose lines read
    are null was not counted (it failed on Spark before its counters came back): the run's are unknown."""
    lines = malformed = dropped = 0
    for step in run.get("steps") or []:
        if not isinstance(step, dict):
            continue
        if uncounted(step):
            return {"malformed": None, "dropped": None, "malformed_share": None}
        lines += _count(step.get("lines_read")) or 0
        bad = step.get("malformed")
        if isinstance(bad, dict):
            malformed += sum(_count(v) or 0 for v in bad.values())
        dropped += _count(step.get("dropped_size_dash")) or 0
    return {"malformed": min(malformed, MAX_COUNT), "dropped": min(dropped, MAX_COUNT),
            "malformed_share": malformed / lines if lines else None}


def progress_column(run: dict) -> str | None:
    """A running run's progress (step, done, total, unit, percent, rate, ETA) as JSON, for the run list."""
    p = run.get("progress")
    if run.get("status") != "RUNNING" or not isinstance(p, dict):
        return None
    keep = {k: p.get(k) for k in ("step", "done", "total", "unit", "percent", "rate", "eta")}
    if not (keep["step"] is None or isinstance(keep["step"], str)) or not (
            keep["unit"] is None or isinstance(keep["unit"], str)):
        return None
    for k in ("done", "total", "percent", "rate", "eta"):
        if keep[k] is not None and not _number(keep[k]):
            keep[k] = None
    return json.dumps(keep, sort_keys=True)[:2000]


def row_of(doc: dict, owner: str | None = None) -> dict:
    """The ``runs`` row for a (validated) document; ``owner`` overrides the document's (an API key's user)."""
    run = doc["run"]
    return {
        "run_id": run["run_id"], "owner": owner or str(run.get("owner") or "unknown"),
        "application": run["application"], "program": run["program"], "engine": run["engine"],
        "status": run["status"], "started_at": run.get("started_at"), "finished_at": run.get("finished_at"),
        "duration": run.get("duration"), "records_read": run.get("records_read"),
        "records_written": run.get("records_written"), "seq": doc["seq"],
        "tags": json.dumps(run.get("tags") or {}, sort_keys=True), "warning": run.get("warning"),
        "document": json.dumps(doc, sort_keys=True), "updated_at": time.time(),
        **quality(run), "progress": progress_column(run),
    }
