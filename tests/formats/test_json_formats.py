"""The JSON-lines formats (caddy, traefik, nginx_json, json:NAME=KEY.PATH): real lines from the vendors'
documentation and other parsers' test suites, hand-worked corners (keys reordered, escapes, nesting, numbers
and strings, missing and repeated keys, arrays, bad JSON), the reference reader against the native kernel
and against an independent reading of random objects written by json.dumps, mapping errors, --format auto,
the three programs and a flow on both engines, and every Spark parse path against the local engine's bytes."""
from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import logetl, parts, read
from test_contract import parse_one
from logetl import contract, detect, formats
from logetl.engines import kernel
from logetl.job import run_program

# Caddy's documentation example of an access log line (also GoAccess's Caddy parser test), "bytes_read": 0
# with its space as written there
CADDY_DOC = (b'{"level":"info","ts":1646861401.5241024,"logger":"http.log.access","msg":"handled request","request":'
             b'{"remote_ip":"127.0.0.1","remote_port":"41342","client_ip":"127.0.0.1","proto":"HTTP/2.0","method":'
             b'"GET","host":"localhost","uri":"/","headers":{"User-Agent":["curl/7.82.0"],"Accept":["*/*"],'
             b'"Accept-Encoding":["gzip, deflate, br"]},"tls":{"resumed":false,"version":772,"cipher_suite":4865,'
             b'"proto":"h2","server_name":"example.com"}},"bytes_read": 0,"user_id":"","duration":0.000929675,'
             b'"size":10900,"status":200,"resp_headers":{"Server":["Caddy"],"Content-Encoding":["gzip"],'
             b'"Content-Type":["text/html; charset=utf-8"],"Vary":["Accept-Encoding"]}}')
# a line of a Caddy 2.10 log (a named logger, "ech", escaped quotes in a response header)
CADDY_LIVE = (b'{"level":"info","ts":1786054486.193625,"logger":"http.log.access.log0","msg":"handled request",'
              b'"request":{"remote_ip":"98.113.67.178","remote_port":"55392","client_ip":"98.113.67.178","proto":'
              b'"HTTP/1.1","method":"GET","host":"api.whitepapergrey.com","uri":"/__logcheck-20260806T221446Z",'
              b'"headers":{"User-Agent":["curl/8.17.0"],"Accept":["*/*"]},"tls":{"resumed":false,"version":772,'
              b'"cipher_suite":4865,"proto":"http/1.1","server_name":"api.whitepapergrey.com","ech":false}},'
              b'"bytes_read":0,"user_id":"","duration":0.001543878,"size":99,"status":404,"resp_headers":{"Via":'
              b'["1.1 Caddy"],"Alt-Svc":["h3=\\":443\\"; ma=2592000"],"Content-Type":["application/json; '
              b'charset=utf-8"],"Content-Length":["99"],"Date":["Thu, 06 Aug 2026 22:14:46 GMT"]}}')
# Traefik's JSON access log, as Traefik writes it (keys in order; Duration in nanoseconds)
TRAEFIK_DOC = (b'{"ClientAddr":"192.168.156.1:31073","ClientHost":"192.168.156.1","ClientPort":"31073",'
               b'"ClientUsername":"-","DownstreamContentSize":75,"DownstreamStatus":404,"Duration":1964899,'
               b'"OriginContentSize":75,"OriginDuration":1694568,"OriginStatus":404,"Overhead":270331,'
               b'"RequestAddr":"nodejs.127.0.0.1.sslip.io","RequestContentSize":0,"RequestCount":1,"RequestHost":'
               b'"nodejs.127.0.0.1.sslip.io","RequestMethod":"GET","RequestPath":"/500","RequestPort":"-",'
               b'"RequestProtocol":"HTTP/1.1","RequestScheme":"http","RetryAttempts":0,"RouterName":'
               b'"http-0-p0o00o0g0cksskkog88so880@docker","ServiceAddr":"192.168.156.12:3000","ServiceName":'
               b'"http-0-p0o00o0g0cksskkog88so880@docker","ServiceURL":"http://192.168.156.12:3000","StartLocal":'
               b'"2025-02-28T12:11:34.10912886Z","StartUTC":"2025-02-28T12:11:34.10912886Z","entryPointName":"http",'
               b'"level":"info","msg":"","time":"2025-02-28T12:11:34Z"}')
