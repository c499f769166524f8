"""Every portable expression, aggregate and operator on both engines, byte for byte.

Each case is a small flow over ``tests/data/expressions.log`` (ten lines: non-ASCII requests, sizes that are
not numbers, negative sizes, 29 February in leap and non-leap years, days and zones out of range, one
size ``-``, which the cases' read drops with the programs' step ``drop_size_dash``) with its expected output worked out by hand from the expressions'
docstrings; the same case runs on the local engine and on Spark (the shared ``local[2]`` session; the
Spark ids hold "spark", so ``make check`` leaves them out). The parsed records, in input order:

====  ========  ==========================  ============================  ====  ===================
rec   ip        time                        request                       resp  size (to_int)
====  ========  ==========================  ============================  ====  ===================
R1    10.0.0.1  29/Feb/2016:23:59:59 +0100  GET /images/a.png HTTP/1.1    200   123
R2    10.0.0.2  29/Feb/2015:00:00:00 -0000  GET /Straße?q=ǅ HTTP/1.1      404   12a (null)
R3    10.0.0.3  29/Feb/2000:12:30:00 +0000  POST /api/x,y,,z HTTP/1.0     500   -5
R4    10.0.0.2  29/Feb/1900:01:00:00 +0000  GET /images/Ünï.GIF HTTP/1.1  200   0
R5    10.0.0.4  31/Apr/2020:10:00:00 +0000  HEAD / HTTP/1.1               304   7
R6    10.0.0.5  1/Jan/2021:09:00:00 +0000   GET /images/b.png HTTP/1.1    200   19 digits (null)
R7    10.0.0.1  30/Apr/2020:00:00:00 +2400  GET /x.png HTTP/1.1           200   empty (null)
R8    10.0.0.6  31/Dec/9999:23:59:59 -1159  DELETE /images/ HTTP/1.1      201   -0 (0)
R9    10.0.0.3  28/Feb/2015:18:00:00 +0000  GET /images/a.png HTTP/1.1    404   99
====  ========  ==========================  ============================  ====  ===================

A sink writes null as the empty field, booleans as true/false, integers in decimal.
"""
from __future__ import annotations

import inspect
import os

import pytest
from conftest import HERE, parts

import logetl.api as L
from logetl import assembly
from logetl import expressions as E
from logetl.engines import UnsupportedOperator, get_engine
from logetl.engines.local import expressions as local_expressions
from logetl.engines.spark import expressions as spark_expressions
from logetl.engines.local.engine import LocalEngine
from logetl.io.fs import LOCAL
from logetl.engines.spark.operators import OPERATORS
from logetl.engines.spark.engine import SparkEngine
from logetl.job import bind
from logetl.listener import FlowListener

LOG = os.path.join(HERE, "data", "expressions.log")


def logs():
    """The five fields of the original expression, the size ``-`` record dropped (the table above)."""
    return L.read(fields=("ip", "time", "request", "response", "size")).drop_size_dash()


def n_of(pipe):
    """The records with ``n`` = to_int(size)."""
    return pipe.derive(n=L.col("size").to_int())


def lines(*rows: str) -> bytes:
    return "".join(r + "\n" for r in rows).encode("utf-8")


# --- the cases: name -> function(parsed records) -> (sinks, {output tap: expected bytes}) -------------------

def case_values(p):
    out = p.derive(s=L.lit("é"), i=L.lit(-9223372036854775808), t=L.lit(True)).select(
        "response", "s", "i", "t")
    return [out.write("out")], {"out": lines(*(f"{r}\té\t-9223372036854775808\ttrue" for r in (
        "200", "404", "500", "200", "304", "200", "200", "201", "404")))}


