"""Retention: `logetl monitor prune` removes old runs (and what is kept about them) but keeps their daily sums,
so an application's trend of runs, durations and volumes is the same before and after. SQLite and a real
PostgreSQL server."""
from __future__ import annotations

import re
import time

import pytest
from starlette.testclient import TestClient
from sqlalchemy import func, select

from conftest import logetl
from test_monitor_api import LOCAL, make_doc, rid
from logetl.monitor import retention
from logetl.monitor.app import create_app
from logetl.monitor.store import Store, alerts, daily_aggregates, run_lineage, runs, row_of

DAY = 86400.0
T0 = 1_760_000_000.0          # 2025-10-09 08:53 UTC
NOW = T0 + 200 * DAY


def run_doc(i, *, app="nightly", owner="alice", started, status="SUCCESSFUL", duration=1.5, records=100):
    d = make_doc(rid(i), status=status, app=app, owner=owner, started=started, duration=duration)
    d["run"]["records_written"] = records
    d["run"]["inputs"] = [f"/logs/{i}.log"]
    return d


def row(i, **kw):
    return row_of(run_doc(i, **kw), kw.get("owner", "alice"))


def history(make=row) -> list[dict]:
    """The runs below, as rows (or, with ``make=run_doc``, as documents)."""
    row = make
    rows = []
    # alice's nightly: 10 old runs, two a day over five days, and one recent run
    for i in range(10):
        rows.append(row(i, started=T0 + (i // 2) * DAY + (i % 2) * 3600, status="FAILED" if i % 4 == 3 else
                        "SUCCESSFUL", duration=1.0 + i * 0.25, records=100 + i))
    rows.append(row(10, started=NOW - DAY, duration=4.0, records=500))
    rows += [row(20 + i, app="other", started=T0 + i * DAY) for i in range(3)]          # alice's other: old
    rows += [row(30 + i, owner="bob", started=T0 + i * DAY) for i in range(2)]          # bob's nightly: old
    return rows


def without_pruned(days):
    return [{k: v for k, v in d.items() if k != "pruned"} for d in days]


def count(store, table, *conds):
    with store.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table).where(*conds)).scalar_one()


def test_prune_keeps_the_newest_and_the_daily_sums(store):
    for d in history(run_doc):          # through ingest, so that their lineage rows are kept too
        store.ingest(d, owner=d["run"]["owner"])
    with store.engine.begin() as conn:
        conn.execute(alerts.insert().values(rule_id=1, owner="alice", run_id=rid(1), application="nightly",
                                            kind="failed", message="m", details="{}", created_at=T0))
    before = {(o, a): retention.trend(store, a, owner=o) for o, a in
              [("alice", "nightly"), ("alice", "other"), ("bob", "nightly")]}
    assert [d["runs"] for d in before[("alice", "nightly")]] == [2, 2, 2, 2, 2, 1]

    dry = retention.prune(store, older_than=90 * DAY, keep_last=2, dry_run=True, now=NOW)
    assert dry == {"cutoff": NOW - 90 * DAY, "runs": 10, "applications": 2, "kept": 5}
    assert count(store, runs) == 16                     # a dry run changes nothing

    done = retention.prune(store, older_than=90 * DAY, keep_last=2, now=NOW)
    assert done == dry
    kept = {(r.owner, r.run_id) for r in store.engine.connect().execute(select(runs.c.owner, runs.c.run_id))}
    assert kept == {("alice", rid(10)), ("alice", rid(9)), ("alice", rid(22)), ("alice", rid(21)),
                    ("bob", rid(30)), ("bob", rid(31))}
    # what was kept about the pruned runs went with them
    assert count(store, alerts) == 0
    assert count(store, run_lineage, run_lineage.c.run_id == rid(3)) == 0
    assert count(store, run_lineage, run_lineage.c.run_id == rid(9)) == 1
    # the trend is the same, day by day; the pruned runs are now counted from the aggregates
    for key, days in before.items():
        after = retention.trend(store, key[1], owner=key[0])
        assert without_pruned(after) == without_pruned(days), key
    nightly = retention.trend(store, "nightly", owner="alice")
    assert [d["pruned"] for d in nightly] == [2, 2, 2, 2, 1, 0]      # the fifth day: one pruned, one kept
    day3 = nightly[1]
    assert day3 == {"day": "2025-10-10", "runs": 2, "successful": 1, "failed": 1, "max_duration": 1.75,
                    "records_read": 20, "records_written": 205, "pruned": 2, "mean_duration": 1.625}
    # pruning again finds nothing more, and counts nothing twice
    assert retention.prune(store, older_than=90 * DAY, keep_last=2, now=NOW)["runs"] == 0
    assert retention.trend(store, "nightly", owner="alice") == nightly
    assert count(store, daily_aggregates) == 5 + 1
    # without --keep-last, every old run goes; the trend still holds
    assert retention.prune(store, older_than=90 * DAY, now=NOW) == {"cutoff": NOW - 90 * DAY, "runs": 5,
                                                                    "applications": 3, "kept": 0}
    assert without_pruned(retention.trend(store, "nightly", owner="bob")) == without_pruned(before[("bob", "nightly")])
    assert count(store, runs) == 1


