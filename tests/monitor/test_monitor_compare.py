"""Run comparison (``/runs/A/compare/B`` and its API), the previous successful run of an application, the
run list's data-quality columns and filter, what real runs record for comparing (inputs, options, flow
hash), and the migration of a store of layout 2 (on SQLite and a real PostgreSQL server)."""
from __future__ import annotations

import hashlib
import json
import os
import threading

import pytest
from starlette.testclient import TestClient

from conftest import CORPUS
from test_monitor_api import LOCAL, make_doc, rid
from logetl import programs
from logetl.job import run_program
from logetl.listener import FlowRun, StepRun
from logetl.monitor.app import create_app
from logetl.monitor.compare import compare
from logetl.monitor.documents import run_document
from logetl.monitor.store import ADDED_IN_3, Store, row_of, settings

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")


@pytest.fixture
def client(store):
    with TestClient(create_app(store), base_url=LOCAL) as c:
        yield c


def pair():
    """Two documents of one application: B read more lines, had malformed ones, took longer in join."""
    a = make_doc(rid(1), started=1_700_000_000.0, duration=2.0)
    b = make_doc(rid(2), started=1_700_000_100.0, duration=2.125, malformed={"no_match": 3})
    for doc, size, lines, took in ((a, 1000, 10, 1.0), (b, 1200, 12, 1.5)):
        run = doc["run"]
        run["inputs"] = [{"path": "/logs/access.log", "size": size}]
        run["options"] = {"engine": "local", "overwrite": False, "outputs": {"output": "/out"}}
        run["flow_hash"] = "feea232938ce47ee"
        run["steps"][0]["lines_read"] = lines
        run["steps"][1]["started_at"], run["steps"][1]["finished_at"] = 10.0, 10.0 + took
        run["steps"][1]["counters"] = {"sink": {"in": 5, "out": 5}, "join": {"in": 9, "out": 5}}
    b["run"]["options"]["overwrite"] = True
    b["run"]["inputs"].append({"path": "/logs/more.log", "size": 7})
    return a, b


def rows_of(result, title):
    return {r["label"]: (r["a"], r["b"], r["differs"])
            for s in result["sections"] if s["title"] == title for r in s["rows"]}


def test_compare_puts_two_runs_side_by_side_and_marks_what_differs():
    a, b = pair()
    result = compare(a["run"], b["run"])
    assert [s["title"] for s in result["sections"]] == [
        "Run", "Inputs", "Options", "Steps", "Counters per operator", "Malformed lines by reason", "Records written"]
    run = rows_of(result, "Run")
    assert run["lines read"] == (10, 12, True)
    assert run["malformed lines"] == (0, 3, True)
    assert run["malformed share"] == (0.0, 0.25, True)
    assert run["flow definition hash"] == ("feea232938ce47ee", "feea232938ce47ee", False)
    assert run["started"] == (1_700_000_000.0, 1_700_000_100.0, False)       # never a difference
    assert run["duration"] == (2.0, 2.125, False)                                # within a tenth
    assert rows_of(result, "Inputs") == {"/logs/access.log": (1000, 1200, True), "/logs/more.log": (None, 7, True),
                                         "total": (1000, 1207, True)}
    assert rows_of(result, "Options") == {"engine": ("local", "local", False), "overwrite": (False, True, True),
                                          "outputs": ('{"output": "/out"}', '{"output": "/out"}', False)}
    steps = rows_of(result, "Steps")
    assert steps["join: time"] == (1.0, 1.5, True) and steps["join: status"] == ("SUCCESSFUL", "SUCCESSFUL", False)
    counters = [s for s in result["sections"] if s["title"] == "Counters per operator"][0]["rows"]
    # in flow order (join before sink), not the stored (alphabetical) order of the counters
    assert [r["label"] for r in counters] == ["parse / parse: records in", "parse / parse: records out",
                                              "join / join: records in", "join / join: records out",
                                              "join / sink: records in", "join / sink: records out"]
    assert rows_of(result, "Malformed lines by reason") == {"no_match": (0, 3, True)}
    assert rows_of(result, "Records written") == {"output": (5, 5, False)}
    assert result["differences"] == 10


