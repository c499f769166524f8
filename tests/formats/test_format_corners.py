"""Apache and nginx corners (module directives that write a token, strftime time layouts, a user holding
spaces, an empty request) on every scanner, and ``--format auto`` on the command line."""
from __future__ import annotations

import json

import pytest

from conftest import logetl, parts
from test_vendor_formats import by_regex, kernel_fields, reference
from vendor_lines import ALB_HTTP, CLOUDFRONT_FIELDS, CLOUDFRONT_LINE, ELB_HTTP, HAPROXY_LINE, S3_LINE
from logetl import detect, formats
from logetl.engines import kernel

SSL = '%h %l %u %t "%r" %>s %b %{SSL_PROTOCOL}x %{SSL_CIPHER}x %{version}c'
STRFTIME = '%h %{%Y-%m-%d %H:%M:%S}t "%r" %>s %{begin:%d/%b/%Y %T}t %{msec_frac}t'
CORNERS = [
    (SSL, b'192.0.2.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 2326 TLSv1.3 TLS_AES_256_GCM_SHA384 '
          b'TLSv1.3', ("192.0.2.1", "-", "-", "10/Oct/2000:13:55:36 -0700", "GET / HTTP/1.1", "200", "2326",
                       "TLSv1.3", "TLS_AES_256_GCM_SHA384", "TLSv1.3")),
    (STRFTIME, b'192.0.2.1 2024-01-02 03:04:05 "GET / HTTP/1.1" 200 02/Jan/2024 03:04:06 123',
     ("192.0.2.1", "2024-01-02 03:04:05", "GET / HTTP/1.1", "200", "02/Jan/2024 03:04:06", "123")),
    (STRFTIME, b'192.0.2.1 2024-01-02 "GET / HTTP/1.1" 200 02/Jan/2024 03:04:06 123', "no_match"),
    # a user holding spaces, as Apache writes it: it ends where " [" (the time's opening) starts
    ("common", b'192.0.2.1 - John Doe [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 2326',
     ("192.0.2.1", "-", "John Doe", "10/Oct/2000:13:55:36 -0700", "GET / HTTP/1.1", "200", "2326")),
    # (the first " [" ends it: a user holding " [" itself cannot be told from the time)
    ("common", b'192.0.2.1 - a [b] c [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 1', "no_match"),
    ("nginx", b'192.0.2.1 - Jane Q. Public [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 5 "-" "curl" "-"',
     ("192.0.2.1", "Jane Q. Public", "10/Oct/2000:13:55:36 -0700", "GET / HTTP/1.1", "200", "5", "-", "curl",
      "-")),
    # an empty request (a client that opened a connection and sent nothing): Apache writes "" and a 408
    ("common", b'192.0.2.1 - - [10/Oct/2000:13:55:36 -0700] "" 408 -',
     ("192.0.2.1", "-", "-", "10/Oct/2000:13:55:36 -0700", "", "408", "-")),
    ("vhost_combined", b'example.com:443 192.0.2.1 - - [10/Oct/2000:13:55:36 -0700] "" 400 0 "-" "-"',
     ("example.com", "443", "192.0.2.1", "-", "-", "10/Oct/2000:13:55:36 -0700", "", "400", "0", "-", "-")),
]


@pytest.mark.parametrize("spec,raw,expected", CORNERS)
def test_corner_lines_on_every_scanner(spec, raw, expected):
    fmt = formats.compile_format(spec)
    assert reference(fmt, raw) == expected
    assert by_regex(fmt, raw) == expected
    for native in (False, True) if kernel.NATIVE else (False,):
        assert kernel_fields(fmt, raw, native) == expected


def test_module_directives_and_time_layouts_name_their_fields():
    assert formats.compile_format(SSL).fields[-3:] == ("ssl_protocol", "ssl_cipher", "ssl_version")
    assert formats.compile_format(STRFTIME).fields == ("ip", "time", "request", "response", "time_2", "time_3")
    with pytest.raises(formats.FormatError, match=r"'%x' at position 4 needs a \{NAME\}"):
        formats.compile_format("%h %x")


# --- --format auto -----------------------------------------------------------------------------------------------

