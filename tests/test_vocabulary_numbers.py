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
from logetl.engines.local import LocalEngine
from logetl.job import bind
from logetl.listener import FlowListener

LOG = os.path.join(HERE, "data", "numbers.log")
c = L.col


def lines(*rows: str) -> bytes:
    return "".join(r + "\n" for r in rows).encode("utf-8")


def numbers():
    """The records with ``v`` = to_float(size)."""
    return L.read().derive(v=L.to_float(c("size")))


def run_flow(flow, engine: str, where, runner=None) -> dict[str, bytes]:
    """Output tap -> its bytes (a Parquet output: its part files' bytes) of ``flow`` on ``engine``."""
    runner = runner or get_engine(engine)()
    outs = {s.tap: str(where / s.tap) for s in flow.sinks}
    try:
        taps = bind(flow, LOG, outs, engine=engine, fs=runner.filesystem())
        runner.run(flow, taps, FlowListener())
    finally:
        runner.shutdown()
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
        ordered.write("sorted"), p.select("ip", "v").write("json", format="jsonl"),
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
    "json": lines(
        '{"ip":"10.0.0.1","v":0.5}', '{"ip":"10.0.0.1","v":1.5}', '{"ip":"10.0.0.2","v":2.5}',
        '{"ip":"10.0.0.2","v":-0.5}', '{"ip":"10.0.0.3","v":-2.5}', '{"ip":"10.0.0.3","v":7.0}',
        '{"ip":"10.0.0.4","v":null}', '{"ip":"10.0.0.4","v":1000.0}', '{"ip":"10.0.0.5","v":null}',
        '{"ip":"10.0.0.6","v":2.675}', '{"ip":"10.0.0.6","v":123456789012345680000000000000.0}',
        '{"ip":"10.0.0.7","v":9007199254740992.0}', '{"ip":"10.0.0.8","v":0.0}', '{"ip":"10.0.0.8","v":0.0}',
        '{"ip":"10.0.0.9","v":null}'),
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
    types, values = parquet_values(tmp_path / "parquet")
    assert types == {"double"} and values == FLOATS
    assert all(str(x) != "-0.0" for x in values)
