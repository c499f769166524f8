"""The monitor's store and JSON API, in-process, against SQLite and a real PostgreSQL server."""
from __future__ import annotations

import copy
import time

import pytest
from starlette.testclient import TestClient

from logetl import programs
from logetl.listener import FlowRun, StepRun
from logetl.monitor.app import create_app
from logetl.monitor.documents import MESSAGING_VERSION, graph, run_document
from logetl.monitor.store import SORTABLE, row_of


def make_doc(run_id="A" * 32, *, status="SUCCESSFUL", app="logetl-join", owner="alice", seq=1,
             started=1_700_000_000.0, duration=2.0, tags=None, malformed=None):
    flow = programs.get("join")
    run = FlowRun(program="join", engine="local", run_id=run_id, status=status, started_at=started,
                  finished_at=None if status == "RUNNING" else started + duration)
    run.steps = [StepRun(s.name, s.index, [n.name for n in s.nodes], status="SUCCESSFUL") for s in flow.steps]
    run.steps[0].counters = {"parse": {"in": 10, "out": 8}}
    run.steps[0].lines_read = 10
    run.steps[0].malformed = dict(malformed or {})
    run.written = {"output": 5}
    return run_document(run, flow, application=app, owner=owner, tags=tags or {}, seq=seq)


#: the address a loopback server is reached at (a keyless loopback server answers only loopback Host names)
LOCAL = "http://127.0.0.1:8080"


def csrf_of(client, path="/login") -> str:
    """The CSRF token a page's forms carry (its cookie is set on the client by the same answer)."""
    import re

    return re.search(r'name="csrf" value="([^"]+)"', client.get(path).text).group(1)


def login(client, key, **kw):
    return client.post("/login", data={"key": key, "csrf": csrf_of(client)}, **kw)


def warned_doc(run_id, **kw) -> dict:
    """A document whose run has 8 malformed lines out of 10: FlowRun gives it a warning."""
    return make_doc(run_id, malformed={"no_match": 8}, **kw)


@pytest.fixture
def client(store):
    with TestClient(create_app(store), base_url=LOCAL) as c:
        yield c


def rid(i: int) -> str:
    return f"{i:032X}"


def test_document_round_trip_keeps_graph_steps_and_counters(client):
    doc = make_doc(tags={"team": "web"})
    r = client.post("/api/documents", json=doc)
    assert r.status_code == 202 and r.json() == {"run_id": "A" * 32, "seq": 1, "stored": True}
    run = client.get("/api/runs/" + "A" * 32).json()["run"]
    assert run["status"] == "SUCCESSFUL" and run["owner"] == "alice" and run["tags"] == {"team": "web"}
    assert [s["name"] for s in run["steps"]] == ["parse", "join"]
    assert {"name", "status", "started_at", "finished_at", "counters"} <= set(run["steps"][0])
    assert run["steps"][0]["counters"]["parse"] == {"in": 10, "out": 8}
    assert run["graph"] == graph(programs.get("join"))
    kinds = {n["type"] for n in run["graph"]["nodes"]}
    assert kinds == {"step", "operator"}
    assert {"from": "step:parse", "to": "step:join", "type": "dependency"} in run["graph"]["edges"]


def test_newest_seq_wins_whatever_the_order(client):
    late = make_doc(status="SUCCESSFUL", seq=5)
    early = make_doc(status="RUNNING", seq=2)
    assert client.post("/api/documents", json=late).json()["stored"] is True
    assert client.post("/api/documents", json=early).json()["stored"] is False
    assert client.post("/api/documents", json=late).json()["stored"] is False   # a duplicate
    assert client.get("/api/runs/" + "A" * 32).json()["run"]["status"] == "SUCCESSFUL"


