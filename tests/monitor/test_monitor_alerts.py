"""Alert rules: evaluated by the monitor server when a run's final document arrives (posted, or recorded by an
embedded run), delivered to a real HTTP receiver on loopback with retries and back-off, every attempt
recorded; managed through the API and `logetl monitor alerts`. SQLite and a real PostgreSQL server."""
from __future__ import annotations

import os
import time

import pytest
from starlette.testclient import TestClient

from conftest import CORPUS, free_port, logetl
from receiver import Receiver, wait_for
from test_monitor_api import LOCAL, make_doc, rid
from test_monitor_runs import Server
from logetl.monitor import alerts as alerting
from logetl.monitor.app import create_app
from logetl.monitor.store import Store, row_of
from logetl.monitor.worker import delivery_log

PUBLIC = "http://monitor.example:8080"
T0 = 1_700_000_000.0


#: the receivers listen on loopback, which webhooks may reach only when the server allows it
LOOPBACK = ("127.0.0.1",)


def doc(i, *, status="SUCCESSFUL", app="nightly", records=100, duration=2.0, started=None, tags=None, seq=1,
        owner="alice", error=None, malformed=None):
    d = make_doc(rid(i), status=status, app=app, owner=owner, seq=seq, started=started or T0 + i * 3600,
                 duration=duration, tags=tags, malformed=malformed)
    d["run"]["records_written"] = records
    d["run"]["error"] = error
    return d


@pytest.fixture
def app_client(store):
    with TestClient(create_app(store, public_url=PUBLIC, delivery_backoff=0.05, webhook_allow=LOOPBACK), base_url=LOCAL) as c:
        yield c


def add(client, **rule):
    r = client.post("/api/alert-rules", json=rule)
    assert r.status_code == 201, r.text
    return r.json()["rule"]


def test_a_failed_run_posts_one_webhook_with_the_run_and_its_link(app_client, store):
    with Receiver() as hook:
        rule = add(app_client, application="nightly", when="failed", webhook=hook.url + "/logetl")
        assert rule == {"id": rule["id"], "application": "nightly", "tag": None, "when": "failed", "threshold": None,
                        "last": None, "webhook": hook.url + "/logetl", "owner": None,
                        "created_at": rule["created_at"]}
        before = time.time()
        app_client.post("/api/documents", json=doc(1, status="RUNNING", tags={"team": "web"}))
        app_client.post("/api/documents", json=doc(2, status="FAILED", app="other", error="x"))   # not watched
        app_client.post("/api/documents", json=doc(1, status="FAILED", seq=2, tags={"team": "web"},
                                                   error="injected failure at step 'join'"))
        [req] = hook.wait(1)
        body = req["body"]
        assert req["path"] == "/logetl" and req["headers"]["Content-Type"] == "application/json"
        alert_id = body["alert_id"]
        assert before <= body["fired_at"] <= time.time()
        assert body == {
            "alert_id": alert_id, "run_id": rid(1), "application": "nightly", "owner": "alice", "status": "FAILED",
            "tags": {"team": "web"}, "rule": {"id": rule["id"], "when": "failed", "threshold": None, "last": None,
                                              "tag": None},
            "message": "run failed: injected failure at step 'join'",
            "values": {"status": "FAILED", "error": "injected failure at step 'join'"},
            "run_url": f"{PUBLIC}/runs/{rid(1)}", "fired_at": body["fired_at"]}
        # the same final state again (a resent document) fires nothing more
        app_client.post("/api/documents", json=doc(1, status="FAILED", seq=3, tags={"team": "web"}, error="x"))
        app_client.post("/api/documents", json=doc(3, status="SUCCESSFUL"))
        wait_for(lambda: len(delivery_log(store)) == 1 and delivery_log(store)[0]["state"] == "delivered")
        time.sleep(1.2)      # a poll later, still one
        assert len(hook.requests) == 1
        listed = app_client.get(f"/api/alerts?run_id={rid(1)}").json()["alerts"]
        assert [(a["id"], a["when"], a["message"], a["delivery"]["state"], a["delivery"]["attempts"])
                for a in listed] == [(alert_id, "failed", "run failed: injected failure at step 'join'", "delivered", 1)]
        assert [t["status"] for t in listed[0]["delivery"]["tries"]] == [200]
        assert app_client.get(f"/api/alerts?run_id={rid(3)}").json()["alerts"] == []


