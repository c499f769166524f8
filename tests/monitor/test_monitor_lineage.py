"""Lineage: runs found by input or output path, tag and error text (API, search page), and OpenLineage run
events (START, then COMPLETE / FAIL) with input and output datasets, sent by the monitor server to a real
HTTP receiver on loopback. Real runs through the command line, embedded and remote."""
from __future__ import annotations

import json
import os
import re
import sqlite3
import uuid

import pytest
from starlette.testclient import TestClient

from conftest import CORPUS, logetl, require
from receiver import Receiver, wait_for
from test_monitor_api import LOCAL, make_doc, rid
from test_monitor_runs import Server
from logetl import __version__
from logetl.monitor import lineage
from logetl.monitor.app import create_app
from logetl.monitor.store import Store

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")


def run_id_of(p) -> str:
    return re.search(r"/runs/([0-9A-F]{32})", p.stderr.decode()).group(1)


def lineage_doc(i, *, inputs, outputs, error=None, tags=None, status="SUCCESSFUL", owner="alice"):
    d = make_doc(rid(i), status=status, tags=tags, owner=owner, started=1_700_000_000.0 + i)
    d["run"].update(inputs=inputs, outputs=outputs, error=error)
    return d


def ids(body) -> list[str]:
    return [r["run_id"] for r in body["runs"]]


def test_real_runs_are_found_by_input_output_tag_and_error(tmp_path):
    home = tmp_path / "home"
    env = {"LOGETL_HOME": str(home)}
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.log").write_bytes(open(CORPUS_LOG, "rb").read())
    (logs / "b.log").write_bytes(open(CORPUS_LOG, "rb").read()[:2000])
    joined = logetl("join", CORPUS_LOG, str(tmp_path / "out" / "joined"), env=env)
    filtered = logetl("filter", "--input", str(logs), "--output", str(tmp_path / "out" / "clients"),
                      "--tag", "team=web", env=env)
    failed = logetl("join", CORPUS_LOG, str(tmp_path / "out" / "broken"), env={**env, "LOGETL_FAIL_AT": "join"})
    assert (joined.returncode, filtered.returncode, failed.returncode) == (0, 0, 1)
    j, f, x = run_id_of(joined), run_id_of(filtered), run_id_of(failed)
    store = Store(f"sqlite:///{home}/monitor.db")
    run = store.get_run(f)
    assert [i["path"] for i in run["inputs"]] == [str(logs / "a.log"), str(logs / "b.log")]
    assert run["outputs"] == {"output": str(tmp_path / "out" / "clients")}
    with TestClient(create_app(store), base_url=LOCAL) as client:
        assert ids(client.get("/api/search", params={"input": CORPUS_LOG}).json()) == [x, j]
        assert ids(client.get("/api/search", params={"input": str(logs)}).json()) == [f]       # a directory
        assert ids(client.get("/api/search", params={"input": "B.LOG"}).json()) == [f]         # any case
        assert ids(client.get("/api/search", params={"output": "out/joined"}).json()) == [j]
        assert ids(client.get("/api/search", params={"tag": "team=web"}).json()) == [f]
        assert ids(client.get("/api/search", params={"tag": "team"}).json()) == [f]
        assert ids(client.get("/api/search", params={"tag": "team=ops"}).json()) == []
        body = client.get("/api/search", params={"error": "INJECTED FAILURE"}).json()
        assert ids(body) == [x] and body["total"] == 1
        assert "injected failure at step 'join'" in body["runs"][0]["error"]
        assert body["runs"][0]["outputs"] == [str(tmp_path / "out" / "broken")]
        assert ids(client.get("/api/search", params={"input": "corpus.log", "output": "broken"}).json()) == [x]
        assert ids(client.get("/api/search", params={"q": "out/clients"}).json()) == [f]
        assert ids(client.get("/api/search", params={"q": "team=web"}).json()) == []   # q matches the text
        assert ids(client.get("/api/search", params={"q": "logetl-filter"}).json()) == [f]   # the application
        assert ids(client.get("/api/search", params={"q": "50%_"}).json()) == []       # no LIKE wildcards
        r = client.get("/api/search")
        assert r.status_code == 400 and r.json() == {"error": {
            "status": 400, "code": "bad_request", "message": "give at least one of q, input, output, tag, error"}}
        page = client.get("/search", params={"q": "corpus"})
        assert page.status_code == 200 and 'value="corpus"' in page.text


