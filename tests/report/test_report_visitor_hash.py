"""``L.hash64``, the visitor's compact key of the report's panels, on both engines: equal combinations of
strings hash equal, different ones (the order of the values, an empty string, non-ASCII) differently, and a
``count_distinct`` of it equals that of the strings it hashes over the real sample."""
from __future__ import annotations

import json
import os

import pytest

import logetl.api as L
from conftest import SAMPLE
from test_report import parse

from logetl import formats
from logetl.job import run_flow

LOG = """\
1.1.1.1 - - [17/May/2015:10:05:03 +0000] "GET /a HTTP/1.1" 200 1 "-" "A"
1.1.1.1 - - [17/May/2015:10:05:04 +0000] "GET /b HTTP/1.1" 200 1 "-" "A"
A - - [17/May/2015:10:05:05 +0000] "GET /c HTTP/1.1" 200 1 "-" "1.1.1.1"
1.1.1.1 - - [17/May/2015:10:05:06 +0000] "GET /d HTTP/1.1" 200 1 "-" ""
1.1.1.1 - - [17/May/2015:10:05:07 +0000] "GET /e HTTP/1.1" 200 1 "-" "Ä"
1.1.1.1 - - [18/May/2015:10:05:08 +0000] "GET /f HTTP/1.1" 200 1 "-" "A"
"""


def hashes(log: str, out, engine: str) -> list[dict]:
    flow = L.Flow("hashes", [L.read(formats.resolve("combined")).derive(
        name="h", h=L.hash64(L.col("ip"), L.day(L.col("time")), L.col("user_agent")))
        .select("request", "h").write("out", format="jsonl")], "hashes")
    run_flow(flow, log, {"out": str(out)}, engine=engine, monitor=False, quiet=True)
    rows = []
    for name in sorted(os.listdir(out)):
        if name.startswith("part-"):
            rows += [json.loads(line) for line in (out / name).read_text(encoding="utf-8").splitlines()]
    return sorted(rows, key=lambda r: r["request"])


def test_equal_combinations_hash_equal_and_others_apart(tmp_path, engine):
    log = tmp_path / "access.log"
    log.write_text(LOG, encoding="utf-8")
    rows = hashes(str(log), tmp_path / "out", engine)
    h = {r["request"].split(" ")[1]: r["h"] for r in rows}
    assert len(rows) == 6 and all(isinstance(v, int) and -2**63 <= v < 2**63 for v in h.values())
    assert h["/a"] == h["/b"]                                   # the same client, day and agent
    assert len({h["/a"], h["/c"], h["/d"], h["/e"], h["/f"]}) == 5     # swapped values, "", non-ASCII, another day


def test_counting_its_distinct_values_counts_the_combinations(tmp_path, sample, engine):
    """Over the real sample: distinct (client, day, agent) hashes = distinct tuples, per status."""
    flow = L.Flow("visitors", [L.read(formats.resolve("combined")).derive(
        name="v", v=L.hash64(L.col("ip"), L.day(L.col("time")), L.coalesce(L.col("user_agent"), L.lit(""))))
        .group_by("response", name="per_status").agg(visitors=L.count_distinct(L.col("v")))
        .write("out", format="jsonl")], "visitors")
    out = tmp_path / "out"
    run_flow(flow, sample, {"out": str(out)}, engine=engine, monitor=False, quiet=True)
    got = {}
    for name in sorted(os.listdir(out)):
        if name.startswith("part-"):
            for line in (out / name).read_text(encoding="utf-8").splitlines():
                r = json.loads(line)
                got[r["response"]] = r["visitors"]
    want: dict = {}
    for r in parse(SAMPLE):
        want.setdefault(r["status"], set()).add((r["ip"], r["day"], r["agent"]))
    assert got == {k: len(v) for k, v in want.items()}


def test_bad_values_are_one_line():
    with pytest.raises(L.ExpressionError) as err:
        L.hash64()
    assert str(err.value) == "hash64 needs at least one value"
    with pytest.raises(L.AssemblyError) as err:
        L.read(formats.resolve("combined")).derive(name="h", h=L.hash64("size", L.lit(1)))
    assert str(err.value) == "derive 'h': hash64: 1 is integer, not string"
