"""SQL steps (``pipe.sql``) on both engines, byte for byte: aggregation, window functions, a CTE, a join of
the input with itself, timestamps in and out, a step after a checkpoint feeding a branch and a limit; the
step in ``explain`` and the monitor's graph; restart after a failure; the one-line errors of a query that
cannot be a step; and a check against plain Python on the real sample log.

The input is ``tests/data/expressions.log`` read as in tests/flows/test_expressions.py (its table of the nine
records R1-R9 there): ``ip, time, request, response, size``, the size ``-`` record dropped.
"""
from __future__ import annotations

import os
from collections import Counter, defaultdict

import pytest
from conftest import HERE, logetl, parts

import independent
import logetl.api as L
from logetl.engines import get_engine
from logetl.engines.base import InjectedFailure
from logetl.job import bind, run_flow
from logetl.listener import FlowListener
from logetl.monitor.documents import graph

LOG = os.path.join(HERE, "data", "expressions.log")


def logs():
    return L.read(fields=("ip", "time", "request", "response", "size")).drop_size_dash()


def lines(*rows: str) -> bytes:
    return "".join(r + "\n" for r in rows).encode("utf-8")


def run(flow, engine: str, where, **options) -> dict[str, bytes]:
    runner = get_engine(engine)(**options)
    outs = {s.tap: str(where / s.tap) for s in flow.sinks}
    try:
        taps = bind(flow, LOG, outs, engine=engine, fs=runner.filesystem())
        done = runner.run(flow, taps, FlowListener())
    finally:
        runner.shutdown()
    run.last = done
    return {tap: parts(path).decode("utf-8") for tap, path in outs.items()}


# --- one flow, every kind of query, on both engines ----------------------------------------------------------

BY_STATUS = """
    SELECT response, count(*) AS n, sum(try_cast(size AS BIGINT)) AS total,
           round(avg(try_cast(size AS BIGINT)) FILTER (WHERE try_cast(size AS BIGINT) < 1000), 2) AS mean
    FROM input GROUP BY response ORDER BY response"""
WINDOW = """
    SELECT ip, response, size,
           row_number() OVER (PARTITION BY ip ORDER BY response, size) AS k,
           lag(response) OVER (PARTITION BY ip ORDER BY response, size) AS before,
           count(*) OVER () AS records
    FROM input ORDER BY ip, k"""
CTE = """
    WITH images AS (SELECT ip, request FROM input WHERE lower(request) LIKE '%/images/%')
    SELECT ip, lower(request) AS r, length(request) AS len FROM images ORDER BY r, ip"""
SELF_JOIN = """
    SELECT a.ip, count(*) AS pairs FROM input a JOIN input b ON a.ip = b.ip AND a.response <> b.response
    GROUP BY a.ip ORDER BY a.ip"""
TIMES = "SELECT ip, min(ts) AS first, count(ts) AS timed FROM input GROUP BY ip ORDER BY ip"
OK = "SELECT ip, response FROM input WHERE response LIKE '2%' ORDER BY ip, response"


def every_query():
    p = logs()
    stored = p.checkpoint("cp")
    ok = stored.sql(OK, name="ok")
    sinks = [p.sql(BY_STATUS, name="by_status").write("by_status"),
             p.sql(WINDOW, name="window").write("window"),
             p.sql(CTE, name="cte").write("cte"),
             p.sql(SELF_JOIN, name="self_join").write("self_join"),
             p.derive(ts=L.timestamp("time")).sql(TIMES, name="times").write("times"),
             ok.write("ok"),
             ok.limit(3).write("ok3"),
             ok.filter(L.col("response") != "200").write("not200"),
             # no record reaches the step: the query still runs, over an empty input
             p.filter(L.col("ip") == "none").sql("SELECT count(*) AS n, max(size) AS m FROM input",
                                                 name="nothing").write("nothing")]
    return L.Flow("sql_steps", sinks)