def test_search_on_both_stores_is_per_user(store):
    store.ingest(lineage_doc(1, inputs=["/data/web/2026-01-01.log"], outputs={"output": "/out/a"},
                             tags={"env": "prod"}), owner="alice")
    store.ingest(lineage_doc(2, inputs=["/data/web/2026-01-02.log"], outputs={"output": "/out/b"},
                             error="input file '/data/web/2026-01-02.log' is not readable", status="FAILED"),
                 owner="bob")
    store.ingest(lineage_doc(3, inputs=["/data/app/x.log"], outputs={"output": "/out/100%_done"}), owner="alice")
    alice, bob = store.create_key("alice"), store.create_key("bob")
    A, B = ({"Authorization": f"Bearer {k}"} for k in (alice, bob))
    with TestClient(create_app(store), base_url=LOCAL) as client:
        assert ids(client.get("/api/search?input=/data/web/", headers=A).json()) == [rid(1)]
        assert ids(client.get("/api/search?input=/data/web/", headers=B).json()) == [rid(2)]
        assert ids(client.get("/api/search?error=NOT READABLE", headers=A).json()) == []
        assert ids(client.get("/api/search?error=NOT READABLE", headers=B).json()) == [rid(2)]
        assert ids(client.get("/api/search?tag=env=prod", headers=A).json()) == [rid(1)]
        assert ids(client.get("/api/search", params={"output": "100%_d"}, headers=A).json()) == [rid(3)]
        assert ids(client.get("/api/search", params={"output": "100%_x"}, headers=A).json()) == []
        assert client.get("/api/search?q=data").status_code == 401


def lineage_events(receiver, n):
    reqs = receiver.wait(n)
    assert {r["path"] for r in reqs} == {"/api/v1/lineage"}
    return [r["body"] for r in reqs]


def test_a_remote_run_sends_start_and_complete_with_its_datasets(tmp_path):
    require(lineage.available() is None, lineage.available() or "")
    store = Store(f"sqlite:///{tmp_path}/m.db")
    out = tmp_path / "out"
    with Receiver() as ol, Server(store, openlineage_url=ol.url, openlineage_namespace="web-etl") as srv:
        p = logetl("join", CORPUS_LOG, str(out), "--app-name", "nightly",
                   env={"LOGETL_MONITOR_URL": srv.url, "LOGETL_HOME": str(tmp_path / "home")})
        assert p.returncode == 0, p.stderr
        start, complete = lineage_events(ol, 2)
    run = store.get_run(run_id_of(p))
    assert start["eventType"] == "START" and complete["eventType"] == "COMPLETE"
    for ev in (start, complete):
        # keyed by owner and run: a UUID of the owner in the run id's namespace, and the owner's job
        assert ev["run"]["runId"] == str(uuid.uuid5(uuid.UUID(hex=run["run_id"]), run["owner"]))
        assert {t["key"]: t["value"] for t in ev["run"]["facets"]["tags"]["tags"]} == {
            "logetl.run_id": run["run_id"], "logetl.owner": run["owner"]}
        assert ev["producer"] == "https://github.com/logetl/logetl"
        assert ev["schemaURL"].startswith("https://openlineage.io/spec/") and ev["schemaURL"].endswith("#/$defs/RunEvent")
        assert ev["job"]["namespace"] == "web-etl" and ev["job"]["name"] == f"{run['owner']}/nightly"
        assert ev["job"]["facets"]["jobType"]["processingType"] == "BATCH"
        assert ev["run"]["facets"]["processing_engine"]["name"] == "logetl"
        assert ev["run"]["facets"]["processing_engine"]["version"] == __version__
        assert ev["inputs"] == [{"namespace": "file", "name": CORPUS_LOG, "facets": {}, "inputFacets": {}}]
    assert start["outputs"] == [{"namespace": "file", "name": str(out), "facets": {}, "outputFacets": {}}]
    [output] = complete["outputs"]
    assert (output["namespace"], output["name"]) == ("file", str(out))
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == run["records_written"] == 18
    from datetime import datetime
    assert datetime.fromisoformat(start["eventTime"]).timestamp() == pytest.approx(run["started_at"], abs=0.001)
    assert datetime.fromisoformat(complete["eventTime"]).timestamp() == pytest.approx(run["finished_at"], abs=0.001)


