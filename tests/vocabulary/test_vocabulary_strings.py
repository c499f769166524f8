"""The string vocabulary on both engines, byte for byte: regex capture (``extract``), matching ignoring ASCII
case, the parts of a request line or URL (``method``, ``path``, ``query_string``, ``query_param``,
``url_host``), percent-decoding (``url_decode``) and the aggregates ``first``/``last``.

Each case is a small flow over ``tests/data/strings.log`` (combined format with referer; twelve lines, one
of them a malformed request line, ``-``, an empty request, ``*``, authority- and absolute-form targets,
non-ASCII, the Kelvin sign, IP literals, escapes that are not UTF-8) with its expected output worked out by
hand from the docstrings in ``logetl.expressions``; the same case runs on the local engine and on Spark
(the shared ``local[2]`` session). The parsed records, in input order:

===  ========  ========  ======================================================  ========================================
rec  ip        time      request                                                 referer
===  ========  ========  ======================================================  ========================================
R1   10.0.0.1  10:05:03  GET /a/b.html?q=caf%C3%A9&x=1&q=2 HTTP/1.1              http://User@WWW.Example.COM:8080/search?q=a+b%2Bc#frag
R2   10.0.0.2  10:05:03  POST /api/v1/items HTTP/1.0                             -
R3   10.0.0.1  10:05:01  GET http://Proxy.Example.net HTTP/1.1                   https://[2001:DB8::1]:443/x?y
R4   10.0.0.3  10:05:09  OPTIONS * HTTP/1.1                                      (empty)
R5   10.0.0.2  10:05:02  -                                                       android-app://com.google.android.gm/
R6   10.0.0.3  10:05:09  GET /a b HTTP/1.1                                       http:///nohost
R7   10.0.0.1  10:05:03  GET /Straße/%E2%82%AC?name=%FF&flag&name=second HTTP/1.1  HTTP://Bücher.Example/ü?q=%zz
R8   10.0.0.4  10:05:04  CONNECT example.com:443 HTTP/1.1                        http://a@b@c.example/
R9   10.0.0.2  10:05:02  GET /x%3Fy?a=%0A%41%2&b=+%2B#frag HTTP/1.1              /relative/only
R10  10.0.0.4  10:05:04  get //double//slash? HTTP/2.0                           http://h?q=1
R11  10.0.0.5  10:05:05  GET /?=empty&&a==b&K=\u212a HTTP/1.1 (the Kelvin sign)  http://host.example:80
R12  10.0.0.5  10:05:05  (empty)                                                 ftp://[::1/
===  ========  ========  ======================================================  ========================================

Times are 17/May/2015 (so they sort as written). A sink writes null as the empty field; where null and
the empty string differ, an ``is_null`` column says which.
"""
from __future__ import annotations

import os
import re
from collections import Counter
from urllib.parse import unquote_to_bytes, urlsplit

import pytest
from conftest import HERE, flow_outputs, parts

import logetl.api as L
from logetl import expressions as E
from logetl.engines.local import engine as local_engine
from logetl.engines.local import scan as local_scan

LOG = os.path.join(HERE, "data", "strings.log")
COMBINED = '%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-agent}i"'
KELVIN = "\u212a"
c = L.col


def logs():
    return L.read(COMBINED)


def lines(*rows: str) -> bytes:
    return "".join(r + "\n" for r in rows).encode("utf-8")


# --- the cases: name -> function(parsed records) -> (sinks, {output tap: expected bytes}) -------------------