def case_compare(p):
    c = L.col
    out = (n_of(p).derive(ok=c("response") == "200", name="first")
           .derive(ne=c("ok") != L.lit(False), lt=c("n") < 0, le=c("n") <= 7, gt=c("request") > "GET /images/Z",
                   ge=c("n") >= 0)
           .select("response", "size", "ok", "ne", "lt", "le", "gt", "ge"))
    return [out.write("out")], {"out": lines(
        "200\t123\ttrue\ttrue\tfalse\tfalse\ttrue\ttrue",
        "404\t12a\tfalse\tfalse\t\t\tfalse\t",          # "GET /S" < "GET /i": bytes, upper case first
        "500\t-5\tfalse\tfalse\ttrue\ttrue\ttrue\tfalse",
        "200\t0\ttrue\ttrue\tfalse\ttrue\ttrue\ttrue",     # "Ü" (C3 9C) after "Z" (5A)
        "304\t7\tfalse\tfalse\tfalse\ttrue\ttrue\ttrue",
        "200\t1234567890123456789\ttrue\ttrue\t\t\ttrue\t",
        "200\t\ttrue\ttrue\t\t\ttrue\t",
        "201\t-0\tfalse\tfalse\tfalse\ttrue\tfalse\ttrue",
        "404\t99\tfalse\tfalse\tfalse\tfalse\ttrue\ttrue")}


def case_logic(p):
    c = L.col
    positive, ok = c("n") > 0, c("response") == "200"
    out = n_of(p).derive(a=positive & ok, o=positive | ok, x=~positive, z=c("n").is_null()).select(
        "size", "a", "o", "x", "z")
    return [out.write("out")], {"out": lines(
        "123\ttrue\ttrue\tfalse\tfalse",
        "12a\tfalse\t\t\ttrue",              # null and false = false; null or false = null; not null = null
        "-5\tfalse\tfalse\ttrue\tfalse",
        "0\tfalse\ttrue\ttrue\tfalse",
        "7\tfalse\ttrue\tfalse\tfalse",
        "1234567890123456789\t\ttrue\t\ttrue",   # null and true = null; null or true = true
        "\t\ttrue\t\ttrue",
        "-0\tfalse\tfalse\ttrue\tfalse",
        "99\tfalse\ttrue\tfalse\tfalse")}


def case_string_tests(p):
    c = L.col
    out = n_of(p).derive(
        i=c("response").is_in(["200", "304"]), j=c("n").is_in([0, 99]), s=c("request").starts_with("GET /images/"),
        e=c("request").ends_with("HTTP/1.1"), k=c("request").contains("ß")).select(
        "response", "size", "i", "j", "s", "e", "k")
    return [out.write("out")], {"out": lines(
        "200\t123\ttrue\tfalse\ttrue\ttrue\tfalse",
        "404\t12a\tfalse\t\tfalse\ttrue\ttrue",        # is_in of null is null
        "500\t-5\tfalse\tfalse\tfalse\tfalse\tfalse",
        "200\t0\ttrue\ttrue\ttrue\ttrue\tfalse",
        "304\t7\ttrue\tfalse\tfalse\ttrue\tfalse",
        "200\t1234567890123456789\ttrue\t\ttrue\ttrue\tfalse",
        "200\t\ttrue\t\tfalse\ttrue\tfalse",
        "201\t-0\tfalse\ttrue\tfalse\ttrue\tfalse",
        "404\t99\tfalse\ttrue\ttrue\ttrue\tfalse")}


def case_matches(p):
    c = L.col
    out = p.derive(
        m1=c("request").matches(r"^GET /images/[^/]+\.(png|gif)"), m2=c("size").matches("^-?[0-9]+$"),
        m3=c("request").matches("ß|ǅ"), m4=c("time").matches("^[0-9]{2}/(?:Feb|Apr)/"),
        m5=c("request").matches("^G.*?1$")).select("size", "m1", "m2", "m3", "m4", "m5")
    return [out.write("out")], {"out": lines(
        "123\ttrue\ttrue\tfalse\ttrue\ttrue",
        "12a\tfalse\tfalse\ttrue\ttrue\ttrue",
        "-5\tfalse\ttrue\tfalse\ttrue\tfalse",
        "0\tfalse\ttrue\tfalse\ttrue\ttrue",        # .GIF: upper case, no match
        "7\tfalse\ttrue\tfalse\ttrue\tfalse",
        "1234567890123456789\ttrue\ttrue\tfalse\tfalse\ttrue",
        "\tfalse\tfalse\tfalse\ttrue\ttrue",
        "-0\tfalse\ttrue\tfalse\tfalse\tfalse",
        "99\ttrue\ttrue\tfalse\ttrue\ttrue")}


