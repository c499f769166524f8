"""How a SQL node ends: a Spark run leaves no temporary view in the session's catalog (the query bound or
not), a query outside the Spark subset in ``pipe.sql`` is refused before a Spark run starts, and a local
run stopped mid-query ends at once with the one line and exit code of every stopped run."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import HERE, parts

import logetl.api as L
from logetl.engines import get_engine
from logetl.engines.spark import sql as spark_sql
from logetl.errors import EXIT_INTERRUPTED, EXIT_USAGE
from logetl.job import bind
from logetl.listener import FlowListener
from logetl.sql.dialect import SqlError

LOG = os.path.join(HERE, "data", "expressions.log")
BY_STATUS = "SELECT response, count(*) AS n FROM input GROUP BY response ORDER BY response"


def run(flow, engine: str, where) -> dict[str, bytes]:
    runner = get_engine(engine)()
    outs = {s.tap: str(where / s.tap) for s in flow.sinks}
    try:
        runner.run(flow, bind(flow, LOG, outs, engine=engine, fs=runner.filesystem()), FlowListener())
    finally:
        runner.shutdown()
    return {tap: parts(path) for tap, path in outs.items()}


def views(spark) -> list[str]:
    return sorted(t.name for t in spark.catalog.listTables() if t.isTemporary)


def test_a_spark_run_leaves_no_view_of_its_sql_nodes(spark_session, tmp_path):
    before = views(spark_session)
    records = L.read(fields=("ip", "response"))
    flow = L.Flow("codes", [records.sql(BY_STATUS, name="codes").write("codes"),
                            records.sql("SELECT ip FROM input WHERE response = '404' ORDER BY ip",
                                        name="missing").write("missing")])
    got = run(flow, "spark", tmp_path)
    assert got["codes"] == b"200\t5\n201\t1\n304\t1\n404\t2\n500\t1\n"
    assert got["missing"] == b"10.0.0.2\n10.0.0.3\n"
    assert views(spark_session) == before
    assert not [v for v in views(spark_session) if v.startswith(spark_sql.VIEW_PREFIX)]


def test_a_query_spark_cannot_bind_leaves_no_view_either(spark_session, tmp_path, monkeypatch):
    before = views(spark_session)
    monkeypatch.setattr(spark_sql, "to_spark", lambda query, tables: "SELECT nothing_here FROM " + tables["input"])
    flow = L.Flow("codes", [L.read(fields=("ip", "response")).sql(BY_STATUS, name="codes").write("codes")])
    with pytest.raises(Exception, match="nothing_here"):
        run(flow, "spark", tmp_path)
    assert views(spark_session) == before


def test_pipe_sql_outside_the_spark_subset_is_refused_before_a_spark_run(tmp_path):
    """The engine's check, before any session starts: one line naming the step, the construct and the engine."""
    flow = L.Flow("ips", [L.read(fields=("ip",)).sql("SELECT ip, md5(ip) AS h FROM input", name="hashes").write("o")])
    engine = get_engine("spark")()
    with pytest.raises(SqlError) as caught:
        engine.check(flow)
    assert str(caught.value) == ("sql 'hashes': the function md5() is outside the SQL subset that runs on spark: "
                                 "MD5(ip)")
    assert SqlError.exit_code == EXIT_USAGE
    get_engine("local")().check(flow)       # DuckDB runs all of its SQL


def test_pipe_sql_outside_the_spark_subset_exits_2_in_one_line_on_the_command_line(tmp_path):
    flow_file = tmp_path / "hashes.py"
    flow_file.write_text(
        "import logetl.api as L\n\n\n"
        "def flow(fmt):\n"
        "    hashes = L.read(fmt, fields=('ip',)).sql('SELECT ip, md5(ip) AS h FROM input', name='hashes')\n"
        "    return L.Flow('hashes', [hashes.write('out')])\n")
    r = subprocess.run([sys.executable, "-m", "logetl", "run", str(flow_file), "--input", LOG, "--output",
                        f"out={tmp_path / 'out'}", "--hdfs", "-q"], capture_output=True, timeout=600)
    assert r.returncode == EXIT_USAGE
    assert r.stderr.decode().splitlines() == [
        "Error: sql 'hashes': the function md5() is outside the SQL subset that runs on spark: MD5(ip)"]
    assert not (tmp_path / "out").exists()


@pytest.mark.timing
def test_a_local_run_stopped_mid_query_ends_at_once_with_one_line(sample, tmp_path):
    """A query that would run for hours (a three-way product of the sample); once DuckDB runs it (its
    spill directory made), SIGINT ends the process within seconds, exit 130, and nothing is published."""
    work, out = tmp_path / "work", tmp_path / "out"
    query = "SELECT count(*) AS n FROM log a, log b, log c WHERE a.size <> c.size"
    proc = subprocess.Popen([sys.executable, "-m", "logetl", "sql", query, "--input", sample, "--output", str(out),
                             "--work-dir", str(work), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while not any(p.name == "sql" and p.is_dir() for p in work.rglob("*")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(1.0)
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        stopped = time.monotonic()
        _, err = proc.communicate(timeout=60)
        assert time.monotonic() - stopped < 30     # seconds, not the hours the query would take
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == EXIT_INTERRUPTED
    assert err.decode().splitlines() == ["logetl: interrupted; no output was committed"]
    assert not out.exists()
