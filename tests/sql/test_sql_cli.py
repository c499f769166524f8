"""``logetl sql`` on the command line: its errors (one line, before anything runs), the memory limit, the result
printed on a terminal and to a pipe, written to an output, and malformed lines accounted as in every run."""
from __future__ import annotations

import os

import pytest
from conftest import logetl, logetl_on_a_terminal, parts, read

COLUMNS = "log has ip, time, request, response, size, referer, user_agent"
MALFORMED = (b"logetl: warning: 25.0% of the lines are malformed (1 of 4): is the input an access log in the "
             b"expected layout?\n")
BY_STATUS = "SELECT response, count(*) AS n FROM log GROUP BY response ORDER BY n DESC, response"


def lines(*rows: str) -> bytes:
    return "".join(r + "\n" for r in rows).encode()


@pytest.fixture
def small(tmp_path) -> str:
    """Four lines: three records (one without the combined tail, one with a non-ASCII path) and a malformed
    line."""
    path = tmp_path / "small.log"
    path.write_bytes(
        b'10.0.0.1 - - [17/May/2015:10:05:03 +0000] "GET /a HTTP/1.1" 200 512 "http://x.org/p" "Bot/1.0"\n'
        b'10.0.0.2 - - [17/May/2015:10:06:03 +0200] "GET /caf\xc3\xa9 HTTP/1.1" 404 - "-" "Mozilla/5.0"\n'
        b'not a log line\n'
        b'10.0.0.1 - - [17/May/2015:11:05:03 +0000] "POST /b HTTP/1.1" 200 10\n')
    return str(path)


@pytest.mark.parametrize("query, message", [
    ("SELEC ip FROM log", 'SQL syntax error at line 1, column 1: at or near "SELEC"'),
    ("SELECT ip\nFROM log WHERE (size", 'SQL syntax error at line 2, column 17: at or near "size"'),
    ("SELECT ip, agent FROM log", f"unknown column 'agent' at line 1, column 12: {COLUMNS}"),
    ("SELECT count(*) FROM log", "name the result column 'count_star()': ... AS name (letters, digits, _ and -)"),
    ("SELECT ip FROM hits", "unknown table 'hits': a query reads log"),
    ("DELETE FROM log", "only queries run (SELECT ..., WITH ...), not DELETE"),
    ("SELECT * FROM read_csv('/etc/passwd')",
     "the table function read_csv(): a query reads only the table log"),
])
def test_a_query_that_cannot_run_is_one_line_exit_2(small, tmp_path, query, message):
    r = logetl("sql", query, "--input", small, "--output", str(tmp_path / "out"))
    assert (r.returncode, r.stdout, r.stderr.decode()) == (2, b"", f"Error: {message}\n")
    assert not os.path.exists(tmp_path / "out")


def test_a_construct_outside_the_subset_is_refused_for_spark_before_it_starts(small, tmp_path):
    r = logetl("sql", "SELECT levenshtein(ip, request) AS d FROM log", "--input", small, "--hdfs",
               "--output", str(tmp_path / "out"))
    assert (r.returncode, r.stderr.decode()) == (
        2, "Error: the function levenshtein() is outside the SQL subset that runs on spark: LEVENSHTEIN(ip, request)\n")
    r = logetl("sql", "SELECT response[1:1] AS c FROM log", "--input", small, "--hdfs")
    assert (r.returncode, r.stderr.decode()) == (
        2, "Error: a subscript ([...]) is outside the SQL subset that runs on spark: response[1:1]\n")


def test_the_same_query_runs_locally_with_all_of_duckdb(small):
    r = logetl("sql", "SELECT levenshtein('flaw', 'lawn') AS d", "--input", small, "-q")
    assert (r.returncode, r.stdout) == (0, b"d\n2\n")


def test_a_query_over_the_memory_limit_fails_naming_it_and_publishes_nothing(sample, tmp_path):
    out = tmp_path / "out"
    r = logetl("sql", "SELECT length(string_agg(repeat(user_agent, 400), ',')) AS n FROM log", "--input", sample,
               "--memory-limit", "384M", "--output", str(out))
    message = ("the SQL query needs more memory than the memory limit allows (384 MiB, 128 MiB of it for the "
               "query): give a higher --memory-limit")
    assert r.returncode == 1
    assert r.stderr.decode().splitlines()[-1] == f"Error: sql failed: {message}"
    assert f"  error: {message}" in r.stderr.decode()
    assert not out.exists()