def case_extract(p):
    r = c("request")
    out = p.derive(
        e1=r.extract("^([A-Za-z]+) "), e0=r.extract("/[a-z]+", 0), eo=r.extract("^GET (/[a-z]*)?(.)", 1),
        ne=r.extract("(ß|€|%E2)(.)", 2), ho=c("referer").extract("^[a-z]+://([^/]*)", 1),
    ).derive(eon=c("eo").is_null(), hon=c("ho").is_null()).select("e1", "e0", "eo", "eon", "ne", "ho", "hon")
    return [out.write("out")], {"out": lines(
        "GET\t/a\t/a\tfalse\t\tUser@WWW.Example.COM:8080\tfalse",
        "POST\t/api\t\ttrue\t\t\ttrue",
        "GET\t\t\tfalse\t\t[2001:DB8::1]:443\tfalse",     # (/[a-z]*)? did not take part: ""
        "OPTIONS\t\t\ttrue\t\t\ttrue",
        "\t\t\ttrue\t\t\ttrue",                            # android-app: '-' is not in [a-z]
        "GET\t/a\t/a\tfalse\t\t\tfalse",                   # http:///nohost: an empty match, ""
        "GET\t\t/\tfalse\te\t\ttrue",                      # ß first; HTTP: upper case
        "CONNECT\t\t\ttrue\t\ta@b@c.example\tfalse",
        "GET\t/x\t/x\tfalse\t\t\ttrue",
        "get\t/double\t\ttrue\t\th?q=1\tfalse",
        "GET\t\t/\tfalse\t\thost.example:80\tfalse",
        "\t\t\ttrue\t\t[::1\tfalse")}


def case_ignore_case(p):
    r, ref = c("request"), c("referer")
    out = p.derive(
        m1=r.matches("^get ", ignore_case=True), k1=r.contains("k=" + KELVIN, ignore_case=True),
        k2=r.contains("k=k", ignore_case=True), s1=r.contains("STRASSE", ignore_case=True),
        s2=r.contains("STRAßE", ignore_case=True), u1=ref.contains("BÜCHER", ignore_case=True),
        u2=ref.contains("BüCHER", ignore_case=True), h1=ref.matches("^HTTPS?://[A-Z]", ignore_case=True),
        n1=r.matches("^[^a-z]+$", ignore_case=True), mn=L.path(r).contains("A", ignore_case=True),
        cs=r.contains("get"),
    ).select("m1", "k1", "k2", "s1", "s2", "u1", "u2", "h1", "n1", "mn", "cs")
    f, t = "false", "true"
    rows = [  # m1 k1 k2 s1 s2 u1 u2 h1 n1 mn cs
        (t, f, f, f, f, f, f, t, f, t, f),
        (f, f, f, f, f, f, f, f, f, t, f),
        (t, f, f, f, f, f, f, f, f, f, f),       # https://[ : [ is no letter
        (f, f, f, f, f, f, f, f, f, "", f),       # no path: null
        (f, f, f, f, f, f, f, f, t, "", f),       # "-": no ASCII letter
        (t, f, f, f, f, f, f, f, f, "", f),
        (t, f, f, f, t, f, t, t, f, t, f),       # ß and Ü only match themselves
        (f, f, f, f, f, f, f, t, f, "", f),
        (t, f, f, f, f, f, f, f, f, f, f),
        (t, f, f, f, f, f, f, t, f, t, t),
        (t, t, f, f, f, f, f, t, f, f, f),       # the Kelvin sign is not k
        (f, f, f, f, f, f, f, f, f, "", f)]
    return [out.write("out")], {"out": lines(*("\t".join(row) for row in rows))}


