"""The monitor under hostile use: one user's slow webhooks and another user's alerts, who sees a webhook's
URL, OpenLineage events of two users with one run id or one application name, two prunes at once, rules
and names the command line refuses, case-insensitive search beyond ASCII, and the application name's
one limit. SQLite and a real PostgreSQL server; real HTTP receivers on loopback."""
from __future__ import annotations

import os

import pytest

from conftest import CORPUS, logetl
from logetl.monitor import alerts as alerting
from logetl.monitor.store import Store

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")


# --- the command line: rules that could never be delivered, and names that are no names -------------------

def test_a_local_network_webhook_is_refused_by_the_command_line_unless_allowed(tmp_path):
    db = ["--db", f"sqlite:///{tmp_path}/m.db"]
    rule = ["monitor", "alerts", "add", "--application", "nightly", "--when", "failed"]
    for url, host in (("http://127.0.0.1:9/hook", "127.0.0.1"), ("http://[::1]:9/", "::1"),
                      ("https://10.1.2.3/x", "10.1.2.3"), ("http://169.254.169.254/latest", "169.254.169.254")):
        p = logetl(*rule, "--webhook", url, *db)
        assert (p.returncode, p.stdout, p.stderr.decode()) == (2, b"", (
            f"Error: --webhook: webhook host {host!r} is on the local network ({host}): the monitor must be "
            f"started with --webhook-allow {host} to send to it (and give --webhook-allow here to add the "
            "rule)\n")), url
    assert logetl("monitor", "alerts", "list", *db).stdout == b""
    # allowed by address, by network, or by the same variable the server reads
    p = logetl(*rule, "--webhook", "http://127.0.0.1:9/hook", "--webhook-allow", "127.0.0.1", *db)
    assert (p.returncode, p.stdout) == (0, b"1\n"), p.stderr
    p = logetl(*rule, "--webhook", "https://10.1.2.3/x", "--webhook-allow", "10.0.0.0/8", *db)
    assert (p.returncode, p.stdout) == (0, b"2\n"), p.stderr
    p = logetl(*rule, "--webhook", "http://[::1]:9/", *db, env={"LOGETL_WEBHOOK_ALLOW": "192.168.0.0/16,::1"})
    assert (p.returncode, p.stdout) == (0, b"3\n"), p.stderr
    # a public address and a host name (resolved, and checked, at delivery) need nothing
    p = logetl(*rule, "--webhook", "https://93.184.215.14/hook", *db)
    assert (p.returncode, p.stdout) == (0, b"4\n"), p.stderr
    p = logetl(*rule, "--webhook", "https://hooks.example/x", *db)
    assert (p.returncode, p.stdout) == (0, b"5\n"), p.stderr
    p = logetl(*rule, "--webhook", "http://127.0.0.1:9/", "--webhook-allow", "not a host!", *db)
    assert (p.returncode, p.stderr.decode()) == (2, "Error: --webhook-allow: not a host name, address or network: "
                                                    "'not a host!'\n")


@pytest.mark.parametrize("args,line", [
    (["--owner", ""], "Error: --owner must not be empty: leave --owner out for a rule on everyone's runs\n"),
    (["--owner", "  "], "Error: --owner must not be empty: leave --owner out for a rule on everyone's runs\n"),
    (["--owner", "bob\nalice"],
     "Error: --owner must not contain control characters (newlines, escapes, ...): 'bob\\nalice'\n"),
    (["--application", "night\nly"],
     "Error: --application must not contain control characters (newlines, escapes, ...): 'night\\nly'\n"),
    (["--application", "nightly\x1b[2J"],
     "Error: --application must not contain control characters (newlines, escapes, ...): 'nightly\\x1b[2J'\n"),
    (["--application", "x" * 201], "Error: --application may have at most 200 characters, not 201\n"),
    (["--tag", "env=prod\r\nenv=test"],
     "Error: --tag must not contain control characters (newlines, escapes, ...): 'env=prod\\r\\nenv=test'\n"),
    (["--tag", "env=\u202eprod"],
     "Error: --tag must not contain control characters (newlines, escapes, ...): 'env=\\u202eprod'\n"),
])
def test_alerts_add_refuses_an_empty_owner_and_control_characters(tmp_path, args, line):
    db = ["--db", f"sqlite:///{tmp_path}/m.db"]
    given = {"--application": "nightly", "--when": "failed", "--webhook": "https://hooks.example/x"}
    given.update(zip(args[::2], args[1::2]))
    p = logetl("monitor", "alerts", "add", *[x for kv in given.items() for x in kv], *db)
    assert (p.returncode, p.stdout, p.stderr.decode()) == (2, b"", line)
    assert alerting.list_rules(Store(f"sqlite:///{tmp_path}/m.db")) == []