COMBINED = b'192.0.2.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 2326 "-" "curl/8.0"'
AUTO = [
    ("alb", [ALB_HTTP] * 3), ("elb", [ELB_HTTP, ELB_HTTP]), ("s3", [S3_LINE]), ("haproxy", [HAPROXY_LINE]),
    ("cloudfront", [b"#Version: 1.0", CLOUDFRONT_FIELDS, CLOUDFRONT_LINE]),
    ("combined", [COMBINED, b"garbage", COMBINED]),
    ("common", [b'192.0.2.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 2326']),
    ("nginx", [COMBINED + b' "-"']),
    ("vhost_combined", [b"example.com:80 " + COMBINED]),
]


@pytest.mark.parametrize("name,lines", AUTO, ids=[n for n, _ in AUTO])
def test_auto_recognises_each_preset(name, lines):
    got = detect.detect(lines)
    assert (got.name, got.matched, got.sampled) == (name, len(lines) - (name == "combined"), len(lines))


def test_auto_on_the_command_line_names_its_choice_and_refuses_an_unknown_log(tmp_path):
    log = tmp_path / "alb.log"
    log.write_bytes(b"\n".join([ALB_HTTP, ALB_HTTP.replace(b"192.168.131.39:", b"10.9.8.7:")]) + b"\n")
    p = logetl("branch", "--input", str(log), "--output1", str(tmp_path / "f"), "--output2", str(tmp_path / "f2"),
               "--format", "auto")
    assert p.returncode == 0, p.stderr
    assert p.stderr.decode().splitlines()[0] == "logetl: --format auto: alb (2 of the first 2 lines)"
    assert parts(tmp_path / "f") == (
        b"192.168.131.39\t2018-07-02T22:23:00.186641Z\tGET http://www.example.com:80/ HTTP/1.1\t200\t366\n"
        b"10.9.8.7\t2018-07-02T22:23:00.186641Z\tGET http://www.example.com:80/ HTTP/1.1\t200\t366\n")
    bad = tmp_path / "bad.log"
    bad.write_bytes(b"hello\nworld\n")
    p = logetl("filter", "--input", str(bad), "--output", str(tmp_path / "h"), "--format", "auto")
    assert (p.returncode, p.stderr.decode()) == (
        2, f"Error: --format auto recognises no format in the first 2 lines of {str(bad)!r} (tried: caddy, traefik, "
           "nginx_json, alb, elb, s3, haproxy, cloudfront, w3c, vhost_combined, nginx, combined, common); give --format "
           "or --format-file\n")


def test_sql_and_report_take_auto_too(tmp_path):
    log = tmp_path / "alb.log"
    log.write_bytes(b"\n".join([ALB_HTTP, ALB_HTTP.replace(b"192.168.131.39:", b"10.9.8.7:")]) + b"\n")
    p = logetl("sql", "SELECT ip, response, size FROM log ORDER BY ip", "--input", str(log), "--format", "auto")
    assert p.returncode == 0, p.stderr
    assert p.stderr.decode().splitlines()[0] == "logetl: --format auto: alb (2 of the first 2 lines)"
    assert p.stdout == b"ip\tresponse\tsize\n10.9.8.7\t200\t366\n192.168.131.39\t200\t366\n"
    p = logetl("report", "--input", str(log), "--output", str(tmp_path / "r"), "--format", "auto")
    assert p.returncode == 0, p.stderr
    assert p.stderr.decode().splitlines()[0] == "logetl: --format auto: alb (2 of the first 2 lines)"
    general = json.loads((tmp_path / "r" / "report.json").read_text())["general"]
    assert (general["total_requests"], general["bandwidth"]) == (2, 732)


def test_the_programs_refuse_cloudfront_which_writes_no_request_line(tmp_path):
    log = tmp_path / "cf.log"
    log.write_bytes(b"#Version: 1.0\n")
    fields = ", ".join(formats.compile_format("cloudfront").fields)
    p = logetl("branch", "--input", str(log), "--output1", str(tmp_path / "a"), "--output2", str(tmp_path / "b"),
               "--format", "cloudfront")
    assert (p.returncode, p.stderr.decode()) == (
        2, f"Error: program branch needs field 'request', and the log format has none (its fields: {fields}; "
           "branch needs ip, time, request, response, size)\n")