def case_request_parts(p):
    r = c("request")
    out = p.derive(m=L.method(r), pa=L.path(r), q=L.query_string(r), h=L.url_host(r)).derive(
        pn=c("pa").is_null(), qn=c("q").is_null()).select("m", "pa", "pn", "q", "qn", "h")
    return [out.write("out")], {"out": lines(
        "GET\t/a/b.html\tfalse\tq=caf%C3%A9&x=1&q=2\tfalse\t",
        "POST\t/api/v1/items\tfalse\t\ttrue\t",
        "GET\t/\tfalse\t\ttrue\tproxy.example.net",       # absolute-form, empty path: /
        "OPTIONS\t\ttrue\t\ttrue\t",                       # *: no path
        "\t\ttrue\t\ttrue\t",                              # -: no request line
        "\t\ttrue\t\ttrue\t",                              # four parts: no request line
        "GET\t/Straße/%E2%82%AC\tfalse\tname=%FF&flag&name=second\tfalse\t",
        "CONNECT\t\ttrue\t\ttrue\t",                       # authority-form: no path
        "GET\t/x%3Fy\tfalse\ta=%0A%41%2&b=+%2B\tfalse\t",  # %3F is no ?; the fragment is cut
        "get\t//double//slash\tfalse\t\tfalse\t",          # a bare ?: the empty query string
        "GET\t/\tfalse\t=empty&&a==b&K=" + KELVIN + "\tfalse\t",
        "\t\ttrue\t\ttrue\t")}                             # the empty request


def case_referer_parts(p):
    ref = c("referer")
    out = p.derive(h=L.url_host(ref), pa=L.path(ref), q=L.query_string(ref)).derive(
        qn=c("q").is_null()).select("h", "pa", "q", "qn")
    return [out.write("out")], {"out": lines(
        "www.example.com\t/search\tq=a+b%2Bc\tfalse",      # no user, no port, lower case; no fragment
        "\t\t\ttrue",
        "2001:db8::1\t/x\ty\tfalse",                       # an IP literal without its brackets
        "\t\t\ttrue",
        "com.google.android.gm\t/\t\ttrue",
        "\t/nohost\t\ttrue",                               # an empty host is none
        "bücher.example\t/ü\tq=%zz\tfalse",                # ASCII letters lower-cased only
        "c.example\t/\t\ttrue",                            # after the last @
        "\t/relative/only\t\ttrue",                        # origin-form: a path, no host
        "h\t/\tq=1\tfalse",
        "host.example\t/\t\ttrue",
        "\t/\t\ttrue")}                                    # [::1 without ]: no host


def case_query_param(p):
    r = c("request")
    out = p.derive(
        q=L.query_param(r, "q"), n=L.query_param(r, "name"), nr=L.query_param(r, "name", decode=False),
        f=L.query_param(r, "flag"), a=L.query_param(r, "a"), b=L.query_param(r, "b"),
        k=L.query_param(r, "K"), kl=L.query_param(r, "k"), rq=L.query_param(c("referer"), "q"),
    ).derive(nn=c("n").is_null(), fn=c("f").is_null()).select("q", "n", "nn", "nr", "f", "fn", "a", "b", "k",
                                                               "kl", "rq")
    empty = "\t\ttrue\t\t\ttrue\t\t\t\t\t"
    return [out.write("out")], {"out": lines(
        "café\t\ttrue\t\t\ttrue\t\t\t\t\ta b+c",          # the first q; + is a space, %2B a plus
        empty,
        empty,
        empty,
        empty,
        empty,
        "\t\ttrue\t%FF\t\tfalse\t\t\t\t\t%zz",             # %FF alone is not UTF-8: null; a bare flag: ""
        empty,
        "\t\ttrue\t\t\ttrue\t%0AA%2\t +\t\t\t",            # %0A (LF) and %2 stay as written
        empty + "1",
        "\t\ttrue\t\t\ttrue\t=b\t\t" + KELVIN + "\t\t",  # a==b: the value is =b; names keep their case
        empty)}


