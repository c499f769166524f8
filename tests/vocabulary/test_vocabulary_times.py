"""Times on both engines, byte for byte: ``timestamp`` (a UTC instant of the log's time), ``epoch``,
``from_epoch``, ``trunc`` (UTC) and ``trunc_local`` (as written), ``day_of_week``, ``hour_of_day``, the
``visits`` operator, and a timestamp through sorts, joins, ``min``/``max``, checkpoints and every sink
format.

Each case is a small flow over ``tests/data/times.log`` with its expected output worked out by hand; the
same case runs on the local engine and on Spark. The records (size = record number), in input order:

====  =======  ==========================  ======================  ===================================
rec   ip       time                        UTC instant             why
====  =======  ==========================  ======================  ===================================
R1    1.1.1.1  17/May/2015:10:05:03 +0000  2015-05-17T10:05:03Z    a Sunday
R2    1.1.1.1  17/May/2015:10:35:03 +0000  2015-05-17T10:35:03Z    exactly 30 minutes after R1
R3    1.1.1.1  17/May/2015:11:05:04 +0000  2015-05-17T11:05:04Z    30 min 1 s after R2
R4    1.1.1.1  17/May/2015:13:05:04 +0200  2015-05-17T11:05:04Z    R3's instant, written in +0200
R5    2.2.2.2  01/Jan/2016:00:30:00 +0100  2015-12-31T23:30:00Z    back across a year
R6    2.2.2.2  29/Feb/2016:23:59:59 -0100  2016-03-01T00:59:59Z    a leap day, on across a month
R7    3.3.3.3  31/Dec/2020:23:00:00 -0130  2021-01-01T00:30:00Z    on across a year; ISO week of 2020
R8    3.3.3.3  31/Apr/2020:10:00:00 +0000  null                    no 31 April: not a valid time
R9    3.3.3.3  01/Jan/0001:00:30:00 +0100  null                    valid, but before 0001 in UTC
R10   4.4.4.4  31/Dec/9999:12:00:00 +1200  9999-12-31T00:00:00Z    the last day
R11   4.4.4.4  31/Dec/9999:23:59:59 -1159  null                    valid, but after 9999 in UTC
R12   4.4.4.4  01/Jan/1970:00:00:00 +0000  1970-01-01T00:00:00Z    epoch 0, a Thursday
R13   4.4.4.4  31/Dec/1969:23:59:59 +0000  1969-12-31T23:59:59Z    epoch -1
R14   5.5.5.5  17/May/2015:12:00:00 +0000  2015-05-17T12:00:00Z    R14-R16 out of time order
R15   5.5.5.5  17/May/2015:11:00:00 +0000  2015-05-17T11:00:00Z
R16   5.5.5.5  17/May/2015:11:29:59 +0000  2015-05-17T11:29:59Z
====  =======  ==========================  ======================  ===================================
"""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import time as pytime

import pytest
from conftest import HERE, flow_outputs

import logetl.api as L
from logetl import assembly
from logetl import expressions as E

LOG = os.path.join(HERE, "data", "times.log")
col = L.col


def lines(*rows: str) -> bytes:
    return "".join(r + "\n" for r in rows).encode("utf-8")


def stamped(p):
    """The records with ``ts`` = timestamp(time) and ``n`` = the record number."""
    return p.derive(ts=L.timestamp("time"), n=col("size").to_int())


# --- the cases: name -> function(parsed records) -> (sinks, {output tap: expected bytes}) -------------------

