"""The numbers of the portable expressions on both engines, byte for byte: the float type, true division,
``round``, casts, ``when``/``then``/``otherwise``, and the aggregates ``avg``, ``median``, ``percentile``
and ``where=``; floats through TSV, JSON Lines and Parquet sinks, checkpoints, sorts, joins and spills.

The flows read ``tests/data/numbers.log`` (fifteen records); ``v`` is ``to_float(size)``:

====  ========  ====  ==============================  ==============================
rec   ip        resp  size                            v
====  ========  ====  ==============================  ==============================
R1    10.0.0.1  200   0.5                             0.5
R2    10.0.0.1  200   1.5                             1.5
R3    10.0.0.2  404   2.5                             2.5
R4    10.0.0.2  404   -0.5                            -0.5
R5    10.0.0.3  500   -2.5                            -2.5
R6    10.0.0.3  200   7                               7.0
R7    10.0.0.4  304   (empty)                         null
R8    10.0.0.4  200   1e3                             1000.0
R9    10.0.0.5  304   abc                             null
R10   10.0.0.6  404   2.675                           2.675 (stored as 2.67499999999999982236431605997495353221893310546875)
R11   10.0.0.6  500   123456789012345678901234567890  123456789012345680000000000000.0
R12   10.0.0.7  201   9007199254740993                9007199254740992.0 (2**53: the nearest float)
R13   10.0.0.8  404   0                               0.0
R14   10.0.0.8  500   -0.0                            0.0 (a float is never -0.0)
R15   10.0.0.9  304   ٣.٥ (Arabic-Indic digits)       null (ASCII digits only)
====  ========  ====  ==============================  ==============================

A float's text is the shortest decimal that reads back as the same float, without an exponent, with at
least one digit after the point; null is the empty field.
"""
from __future__ import annotations

import json
import os
import statistics

import pytest
from conftest import HERE, parts

import logetl.api as L
from logetl import expressions as E
from logetl.assembly import AssemblyError
from logetl.engines import get_engine
from logetl.engines.local.engine import LocalEngine
from logetl.job import bind
from logetl.listener import FlowListener

LOG = os.path.join(HERE, "data", "numbers.log")
c = L.col


def lines(*rows: str) -> bytes:
    return "".join(r + "\n" for r in rows).encode("utf-8")


def numbers():
    """The records with ``v`` = to_float(size)."""
    return L.read().derive(v=L.to_float(c("size")))


def run_flow(flow, engine: str, where, runner=None, log: str = LOG, runs: list | None = None) -> dict[str, bytes]:
    """Output tap -> its bytes (a Parquet output: its part files' bytes) of ``flow`` on ``engine`` over
    ``log``; the FlowRun is appended to ``runs`` when given."""
    runner = runner or get_engine(engine)()
    outs = {s.tap: str(where / s.tap) for s in flow.sinks}
    try:
        taps = bind(flow, log, outs, engine=engine, fs=runner.filesystem())
        run = runner.run(flow, taps, FlowListener())
    finally:
        runner.shutdown()
    if runs is not None:
        runs.append(run)
    return {tap: parts(path) for tap, path in outs.items()}


# --- record by record: to_float, to_int, to_string, round, arithmetic, comparisons, when ---------------------