def case_substring_case(p):
    c = L.col
    out = p.derive(a=c("request").substring(5, 8), b=c("request").substring(13), f=c("size").substring(2, 100),
                        lo=c("request").lower(), up=c("request").upper()).select("a", "b", "f", "lo", "up")
    return [out.write("out")], {"out": lines(
        "/images/\ta.png HTTP/1.1\t23\tget /images/a.png http/1.1\tGET /IMAGES/A.PNG HTTP/1.1",
        "/Straße?\tq=ǅ HTTP/1.1\t2a\tget /straße?q=ǆ http/1.1\tGET /STRASSE?Q=Ǆ HTTP/1.1",
        " /api/x,\ty,,z HTTP/1.0\t5\tpost /api/x,y,,z http/1.0\tPOST /API/X,Y,,Z HTTP/1.0",
        "/images/\tÜnï.GIF HTTP/1.1\t\tget /images/ünï.gif http/1.1\tGET /IMAGES/ÜNÏ.GIF HTTP/1.1",
        " / HTTP/\t1.1\t\thead / http/1.1\tHEAD / HTTP/1.1",
        "/images/\tb.png HTTP/1.1\t234567890123456789\tget /images/b.png http/1.1\tGET /IMAGES/B.PNG HTTP/1.1",
        "/x.png H\tTTP/1.1\t\tget /x.png http/1.1\tGET /X.PNG HTTP/1.1",
        "TE /imag\tes/ HTTP/1.1\t0\tdelete /images/ http/1.1\tDELETE /IMAGES/ HTTP/1.1",
        "/images/\ta.png HTTP/1.1\t9\tget /images/a.png http/1.1\tGET /IMAGES/A.PNG HTTP/1.1")}


def case_split_concat(p):
    c = L.col
    out = (p.derive(path=c("request").split_part(" ", 2), third=c("request").split_part(",", 3),
                         v=c("request").split_part("/1.", 2),      # '.' is a literal, not "any character"
                         cc=L.concat(c("response"), "-", c("size").to_int()))
           .derive(tn=c("third").is_null()).select("path", "third", "tn", "v", "cc"))
    return [out.write("out")], {"out": lines(
        "/images/a.png\t\ttrue\t1\t200-123",
        "/Straße?q=ǅ\t\ttrue\t1\t",                  # concat of a null is null
        "/api/x,y,,z\t\tfalse\t0\t500--5",           # the third piece is there, and empty
        "/images/Ünï.GIF\t\ttrue\t1\t200-0",
        "/\t\ttrue\t1\t304-7",
        "/images/b.png\t\ttrue\t1\t",
        "/x.png\t\ttrue\t1\t",
        "/images/\t\ttrue\t1\t201-0",
        "/images/a.png\t\ttrue\t1\t404-99")}


def case_arithmetic(p):
    c = L.col
    n = c("n")
    out = n_of(p).derive(
        p=n + 1, q=n * -3 - 10, d=n // 4, r=n % 4, dn=n // -4, rn=n % -4, z=n // 0,
        k=L.coalesce(n.to_int(), -1)).select("size", "n", "p", "q", "d", "r", "dn", "rn", "z", "k")
    return [out.write("out")], {"out": lines(
        "123\t123\t124\t-379\t30\t3\t-31\t-1\t\t123",
        "12a\t\t\t\t\t\t\t\t\t-1",
        "-5\t-5\t-4\t5\t-2\t3\t1\t-1\t\t-5",          # floor division; the remainder has the divisor's sign
        "0\t0\t1\t-10\t0\t0\t0\t0\t\t0",
        "7\t7\t8\t-31\t1\t3\t-2\t-1\t\t7",
        "1234567890123456789\t\t\t\t\t\t\t\t\t-1",      # 19 digits: not an integer
        "\t\t\t\t\t\t\t\t\t-1",
        "-0\t0\t1\t-10\t0\t0\t0\t0\t\t0",
        "99\t99\t100\t-307\t24\t3\t-25\t-1\t\t99")}


