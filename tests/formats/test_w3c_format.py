"""The w3c preset (the W3C extended log format as IIS writes it): hand-worked lines in the layouts of
Microsoft's documentation (IIS's default fields, an IIS 6.0 log with bytes and ``cs(Referrer)``) and of other
parsers' samples, through the reference matcher and the pure-Python and native kernels; ``#Fields:`` lines
that change the columns mid-file, across chunk boundaries; header lines counted apart; the flows and the
three programs on both engines, and Spark's kernel paths against the local engine's bytes and counters."""
from __future__ import annotations

import pytest

from conftest import parts
from test_vendor_formats import run_flow
from logetl import contract, detect, formats, w3c
from logetl.engines import kernel

DEFAULT = w3c.columns(w3c.DEFAULT_FIELDS)
IIS6 = w3c.columns(b"#Fields: date time c-ip cs-username s-ip s-port cs-method cs-uri-stem cs-uri-query sc-status "
                   b"sc-bytes cs-bytes time-taken cs(User-Agent) cs(Referrer) ")
SMALL = w3c.columns("date time c-ip cs-method cs-uri-stem sc-status sc-bytes cs(User-Agent)")
APART = w3c.columns("time c-ip date cs-uri-stem cs-method sc-status")

LESSON = (b"2022-01-22 00:00:01 10.142.0.2 POST /member/Track.ashx pid=2173020&lid=125452789 443 "
          b"user@example.com 172.69.69.207 Mozilla/5.0+(Windows+NT+10.0;+Win64;+x64)+AppleWebKit/537.36 "
          b"https://member.example.com/member/Lesson.aspx?id=125452789 200 0 0 31")
OLD = (b"2002-05-24 20:18:01 172.224.24.114 - 206.73.118.24 80 GET /Default.htm - 200 7930 248 31 "
       b"Mozilla/4.0+(compatible;+MSIE+5.01;+Windows+2000+Server) http://64.224.24.114/")

CASES = [
    ("default-fields", DEFAULT, LESSON, {
        "ip": "172.69.69.207", "time": "2022-01-22 00:00:01", "request": "POST /member/Track.ashx",
        "method": "POST", "path": "/member/Track.ashx", "query": "pid=2173020&lid=125452789", "response": "200",
        "size": "", "referer": "https://member.example.com/member/Lesson.aspx?id=125452789",
        "user_agent": "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36", "date": "2022-01-22",
        "time_of_day": "00:00:01", "server_ip": "10.142.0.2", "port": "443", "user": "user@example.com",
        "sc_substatus": "0", "sc_win32_status": "0", "time_taken": "31", "host": "", "bytes_received": ""}),
    ("iis6-bytes-referrer", IIS6, OLD, {
        "ip": "172.224.24.114", "user": "", "server_ip": "206.73.118.24", "port": "80", "request": "GET /Default.htm",
        "query": "", "response": "200", "size": "7930", "bytes_received": "248", "time_taken": "31",
        "user_agent": "Mozilla/4.0 (compatible; MSIE 5.01; Windows 2000 Server)", "referer": "http://64.224.24.114/"}),
    ("quoted-with-spaces", SMALL, b'2024-01-02 03:04:05 192.0.2.1 GET /a+b 200 512 "Mozilla/5.0 (X11; Linux)"',
     {"user_agent": "Mozilla/5.0 (X11; Linux)", "path": "/a+b", "size": "512", "request": "GET /a+b"}),
    ("quoted-plus-and-escape", SMALL, b'2024-01-02 03:04:05 192.0.2.1 GET /a 200 1 "a+\\"b\\"+c"',
     {"user_agent": 'a \\"b\\" c'}),
    ("quoted-dash-is-empty", SMALL, b'2024-01-02 03:04:05 192.0.2.1 GET /a 200 "-" "-"', {"size": "", "user_agent": ""}),
    ("every-dash", SMALL, b"- - - - - - - -", {"ip": "", "time": "- -", "request": "- -", "date": "", "method": "",
                                                "size": "", "user_agent": ""}),
    ("non-ascii", SMALL, "2024-01-02 03:04:05 192.0.2.1 GET /caf\u00e9 200 1 Agent+\u00e9t\u00e9".encode(),
     {"path": "/caf\u00e9", "user_agent": "Agent \u00e9t\u00e9"}),
    ("crlf", SMALL, b"2024-01-02 03:04:05 192.0.2.1 GET / 304 0 -\r", {"response": "304", "user_agent": ""}),
    ("time-apart", APART, b"03:04:05 192.0.2.1 2024-01-02 /x GET 200",
     {"time": "03:04:05", "date": "2024-01-02", "request": "", "method": "GET", "path": "/x"}),
    ("software", DEFAULT, b"#Software: Microsoft Internet Information Services 10.0", "header"),
    ("fields", DEFAULT, b"#Fields: date time", "header"),
    ("too-few", SMALL, b"2024-01-02 03:04:05 192.0.2.1 GET /a 200 1", contract.NO_MATCH),
    ("too-many", SMALL, b"2024-01-02 03:04:05 192.0.2.1 GET /a 200 1 UA extra", contract.NO_MATCH),
    ("double-space", SMALL, b"2024-01-02  03:04:05 192.0.2.1 GET /a 200 1 UA", contract.NO_MATCH),
    ("unclosed-quote", SMALL, b'2024-01-02 03:04:05 192.0.2.1 GET /a 200 1 "UA', contract.NO_MATCH),
    ("tab", SMALL, b"2024-01-02 03:04:05 192.0.2.1 GET /a\tb 200 1 UA", contract.TAB_OR_CR),
    ("bad-utf8", SMALL, b"2024-01-02 03:04:05 192.0.2.1 GET /\xff 200 1 UA", contract.INVALID_UTF8),
    ("empty", SMALL, b"", contract.NO_MATCH),
]