def values_flow():
    p = numbers()
    n = c("size").to_int()
    text = p.derive(i=c("v").to_int(), s=L.to_string(c("v")), k=(c("v") * 2).to_int(), neg=0 - c("v"),
                    cs=c("v").cast("string"), cf=L.cast("size", "float") == c("v")).select(
        "size", "v", "i", "s", "k", "neg", "cs", "cf")
    rounded = p.derive(r0=L.round(c("v")), r2=c("v").round(2), rz=(c("v") / 5).round(),
                       ri=L.round(n, 3)).select("v", "r0", "r2", "rz", "ri")
    divided = p.derive(q=c("v") / 4, inv=1 / c("v"), n=n, nq=n / 4, nd=n // 2, mix=n * 0.5 + 1,
                       big=c("v") * 1e10, gt=c("v") > 1, eq=n == 7.0).select(
        "v", "q", "inv", "n", "nq", "nd", "mix", "big", "gt", "eq")
    cases = p.derive(
        w=L.when(c("v") > 2).then("big").when(c("v") < 0).then("neg").otherwise("small"),
        m=L.when(c("v") >= 1).then(n).otherwise(0.5), nw=L.when(c("v") > 100).then(1)).select("v", "w", "m", "nw")
    ordered = p.sort(L.desc("v"), "ip").select("ip", "v")
    return L.Flow("numbers_values", [
        text.write("text"), rounded.write("round"), divided.write("div"), cases.write("when"),
        ordered.write("sorted"),
        # a string whose text looks like a float's key and value stays a string
        p.derive(t=L.lit(',"v":"1.5"')).select("ip", "v", "t").write("json", format="jsonl"),
        p.select("ip", "v").write("parquet", format="parquet")])