EXPECTED = {
    # 200: R1 123, R4 0, R6 1234567890123456789 (19 digits: a BIGINT still), R7 '' (null); the mean only
    # of sizes under 1000
    "by_status": lines("200\t4\t1234567890123456912\t61.5", "201\t1\t0\t0.0", "304\t1\t7\t7.0",
                       "404\t2\t99\t99.0", "500\t1\t-5\t-5.0"),
    # within an ip by response then size (strings: '' before '123'); lag is null on each ip's first
    "window": lines("10.0.0.1\t200\t\t1\t\t9", "10.0.0.1\t200\t123\t2\t200\t9",
                    "10.0.0.2\t200\t0\t1\t\t9", "10.0.0.2\t404\t12a\t2\t200\t9",
                    "10.0.0.3\t404\t99\t1\t\t9", "10.0.0.3\t500\t-5\t2\t404\t9",
                    "10.0.0.4\t304\t7\t1\t\t9", "10.0.0.5\t200\t1234567890123456789\t1\t\t9",
                    "10.0.0.6\t201\t-0\t1\t\t9"),
    # lower() of non-ASCII letters, UTF-8 byte order (ü, C3 BC, after b), length in characters
    "cte": lines("10.0.0.6\tdelete /images/ http/1.1\t24", "10.0.0.1\tget /images/a.png http/1.1\t26",
                 "10.0.0.3\tget /images/a.png http/1.1\t26", "10.0.0.5\tget /images/b.png http/1.1\t26",
                 "10.0.0.2\tget /images/ünï.gif http/1.1\t28"),
    "self_join": lines("10.0.0.2\t2", "10.0.0.3\t2"),
    # timestamp in (derived), timestamp out (min); null times: 29 Feb of non-leap years, 31 Apr, a one-digit
    # day, a zone of +2400, an instant past 9999
    "times": lines("10.0.0.1\t2016-02-29T22:59:59Z\t1", "10.0.0.2\t\t0", "10.0.0.3\t2000-02-29T12:30:00Z\t2",
                   "10.0.0.4\t\t0", "10.0.0.5\t\t0", "10.0.0.6\t\t0"),
    "ok": lines("10.0.0.1\t200", "10.0.0.1\t200", "10.0.0.2\t200", "10.0.0.5\t200", "10.0.0.6\t201"),
    "ok3": lines("10.0.0.1\t200", "10.0.0.1\t200", "10.0.0.2\t200"),
    "not200": lines("10.0.0.6\t201"),
    "nothing": lines("0\t"),
}


def test_every_query_gives_the_expected_bytes(engine, tmp_path):
    got = run(every_query(), engine, tmp_path)
    assert got == {tap: data.decode("utf-8") for tap, data in EXPECTED.items()}


def test_an_input_past_the_memory_budget_is_read_from_disk_with_the_same_bytes(tmp_path):
    """With a budget of one byte every step's input goes into DuckDB's database file in the spill directory."""
    got = run(every_query(), "local", tmp_path, spill_buffers=1)
    assert got == {tap: data.decode("utf-8") for tap, data in EXPECTED.items()}
    spilled = run.last.spilled
    assert sorted(spilled) == ["by_status", "cte", "ok", "self_join", "times", "window"]
    assert all(s["bytes"] > 0 and s["files"] == 1 for s in spilled.values())


def test_a_query_that_needs_more_memory_than_the_limit_fails_naming_it(tmp_path, monkeypatch):
    """DuckDB given 8 MiB: a string of 1.4 GB (an aggregate that cannot spill) fails the run, exit 1, and
    nothing is published."""
    from logetl.engines.local import sql as local_sql
    from logetl.engines.local.spill import MemoryLimitExceeded

    monkeypatch.setattr(local_sql, "MIN_DUCKDB", 8 << 20)
    query = "SELECT length(string_agg(repeat(ip, 100000), ',')) AS n FROM input, range(200)"
    flow = L.Flow("huge", [logs().sql(query, name="huge").write("out")])
    with pytest.raises(MemoryLimitExceeded) as caught:
        run(flow, "local", tmp_path, spill_buffers=1)
    assert str(caught.value) == ("operator 'huge' (sql) needs more memory than --memory-limit allows (512 MiB; "
                                 "DuckDB had 8 MiB of it and spilled what it could to disk): raise --memory-limit")
    assert MemoryLimitExceeded.exit_code == 1
    assert not os.path.exists(tmp_path / "out")


# --- explain, the monitor's graph ------------------------------------------------------------------------------

def test_explain_shows_the_step_its_query_on_one_line_and_its_fields():
    p = L.read(fields=("ip", "response"))
    flow = L.Flow("codes", [p.checkpoint("cp").sql("SELECT response,\n  count(*) AS n\nFROM input\n"
                                                   "GROUP BY response", name="codes").write("out")])
    assert flow.explain() == (
        "flow codes\n\noperators:\n"
        "  input  source      <- -                   tap input\n"
        "                        fields: line\n"
        "  parse  parse       <- input               line contract\n"
        "                        fields: ip, response\n"
        "  cp     checkpoint  <- parse               \n"
        "                        fields: ip, response\n"
        "  codes  sql         <- cp                  SELECT response, count(*) AS n FROM input GROUP BY response\n"
        "                        fields: response, n\n"
        "  sink   sink        <- codes               tap out: response\tn\n"
        "                        fields: response, n\n"
        "\nsteps:\n"
        "  1. parse: input -> parse -> cp\n"
        "     stores for later steps: cp\n"
        "  2. codes: codes -> sink\n"
        "     reads the stored output of: cp\n")
    node = next(n for n in graph(flow)["nodes"] if n["id"] == "op:codes")
    assert node == {"id": "op:codes", "type": "operator", "name": "codes", "kind": "sql", "step": "codes",
                    "order": 3, "description": "SELECT response, count(*) AS n FROM input GROUP BY response",
                    "fields": ["response", "n"]}
    step = flow.steps[1]
    assert [n.name for n in step.nodes] == ["codes", "sink"] and step.nodes[0].blocking


# --- restart ----------------------------------------------------------------------------------------------------