def test_malformed_share_above_the_threshold(app_client):
    with Receiver() as hook:
        add(app_client, application="nightly", when="malformed", threshold=0.5, webhook=hook.url)
        app_client.post("/api/documents", json=doc(1, malformed={"no_match": 4}))      # 40 %: quiet
        app_client.post("/api/documents", json=doc(2, malformed={"no_match": 8}))      # 80 %
        [req] = hook.wait(1)
        assert req["body"]["run_id"] == rid(2)
        assert req["body"]["message"] == "malformed share 80.0% is above 50.0%"
        assert req["body"]["values"] == {"malformed_share": 0.8, "threshold": 0.5}
        time.sleep(1.2)
        assert len(hook.requests) == 1


def test_records_and_duration_against_the_median_of_the_last_runs(app_client, store):
    # history: 12 successful runs; the last 10 have records 100..109 (median 104.5) and durations 2..2.9
    history = [doc(i, records=90 if i < 2 else 98 + i, duration=9.0 if i < 2 else 1.8 + i / 10) for i in range(12)]
    history.append(doc(12, status="FAILED", records=1, duration=99.0))        # not successful: not in the median
    history.append(doc(13, records=1, duration=99.0, app="other"))            # another application
    store.ingest_many([row_of(d, "alice") for d in history])
    with Receiver() as hook:
        records = add(app_client, application="nightly", when="records", threshold=0.5, last=10, webhook=hook.url)
        duration = add(app_client, application="nightly", when="duration", webhook=hook.url)   # default 2 x, 10
        assert (records["threshold"], records["last"], duration["threshold"], duration["last"]) == (0.5, 10, 2.0, 10)
        app_client.post("/api/documents", json=doc(20, records=53, duration=5.0))      # 53 >= 52.25, 5 <= 4.9? no
        [first] = hook.wait(1)
        assert first["body"]["rule"]["when"] == "duration"
        # (a document's duration is finished_at - started_at, as a run computes it)
        median_d = sorted(d["run"]["duration"] for d in history[2:12])
        median_d = (median_d[4] + median_d[5]) / 2
        assert first["body"]["values"] == {"duration": 5.0, "median": median_d, "factor": 2.0, "limit": 2 * median_d,
                                           "runs": 10}
        assert first["body"]["message"] == (f"duration 5.00 s is above 2 x the median {median_d:.2f} s of the last "
                                            "10 successful runs")
        app_client.post("/api/documents", json=doc(21, records=52, duration=2.0))
        [_, second] = hook.wait(2)
        # the median is of the 10 successful runs before run 21: 100..108 and run 20's 53
        past = sorted([53] + [98 + i for i in range(3, 12)])
        median = (past[4] + past[5]) / 2
        assert second["body"]["rule"]["when"] == "records" and second["body"]["run_id"] == rid(21)
        assert second["body"]["values"] == {"records_written": 52, "median": median, "factor": 0.5,
                                            "limit": 0.5 * median, "runs": 10}
        assert second["body"]["message"] == (f"records written 52 is below 0.5 x the median {median:,.2f} of the "
                                             "last 10 successful runs")
        time.sleep(1.2)
        assert len(hook.requests) == 2


