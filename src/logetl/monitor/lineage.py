"""Lineage: finding runs by what they read and wrote, and OpenLineage run events.

Search: every stored document's input files, output directories and error are kept in ``run_lineage``
(by the server's ingest and by the embedded sink), so runs are found by a path, a tag or error text without
reading their documents. Matching is a case-insensitive substring, with Unicode's lower case
(``Store.contains``: ``CAFÉ.log`` is found by ``café``).

OpenLineage: with ``logetl monitor --openlineage-url URL``, the server's background worker sends a START
event when it first sees a run, then COMPLETE, FAIL or ABORT (STOPPED) when the run ends. Events are keyed
by owner and run, as the store keeps runs: the job is ``OWNER/APPLICATION`` in the server's namespace
(two users' applications of one name are two jobs) and the runId a UUID of the owner and the run id (a
user who sends a document with another user's run id makes a run of their own, with a runId of its own),
with the run id and owner in the run's ``tags`` facet and the owner in the job's ``ownership`` facet.
Each event carries the input files and output directories as datasets (``file`` namespace for local
paths, ``scheme://authority`` for
others, per the OpenLineage naming spec) and the records written as each output's ``outputStatistics``.
Events are made and serialized by the standard client library (``openlineage-python``: its models give the
spec's shape, schema URLs and producer); they are stored in the ``deliveries`` table and POSTed to
``URL/api/v1/lineage`` (the path the library's HTTP transport uses) by the same sender as alert
webhooks, so each attempt is recorded, retried with back-off and kept across a restart, which the
library's transport (retries inside one call, nothing kept) does not do. A run's events go in order: a
later one waits while an earlier one is pending.
"""
from __future__ import annotations

import datetime as dt
import json
import uuid
from urllib.parse import urljoin, urlsplit

from sqlalchemy import and_, exists, func, or_, select

from logetl import __version__
from logetl.monitor.documents import MAX_TIME, input_paths
from logetl.monitor.store import run_lineage, runs, tag_text

ENDPOINT = "api/v1/lineage"
PRODUCER = "https://github.com/logetl/logetl"
EVENTS = {"SUCCESSFUL": "COMPLETE", "FAILED": "FAIL", "STOPPED": "ABORT"}


def available() -> str | None:
    """Why OpenLineage events cannot be made here, or None."""
    try:
        import openlineage.client.event_v2  # noqa: F401
    except ImportError:
        return "OpenLineage events need the OpenLineage client: pip install 'logetl[lineage]'"
    return None


def endpoint(url: str) -> str:
    return urljoin(url.rstrip("/") + "/", ENDPOINT)


def dataset_name(path: str) -> tuple[str, str]:
    """(namespace, name) of a path: ``file`` and the absolute path for local files; ``scheme://authority``
    and the path for URLs (``hdfs://nn:8020/logs`` -> ``hdfs://nn:8020``, ``/logs``)."""
    parts = urlsplit(path)
    if parts.scheme and parts.scheme != "file" and len(parts.scheme) > 1:
        return f"{parts.scheme}://{parts.netloc}", parts.path or "/"
    if parts.scheme == "file":
        return "file", parts.path
    return "file", path


def _iso(t: float | None) -> str:
    # a time outside 1970 .. 9999 was stored before documents' times were checked: clamped, as pruning does
    when = (dt.datetime.fromtimestamp(min(max(t, 0.0), MAX_TIME), dt.timezone.utc) if t is not None
            else dt.datetime.now(dt.timezone.utc))
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def run_uuid(run_id: str, owner: str) -> str:
    """The OpenLineage runId of ``owner``'s run ``run_id``: runs are keyed by owner and run id (two users'
    runs may have the same id; a consumer such as Marquez keys runs by runId alone), so the runId is a
    name-based UUID (version 5) of the owner in the namespace of the run id (a logetl run id is 32 hex
    digits: a UUID's 128 bits). The run's own id and owner are in its ``tags`` facet."""
    return str(uuid.uuid5(uuid.UUID(hex=run_id), owner))


def job_name(owner: str, application: str) -> str:
    """The OpenLineage job of ``owner``'s application: ``OWNER/APPLICATION``, so that two users'
    applications of one name are two jobs; ``%`` and ``/`` in the owner are written ``%25`` and ``%2F``,
    so the first ``/`` always ends the owner."""
    return owner.replace("%", "%25").replace("/", "%2F") + "/" + application