def case_url_decode(p):
    r = c("request")
    out = p.derive(d1=L.url_decode(L.path(r)), d2=L.url_decode(L.query_string(r), plus_as_space=True),
                   d3=L.url_decode(c("referer")), lit=L.url_decode(L.lit("%E2%82%AC+%2b%"))).select(
        "d1", "d2", "d3", "lit")
    return [out.write("out")], {"out": lines(
        "/a/b.html\tq=café&x=1&q=2\thttp://User@WWW.Example.COM:8080/search?q=a+b+c#frag\t€++%",
        "/api/v1/items\t\t-\t€++%",
        "/\t\thttps://[2001:DB8::1]:443/x?y\t€++%",
        "\t\t\t€++%",
        "\t\tandroid-app://com.google.android.gm/\t€++%",
        "\t\thttp:///nohost\t€++%",
        "/Straße/€\t\tHTTP://Bücher.Example/ü?q=%zz\t€++%",     # %FF: not UTF-8, null
        "\t\thttp://a@b@c.example/\t€++%",
        "/x?y\ta=%0AA%2&b= +\t/relative/only\t€++%",
        "//double//slash\t\thttp://h?q=1\t€++%",
        "/\t=empty&&a==b&K=" + KELVIN + "\thttp://host.example:80\t€++%",
        "\t\tftp://[::1/\t€++%")}


#: url_decode of constants: (written, decoded or None for null)
DECODED = [
    ("%c3%A9", "é"), ("%F0%9F%98%80", "😀"), ("%%41", "%A"), ("%2541", "%41"), ("a%2", "a%2"), ("%", "%"),
    ("%zz%4", "%zz%4"), ("%00%09%0d%0A%1f%7F%7e%20", "%00%09%0d%0A%1f%7F~ "), ("a+b", "a+b"), ("", ""),
    ("%C0%AF", None),          # an overlong /
    ("%ED%A0%80", None),       # a surrogate
    ("%F4%90%80%80", None),    # past U+10FFFF
    ("%E2%82", None),          # a truncated sequence
    ("%80", None), ("a%E2%82%ACb", "a€b"), ("ü%C3%BC", "üü"), ("%EF%BF%BD", "\ufffd"),
]


def case_url_decode_constants(p):
    one = p.limit(1).derive(**{f"v{i}": L.url_decode(L.lit(w)) for i, (w, _) in enumerate(DECODED)})
    out = one.select(*[f"v{i}" for i in range(len(DECODED))])
    return [out.write("out")], {"out": lines("\t".join(d or "" for _, d in DECODED))}


def case_first_last(p):
    d = p.derive(pa=L.path(c("request")), m=L.method(c("request")), qs=L.query_string(c("request")))
    out = d.group_by("ip").agg(
        f=L.first("request", order_by="time"), l=L.last("request", order_by="time"), fi=L.first("request"),
        li=L.last("request"), fp=L.first("request", order_by="pa"), lp=L.last("request", order_by=L.asc("pa")),
        lq=L.last("qs", order_by="time"), lm=L.last("request", order_by=["m", "time"]), lo=L.min("request"),
        hi=L.max("request")).derive(lqn=c("lq").is_null()).sort("ip")
    r = {i + 1: line for i, line in enumerate([
        "GET /a/b.html?q=caf%C3%A9&x=1&q=2 HTTP/1.1", "POST /api/v1/items HTTP/1.0",
        "GET http://Proxy.Example.net HTTP/1.1", "OPTIONS * HTTP/1.1", "-", "GET /a b HTTP/1.1",
        "GET /Straße/%E2%82%AC?name=%FF&flag&name=second HTTP/1.1", "CONNECT example.com:443 HTTP/1.1",
        "GET /x%3Fy?a=%0A%41%2&b=+%2B#frag HTTP/1.1", "get //double//slash? HTTP/2.0",
        "GET /?=empty&&a==b&K=" + KELVIN + " HTTP/1.1", ""])}
    rows = [  # ip, f, l, fi, li, fp, lp, lq, lm, lo, hi, lqn
        ("10.0.0.1", r[3], r[7], r[1], r[7], r[3], r[1], "name=%FF&flag&name=second", r[7], r[7], r[3], "false"),
        # equal times: input order (R5 before R9); a null path first; the last record's null value
        ("10.0.0.2", r[5], r[2], r[2], r[9], r[5], r[9], "", r[2], r[5], r[2], "true"),
        ("10.0.0.3", r[4], r[6], r[4], r[6], r[4], r[6], "", r[4], r[6], r[4], "true"),
        ("10.0.0.4", r[8], r[10], r[8], r[10], r[8], r[10], "", r[10], r[8], r[10], "false"),
        ("10.0.0.5", r[11], r[12], r[11], r[12], r[12], r[11], "", r[11], r[12], r[11], "true")]
    return [out.write("out")], {"out": lines(*("\t".join(row) for row in rows))}