def case_timestamp_epoch(p):
    out = stamped(p).derive(e=L.epoch("ts"), back=L.from_epoch(L.epoch("ts"))).select("n", "ts", "e", "back")
    return [out.write("out")], {"out": lines(
        "1\t2015-05-17T10:05:03Z\t1431857103\t2015-05-17T10:05:03Z",
        "2\t2015-05-17T10:35:03Z\t1431858903\t2015-05-17T10:35:03Z",
        "3\t2015-05-17T11:05:04Z\t1431860704\t2015-05-17T11:05:04Z",
        "4\t2015-05-17T11:05:04Z\t1431860704\t2015-05-17T11:05:04Z",
        "5\t2015-12-31T23:30:00Z\t1451604600\t2015-12-31T23:30:00Z",
        "6\t2016-03-01T00:59:59Z\t1456793999\t2016-03-01T00:59:59Z",
        "7\t2021-01-01T00:30:00Z\t1609461000\t2021-01-01T00:30:00Z",
        "8\t\t\t", "9\t\t\t",
        "10\t9999-12-31T00:00:00Z\t253402214400\t9999-12-31T00:00:00Z",
        "11\t\t\t",
        "12\t1970-01-01T00:00:00Z\t0\t1970-01-01T00:00:00Z",
        "13\t1969-12-31T23:59:59Z\t-1\t1969-12-31T23:59:59Z",
        "14\t2015-05-17T12:00:00Z\t1431864000\t2015-05-17T12:00:00Z",
        "15\t2015-05-17T11:00:00Z\t1431860400\t2015-05-17T11:00:00Z",
        "16\t2015-05-17T11:29:59Z\t1431862199\t2015-05-17T11:29:59Z")}


def case_from_epoch_range(p):
    # the first and last instants a timestamp holds, and one second past each (null)
    out = p.filter(col("size") == "12").derive(
        lo=L.from_epoch(L.lit(E.MIN_EPOCH)), below=L.from_epoch(L.lit(E.MIN_EPOCH - 1)),
        hi=L.from_epoch(L.lit(E.MAX_EPOCH)), above=L.from_epoch(L.lit(E.MAX_EPOCH + 1)),
        leap=L.from_epoch(L.lit(951782400))).select("lo", "below", "hi", "above", "leap")
    return [out.write("out")], {"out": lines(
        "0001-01-01T00:00:00Z\t\t9999-12-31T23:59:59Z\t\t2000-02-29T00:00:00Z")}


def case_trunc_utc(p):
    t = stamped(p)
    out = t.derive(**{u: L.trunc("ts", u) for u in E.TIME_UNITS}).select("n", *E.TIME_UNITS)
    z = "T00:00:00Z"
    return [out.write("out")], {"out": lines(
        f"1\t2015-05-17T10:05:00Z\t2015-05-17T10:00:00Z\t2015-05-17{z}\t2015-05-11{z}\t2015-05-01{z}",
        f"2\t2015-05-17T10:35:00Z\t2015-05-17T10:00:00Z\t2015-05-17{z}\t2015-05-11{z}\t2015-05-01{z}",
        f"3\t2015-05-17T11:05:00Z\t2015-05-17T11:00:00Z\t2015-05-17{z}\t2015-05-11{z}\t2015-05-01{z}",
        f"4\t2015-05-17T11:05:00Z\t2015-05-17T11:00:00Z\t2015-05-17{z}\t2015-05-11{z}\t2015-05-01{z}",
        f"5\t2015-12-31T23:30:00Z\t2015-12-31T23:00:00Z\t2015-12-31{z}\t2015-12-28{z}\t2015-12-01{z}",
        f"6\t2016-03-01T00:59:00Z\t2016-03-01T00:00:00Z\t2016-03-01{z}\t2016-02-29{z}\t2016-03-01{z}",
        f"7\t2021-01-01T00:30:00Z\t2021-01-01T00:00:00Z\t2021-01-01{z}\t2020-12-28{z}\t2021-01-01{z}",
        "8\t\t\t\t\t", "9\t\t\t\t\t",
        f"10\t9999-12-31T00:00:00Z\t9999-12-31T00:00:00Z\t9999-12-31{z}\t9999-12-27{z}\t9999-12-01{z}",
        "11\t\t\t\t\t",
        f"12\t1970-01-01T00:00:00Z\t1970-01-01T00:00:00Z\t1970-01-01{z}\t1969-12-29{z}\t1970-01-01{z}",
        f"13\t1969-12-31T23:59:00Z\t1969-12-31T23:00:00Z\t1969-12-31{z}\t1969-12-29{z}\t1969-12-01{z}",
        f"14\t2015-05-17T12:00:00Z\t2015-05-17T12:00:00Z\t2015-05-17{z}\t2015-05-11{z}\t2015-05-01{z}",
        f"15\t2015-05-17T11:00:00Z\t2015-05-17T11:00:00Z\t2015-05-17{z}\t2015-05-11{z}\t2015-05-01{z}",
        f"16\t2015-05-17T11:29:00Z\t2015-05-17T11:00:00Z\t2015-05-17{z}\t2015-05-11{z}\t2015-05-01{z}")}