def case_crc32(p):
    c = L.col
    ips = p.derive(h=L.crc32(c("ip")), m=L.crc32(c("ip")) % 100).select("ip", "h", "m")
    wide = p.filter(c("request").matches("ß|Ü")).derive(h=L.crc32(c("request"))).select("h")
    return [ips.write("ips"), wide.write("wide")], {
        "ips": lines("10.0.0.1\t654229907\t7", "10.0.0.2\t3220672553\t53", "10.0.0.3\t3371212991\t91",
                     "10.0.0.2\t3220672553\t53", "10.0.0.4\t1452553500\t0", "10.0.0.5\t563283338\t38",
                     "10.0.0.1\t654229907\t7", "10.0.0.6\t3097121840\t40", "10.0.0.3\t3371212991\t91"),
        "wide": lines("2677523213", "4153401609")}


def case_crc32_null_empty(p):
    """A null value's CRC-32 is null, the empty string's 0 (``zlib.crc32(b"")``): the third piece of R3's
    request is there and empty, the others' are null; R7's size is the empty string."""
    c = L.col
    out = p.derive(t=L.crc32(c("request").split_part(",", 3)), s=L.crc32(c("size"))).select("size", "t", "s")
    return [out.write("out")], {"out": lines(
        "123\t\t2286445522", "12a\t\t221074186", "-5\t0\t926977075", "0\t\t4108050209", "7\t\t1790921346",
        "1234567890123456789\t\t3547206425", "\t\t0", "-0\t\t1193965756", "99\t\t274208589")}


def case_hash64(p):
    """Its numbers are the engine's own: the case shows what they are for (equal strings, equal hashes;
    distinct combinations counted) in bytes that hold on both engines."""
    c = L.col
    per_ip = p.derive(h=L.hash64(c("ip"), c("response"))).group_by("ip").agg(cd=L.count_distinct("h")).sort("ip")
    same = p.filter(L.hash64(c("request")) == L.hash64(L.lit("GET /images/a.png HTTP/1.1"))).select("ip")
    return [per_ip.write("ip"), same.write("same")], {
        "ip": lines("10.0.0.1\t1", "10.0.0.2\t2", "10.0.0.3\t2", "10.0.0.4\t1", "10.0.0.5\t1", "10.0.0.6\t1"),
        "same": lines("10.0.0.1", "10.0.0.3")}


def case_day_hour(p):
    out = p.derive(d=L.day(L.col("time")), h=L.hour(L.col("time"))).select("time", "d", "h")
    return [out.write("out")], {"out": lines(
        "29/Feb/2016:23:59:59 +0100\t2016-02-29\t2016-02-29T23",   # 2016: a leap year
        "29/Feb/2015:00:00:00 -0000\t\t",                          # 2015: not
        "29/Feb/2000:12:30:00 +0000\t2000-02-29\t2000-02-29T12",   # divisible by 400: leap
        "29/Feb/1900:01:00:00 +0000\t\t",                          # by 100, not 400: not leap
        "31/Apr/2020:10:00:00 +0000\t\t",                          # April has 30 days
        "1/Jan/2021:09:00:00 +0000\t\t",                           # one-digit day
        "30/Apr/2020:00:00:00 +2400\t\t",                          # zone hour 24
        "31/Dec/9999:23:59:59 -1159\t9999-12-31\t9999-12-31T23",
        "28/Feb/2015:18:00:00 +0000\t2015-02-28\t2015-02-28T18")}


def case_filter_select_rename(p):
    c = L.col
    kept = p.filter(c("size").to_int() > 5).select("ip", "size")       # null drops the record
    swapped = p.select("size", "ip").rename(size="ip", ip="size")      # at once: a swap
    return [kept.write("kept"), swapped.write("swapped")], {
        "kept": lines("10.0.0.1\t123", "10.0.0.4\t7", "10.0.0.3\t99"),
        "swapped": lines("123\t10.0.0.1", "12a\t10.0.0.2", "-5\t10.0.0.3", "0\t10.0.0.2", "7\t10.0.0.4",
                         "1234567890123456789\t10.0.0.5", "\t10.0.0.1", "-0\t10.0.0.6", "99\t10.0.0.3")}


