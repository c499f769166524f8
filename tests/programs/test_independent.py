"""tests/support/independent.py (the plain-Python results the example flows are tested against) on hand-written
logs with hand-worked expected bytes, and against a second independent implementation (DuckDB SQL, RE2
regexes, DuckDB's own calendar) on those logs and on the real sample. Also checks that the Polars and DuckDB
baselines of bench/flows.py give the reference's bytes, so the benchmark compares like with like."""
from __future__ import annotations

import os
import sys

import pytest

import independent
from conftest import ROOT, read, require

sys.path.insert(0, os.path.join(ROOT, "bench"))
import flows  # noqa: E402  (bench/flows.py: the benchmark's baselines and their regexes)


def line(ip: str, time: str, response: str = "200", size: str = "10", request: str = "GET / HTTP/1.1",
         rest: str = ' "-" "Mozilla/5.0"') -> bytes:
    return f'{ip} - - [{time}] "{request}" {response} {size}{rest}'.encode("utf-8")


def log(*lines: bytes, last_newline: bool = True) -> bytes:
    return b"\n".join(lines) + (b"\n" if last_newline else b"")


# --- status_by_hour ----------------------------------------------------------------------------------------
HOURS_LOG = log(
    line("1.1.1.1", "29/Feb/2016:23:59:59 +0000"),                  # leap day: valid
    line("1.1.1.1", "31/Feb/2015:10:00:00 +0000"),                  # no such day
    line("1.1.1.1", "29/Feb/2015:10:00:00 +0000"),                  # 2015 is no leap year
    line("1.1.1.1", "29/Feb/1900:10:00:00 +0000"),                  # nor is 1900
    line("1.1.1.1", "29/Feb/2000:10:00:00 +0000", "304"),           # 2000 is
    line("2.2.2.2", "01/Mar/2016:24:00:00 +0000"),                  # hour 24
    line("2.2.2.2", "01/Mar/2016:00:00:00 +2460"),                  # zone minutes 60
    line("2.2.2.2", "01/Mar/2016:00:00:00 +2400"),                  # zone hours 24
    line("2.2.2.2", "01/Mar/2016:00:00:00 -0060"),                  # zone minutes 60 alone
    line("3.3.3.3", "01/Mar/2016:00:59:59 -2359", "404", "12a"),    # valid; the size does not matter here
    line("3.3.3.3", "01/Mar/2016:00:30:00 +0000", "404", "-"),      # size '-': a request like any other
    b"garbage",                                                     # malformed
    b"",                                                            # malformed (empty)
    line("3.3.3.3", "01/mar/2016:00:30:00 +0000"),                  # month not capitalised
    line("3.3.3.3", "1/Mar/2016:00:30:00 +0000"),                   # one-digit day
    line("3.3.3.3", "01/Mar/0000:00:30:00 +0000"),                  # year 0000
    line("3.3.3.3", "01/Mar/2016:00:60:00 +0000"),                  # minute 60
    line("3.3.3.3", "01/Mar/2016:00:00:60 +0000"),                  # second 60
    line("3.3.3.3", "01/Mar/2016:00:00:00\x0b+0000"),               # the contract's \s, but not one space
    line("4.4.4.4", "01/Mar/2016:00:00:00 +0000"),
    line("4.4.4.4", "01/Mar/2016:00:10:00 +0100"),                  # same hour: no zone conversion
    b'5.5.5.5 - - [01/Mar/2016:00:00:00 +0000] "GET /\xff HTTP/1.1" 200 1 "-" "-"',   # invalid UTF-8
    line("6.6.6.6", "01/Mar/2016:00:00:00 +0000", request="GET /\tx HTTP/1.1"),       # TAB in a field
    line("7.7.7.7", "31/Dec/9999:23:00:00 +0000", "500", request="GET /\x01\x00\x7f HTTP/1.1"),  # controls: kept
    line("8.8.8.8", "17/May/2015:10:05:03 +0000"),                  # the last line, without \n
    last_newline=False)
HOURS_EXPECTED = (b"2000-02-29T10\t304\t1\n"
                  b"2015-05-17T10\t200\t1\n"
                  b"2016-02-29T23\t200\t1\n"
                  b"2016-03-01T00\t200\t2\n"
                  b"2016-03-01T00\t404\t2\n"
                  b"9999-12-31T23\t500\t1\n")