def _parsers():
    return [False, True] if kernel.NATIVE else [False]


def kernel_answer(cols, raw: bytes, native: bool):
    """The kernel's answer for one line read after the ``#Fields:`` line of ``cols``."""
    p = kernel.Parser(formats.compile_format("w3c"), native=native, drop_dash=False)
    got = p.parse_from(raw + b"\n", True, kernel.VIEWS, b"#Fields: " + " ".join(cols).encode())
    assert got.n_lines == 1
    if got.n_header:
        return "header"
    if got.malformed:
        return kernel.REASON_NAMES[got.malformed[0][3]]
    assert got.n_records == 1
    fields = tuple(got.tsv[:-1].decode().split("\t"))
    assert tuple(c[0].as_py() for c in got.columns()) == fields
    return fields


@pytest.mark.parametrize("cols,raw,expected", [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_each_scanner_gives_the_hand_worked_fields(cols, raw, expected):
    fmt = formats.compile_format("w3c")
    try:
        want = fmt.parse_line(raw, cols)
    except formats.Header:
        want = "header"
    except contract.Malformed as exc:
        want = exc.reason
    if isinstance(expected, dict):
        assert isinstance(want, tuple), want
        assert {k: dict(zip(fmt.fields, want))[k] for k in expected} == expected
    else:
        assert want == expected
    for native in _parsers():
        assert kernel_answer(cols, raw, native) == want, native


def test_the_fields_are_one_schema_in_the_vocabulary():
    fmt = formats.compile_format("w3c")
    assert fmt.fields == w3c.FIELDS and len(set(fmt.fields)) == len(fmt.fields) == 25
    assert fmt.fields[:9] == ("ip", "time", "request", "method", "path", "query", "response", "size", "referer")
    assert fmt.size_index() == 7
    for name in ("s-ip", "time-taken", "cs-username", "sc-substatus", "sc-win32-status", "cs-host"):
        assert w3c.NAMES[name] in fmt.fields
    assert [w3c.NAMES[n] for n in ("s-ip", "time-taken", "cs-username", "cs-host")] == \
        ["server_ip", "time_taken", "user", "host"]


HEADER_A = (b"#Software: Microsoft Internet Information Services 10.0\r\n#Version: 1.0\r\n"
            b"#Date: 2024-01-02 03:04:05\r\n#Fields: date time s-ip cs-method cs-uri-stem cs-uri-query s-port "
            b"cs-username c-ip cs(User-Agent) cs(Referer) sc-status sc-substatus sc-win32-status time-taken\r\n")
HEADER_B = (b"#Software: Microsoft Internet Information Services 10.0\r\n#Version: 1.0\r\n"
            b"#Date: 2024-01-02 04:00:00\r\n#Fields: date time c-ip cs-method cs-uri-stem sc-status sc-bytes "
            b"cs-host\r\n")
LOG = (HEADER_A
       + b"2024-01-02 03:04:05 10.0.0.1 GET /images/a.png - 80 - 192.0.2.1 Mozilla/5.0+(X11) - 200 0 0 15\r\n"
       + b"2024-01-02 03:04:06 10.0.0.1 GET /index.html q=1 80 bob 192.0.2.2 curl/8.0 http://x/ 404 2 5 3\r\n"
       + b"not a w3c line\r\n"
       + HEADER_B
       + b"2024-01-02 04:00:01 192.0.2.3 GET /images/b.png 200 512 www.example.com\r\n"
       + b"2024-01-02 04:00:02 192.0.2.1 GET /images/c.png 200 - www.example.com\r\n"
       + HEADER_A
       + b"2024-01-02 05:00:00 10.0.0.1 POST /api - 443 - 192.0.2.4 - - 500 0 64 120\r\n")


def test_a_header_that_changes_mid_file_switches_the_columns_in_any_chunking():
    """The log as one chunk, and cut at every line into two chunks (the second told the first's last
    ``#Fields:`` line, as the scan tells it): the same records, counts and malformed lines."""
    fmt = formats.compile_format("w3c")
    for native in _parsers():
        p = kernel.Parser(fmt, native=native, drop_dash=True)
        whole = p.parse_from(LOG, True)
        assert (whole.n_lines, whole.n_records, whole.n_dash, whole.n_header) == (18, 4, 1, 12)
        assert [m[3] for m in whole.malformed] == [2]
        rows = [dict(zip(fmt.fields, r.split("\t"))) for r in whole.tsv.decode().splitlines()]
        assert [(r["ip"], r["request"], r["size"], r["host"], r["port"], r["user_agent"]) for r in rows] == [
            ("192.0.2.1", "GET /images/a.png", "", "", "80", "Mozilla/5.0 (X11)"),
            ("192.0.2.2", "GET /index.html", "", "", "80", "curl/8.0"),
            ("192.0.2.3", "GET /images/b.png", "512", "www.example.com", "", ""),
            ("192.0.2.4", "POST /api", "", "", "443", "")]
        starts = [0] + [i + 1 for i, c in enumerate(LOG) if c == 0x0A][:-1]
        for cut in starts[1:]:
            first = p.parse_from(LOG[:cut], True)
            got = w3c.last_fields(LOG[:cut])
            second = p.parse_from(LOG[cut:], True, before=got[1] if got else None)
            assert first.tsv + second.tsv == whole.tsv, cut
            assert (first.n_lines + second.n_lines, first.n_header + second.n_header, first.n_dash + second.n_dash) \
                == (18, 12, 1)


def test_the_scan_takes_each_chunks_header_from_the_chunks_before(tmp_path):
    """The local engine's scan, in chunks of a few lines parsed by two threads, gives the one-chunk parse."""
    from logetl.engines.local.scan import Scan, fields_before

    log = tmp_path / "u_ex240102.log"
    log.write_bytes(LOG * 3)
    p = kernel.Parser(formats.compile_format("w3c"), drop_dash=False)
    whole = p.parse_from(LOG * 3, True)
    got = list(Scan([str(log)], parser=p, chunk=64, threads=2))
    assert len(got) > 10
    assert b"".join(r.tsv for r, _ in got) == whole.tsv
    assert sum(r.n_header for r, _ in got) == whole.n_header == 36
    assert fields_before(str(log), len(LOG)) == HEADER_A.splitlines()[-1] + b"\r"
    assert fields_before(str(log), len(HEADER_A) + 10) == HEADER_A.splitlines()[-1] + b"\r"
    assert fields_before(str(log), len(LOG) - 20) == HEADER_A.splitlines()[-1] + b"\r"
    assert fields_before(str(log), LOG.index(b"2024-01-02 04:00:01")) == HEADER_B.splitlines()[-1] + b"\r"
    assert fields_before(str(log), 0) is None


def test_auto_recognises_w3c():
    lines = LOG.splitlines()[:6]
    assert detect.detect(lines).name == "w3c"
    assert detect.detect(HEADER_A.splitlines()[:2]).name == "w3c"   # the IIS #Software line alone
    custom = [b"#Fields: date time c-ip cs-method cs-uri-stem sc-status", b"2024-01-02 03:04:05 192.0.2.1 GET / 200"]
    assert detect.detect(custom) == detect.Detected("w3c", 2, 2)


# --- through flows and the programs, both engines ----------------------------------------------------------------

def test_a_flow_over_w3c_counts_header_lines_apart(engine, tmp_path):
    import logetl.api as L

    log = tmp_path / "u_ex240102.log"
    log.write_bytes(LOG)
    sink = L.read("w3c", fields=("ip", "time", "path", "size", "user_agent", "host")).write("out")
    got, run = run_flow(L.Flow("iis", [sink]), log, engine, tmp_path)
    assert got["out"] == (b"192.0.2.1\t2024-01-02 03:04:05\t/images/a.png\t\tMozilla/5.0 (X11)\t\n"
                          b"192.0.2.2\t2024-01-02 03:04:06\t/index.html\t\tcurl/8.0\t\n"
                          b"192.0.2.3\t2024-01-02 04:00:01\t/images/b.png\t512\t\twww.example.com\n"
                          b"192.0.2.1\t2024-01-02 04:00:02\t/images/c.png\t\t\twww.example.com\n"
                          b"192.0.2.4\t2024-01-02 05:00:00\t/api\t\t\t\n")
    assert (run.lines_read, run.malformed, run.dropped_size_dash, run.header_lines) == (18, {"no_match": 1}, 0, 12)
    assert [s[1:] for s in run.malformed_samples] == [
        ("no_match", "its values do not match the columns of the '#Fields:' line before it: not a w3c line\\r")]


def test_the_summary_shows_header_lines(tmp_path):
    from logetl.console import summary
    from logetl.listener import FlowRun, StepRun

    run = FlowRun("iis", "local", steps=[StepRun("parse", 0, [], lines_read=18, header_lines=12)])
    assert f"  {'header lines':<19} {12:>14}\n" in summary(run, {})
    run.steps[0].header_lines = 0
    assert "header lines" not in summary(run, {})


PROGRAM_LOG = LOG.replace(b"192.0.2.2 curl", b"192.0.2.9 curl").replace(b"/index.html", b"/images/d.png")


@pytest.mark.parametrize("program", ["branch", "filter", "join"])
def test_the_programs_over_w3c_give_the_same_bytes_on_both_engines(spark_session, tmp_path, program):
    from logetl import programs
    from logetl.job import run_flow as run_program

    log = tmp_path / "u_ex240102.log"
    log.write_bytes(PROGRAM_LOG)
    fmt = formats.compile_format("w3c")
    flow = programs.get(program, fmt)
    taps = ["output1", "output2"] if program == "branch" else ["output"]
    results = {}
    for engine in ("local", "spark"):
        outs = {t: str(tmp_path / f"{engine}-{t}") for t in taps}
        run = run_program(flow, str(log), outs, engine=engine)
        results[engine] = ({t: parts(p) for t, p in outs.items()},
                           (run.lines_read, run.malformed, run.dropped_size_dash, run.header_lines))
    assert results["spark"] == results["local"]
    assert results["local"][1] == (18, {"no_match": 1}, 1, 12)
    if program == "filter":
        assert results["local"][0]["output"] == b"192.0.2.1\n192.0.2.3\n192.0.2.9\n"


@pytest.mark.parametrize("parse", ["jvm", "python"])
@pytest.mark.parametrize("log", ["changing", "uniform", "no-header"])
def test_spark_kernel_paths_give_the_local_engines_bytes_and_counters(spark_session, tmp_path, parse, log):
    """Every field, the last first, of a log whose columns change mid-file (the lines put in segments by a
    window over each file), of one whose header stays the same (one program), and of one without a header
    (IIS's default columns), split in several files: the records, the trap and the counters are the local
    engine's."""
    import logetl.api as L
    from logetl.job import run_flow as run_job

    body = {"changing": LOG, "uniform": LOG.replace(HEADER_B, HEADER_A).replace(
                b"192.0.2.3 GET /images/b.png 200 512 www.example.com", b"10.0.0.1 GET /b - 80 - 192.0.2.3 - - 200 0 0 1"),
            "no-header": b"".join(ln + b"\n" for ln in LOG.splitlines()[4:7])}[log]
    for i in range(3):
        (tmp_path / "in").mkdir(exist_ok=True)
        (tmp_path / "in" / f"u_ex24010{i}.log").write_bytes(body)
    fmt = formats.compile_format("w3c")
    flow = L.Flow("w3c_all", [L.read(fmt, fields=fmt.fields[-1:] + fmt.fields[:-1]).write("output")])
    got = run_job(flow, str(tmp_path / "in"), {"output": str(tmp_path / "s")}, engine="spark",
                  trap=str(tmp_path / "st"), engine_options={"conf": {"logetl.parse": parse}})
    want = run_job(flow, str(tmp_path / "in"), {"output": str(tmp_path / "l")}, engine="local",
                   trap=str(tmp_path / "lt"))
    assert parts(tmp_path / "l").count(b"\n") == {"changing": 15, "uniform": 12, "no-header": 6}[log]
    assert parts(tmp_path / "s") == parts(tmp_path / "l")
    assert parts(tmp_path / "st") == parts(tmp_path / "lt")
    assert (got.lines_read, got.malformed, got.dropped_size_dash, got.header_lines) == \
        (want.lines_read, want.malformed, want.dropped_size_dash, want.header_lines)


def test_spark_builtin_path_refuses_w3c_in_one_line(spark_session, tmp_path):
    import logetl.api as L
    from logetl.job import run_flow as run_job

    log = tmp_path / "u_ex240102.log"
    log.write_bytes(LOG)
    flow = L.Flow("w3c_ips", [L.read("w3c", fields=("ip",)).write("output")])
    with pytest.raises(formats.FormatError) as exc:
        run_job(flow, str(log), {"output": str(tmp_path / "s")}, engine="spark",
                engine_options={"conf": {"logetl.parse": "builtin"}})
    assert str(exc.value) == ("the w3c format needs logetl's kernel on Spark (its columns change with each '#Fields:' "
                              "line), but Spark parses with its built-in regular expressions (--conf logetl.parse=builtin)")


@pytest.mark.parametrize("packing", ["plain", "gzip"])
def test_a_line_too_long_keeps_the_columns_of_its_segment(engine, tmp_path, monkeypatch, packing):
    """A line longer than ``LOGETL_MAX_LINE`` right after the second ``#Fields:`` line (read apart, in a plain
    file and in a gzip stream): it is ``too_long``, and the lines after it keep that header's columns."""
    import gzip

    import logetl.api as L

    monkeypatch.setenv("LOGETL_MAX_LINE", "256")
    long = b"2024-01-02 04:00:00 192.0.2.8 GET /" + b"x" * 300 + b" 200 1 www.example.com\r\n"
    body = LOG.replace(HEADER_B, HEADER_B + long)
    log = tmp_path / ("u_ex240102.log" + (".gz" if packing == "gzip" else ""))
    log.write_bytes(gzip.compress(body) if packing == "gzip" else body)
    sink = L.read("w3c", fields=("ip", "path", "size", "host")).write("out")
    got, run = run_flow(L.Flow("iis", [sink]), log, engine, tmp_path)
    assert got["out"] == (b"192.0.2.1\t/images/a.png\t\t\n192.0.2.2\t/index.html\t\t\n"
                          b"192.0.2.3\t/images/b.png\t512\twww.example.com\n"
                          b"192.0.2.1\t/images/c.png\t\twww.example.com\n192.0.2.4\t/api\t\t\n")
    assert (run.lines_read, run.malformed, run.dropped_size_dash, run.header_lines) == \
        (19, {"no_match": 1, "too_long": 1}, 0, 12)