# Traefik with its user-agent header kept (fields.headers), and a query in RequestPath
TRAEFIK_UA = (b'{"ClientAddr":"148.113.255.4:52654","ClientHost":"148.113.255.4","ClientPort":"52654","ClientUsername":'
              b'"-","DownstreamContentSize":397,"DownstreamStatus":200,"Duration":3454189,"RequestHost":'
              b'"sentinel.apps.auditflow.ca","RequestMethod":"GET","RequestPath":"/.env?x=1&y=\\u0026",'
              b'"RequestProtocol":"HTTP/2.0","StartUTC":"2026-09-29T23:05:40.189830187Z","request_User-Agent":'
              b'"Mozilla/5.0 (compatible; \\"probe\\")","request_Referer":"https://ref.example.com/a\\/b"}')
# nginx with the json_combined log_format (escape=json writes \" and \\ and \u00XX for control characters)
NGINX_LINE = (b'{"time_local":"17/May/2015:10:05:03 +0000","remote_addr":"83.149.9.216","remote_user":"",'
              b'"request":"GET /presentations/kibana-search.png?q=\\"a\\" HTTP/1.1","status": "200",'
              b'"body_bytes_sent":"203023","request_time":"0.012","http_referrer":"http://semicomplete.com/",'
              b'"http_user_agent":"Mozilla/5.0 (Macintosh) \\u00e9"}')

HAND = [
    ("caddy", "doc", CADDY_DOC, {
        "ip": "127.0.0.1", "client_ip": "127.0.0.1", "remote_port": "41342", "time": "1646861401.5241024",
        "method": "GET", "uri": "/", "protocol": "HTTP/2.0", "host": "localhost", "response": "200", "size": "10900",
        "referer": "", "user_agent": "curl/7.82.0", "duration": "0.000929675", "bytes_read": "0",
        "tls_server_name": "example.com", "level": "info", "logger": "http.log.access", "msg": "handled request",
        "request": "GET / HTTP/2.0", "path": "/", "query": ""}),
    ("caddy", "live", CADDY_LIVE, {
        "ip": "98.113.67.178", "response": "404", "size": "99", "request":
        "GET /__logcheck-20260806T221446Z HTTP/1.1", "logger": "http.log.access.log0", "time": "1786054486.193625"}),
    ("traefik", "doc", TRAEFIK_DOC, {
        "ip": "192.168.156.1", "client_port": "31073", "time": "2025-02-28T12:11:34.10912886Z", "method": "GET",
        "uri": "/500", "protocol": "HTTP/1.1", "host": "nodejs.127.0.0.1.sslip.io", "response": "404", "size": "75",
        "referer": "", "user_agent": "", "duration": "1964899", "origin_status": "404", "origin_size": "75",
        "origin_duration": "1694568", "router": "http-0-p0o00o0g0cksskkog88so880@docker",
        "service": "http-0-p0o00o0g0cksskkog88so880@docker", "service_url": "http://192.168.156.12:3000",
        "entry_point": "http", "request_count": "1", "retry_attempts": "0",
        "start_local": "2025-02-28T12:11:34.10912886Z", "request": "GET /500 HTTP/1.1", "path": "/500", "query": ""}),
    ("traefik", "ua", TRAEFIK_UA, {
        "uri": "/.env?x=1&y=&", "path": "/.env", "query": "x=1&y=&", "request": "GET /.env?x=1&y=& HTTP/2.0",
        "user_agent": 'Mozilla/5.0 (compatible; "probe")', "referer": "https://ref.example.com/a/b"}),
    ("nginx_json", "json_combined", NGINX_LINE, {
        "time": "17/May/2015:10:05:03 +0000", "ip": "83.149.9.216", "user": "",
        "request": 'GET /presentations/kibana-search.png?q="a" HTTP/1.1', "response": "200", "size": "203023",
        "request_time": "0.012", "referer": "http://semicomplete.com/", "user_agent": "Mozilla/5.0 (Macintosh) é",
        "method": "GET", "uri": '/presentations/kibana-search.png?q="a"', "protocol": "HTTP/1.1",
        "path": "/presentations/kibana-search.png", "query": 'q="a"'}),
]