VALUES = {
    "text": lines(
        "0.5\t0.5\t0\t0.5\t1\t-0.5\t0.5\ttrue",
        "1.5\t1.5\t1\t1.5\t3\t-1.5\t1.5\ttrue",
        "2.5\t2.5\t2\t2.5\t5\t-2.5\t2.5\ttrue",
        "-0.5\t-0.5\t0\t-0.5\t-1\t0.5\t-0.5\ttrue",              # to_int truncates toward zero
        "-2.5\t-2.5\t-2\t-2.5\t-5\t2.5\t-2.5\ttrue",
        "7\t7.0\t7\t7.0\t14\t-7.0\t7.0\ttrue",
        "\t\t\t\t\t\t\t",
        "1e3\t1000.0\t1000\t1000.0\t2000\t-1000.0\t1000.0\ttrue",
        "abc\t\t\t\t\t\t\t",
        "2.675\t2.675\t2\t2.675\t5\t-2.675\t2.675\ttrue",
        # beyond 64 bits: to_int is null
        "123456789012345678901234567890\t123456789012345680000000000000.0\t\t123456789012345680000000000000.0"
        "\t\t-123456789012345680000000000000.0\t123456789012345680000000000000.0\ttrue",
        "9007199254740993\t9007199254740992.0\t9007199254740992\t9007199254740992.0\t18014398509481984"
        "\t-9007199254740992.0\t9007199254740992.0\ttrue",
        "0\t0.0\t0\t0.0\t0\t0.0\t0.0\ttrue",
        "-0.0\t0.0\t0\t0.0\t0\t0.0\t0.0\ttrue",                    # never -0.0, not even 0 - 0.0
        "٣.٥\t\t\t\t\t\t\t"),
    "round": lines(
        "0.5\t1.0\t0.5\t0.0\t",          # ties away from zero: 0.5 -> 1, 1.5 -> 2, 2.5 -> 3, -0.5 -> -1
        "1.5\t2.0\t1.5\t0.0\t",
        "2.5\t3.0\t2.5\t1.0\t",
        "-0.5\t-1.0\t-0.5\t0.0\t",       # round(-0.1) is 0.0, not -0.0
        "-2.5\t-3.0\t-2.5\t-1.0\t",
        "7.0\t7.0\t7.0\t1.0\t7",         # an integer stays an integer
        "\t\t\t\t",
        "1000.0\t1000.0\t1000.0\t200.0\t",
        "\t\t\t\t",
        "2.675\t3.0\t2.68\t1.0\t",       # 2.675 * 100 is 267.5 as a float: a tie, away from zero
        "123456789012345680000000000000.0\t123456789012345680000000000000.0\t123456789012345680000000000000.0"
        "\t24691357802469136000000000000.0\t",
        # 2**53 / 5 is 1801439850948198.5 as a float (floats are 0.25 apart there): a tie
        "9007199254740992.0\t9007199254740992.0\t9007199254740992.0\t1801439850948199.0\t9007199254740993",
        "0.0\t0.0\t0.0\t0.0\t0",
        "0.0\t0.0\t0.0\t0.0\t",
        "\t\t\t\t"),
    "div": lines(
        "0.5\t0.125\t2.0\t\t\t\t\t5000000000.0\tfalse\t",
        "1.5\t0.375\t0.6666666666666666\t\t\t\t\t15000000000.0\ttrue\t",
        "2.5\t0.625\t0.4\t\t\t\t\t25000000000.0\ttrue\t",
        "-0.5\t-0.125\t-2.0\t\t\t\t\t-5000000000.0\tfalse\t",
        "-2.5\t-0.625\t-0.4\t\t\t\t\t-25000000000.0\tfalse\t",
        "7.0\t1.75\t0.14285714285714285\t7\t1.75\t3\t4.5\t70000000000.0\ttrue\ttrue",
        "\t\t\t\t\t\t\t\t\t",
        "1000.0\t250.0\t0.001\t\t\t\t\t10000000000000.0\ttrue\t",
        "\t\t\t\t\t\t\t\t\t",
        "2.675\t0.66875\t0.3738317757009346\t\t\t\t\t26750000000.0\ttrue\t",
        # 1.2e39 is beyond the float range (2**121): null
        "123456789012345680000000000000.0\t30864197253086420000000000000.0\t0.0000000000000000000000000000081000000729"
        "\t\t\t\t\t\ttrue\t",
        # an integer meets a float as the nearest float: 2**53 + 1 is 2**53
        "9007199254740992.0\t2251799813685248.0\t0.00000000000000011102230246251565\t9007199254740993"
        "\t2251799813685248.0\t4503599627370496\t4503599627370497.0\t90071992547409920000000000.0\ttrue\tfalse",
        "0.0\t0.0\t\t0\t0.0\t0\t1.0\t0.0\tfalse\tfalse",             # 1 / 0.0: null
        "0.0\t0.0\t\t\t\t\t\t0.0\tfalse\t",
        "\t\t\t\t\t\t\t\t\t"),
    "when": lines(
        "0.5\tsmall\t0.5\t",
        "1.5\tsmall\t\t",          # the branch is taken: its value, to_int('1.5'), is null
        "2.5\tbig\t\t",
        "-0.5\tneg\t0.5\t",
        "-2.5\tneg\t0.5\t",
        "7.0\tbig\t7.0\t",         # an integer branch of a float conditional: a float
        "\tsmall\t0.5\t",          # a null condition is not true: otherwise
        "1000.0\tbig\t\t1",
        "\tsmall\t0.5\t",
        "2.675\tbig\t\t",
        "123456789012345680000000000000.0\tbig\t\t1",
        "9007199254740992.0\tbig\t9007199254740992.0\t1",
        "0.0\tsmall\t0.5\t",
        "0.0\tsmall\t0.5\t",
        "\tsmall\t0.5\t"),
    "sorted": lines(                # numerically, descending: null last; ties in input order
        "10.0.0.6\t123456789012345680000000000000.0", "10.0.0.7\t9007199254740992.0", "10.0.0.4\t1000.0",
        "10.0.0.3\t7.0", "10.0.0.6\t2.675", "10.0.0.2\t2.5", "10.0.0.1\t1.5", "10.0.0.1\t0.5", "10.0.0.8\t0.0",
        "10.0.0.8\t0.0", "10.0.0.2\t-0.5", "10.0.0.3\t-2.5", "10.0.0.4\t", "10.0.0.5\t", "10.0.0.9\t"),
    "json": lines(*(line[:-1] + r',"t":",\"v\":\"1.5\""}' for line in (
        '{"ip":"10.0.0.1","v":0.5}', '{"ip":"10.0.0.1","v":1.5}', '{"ip":"10.0.0.2","v":2.5}',
        '{"ip":"10.0.0.2","v":-0.5}', '{"ip":"10.0.0.3","v":-2.5}', '{"ip":"10.0.0.3","v":7.0}',
        '{"ip":"10.0.0.4","v":null}', '{"ip":"10.0.0.4","v":1000.0}', '{"ip":"10.0.0.5","v":null}',
        '{"ip":"10.0.0.6","v":2.675}', '{"ip":"10.0.0.6","v":123456789012345680000000000000.0}',
        '{"ip":"10.0.0.7","v":9007199254740992.0}', '{"ip":"10.0.0.8","v":0.0}', '{"ip":"10.0.0.8","v":0.0}',
        '{"ip":"10.0.0.9","v":null}'))),
}
#: the floats of R1..R15 (None: null), as a Parquet output holds them
FLOATS = [0.5, 1.5, 2.5, -0.5, -2.5, 7.0, None, 1000.0, None, 2.675, 1.2345678901234568e29, 9007199254740992.0,
          0.0, 0.0, None]