CASES = {name[len("case_"):]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}


def build(name: str):
    sinks, expected = CASES[name](logs())
    return L.Flow(f"strings_{name}", sinks), expected


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_gives_the_expected_bytes(engine, name, tmp_path):
    flow, expected = build(name)
    got = flow_outputs(flow, engine, LOG, tmp_path)
    assert {tap: data.decode("utf-8") for tap, data in got.items()} == \
        {tap: data.decode("utf-8") for tap, data in expected.items()}


def test_a_request_line_without_a_protocol_has_its_method_and_target(engine, tmp_path):
    """``METHOD TARGET`` (HTTP/0.9's request line, and the ``request`` of a W3C log, which writes no
    protocol) is a request line too; a doubled space or a fourth part still makes none."""
    log = tmp_path / "two.log"
    requests = ["GET /a/b?x=1", "GET /a/b?x=1 HTTP/1.0", "HEAD http://h.example/", "GET  /a", "GET /a HTTP/1.1 x"]
    log.write_text("".join(f'192.0.2.1 - - [10/Oct/2000:13:55:36 -0700] "{r}" 200 1 "-" "-"\n' for r in requests))
    r = c("request")
    flow = L.Flow("combined", [L.read("combined").derive(m=L.method(r), pa=L.path(r), q=L.query_string(r),
                                                          h=L.url_host(r)).select("m", "pa", "q", "h")
                               .write("out")])
    assert flow_outputs(flow, engine, str(log), tmp_path)["out"].decode() == (
        "GET\t/a/b\tx=1\t\nGET\t/a/b\tx=1\t\nHEAD\t/\t\th.example\n\t\t\t\n\t\t\t\n")


def test_the_constants_decode_as_python_reads_the_rule():
    """The hand-written table agrees with the rule read with Python's own decoder: the escapes of bytes
    20-7E and 80-FF decoded, the bytes then strict UTF-8."""
    def rule(text: str) -> str | None:
        raw = re.sub(rb"%([2-7][0-9A-Fa-f]|[89A-Fa-f][0-9A-Fa-f])",
                     lambda m: m.group(0) if m.group(1).lower() == b"7f" else bytes([int(m.group(1), 16)]),
                     text.encode("utf-8"))
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return None

    assert [(w, rule(w)) for w, _ in DECODED] == DECODED


# --- the real sample, against urllib.parse over an independent parse --------------------------------------

LINE = re.compile(r'(\S+) \S+ \S+ \[([^\]]+)\] "(.*?)" ([0-9]{3}) (\S+) "(.*?)" "(.*?)"')


def sample_records(path: str):
    """(request, referer) of the sample's records whose size is not ``-`` (every line is well formed)."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = LINE.fullmatch(line.rstrip("\n"))
            assert m is not None, line
            if m.group(5) != "-":
                yield m.group(3), m.group(6)


def python_path(request: str) -> str | None:
    parts_ = request.split(" ")
    if len(parts_) != 3 or "" in parts_ or not parts_[1].startswith("/"):
        return None
    return urlsplit(parts_[1]).path


def python_decoded(path: str) -> str | None:
    """urllib's percent-decoding, strict UTF-8, the escapes of control characters kept as written."""
    kept = re.sub(r"%([01][0-9A-Fa-f]|7[Ff])", r"%25\1", path)
    try:
        return unquote_to_bytes(kept).decode("utf-8")
    except UnicodeDecodeError:
        return None


