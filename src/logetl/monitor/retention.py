"""Retention: ``logetl monitor prune`` and the daily trend of an application.

Pruning deletes runs that started before a cutoff (all statuses; a run that never started counts by when
it was last updated), except the newest ``keep_last`` runs of each owner's application, together with
everything kept about them (lineage rows, alerts, deliveries and their attempts, worker checks). Before a run
goes, it is added to ``daily_aggregates`` (per owner, application and UTC day of its start: runs,
successful, failed, the sum, count and maximum of durations, records read and written), so the trend of
durations and volumes survives. The trend of an application adds those sums to the same sums over the runs
still stored, day by day (sums add up; medians would not).
"""
from __future__ import annotations

import datetime as dt
import re

from sqlalchemy import case, func, select, text, tuple_

from logetl.errors import UsageError
from logetl.monitor.documents import MAX_TIME
from logetl.monitor.store import (alerts, daily_aggregates, deliveries, delivery_attempts, run_checks,
                                  run_lineage, runs)

UNITS = {"d": 86400, "h": 3600, "w": 7 * 86400, "m": 60}
AGE = re.compile(r"(\d+(?:\.\d+)?)([dhwm])")
BATCH = 500
#: PostgreSQL's advisory lock key that concurrent prunes' batches take turns on: "prune" in ASCII
PRUNE_LOCK = 0x7072756E65


def parse_age(value: str, now: float | None = None) -> float:
    """``90d``, ``12h``, ``2w``, ``30m`` -> seconds; anything else is a ``UsageError`` naming it. So is an age
    reaching back before 1970: no run starts that early (documents' times are checked), and the cutoff
    would be no date at all (``99999999999d``)."""
    import time

    m = AGE.fullmatch(value.strip().lower())
    if not m or float(m.group(1)) <= 0:
        raise UsageError(f"--older-than must be a duration such as 90d, 12h or 2w, not {value!r}")
    seconds = float(m.group(1)) * UNITS[m.group(2)]
    if not (now if now is not None else time.time()) - seconds >= 0:    # an infinite age too
        raise UsageError(f"--older-than {value!r} reaches back before 1970: no run started that long ago")
    return seconds


def day_of(t: float) -> str:
    """The UTC day of a time. A time outside 1970 .. 9999 (stored before documents' times were checked) is
    counted on the nearest day that is: one bad document must not stop pruning for the whole store."""
    return dt.datetime.fromtimestamp(min(max(t, 0.0), MAX_TIME), dt.timezone.utc).strftime("%Y-%m-%d")


def _age_column():
    return func.coalesce(runs.c.started_at, runs.c.updated_at)


def candidates(conn, cutoff: float, keep_last: int):
    """(owner, run_id) and the fields the aggregates need, of the runs to prune."""
    rank = func.row_number().over(partition_by=(runs.c.owner, runs.c.application),
                                  order_by=(_age_column().desc(), runs.c.run_id.desc())).label("rank")
    ranked = select(runs.c.owner, runs.c.run_id, runs.c.application, runs.c.status, runs.c.duration,
                    runs.c.records_read, runs.c.records_written, _age_column().label("at"), rank).subquery()
    q = select(ranked).where(ranked.c.at < cutoff)
    if keep_last:
        q = q.where(ranked.c.rank > keep_last)
    return list(conn.execute(q.order_by(ranked.c.at)))


def prune(store, *, older_than: float, keep_last: int = 0, dry_run: bool = False, now: float | None = None) -> dict:
    """Prunes (or, with ``dry_run``, counts) the runs older than ``older_than`` seconds. Returns
    ``{"cutoff", "runs", "applications", "kept"}`` (``kept``: old runs kept by ``keep_last``)."""
    import time

    cutoff = (now if now is not None else time.time()) - older_than
    with store.engine.connect() as conn:
        todo = candidates(conn, cutoff, keep_last)
        old = conn.execute(select(func.count()).select_from(runs).where(_age_column() < cutoff)).scalar_one()
    summary = {"cutoff": cutoff, "runs": len(todo), "applications": len({(r.owner, r.application) for r in todo}),
               "kept": old - len(todo)}
    if dry_run:
        return summary
    pruned = []     # what this prune deleted: another one at the same time may have taken some first
    for i in range(0, len(todo), BATCH):
        pruned += _prune_batch(store, todo[i:i + BATCH], cutoff)
    summary.update(runs=len(pruned), applications=len({(r.owner, r.application) for r in pruned}))
    return summary


def _prune_batch(store, batch, cutoff: float) -> list:
    """Deletes a batch of runs and adds them to the daily sums, in one transaction; returns the runs it
    deleted. Only the runs this transaction deletes are added: the DELETE comes first and says (RETURNING)
    which rows it removed, so a run that another prune (started at the same time, from the same list)
    removed first is counted by that prune alone. On PostgreSQL the DELETE waits for the other
    transaction's row locks and then finds the rows gone; on SQLite writers take turns, and a transaction
    whose first statement writes reads the database as the previous writer left it. Batches of concurrent
    prunes take turns on PostgreSQL (an advisory lock held to the end of the transaction), so that two
    DELETEs never wait for each other's rows (a deadlock, which PostgreSQL ends by failing one)."""
    keys = [(r.owner, r.run_id) for r in batch]
    t = runs.c
    with store.engine.begin() as conn:
        if store.engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PRUNE_LOCK})
        gone = list(conn.execute(
            runs.delete().where(tuple_(t.owner, t.run_id).in_(keys), _age_column() < cutoff)
            .returning(t.owner, t.run_id, t.application, t.status, t.duration, t.records_read, t.records_written,
                       _age_column().label("at"))))
        if not gone:
            return []
        _aggregate(store, conn, gone)
        done = [(r.owner, r.run_id) for r in gone]
        ds = select(deliveries.c.id).where(tuple_(deliveries.c.owner, deliveries.c.run_id).in_(done))
        conn.execute(delivery_attempts.delete().where(delivery_attempts.c.delivery_id.in_(ds)))
        for table in (deliveries, alerts, run_lineage, run_checks):
            conn.execute(table.delete().where(tuple_(table.c.owner, table.c.run_id).in_(done)))
    return gone