@pytest.mark.parametrize("user,line", [
    ("alice\nbob", "Error: --user must not contain control characters (newlines, escapes, ...): 'alice\\nbob'\n"),
    ("al\x07ice", "Error: --user must not contain control characters (newlines, escapes, ...): 'al\\x07ice'\n"),
    ("", "Error: --user must not be empty\n"),
    ("a" * 201, "Error: --user may have at most 200 characters, not 201\n"),
])
def test_keys_create_refuses_control_characters_in_the_user(tmp_path, user, line):
    p = logetl("monitor", "keys", "create", "--user", user, "--db", f"sqlite:///{tmp_path}/m.db")
    assert (p.returncode, p.stdout, p.stderr.decode()) == (2, b"", line)


def test_the_api_refuses_control_characters_in_a_rule_as_the_command_line_does(keyed):
    client, alice, _ = keyed
    for field, value in (("application", "night\nly"), ("tag", "env=\x00prod")):
        body = {"application": "nightly", "when": "failed", "webhook": "https://hooks.example/x", field: value}
        r = client.post("/api/alert-rules", json=body, headers={"Authorization": f"Bearer {alice}"})
        assert (r.status_code, r.json()["error"]["message"]) == (
            422, f"{field} must not contain control characters (newlines, escapes, ...): {value!r}")


# --- the application name: one limit, checked before the run ------------------------------------------------

def test_an_application_name_over_the_limit_is_refused_before_the_run(tmp_path):
    from conftest import free_port

    home = tmp_path / "home"
    out = tmp_path / "out"
    for env in ({"LOGETL_HOME": str(home)},
                # a remote monitor (nobody listens: the run is refused before anything is sent)
                {"LOGETL_HOME": str(home), "LOGETL_MONITOR_URL": f"http://127.0.0.1:{free_port()}"}):
        p = logetl("join", CORPUS_LOG, str(out), "--app-name", "n" * 201, env=env)
        assert (p.returncode, p.stdout, p.stderr.decode()) == (
            2, b"", "Error: --app-name may have at most 200 characters, not 201\n")
        p = logetl("join", CORPUS_LOG, str(out), "--app-name", "night\nly", env=env)
        assert (p.returncode, p.stderr.decode()) == (
            2, "Error: --app-name must not contain control characters (newlines, escapes, ...): 'night\\nly'\n")
    assert not out.exists() and not (home / "monitor.db").exists()
    # the limit itself is taken, by the embedded store as by a server's
    p = logetl("join", CORPUS_LOG, str(out), "--app-name", "n" * 200, env={"LOGETL_HOME": str(home)})
    assert p.returncode == 0, p.stderr
    assert Store(f"sqlite:///{home}/monitor.db").applications() == ["n" * 200]


def test_run_flow_refuses_the_same_application_names(tmp_path):
    from logetl import programs
    from logetl.errors import UsageError
    from logetl.job import run_flow

    for name, message in (("n" * 201, "application may have at most 200 characters, not 201"),
                          ("a\tb", "application must not contain control characters (newlines, escapes, ...): "
                                   "'a\\tb'")):
        with pytest.raises(UsageError) as caught:
            run_flow(programs.get("join"), CORPUS_LOG, {"output": str(tmp_path / "out")}, application=name)
        assert str(caught.value) == message
    assert not (tmp_path / "out").exists()


# --- who sees a webhook's URL -------------------------------------------------------------------------------

LOOPBACK = ("127.0.0.1",)