def test_list_filters_sorting_and_pagination(client, store):
    base = 1_700_000_000.0
    rows = []
    for i in range(120):
        status = ["SUCCESSFUL", "FAILED", "RUNNING"][i % 3]
        rows.append(row_of(make_doc(rid(i), status=status, app=f"app{i % 4}", started=base + i * 3600,
                                    duration=float(i))))
    store.ingest_many(rows)
    body = client.get("/api/runs?per_page=50").json()
    assert body["total"] == 120 and body["pages"] == 3 and len(body["runs"]) == 50
    assert body["runs"][0]["run_id"] == rid(119)       # newest first by default
    assert "document" not in body["runs"][0]
    page3 = client.get("/api/runs?per_page=50&page=3").json()
    assert len(page3["runs"]) == 20 and page3["runs"][-1]["run_id"] == rid(0)
    failed = client.get("/api/runs?status=FAILED&per_page=500").json()
    assert failed["total"] == 40 and {r["status"] for r in failed["runs"]} == {"FAILED"}
    two = client.get("/api/runs?status=FAILED&status=RUNNING&per_page=500").json()
    assert two["total"] == 80
    app1 = client.get("/api/runs?application=app1&sort=duration&order=asc").json()
    finished = sorted(float(i) for i in range(120) if i % 4 == 1 and i % 3 != 2)   # RUNNING: no duration
    assert app1["total"] == 30 and [r["duration"] for r in app1["runs"]][:3] == finished[:3] == [1.0, 9.0, 13.0]
    assert app1["runs"][-1]["duration"] is None                                        # nulls last
    # a date range: [since, until) on the start time, ISO dates or epoch seconds
    day = time.strftime("%Y-%m-%d", time.gmtime(base + 48 * 3600))
    in_day = client.get(f"/api/runs?since={day}&until={day}&per_page=500").json()
    assert in_day["total"] == 24
    epoch = client.get(f"/api/runs?since={base + 10 * 3600}&until={base + 20 * 3600}").json()
    assert epoch["total"] == 10
    for col in SORTABLE:
        assert client.get(f"/api/runs?sort={col}&order=asc").status_code == 200
    assert client.get("/api/applications").json() == {"applications": ["app0", "app1", "app2", "app3"]}


def test_every_api_error_has_one_json_shape(client):
    """The error shape, enforced over every kind of failure the API can give."""
    bad_doc = make_doc()
    bad_doc["messaging_version"] = "0.9"
    cases = [
        client.get("/api/runs/" + "F" * 32),                                    # 404 unknown run
        client.get("/api/nothing-here"),                                        # 404 no route
        client.post("/api/runs"),                                               # 405
        client.get("/api/runs?status=BOGUS"),                                   # 400 bad filter
        client.get("/api/runs?sort=password"),                                  # 400 bad sort
        client.get("/api/runs?since=yesterday"),                                # 400 bad date
        client.get("/api/runs?per_page=0"),                                     # 400 out of range
        client.get("/api/runs?page=x"),                                         # 400 not a number
        client.post("/api/documents", content=b"{not json", headers={"content-type": "application/json"}),
        client.post("/api/documents", content=b"x", headers={"content-type": "text/plain"}),   # 415
        client.post("/api/documents", json=bad_doc),                            # 422
        client.post("/api/documents", json={"messaging_version": MESSAGING_VERSION, "seq": 1, "run": {}}),
        client.post("/api/documents", json=[1, 2]),
        client.post("/api/documents", content=b"[" + b"1," * (3 << 20) + b"1]",
                    headers={"content-type": "application/json"}),            # 413
    ]
    seen = set()
    for r in cases:
        body = r.json()
        assert set(body) == {"error"}, body
        err = body["error"]
        assert set(err) == {"status", "code", "message"}, err
        assert err["status"] == r.status_code and r.status_code >= 400
        assert isinstance(err["code"], str) and err["code"] and isinstance(err["message"], str) and err["message"]
        seen.add(r.status_code)
    assert seen == {400, 404, 405, 413, 415, 422}


def test_document_validation_names_the_field(client):
    doc = make_doc()
    doc["run"]["run_id"] = "abc"
    r = client.post("/api/documents", json=doc)
    assert r.status_code == 422 and "run_id" in r.json()["error"]["message"]
    doc = make_doc()
    doc["run"]["status"] = "DONE"
    assert "run.status" in client.post("/api/documents", json=doc).json()["error"]["message"]


def _set(doc: dict, path: str, value) -> dict:
    """``doc`` with the field at ``path`` (``run.steps.0.counters``) set to ``value``."""
    *parents, last = path.split(".")
    at = doc
    for key in parents:
        at = at[int(key)] if isinstance(at, list) else at[key]
    at[int(last) if isinstance(at, list) else last] = value
    return doc


MAX = 2**63 - 1
COUNTS = f"an object of whole numbers from 0 to {MAX}"
TIME = "a time in epoch seconds from 0 to 253402300799 (year 9999), or null"