def case_unique(p):
    out = p.select("ip").unique().sort("ip")
    return [out.write("out")], {"out": lines(*(f"10.0.0.{i}" for i in range(1, 7)))}


def case_group_by(p):
    per_ip = n_of(p).group_by("ip").agg(
        c=L.count(), cn=L.count("n"), s=L.sum("n"), lo=L.min("size"), hi=L.max("n"),
        cd=L.count_distinct("n")).sort("ip")
    per_day = p.derive(d=L.day(L.col("time"))).group_by("d").agg(c=L.count()).sort("d")
    return [per_ip.write("ip"), per_day.write("day")], {
        "ip": lines(
            "10.0.0.1\t2\t1\t123\t\t123\t1",       # min of the sizes "123" and "" is ""
            "10.0.0.2\t2\t1\t0\t0\t0\t1",
            "10.0.0.3\t2\t2\t94\t-5\t99\t2",
            "10.0.0.4\t1\t1\t7\t7\t7\t1",
            "10.0.0.5\t1\t0\t\t1234567890123456789\t\t0",   # every n null: sum and max null, 0 distinct
            "10.0.0.6\t1\t1\t0\t-0\t0\t1"),
        "day": lines("\t5", "2000-02-29\t1", "2015-02-28\t1", "2016-02-29\t1", "9999-12-31\t1")}


def case_join(p):
    c = L.col
    held = p.filter(c("response") != "200").select("ip", "response").rename(response="code")
    stream = p.select("ip", "size")
    inner = stream.join(held, on="ip")
    left = stream.join(held.rename(ip="hip", name="hip"), on=("ip", "hip"), how="left", name="left")
    return [inner.write("inner"), left.write("left")], {
        "inner": lines(   # the held records: R2 .2 404, R3 .3 500, R5 .4 304, R8 .6 201, R9 .3 404
            "10.0.0.2\t12a\t404", "10.0.0.3\t-5\t500", "10.0.0.3\t-5\t404", "10.0.0.2\t0\t404",
            "10.0.0.4\t7\t304", "10.0.0.6\t-0\t201", "10.0.0.3\t99\t500", "10.0.0.3\t99\t404"),
        "left": lines(
            "10.0.0.1\t123\t\t", "10.0.0.2\t12a\t10.0.0.2\t404", "10.0.0.3\t-5\t10.0.0.3\t500",
            "10.0.0.3\t-5\t10.0.0.3\t404", "10.0.0.2\t0\t10.0.0.2\t404", "10.0.0.4\t7\t10.0.0.4\t304",
            "10.0.0.5\t1234567890123456789\t\t", "10.0.0.1\t\t\t", "10.0.0.6\t-0\t10.0.0.6\t201",
            "10.0.0.3\t99\t10.0.0.3\t500", "10.0.0.3\t99\t10.0.0.3\t404")}


def case_sort_limit(p):
    parsed = p
    n = n_of(parsed)
    keys = n.sort(L.desc("response"), "n").select("response", "n", "ip")
    down = n.sort(L.desc("n")).select("n", "ip")
    return [keys.write("keys"), down.write("desc"), keys.limit(4).write("first"),
            parsed.limit(2).select("ip", "size").write("head"), parsed.branch("copy").limit(0).write("none")], {
        "keys": lines(                           # null first ascending; equal keys in input order
            "500\t-5\t10.0.0.3", "404\t\t10.0.0.2", "404\t99\t10.0.0.3", "304\t7\t10.0.0.4", "201\t0\t10.0.0.6",
            "200\t\t10.0.0.5", "200\t\t10.0.0.1", "200\t0\t10.0.0.2", "200\t123\t10.0.0.1"),
        "desc": lines(                           # null last descending
            "123\t10.0.0.1", "99\t10.0.0.3", "7\t10.0.0.4", "0\t10.0.0.2", "0\t10.0.0.6", "-5\t10.0.0.3",
            "\t10.0.0.2", "\t10.0.0.5", "\t10.0.0.1"),
        "first": lines("500\t-5\t10.0.0.3", "404\t\t10.0.0.2", "404\t99\t10.0.0.3", "304\t7\t10.0.0.4"),
        "head": lines("10.0.0.1\t123", "10.0.0.2\t12a"),
        "none": b""}