def case_trunc_local(p):
    out = p.derive(**{u: L.trunc_local("time", u) for u in E.TIME_UNITS}).select("size", *E.TIME_UNITS)
    return [out.write("out")], {"out": lines(
        "1\t2015-05-17T10:05\t2015-05-17T10\t2015-05-17\t2015-05-11\t2015-05",
        "2\t2015-05-17T10:35\t2015-05-17T10\t2015-05-17\t2015-05-11\t2015-05",
        "3\t2015-05-17T11:05\t2015-05-17T11\t2015-05-17\t2015-05-11\t2015-05",
        "4\t2015-05-17T13:05\t2015-05-17T13\t2015-05-17\t2015-05-11\t2015-05",     # as written: +0200
        "5\t2016-01-01T00:30\t2016-01-01T00\t2016-01-01\t2015-12-28\t2016-01",     # its week began in 2015
        "6\t2016-02-29T23:59\t2016-02-29T23\t2016-02-29\t2016-02-29\t2016-02",     # a leap day, a Monday
        "7\t2020-12-31T23:00\t2020-12-31T23\t2020-12-31\t2020-12-28\t2020-12",
        "8\t\t\t\t\t",
        "9\t0001-01-01T00:30\t0001-01-01T00\t0001-01-01\t0001-01-01\t0001-01",     # 1 January 0001: a Monday
        "10\t9999-12-31T12:00\t9999-12-31T12\t9999-12-31\t9999-12-27\t9999-12",
        "11\t9999-12-31T23:59\t9999-12-31T23\t9999-12-31\t9999-12-27\t9999-12",
        "12\t1970-01-01T00:00\t1970-01-01T00\t1970-01-01\t1969-12-29\t1970-01",
        "13\t1969-12-31T23:59\t1969-12-31T23\t1969-12-31\t1969-12-29\t1969-12",
        "14\t2015-05-17T12:00\t2015-05-17T12\t2015-05-17\t2015-05-11\t2015-05",
        "15\t2015-05-17T11:00\t2015-05-17T11\t2015-05-17\t2015-05-11\t2015-05",
        "16\t2015-05-17T11:29\t2015-05-17T11\t2015-05-17\t2015-05-11\t2015-05")}


def case_day_of_week_hour_of_day(p):
    out = stamped(p).derive(dow=L.day_of_week("ts"), hod=L.hour_of_day("ts"), dow_w=L.day_of_week("time"),
                            hod_w=L.hour_of_day("time")).select("n", "dow", "hod", "dow_w", "hod_w")
    return [out.write("out")], {"out": lines(
        "1\t7\t10\t7\t10", "2\t7\t10\t7\t10", "3\t7\t11\t7\t11",
        "4\t7\t11\t7\t13",                    # UTC 11h, written 13h
        "5\t4\t23\t5\t0",                     # Thursday 31 Dec in UTC, Friday 1 Jan as written
        "6\t2\t0\t1\t23",
        "7\t5\t0\t4\t23",
        "8\t\t\t\t",
        "9\t\t\t1\t0",                        # no instant; as written a Monday
        "10\t5\t0\t5\t12",
        "11\t\t\t5\t23",
        "12\t4\t0\t4\t0", "13\t3\t23\t3\t23",
        "14\t7\t12\t7\t12", "15\t7\t11\t7\t11", "16\t7\t11\t7\t11")}


