"""The dialect: what ``check`` refuses and types, what ``to_spark`` writes; and ``logetl.read_log``."""
from __future__ import annotations

import pytest

import logetl
from logetl.errors import UsageError
from logetl.sql.dialect import SqlError, check, to_spark

LOG = {"log": ["ip", "time", "request", "response", "size", "referer", "user_agent"]}


def test_the_result_types_come_from_the_query():
    checked = check("SELECT ip, count(*) AS n, sum(try_cast(size AS BIGINT)) AS total, 1.5 AS d, "
                    "avg(try_cast(size AS BIGINT)) AS mean, min(strptime(time, '%d/%b/%Y:%H:%M:%S %z')) AS first, "
                    "min(response = '200') AS ok, CAST(min(strptime(time, '%d/%b/%Y:%H:%M:%S %z')) AS DATE) AS day "
                    "FROM log GROUP BY ip", "spark", LOG)
    assert checked.columns == (("ip", "string"), ("n", "integer"), ("total", "integer"), ("d", "float"),
                               ("mean", "float"), ("first", "timestamp"), ("ok", "boolean"), ("day", "string"))


@pytest.mark.parametrize("query, message", [
    ("SELECT list(ip) AS l FROM log",
     "the result column 'l' is VARCHAR[]: a result holds strings, integers, floats, booleans and timestamps "
     "(cast it, e.g. CAST(... AS VARCHAR))"),
    ("SELECT ip, ip FROM log", "the result has two columns named 'ip': name them apart (... AS name)"),
    ("SELECT ip FROM log; SELECT 1", "give one query, not 2 statements"),
    ("", "the SQL query is empty"),
])
def test_what_no_engine_runs(query, message):
    for engine in ("local",) if "list" in query else ("local", "spark"):
        with pytest.raises(SqlError) as exc:
            check(query, engine, LOG)
        assert str(exc.value) == message
        assert isinstance(exc.value, UsageError) and exc.value.exit_code == 2


@pytest.mark.parametrize("query, message", [
    ("SELECT levenshtein(ip, request) AS d FROM log",
     "the function levenshtein() is outside the SQL subset that runs on spark: LEVENSHTEIN(ip, request)"),
    ("SELECT response[1:1] AS c FROM log", "a subscript ([...]) is outside the SQL subset that runs on spark: response[1:1]"),
    ("SELECT ip FROM log QUALIFY row_number() OVER (PARTITION BY ip) = 1",
     "a qualify is outside the SQL subset that runs on spark: QUALIFY ROW_NUMBER() OVER (PARTITION BY ip) = 1"),
    ("SELECT log.ip FROM log ASOF JOIN log AS b ON log.ip = b.ip AND log.time >= b.time",
     "ASOF JOIN is outside the SQL subset that runs on spark: ASOF JOIN log AS b ON log.ip = b.ip AND log.time >= b.time"),
])
def test_what_only_the_local_engine_runs(query, message):
    check(query, "local", LOG)
    with pytest.raises(SqlError) as exc:
        check(query, "spark", LOG)
    assert str(exc.value) == message


@pytest.mark.parametrize("duckdb, spark", [
    # DuckDB sorts NULL last ascending, Spark first: made explicit
    ("SELECT ip FROM log ORDER BY ip", "SELECT ip FROM log ORDER BY ip NULLS LAST"),
    ("SELECT ip FROM log ORDER BY ip DESC", "SELECT ip FROM log ORDER BY ip DESC"),
    # regexp_extract's group defaults to 0 on DuckDB, 1 on Spark; a backslash survives Spark's literals
    ("SELECT regexp_extract(request, '\\d+') AS n FROM log", "SELECT REGEXP_EXTRACT(request, '\\\\d+', 0) AS n FROM log"),
    ("SELECT size // 100 AS h FROM log", "SELECT size DIV 100 AS h FROM log"),
    ("SELECT count(*) FILTER (WHERE response = '404') AS n FROM log",
     "SELECT COUNT(*) FILTER(WHERE response = '404') AS n FROM log"),
    ("SELECT epoch(strptime(time, '%d/%b/%Y:%H:%M:%S %z')) AS e FROM log",
     "SELECT UNIX_TIMESTAMP(TO_TIMESTAMP(time, 'd/MMM/yyyy:H:m:s Z')) AS e FROM log"),
])
def test_to_spark(duckdb, spark):
    assert to_spark(duckdb) == spark


def test_to_spark_renames_the_table_but_not_a_cte_of_its_name():
    assert to_spark("SELECT l.ip FROM log AS l JOIN log ON l.ip = log.ip", {"log": "v1"}) == \
        "SELECT l.ip FROM v1 AS l JOIN v1 AS log ON l.ip = log.ip"
    assert to_spark("WITH log AS (SELECT 1 AS x) SELECT x FROM log", {"log": "v1"}) == \
        "WITH log AS (SELECT 1 AS x) SELECT x FROM log"


def test_read_log_streams_the_parsed_records(sample, tmp_path):
    reader = logetl.read_log(sample)
    assert reader.schema.names == LOG["log"]
    table = reader.read_all()
    assert table.num_rows == 5000
    assert table.slice(0, 1).to_pylist()[0] == {
        "ip": "83.149.9.216", "time": "17/May/2015:10:05:03 +0000",
        "request": "GET /presentations/logstash-monitorama-2013/images/kibana-search.png HTTP/1.1",
        "response": "200", "size": "203023", "referer": "http://semicomplete.com/presentations/logstash-monitorama-2013/",
        "user_agent": "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_9_1) AppleWebKit/537.36 (KHTML, like Gecko) "
                      "Chrome/32.0.1700.77 Safari/537.36"}
    log = tmp_path / "a.log"
    log.write_bytes(b'1.2.3.4 - - [17/May/2015:10:05:03 +0000] "GET /caf\xc3\xa9 HTTP/1.1" 404 -\nbad line\n')
    frame = logetl.read_log(str(log), fields=["request", "referer"], into="polars").collect()
    assert frame.rows() == [("GET /café HTTP/1.1", None)]
    relation = logetl.read_log(str(log), "common", into="duckdb")
    assert relation.aggregate("count(*) AS n, min(ident) AS ident").fetchall() == [(1, "-")]
    with pytest.raises(UsageError) as exc:
        logetl.read_log(str(log), into="pandas")
    assert str(exc.value) == "read_log: into is one of arrow, polars, duckdb, not 'pandas'"
    with pytest.raises(UsageError) as exc:
        logetl.read_log(str(tmp_path / "none.log"))
    assert str(exc.value) == f"input {str(tmp_path / 'none.log')!r} does not exist"