# --- top_clients -------------------------------------------------------------------------------------------
D1, D2 = "17/May/2015:10:00:00 +0000", "18/May/2015:{}:00:00 +0000"
TOP_LOG = log(
    # the second day comes first in the file
    line("y", D2.format("00"), size="1"),
    line("x", D2.format("23"), size="1"),
    line("w", D2.format("12"), size="12a"),                         # counts 0, still a client of the day
    line("v", D2.format("24"), size="999"),                         # invalid time: not counted
    line("v", "31/Apr/2015:10:00:00 +0000", size="999"),            # no 31 April
    line("10.0.0.1", D1, size="400"),
    line("10.0.0.1", D1, size="500"),                               # 900
    line("\U0001F600", D1, size="700"),                             # F0 9F 98 80 ...
    line("\uFF21", D1, size="700"),                                 # EF BC A1: before the emoji in UTF-8
    line("\u00e9.1", D1, size="600"),                               # C3 A9 ...
    line("z.1", D1, size="600"),                                    # 7A: before é
    line("10.0.0.6", D1, size="500"),
    line("10.0.0.6", D1, size="12a"),                               # 500
    line("10.0.0.7", D1, size="405"),
    line("10.0.0.7", D1, size="-5"),                                # a negative number counts: 400
    line("10.0.0.7", D1, size="-"),                                 # not a number: 0
    line("10.0.0.8", D1, size="000000000000000300"),                # 18 digits: 300
    line("10.0.0.8", D1, size="1234567890123456789"),               # 19 digits: not a number, 0
    line("c9", D1, size="5"),                                       # four tied at places 9-12 ...
    line("a9", D1, size="5"),
    line("B9", D1, size="5"),
    line("10.0.0.9", D1, size="5"),                                 # ... byte order: 10.0.0.9 B9 | a9 c9
    line("10.0.0.10", D1, size="+5"),                               # not a number: 0
    line("big", D1, size="-"),                                      # 0: a client, below the ten
    b'big - - [17/May/2015:10:00:00 +0000] "GET / HTTP/1.1 200 99999',   # malformed (no closing quote)
)
TOP_EXPECTED = ("2015-05-17\t10.0.0.1\t900\n"
                "2015-05-17\t\uFF21\t700\n"
                "2015-05-17\t\U0001F600\t700\n"
                "2015-05-17\tz.1\t600\n"
                "2015-05-17\t\u00e9.1\t600\n"
                "2015-05-17\t10.0.0.6\t500\n"
                "2015-05-17\t10.0.0.7\t400\n"
                "2015-05-17\t10.0.0.8\t300\n"
                "2015-05-17\t10.0.0.9\t5\n"
                "2015-05-17\tB9\t5\n"
                "2015-05-18\tx\t1\n"
                "2015-05-18\ty\t1\n"
                "2015-05-18\tw\t0\n").encode("utf-8")

# --- error_clients -----------------------------------------------------------------------------------------
T = "17/May/2015:10:00:00 +0000"
ERR_LOG = (
    log(line("p", T, "404", "10"),
        line("p", "31/Feb/2015:00:00:00 +0000", "500", "20"),        # invalid time: still counts here
        line("p", T, "200", "30"),
        line("q", T, "503", "-"),                                   # an error; its size counts 0
        line("q", T, "404", "5"),
        line("r", T, "401", "12a"),
        line("r", T, "200", "1"),
        line("r", T, "200", "1"),
        line("r", "17/May/2015:24:00:00 +0000", "200", "1"),
        line("s", T, "200", "1"),
        b's - - [17/May/2015:10:00:00 +0000] "GET / HTTP/1.1" 500',   # ends after the status: malformed
        line("t", T, "404", "3", rest="") + b"\r",                  # one CR before \n is removed: size 3
        line("t", T, "404", "4"),
        line("t", T, "500", "100", rest="") + b"\r\r",              # size '100\r': CR in a field, malformed
        line("U", T, "400", "7"),
        line("\u00fc", T, "500", "7"),                              # ü: C3 BC, after q
        line("x9", T, "500", "7", request="GET /\tx HTTP/1.1"),     # TAB in a field: malformed
        b'bad\xff - - [17/May/2015:10:00:00 +0000] "GET / HTTP/1.1" 500 7',   # invalid UTF-8: malformed
        line("k", T, "600", "1"),                                   # 6xx is no error
        line("n", T, "404", "-10"),
        line("n", T, "200", "3"),
        line("m", T, "302", "9"),                                   # no error at all: not listed
        ))
