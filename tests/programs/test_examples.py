"""The examples (examples/*.py) on every engine, against the independent plain-Python results of
tests/support/independent.py (itself checked by hand-worked logs and by DuckDB, tests/programs/test_independent.py): on the
real sample log, on the conformance corpus (malformed lines, size '-') and on a log of edge cases (invalid
times, leap days, ties at the tenth place, two days, sizes that are not numbers)."""
from __future__ import annotations

import os

import pytest

import independent
from conftest import CORPUS, ROOT, logetl, parts, read
from logetl import flowfile
from logetl.job import run_flow

EXAMPLES = os.path.join(ROOT, "examples")
#: example -> (its output name, the independent computation)
CASES = {
    "top_clients": ("top", independent.top_clients),
    "status_by_hour": ("counts", independent.status_by_hour),
    "error_clients": ("clients", independent.error_clients),
}


def _edge_log() -> bytes:
    lines = []

    def add(ip, time, size="100", response="200"):
        lines.append(f'{ip} - - [{time}] "GET /x HTTP/1.1" {response} {size} "-" "agent"'.encode())

    for i in range(12):                      # 12 clients on one day, ties at the tenth place
        add(f"10.0.0.{i}", "17/May/2015:10:05:03 +0000", size=str(100 if i < 9 else 50))
    add("10.0.0.1", "18/May/2015:00:00:00 +0000", size="12a", response="404")   # counts 0 bytes
    add("10.0.0.2", "29/Feb/2016:23:59:59 -0700", response="500")               # leap day: valid
    add("10.0.0.3", "29/Feb/2015:10:00:00 +0000")                               # not a day: left out
    add("10.0.0.4", "17/May/2015:24:00:00 +0000")                               # hour 24: left out
    add("10.0.0.5", "17/May/2015:10:05:03 +2460")                               # zone minutes 60
    add("10.0.0.6", "17/May/2015:10:05:03 +0000", size="-")                     # size '-': dropped
    add("10.0.0.7", "17/May/2015:10:05:03 +0000", size="99999999999999999999")  # 20 digits: counts 0
    add("é.example", "17/May/2015:23:59:59 +0000", size="7", response="403")
    add("10.0.0.11", "31/Dec/2015:23:00:00 +0000", size="5", response="503")
    lines.append(b"a malformed line")
    return b"\n".join(lines) + b"\n"


def _inputs(tmp_path, sample_or_none):
    logs = {"corpus": os.path.join(CORPUS, "corpus.log")}
    edge = tmp_path / "edge.log"
    edge.write_bytes(_edge_log())
    logs["edge"] = str(edge)
    if sample_or_none:
        logs["sample"] = sample_or_none
    return logs


@pytest.mark.parametrize("example", sorted(CASES))
def test_example_gives_the_independent_result(engine, tmp_path, example, sample):
    tap, expected = CASES[example]
    flow_file = os.path.join(EXAMPLES, f"{example}.py")
    for name, log in _inputs(tmp_path, sample).items():
        flow = flowfile.load(flow_file)
        out = tmp_path / f"{name}-out"
        run_flow(flow, log, {tap: str(out)}, engine=engine, monitor=False)
        want = expected(read(log))
        assert parts(out) == want, f"{example} on {name}"
        assert want.count(b"\n") > (2 if name != "corpus" else 0), f"{example} on {name} proves little"


def test_examples_run_from_the_command_line(tmp_path, sample):
    for example, (tap, expected) in sorted(CASES.items()):
        out = tmp_path / example
        p = logetl("run", os.path.join(EXAMPLES, f"{example}.py"), "--input", sample, "--output", f"{tap}={out}")
        assert p.returncode == 0, p.stderr
        assert parts(out) == expected(read(sample))
        summary = p.stderr.decode()
        assert f"logetl {example}: SUCCESSFUL" in summary
        if example != "error_clients":
            assert "  left out by valid_time              0\n" in summary
            # the counts stay in one column when a label is longer than the usual 19 characters
            counted = [line for line in summary.splitlines()
                       if line.startswith(("  lines read", "  malformed lines", "  dropped", "  left out", "  written"))]
            assert len({len(line.split("  -> ")[0].split("  (")[0]) for line in counted}) == 1, summary