def case_group_sort_compare(p):
    t = stamped(p)
    per_ip = t.group_by("ip").agg(first=L.min("ts"), last=L.max("ts"), c=L.count("ts"),
                                  d=L.count_distinct("ts")).sort("ip")
    per_hour = t.derive(h=L.trunc("ts", "hour")).group_by("h").agg(c=L.count()).sort("h")
    # descending, null last; equal instants (R3, R4) in input order
    latest = t.sort(L.desc("ts"), name="latest").select("ts", "n").limit(5)
    after = t.filter(col("ts") >= L.from_epoch(L.lit(1431860704))).select("n")
    same = t.filter(col("ts") == L.timestamp(L.lit("17/May/2015:11:05:04 +0000")), name="same").select("n")
    either = t.derive(c=L.coalesce(col("ts"), L.from_epoch(L.lit(0)))).filter(col("n") >= 8).filter(
        col("n") <= 9, name="f89").select("n", "c")
    return [per_ip.write("ip"), per_hour.write("hour"), latest.write("latest"), after.write("after"),
            same.write("same"), either.write("either")], {
        "ip": lines(
            "1.1.1.1\t2015-05-17T10:05:03Z\t2015-05-17T11:05:04Z\t4\t3",
            "2.2.2.2\t2015-12-31T23:30:00Z\t2016-03-01T00:59:59Z\t2\t2",
            "3.3.3.3\t2021-01-01T00:30:00Z\t2021-01-01T00:30:00Z\t1\t1",
            "4.4.4.4\t1969-12-31T23:59:59Z\t9999-12-31T00:00:00Z\t3\t3",
            "5.5.5.5\t2015-05-17T11:00:00Z\t2015-05-17T12:00:00Z\t3\t3"),
        "hour": lines(
            "\t3", "1969-12-31T23:00:00Z\t1", "1970-01-01T00:00:00Z\t1", "2015-05-17T10:00:00Z\t2",
            "2015-05-17T11:00:00Z\t4", "2015-05-17T12:00:00Z\t1", "2015-12-31T23:00:00Z\t1",
            "2016-03-01T00:00:00Z\t1", "2021-01-01T00:00:00Z\t1", "9999-12-31T00:00:00Z\t1"),
        "latest": lines("9999-12-31T00:00:00Z\t10", "2021-01-01T00:30:00Z\t7", "2016-03-01T00:59:59Z\t6",
                        "2015-12-31T23:30:00Z\t5", "2015-05-17T12:00:00Z\t14"),
        "after": lines(*(str(n) for n in (3, 4, 5, 6, 7, 10, 14, 16))),
        "same": lines("3", "4"),
        "either": lines("8\t1970-01-01T00:00:00Z", "9\t1970-01-01T00:00:00Z")}


def case_join_checkpoint(p):
    t = stamped(p)
    # two stores of one step (Spark writes them in one pass, as one Parquet file of both's columns)
    stored = t.select("ts", "n").checkpoint("cp")
    weeks = t.derive(w=L.trunc("ts", "week")).select("w").checkpoint("cp_weeks")
    # a timestamp join key: R3 and R4 share one instant; a null key matches nothing
    held = stored.filter(col("n") >= 3).filter(col("n") <= 4, name="held").rename(n="m")
    joined = stored.join(held, on="ts").select("n", "m", "ts")
    return [joined.write("joined"), stored.select("ts").limit(3).write("first"),
            weeks.unique().sort("w").write("weeks")], {
        "joined": lines("3\t3\t2015-05-17T11:05:04Z", "3\t4\t2015-05-17T11:05:04Z",
                        "4\t3\t2015-05-17T11:05:04Z", "4\t4\t2015-05-17T11:05:04Z"),
        "first": lines("2015-05-17T10:05:03Z", "2015-05-17T10:35:03Z", "2015-05-17T11:05:04Z"),
        "weeks": lines("", "1969-12-29T00:00:00Z", "2015-05-11T00:00:00Z", "2015-12-28T00:00:00Z",
                       "2016-02-29T00:00:00Z", "2020-12-28T00:00:00Z", "9999-12-27T00:00:00Z")}