def test_documents_of_older_versions_compare_with_what_they_have():
    a, b = pair()
    for key in ("inputs", "options", "flow_hash"):
        del a["run"][key]
    result = compare(a["run"], b["run"])
    assert rows_of(result, "Run")["flow definition hash"] == (None, "feea232938ce47ee", True)
    assert rows_of(result, "Inputs")["/logs/access.log"] == (None, 1200, True)


def test_the_compare_api_and_page(client):
    a, b = pair()
    client.post("/api/documents", json=a)
    client.post("/api/documents", json=b)
    r = client.get(f"/api/runs/{rid(1)}/compare/{rid(2)}")
    assert r.status_code == 200
    assert r.json() == json.loads(json.dumps(compare(client.get(f"/api/runs/{rid(1)}").json()["run"],
                                                     client.get(f"/api/runs/{rid(2)}").json()["run"])))
    missing = client.get(f"/api/runs/{rid(1)}/compare/{rid(9)}")
    assert missing.status_code == 404 and missing.json() == {
        "error": {"status": 404, "code": "not_found", "message": f"no run {rid(9)}"}}
    page = client.get(f"/runs/{rid(1).lower()}/compare/{rid(2)}")
    assert page.status_code == 200
    assert '<tr data-label="overwrite" class="differs">' in page.text
    assert '<tr data-label="engine">' in page.text
    assert "10 differences, highlighted." in page.text
    assert f'<a href="/runs/{rid(2)}/compare/{rid(1)}" id="swap">' in page.text
    assert client.get(f"/runs/{rid(9)}/compare/{rid(1)}").status_code == 404


def test_runs_stored_before_their_fields_were_checked_still_compare(client, store):
    """Documents that ingest now refuses (422) but an older version stored: the comparison shows what it
    can, a time it cannot show as a date as a number, and never fails (it was a 500)."""
    a, b = pair()
    b["run"].update(options="x", written="x", inputs=5, started_at=1e300, duration=-1.0,
                    graph={"nodes": [{"type": "operator", "name": {}}]})
    b["run"]["steps"][0].update(counters={"a": 5}, malformed="x")
    b["run"]["steps"][1]["counters"] = "x"
    store.ingest_many([row_of(a), row_of(b)])     # as they were stored: row_of does not check
    with store.engine.begin() as conn:            # a store opened for the first time since layout 3 ...
        conn.execute(settings.delete())
    Store(store.url).engine.dispose()             # ... indexes every stored run's inputs (inputs=5 failed)
    r = client.get(f"/api/runs/{rid(1)}/compare/{rid(2)}")
    assert r.status_code == 200, r.text
    result = r.json()
    assert rows_of(result, "Run")["started"] == (1_700_000_000.0, 1e300, False)
    assert rows_of(result, "Options")["overwrite"] == (False, None, True)
    assert rows_of(result, "Records written")["output"] == (5, None, True)
    assert rows_of(result, "Counters per operator")["parse / a: records in"] == (None, None, False)
    assert rows_of(result, "Inputs")["/logs/access.log"] == (1000, None, True)
    for path, side in ((f"/runs/{rid(1)}/compare/{rid(2)}", "b"), (f"/runs/{rid(2)}/compare/{rid(1)}", "a")):
        page = client.get(path)
        assert page.status_code == 200, page.text
        assert f'<td data-side="{side}" class="">1e+300 (epoch seconds)</td>' in page.text
    b["run"].update(run_id=rid(3), started_at=-1e300)
    store.ingest_many([row_of(b)])
    page = client.get(f"/runs/{rid(1)}/compare/{rid(3)}")
    assert page.status_code == 200 and '<td data-side="b" class="">-1e+300 (epoch seconds)</td>' in page.text


def test_one_user_cannot_compare_with_another_users_run(keyed):
    c, alice, bob = keyed
    a, b = pair()
    auth = lambda key: {"Authorization": f"Bearer {key}"}   # noqa: E731
    c.post("/api/documents", json=a, headers=auth(alice))
    c.post("/api/documents", json=b, headers=auth(bob))
    r = c.get(f"/api/runs/{rid(1)}/compare/{rid(2)}", headers=auth(alice))
    assert r.status_code == 404 and r.json()["error"]["message"] == f"no run {rid(2)}"
    assert c.get(f"/api/runs/{rid(1)}/compare/{rid(2)}").status_code == 401