def test_piped_the_result_is_tsv_with_a_header_line(small):
    r = logetl("sql", "SELECT ip, count(*) AS n, min(referer) AS referer FROM log GROUP BY ip ORDER BY ip",
               "--input", small, "-q")
    assert (r.returncode, r.stdout, r.stderr) == (0, lines("ip\tn\treferer", "10.0.0.1\t2\thttp://x.org/p",
                                                           "10.0.0.2\t1\t-"), MALFORMED)
    r = logetl("sql", "SELECT ip FROM log WHERE response = '404'", "--input", small, "-q", "--no-header")
    assert r.stdout == b"10.0.0.2\n"


def test_on_a_terminal_the_first_rows_are_an_aligned_table(small, monkeypatch):
    monkeypatch.setattr("conftest.sys", __import__("sys"))
    code, text = logetl_on_a_terminal(
        "sql", "SELECT split_part(request, ' ', 2) AS path, try_cast(size AS BIGINT) AS size, "
               "user_agent FROM log ORDER BY path", "--input", small, "-q")
    assert code == 0
    assert text.replace("\r\n", "\n") == MALFORMED.decode() + (
        "path   size  user_agent\n"
        "-----  ----  -----------\n"
        "/a      512  Bot/1.0\n"
        "/b       10\n"
        "/café        Mozilla/5.0\n"
        "(3 rows)\n")


def test_a_query_file_and_an_output_with_the_query_types(small, tmp_path):
    import pyarrow.parquet as pq

    query = tmp_path / "q.sql"
    query.write_text("-- per status\nSELECT response, count(*) AS n, avg(try_cast(size AS BIGINT)) AS mean,\n"
                     "  strptime(min(time), '%d/%b/%Y:%H:%M:%S %z') AS first FROM log GROUP BY response "
                     "ORDER BY response\n")
    r = logetl("sql", f"@{query}", "--input", small, "--output", str(tmp_path / "tsv"), "-q")
    assert r.returncode == 0, r.stderr
    assert parts(tmp_path / "tsv") == lines("200\t2\t261.0\t2015-05-17T10:05:03Z", "404\t1\t\t2015-05-17T08:06:03Z")
    r = logetl("sql", f"@{query}", "--input", small, "--output", str(tmp_path / "pq"), "--output-format", "parquet",
               "-q")
    assert r.returncode == 0, r.stderr
    table = pq.read_table(tmp_path / "pq" / "part-00000.parquet")
    assert [str(t) for t in table.schema.types] == ["string", "int64", "double", "timestamp[us, tz=UTC]"]
    r = logetl("sql", "@nope.sql", "--input", small)
    assert (r.returncode, r.stderr) == (2, b"Error: cannot read the query file 'nope.sql': No such file or directory\n")


def test_malformed_lines_are_counted_trapped_and_thresholded_as_in_every_run(small, tmp_path):
    r = logetl("sql", BY_STATUS, "--input", small, "--trap", str(tmp_path / "trap"), "--output",
               str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    assert parts(tmp_path / "out") == lines("200\t2", "404\t1")
    assert read(str(tmp_path / "trap" / "part-00000")) == b"not a log line\n"
    summary = r.stderr.decode()
    assert "  lines read                       4\n  malformed lines                  1  (no_match 1)\n" in summary
    assert "  written output                   2  -> " in summary and "  written trap                     1  -> " in summary
    r = logetl("sql", BY_STATUS, "--input", small, "--max-malformed", "0.2", "--output", str(tmp_path / "out2"))
    assert r.returncode == 1
    assert not (tmp_path / "out2").exists()


def test_a_query_that_fails_as_it_runs_is_one_line_exit_1(sample, tmp_path):
    r = logetl("sql", "SELECT sum(CAST(size AS BIGINT)) AS s FROM log", "--input", sample, "-q",
               "--output", str(tmp_path / "out"))
    assert (r.returncode, r.stderr.decode()) == (
        1, "Error: sql failed: SQL: Conversion Error: Could not convert string '-' to INT64 when casting from "
           "source column size\n")
    assert not (tmp_path / "out").exists()