MAP = "json:ip=a.ip,n=n,s=s,t=t,method=m,uri=u,deep=x.y.z,arr=h.A,nul=z,obj=o,odd=k\\.d"
CORNERS = [
    ("reordered", b'{"u":"/p?q","m":"GET","a":{"ip":"10.0.0.1"}}',
     {"ip": "10.0.0.1", "method": "GET", "uri": "/p?q", "request": "GET /p?q", "path": "/p", "query": "q"}),
    ("numbers as written", b'{"n":200,"s":"200","t":-1.50e+3}', {"n": "200", "s": "200", "t": "-1.50e+3"}),
    ("true false null", b'{"n":true,"s":false,"nul":null,"z":null}', {"n": "true", "s": "false", "nul": ""}),
    ("escapes", b'{"s":"\\"\\\\\\/\\b\\f\\u00e9\\u20ac\\ud83d\\ude00"}', {"s": '"\\/\b\fé€😀'}),
    ("escaped key", b'{"\\u0073":"by an escaped key"}', {"s": "by an escaped key"}),
    ("raw utf-8", '{"s":"żółw 😀"}'.encode(), {"s": "żółw 😀"}),
    ("nested", b'{"x":{"y":{"z":"deep","q":1}},"h":{"A":["first","second"]}}', {"deep": "deep", "arr": "first"}),
    ("object and empty array", b'{"o":{"a":1},"h":{"A":[]},"x":{"y":[{"z":1}]}}', {"obj": "", "arr": "", "deep": ""}),
    ("array of arrays", b'{"h":{"A":[[7,8],9]}}', {"arr": "7"}),
    ("missing", b'{}', {"ip": "", "n": "", "request": "", "path": "", "query": ""}),
    ("last key wins", b'{"n":1,"n":2,"x":{"y":{"z":"a"}},"x":{"w":1}}', {"n": "2", "deep": ""}),
    ("a path through a string", b'{"x":"not an object"}', {"deep": ""}),
    ("a key with a dot", b'{"k.d":"dotted","k":{"d":"nested"}}', {"odd": "dotted"}),
    ("whitespace around", b' \t{ "n" : 1 , "s" : "x" } \t', {"n": "1", "s": "x"}),
    ("no uri", b'{"m":"GET"}', {"method": "GET", "request": "", "path": ""}),
    ("crlf", b'{"n":1}\r', {"n": "1"}),
    ("not json", b"not json", contract.NO_MATCH),
    ("empty", b"", contract.NO_MATCH),
    ("an array", b'[{"n":1}]', contract.NO_MATCH),
    ("a string", b'"n"', contract.NO_MATCH),
    ("trailing text", b'{"n":1} x', contract.NO_MATCH),
    ("two objects", b'{"n":1}{"n":2}', contract.NO_MATCH),
    ("trailing comma", b'{"n":1,}', contract.NO_MATCH),
    ("single quotes", b"{'n':1}", contract.NO_MATCH),
    ("NaN", b'{"n":NaN}', contract.NO_MATCH),
    ("leading zero", b'{"n":01}', contract.NO_MATCH),
    ("bare minus", b'{"n":-}', contract.NO_MATCH),
    ("bad escape", b'{"n":"\\x41"}', contract.NO_MATCH),
    ("short \\u", b'{"n":"\\u12"}', contract.NO_MATCH),
    ("raw control character", b'{"q":"a\x01b"}', contract.NO_MATCH),
    ("raw tab in a string", b'{"q":"a\tb"}', contract.NO_MATCH),
    ("unclosed", b'{"n":"x', contract.NO_MATCH),
    ("lone surrogate mapped", b'{"s":"\\ud800"}', contract.NO_MATCH),
    ("lone low surrogate mapped", b'{"s":"a\\udc00"}', contract.NO_MATCH),
    ("lone surrogate unmapped", b'{"q":"\\ud800","n":3}', {"n": "3"}),
    ("decoded tab", b'{"s":"a\\tb"}', contract.TAB_OR_CR),
    ("decoded newline", b'{"s":"a\\nb"}', contract.TAB_OR_CR),
    ("decoded tab unmapped", b'{"q":"a\\tb","n":1}', {"n": "1"}),
    ("invalid utf-8", b'{"s":"\xff"}', contract.INVALID_UTF8),
]