def test_a_delivery_shows_its_url_only_to_the_rule_owner_or_an_admin(store):
    from starlette.testclient import TestClient

    from receiver import Receiver, wait_for
    from test_monitor_api import LOCAL, auth, make_doc, rid
    from logetl.monitor.app import create_app
    from logetl.monitor.worker import delivery_log

    alice, bob = store.create_key("alice"), store.create_key("bob")
    with Receiver() as admins, Receiver() as alices, \
            TestClient(create_app(store, webhook_allow=LOOPBACK, delivery_backoff=60), base_url=LOCAL) as c:
        secret = admins.url + "/hooks/T0KEN-s3cret"
        refused = "http://10.255.255.1/hooks/0THER-s3cret"      # on the local network, not allowed
        # an administrator's rules (the command line: every owner's runs) and alice's own, through the API
        admin_rule = alerting.add_rule(store, application="nightly", kind="failed", webhook=secret)
        alerting.add_rule(store, application="nightly", kind="failed", webhook=refused)
        r = c.post("/api/alert-rules", headers=auth(alice),
                   json={"application": "nightly", "when": "failed", "webhook": alices.url + "/mine"})
        assert r.status_code == 201
        doc = make_doc(rid(1), status="FAILED", app="nightly")
        assert c.post("/api/documents", json=doc, headers=auth(alice)).status_code == 202
        admins.wait(1)
        alices.wait(1)
        wait_for(lambda: sorted(d["state"] for d in delivery_log(store)) == ["delivered", "delivered", "failed"],
                 what="three deliveries done")

        A, B = auth(alice), auth(bob)
        for path in ("/api/alerts", "/api/deliveries", "/api/deliveries?kind=webhook", f"/api/alerts?run_id={rid(1)}"):
            text = c.get(path, headers=A).text
            assert "s3cret" not in text and str(admins.port) not in text and "10.255.255.1" not in text, path
        listed = {a["rule_id"]: a["delivery"] for a in c.get("/api/alerts", headers=A).json()["alerts"]}
        assert len(listed) == 3
        assert listed[admin_rule["id"]]["url"] is None and listed[admin_rule["id"]]["state"] == "delivered"
        mine = [d for d in listed.values() if d["url"] is not None]
        assert [d["url"] for d in mine] == [alices.url + "/mine"]
        [hidden_refusal] = [d for d in listed.values() if d["state"] == "failed"]
        assert hidden_refusal["url"] is None
        assert [t["error"] for t in hidden_refusal["tries"]] == [alerting.HIDDEN_ERROR]
        ds = c.get("/api/deliveries", headers=A).json()["deliveries"]
        assert sorted((d["url"] is None, d["state"]) for d in ds) == [(False, "delivered"), (True, "delivered"),
                                                                      (True, "failed")]
        assert c.get("/api/deliveries", headers=B).json()["deliveries"] == []
        assert c.get("/api/alerts", headers=B).json()["alerts"] == []
        page = c.get("/alerts", headers=A)
        assert page.status_code == 200 and "s3cret" not in page.text
    # an administrator (the store itself, as the command line reads it) sees every URL and every reason
    seen = delivery_log(store)
    assert sorted(d["url"] for d in seen) == sorted([secret, refused, alices.url + "/mine"])
    [failed] = [d for d in seen if d["state"] == "failed"]
    assert failed["tries"][0]["error"].startswith("webhook host '10.255.255.1' is on the local network")
    assert sorted(a["delivery"]["url"] for a in alerting.list_alerts(store)) == sorted(d["url"] for d in seen)


def test_a_keyless_server_shows_every_url(store):
    """Without keys everyone on this machine is the administrator (a loopback server)."""
    from starlette.testclient import TestClient

    from receiver import Receiver, wait_for
    from test_monitor_api import LOCAL, make_doc, rid
    from logetl.monitor.app import create_app

    with Receiver() as hook, TestClient(create_app(store, webhook_allow=LOOPBACK), base_url=LOCAL) as c:
        alerting.add_rule(store, application="nightly", kind="failed", webhook=hook.url + "/T0KEN")
        c.post("/api/documents", json=make_doc(rid(1), status="FAILED", app="nightly"))
        hook.wait(1)
        got = wait_for(lambda: c.get("/api/deliveries").json()["deliveries"])
        assert [d["url"] for d in got] == [hook.url + "/T0KEN"]
        assert [a["delivery"]["url"] for a in c.get("/api/alerts").json()["alerts"]] == [hook.url + "/T0KEN"]


# --- OpenLineage events keyed by owner and run --------------------------------------------------------------