def parquet_values(path) -> tuple:
    """(the Arrow type of ``v``, its values) of a Parquet output directory."""
    import pyarrow.parquet as pq

    tables = [pq.read_table(os.path.join(path, n)) for n in sorted(os.listdir(path)) if n.endswith(".parquet")]
    types = {str(t.schema.field("v").type) for t in tables}
    return types, [x for t in tables for x in t.column("v").to_pylist()]


def test_floats_record_by_record(engine, tmp_path):
    got = run_flow(values_flow(), engine, tmp_path)
    assert {tap: got[tap].decode() for tap in VALUES} == {tap: data.decode() for tap, data in VALUES.items()}
    assert [json.loads(x)["v"] for x in got["json"].decode().splitlines()] == FLOATS
    assert {json.loads(x)["t"] for x in got["json"].decode().splitlines()} == {',"v":"1.5"'}
    types, values = parquet_values(tmp_path / "parquet")
    assert types == {"double"} and values == FLOATS
    assert all(str(x) != "-0.0" for x in values)


# --- aggregates: avg, median, percentile, where=; floats through a checkpoint, as group and join keys ---------

def aggregates_flow(join: bool = True):
    stored = numbers().derive(k=(c("v") * 2).to_int()).checkpoint("cp")
    per_response = stored.group_by("response").agg(
        n=L.count(), a=L.avg("k"), md=L.median("v"), p90=L.percentile("v", 0.9), p0=L.percentile("v", 0),
        p1=L.percentile(c("v"), 1), mk=L.median("k"), cw=L.count(where=c("v") > 1), sw=L.sum("k", where=c("v") > 1),
        mn=L.min("v"), mx=L.max("v"), cd=L.count_distinct("v"), mw=L.median("v", where=c("v") > 0)).sort("response")
    per_value = stored.group_by("v").agg(hn=L.count())
    joined = stored.select("ip", "v").join(per_value, on="v")
    return L.Flow("numbers_aggregates", [per_response.write("agg")] + ([joined.write("joined")] if join else []))