def reference(fmt, raw: bytes):
    try:
        return fmt.parse_line(raw)
    except contract.Malformed as exc:
        return exc.reason


def native(fmt, raw: bytes):
    return parse_one(kernel.Parser(fmt, fmt.fields, native=True, drop_dash=False).parse, raw)


def check(fmt, raw: bytes, expected):
    got = reference(fmt, raw)
    if isinstance(expected, dict):
        assert isinstance(got, tuple), (got, fmt.why(raw))
        assert {k: dict(zip(fmt.fields, got))[k] for k in expected} == expected
    else:
        assert got == expected
        if expected != contract.INVALID_UTF8:
            assert fmt.why(raw)
    assert native(fmt, raw) == got
    assert parse_one(kernel.Parser(fmt, fmt.fields, native=False, drop_dash=False).parse, raw) == got


pytestmark = pytest.mark.skipif(not kernel.NATIVE, reason="the native kernel is not built")


@pytest.mark.parametrize("spec,raw,expected", [pytest.param(s, r, e, id=f"{s}-{n}") for s, n, r, e in HAND])
def test_vendor_lines_give_the_hand_worked_fields(spec, raw, expected):
    check(formats.compile_format(spec), raw, expected)


@pytest.mark.parametrize("raw,expected", [pytest.param(r, e, id=n) for n, r, e in CORNERS])
def test_corners_of_a_mapping(raw, expected):
    check(formats.compile_format(MAP), raw, expected)


def test_every_json_preset_speaks_the_one_vocabulary():
    for name in formats.JSON_NAMES:
        fields = formats.compile_format(name).fields
        assert {"ip", "time", "request", "method", "path", "query", "response", "size", "referer",
                "user_agent"} <= set(fields), name
    assert formats.compile_format("json:a=b").fields == ("a",)
    assert formats.compile_format("json:request=r").fields == ("request", "method", "uri", "protocol", "path", "query")
    assert formats.compile_format("json:uri=u").fields == ("uri", "path", "query")
    assert formats.compile_format("json:method=m,uri=u,path=p").fields == ("method", "uri", "path", "request", "query")


def test_samples_say_why_a_line_is_not_read():
    fmt = formats.compile_format(MAP)
    assert fmt.why(b'{"n":1,}') == "not JSON at byte 7: Expecting property name enclosed in double quotes"
    assert fmt.why('{"é":1 x}'.encode()) == "not JSON at byte 8: Expecting ',' delimiter"
    assert fmt.why(b"[1]") == "not a JSON object (a JSON value of another kind)"
    assert fmt.why(b'{"s":"\\ud800"}') == ("field 's': its string holds a lone surrogate (\\ud800-\\udfff), which "
                                          "is not UTF-8")
    assert fmt.why(b'{"s":"a\\rb"}') == "field 's' holds a CR once decoded"
    assert fmt.why(b'{"s":"ok"}') is None