@pytest.mark.parametrize("path,value,message", [
    ("run.inputs", 5, 'run.inputs must be a list of paths or of {"path": string, "size": count or null}'),
    ("run.inputs", [{"path": {}, "size": 1}],
     'run.inputs must be a list of paths or of {"path": string, "size": count or null}'),
    ("run.inputs", [{"path": "/a", "size": -1}],
     'run.inputs must be a list of paths or of {"path": string, "size": count or null}'),
    ("run.options", "x", "run.options must be an object"),
    ("run.written", "x", f"run.written must be {COUNTS}"),
    ("run.written", {"output": -5}, f"run.written must be {COUNTS}"),
    ("run.steps.0.counters", {"a": 5},
     'run.steps[0].counters must be an object of operators\' counts ({"parse": {"in": 10, "out": 8}}), each a '
     f"whole number from 0 to {MAX}"),
    ("run.steps.1.malformed", "x", f"run.steps[1].malformed must be {COUNTS}"),
    ("run.steps.0.lines_read", "10", f"run.steps[0].lines_read must be a whole number from 0 to {MAX}, or null"),
    ("run.steps.0", "parse", "run.steps[0] must be an object with a name (a string)"),
    ("run.steps.0.finished_at", 1e300, f"run.steps[0].finished_at must be {TIME}"),
    ("run.started_at", 1e300, f"run.started_at must be {TIME}"),
    ("run.started_at", -1e300, f"run.started_at must be {TIME}"),
    ("run.finished_at", -1.0, f"run.finished_at must be {TIME}"),
    ("run.duration", -2.0, "run.duration must be a number of seconds >= 0, or null"),
    ("run.graph.nodes", 5, "run.graph.nodes must be a list"),
])
def test_fields_that_pages_read_are_checked_at_ingest(client, path, value, message):
    """Each of these was stored, then made the comparison (API and page), pruning or the trend fail or lie."""
    r = client.post("/api/documents", json=_set(make_doc(), path, value))
    assert (r.status_code, r.json()) == (422, {"error": {"status": 422, "code": "invalid_document",
                                                         "message": message}})
    assert client.get("/api/runs/" + "A" * 32).status_code == 404


def test_fields_of_the_right_shape_are_taken(client):
    """Every field may be null or missing (older versions), inputs may be bare paths, and the bounds hold."""
    doc = make_doc(started=0.0, duration=0.0)
    run = doc["run"]
    run.update(inputs=["/logs/a.log"], options=None, written={}, finished_at=253402300799.0)
    run["steps"][0].update(counters={}, malformed=None, started_at=None)
    del run["graph"]
    assert client.post("/api/documents", json=doc).status_code == 202


def test_the_run_list_filters_by_tag_as_the_search_does(client):
    for i, tags in enumerate([{"env": "t1"}, {"env": "t10"}, {"env": "t1", "team": "web"}, {}]):
        assert client.post("/api/documents", json=make_doc(rid(i), tags=tags)).status_code == 202

    def ids(query):
        r = client.get("/api/runs?" + query)
        assert r.status_code == 200, r.text
        return sorted(x["run_id"] for x in r.json()["runs"])

    assert ids("tag=env=t1") == [rid(0), rid(2)]
    assert ids("tag=env") == [rid(0), rid(1), rid(2)]
    assert ids("tag=team=web&status=SUCCESSFUL") == [rid(2)]
    assert ids("tag=env=t2") == []
    assert client.get("/api/runs?tag=env=t1").json()["total"] == 2


@pytest.mark.parametrize("query,name", [("tags=env=t1", "tags"), ("staus=FAILED", "staus"),
                                        ("q=x&z=1", "q")])
def test_the_run_list_refuses_a_parameter_it_does_not_know(client, query, name):
    """A misspelt filter would list every run as if it had been applied."""
    client.post("/api/documents", json=make_doc())
    r = client.get("/api/runs?" + query)
    assert (r.status_code, r.json()) == (400, {"error": {"status": 400, "code": "bad_request", "message": (
        f"unknown parameter {name!r}: /api/runs takes status, application, since, until, tag, sort, order, page, "
        "per_page, min_malformed_share, max_malformed_share")}})


def test_pages_render(client):
    client.post("/api/documents", json=make_doc())
    page = client.get("/")
    assert page.status_code == 200 and "All applications" in page.text and "/static/app.js" in page.text
    run = client.get("/runs/" + "A" * 32)
    assert run.status_code == 200 and 'Logetl.runPage("' + "A" * 32 + '")' in run.text
    missing = client.get("/runs/" + "B" * 32)
    assert missing.status_code == 404 and "<h1>404</h1>" in missing.text
    js = client.get("/static/app.js")
    assert js.status_code == 200 and "runsPage" in js.text
    assert "http" not in client.get("/static/style.css").text    # everything is local: no CDN


# --- API keys ----------------------------------------------------------------------------------------------

def test_keys_are_prefixed_hashed_and_checked(store):
    key = store.create_key("alice")
    assert key.startswith("lgt_") and len(key) > 30
    assert store.user_of_key(key) == "alice"
    assert store.user_of_key(key[:-1] + ("x" if key[-1] != "x" else "y")) is None
    assert store.user_of_key("lgt_nope_nope") is None and store.user_of_key("") is None
    with store.engine.connect() as conn:
        stored = [tuple(r) for r in conn.exec_driver_sql("SELECT prefix, hash FROM api_keys")]
    assert key not in str(stored) and stored[0][0] in key
    assert store.revoke_key(key.split("_")[0] + "_" + key.split("_")[1])
    assert store.user_of_key(key) is None


def auth(key):
    return {"Authorization": f"Bearer {key}"}