def top(counter: Counter, n: int) -> bytes:
    ranked = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0].encode("utf-8")))[:n]
    return lines(*(f"{k}\t{v}" for k, v in ranked))


def sample_flow():
    p = L.read(COMBINED).filter(c("size") != "-")
    paths = (p.derive(path=L.path(c("request"))).filter(c("path").is_not_null()).group_by("path")
             .agg(n=L.count()).top(20, by=[L.desc("n"), "path"], name="top_paths"))
    hosts = (p.derive(host=L.url_host(c("referer"))).filter(c("host").is_not_null()).group_by("host")
             .agg(n=L.count()).top(15, by=[L.desc("n"), "host"], name="top_hosts"))
    decoded = (p.filter(c("request").contains("%")).derive(d=L.url_decode(L.path(c("request"))))
               .group_by("d").agg(n=L.count()).sort("d"))
    return L.Flow("strings_sample", [paths.write("paths"), hosts.write("hosts"), decoded.write("decoded")])


def test_top_paths_and_referer_hosts_of_the_sample_match_urllib(engine, sample, tmp_path, monkeypatch):
    records = list(sample_records(sample))
    paths = Counter(p for p in (python_path(r) for r, _ in records) if p is not None)
    hosts = Counter(h for h in (urlsplit(ref).hostname for _, ref in records) if h)
    decoded = Counter(python_decoded(python_path(r)) for r, _ in records if "%" in r)
    assert len(paths) > 100 and len(hosts) > 20 and sum(decoded.values()) > 20     # a real test of each
    assert decoded[None] > 0                                 # escapes of bytes that are not UTF-8
    if engine == "local":          # small batches: partial aggregates combine across them
        monkeypatch.setattr(local_engine.LocalEngine, "chunk_bytes", 50_000)
        monkeypatch.setattr(local_scan, "BATCH_ROWS", 300)
    got = flow_outputs(sample_flow(), engine, sample, tmp_path)
    assert got["paths"].decode() == top(paths, 20).decode()
    assert got["hosts"].decode() == top(hosts, 15).decode()
    assert got["decoded"].decode() == lines(*(f"{k or ''}\t{v}" for k, v in sorted(   # null sorts first
        decoded.items(), key=lambda kv: (kv[0] is not None, (kv[0] or "").encode("utf-8"))))).decode()


def firsts_and_lasts(sample: str) -> tuple[L.Flow, bytes]:
    """Per client, the first and last request by time (the sample's times are one month's, so they sort as
    written), equal times in input order: the flow, and the result by plain Python."""
    with open(sample, encoding="utf-8") as f:
        rows = [(m.group(1), m.group(2), m.group(3)) for m in (LINE.fullmatch(x.rstrip("\n")) for x in f)
                if m.group(5) != "-"]
    first, last = {}, {}
    for ip, time, request in rows:
        key = time[:20]
        if ip not in first or key < first[ip][0]:
            first[ip] = (key, request)
        if ip not in last or key >= last[ip][0]:
            last[ip] = (key, request)
    expected = lines(*(f"{ip}\t{first[ip][1]}\t{last[ip][1]}" for ip in sorted(first, key=str.encode)))
    flow = L.Flow("firsts", [L.read(COMBINED).filter(c("size") != "-").derive(t=c("time").substring(1, 20))
                             .group_by("ip", name="per_ip").agg(f=L.first("request", order_by="t"),
                                                                l=L.last("request", order_by="t"))
                             .sort("ip").write("out")])
    return flow, expected


def test_first_and_last_of_the_sample_match_python(engine, sample, tmp_path, monkeypatch):
    """Over batches of 300 records on the local engine: partial states combine across batches."""
    flow, expected = firsts_and_lasts(sample)
    if engine == "local":
        monkeypatch.setattr(local_engine.LocalEngine, "chunk_bytes", 50_000)
        monkeypatch.setattr(local_scan, "BATCH_ROWS", 300)
    assert flow_outputs(flow, engine, sample, tmp_path)["out"].decode() == expected.decode()