AGGREGATES = {
    # response, n, avg(k), median(v), p90, p0, p1, median(k), count(where v > 1), sum(k, where v > 1), min(v),
    # max(v), count_distinct(v), median(v, where v > 0); k = to_int(v * 2)
    "agg": lines(
        # v 0.5 1.5 7 1000, k 1 3 14 2000: p90 at (4 - 1) * 0.9 = 2.7000000000000002, between 7 and 1000:
        # 7 + (2.7000000000000002 - 2) * (1000 - 7) = 702.1000000000001
        "200\t4\t504.5\t4.25\t702.1000000000001\t0.5\t1000.0\t8.5\t3\t2017\t0.5\t1000.0\t4\t4.25",
        "201\t1\t18014398509481984.0\t9007199254740992.0\t9007199254740992.0\t9007199254740992.0"
        "\t9007199254740992.0\t18014398509481984.0\t1\t18014398509481984\t9007199254740992.0\t9007199254740992.0"
        "\t1\t9007199254740992.0",
        # every value null: null, and 0 counted
        "304\t3\t\t\t\t\t\t\t0\t\t\t\t0\t",
        # v -0.5 0 2.5 2.675, k -1 0 5 5
        "404\t4\t2.25\t1.25\t2.6225\t-0.5\t2.675\t2.5\t2\t10\t-0.5\t2.675\t4\t2.5875",
        # v -2.5 0 1.2345678901234568e29, k -5 0 (and null): the one k where v > 1 is null, so is its sum
        "500\t3\t-2.5\t0.0\t98765431209876550000000000000.0\t-2.5\t123456789012345680000000000000.0\t-2.5\t1\t"
        "\t-2.5\t123456789012345680000000000000.0\t3\t123456789012345680000000000000.0"),
    "joined": lines(    # a null key matches nothing; the two 0.0 (one written -0.0) are one key
        "10.0.0.1\t0.5\t1", "10.0.0.1\t1.5\t1", "10.0.0.2\t2.5\t1", "10.0.0.2\t-0.5\t1", "10.0.0.3\t-2.5\t1",
        "10.0.0.3\t7.0\t1", "10.0.0.4\t1000.0\t1", "10.0.0.6\t2.675\t1",
        "10.0.0.6\t123456789012345680000000000000.0\t1", "10.0.0.7\t9007199254740992.0\t1", "10.0.0.8\t0.0\t2",
        "10.0.0.8\t0.0\t2"),
}


def test_aggregates_of_numbers(engine, tmp_path):
    got = run_flow(aggregates_flow(), engine, tmp_path)
    assert {tap: data.decode() for tap, data in got.items()} == {tap: data.decode() for tap, data in AGGREGATES.items()}


def test_median_and_percentile_spilled_give_the_same_bytes(tmp_path):
    """With a memory budget of a few bytes the partial states spill to disk, partitioned by the keys."""
    runs = []
    got = run_flow(aggregates_flow(join=False), "local", tmp_path, runner=LocalEngine(spill_buffers=64), runs=runs)
    assert got == {"agg": AGGREGATES["agg"]}
    assert "groupby" in runs[0].spilled, runs[0].spilled


# --- mistakes: one line naming the expression and the types ----------------------------------------------------

def _float_v():
    return L.read().derive(v=L.to_float(c("size")))


