"""``logetl report``'s definitions on a hand-worked log (both engines, exact), its filters and inputs, its
one-line errors; the Spark engine's reports equal the local engine's and the independent computation."""
from __future__ import annotations

import gzip
import json
import os

import pytest

from conftest import SAMPLE, logetl
from test_report import agrees_with_goaccess, common_log, expected, goaccess, parse

from logetl import formats
from logetl.report.build import build

FIREFOX = "Mozilla/5.0 (Windows NT 6.1; WOW64; rv:27.0) Gecko/20100101 Firefox/27.0"
GOOGLEBOT = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
# size -, a 4xx (hits and bytes, no visitor), times as written in other zones, no referer/agent tail, an
# invalid date (a failed request), a malformed line, a request that is no request line, an empty agent
LOG = f"""\
1.1.1.1 - - [17/May/2015:10:05:03 +0000] "GET /a HTTP/1.1" 200 100 "http://Ref.Example.com:8080/x" "{FIREFOX}"
1.1.1.1 - - [17/May/2015:23:59:59 +0200] "GET /a HTTP/1.1" 200 - "-" "{FIREFOX}"
1.1.1.1 - - [18/May/2015:00:00:01 +0200] "GET /missing HTTP/1.1" 404 50 "-" "{FIREFOX}"
2.2.2.2 - - [18/May/2015:01:00:00 -0700] "GET /é?q=1 HTTP/1.1" 200 7 "-" "{GOOGLEBOT}"
3.3.3.3 - - [18/May/2015:02:00:00 +0000] "GET /a HTTP/1.1" 304 0
3.3.3.3 - - [32/May/2015:02:00:00 +0000] "GET /a HTTP/1.1" 200 5 "-" "x"
this is not a log line
4.4.4.4 - - [18/May/2015:03:00:00 +0000] "garbage" 404 10 "-" ""
"""


def m(hits, visitors, bytes_):
    return {"hits": hits, "visitors": visitors, "bytes": bytes_}


WANT = {
    "general": {"total_requests": 8, "valid_requests": 6, "failed_requests": 2, "excluded_hits": 0, "hits": 6,
                "unique_visitors": 3, "bandwidth": 167, "start_date": "2015-05-17", "end_date": "2015-05-18",
                "log_size": len(LOG.encode()), "who": "all"},
    "who": {"humans": m(5, 2, 160), "crawlers": m(1, 1, 7)},
    "shares": {"humans": 0.8333, "crawlers": 0.1667},
    "visitors": [{"day": "2015-05-17", **m(2, 1, 100)}, {"day": "2015-05-18", **m(4, 2, 67)}],
    "requests": [{"path": "/a", **m(3, 2, 100)}, {"path": "/missing", **m(1, 0, 50)},
                 {"path": "/é?q=1", **m(1, 1, 7)}, {"path": "garbage", **m(1, 0, 10)}],
    "not_found": [{"path": "/missing", **m(1, 0, 50)}, {"path": "garbage", **m(1, 0, 10)}],
    "hosts": [{"host": "1.1.1.1", **m(3, 1, 150)}, {"host": "2.2.2.2", **m(1, 1, 7)},
              {"host": "3.3.3.3", **m(1, 1, 0)}, {"host": "4.4.4.4", **m(1, 0, 10)}],
    "os": [{"name": "Other", **m(3, 2, 17)}, {"name": "Windows", **m(3, 1, 150)}],
    "browsers": [{"name": "Firefox", **m(3, 1, 150)}, {"name": "Other", **m(2, 1, 10)},
                 {"name": "Googlebot", **m(1, 1, 7)}],
    "visit_time": [{"hour": "00", **m(1, 0, 50)}, {"hour": "01", **m(1, 1, 7)}, {"hour": "02", **m(1, 1, 0)},
                   {"hour": "03", **m(1, 0, 10)}, {"hour": "10", **m(1, 1, 100)}, {"hour": "23", **m(1, 1, 0)}],
    "referring_sites": [{"site": "ref.example.com", **m(1, 1, 100)}],
    "status_codes": [{"code": "200", **m(3, 2, 107)}, {"code": "304", **m(1, 1, 0)},
                     {"code": "404", **m(2, 0, 60)}],
    "crawlers": [{"name": "Googlebot", **m(1, 1, 7)}],
}