@pytest.mark.parametrize("spec,message", [
    ("json:", "--format json: maps no field: write json:NAME=KEY.PATH,... (e.g. json:ip=remote_ip,path=request.uri)"),
    ("json:ip", "json mapping item 'ip' has no '=': write NAME=KEY.PATH"),
    ("json:ip=a,ip=b", "json mapping item 'ip=b': the field 'ip' is mapped twice"),
    ("json:ip=a,IP=b", "json mapping item 'IP=b': the field name 'IP' differs only in case from 'ip' (Spark, Hive "
                       "and DuckDB take them for one)"),
    ("json:ip=a..b", "json mapping item 'ip=a..b' has an empty key in its path (a '.' doubled or at an end)"),
    ("json:ip=", "json mapping item 'ip=' has no key path after '='"),
    ("json:_x=a", "json mapping item '_x=a' gives the field name '_x': a field name is " + formats.FIELD_NAME_RULE),
    ("json:method=a,uri=a", "format 'json:method=a,uri=a' maps two of method, uri and protocol to one key: each is "
                            "its own key"),
    ("json:a=" + ".".join("k" * 17), f"json mapping item 'a={'.'.join('k' * 17)}' has a path of 17 keys (at most 16)"),
])
def test_a_bad_mapping_is_one_line(spec, message):
    with pytest.raises(formats.FormatError) as exc:
        formats.compile_format(spec)
    assert str(exc.value) == message


def test_a_bad_mapping_on_the_command_line_exits_2(tmp_path):
    p = logetl("filter", "--input", str(tmp_path / "x.log"), "--output", str(tmp_path / "o"), "--format", "json:ip")
    assert (p.returncode, p.stderr.decode()) == (2, "Error: json mapping item 'ip' has no '=': write NAME=KEY.PATH\n")


def test_auto_recognises_each_json_preset_by_its_keys():
    nginx_other = NGINX_LINE.replace(b'"status": "200",', b'"status": 200,')
    for name, lines in (("caddy", [CADDY_DOC, CADDY_LIVE]), ("traefik", [TRAEFIK_DOC, TRAEFIK_UA]),
                        ("nginx_json", [NGINX_LINE, nginx_other])):
        got = detect.detect(lines + [b"not json"])
        assert (got.name, got.matched, got.sampled) == (name, 2, 3)
    with pytest.raises(formats.FormatError):
        detect.detect([b'{"a":1}'])


# --- property test: random objects written by json.dumps ---------------------------------------------------

KEYS = st.sampled_from(["a", "b", "é", "k.d", "n", "", "x y", "\\", '"'])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(KEYS, inner, max_size=4)), max_leaves=12)
PATHS = [("a",), ("b",), ("é",), ("k.d",), ("a", "b"), ("a", "n"), ("b", "a", "n"), ("x y",), ("\\",), ('"',)]


def expected_value(obj, path) -> str:
    """An independent reading of what a field holds (the rules of the module docstring)."""
    v = obj
    for seg in path:
        if not isinstance(v, dict) or seg not in v:
            return ""
        v = v[seg]
    while isinstance(v, list):
        if not v:
            return ""
        v = v[0]
    if v is None or isinstance(v, dict):
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return json.dumps(v)
    return v


def spec_of(paths) -> str:
    esc = lambda s: s.replace("\\", "\\\\").replace(".", "\\.").replace(",", "\\,")   # noqa: E731
    return "json:" + ",".join(f"f{i}={'.'.join(esc(s) for s in p)}" for i, p in enumerate(paths))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=st.dictionaries(KEYS, VALUES, max_size=6), ascii_only=st.booleans(), spaced=st.booleans(),
       seed=st.integers(0, 2**16))
def test_random_objects_parse_to_the_expected_fields(obj, ascii_only, spaced, seed):
    paths = random.Random(seed).sample(PATHS, 5)
    fmt = formats.compile_format(spec_of(paths))
    raw = json.dumps(obj, ensure_ascii=ascii_only, separators=(", ", ": ") if spaced else (",", ":")).encode()
    want = tuple(expected_value(obj, p) for p in paths)
    if any(c in v for v in want for c in "\t\r\n"):
        want = contract.TAB_OR_CR
    elif any("\ud800" <= c <= "\udfff" for v in want for c in v):
        want = contract.NO_MATCH
    assert reference(fmt, raw) == want
    assert native(fmt, raw) == want