def test_first_and_last_keep_the_input_order_when_the_group_by_spills(sample, tmp_path, monkeypatch):
    """The local engine's partial states written to disk and combined one partition at a time."""
    from logetl.job import run_flow as run_job

    flow, expected = firsts_and_lasts(sample)
    monkeypatch.setattr(local_engine.LocalEngine, "chunk_bytes", 50_000)
    monkeypatch.setattr(local_scan, "BATCH_ROWS", 100)
    run = run_job(flow, sample, {"out": str(tmp_path / "out")}, engine_options={"spill_buffers": 16 * 1024},
                  monitor=False)
    assert "per_ip" in run.spilled and run.spilled["per_ip"]["files"] > 3, run.spilled
    assert parts(tmp_path / "out").decode() == expected.decode()


# --- definitions: what is refused, and the rewrites ---------------------------------------------------------

@pytest.mark.parametrize("make, message", [
    (lambda: c("x").extract("a(b)", 2), "extract: regex 'a(b)' has 1 group, not a group 2"),
    (lambda: c("x").extract("ab", 1), "extract: regex 'ab' has 0 groups, not a group 1"),
    (lambda: c("x").extract("(a)(b)", -1), "extract: regex '(a)(b)' has 2 groups, not a group -1"),
    (lambda: c("x").extract("(a)", True), "extract's group must be a literal int, not True"),
    (lambda: c("x").extract(r"(\d)"), r"regex '(\\d)': escape \d is not portable at offset 1 "
                                      "(see the portable regex subset in the flows guide)"),
    (lambda: c("x").matches("a", ignore_case="yes"), "matches' ignore_case must be True or False, not 'yes'"),
    (lambda: c("x").contains("a", ignore_case=1), "contains' ignore_case must be True or False, not 1"),
    (lambda: L.query_param(c("x"), ""), "query_param's name must be non-empty, without & = or #, not ''"),
    (lambda: L.query_param(c("x"), "a=b"), "query_param's name must be non-empty, without & = or #, not 'a=b'"),
    (lambda: L.query_param(c("x"), 5), "query_param's name must be a literal str, not 5"),
    (lambda: L.query_param(c("x"), "q", decode="no"), "query_param's decode must be True or False, not 'no'"),
    (lambda: L.url_decode(c("x"), plus_as_space=None), "url_decode's plus_as_space must be True or False, not None"),
    (lambda: L.first("x", order_by=L.desc("t")),
     "first: order_by is ascending only, not desc('t') (use last for the other end)"),
    (lambda: L.last("x", order_by=[5]), "last: order_by takes field names, not 5"),
    (lambda: L.last("x", order_by=[]), "last: order_by names no field"),
    (lambda: L.first("x", order_by="a b"),
     "invalid field name 'a b' (ASCII letters, digits, _ and -, starting with a letter or digit)"),
])
def test_a_bad_definition_is_one_clear_error(make, message):
    with pytest.raises(E.ExpressionError) as caught:
        make()
    assert str(caught.value) == message


def test_types_and_fields_are_checked_when_the_flow_is_defined():
    types = {"request": E.STRING, "n": E.INTEGER, "ok": E.BOOLEAN}
    for expr, message in [
        (L.path(c("n")), "path: n is integer, not string"),
        (L.url_host(c("ok")), "url_host: ok is boolean, not string"),
        (L.query_param(c("n"), "q"), "query_param: n is integer, not string"),
        (L.url_decode(c("n")), "url_decode: n is integer, not string"),
        (c("n").extract("(1)"), "extract: n is integer, not string"),
        (L.method(c("nope")), "no field 'nope' (fields: request, n, ok)"),
    ]:
        with pytest.raises(E.ExpressionError) as caught:
            expr.check(types)
        assert str(caught.value) == message
    with pytest.raises(E.ExpressionError) as caught:
        L.first("request", order_by="nope").check(types)
    assert str(caught.value) == "no field 'nope' (fields: request, n, ok)"
    assert L.first("n", order_by=["request", "ok"]).check(types) == E.INTEGER
    assert L.last("ok").check(types) == E.BOOLEAN


