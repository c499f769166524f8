"""The haproxy preset refuses the lines of custom log-formats (``formats.VENDOR_SHAPES``: its numbers and its
backend have a shape): such lines are malformed (``no_match``, trapped), neither records whose fields are
other ones nor lines counted apart as TCP-mode lines, on every scanner (vendor_lines.HAPROXY's cases, run by
test_vendor_formats) and through a flow on both engines, every Spark parse path; a custom log-format reads
with a format of its own layout."""
from __future__ import annotations

from dataclasses import replace

import pytest

from conftest import read_preset
from test_vendor_formats import reference
from vendor_lines import HAPROXY_LINE, HAPROXY_TCP, HTTP_CUSTOM
from logetl import contract, formats

FMT = formats.compile_format("haproxy")


def test_without_the_shapes_the_custom_lines_would_be_misread():
    """What the shapes prevent: each custom line matches a layout whose fields have no shape."""
    loose = replace(FMT, shapes=(), others=tuple(replace(o, shapes=()) for o in FMT.others))
    got = {name: reference(loose, raw) for name, raw in HTTP_CUSTOM.items()}
    fields = {name: dict(zip(FMT.fields, v)) for name, v in got.items() if isinstance(v, tuple)}
    assert (fields["host-before-frontend"]["frontend"], fields["host-before-frontend"]["backend"]) == \
        ("www.example.com", "http-in static")
    assert fields["unique-id-before-timers"]["time_request"] == "7F000001:8296_4FCE6C4E_0001 10"
    assert fields["bytes-read-after-size"]["request_cookie"] == "312"
    assert {name for name, v in got.items() if v == "non_http"} == \
        {"no-cookies", "status-before-timers", "tcp-host-before-frontend"}
    assert {name: reference(FMT, raw) for name, raw in HTTP_CUSTOM.items()} == \
        dict.fromkeys(HTTP_CUSTOM, contract.NO_MATCH)


def test_why_names_the_field_out_of_shape():
    assert FMT.why(HTTP_CUSTOM["host-before-frontend"]) == "field 'backend' at byte 58: a space in it"
    assert FMT.why(HTTP_CUSTOM["unique-id-before-timers"]) == "field 'time_request' at byte 62: not a number"


def test_the_documented_format_reads_a_custom_log_format():
    spec = '$remote_addr:$remote_port [$time_local] $host $frontend $backend $timers $status $body_bytes_sent "$request"'
    raw = HTTP_CUSTOM["host-before-frontend"].replace(b" - - ---- 1/1/1/1/0 0/0 {1wt.eu} {}", b"")
    fmt = formats.compile_format(spec)
    assert dict(zip(fmt.fields, fmt.parse_line(raw))) == {
        "ip": "10.0.1.2", "remote_port": "33317", "time": "06/Feb/2009:12:14:14.655", "host": "www.example.com",
        "frontend": "http-in", "backend": "static/srv1", "timers": "10/0/30/69/109", "response": "200",
        "size": "2750", "request": "GET /index.html HTTP/1.1"}


# --- through a flow, on both engines --------------------------------------------------------------------------

GOOD = HAPROXY_LINE.split(b"]: ", 1)[1]
LOG = [GOOD, *HTTP_CUSTOM.values(), HAPROXY_TCP, GOOD.replace(b"200 2750", b"404 +17")]
READ = ("ip", "frontend", "backend", "server", "time_request", "response", "size")


def _run(tmp_path, engine: str, **options):
    return read_preset(tmp_path, engine, "haproxy", READ, LOG, "haproxy.log", **options)


def test_a_flow_keeps_the_custom_lines_aside_on_the_local_engine(tmp_path):
    got, trap, run = _run(tmp_path, "local")
    assert got == b"10.0.1.2\thttp-in\tstatic\tsrv1\t10\t200\t2750\n10.0.1.2\thttp-in\tstatic\tsrv1\t10\t404\t+17\n"
    assert trap == b"".join(raw + b"\n" for raw in HTTP_CUSTOM.values())
    assert run.malformed == {contract.NO_MATCH: len(HTTP_CUSTOM)}
    assert (run.lines_read, run.non_http_lines) == (len(LOG), 1)


@pytest.mark.parametrize("parse", ["jvm", "python", "builtin"])
def test_every_spark_parse_path_keeps_them_aside_as_the_local_engine(spark_session, tmp_path, parse):
    (tmp_path / "l").mkdir()
    local = _run(tmp_path / "l", "local")
    got, trap, run = _run(tmp_path, "spark", engine_options={"conf": {"logetl.parse": parse}})
    assert (got, trap) == local[:2]
    assert (run.lines_read, run.malformed, run.non_http_lines) == \
        (local[2].lines_read, local[2].malformed, local[2].non_http_lines)