def report(log, out, engine="local", fmt=None, **options) -> dict:
    got = build(str(log), str(out), formats.resolve(fmt, None), overwrite=True,
                run_options={"engine": engine, "monitor": False, "quiet": True}, **options)
    with open(os.path.join(out, "report.json"), encoding="utf-8") as f:
        assert json.load(f) == got
    assert sorted(os.listdir(out)) == ["report.json"] or "index.html" in os.listdir(out)
    return got


def test_hand_worked_log_local(tmp_path):
    log = tmp_path / "access.log"
    log.write_text(LOG, encoding="utf-8")
    assert report(log, tmp_path / "out") == WANT
    humans = report(log, tmp_path / "humans", who="humans")
    assert humans["general"]["excluded_hits"] == 1 and humans["crawlers"] == []
    assert humans["who"] == WANT["who"] and humans["general"]["hits"] == 5
    crawlers = report(log, tmp_path / "crawlers", who="crawlers")
    assert crawlers["requests"] == [{"path": "/é?q=1", **m(1, 1, 7)}]


def rotated(tmp_path) -> tuple[str, int]:
    """The sample in three rotated files, the oldest compressed: a directory of logs and its size."""
    with open(SAMPLE, "rb") as f:
        lines = f.readlines()
    d = tmp_path / "logs"
    d.mkdir()
    (d / "access.log").write_bytes(b"".join(lines[3000:]))
    (d / "access.log.1").write_bytes(b"".join(lines[1000:3000]))
    with gzip.open(d / "access.log.2.gz", "wb") as g:
        g.write(b"".join(lines[:1000]))
    return str(d), sum(os.path.getsize(d / n) for n in os.listdir(d))


@pytest.mark.shared
def test_rotated_and_compressed_logs_give_the_report_of_the_whole_log(tmp_path, sample):
    logs, size = rotated(tmp_path)
    got = report(logs, tmp_path / "out")
    want = expected(parse(sample))
    want["general"]["log_size"] = size
    assert got == want
    assert report(os.path.join(logs, "access.log*"), tmp_path / "glob") == want


def filtered(records):
    return [r for r in records if "2015-05-18" <= r["day"] <= "2015-05-19" and r["status"] != "304"
            and r["target"].startswith("/blog/")]


@pytest.mark.shared
def test_filters_apply_before_every_panel(tmp_path, sample):
    got = report(sample, tmp_path / "out", who="humans", date_from="2015-05-18", date_until="2015-05-19",
                 where='(response != "304") & path(request).starts_with("/blog/")')
    want = expected(parse(sample), "humans", keep=filtered)
    assert got == want
    assert 0 < got["general"]["hits"] < 1000


@pytest.mark.parametrize("args, line", [
    (["--from", "2015-5-1"], "--from: '2015-5-1' is not a date YYYY-MM-DD"),
    (["--until", "2015-02-30"], "--until: '2015-02-30' is not a date YYYY-MM-DD"),
    (["--where", "response == 200"], "--where: cannot compare response (string) with 200 (integer): use "
                                     "to_int() or a string literal"),
    (["--where", "respnse == '200'"], "--where: name 'respnse' is not defined (the fields are ip, time, "
                                      "request, response, size, referer, user_agent)"),
    (["--where", "response =="], "--where: not an expression: 'response ==' (invalid syntax)"),
    (["--where", "__import__('os')"], "--where: unknown name '__import__' in \"__import__('os')\""),
    (["--where", "42"], "--where: '42' is not a condition on the log's fields"),
    (["--who", "humans", "--input", "-"], "--who humans reads the log twice: give it a file, directory or "
                                          "glob, not standard input"),
    (["--output-format", "csv"], "--output-format is not an option of report (it writes report.json)"),
    (["--rebuild"], "--rebuild starts the state of --incremental afresh: give --incremental too"),
    (["--incremental", "--input", "-"], "--incremental reads files: standard input cannot be read again"),
])
def test_a_bad_option_is_one_line(tmp_path, args, line):
    log = tmp_path / "access.log"
    log.write_text(LOG, encoding="utf-8")
    given = [] if "--input" in args else ["--input", str(log)]
    p = logetl("report", *given, "--output", str(tmp_path / "out"), *args, env={"LOGETL_MONITOR": "off"},
               input=b"")
    assert (p.returncode, p.stderr.decode()) == (2, f"Error: {line}\n")
    assert not (tmp_path / "out").exists()