def case_top(p):
    n = n_of(p)
    per_response = n.top(2, by=L.desc("n"), per="response").select("response", "n", "ip")
    overall = n.top(3, by="response", name="top_all").select("ip", "response")
    first_per_ip = n.top(1, by="response", per="ip", name="top_ip").select("ip", "response", "size")
    return [per_response.write("per"), overall.write("all"), first_per_ip.write("ip")], {
        "per": lines("200\t123\t10.0.0.1", "200\t0\t10.0.0.2", "201\t0\t10.0.0.6", "304\t7\t10.0.0.4",
                     "404\t99\t10.0.0.3", "404\t\t10.0.0.2", "500\t-5\t10.0.0.3"),
        "all": lines("10.0.0.1\t200", "10.0.0.2\t200", "10.0.0.5\t200"),         # ties: input order
        "ip": lines("10.0.0.1\t200\t123", "10.0.0.2\t200\t0", "10.0.0.3\t404\t99", "10.0.0.4\t304\t7",
                    "10.0.0.5\t200\t1234567890123456789", "10.0.0.6\t201\t-0")}


def case_checkpoint(p):
    stored = n_of(p).checkpoint("cp")
    known = stored.filter(L.col("n").is_not_null()).select("ip", "n")
    return [known.write("known"), stored.limit(3).select("ip").write("first")], {
        "known": lines("10.0.0.1\t123", "10.0.0.3\t-5", "10.0.0.2\t0", "10.0.0.4\t7", "10.0.0.6\t0",
                       "10.0.0.3\t99"),
        "first": lines("10.0.0.1", "10.0.0.2", "10.0.0.3")}


def case_sql(p):
    out = p.sql("SELECT response, count(*) AS n FROM input GROUP BY response ORDER BY n DESC, response")
    return [out.write("out")], {"out": lines("200\t4", "404\t2", "201\t1", "304\t1", "500\t1")}


CASES = {name[len("case_"):]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}


def build(name: str):
    sinks, expected = CASES[name](logs())
    return L.Flow(f"expr_{name}", sinks), expected


def run_flow(flow, engine: str, where) -> tuple[dict[str, bytes], object]:
    """(output tap -> bytes, the FlowRun) of ``flow`` on ``engine``, its outputs under ``where``."""
    runner = get_engine(engine)()
    outs = {s.tap: str(where / s.tap) for s in flow.sinks}
    try:
        taps = bind(flow, LOG, outs, engine=engine, fs=runner.filesystem())
        run = runner.run(flow, taps, FlowListener())
    finally:
        runner.shutdown()
    return {tap: parts(path) for tap, path in outs.items()}, run


def counters(run) -> tuple:
    """The run's counters; an operator that saw no record may be listed with zeros or not at all (the
    local engine lists an operator once a record reaches it)."""
    return (run.lines_read, run.malformed, run.dropped_size_dash, run.written,
            [(s.name, {op: c for op, c in s.counters.items() if c != {"in": 0, "out": 0}}) for s in run.steps])


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_gives_the_expected_bytes(engine, name, tmp_path):
    flow, expected = build(name)
    got, run = run_flow(flow, engine, tmp_path)
    assert {tap: data.decode("utf-8") for tap, data in got.items()} == \
        {tap: data.decode("utf-8") for tap, data in expected.items()}
    assert run.lines_read == 10 and run.dropped_size_dash == 1
    if engine == "spark":   # every operator's records in and out, as the local engine counts them
        (tmp_path / "local").mkdir()
        _, local = run_flow(build(name)[0], "local", tmp_path / "local")
        assert counters(run) == counters(local)