def case_two_sinks(p):
    # two TSV sinks of per-record operators: Spark writes both in one pass over the parse
    t = stamped(p)
    days = t.derive(d=L.trunc("ts", "day")).filter(col("ip") == "2.2.2.2").select("n", "d")
    local = t.derive(m=L.trunc_local("time", "month"), h=L.hour_of_day("time")).filter(
        col("ip") == "3.3.3.3", name="f3").select("n", "m", "h")
    return [days.write("days"), local.write("local")], {
        "days": lines("5\t2015-12-31T00:00:00Z", "6\t2016-03-01T00:00:00Z"),
        "local": lines("7\t2020-12\t23", "8\t\t", "9\t0001-01\t0")}


def case_visits(p):
    t = stamped(p)
    v = t.visits(by="ip", time="ts").select("ip", "n", "visit")
    hour = t.visits(by=["ip", "response"], time="ts", gap_minutes=60, field="v60", name="hourly").select("n", "v60")
    return [v.write("v"), hour.write("hour")], {
        # per client in time order (null first), ties in input order; a new visit after MORE than 30 min
        "v": lines(
            "1.1.1.1\t1\t1", "1.1.1.1\t2\t1",      # R2 exactly 30 min after R1: the same visit
            "1.1.1.1\t3\t2", "1.1.1.1\t4\t2",      # R3 30:01 after R2: a new one; R4 the same instant
            "2.2.2.2\t5\t1", "2.2.2.2\t6\t2",
            "3.3.3.3\t8\t", "3.3.3.3\t9\t", "3.3.3.3\t7\t1",     # no instant: null, first
            "4.4.4.4\t11\t", "4.4.4.4\t13\t1", "4.4.4.4\t12\t1", "4.4.4.4\t10\t2",
            "5.5.5.5\t15\t1", "5.5.5.5\t16\t1", "5.5.5.5\t14\t2"),   # sorted: 11:00, 11:29:59, 12:00
        "hour": lines("1\t1", "2\t1", "3\t1", "4\t1", "5\t1", "6\t2", "8\t", "9\t", "7\t1", "11\t", "13\t1",
                      "12\t1", "10\t2", "15\t1", "16\t1", "14\t1")}   # 5.5.5.5: 30:01 is within 60 min


CASES = {name[len("case_"):]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}


def build(name: str):
    sinks, expected = CASES[name](L.read())
    return L.Flow(f"times_{name}", sinks), expected


def run_flow(flow, engine: str, where, log: str = LOG, **options) -> dict[str, bytes]:
    """output tap -> bytes of ``flow`` over ``log`` on ``engine``, its outputs under ``where``."""
    return flow_outputs(flow, engine, log, where, **options)


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_gives_the_expected_bytes(engine, name, tmp_path):
    flow, expected = build(name)
    got = run_flow(flow, engine, tmp_path)
    assert {tap: data.decode("utf-8") for tap, data in got.items()} == \
        {tap: data.decode("utf-8") for tap, data in expected.items()}


def test_the_results_do_not_depend_on_the_zone_of_the_machine_or_the_session(engine, tmp_path, monkeypatch):
    """A zone far from UTC, with summer time, for the process (and so Polars) and for the Spark session:
    the same bytes."""
    monkeypatch.setenv("TZ", "America/St_Johns")
    pytime.tzset()
    try:
        for name in ("timestamp_epoch", "trunc_utc", "trunc_local", "day_of_week_hour_of_day", "visits"):
            flow, expected = build(name)
            (tmp_path / name).mkdir()
            if engine == "spark":
                from pyspark.sql import SparkSession

                from logetl.engines.spark.session import _session_conf

                spark = SparkSession.getActiveSession()
                with _session_conf(spark, {"spark.sql.session.timeZone": "Asia/Kathmandu"}):
                    got = run_flow(flow, engine, tmp_path / name)
            else:
                got = run_flow(flow, engine, tmp_path / name)
            assert got == expected, name
    finally:
        monkeypatch.delenv("TZ")
        pytime.tzset()