ERR_EXPECTED = ("p\t3\t2\t60\n"
                "q\t2\t2\t5\n"
                "t\t2\t2\t7\n"
                "r\t4\t1\t3\n"
                "n\t2\t1\t-7\n"
                "U\t1\t1\t7\n"
                "\u00fc\t1\t1\t7\n").encode("utf-8")


def test_status_by_hour_by_hand():
    assert independent.status_by_hour(HOURS_LOG) == HOURS_EXPECTED


def test_top_clients_by_hand():
    assert independent.top_clients(TOP_LOG) == TOP_EXPECTED


def test_error_clients_by_hand():
    assert independent.error_clients(ERR_LOG) == ERR_EXPECTED


def test_top_clients_counts_no_more_than_ten_a_day_and_sums_over_days_apart():
    # the same client on two days is two rows; eleven clients of one day: the smallest is left out
    data = log(*[line(f"c{i:02d}", "01/Jan/2020:00:00:00 +0000", size=str(100 + i)) for i in range(11)],
               line("c00", "02/Jan/2020:00:00:00 -0500", size="1"))
    rows = [f"2020-01-01\tc{i:02d}\t{100 + i}\n" for i in range(10, 0, -1)] + ["2020-01-02\tc00\t1\n"]
    assert independent.top_clients(data) == "".join(rows).encode()


def test_empty_input_gives_empty_outputs():
    for flow in (independent.top_clients, independent.status_by_hour, independent.error_clients):
        assert flow(b"") == b""
        assert flow(b"\n\ngarbage\n") == b""


@pytest.mark.parametrize("time, expected", [
    ("29/Feb/2016:23:59:59 +0000", ("2016-02-29", "23")),
    ("01/Jan/0001:00:00:00 -2359", ("0001-01-01", "00")),
    ("31/Dec/9999:23:59:59 +2359", ("9999-12-31", "23")),
    ("30/Apr/2015:00:00:00 +0000", ("2015-04-30", "00")),
    ("31/Apr/2015:00:00:00 +0000", None),
    ("29/Feb/2100:00:00:00 +0000", None),
    ("00/Jan/2015:00:00:00 +0000", None),
    ("17/May/2015:10:05:03 +000", None),
    ("17/May/2015:10:05:03 +0060", None),
    ("17/May/2015:10:05:03 -2400", None),
    ("17/May/2015:10:05:03 +2359", ("2015-05-17", "10")),
    ("17/May/2015:10:05:03 Z", None),
    ("17/May/2015:10:05:03 0000", None),
    ("17/May/2015:10:05:03 +0000 ", None),
    ("17/MAY/2015:10:05:03 +0000", None),
    ("17/May/15:10:05:03 +0000", None),
    ("17/May/2015:1:05:03 +0000", None),
    ("17/May/2015:10:05:03  +0000", None),
    ("١٧/May/2015:10:05:03 +0000", None),     # other scripts' digits are not digits here
])
def test_valid_time_rule(time, expected):
    assert independent.day_hour(time) == expected


@pytest.mark.parametrize("size, expected", [
    ("0", 0), ("-0", 0), ("42", 42), ("-5", -5), ("007", 7), ("9" * 18, 10 ** 18 - 1), ("-" + "9" * 18, 1 - 10 ** 18),
    ("-", None), ("", None), ("12a", None), ("+5", None), (" 5", None), ("5 ", None), ("1" * 19, None),
    ("--5", None), ("١٢", None), ("1.5", None),
])
def test_integer_size(size, expected):
    assert independent.integer(size) == expected


# --- the second implementation: DuckDB -------------------------------------------------------------------

