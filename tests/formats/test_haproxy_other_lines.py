"""HAProxy's lines that are not HTTP requests (TCP-mode lines, ``option tcplog``; its notices and alerts) in a
``haproxy`` log: counted apart as ``non_http_lines`` (the summary's ``non-HTTP lines``), neither records nor
malformed, on both engines and every Spark parse path; a line of neither layout stays malformed. The lines are
written from the layouts of HAProxy's configuration manual (section 8.2) and its messages."""
from __future__ import annotations

import pytest

from conftest import parts
from test_vendor_formats import run_flow
from vendor_lines import HAPROXY_LINE, HAPROXY_TCP
from logetl import detect, formats

LOG = b"".join(line + b"\n" for line in [
    b"Feb  6 12:12:09 localhost haproxy[14385]: Proxy http-in started.",
    b"Feb  6 12:12:09 localhost haproxy[14385]: Proxy fnt started.",
    HAPROXY_LINE,
    HAPROXY_TCP,
    b"Feb  6 12:13:00 localhost haproxy[14385]: Server static/srv1 is DOWN, reason: Layer4 connection problem, "
    b"info: \"Connection refused\", check duration: 0ms. 0 active and 0 backup servers left. 0 sessions active, "
    b"0 requeued, 0 remaining in queue.",
    b"Feb  6 12:13:00 localhost haproxy[14385]: backend static has no server available!",
    HAPROXY_LINE.replace(b"10.0.1.2:33317", b"10.0.1.9:40000").replace(b" 200 2750 ", b" 503 212 "),
    HAPROXY_TCP.split(b"]: ", 1)[1],
    b"Feb  6 12:14:00 localhost haproxy[14385]: something else",
    HAPROXY_LINE.replace(b"GET /index.html", b"GET /caf\xc3\xa9"),
])


def test_a_haproxy_log_counts_its_tcp_lines_and_notices_apart(engine, tmp_path):
    import logetl.api as L

    log = tmp_path / "haproxy.log"
    log.write_bytes(LOG)
    sink = L.read("haproxy", fields=("ip", "response", "size", "request")).write("out")
    got, run = run_flow(L.Flow("lb", [sink]), log, engine, tmp_path)
    assert got["out"] == ("10.0.1.2\t200\t2750\tGET /index.html HTTP/1.1\n"
                          "10.0.1.9\t503\t212\tGET /index.html HTTP/1.1\n"
                          "10.0.1.2\t200\t2750\tGET /caf\u00e9 HTTP/1.1\n").encode()
    assert (run.lines_read, run.malformed, run.dropped_size_dash, run.header_lines, run.non_http_lines) == \
        (10, {"no_match": 1}, 0, 0, 6)
    assert [s[1:] for s in run.malformed_samples] == [
        ("no_match", "field 'ip' at byte 42: no ':' before the ' ' after it: Feb  6 12:14:00 localhost "
                     "haproxy[14385]: something else")]


def test_the_programs_read_only_the_http_lines(engine, tmp_path):
    """Filter keeps the clients of the HTTP requests; the TCP lines and notices are neither kept nor trapped."""
    from logetl import programs
    from logetl.job import run_flow as run_program

    log = tmp_path / "haproxy.log"
    log.write_bytes(LOG)
    flow = programs.get("filter", formats.compile_format("haproxy"))
    out, trap = tmp_path / "f", tmp_path / "t"
    run = run_program(flow, str(log), {"output": str(out)}, engine=engine, trap=str(trap))
    assert parts(out) == b""      # (no request path starts with /images/)
    assert parts(trap) == b"Feb  6 12:14:00 localhost haproxy[14385]: something else\n"
    assert (run.lines_read, run.malformed, run.non_http_lines) == (10, {"no_match": 1}, 6)


def test_the_summary_shows_non_http_lines():
    from logetl.console import summary
    from logetl.listener import FlowRun, StepRun

    run = FlowRun("lb", "local", steps=[StepRun("parse", 0, [], lines_read=10, non_http_lines=6)])
    assert f"  {'non-HTTP lines':<19} {6:>14}\n" in summary(run, {})
    assert run.steps[0].to_dict()["non_http_lines"] == 6
    run.steps[0].non_http_lines = 0
    assert "non-HTTP lines" not in summary(run, {})


def test_auto_takes_a_tcp_mode_log_for_haproxy():
    lines = [HAPROXY_TCP, HAPROXY_TCP.replace(b"33312", b"33313"), b"Proxy fnt started."]
    assert detect.detect(lines) == detect.Detected("haproxy", 3, 3)


@pytest.mark.parametrize("parse", ["jvm", "python", "builtin"])
def test_every_spark_parse_path_counts_them_as_the_local_engine(spark_session, tmp_path, parse):
    import logetl.api as L
    from logetl.job import run_flow as run_job

    log = tmp_path / "haproxy.log"
    log.write_bytes(LOG)
    flow = L.Flow("lb", [L.read("haproxy", fields=("request", "ip", "time")).write("output")])
    got = run_job(flow, str(log), {"output": str(tmp_path / "s")}, engine="spark", trap=str(tmp_path / "st"),
                  engine_options={"conf": {"logetl.parse": parse}})
    want = run_job(flow, str(log), {"output": str(tmp_path / "l")}, engine="local", trap=str(tmp_path / "lt"))
    assert parts(tmp_path / "s") == parts(tmp_path / "l") != b""
    assert parts(tmp_path / "st") == parts(tmp_path / "lt") == b"Feb  6 12:14:00 localhost haproxy[14385]: something else\n"
    assert (got.lines_read, got.malformed, got.non_http_lines) == (want.lines_read, want.malformed,
                                                                    want.non_http_lines) == (10, {"no_match": 1}, 6)