# --- every sink format, checked against Python's datetime --------------------------------------------------

def _instants():
    """The records' (n, UTC instant or None) by Python's datetime, from the log's text."""
    out = []
    for n, line in enumerate(open(LOG, encoding="utf-8"), 1):
        written = re.search(r"\[(.*?)\]", line).group(1)
        try:
            clock = dt.datetime.strptime(written[:20], "%d/%b/%Y:%H:%M:%S")
            sign = 1 if written[21] == "+" else -1
            instant = (clock - sign * dt.timedelta(hours=int(written[22:24]), minutes=int(written[24:26])))
            out.append((n, instant.replace(tzinfo=dt.timezone.utc)))
        except (ValueError, OverflowError):
            out.append((n, None))
    return out


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_a_timestamp_in_parquet_and_json_lines(engine, fmt, tmp_path):
    flow = L.Flow("fmt", [stamped(L.read()).select("n", "ts").write("out", format=fmt)])
    run_flow(flow, engine, tmp_path)
    files = sorted(f for f in os.listdir(tmp_path / "out") if f.startswith("part-"))
    expected = _instants()
    if fmt == "parquet":
        import pyarrow.parquet as pq

        tables = [pq.read_table(tmp_path / "out" / f) for f in files]
        assert all(str(t.schema.field("ts").type) == "timestamp[us, tz=UTC]" for t in tables)
        rows = [(r["n"], r["ts"]) for t in tables for r in t.to_pylist()]
        assert rows == expected
    else:
        text = b"".join((tmp_path / "out" / f).read_bytes() for f in files).decode()
        rows = [json.loads(x) for x in text.split("\n")[:-1]]
        assert rows == [{"n": n, "ts": None if i is None else i.strftime("%Y-%m-%dT%H:%M:%SZ")} for n, i in expected]
        assert text.split("\n")[0] == '{"n":1,"ts":"2015-05-17T10:05:03Z"}'


# --- visits on the real sample, against plain Python ----------------------------------------------------------

SAMPLE_LINE = re.compile(r'^(\S+) \S+ \S+ \[([^\]]+)\] "[^"]*" (\d{3}) (\d+|-)')


def python_visits(path: str, gap_minutes: int = 30) -> bytes:
    """``ip TAB epoch TAB visit`` per record by Python alone: its own parse of the log (every record, size ``-``
    included, as ``read`` keeps them), datetime for the instants, a sort and a walk."""
    records = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for i, line in enumerate(f):
            m = SAMPLE_LINE.match(line)
            if not m:
                continue
            when = dt.datetime.strptime(m.group(2), "%d/%b/%Y:%H:%M:%S %z")
            records.append((m.group(1).encode(), int(when.timestamp()), i))
    records.sort()
    out, prev = [], None
    for ip, seconds, _ in records:
        if prev is None or prev[0] != ip:
            visit = 1
        elif seconds - prev[1] > gap_minutes * 60:
            visit += 1
        out.append(b"%s\t%d\t%d\n" % (ip, seconds, visit))
        prev = (ip, seconds)
    return b"".join(out)


def sample_visits(gap_minutes: int = 30):
    t = L.read().derive(ts=L.timestamp("time"))
    v = t.visits(by="ip", time="ts", gap_minutes=gap_minutes).derive(e=L.epoch("ts")).select("ip", "e", "visit")
    return L.Flow("sample_visits", [v.write("out")])


def test_visits_on_the_real_sample_equal_plain_python(engine, sample, tmp_path):
    expected = python_visits(sample)
    assert expected.count(b"\n") > 4000 and len(set(expected.split(b"\n"))) > 100
    assert run_flow(sample_visits(), engine, tmp_path, log=sample)["out"] == expected