def test_a_failed_run_sends_fail_with_its_error_and_events_keep_their_order(tmp_path):
    require(lineage.available() is None, lineage.available() or "")
    store = Store(f"sqlite:///{tmp_path}/m.db")
    # the receiver refuses the first event for a while: the run's next event waits behind it
    with Receiver(statuses=[503, 200]) as ol, \
            TestClient(create_app(store, openlineage_url=ol.url + "/", delivery_backoff=0.3), base_url=LOCAL) as c:
        c.post("/api/documents", json=lineage_doc(1, status="RUNNING", inputs=["/logs/a.log"],
                                                  outputs={"output": "hdfs://nn:8020/out/joined"}))
        c.post("/api/documents", json={**lineage_doc(1, status="FAILED", inputs=["/logs/a.log"],
                                                     outputs={"output": "hdfs://nn:8020/out/joined"},
                                                     error="injected failure at step 'join'"), "seq": 2})
        events = lineage_events(ol, 3)
        assert [e["eventType"] for e in events] == ["START", "START", "FAIL"]
        fail = events[2]
        assert fail["run"]["facets"]["errorMessage"]["message"] == "injected failure at step 'join'"
        assert fail["run"]["facets"]["errorMessage"]["programmingLanguage"] == "python"
        assert fail["outputs"] == [{"namespace": "hdfs://nn:8020", "name": "/out/joined", "facets": {},
                                    "outputFacets": {}}]
        got = wait_for(lambda: (lambda ds: ds if len(ds) == 2 and all(d["state"] == "delivered" for d in ds)
                                else None)(c.get("/api/deliveries?kind=openlineage").json()["deliveries"]))
        assert [(d["event"], [t["status"] for t in d["tries"]]) for d in got] == [("START", [503, 200]),
                                                                                  ("FAIL", [200])]


def test_a_bad_openlineage_url_is_one_line(tmp_path):
    p = logetl("monitor", "--openlineage-url", "lineage.example:5000", "--db", f"sqlite:///{tmp_path}/m.db")
    assert (p.returncode, p.stderr.decode()) == (
        2, "Error: --openlineage-url must be an http:// or https:// URL, not 'lineage.example:5000'\n")


NEW_TABLES = ["alert_rules", "alerts", "deliveries", "delivery_attempts", "run_checks", "run_lineage",
              "daily_aggregates"]


def test_a_store_of_the_previous_layout_is_migrated_and_its_runs_indexed(tmp_path):
    home = tmp_path / "home"
    env = {"LOGETL_HOME": str(home)}
    first = logetl("filter", "--input", CORPUS_LOG, "--output", str(tmp_path / "a"), env=env)
    assert first.returncode == 0
    db = home / "monitor.db"
    with sqlite3.connect(db) as conn:        # back to layout 2: no new tables, no index, user_version 2
        for t in NEW_TABLES:
            conn.execute(f"DROP TABLE {t}")
        conn.execute("DROP INDEX runs_updated_at")
        conn.execute("DELETE FROM settings WHERE key = 'lineage_indexed'")
        conn.execute("PRAGMA user_version=2")
    # the next run migrates the store it records into; the earlier run is kept and indexed
    second = logetl("filter", "--input", CORPUS_LOG, "--output", str(tmp_path / "b"), env=env)
    assert second.returncode == 0, second.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 3
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert set(NEW_TABLES) | {"runs_updated_at"} <= names
    store = Store(f"sqlite:///{db}")
    with TestClient(create_app(store), base_url=LOCAL) as client:
        assert ids(client.get("/api/search", params={"input": CORPUS_LOG}).json()) == [run_id_of(second),
                                                                                        run_id_of(first)]
        assert ids(client.get("/api/search", params={"output": str(tmp_path / "a")}).json()) == [run_id_of(first)]
    Store(f"sqlite:///{db}").engine.dispose()        # twice is harmless: indexed once
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM run_lineage").fetchone()[0] == 4


def test_an_event_of_a_run_stored_before_its_fields_were_checked(tmp_path):
    """Written, outputs and times of the wrong shape or range (ingest now refuses them): the event is made
    with what can be taken, its time clamped to the years a date can have, instead of failing each time."""
    require(lineage.available() is None, "the OpenLineage client is not installed")
    run = make_doc(rid(5))["run"]
    run.update(written="x", outputs=["/out"], inputs=5, finished_at=1e300)
    event = json.loads(lineage.event(run, "COMPLETE", "logetl"))
    assert event["eventTime"] == "9999-12-31T23:59:59.000Z" and event["inputs"] == event["outputs"] == []
    run.update(outputs={"output": "/out", "bad": 5}, started_at=-1e300)
    event = json.loads(lineage.event(run, "START", "logetl"))
    assert event["eventTime"] == "1970-01-01T00:00:00.000Z"
    assert [o["name"] for o in event["outputs"]] == ["/out"]