def test_an_existing_report_is_kept_without_overwrite(tmp_path):
    log = tmp_path / "access.log"
    log.write_text(LOG, encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text("{}")
    p = logetl("report", "--input", str(log), "--output", str(out), env={"LOGETL_MONITOR": "off"})
    assert (p.returncode, p.stderr.decode()) == (2, f"Error: {out}/report.json exists: use --overwrite to "
                                                    "replace it\n")
    assert (out / "report.json").read_text() == "{}"


def test_geoip_panels_are_the_reports_clients_placed_and_a_bad_database_is_refused_first(tmp_path):
    """--geoip adds countries and networks made from every client of the report; a file that is not a
    MaxMind-format database is refused in one line before the log is read (nothing written)."""
    from reportpage_data import make_mmdb, require_writer

    from logetl.report import geoip

    require_writer()
    log = tmp_path / "access.log"
    log.write_text(LOG, encoding="utf-8")
    mmdb = make_mmdb(tmp_path / "city.mmdb", {"1.1.1.0/24": ("AU", "Australia", 13335, "Cloudflare")})
    p = logetl("report", "--input", str(log), "--output", str(tmp_path / "out"), "--geoip", mmdb,
               env={"LOGETL_MONITOR": "off"})
    assert p.returncode == 0, p.stderr.decode()
    got = json.loads((tmp_path / "out" / "report.json").read_text())
    assert got["countries"] == [{"country": "AU Australia", "hits": 3, "visitors": 1, "bytes": 150},
                                {"country": "unknown", "hits": 3, "visitors": 2, "bytes": 17}]
    assert {k: got[k] for k in ("countries", "asns")} == geoip.panels(got["hosts"], mmdb)
    p = logetl("report", "--input", str(log), "--output", str(tmp_path / "bad"), "--geoip", str(log),
               env={"LOGETL_MONITOR": "off"})
    assert (p.returncode, p.stderr.decode()) == (
        2, f"Error: the GeoIP database {log} is not a MaxMind-format database (.mmdb)\n")
    assert not (tmp_path / "bad").exists()


@pytest.mark.shared
def test_spark_reports_equal_the_local_engine_and_goaccess(tmp_path, sample, spark_session):
    """One Spark session for every case: the hand-worked log, the sample (all, and humans with every
    filter), rotated logs, and the common format against GoAccess."""
    log = tmp_path / "access.log"
    log.write_text(LOG, encoding="utf-8")
    assert report(log, tmp_path / "hw", "spark") == WANT
    records = parse(sample)
    assert report(sample, tmp_path / "all", "spark") == expected(records)
    got = report(sample, tmp_path / "humans", "spark", who="humans", date_from="2015-05-18",
                 date_until="2015-05-19", where='(response != "304") & path(request).starts_with("/blog/")')
    assert got == expected(records, "humans", keep=filtered)
    logs, size = rotated(tmp_path)
    got = report(logs, tmp_path / "rotated", "spark")
    assert got["general"]["log_size"] == size and got["visitors"] == expected(records)["visitors"]
    common = common_log(sample, str(tmp_path / "common.log"))
    agrees_with_goaccess(report(common, tmp_path / "common", "spark", fmt="common"),
                         goaccess(common, "COMMON", str(tmp_path / "goaccess.json")))


def test_spark_report_into_a_file_uri_output(tmp_path, spark_session):
    """An output directory given as a ``file://`` URI: the panels are written and read back through Spark's
    file system, and the report lands there (nothing is made under the working directory's ``file:``)."""
    log = tmp_path / "access.log"
    log.write_text(LOG, encoding="utf-8")
    out = tmp_path / "uri out"
    got = build(str(log), "file://" + str(out), formats.resolve(None, None), overwrite=True,
                run_options={"engine": "spark", "monitor": False, "quiet": True})
    assert got == WANT
    assert json.loads((out / "report.json").read_text(encoding="utf-8")) == WANT
    assert set(os.listdir(out)) <= {"report.json", "index.html"} and "report.json" in os.listdir(out)
    assert not os.path.exists("file:")