def test_a_tag_narrows_a_rule_and_too_little_history_stays_quiet(app_client, store):
    store.ingest_many([row_of(doc(i, tags={"env": "prod"}), "alice") for i in range(3)]
                      + [row_of(doc(i, tags={"env": "test"}), "alice") for i in range(3, 5)])
    with Receiver() as hook:
        add(app_client, application="nightly", when="failed", tag="env=prod", webhook=hook.url)
        add(app_client, application="nightly", when="records", tag="env=test", webhook=hook.url)
        app_client.post("/api/documents", json=doc(10, status="FAILED", tags={"env": "test"}))
        app_client.post("/api/documents", json=doc(11, records=1, tags={"env": "test"}))   # 2 earlier runs < 3
        app_client.post("/api/documents", json=doc(12, status="FAILED", tags={"env": "prod"}))
        [req] = hook.wait(1)
        assert req["body"]["run_id"] == rid(12) and req["body"]["rule"]["tag"] == "env=prod"
        time.sleep(1.2)
        assert len(hook.requests) == 1


def test_retries_with_back_off_and_every_attempt_is_recorded(store):
    with Receiver(statuses=[503, 500, 200]) as hook, \
            TestClient(create_app(store, delivery_backoff=0.3, webhook_allow=LOOPBACK), base_url=LOCAL) as client:
        add(client, application="nightly", when="failed", webhook=hook.url)
        client.post("/api/documents", json=doc(1, status="FAILED"))
        reqs = hook.wait(3)
        assert [r["body"]["run_id"] for r in reqs] == [rid(1)] * 3
        gaps = [b["at"] - a["at"] for a, b in zip(reqs, reqs[1:])]
        assert gaps[0] >= 0.3 and gaps[1] >= 0.6, gaps            # 0.3 s, then 0.6 s
        [d] = wait_for(lambda: [d for d in delivery_log(store) if d["state"] == "delivered"])
        assert d["attempts"] == 3 and d["kind"] == "webhook"
        assert [(t["attempt"], t["status"], t["error"]) for t in d["tries"]] == [
            (1, 503, "HTTP 503 Service Unavailable"), (2, 500, "HTTP 500 Internal Server Error"), (3, 200, None)]
        api = client.get("/api/deliveries?kind=webhook").json()["deliveries"]
        assert [t["status"] for t in api[0]["tries"]] == [503, 500, 200]


def test_a_refusal_is_not_retried_and_attempts_end(store):
    with Receiver(statuses=[410]) as gone, Receiver(statuses=[503]) as down, \
            TestClient(create_app(store, delivery_backoff=0.05, delivery_attempts=3, webhook_allow=LOOPBACK), base_url=LOCAL) as client:
        add(client, application="nightly", when="failed", webhook=gone.url)
        add(client, application="nightly", when="failed", webhook=down.url)
        client.post("/api/documents", json=doc(1, status="FAILED"))
        gone.wait(1)
        down.wait(3)
        done = wait_for(lambda: (lambda ds: ds if all(d["state"] == "failed" for d in ds) and len(ds) == 2 else None)(
            delivery_log(store)))
        assert sorted((d["url"], d["attempts"]) for d in done) == sorted([(gone.url, 1), (down.url, 3)])
        time.sleep(0.5)
        assert (len(gone.requests), len(down.requests)) == (1, 3)


