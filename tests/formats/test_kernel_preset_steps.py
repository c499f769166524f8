"""The parse kernel's steps for HAProxy's optional syslog prefix, its ``ip:port`` split and optional header
captures in braces, and W3C's quoted-or-bare, joined, empty and ``-`` fields with ``+`` written as spaces
(``docs/design/kernel.md``): hand-worked lines through a flow on both engines, each record's bytes exact.
The lines put the corners where the kernel's 64-byte stop masks and 16-byte compares meet them: a prefix
longer than 64 bytes, a port whose end is past byte 64 while its separator is before it, fields shorter
than 16 bytes at the line's end, ``+`` on both sides of a 16-byte block."""
from __future__ import annotations

from test_vendor_formats import run_flow
from vendor_lines import HAPROXY_LINE

_HTTP = HAPROXY_LINE.split(b"]: ", 1)[1]
_SYSLOG = b"Feb  6 12:14:14 localhost haproxy[14389]: "
#: a syslog prefix of 83 bytes: beyond the first 64 bytes of the line, where the prefix's masks stop
_LONG = b"Feb  6 12:14:14 syslog-relay-0042.datacenter-west.example.internal haproxy[14389]: "

HAPROXY_LOG = b"".join(line + b"\n" for line in [
    HAPROXY_LINE,                                                           # prefix
    _HTTP,                                                                  # no prefix
    _LONG + _HTTP,                                                          # a prefix past byte 64
    _SYSLOG + _HTTP.replace(b"10.0.1.2:33317", b"2001:db8::2:33317"),       # IPv6 and its port
    _SYSLOG + _HTTP.replace(b"10.0.1.2:33317", b"[2001:db8::1]:443"),       # IPv6 in brackets
    # the port's separator at byte 60, the space after the port at byte 66: the masks of the next 64 bytes
    b"Feb  6 12:14:14 lb haproxy[14389]: " + b"x" * 23 + b"12:33317" + _HTTP[len(b"10.0.1.2:33317"):],
    _HTTP.replace(b"{1wt.eu} {}", b"{} {}"),                                # empty braces
    _HTTP.replace(b"{1wt.eu} {}", b"{a|b|} {|}"),                           # '|' between captures
    _HTTP.replace(b"{1wt.eu} {} ", b""),                                    # no braces
    _HTTP.replace(b"{1wt.eu} {} ", b"{only} "),                             # the request's captures only
    _HTTP.replace(b"{1wt.eu} {}", b"{no end"),                              # a brace not closed: no match
    b"Feb  6 12:14:14 localhost haproxy[14389]: 10.0.1.2",                  # no port: no match
])


def test_haproxy_prefix_port_and_braces_on_both_engines(engine, tmp_path):
    import logetl.api as L

    log = tmp_path / "haproxy.log"
    log.write_bytes(HAPROXY_LOG)
    sink = L.read("haproxy", fields=("syslog", "ip", "client_port", "request_headers", "response_headers",
                                     "request")).write("out")
    got, run = run_flow(L.Flow("lb", [sink]), log, engine, tmp_path)
    req = "GET /index.html HTTP/1.1"
    assert got["out"].decode() == "".join(line + "\n" for line in [
        f"Feb  6 12:14:14 localhost haproxy[14389]\t10.0.1.2\t33317\t1wt.eu\t\t{req}",
        f"\t10.0.1.2\t33317\t1wt.eu\t\t{req}",
        f"Feb  6 12:14:14 syslog-relay-0042.datacenter-west.example.internal haproxy[14389]\t10.0.1.2\t33317"
        f"\t1wt.eu\t\t{req}",
        f"Feb  6 12:14:14 localhost haproxy[14389]\t2001:db8::2\t33317\t1wt.eu\t\t{req}",
        f"Feb  6 12:14:14 localhost haproxy[14389]\t[2001:db8::1]\t443\t1wt.eu\t\t{req}",
        f"Feb  6 12:14:14 lb haproxy[14389]\t{'x' * 23}12\t33317\t1wt.eu\t\t{req}",
        f"\t10.0.1.2\t33317\t\t\t{req}",
        f"\t10.0.1.2\t33317\ta|b|\t|\t{req}",
        f"\t10.0.1.2\t33317\t\t\t{req}",
        f"\t10.0.1.2\t33317\tonly\t\t{req}",
    ])
    assert (run.lines_read, run.malformed) == (12, {"no_match": 2})


W3C_LOG = b"".join(line + b"\r\n" for line in [
    b"#Fields: date time c-ip cs-method cs-uri-stem cs-uri-query cs(User-Agent) cs(Referer) sc-status sc-bytes",
    b"2024-01-02 03:04:05 10.0.0.1 GET /a - +Mozilla/5.0+(X11;+Linux)+ + 200 15",
    b'2024-01-02 03:04:06 10.0.0.2 GET "/a b" q=1+2 "Mozilla/5.0+(Windows+NT+10.0)+Gecko+++" - 404 -',
    b"2024-01-02 03:04:07 - - - - - - 200 7",
    b'2024-01-02 03:04:08 10.0.0.4 GET / "" ab+ "+" 200 9',
    # the columns change: the time alone, the request's two columns apart, a query that is not read
    b"#Fields: time c-ip cs-uri-stem cs-method cs(User-Agent) sc-bytes",
    b"03:04:09 ::1 /b POST Lynx+2.8 12",
    b"03:04:10 ::2 /c - - 3",
    b"03:04:11 ::3 /d GET",
])


def test_w3c_fields_and_plus_on_both_engines(engine, tmp_path):
    import logetl.api as L

    log = tmp_path / "iis.log"
    log.write_bytes(W3C_LOG)
    sink = L.read("w3c", fields=("time", "ip", "request", "query", "user_agent", "referer", "size")).write("out")
    got, run = run_flow(L.Flow("iis", [sink]), log, engine, tmp_path)
    assert got["out"].decode() == "".join(line + "\n" for line in [
        "2024-01-02 03:04:05\t10.0.0.1\tGET /a\t\t Mozilla/5.0 (X11; Linux) \t \t15",
        # (the request spans the method and the quoted path, its opening quote kept; a size "-" is empty)
        "2024-01-02 03:04:06\t10.0.0.2\tGET \"/a b\tq=1+2\tMozilla/5.0 (Windows NT 10.0) Gecko   \t\t",
        "2024-01-02 03:04:07\t\t- -\t\t\t\t7",      # (the request joins two "-" columns: not one "-")
        "2024-01-02 03:04:08\t10.0.0.4\tGET /\t\tab \t \t9",
        "03:04:09\t::1\t\t\tLynx 2.8\t\t12",
        "03:04:10\t::2\t\t\t\t\t3",
    ])
    assert (run.lines_read, run.header_lines, run.malformed, run.dropped_size_dash) == (9, 2, {"no_match": 1}, 0)