def test_the_previous_successful_run_of_the_application(client, store):
    docs = [make_doc(rid(10), started=100.0), make_doc(rid(11), started=200.0, status="FAILED"),
            make_doc(rid(12), started=300.0, app="other"), make_doc(rid(13), started=400.0),
            make_doc(rid(14), started=500.0, status="FAILED"), make_doc(rid(15), started=600.0)]
    store.ingest_many([row_of(d) for d in docs])
    previous = {i: client.get(f"/api/runs/{rid(i)}").json()["previous_successful"] for i in range(10, 16)}
    assert previous == {10: None, 11: rid(10), 12: None, 13: rid(10), 14: rid(13), 15: rid(13)}


def test_data_quality_columns_sorting_and_the_malformed_share_filter(client, store):
    shares = {20: {}, 21: {"no_match": 1}, 22: {"no_match": 5}, 23: {"no_match": 8, "invalid_utf8": 2}}
    docs = [make_doc(rid(i), started=float(i), malformed=bad) for i, bad in shares.items()]
    docs[0]["run"]["steps"][0]["dropped_size_dash"] = 4
    store.ingest_many([row_of(d) for d in docs])
    body = client.get("/api/runs?sort=malformed_share&order=desc").json()
    got = [(r["run_id"], r["records_read"], r["malformed"], r["malformed_share"], r["dropped"]) for r in body["runs"]]
    assert got == [(rid(23), 10, 10, 1.0, 0), (rid(22), 10, 5, 0.5, 0), (rid(21), 10, 1, 0.1, 0),
                   (rid(20), 10, 0, 0.0, 4)]
    assert [r["warning"] is not None for r in body["runs"]] == [True, True, True, False]
    at_least = client.get("/api/runs?min_malformed_share=0.5&sort=run_id&order=asc").json()
    assert [r["run_id"] for r in at_least["runs"]] == [rid(22), rid(23)] and at_least["total"] == 2
    between = client.get("/api/runs?min_malformed_share=0.05&max_malformed_share=0.5").json()
    assert {r["run_id"] for r in between["runs"]} == {rid(21), rid(22)}
    assert [r["run_id"] for r in client.get("/api/runs?sort=dropped&order=desc").json()["runs"]][0] == rid(20)
    for bad in ("1.5", "-0.1", "abc", "nan"):
        r = client.get(f"/api/runs?min_malformed_share={bad}")
        assert r.status_code == 400 and r.json()["error"]["message"] == (
            f"min_malformed_share must be a number from 0 to 1 (0.05 is 5 %), not {bad!r}")


def uncounted_doc(i: int) -> dict:
    """A failed Spark run whose parse step failed before its counters came back (lines read unknown)."""
    doc = make_doc(rid(i), status="FAILED", started=float(i))
    run = doc["run"]
    run["engine"] = "spark"
    run["steps"][0].update(status="FAILED", counters={}, lines_read=None, malformed=None, dropped_size_dash=None)
    run["records_read"], run["malformed_share"] = None, None
    return doc


def test_a_run_whose_parse_was_not_counted_lists_and_compares_as_unknown(client, store):
    """Unknown counts are shown as unknown (null, an empty cell), not as 0 lines and 0 malformed."""
    run = FlowRun(program="join", engine="spark")
    run.steps = [StepRun("parse", 0, ["parse"], status="FAILED", lines_read=None)]
    assert (run.counted, run.lines_read, run.malformed_share, run.dropped_size_dash, run.warning) == (
        False, None, None, None, None)
    assert run_document(run, programs.get("join"), application="a", owner="o", tags={}, seq=1)["run"][
        "records_read"] is None
    store.ingest_many([row_of(d) for d in (uncounted_doc(30), make_doc(rid(31), started=31.0,
                                                                         malformed={"no_match": 2}))])
    body = client.get("/api/runs?sort=run_id&order=asc").json()
    got = [(r["run_id"], r["records_read"], r["malformed"], r["malformed_share"], r["dropped"]) for r in body["runs"]]
    assert got == [(rid(30), None, None, None, None), (rid(31), 10, 2, 0.2, 0)]
    assert client.get("/api/runs?min_malformed_share=0").json()["total"] == 1
    result = client.get(f"/api/runs/{rid(30)}/compare/{rid(31)}").json()
    run_rows = rows_of(result, "Run")
    assert [run_rows[k] for k in ("lines read", "malformed lines", "malformed share", "dropped (size '-')")] == [
        (None, 10, True), (None, 2, True), (None, 0.2, True), (None, 0, True)]
    assert rows_of(result, "Malformed lines by reason") == {"no_match": (None, 2, True)}