def test_a_failed_run_restarts_after_the_checkpoint_before_the_step(engine, tmp_path, monkeypatch):
    def flow():
        stored = logs().checkpoint("cp")
        return L.Flow("restarting", [stored.sql(OK, name="ok").write("ok")])

    out = str(tmp_path / "out")
    monkeypatch.setenv("LOGETL_FAIL_AT", "ok")
    with pytest.raises(InjectedFailure):
        run_flow(flow(), LOG, {"ok": out}, engine=engine, monitor=False, quiet=True)
    monkeypatch.delenv("LOGETL_FAIL_AT")
    assert not os.path.exists(out)
    result = run_flow(flow(), LOG, {"ok": out}, engine=engine, monitor=False, quiet=True)
    assert result.restarted_after == "cp"
    assert [(s.name, s.status) for s in result.steps] == [("parse", "SKIPPED"), ("ok", "SUCCESSFUL")]
    assert parts(out) == EXPECTED["ok"]


# --- mistakes: one line when the flow is defined ------------------------------------------------------------------

FIELDS = "ip, time, request, response, size"


@pytest.mark.parametrize("query, message", [
    ("SELEC ip FROM input", "syntax error at line 1, column 13 near 'FROM': Invalid expression / Unexpected token"),
    ("SELECT ipp, count(*) AS n FROM input GROUP BY ipp",
     f"unknown column 'ipp': input has {FIELDS} (did you mean 'ip'?)"),
    ("SELECT [1, 2] AS l FROM input",
     "column 'l' is INTEGER[], a type logetl does not carry (string, integer, float, boolean, timestamp): "
     "cast it in the query (CAST(... AS VARCHAR))"),
    ("SELECT current_date AS d FROM input",
     "column 'd' is DATE, a type logetl does not carry (string, integer, float, boolean, timestamp): "
     "cast it in the query (CAST(... AS VARCHAR))"),
    ("SELECT count(*) FROM input",
     "column 'count_star()' needs a field name (ASCII letters, digits, _ and -, starting with a letter or "
     "digit): ... AS name"),
    ("SELECT ip, ip FROM input", "column 'ip' is named twice (name each: ... AS other_name)"),
    ("SELECT ip FROM inptu", "no table 'inptu': the query reads input (did you mean 'input'?)"),
    ("SELECT 1 AS a; SELECT 2 AS b", "a SQL step is one query, not 2 statements"),
    ("DELETE FROM input", "a SQL step is a query (SELECT ... FROM input), not DELETE"),
    ("  ", "the query is SQL text (SELECT ... FROM input), not '  '"),
])
def test_a_query_that_cannot_be_a_step_fails_when_the_flow_is_defined(query, message):
    with pytest.raises(L.AssemblyError) as caught:
        logs().sql(query, name="q")
    assert str(caught.value) == f"sql 'q': {message}"


def test_a_flow_file_with_a_mistaken_query_exits_2_with_one_line(tmp_path):
    path = tmp_path / "flow.py"
    path.write_text("import logetl.api as L\n\n\ndef flow(fmt):\n"
                    "    hits = L.read(fmt).sql('SELECT respons, count(*) AS n FROM input GROUP BY 1')\n"
                    "    return L.Flow('hits', [hits.write('out')])\n")
    result = logetl("explain", str(path))
    assert result.returncode == 2
    assert result.stdout == b""
    assert result.stderr.decode() == (
        f"Error: {path}:5: sql (unnamed): unknown column 'respons': input has ip, time, request, response, "
        "size, referer, user_agent (did you mean 'response'?)\n")


# --- the real sample, against plain Python ---------------------------------------------------------------------

SAMPLE_QUERY = """
    SELECT response, count(*) AS hits, count(DISTINCT ip) AS clients,
           sum(CASE WHEN regexp_matches(size, '^-?[0-9]{1,18}$') THEN CAST(size AS BIGINT) ELSE 0 END) AS bytes
    FROM input GROUP BY response ORDER BY hits DESC, response"""


def plain_python(data: bytes) -> str:
    hits, clients, total = Counter(), defaultdict(set), Counter()
    for ip, _time, _request, response, size in independent.records(data):
        hits[response] += 1
        clients[response].add(ip)
        total[response] += independent.counted(size)
    rows = sorted(hits, key=lambda r: (-hits[r], r.encode()))
    return "".join(f"{r}\t{hits[r]}\t{len(clients[r])}\t{total[r]}\n" for r in rows)


@pytest.mark.shared
def test_the_sample_log_gives_what_plain_python_computes(engine, sample, tmp_path):
    flow = L.Flow("statuses", [L.read(fields=("ip", "time", "request", "response", "size"))
                               .sql(SAMPLE_QUERY, name="statuses").write("out")])
    out = str(tmp_path / "out")
    run_flow(flow, sample, {"out": out}, engine=engine, monitor=False, quiet=True)
    with open(sample, "rb") as f:
        expected = plain_python(f.read())
    assert parts(out).decode() == expected
    assert expected.count("\n") == 7      # 200, 304, 301, 404, 206, 500, 403: a real spread of answers