def duckdb_flows(path: str, tmp_path) -> dict[str, bytes]:
    """The three flows in DuckDB SQL over a log file: {name: TSV bytes}."""
    try:
        import duckdb
    except ImportError:
        require(False, "DuckDB is not installed (pip install 'logetl[test]')")
    months = "[" + ", ".join(flows.sql_text(m) for m in flows.MONTHS) + "]"
    records = f"""
        WITH f AS MATERIALIZED (
            SELECT r.ip AS ip, r.time AS time, r.response AS response, r.size AS size,
                   r.response <> ''
                   AND NOT regexp_matches(concat(r.ip, r.time, r.request, r.response, r.size), '[\\t\\r]') AS kept
            FROM (SELECT regexp_extract(line, {flows.sql_text(flows.LINE)},
                                        ['ip', 'time', 'request', 'response', 'size']) AS r
                  FROM read_csv({flows.sql_text(path)}, columns = {{'line': 'VARCHAR'}}, header = false,
                                auto_detect = false, delim = {flows.sql_text(flows.DELIM)}, quote = '', escape = '',
                                new_line = '\\n', ignore_errors = true))
        ), recs AS MATERIALIZED (
            SELECT ip, response,
                   CASE WHEN regexp_full_match(size, '-?[0-9]{{1,18}}') THEN size::HUGEINT ELSE 0 END AS bytes,
                   CASE WHEN g.d = '' OR g.y = '0000' THEN false
                        ELSE g.d::INTEGER <= day(last_day(make_date(g.y::INTEGER, list_position({months}, g.mon), 1)))
                   END AS valid,
                   g.y || '-' || lpad(list_position({months}, g.mon)::VARCHAR, 2, '0') || '-' || g.d AS day,
                   g.h AS hh
            FROM (SELECT *, regexp_extract(time, {flows.sql_text(flows.TIME)}, ['d', 'mon', 'y', 'h']) AS g
                  FROM f WHERE kept)
        )"""
    queries = {
        "top_clients": """
            SELECT day, ip, bytes FROM (SELECT day, ip, sum(bytes) AS bytes FROM recs WHERE valid GROUP BY day, ip)
            QUALIFY row_number() OVER (PARTITION BY day ORDER BY bytes DESC, ip) <= 10
            ORDER BY day, bytes DESC, ip""",
        "status_by_hour": """
            SELECT day || 'T' || hh AS hour, response, count(*) FROM recs WHERE valid
            GROUP BY hour, response ORDER BY hour, response""",
        "error_clients": """
            SELECT ip, count(*) AS requests, count(*) FILTER (WHERE response[1] IN ('4', '5')) AS errors,
                   sum(bytes) AS bytes
            FROM recs GROUP BY ip HAVING errors > 0 ORDER BY errors DESC, requests DESC, ip""",
    }
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    out = {}
    for name, query in queries.items():
        target = str(tmp_path / f"duckdb-{name}.tsv")
        con.execute(f"COPY ({records} {query}) TO {flows.sql_text(target)} (FORMAT csv, DELIMITER '\t', "
                    f"HEADER false, QUOTE '')")
        out[name] = read(target)
    con.close()
    return out


def reference(data: bytes) -> dict[str, bytes]:
    return {name: getattr(independent, name)(data) for name in ("top_clients", "status_by_hour", "error_clients")}


@pytest.mark.parametrize("data", [HOURS_LOG, TOP_LOG], ids=["hours-log", "top-log"])
def test_duckdb_agrees_on_the_hand_written_logs(data, tmp_path):
    assert flows.reader_limits(data) is None    # (ERR_LOG holds CRs, which DuckDB's reader splits at)
    path = tmp_path / "in.log"
    path.write_bytes(data)
    assert duckdb_flows(str(path), tmp_path) == reference(data)


@pytest.mark.shared
def test_duckdb_agrees_on_the_real_sample(sample, tmp_path):
    data = read(sample)
    assert flows.reader_limits(data) is None
    expected = reference(data)
    # not vacuous: the sample gives rows in each flow (5,000 lines over three days, 2015-05-17 .. 19)
    assert expected["top_clients"].count(b"\n") == 30
    assert expected["status_by_hour"].count(b"\n") > 50 and expected["error_clients"].count(b"\n") > 10
    assert duckdb_flows(sample, tmp_path) == expected


@pytest.mark.parametrize("impl", sorted(flows.BASELINES))
def test_benchmark_baselines_give_the_reference_bytes(impl, tmp_path):
    path, out = tmp_path / "in.log", tmp_path / "out.tsv"
    path.write_bytes(HOURS_LOG)
    flows.BASELINES[impl](str(path), str(out))
    assert out.read_bytes() == HOURS_EXPECTED


def test_invalid_utf8_lines_are_found_by_line_number(tmp_path):
    path = tmp_path / "in.log"
    # line 1: invalid; line 3: a sequence cut by the end of the file; a 4-byte character across windows
    path.write_bytes(b"ok\n\xff\nok \xf0\x9f\x98\x80\n\xe6\x97")
    assert flows.invalid_utf8_lines(str(path)) == [1, 3]
    assert flows.invalid_utf8_lines(str(path), window=5) == [1, 3]
    path.write_bytes(b"")
    assert flows.invalid_utf8_lines(str(path)) == []