def test_lineage_events_of_two_users_with_one_run_id_and_one_application_stay_apart(store):
    import uuid

    from starlette.testclient import TestClient

    from conftest import require
    from receiver import Receiver
    from test_monitor_api import LOCAL, auth, make_doc, rid
    from logetl.monitor import lineage
    from logetl.monitor.app import create_app

    require(lineage.available() is None, lineage.available() or "")
    alice, bob = store.create_key("alice"), store.create_key("bob")

    def doc(who, status, seq):
        d = make_doc(rid(7), status=status, app="nightly", seq=seq)
        d["run"].update(inputs=[f"/{who}/in.log"], outputs={"output": f"/{who}/out"},
                        error=f"{who}'s error" if status == "FAILED" else None)
        return d

    with Receiver() as ol, TestClient(create_app(store, openlineage_url=ol.url), base_url=LOCAL) as c:
        for key, who in ((alice, "alice"), (bob, "bob")):
            for seq, status in ((1, "RUNNING"), (2, "FAILED")):
                r = c.post("/api/documents", json=doc(who, status, seq), headers=auth(key))
                # bob's document with alice's run id is taken as a run of his own, as any new run id is
                assert (r.status_code, r.json()) == (202, {"run_id": rid(7), "seq": seq, "stored": True})
        events = [r["body"] for r in ol.wait(4)]
        assert c.get(f"/api/runs/{rid(7)}", headers=auth(alice)).json()["run"]["inputs"] == ["/alice/in.log"]
    by_run = {}
    for ev in events:
        by_run.setdefault(ev["run"]["runId"], []).append(ev)
    assert sorted(by_run) == sorted(str(uuid.uuid5(uuid.UUID(hex=rid(7)), who)) for who in ("alice", "bob"))
    for who in ("alice", "bob"):
        mine = by_run[str(uuid.uuid5(uuid.UUID(hex=rid(7)), who))]
        assert [e["eventType"] for e in mine] == ["START", "FAIL"]
        for e in mine:
            assert (e["job"]["namespace"], e["job"]["name"]) == ("logetl", f"{who}/nightly")
            assert e["job"]["facets"]["ownership"]["owners"] == [{"name": f"user:{who}"}]
            assert [(t["key"], t["value"]) for t in e["run"]["facets"]["tags"]["tags"]] == [
                ("logetl.run_id", rid(7)), ("logetl.owner", who)]
            assert e["inputs"] == [{"namespace": "file", "name": f"/{who}/in.log", "facets": {}, "inputFacets": {}}]
        assert mine[1]["run"]["facets"]["errorMessage"]["message"] == f"{who}'s error"


def test_a_job_name_tells_the_owner_from_the_application():
    from logetl.monitor.lineage import job_name

    assert job_name("alice", "nightly") == "alice/nightly"
    assert job_name("a/b", "c") == "a%2Fb/c" != job_name("a", "b/c") == "a/b/c"
    assert job_name("100%", "x") == "100%25/x" != job_name("100%25", "x") == "100%2525/x"


# --- two prunes at once -------------------------------------------------------------------------------------

def _old_runs(store, n: int, t0: float) -> None:
    from test_monitor_retention import row

    store.ingest_many([row(i, app=f"app{i % 3}", owner=("alice", "bob")[i % 2], started=t0 + (i % 5) * 86400.0,
                           status="FAILED" if i % 7 == 0 else "SUCCESSFUL", duration=1.0 + i % 4, records=i)
                       for i in range(n)])


def _sums(store) -> tuple[int, int, float]:
    from sqlalchemy import func, select

    from logetl.monitor.store import daily_aggregates

    t = daily_aggregates.c
    with store.engine.connect() as conn:
        n, failed, records = conn.execute(select(func.coalesce(func.sum(t.runs), 0), func.coalesce(func.sum(t.failed), 0),
                                                 func.coalesce(func.sum(t.records_written), 0))).one()
    return int(n), int(failed), int(records)


def _empty(store) -> None:
    from logetl.monitor.store import metadata

    with store.engine.begin() as conn:
        for table in reversed(metadata.sorted_tables):
            if table.name not in ("api_keys", "settings"):
                conn.execute(table.delete())


def test_a_prune_that_another_overtakes_adds_nothing_twice(store, monkeypatch):
    """The interleaving forced: prune A lists its runs, then prune B prunes them all, then A goes on."""
    from logetl.monitor import retention
    from test_monitor_retention import NOW, T0

    _old_runs(store, 120, T0)
    before = retention.trend(store, "app0", owner="alice")
    listed = retention.candidates
    other = {}

    def candidates_then_another_prune(conn, cutoff, keep_last):
        todo = listed(conn, cutoff, keep_last)
        if not other:
            other["started"] = True
            other["done"] = retention.prune(store, older_than=90 * 86400.0, now=NOW)
        return todo

    monkeypatch.setattr(retention, "candidates", candidates_then_another_prune)
    first = retention.prune(store, older_than=90 * 86400.0, now=NOW)
    assert other["done"]["runs"] == 120 and first["runs"] == 0 and first["applications"] == 0
    assert _sums(store) == (120, sum(1 for i in range(120) if i % 7 == 0), sum(range(120)))
    assert [(d["day"], d["runs"], d["pruned"]) for d in retention.trend(store, "app0", owner="alice")] == [
        (d["day"], d["runs"], d["runs"]) for d in before]