def test_with_keys_every_call_needs_one_and_users_see_only_their_runs(keyed):
    client, alice, bob = keyed
    doc = make_doc(rid(1), owner="whoever-the-document-says")
    assert client.post("/api/documents", json=doc, headers=auth(alice)).status_code == 202
    assert client.post("/api/documents", json=make_doc(rid(2)), headers=auth(bob)).status_code == 202
    mine = client.get("/api/runs", headers=auth(alice)).json()
    assert [r["run_id"] for r in mine["runs"]] == [rid(1)] and mine["runs"][0]["owner"] == "alice"
    assert client.get(f"/api/runs/{rid(1)}", headers=auth(alice)).status_code == 200
    # another user's run does not exist for bob: same answer as a run that does not exist at all
    theirs = client.get(f"/api/runs/{rid(1)}", headers=auth(bob))
    nobody = client.get(f"/api/runs/{'E' * 32}", headers=auth(bob))
    assert theirs.status_code == nobody.status_code == 404
    assert theirs.json()["error"]["message"].replace(rid(1), "X") == nobody.json()["error"]["message"].replace("E" * 32, "X")
    assert client.get(f"/runs/{rid(1)}", headers=auth(bob)).status_code == 404
    assert client.get("/api/applications", headers=auth(bob)).json() == {"applications": ["logetl-join"]}
    # bob cannot overwrite alice's run by sending a newer document for it: it becomes a run of his own
    hijack = make_doc(rid(1), status="FAILED", seq=9)
    assert client.post("/api/documents", json=hijack, headers=auth(bob)).json()["stored"] is True
    assert client.get(f"/api/runs/{rid(1)}", headers=auth(alice)).json()["run"]["status"] == "SUCCESSFUL"
    assert client.get(f"/api/runs/{rid(1)}", headers=auth(bob)).json()["run"]["status"] == "FAILED"


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer lgt_00000000_wrong"},
                                     {"Authorization": "Bearer "}, {"Authorization": "Basic YWxpY2U6eA=="}])
def test_missing_or_wrong_key_is_401_and_reveals_nothing(keyed, headers):
    client, alice, _ = keyed
    client.post("/api/documents", json=make_doc(rid(1)), headers=auth(alice))
    for method, path in [("GET", "/api/runs"), ("GET", f"/api/runs/{rid(1)}"), ("GET", f"/api/runs/{'E' * 32}"),
                         ("GET", "/api/applications"), ("POST", "/api/documents")]:
        r = client.request(method, path, headers=headers, json=make_doc(rid(3)) if method == "POST" else None)
        assert r.status_code == 401, path
        assert r.json() == {"error": {"status": 401, "code": "unauthorized", "message": "a valid API key is needed"}}
    for path in ("/", f"/runs/{rid(1)}"):
        r = client.get(path, headers=headers)
        assert r.status_code == 401 and rid(1) not in r.text and "API key" in r.text
    assert client.get("/api/runs", headers=auth(alice)).json()["total"] == 1   # nothing was stored


def test_login_form_sets_a_session_and_logout_ends_it(keyed):
    client, alice, _ = keyed
    client.post("/api/documents", json=make_doc(rid(1)), headers=auth(alice))
    bad = login(client, "lgt_x_y")
    assert bad.status_code == 401 and "not valid" in bad.text
    ok = login(client, alice, follow_redirects=False)
    assert ok.status_code == 303 and "logetl_session" in ok.headers["set-cookie"].lower()
    assert alice not in ok.headers["set-cookie"]
    assert client.get("/api/runs").json()["total"] == 1
    assert client.get("/").status_code == 200
    client.post("/logout", data={"csrf": csrf_of(client, "/")})
    assert client.get("/api/runs").status_code == 401


def test_require_key_without_any_key_refuses_everyone(store):
    with TestClient(create_app(store, require_key=True), base_url=LOCAL) as c:
        assert c.get("/api/runs").status_code == 401
        assert c.get("/api/health").status_code == 200


def test_without_keys_everyone_sees_every_run(client):
    client.post("/api/documents", json=make_doc(rid(1), owner="alice"))
    client.post("/api/documents", json=make_doc(rid(2), owner="bob"))
    assert client.get("/api/runs").json()["total"] == 2


def test_a_revoked_key_ends_its_session(store):
    key = store.create_key("alice")
    with TestClient(create_app(store), base_url=LOCAL) as c:
        login(c, key)
        assert c.get("/api/runs").status_code == 200
        store.revoke_key(key.split("_")[1])
        store.create_key("someone-else")       # the server still has keys
        assert c.get("/api/runs").status_code == 401


def test_copy_of_a_document_is_not_changed_by_ingest(store):
    doc = make_doc()
    before = copy.deepcopy(doc)
    store.ingest(doc)
    assert doc == before