def test_a_real_run_records_its_inputs_options_and_flow_hash(tmp_path):
    out = str(tmp_path / "out")
    run = run_program("join", CORPUS_LOG, {"output": out}, trap=str(tmp_path / "trap"), monitor=False,
                      engine_options={"memory_limit": 400 << 20})
    assert run.inputs == [{"path": os.path.abspath(CORPUS_LOG), "size": os.path.getsize(CORPUS_LOG)}]
    assert run.flow_hash == hashlib.sha256(programs.get("join").explain().encode()).hexdigest()[:16]
    assert run.options == {"checkpoint_dir": None, "engine": "local", "format": "combined", "max_malformed": None,
                           "memory_limit": 400 << 20, "outputs": {"output": out}, "overwrite": False,
                           "trap": str(tmp_path / "trap")}
    assert run.to_dict()["flow_hash"] == run.flow_hash


def test_secret_looking_options_are_not_sent():
    run = FlowRun(program="join", engine="spark")
    run.describe({"definition": "x", "inputs": [], "options": {}, "outputs": {}},
                 {"conf": {"spark.hadoop.fs.s3a.secret.key": "s3cr3t", "spark.executor.memory": "2g",
                           "spark.hadoop.fs.s3a.access.key": "AKIA"}, "master": "local[2]"})
    assert run.options["conf"] == {"spark.executor.memory": "2g", "spark.hadoop.fs.s3a.access.key": "***",
                                   "spark.hadoop.fs.s3a.secret.key": "***"}


LAYOUT_2 = """CREATE TABLE runs (run_id VARCHAR(32) NOT NULL, owner VARCHAR(200) NOT NULL,
    application VARCHAR(200) NOT NULL, program VARCHAR(50) NOT NULL, engine VARCHAR(20) NOT NULL,
    status VARCHAR(12) NOT NULL, started_at FLOAT, finished_at FLOAT, duration FLOAT, records_read BIGINT,
    records_written BIGINT, seq INTEGER NOT NULL, tags TEXT NOT NULL, warning TEXT, document TEXT NOT NULL,
    updated_at FLOAT NOT NULL, CONSTRAINT runs_pk PRIMARY KEY (owner, run_id))"""


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_store_of_layout_2_gets_the_quality_columns_filled_from_its_documents(tmp_path, request, backend):
    from sqlalchemy import create_engine

    url = f"sqlite:///{tmp_path}/v2.db" if backend == "sqlite" else request.getfixturevalue("postgres_url")
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE IF EXISTS runs, api_keys, settings, sessions" if backend == "postgresql"
                             else "SELECT 1")
        conn.exec_driver_sql(LAYOUT_2)
        docs = [make_doc(rid(60), malformed={"no_match": 2}, started=60.0), make_doc(rid(61), started=61.0),
                uncounted_doc(59)]
        for doc in docs:
            row = row_of(doc, "alice")
            for column in ADDED_IN_3:
                del row[column]
            mark = "%s" if backend == "postgresql" else "?"
            conn.exec_driver_sql(f"INSERT INTO runs ({', '.join(row)}) VALUES ({', '.join(mark for _ in row)})",
                                 tuple(row.values()))
    engine.dispose()
    store = Store(url)
    try:
        rows, total = store.list_runs(sort="run_id", descending=False)
        assert total == 3
        assert [(r["run_id"], r["malformed"], r["malformed_share"], r["dropped"], r["progress"]) for r in rows] == [
            (rid(59), None, None, None, None), (rid(60), 2, 0.2, 0, None), (rid(61), 0, 0.0, 0, None)]
        assert store.list_runs(min_malformed_share=0.1)[1] == 1
        # each run is taken once, in key order: the one whose columns stay null is not taken again (a
        # batch of such runs taken again and again never ended)
        filling = threading.Thread(target=store._fill_quality, kwargs={"batch": 1}, daemon=True)
        filling.start()
        filling.join(timeout=60)
        assert not filling.is_alive()
        Store(url).engine.dispose()                                               # twice is harmless
    finally:
        store.engine.dispose()