# --- through flows and the programs, both engines ----------------------------------------------------------

def to_json_lines(sample: str, layout: str) -> tuple[bytes, bytes]:
    """The sample's records whose request is "METHOD URI PROTO" as a combined log and as ``layout``'s JSON
    (caddy with ``time_format common_log``: its ts is the CLF time), with the sample's malformed lines kept
    as they are (not JSON either)."""
    combined, out = [], []
    for raw in read(sample).split(b"\n")[:-1]:
        try:
            ip, time, req, status, size, ref, ua = formats.LEGACY.parse_line(raw)
        except contract.Malformed:
            out.append(raw)
            continue
        parts_ = req.split(" ")
        if len(parts_) != 3 or not all(parts_) or ref is None:
            continue
        method, uri, proto = parts_
        if layout == "caddy":
            obj = {"level": "info", "ts": time, "logger": "http.log.access", "msg": "handled request",
                   "request": {"remote_ip": ip, "remote_port": "5000", "proto": proto, "method": method,
                               "host": "example.com", "uri": uri, "headers": {"User-Agent": [ua], "Referer": [ref]}},
                   "bytes_read": 0, "duration": 0.001, "size": int(size) if size.isdigit() else size,
                   "status": int(status)}
        else:
            obj = {"time_local": time, "remote_addr": ip, "remote_user": "", "request": req, "status": status,
                   "body_bytes_sent": size, "request_time": "0.001", "http_referrer": ref, "http_user_agent": ua}
        combined.append(raw)
        out.append(json.dumps(obj, ensure_ascii=False).encode())
    return b"\n".join(combined) + b"\n", b"\n".join(out) + b"\n"


@pytest.mark.parametrize("layout", ["caddy", "nginx_json"])
def test_the_three_programs_on_json_equal_them_on_the_same_records_in_combined(engine, tmp_path, sample, layout):
    combined, lines = to_json_lines(sample, layout)
    (tmp_path / "c.log").write_bytes(combined)
    (tmp_path / "j.log").write_bytes(lines)
    for program, outs in (("branch", ("output1", "output2")), ("filter", ("output",)), ("join", ("output",))):
        a = {o: str(tmp_path / f"{program}-{o}-a") for o in outs}
        b = {o: str(tmp_path / f"{program}-{o}-b") for o in outs}
        got = run_program(program, str(tmp_path / "j.log"), a, engine=engine, trap=str(tmp_path / f"{program}-t"),
                          log_format=layout)
        want = run_program(program, str(tmp_path / "c.log"), b, engine=engine)
        for o in outs:
            assert parts(a[o]) == parts(b[o]) != b"", (program, o)
        assert sum(got.malformed.values()) == lines.count(b"\n") - combined.count(b"\n")
        assert want.malformed == {}
    assert parts(tmp_path / "join-t") == b"".join(ln + b"\n" for ln in lines.split(b"\n")[:-1]
                                                   if not ln.startswith(b"{"))