def test_visits_spilled_to_disk_carry_each_client_across_sorted_blocks(sample, tmp_path, monkeypatch):
    """A memory budget of a few KB and blocks of 4 KB: the sort spills, and its result comes in blocks of
    a few dozen records, so that many clients span two or more; the numbering carries over from block to
    block and gives the same bytes."""
    from logetl.engines.local import operators as local_ops
    from logetl.engines.local import spill

    monkeypatch.setattr(spill, "BLOCK_BYTES", 4096)
    frames, numbered = [], local_ops.VisitsOp._numbered

    def counted(op, frame):
        frames.append((frame.height, op.carry is not None and frame.row(0, named=True)["ip"] == op.carry[0][0]))
        return numbered(op, frame)

    monkeypatch.setattr(local_ops.VisitsOp, "_numbered", counted)
    got = run_flow(sample_visits(gap_minutes=5), "local", tmp_path, log=sample, memory_limit=400 << 20,
                   spill_buffers=16 * 1024)
    assert got["out"] == python_visits(sample, gap_minutes=5)
    assert len(frames) > 50 and sum(continued for _, continued in frames) > 20, frames


# --- mistakes, refused when the flow is defined -----------------------------------------------------------------

@pytest.mark.parametrize("make, message", [
    (lambda p: p.derive(x=L.trunc("time", "day")),
     "derive (unnamed): trunc: time is string, not timestamp (timestamp() for UTC, or trunc_local() for the time "
     "as written)"),
    (lambda p: p.derive(x=L.trunc(L.timestamp("time"), "year")),
     None),
    (lambda p: p.derive(x=L.epoch("time")),
     "derive (unnamed): epoch: time is string, not timestamp (timestamp() makes one of a log time)"),
    (lambda p: p.derive(x=L.timestamp(col("size").to_int())),
     "derive (unnamed): timestamp: to_int(size) is integer, not string"),
    (lambda p: p.derive(x=L.from_epoch("size")), "derive (unnamed): from_epoch: size is string, not integer"),
    (lambda p: p.derive(x=L.day_of_week(col("size").to_int())),
     "derive (unnamed): day_of_week: to_int(size) is integer, not a timestamp or a log time"),
    (lambda p: p.derive(ts=L.timestamp("time")).filter(col("ts") > col("time")),
     "filter (unnamed): cannot compare ts (timestamp) with time (string): use to_int() or a timestamp literal"),
    (lambda p: p.derive(ts=L.timestamp("time")).write("out", partition_by="ts"),
     "sink (unnamed): cannot partition by 'ts', a timestamp: partition by a string of it "
     "(trunc_local(time, 'day'), day(time), ...)"),
    (lambda p: p.visits(by="ip", time="time"),
     "visits (unnamed): the time field 'time' is string, not timestamp (derive one: ts=timestamp('time'))"),
    (lambda p: p.derive(ts=L.timestamp("time")).visits(by="ip", time="ts", gap_minutes=0),
     "visits: gap_minutes is a whole number of minutes >= 1, not 0"),
    (lambda p: p.derive(ts=L.timestamp("time")).visits(by="ip", time="ts", field="ip"),
     "visits (unnamed): field 'ip' exists (rename it, or name the visit field: field='...')"),
    (lambda p: p.derive(ts=L.timestamp("time")).visits(by="client", time="ts"),
     "visits (unnamed): no field 'client' in ip, time, request, response, size, referer, user_agent, ts"),
    (lambda p: p.derive(ts=L.timestamp("time")).visits(by=[], time="ts"),
     "visits: by names at least one field (the client: by='ip')"),
])
def test_a_mistake_is_one_line_naming_it(make, message):
    with pytest.raises((L.AssemblyError, L.ExpressionError)) as caught:
        make(L.read())
    if message is None:
        message = "trunc: unit 'year' is not one of minute, hour, day, week, month"
    assert str(caught.value) == message


def test_visits_is_blocking_and_explained():
    flow = L.Flow("v", [L.read().derive(ts=L.timestamp("time")).visits(by="ip", time="ts", name="v").write("o")])
    node = flow.node("v")
    assert node.blocking and node.fields[-1] == "visit" and node.types["visit"] == "integer"
    assert "  v       visits      <- derive              visit per ip in ts order, a new one after a gap of " \
        "more than 30 min\n" in flow.explain()
    assert isinstance(node, assembly.Visits)