def test_two_prunes_at_once_count_each_run_once(store):
    """The real race, many times: two threads prune the same store at the same moment."""
    import threading

    from logetl.monitor import retention
    from test_monitor_retention import NOW, T0

    for round_ in range(8):
        _empty(store)
        _old_runs(store, 200, T0)
        start = threading.Barrier(2)
        done, failed = [], []

        def prune(start=start, done=done, failed=failed):
            start.wait()
            try:
                done.append(retention.prune(store, older_than=90 * 86400.0, now=NOW)["runs"])
            except Exception as exc:    # the test says which
                failed.append(exc)

        threads = [threading.Thread(target=prune) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert failed == [] and sum(done) == 200, (round_, done, failed)
        assert _sums(store) == (200, sum(1 for i in range(200) if i % 7 == 0), sum(range(200))), round_


def test_two_prune_commands_at_once(tmp_path):
    import subprocess
    import sys

    from test_monitor_retention import T0

    url = f"sqlite:///{tmp_path}/m.db"
    store = Store(url)
    for round_ in range(3):
        _empty(store)
        _old_runs(store, 300, T0)
        cmd = [sys.executable, "-m", "logetl", "monitor", "prune", "--older-than", "90d", "--db", url]
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
        outs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        counts = [int(out.decode().split()[1].replace(",", "")) for out, _ in outs]
        assert sum(counts) == 300, (round_, outs)
        assert _sums(store)[0] == 300, round_


# --- search beyond ASCII ------------------------------------------------------------------------------------

def _search_cafe(store):
    from starlette.testclient import TestClient

    from test_monitor_api import LOCAL, make_doc, rid
    from logetl.monitor.app import create_app

    d = make_doc(rid(1), app="ÉTÉ-nightly")
    d["run"].update(inputs=["/logs/CAFÉ.log"], outputs={"output": "/out/ÖL"}, error="Datei /logs/CAFÉ.log FEHLT")
    store.ingest(d, owner="alice")
    other = make_doc(rid(2), app="nightly")
    other["run"].update(inputs=["/logs/cafe.log"], outputs={"output": "/out/ol"})
    store.ingest(other, owner="alice")
    with TestClient(create_app(store), base_url=LOCAL) as c:
        def found(**params):
            return [r["run_id"] for r in c.get("/api/search", params=params).json()["runs"]]

        for needle in ("CAFÉ.log", "CAFÉ", "café", "cafÉ", "Café.LOG"):
            assert found(input=needle) == [rid(1)], needle
            assert found(q=needle) == [rid(1)], needle
        assert found(output="öl") == [rid(1)] and found(output="ÖL") == [rid(1)]
        assert found(error="café.log fehlt") == [rid(1)]
        assert found(q="été-NIGHTLY") == [rid(1)]           # the application
        assert found(input="cafe.log") == [rid(2)]          # an accent is not a case: é is not e
        page = c.get("/search", params={"q": "café"})
        assert page.status_code == 200


def test_search_finds_non_ascii_capitals_in_any_case(store):
    _search_cafe(store)


def test_search_on_a_postgresql_database_of_the_c_locale(postgres_url):
    """lower() under the C locale folds ASCII letters only: the search folds with ICU's root collation."""
    from sqlalchemy import create_engine, text

    admin = create_engine("postgresql+psycopg://" + postgres_url[len("postgresql://"):],
                          isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text("DROP DATABASE IF EXISTS logetl_c"))
        conn.execute(text("CREATE DATABASE logetl_c TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C'"))
        assert conn.execute(text("SELECT lower('CAFÉ' COLLATE \"C\")")).scalar_one() == "cafÉ"
    store = Store(postgres_url.rsplit("/", 1)[0] + "/logetl_c")
    try:
        _search_cafe(store)
    finally:
        store.engine.dispose()
        with admin.connect() as conn:
            conn.execute(text("DROP DATABASE logetl_c"))
        admin.dispose()


# --- one user's slow webhooks and everyone else's alerts -------------------------------------------------------

def test_one_users_slow_webhooks_do_not_delay_another_users_alert(store):
    """Alice has 20 rules whose webhooks answer 503 after 4 s (10 on one endpoint, 10 on endpoints of their
    own); bob's alert, fired while they are in flight, is created and delivered at once."""
    import contextlib
    import time

    from starlette.testclient import TestClient

    from receiver import Receiver, wait_for
    from test_monitor_api import LOCAL, auth, make_doc, rid
    from logetl.monitor.app import create_app

    alice, bob = store.create_key("alice"), store.create_key("bob")
    with contextlib.ExitStack() as stack:
        shared = stack.enter_context(Receiver(statuses=[503], delay=4.0))
        own = [stack.enter_context(Receiver(statuses=[503], delay=4.0)) for _ in range(10)]
        fast = stack.enter_context(Receiver())
        c = stack.enter_context(TestClient(create_app(store, webhook_allow=LOOPBACK, delivery_backoff=600),
                                           base_url=LOCAL))
        for url in [shared.url + f"/{i}" for i in range(10)] + [r.url for r in own]:
            r = c.post("/api/alert-rules", headers=auth(alice),
                       json={"application": "nightly", "when": "failed", "webhook": url})
            assert r.status_code == 201
        r = c.post("/api/alert-rules", headers=auth(bob),
                   json={"application": "nightly", "when": "failed", "webhook": fast.url + "/bob"})
        assert r.status_code == 201
        c.post("/api/documents", json=make_doc(rid(1), status="FAILED", app="nightly"), headers=auth(alice))
        slow = [shared, *own]
        wait_for(lambda: sum(len(x.requests) for x in slow) >= 4, what="alice's first deliveries in flight")
        posted = time.time()
        c.post("/api/documents", json=make_doc(rid(2), status="FAILED", app="nightly"), headers=auth(bob))
        [req] = fast.wait(1, timeout=5.0)
        assert req["body"]["owner"] == "bob" and req["path"] == "/bob"
        assert req["at"] - posted < 3.0        # alice's attempts take 4 s each, 20 of them in a row 80 s
        [alert] = c.get("/api/alerts", headers=auth(bob)).json()["alerts"]
        assert alert["created_at"] - posted < 2.0
        # each of alice's attempts is in flight for 4 s from its arrival: never more than her share of the
        # senders at once, nor more than two at a time to her shared endpoint
        def most_at_once(reqs):
            return max(sum(a["at"] <= b["at"] < a["at"] + 3.9 for a in reqs) for b in reqs)

        with shared.lock:
            at_shared = list(shared.requests)
        every = at_shared + [r for x in own for r in x.requests]
        assert most_at_once(every) == 4 and most_at_once(at_shared) == 2


@pytest.mark.timing
def test_a_backlog_of_one_users_deliveries_hides_no_one_elses(store):
    """1,500 of alice's deliveries are due at a slow endpoint (a long outage, many runs): bob's alert, due
    after all of them, still goes at once."""
    import time

    from starlette.testclient import TestClient

    from receiver import Receiver
    from test_monitor_api import LOCAL, auth, make_doc, rid
    from logetl.monitor.app import create_app
    from logetl.monitor.store import deliveries

    bob = store.create_key("bob")
    with Receiver(statuses=[503], delay=4.0) as slow, Receiver() as fast:
        now = time.time()
        with store.engine.begin() as conn:
            conn.execute(deliveries.insert(), [
                {"kind": "webhook", "alert_id": None, "owner": "alice", "run_id": rid(i), "event": "alert:0",
                 "url": slow.url + "/alice", "payload": "{}", "state": "pending", "attempts": 0, "next_at": now,
                 "created_at": now} for i in range(1500)])
        with TestClient(create_app(store, webhook_allow=LOOPBACK, delivery_backoff=600), base_url=LOCAL) as c:
            r = c.post("/api/alert-rules", headers=auth(bob),
                       json={"application": "nightly", "when": "failed", "webhook": fast.url + "/bob"})
            assert r.status_code == 201
            slow.wait(2)
            posted = time.time()
            c.post("/api/documents", json=make_doc(rid(9000), status="FAILED", app="nightly"), headers=auth(bob))
            [req] = fast.wait(1, timeout=5.0)
            assert req["body"]["owner"] == "bob" and req["at"] - posted < 3.0
            assert len(slow.requests) == 2        # two at a time to the slow endpoint, 4 s each