def test_descriptions_name_the_options():
    assert c("r").extract("a(b)", 0).describe() == "extract(r, 'a(b)', 0)"
    assert c("r").matches("^get", ignore_case=True).describe() == "r matches '^get' ignoring case"
    assert c("r").contains("x", ignore_case=True).describe() == "r contains 'x' ignoring case"
    assert L.query_param(c("r"), "q", decode=False).describe() == "query_param(r, 'q', decode=False)"
    assert L.url_decode(c("r"), plus_as_space=True).describe() == "url_decode(r, plus_as_space)"
    assert L.first("r", order_by=["a", "b"]).describe() == "first(r, order_by=a, b)"
    assert L.last("r").describe() == "last(r)"


@pytest.mark.parametrize("pattern, folded", [
    ("get /", "[gG][eE][tT] /"), ("[a-c_]", "[a-c_A-C]"), ("[^a-z]", "[^a-zA-Z]"), ("x{2,3}", "[xX]{2,3}"),
    ("[-a]", r"[\-aA]"), ("[a-]", r"[a\-A]"), (r"[\]k]", r"[\]kK]"), ("[W-c]", "[W-cA-Cw-z]"),
    ("(?:Get|é)", "(?:[gG][eE][tT]|é)"), (r"\.PNG$", r"\.[pP][nN][gG]$"), ("[0-9]", "[0-9]"),
])
def test_ignoring_case_rewrites_ascii_letters_only(pattern, folded):
    assert E.fold_ascii_case(pattern) == folded
    E.portable_regex(folded)       # still in the portable subset


@pytest.mark.parametrize("pattern, groups, certain", [
    ("(a)b", 1, {0, 1}), ("(a)?b", 1, {0}), ("(a|b)", 1, {0, 1}), ("(a)|b", 1, {0}), ("((a)|b)c", 2, {0, 1}),
    ("(a){0,2}", 1, {0}), ("(a){1,2}", 1, {0, 1}), ("((a)*)", 2, {0, 1}), (r"[(]x\((y)", 1, {0, 1}),
    ("(a)(b(c)?)", 3, {0, 1, 2}), ("(?:(a)|b)", 1, {0}),
])
def test_which_groups_take_part_in_every_match(pattern, groups, certain):
    """A group that takes part in every match is extracted in one pass on the local engine."""
    assert E._group_shape(pattern) == (groups, certain)


def test_a_function_of_one_value_takes_a_field_name_as_its_column(engine, tmp_path):
    """``L.path("request")`` is ``L.path(L.col("request"))``, as the aggregates and the time functions take
    a field's name: the same bytes, on both engines (a string literal is ``L.lit``)."""
    def flow(by_name: bool):
        f = (lambda name: name) if by_name else L.col
        p = L.read(COMBINED).derive(
            m=L.method(f("request")), p=L.path(f("request")), q=L.query_string(f("request")),
            a=L.query_param(f("request"), "a"), h=L.url_host(f("referer")), d=L.url_decode(f("request")),
            day=L.day(f("time")), hour=L.hour(f("time")), crc=L.crc32(f("ip")))
        return L.Flow("by_name", [p.select("m", "p", "q", "a", "h", "d", "day", "hour", "crc").write("out")])

    assert flow(True).sinks[0].describe() == flow(False).sinks[0].describe()
    by_name = flow_outputs(flow(True), engine, LOG, tmp_path / "name")["out"]
    assert by_name == flow_outputs(flow(False), engine, LOG, tmp_path / "col")["out"]
    assert by_name.count(b"\n") > 10 and b"\t" in by_name