MISTAKES = [
    (lambda: L.read().derive(x=c("size") / "x"),
     "derive (unnamed): size / 'x': / takes integers and floats; size is string, 'x' is string"),
    (lambda: L.read().derive(x=c("size").to_int() * "x"),
     "derive (unnamed): to_int(size) * 'x': * takes integers and floats; to_int(size) is integer, 'x' is string"),
    (lambda: L.read().group_by("ip").agg(a=L.avg("size")), "groupby (unnamed): avg: size is string, not integer"),
    (lambda: _float_v().group_by("ip").agg(a=L.avg("v")),
     "groupby (unnamed): avg(v): v is float; a float sum depends on the order of its additions, which engines do "
     "not share: sum integers (e.g. (x * 1000).round().to_int()), or use median/percentile"),
    (lambda: _float_v().group_by("ip").agg(a=L.sum("v", where=c("v") > 0)),
     "groupby (unnamed): sum(v, where v > 0): v is float; a float sum depends on the order of its additions, which "
     "engines do not share: sum integers (e.g. (x * 1000).round().to_int()), or use median/percentile"),
    (lambda: L.read().group_by("ip").agg(p=L.percentile("size", 0.5)),
     "groupby (unnamed): percentile(size, 0.5): size is string, not a number (integer or float)"),
    (lambda: L.percentile("size", 1.5), "percentile: p must be a literal number from 0 to 1, not 1.5"),
    (lambda: L.read().derive(x=L.when(c("ip") == "a").then(1).otherwise("one")),
     "derive (unnamed): case when ip == 'a' then 1 otherwise 'one' end: the values are of different types: "
     "1 (integer), 'one' (string)"),
    (lambda: L.read().derive(x=L.when(c("ip")).then(1)), "derive (unnamed): when: ip is string, not boolean"),
    (lambda: L.when(c("ip") == "a").otherwise(1), "when(ip == 'a') needs .then(value) before .otherwise"),
    (lambda: L.when(c("ip") == "a").then(1).otherwise(2).otherwise(3),
     "case when ip == 'a' then 1 otherwise 2 end: otherwise given twice"),
    (lambda: L.cast("size", "double"), "cast: no type 'double' (types: string, integer, float)"),
    (lambda: c("size").round(16), "round's digits go from 0 to 15, not 16"),
    (lambda: L.read().derive(x=L.round("ip", 2)), "derive (unnamed): round: ip is string, not a number (integer or float)"),
    (lambda: L.lit(float("nan")), "a float literal must be finite and below 2**121 in magnitude, not nan"),
    (lambda: L.lit(1e300), "a float literal must be finite and below 2**121 in magnitude, not 1e+300"),
    (lambda: _float_v().derive(x=c("v") // 2), "derive (unnamed): v // 2: v is float, not integer (use / for a float quotient)"),
    (lambda: L.read().derive(x=c("ip") < 1.5),
     "derive (unnamed): cannot compare ip (string) with 1.5 (float): use to_int() or a string literal"),
    (lambda: _float_v().derive(x=L.concat("v=", c("v"))),
     "derive (unnamed): concat: v is not a string or an integer (concat(to_string(v)) writes its text)"),
    (lambda: _float_v().write("out", partition_by="v"),
     "sink (unnamed): cannot partition by 'v', a float: partition by a string or an integer (round(...).to_int() "
     "or to_string())"),
]


@pytest.mark.parametrize("make, message", MISTAKES, ids=[m for _, m in MISTAKES])
def test_a_mistake_is_one_line_naming_the_expression_and_types(make, message):
    with pytest.raises((E.ExpressionError, AssemblyError)) as caught:
        make()
    assert str(caught.value) == message


def test_what_is_well_typed():
    """Integers and floats mix in arithmetic, comparisons and conditionals; each result's type."""
    p = _float_v().derive(n=c("size").to_int())
    derived = p.derive(a=c("n") + c("v"), b=c("n") / c("n"), d=c("n") * 2, e=c("n") < c("v"), f=L.round("n"),
                       i=L.to_string(c("v")), j=c("v").to_int(), k=L.lit(-0.0)).derive(
        g=L.when(c("e")).then(c("n")).otherwise(c("v")), h=L.when(c("e")).then(c("n")))
    assert {f: derived.types[f] for f in "abdefghijk"} == {
        "a": "float", "b": "float", "d": "integer", "e": "boolean", "f": "integer", "g": "float", "h": "integer",
        "i": "string", "j": "integer", "k": "float"}
    assert L.lit(-0.0).value == 0.0 and str(L.lit(-0.0).value) == "0.0"
    assert L.lit(5e-324).value == 0.0         # no subnormal float
    aggs = derived.group_by("ip").agg(a=L.avg("n"), m=L.median("v"), q=L.percentile("n", 1), c=L.count(where=c("e")))
    assert aggs.types == {"ip": "string", "a": "float", "m": "float", "q": "float", "c": "integer"}


@pytest.mark.parametrize("value, text", [
    (0.5, "0.5"), (3.0, "3.0"), (-2.25, "-2.25"), (0.0001, "0.0001"), (1e-7, "0.0000001"), (1e20, "100000000000000000000.0"),
    (0.1 + 0.2, "0.30000000000000004"), (123456789.125, "123456789.125"), (1.2345678901234568e18, "1234567890123456800.0"),
    (2.2250738585072014e-308, "0." + "0" * 307 + "22250738585072014")])
def test_the_text_of_a_float(value, text):
    assert E.render_float(value) == text


# --- the real sample: avg, median and percentiles of the sizes against plain Python -----------------------------

def sample_flow():
    # the records of size "-" left out here as in the independent computation, whatever read keeps
    sizes = L.read().filter(c("size") != "-").derive(n=c("size").to_int(), f=L.to_float(c("size")) / 1024)
    per_status = sizes.group_by("response").agg(
        n=L.count("n"), a=L.avg("n"), md=L.median("n"), p95=L.percentile("n", 0.95), p10=L.percentile("f", 0.1),
        big=L.count(where=c("n") > 10_000), kb=L.sum(c("n") // 1024, where=c("n") > 10_000)).sort("response")
    return L.Flow("numbers_sample", [per_status.write("out")])


def _quantile(values: list, p: float) -> float:
    """The documented rule (``expressions.Percentile``), step by step in Python's floats."""
    v = sorted(values)
    pos = (len(v) - 1) * p
    lo, hi = int(pos // 1), -int(-pos // 1)
    return float(v[lo]) if v[lo] == v[hi] else v[lo] + (pos - lo) * (v[hi] - v[lo])


def _sample_expected(path: str) -> bytes:
    """The sample's answer computed with plain Python from the log's lines (a regex of its own, not the kernel)."""
    import re

    line = re.compile(r'^\S+ \S+ \S+ \[[^\]]*\] "[^"]*" (\d{3}) (\S+)')
    groups: dict[str, list] = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for text in f:
            m = line.match(text)
            if m and m.group(2) != "-":
                groups.setdefault(m.group(1), []).append(int(m.group(2)) if m.group(2).isdigit() else None)
    rows = []
    for status in sorted(groups):
        n = [x for x in groups[status] if x is not None]
        if not n:
            rows.append(f"{status}\t0\t\t\t\t\t0\t")
            continue
        assert statistics.median(n) == _quantile(n, 0.5)      # the rule's median is statistics.median
        assert abs(_quantile(n, 0.95) - statistics.quantiles(n, n=20, method="inclusive")[-1]) <= 1e-9 * max(n) \
            if len(n) > 1 else True
        big = [x for x in n if x > 10_000]
        a = sum(n) / len(n)
        assert a == statistics.fmean(n) or abs(a - statistics.fmean(n)) <= 1e-12 * abs(a)
        rows.append("\t".join([status, str(len(n)), E.render_float(a), E.render_float(float(statistics.median(n))),
                               E.render_float(_quantile(n, 0.95)), E.render_float(_quantile([x / 1024 for x in n], 0.1)),
                               str(len(big)), str(sum(x // 1024 for x in big)) if big else ""]))
    return lines(*rows)


def test_the_sample_against_plain_python(engine, sample, tmp_path):
    got = run_flow(sample_flow(), engine, tmp_path, log=sample)
    assert got["out"].decode() == _sample_expected(sample).decode()


#: the flows that run every expression and aggregate of this module on both engines
FLOWS = [values_flow, aggregates_flow]


def test_a_constant_divisor_is_a_correctly_rounded_division_on_every_record(engine, sample, tmp_path):
    """``x / 10000`` and ``round(x / 3, 4)`` over the sample's thousands of records equal Python's ``/``
    and the documented rounding, record by record: an engine that divides by a constant as a multiplication
    by its reciprocal writes 0.08360000000000001 for 836 / 10000."""
    import re

    sizes = L.read(fields=("size",)).filter(c("size") != "-").derive(n=L.to_float(c("size")))
    flow = L.Flow("divide", [sizes.derive(q=c("n") / 10000, r=L.round(c("n") / 3, 4)).select("q", "r").write("out")])
    line = re.compile(r'^\S+ \S+ \S+ \[[^\]]*\] "[^"]*" \d{3} (\d+) ')
    rows = []
    with open(sample, encoding="utf-8", errors="replace") as f:
        for text in f:
            m = line.match(text)
            if m:
                x = float(m.group(1))
                scaled = x / 3 * 10**4
                r = float(int(scaled + 0.5)) / 10**4      # ties away from zero; every x / 3 here is positive
                rows.append(f"{E.render_float(x / 10000)}\t{E.render_float(r)}")
    assert len(rows) > 4000
    assert run_flow(flow, engine, tmp_path, log=sample)["out"].decode() == lines(*rows).decode()