def test_a_flow_over_caddy_counts_and_traps_bad_lines(engine, tmp_path):
    """Derived request, path and query through a filter and a grouping; bad lines trapped byte for byte."""
    import logetl.api as L
    from logetl.job import run_flow

    bad = [b"{not json", b'{"status":200,"size":1}\t{', b'\xff{"a":1}', b'{"request":{"uri":"a\\tb"}}']
    lines = [CADDY_DOC, CADDY_LIVE, CADDY_DOC.replace(b'"uri":"/"', b'"uri":"/images/a.png?s=2"'),
             CADDY_LIVE.replace(b'"method":"GET"', b'"method":"POST"')]
    log = tmp_path / "caddy.log"
    log.write_bytes(b"\n".join([lines[0], bad[0], lines[1], bad[1], lines[2], bad[2], lines[3], bad[3]]) + b"\r\n")
    flow = L.Flow("caddy_flow", [L.read("caddy", fields=("ip", "request", "path", "query", "response", "size"))
                                 .filter(L.col("response") == "200").write("output")])
    run = run_flow(flow, str(log), {"output": str(tmp_path / "o")}, engine=engine, trap=str(tmp_path / "t"))
    assert parts(tmp_path / "o") == (b"127.0.0.1\tGET / HTTP/2.0\t/\t\t200\t10900\n"
                                     b"127.0.0.1\tGET /images/a.png?s=2 HTTP/2.0\t/images/a.png\ts=2\t200\t10900\n")
    assert parts(tmp_path / "t") == b"".join(b + b"\n" for b in bad[:-1]) + bad[-1] + b"\r\n"   # byte-exact
    assert (run.lines_read, run.malformed) == (8, {"no_match": 2, "invalid_utf8": 1, "tab_or_cr_in_field": 1})
    samples = [s[2] for s in run.malformed_samples]
    assert samples[0].startswith("not JSON at byte 1: Expecting property name enclosed in double quotes: {not json")


@pytest.mark.parametrize("parse", ["jvm", "python"])
def test_every_json_format_on_the_spark_kernel_paths_gives_the_local_engines_bytes(spark_session, tmp_path, parse):
    """All hand-worked lines and corners as one log per format, every field kept, the last first: the records,
    the trap and the counters of Spark's kernel paths are the local engine's."""
    import logetl.api as L
    from logetl.job import run_flow

    logs = {spec: [r for s, _, r, _ in HAND if s == spec] for spec in formats.JSON_NAMES}
    logs[MAP] = [r for _, r, _ in CORNERS if not r.endswith(b"\r")] + [CADDY_DOC]
    for i, (spec, raws) in enumerate(logs.items()):
        fmt = formats.compile_format(spec)
        keep = fmt.fields[-1:] + fmt.fields[:-1]
        log = tmp_path / f"{i}.log"
        log.write_bytes(b"\n".join(raws + [b"not json"]) + b"\r\n")
        flow = L.Flow(f"json_{i}", [L.read(fmt, fields=keep).write("output")])
        got = run_flow(flow, str(log), {"output": str(tmp_path / f"{i}-s")}, engine="spark",
                       trap=str(tmp_path / f"{i}-st"), engine_options={"conf": {"logetl.parse": parse}})
        want = run_flow(flow, str(log), {"output": str(tmp_path / f"{i}-l")}, engine="local",
                        trap=str(tmp_path / f"{i}-lt"))
        records = parts(tmp_path / f"{i}-l")
        assert records.count(b"\n") == sum(isinstance(reference(fmt, r), tuple) for r in raws), spec
        assert parts(tmp_path / f"{i}-s") == records, spec
        assert parts(tmp_path / f"{i}-st") == parts(tmp_path / f"{i}-lt"), spec
        reasons = Counter(reference(fmt, r) for r in raws + [b"not json"])
        reasons = {k: v for k, v in reasons.items() if isinstance(k, str)}
        assert (got.lines_read, got.malformed) == (want.lines_read, want.malformed) == (len(raws) + 1, reasons), spec


def test_spark_builtin_parse_refuses_json_in_one_line(tmp_path):
    log = tmp_path / "c.log"
    log.write_bytes(CADDY_DOC + b"\n")
    p = logetl("filter", "-q", "--hdfs", "--master", "local[1]", "--conf", "logetl.parse=builtin", "--format", "caddy",
               "--input", str(log), "--output", str(tmp_path / "o"))
    assert p.returncode == 2, p.stderr
    assert p.stderr.decode().splitlines()[-1] == (
        "Error: the caddy format (JSON lines) is read by logetl's kernel only: Spark's built-in regular expressions "
        "cannot read JSON (let the executors run the kernel: --conf logetl.parse=native)")