@pytest.mark.timing
def test_delivery_never_blocks_the_request_and_pending_ones_survive_a_restart(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/m.db")
    port = free_port()
    with Receiver(delay=3.0) as slow, TestClient(create_app(store, webhook_allow=LOOPBACK), base_url=LOCAL) as client:
        add(client, application="nightly", when="failed", webhook=slow.url)
        t = time.monotonic()
        r = client.post("/api/documents", json=doc(1, status="FAILED"))
        # answered before the hook's 3 s: the delivery runs beside the request, never in it
        assert r.status_code == 202 and time.monotonic() - t < 2.0
        slow.wait(1)         # in flight: the shutdown waits for it (at most the HTTP timeout and a second)
    assert [(x["state"], x["attempts"]) for x in delivery_log(store, run_id=rid(1))] == [("delivered", 1)]
    # nobody listens on the hook's port: the first attempt fails, the retry is minutes away; then a restart
    with TestClient(create_app(store, delivery_backoff=600, webhook_allow=LOOPBACK), base_url=LOCAL) as client:
        assert client.delete("/api/alert-rules/1").status_code == 200
        add(client, application="nightly", when="failed", webhook=f"http://127.0.0.1:{port}/hook")
        client.post("/api/documents", json=doc(2, status="FAILED"))
        wait_for(lambda: [d for d in delivery_log(store, run_id=rid(2)) if d["attempts"] == 1])
    [d] = delivery_log(store, run_id=rid(2))
    assert d["state"] == "pending" and d["tries"][0]["status"] is None and d["tries"][0]["error"]
    from logetl.monitor.store import deliveries
    with store.engine.begin() as conn:          # the retry falls due now
        conn.execute(deliveries.update().values(next_at=time.time()))
    with Receiver(port=port) as hook, TestClient(create_app(store, webhook_allow=LOOPBACK), base_url=LOCAL):
        [req] = hook.wait(1)
        assert req["path"] == "/hook" and req["body"]["run_id"] == rid(2)
        wait_for(lambda: delivery_log(store, run_id=rid(2))[0]["state"] == "delivered")
    assert [t["attempt"] for t in delivery_log(store, run_id=rid(2))[0]["tries"]] == [1, 2]


def test_an_embedded_run_fires_alerts_through_the_server_that_serves_its_store(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    store = Store(f"sqlite:///{home}/monitor.db")
    with Receiver() as hook, Server(store, public_url=PUBLIC, webhook_allow=LOOPBACK) as srv:
        alerting.add_rule(store, application="nightly", kind="failed", webhook=hook.url)
        p = logetl("join", os.path.join(CORPUS, "corpus.log"), str(tmp_path / "out"), "--app-name", "nightly",
                   env={"LOGETL_HOME": str(home), "LOGETL_FAIL_AT": "join", "LOGETL_MONITOR_UI": srv.url})
        assert p.returncode == 1
        [req] = hook.wait(1)
        body = req["body"]
        assert body["application"] == "nightly" and body["status"] == "FAILED"
        assert body["message"] == "run failed: " + body["values"]["error"]
        assert "injected failure at step 'join'" in body["values"]["error"]
        assert f"/runs/{body['run_id']}" in p.stderr.decode()
        assert body["run_url"] == f"{PUBLIC}/runs/{body['run_id']}"


def test_rules_through_the_api_are_checked_and_belong_to_their_user(keyed):
    client, alice, bob = keyed
    A, B = ({"Authorization": f"Bearer {k}"} for k in (alice, bob))
    r = client.post("/api/alert-rules", json={"application": "nightly", "when": "often", "webhook": "http://h/"},
                    headers=A)
    assert r.status_code == 422
    assert r.json() == {"error": {"status": 422, "code": "invalid_rule",
                                  "message": "when must be one of failed, malformed, records, duration, not 'often'"}}
    bad = [({"when": "failed", "threshold": 2}, "threshold does not apply to a 'failed' rule"),
           ({"when": "malformed", "threshold": 1.5},
            "threshold of a 'malformed' rule is a share from 0 to 1 (e.g. 0.05), not 1.5"),
           ({"when": "records", "last": 0}, "last must be a whole number from 1 to 1000, not 0"),
           ({"when": "failed", "webhook": "file:///etc/passwd"},
            "webhook must be an http:// or https:// URL, not 'file:///etc/passwd'")]
    for extra, message in bad:
        body = {"application": "nightly", "webhook": "http://h/", **extra}
        r = client.post("/api/alert-rules", json=body, headers=A)
        assert (r.status_code, r.json()["error"]["message"]) == (422, message)
    r = client.post("/api/alert-rules", json={"application": "x", "when": "failed", "webhook": "http://h/", "k": 1},
                    headers=A)
    assert (r.status_code, r.json()["error"]["message"]) == (400, "unknown field 'k'")
    r = client.post("/api/alert-rules", content=b"application=x", headers={**A, "Content-Type": "text/plain"})
    assert r.status_code == 415
    assert client.post("/api/alert-rules", json={"application": "x", "when": "failed", "webhook": "http://h/"}
                       ).status_code == 401
    mine = client.post("/api/alert-rules", json={"application": "nightly", "when": "failed", "webhook": "http://h/"},
                       headers=A).json()["rule"]
    assert mine["owner"] == "alice"
    assert [x["id"] for x in client.get("/api/alert-rules", headers=A).json()["rules"]] == [mine["id"]]
    assert client.get("/api/alert-rules", headers=B).json()["rules"] == []
    r = client.delete(f"/api/alert-rules/{mine['id']}", headers=B)
    assert r.status_code == 404 and r.json()["error"]["message"] == f"no alert rule {mine['id']}"
    assert client.delete(f"/api/alert-rules/{mine['id']}", headers=A).json() == {"removed": mine["id"]}
    assert client.get("/api/alert-rules", headers=A).json()["rules"] == []


@pytest.mark.parametrize("path,message", [
    ("%C2%B2", "no alert rule ²"),                      # str.isdigit takes '²'; int() did not (500)
    ("99999999999999999999999999", "no alert rule 99999999999999999999999999"),   # SQLite overflowed (500)
    ("2147483648", "no alert rule 2147483648"),         # past PostgreSQL's INTEGER
    ("1.0", "no alert rule 1.0"),
    ("..%2f", "Not Found"),                             # was a 307 to /api/alert-rules/.. with no body
])
def test_deleting_a_rule_no_id_can_name_is_a_json_404(app_client, path, message):
    rule = add(app_client, application="nightly", when="failed", webhook="http://127.0.0.1:9/hook")
    r = app_client.delete(f"/api/alert-rules/{path}", follow_redirects=False)
    assert (r.status_code, r.json()) == (404, {"error": {"status": 404, "code": "not_found", "message": message}})
    assert [x["id"] for x in app_client.get("/api/alert-rules").json()["rules"]] == [rule["id"]]


def test_the_alerts_command(tmp_path):
    db = ["--db", f"sqlite:///{tmp_path}/m.db"]
    p = logetl("monitor", "alerts", "add", "--application", "nightly", "--when", "records", "--threshold", "0.5",
               "--tag", "env=prod", "--webhook", "http://127.0.0.1:9/hook", "--webhook-allow", "127.0.0.1", *db)
    assert (p.returncode, p.stdout, p.stderr.decode()) == (0, b"1\n", (
        "alert rule 1: when a run of nightly tagged env=prod writes fewer than 0.5 x the median records of its "
        "last 10 successful runs, POST to http://127.0.0.1:9/hook\n"))
    p = logetl("monitor", "alerts", "add", "--application", "nightly", "--when", "failed", "--owner", "bob",
               "--webhook", "https://hooks.example/x", *db)
    assert p.returncode == 0 and p.stdout == b"2\n"
    p = logetl("monitor", "alerts", "list", *db)
    assert p.stdout.decode() == ("1\tnightly\trecords\t0.5\t10\tenv=prod\t\thttp://127.0.0.1:9/hook\n"
                                 "2\tnightly\tfailed\t\t\t\tbob\thttps://hooks.example/x\n")
    for args, line in [
        (["--when", "failed", "--threshold", "3", "--webhook", "http://h/"],
         "Error: --threshold does not apply to a 'failed' rule\n"),
        (["--when", "duration", "--threshold", "-1", "--webhook", "http://h/"],
         "Error: --threshold of a 'duration' rule is a positive factor of the median (e.g. 2.0), not -1.0\n"),
        (["--when", "failed", "--webhook", "hooks.example"],
         "Error: --webhook must be an http:// or https:// URL, not 'hooks.example'\n"),
        (["--when", "failed", "--last", "5", "--webhook", "http://h/"],
         "Error: --last (how many runs the median is of) does not apply to a 'failed' rule\n")]:
        p = logetl("monitor", "alerts", "add", "--application", "nightly", *args, *db)
        assert (p.returncode, p.stderr.decode()) == (2, line)
    p = logetl("monitor", "alerts", "remove", "1", *db)
    assert (p.returncode, p.stderr.decode()) == (0, "removed alert rule 1\n")
    p = logetl("monitor", "alerts", "remove", "1", *db)
    assert (p.returncode, p.stderr.decode()) == (2, "Error: no alert rule '1'\n")
    for bad in ("99999999999999999999999999", "²", "3x", ""):     # the first two were "internal error", exit 1
        p = logetl("monitor", "alerts", "remove", bad, *db)
        assert (p.returncode, p.stderr.decode()) == (2, f"Error: no alert rule {bad!r}\n")
    assert logetl("monitor", "alerts", "list", *db).stdout.decode().startswith("2\tnightly\tfailed")


# --- what webhooks may reach (server-side request forgery) ---------------------------------------------------

def test_a_webhook_at_a_local_network_address_is_refused_unless_the_server_allows_it(store):
    with TestClient(create_app(store), base_url=LOCAL) as client:
        for url, address in (("http://127.0.0.1:9/hook", "127.0.0.1"), ("http://169.254.169.254/latest", "169.254.169.254"),
                             ("http://[::1]:9/", "::1"), ("https://10.1.2.3/x", "10.1.2.3")):
            r = client.post("/api/alert-rules", json={"application": "nightly", "when": "failed", "webhook": url})
            assert r.status_code == 422, url
            host = address
            assert r.json()["error"]["message"] == (
                f"webhook: webhook host {host!r} is on the local network ({address}): the monitor must be "
                f"started with --webhook-allow {host} to send to it"), r.text
        assert client.get("/api/alert-rules").json()["rules"] == []
        # a public address is fine
        assert client.post("/api/alert-rules", json={"application": "nightly", "when": "failed",
                                                     "webhook": "https://93.184.215.14/hook"}).status_code == 201
    with TestClient(create_app(store, webhook_allow=("10.0.0.0/8", "127.0.0.1")), base_url=LOCAL) as client:
        for url in ("https://10.1.2.3/x", "http://127.0.0.1:9/hook"):
            assert client.post("/api/alert-rules", json={"application": "nightly", "when": "failed",
                                                         "webhook": url}).status_code == 201, url


def test_a_host_name_is_checked_where_it_resolves_at_delivery_and_never_retried(store):
    """A rule made outside the server (the command line) names a host that resolves to loopback: the
    delivery is refused before any connection, once, with the reason; allowed by name, it is delivered."""
    with Receiver() as hook:
        url = hook.url.replace("127.0.0.1", "localhost") + "/hook"
        alerting.add_rule(store, application="nightly", kind="failed", webhook=url)
        with TestClient(create_app(store, delivery_backoff=0.05), base_url=LOCAL) as client:
            client.post("/api/documents", json=doc(1, status="FAILED"))
            [d] = wait_for(lambda: [d for d in delivery_log(store) if d["state"] == "failed"])
        assert hook.requests == []
        assert d["attempts"] == 1 and [t["status"] for t in d["tries"]] == [None]
        assert d["tries"][0]["error"].startswith("webhook host 'localhost' is on the local network (")
        assert d["tries"][0]["error"].endswith("): the monitor must be started with --webhook-allow localhost "
                                               "to send to it")
        with TestClient(create_app(store, webhook_allow=("localhost",)), base_url=LOCAL) as client:
            client.post("/api/documents", json=doc(2, status="FAILED"))
            [req] = hook.wait(1)
        assert req["body"]["run_id"] == rid(2)


def test_webhook_allow_is_checked_on_the_command_line(tmp_path):
    p = logetl("monitor", "--webhook-allow", "not a host!", "--db", f"sqlite:///{tmp_path}/m.db")
    assert p.returncode == 2
    assert p.stderr.decode() == "Error: --webhook-allow: not a host name, address or network: 'not a host!'\n"