def event(run: dict, state: str, namespace: str) -> str:
    """The OpenLineage RunEvent (JSON) of ``run`` (a document's body, with its ``owner`` as the store keeps
    it) in ``state`` (START, COMPLETE, FAIL, ABORT): job ``OWNER/APPLICATION`` (``job_name``) in
    ``namespace``, runId of the owner and the run id (``run_uuid``)."""
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import (error_message_run, job_type_job, output_statistics_output_dataset,
                                             ownership_job, processing_engine_run, tags_run)
    from openlineage.client.serde import Serde

    owner = run["owner"]
    facets = {"processing_engine": processing_engine_run.ProcessingEngineRunFacet(
        version=__version__, name="logetl", openlineageAdapterVersion=__version__, producer=PRODUCER),
        "tags": tags_run.TagsRunFacet(tags=[
            tags_run.TagsRunFacetFields(key="logetl.run_id", value=run["run_id"], source="LOGETL"),
            tags_run.TagsRunFacetFields(key="logetl.owner", value=owner, source="LOGETL")], producer=PRODUCER)}
    if state == "FAIL" and run.get("error"):
        facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=run["error"], programmingLanguage="python", producer=PRODUCER)
    job_facets = {"jobType": job_type_job.JobTypeJobFacet(processingType="BATCH", integration="LOGETL",
                                                          jobType="JOB", producer=PRODUCER),
                  "ownership": ownership_job.OwnershipJobFacet(owners=[ownership_job.Owner(name=f"user:{owner}")],
                                                               producer=PRODUCER)}
    inputs = [InputDataset(*dataset_name(p)) for p in input_paths(run)]
    # objects of the wrong shape were stored before ingest checked them: taken as empty
    written = run["written"] if isinstance(run.get("written"), dict) else {}
    taps = run["outputs"] if isinstance(run.get("outputs"), dict) else {}
    outputs = []
    for tap, path in sorted((t, p) for t, p in taps.items() if isinstance(p, str)):
        out_facets = {}
        if state == "COMPLETE" and isinstance(written.get(tap), int):
            out_facets["outputStatistics"] = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=written[tap], producer=PRODUCER)
        outputs.append(OutputDataset(*dataset_name(path), outputFacets=out_facets))
    when = run.get("started_at") if state == "START" else (run.get("finished_at") or run.get("started_at"))
    ev = RunEvent(eventType=RunState[state], eventTime=_iso(when), producer=PRODUCER,
                  run=Run(runId=run_uuid(run["run_id"], owner), facets=facets),
                  job=Job(namespace=namespace, name=job_name(owner, run["application"]), facets=job_facets),
                  inputs=inputs, outputs=outputs)
    return Serde.to_json(ev)


# --- search ---------------------------------------------------------------------------------------------------

def search(store, *, owner: str | None = None, q: str | None = None, input: str | None = None,
           output: str | None = None, tag: str | None = None, error: str | None = None,
           limit: int = 100) -> tuple[list[dict], int]:
    """Runs (list rows, newest first) matching every criterion given; ``q`` matches any input or output
    path, the error, a tag or the application."""
    engine = store.engine

    def has(role: str | None, needle: str):
        conds = [run_lineage.c.owner == runs.c.owner, run_lineage.c.run_id == runs.c.run_id,
                 store.contains(run_lineage.c.value, needle)]
        if role:
            conds.append(run_lineage.c.role == role)
        return exists(select(run_lineage.c.run_id).where(and_(*conds)))

    conds = []
    if owner is not None:
        conds.append(runs.c.owner == owner)
    if input:
        conds.append(has("input", input))
    if output:
        conds.append(has("output", output))
    if error:
        conds.append(has("error", error))
    if tag:
        conds.append(store.contains(runs.c.tags, tag_text(tag)))
    if q:
        conds.append(or_(has(None, q), store.contains(runs.c.tags, q), store.contains(runs.c.application, q)))
    cols = [c for c in runs.c if c.name != "document"]
    query = (select(*cols).where(*conds).order_by(runs.c.started_at.desc().nulls_last(), runs.c.run_id.desc())
             .limit(limit))
    with engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(query)]
        total = conn.execute(select(func.count()).select_from(runs).where(*conds)).scalar_one()
        paths = {}
        if rows:
            for r in conn.execute(select(run_lineage).where(
                    run_lineage.c.run_id.in_([x["run_id"] for x in rows]))):
                paths.setdefault((r.owner, r.run_id), []).append((r.role, r.value))
    for r in rows:
        r["tags"] = json.loads(r["tags"])
        mine = paths.get((r["owner"], r["run_id"]), [])
        r["inputs"] = [v for k, v in mine if k == "input"]
        r["outputs"] = [v for k, v in mine if k == "output"]
        r["error"] = next((v for k, v in mine if k == "error"), None)
    return rows, total