def _aggregate(store, conn, batch) -> None:
    sums: dict[tuple, dict] = {}
    for r in batch:
        a = sums.setdefault((r.owner, r.application, day_of(r.at)), {
            "runs": 0, "successful": 0, "failed": 0, "duration_sum": 0.0, "duration_n": 0, "duration_max": None,
            "records_read": 0, "records_written": 0})
        a["runs"] += 1
        a["successful"] += r.status == "SUCCESSFUL"
        a["failed"] += r.status == "FAILED"
        if r.duration is not None:
            a["duration_sum"] += r.duration
            a["duration_n"] += 1
            a["duration_max"] = r.duration if a["duration_max"] is None else max(a["duration_max"], r.duration)
        a["records_read"] += r.records_read or 0
        a["records_written"] += r.records_written or 0
    for (owner, application, day), a in sums.items():
        stmt = store._insert()(daily_aggregates).values(owner=owner, application=application, day=day, **a)
        ex = stmt.excluded
        t = daily_aggregates.c
        conn.execute(stmt.on_conflict_do_update(
            index_elements=["owner", "application", "day"],
            set_={"runs": t.runs + ex.runs, "successful": t.successful + ex.successful, "failed": t.failed + ex.failed,
                  "duration_sum": t.duration_sum + ex.duration_sum, "duration_n": t.duration_n + ex.duration_n,
                  "duration_max": func.coalesce(func.greatest(t.duration_max, ex.duration_max)
                                                if store.engine.dialect.name == "postgresql"
                                                else func.max(t.duration_max, ex.duration_max),
                                                t.duration_max, ex.duration_max),
                  "records_read": t.records_read + ex.records_read,
                  "records_written": t.records_written + ex.records_written}))


def _day_expr(engine):
    # clamped as ``day_of`` does: PostgreSQL refuses to_timestamp(1e300), which a run stored before times
    # were checked may have, and the whole trend would fail
    if engine.dialect.name == "sqlite":
        return func.date(func.min(func.max(_age_column(), 0.0), MAX_TIME), "unixepoch")
    return func.to_char(func.to_timestamp(func.least(func.greatest(_age_column(), 0.0), MAX_TIME))
                        .op("AT TIME ZONE")("UTC"), "YYYY-MM-DD")


def trend(store, application: str, owner: str | None = None, days: int | None = None) -> list[dict]:
    """Per UTC day: runs, successful, failed, mean and max duration, records read and written, of the runs
    stored and the pruned ones (``pruned``: how many of that day's runs are only in the aggregates)."""
    import time

    engine = store.engine
    day = _day_expr(engine).label("day")
    conds = [runs.c.application == application] + ([runs.c.owner == owner] if owner is not None else [])
    since = day_of(time.time() - days * 86400) if days else None
    live = (select(day, func.count().label("runs"), func.sum(case((runs.c.status == "SUCCESSFUL", 1), else_=0)),
                   func.sum(func.coalesce(runs.c.duration, 0.0)), func.count(runs.c.duration), func.max(runs.c.duration),
                   func.sum(func.coalesce(runs.c.records_read, 0)), func.sum(func.coalesce(runs.c.records_written, 0)),
                   func.sum(case((runs.c.status == "FAILED", 1), else_=0)))
            .where(*conds).group_by(day))
    agg_conds = [daily_aggregates.c.application == application] + (
        [daily_aggregates.c.owner == owner] if owner is not None else [])
    out: dict[str, dict] = {}

    def add(d, n, ok, failed, dsum, dn, dmax, rread, rwritten, pruned):
        if d is None or (since and d < since):
            return
        a = out.setdefault(d, {"day": d, "runs": 0, "successful": 0, "failed": 0, "duration_sum": 0.0,
                               "duration_n": 0, "max_duration": None, "records_read": 0, "records_written": 0,
                               "pruned": 0})
        a["runs"] += int(n)
        a["successful"] += int(ok or 0)
        a["failed"] += int(failed or 0)
        a["duration_sum"] += float(dsum or 0)
        a["duration_n"] += int(dn or 0)
        if dmax is not None:
            a["max_duration"] = dmax if a["max_duration"] is None else max(a["max_duration"], dmax)
        a["records_read"] += int(rread or 0)
        a["records_written"] += int(rwritten or 0)
        a["pruned"] += pruned

    with engine.connect() as conn:
        for r in conn.execute(live):
            add(r[0], r[1], r[2], r[8], r[3], r[4], r[5], r[6], r[7], 0)
        t = daily_aggregates.c
        for r in conn.execute(select(t.day, t.runs, t.successful, t.failed, t.duration_sum, t.duration_n,
                                     t.duration_max, t.records_read, t.records_written).where(*agg_conds)):
            add(r.day, r.runs, r.successful, r.failed, r.duration_sum, r.duration_n, r.duration_max, r.records_read,
                r.records_written, r.runs)
    days_out = []
    for d in sorted(out):
        a = out[d]
        n = a.pop("duration_n")
        total = a.pop("duration_sum")
        a["mean_duration"] = round(total / n, 6) if n else None
        days_out.append(a)
    return days_out