def test_the_trend_api_and_page(store):
    store.ingest_many(history())
    retention.prune(store, older_than=90 * DAY, keep_last=2, now=NOW)
    with TestClient(create_app(store), base_url=LOCAL) as client:
        body = client.get("/api/trend", params={"application": "other"}).json()
        assert body == {"application": "other", "days": [
            {"day": day, "runs": 1, "successful": 1, "failed": 0, "max_duration": 1.5, "records_read": 10,
             "records_written": 100, "pruned": pruned, "mean_duration": 1.5}
            for day, pruned in [("2025-10-09", 1), ("2025-10-10", 0), ("2025-10-11", 0)]]}
        everyone = client.get("/api/trend", params={"application": "nightly"}).json()["days"]
        assert everyone[0]["runs"] == 3                  # alice's two and bob's one, with no keys
        assert client.get("/api/trend", params={"application": "nightly", "days": 30}).json()["days"] == []
        r = client.get("/api/trend")
        assert (r.status_code, r.json()["error"]["message"]) == (400, "application is needed")
        page = client.get("/trend", params={"application": "other"})
        assert page.status_code == 200 and 'LogetlAlerts.trendPage("other")' in page.text


def test_the_prune_command(tmp_path):
    url = f"sqlite:///{tmp_path}/m.db"
    store = Store(url)
    now = time.time()
    store.ingest_many([row(i, started=now - (100 + i) * DAY) for i in range(5)]
                      + [row(10, app="other", started=now - 100 * DAY), row(11, started=now - DAY)])
    store.engine.dispose()
    cutoff = time.strftime("%Y-%m-%d", time.gmtime(now - 90 * DAY))
    p = logetl("monitor", "prune", "--older-than", "90d", "--keep-last", "2", "--dry-run", "--db", url)
    assert p.returncode == 0
    out = p.stdout.decode()
    assert re.fullmatch(rf"would prune 4 run\(s\) of 1 application\(s\) started before {cutoff} \d\d:\d\d UTC; "
                        r"2 older run\(s\) kept by --keep-last 2\n", out), out
    assert count(Store(url), runs) == 7
    p = logetl("monitor", "prune", "--older-than", "90d", "--keep-last", "2", "--db", url)
    assert p.returncode == 0 and p.stdout.decode().startswith("pruned 4 run(s) of 1 application(s) started before")
    assert count(Store(url), runs) == 3
    p = logetl("monitor", "prune", "--older-than", "2w", "--db", url)
    assert p.returncode == 0 and p.stdout.decode().startswith("pruned 2 run(s) of 2 application(s)")
    for bad in ("90", "-5d", "0d", "ninety days"):
        p = logetl("monitor", "prune", "--older-than", bad, "--db", url)
        assert (p.returncode, p.stderr.decode()) == (
            2, f"Error: --older-than must be a duration such as 90d, 12h or 2w, not {bad!r}\n")
    p = logetl("monitor", "prune", "--older-than", "90d", "--keep-last", "-1", "--db", url)
    assert p.returncode == 2 and b"--keep-last" in p.stderr
    for huge in ("99999999999d", "1" * 400 + "w", "30000d"):     # the cutoff would be before 1970, or no date
        p = logetl("monitor", "prune", "--older-than", huge, "--dry-run", "--db", url)
        assert (p.returncode, p.stdout, p.stderr.decode()) == (
            2, b"", f"Error: --older-than {huge!r} reaches back before 1970: no run started that long ago\n")
    assert count(Store(url), runs) == 1


def test_runs_stored_with_impossible_times_do_not_stop_pruning(store, tmp_path):
    """Stored before ingest checked times: a start of -1e300 was a candidate whose UTC day could not be
    computed, and pruning failed for the whole store (OverflowError). It is counted on 1970-01-01 now."""
    store.ingest_many([row(1, started=-1e300), row(2, started=NOW - 100 * DAY), row(3, started=1e300),
                       row(4, started=NOW - 3600)])
    assert retention.prune(store, older_than=DAY, now=NOW) == {"cutoff": NOW - DAY, "runs": 2, "applications": 1,
                                                               "kept": 0}
    with store.engine.connect() as conn:
        assert sorted(conn.execute(select(runs.c.run_id))) == [(rid(3),), (rid(4),)]
        assert sorted(r.day for r in conn.execute(select(daily_aggregates.c.day))) == [
            "1970-01-01", retention.day_of(NOW - 100 * DAY)]
    days = [d["day"] for d in retention.trend(store, "nightly", owner="alice")]   # PostgreSQL refused 1e300
    assert days[0] == "1970-01-01" and days[-1] == "9999-12-31" and len(days) == 4


@pytest.mark.parametrize("value,seconds", [("90d", 90 * DAY), ("12h", 12 * 3600.0), ("2w", 14 * DAY),
                                           ("30m", 1800.0), ("1.5d", 1.5 * DAY)])
def test_ages(value, seconds):
    assert retention.parse_age(value) == seconds