# --- the registries and the suite cover every class --------------------------------------------------------

def concrete(module, base) -> set[type]:
    """The public classes of ``module`` derived from ``base`` (not the private bases such as _StringTest)."""
    return {c for _, c in inspect.getmembers(module, inspect.isclass)
            if issubclass(c, base) and c is not base and (c.__module__ + ".").startswith(module.__name__ + ".")
            and not c.__name__.startswith("_")}


def case_flows():
    """The flows of this module's cases and of the vocabulary modules' (``test_vocabulary_*``: their
    ``CASES`` built by ``build``, and the flow functions listed in ``FLOWS``)."""
    import importlib

    yield from (build(name)[0] for name in CASES)
    for module in sorted(f[:-3] for f in os.listdir(os.path.join(HERE, "vocabulary"))
                          if f.startswith("test_vocabulary_") and f.endswith(".py")):
        vocabulary = importlib.import_module(module)
        yield from (vocabulary.build(name)[0] for name in getattr(vocabulary, "CASES", ()))
        yield from (make() for make in getattr(vocabulary, "FLOWS", ()))


def used_in_cases() -> tuple[set[type], set[type]]:
    """(expression and aggregate classes, operator classes) the cases' flows use, here and in the
    vocabulary modules."""
    exprs, ops = set(), set()
    for flow in case_flows():
        for node in flow.nodes:
            ops.add(type(node))
            for top in node.expressions():
                exprs.update(type(e) for e in (top.walk() if isinstance(top, E.Expr) else [top]))
    return exprs, ops


def test_every_expression_and_aggregate_has_an_entry_in_both_engines_and_a_case():
    expressions = concrete(E, E.Expr) | concrete(E, E.Aggregate)
    assert len(expressions) == 52, sorted(c.__name__ for c in expressions)   # a new class: add a case too
    for table in (local_expressions.COMPILE, spark_expressions.COMPILE):
        assert set(table) == concrete(E, E.Expr)
    for table in (local_expressions.AGGREGATES, spark_expressions.AGGREGATES):
        assert set(table) == concrete(E, E.Aggregate)
    assert set(LocalEngine.expressions) == set(SparkEngine.expressions) == expressions
    used, _ = used_in_cases()
    assert sorted(c.__name__ for c in expressions - used) == []


def test_every_operator_is_in_both_engines_and_has_a_case():
    # (a step the flow folds into the parse before it, such as drop_size_dash, never reaches an engine)
    operators = {assembly.Pipe} | {c for c in concrete(assembly, assembly.Pipe) if not c.traits.folds_into_parse}
    assert set(LocalEngine.operators) == set(SparkEngine.operators) == operators
    assert set(OPERATORS) == operators - {assembly.Source, assembly.Parse, assembly.Sink}
    _, used = used_in_cases()
    assert sorted(c.__name__ for c in operators - used) == []


class Shout(E.Expr):
    """An expression no engine knows."""

    def __init__(self, arg):
        self.args = (arg,)

    def check(self, types):
        return E.STRING

    def describe(self):
        return f"shout({self.args[0].describe()})"


@pytest.mark.parametrize("engine_name", ["local", "spark"])
def test_an_engine_refuses_an_unknown_expression_before_running(engine_name, tmp_path):
    """Refused by the check that starts a run: nothing is read, no session starts, nothing is written."""
    flow = L.Flow("shouting", [logs().derive(loud=Shout(L.col("ip")), name="loud").write("out")])
    runner = get_engine(engine_name)()
    taps = bind(flow, LOG, {"out": str(tmp_path / "out")}, fs=LOCAL)
    with pytest.raises(UnsupportedOperator) as caught:
        runner.run(flow, taps, FlowListener())
    assert str(caught.value) == f"the {engine_name} engine cannot compile Shout (shout(ip)) in operator 'loud'"
    assert UnsupportedOperator.exit_code == 2
    assert not (tmp_path / "out").exists()
    if engine_name == "spark":
        assert runner._spark is None
