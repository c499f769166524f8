"""The vendor presets (alb, elb, s3, haproxy, cloudfront): hand-worked lines from each vendor's documented
layout through the reference matcher, the pure-Python and native kernels and the generated regular
expression (Spark's built-in path), which all give the same fields; a property test of the preset tokens
against that expression; the presets through a flow and the three programs on both engines."""
from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import parts
from test_contract import parse_one
from vendor_lines import CLOUDFRONT_FIELDS, CLOUDFRONT_LINE, VENDOR_CASES
from logetl import contract, formats
from logetl.engines import kernel

CASES = [pytest.param(spec, raw, expected, id=f"{spec}-{name}")
         for spec, cases in VENDOR_CASES.items() for name, raw, expected in cases]


def _parsers():
    out = [pytest.param(False, id="python")]
    if kernel.NATIVE:
        out.append(pytest.param(True, id="native"))
    return out


def by_regex(fmt, raw: bytes):
    """What Spark's built-in path gives: the header check, then the regular expression (a field's value is
    its groups joined, as Java's replacement writes them), then the TAB/CR check."""
    if fmt.header and raw.startswith(fmt.header.encode()):
        return "header"
    raw = raw[:-1] if raw.endswith(b"\r") else raw      # one trailing CR is the line's end (a CRLF log), cut first
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return contract.INVALID_UTF8
    m = fmt.python_regex().fullmatch(text)
    if m is None and any(o.python_regex().fullmatch(text) for o in fmt.others):
        return "non_http"      # (a line of the format that is not a request: its other layouts' expression)
    if m is None:
        return contract.NO_MATCH
    vals = tuple("".join(m.group(int(g)) or "" for g in ref.split("$")[1:]) for ref in fmt.group_refs())
    if any("\t" in v or "\r" in v for v in vals):
        return contract.TAB_OR_CR
    try:   # the fields the format percent-decodes (CloudFront's): null where not UTF-8, the line malformed
        return tuple(formats.percent_decode(v.encode()).decode() if f in fmt.decode else v
                     for f, v in zip(fmt.fields, vals))
    except UnicodeDecodeError:
        return contract.INVALID_UTF8


def reference(fmt, raw: bytes):
    try:
        return fmt.parse_line(raw)
    except formats.Header:
        return "header"
    except formats.NotRequest:
        return "non_http"
    except contract.Malformed as exc:
        return exc.reason


def kernel_fields(fmt, raw: bytes, native: bool):
    """The kernel's answer for one line: the fields, a malformed reason, "header" or "non_http" (counted
    apart)."""
    parse = kernel.Parser(fmt, fmt.fields, native=native, drop_dash=False).parse
    p = parse(raw + b"\n", True)
    if p.n_header:
        assert (p.n_lines, p.n_header, p.n_other, p.n_records, p.n_dash, p.malformed) == (1, 1, 0, 0, 0, [])
        return "header"
    if p.n_other:
        assert (p.n_lines, p.n_header, p.n_other, p.n_records, p.n_dash, p.malformed) == (1, 0, 1, 0, 0, [])
        return "non_http"
    return parse_one(parse, raw)


@pytest.mark.parametrize("spec,raw,expected", CASES)
def test_each_scanner_gives_the_hand_worked_fields(spec, raw, expected):
    fmt = formats.compile_format(spec)
    got = reference(fmt, raw)
    if isinstance(expected, dict):
        assert isinstance(got, tuple), (got, fmt.why(raw))
        assert {k: dict(zip(fmt.fields, got))[k] for k in expected} == expected
    else:
        assert got == expected
    assert by_regex(fmt, raw) == got
    for native in (False, True) if kernel.NATIVE else (False,):
        assert kernel_fields(fmt, raw, native) == got, native
    if expected == contract.NO_MATCH:
        assert fmt.why(raw) is not None


def test_every_preset_speaks_the_one_vocabulary():
    have = {name: formats.compile_format(name).fields for name in formats.VENDOR}
    for name, fields in have.items():
        assert {"ip", "time", "response", "size"} <= set(fields), name
    assert {n for n, f in have.items() if "request" in f} == {"alb", "elb", "s3", "haproxy"}
    assert {n for n, f in have.items() if {"method", "path", "query"} <= set(f)} == {"cloudfront"}
    assert {n for n, f in have.items() if {"referer", "user_agent"} <= set(f)} == {"s3", "cloudfront"}
    assert "user_agent" in have["alb"] and "user_agent" in have["elb"]
    assert len(have["alb"]) == 35 and len(have["s3"]) == 27 and len(have["cloudfront"]) == 33


# --- property test: the preset tokens against the generated regular expression --------------------------------

NOISE = list(' \t\r"\\[]{}:-x0é') + [": ", " [", "\\\""]


@st.composite
def near_vendor_lines(draw, fmt):
    out = []
    for tok in fmt.tokens:
        if isinstance(tok, formats.Opt):
            if draw(st.integers(0, 9)) == 0:
                break
            continue
        if isinstance(tok, formats.Literal):
            out.append(tok.text if draw(st.integers(0, 39)) else draw(st.sampled_from(["", tok.text * 2, " "])))
            continue
        base = draw(st.sampled_from(["10.0.0.1", "-", "GET / HTTP/1.1", "", "a b", "2001:db8::1", "-1", "{x}",
                                     '"q"', '"a \\" b"', "h[1]: x", "é", "0.000"]))
        if tok.kind == formats.MAYBE and draw(st.booleans()):
            base = "{" + base + "} "
        noise = draw(st.lists(st.sampled_from(NOISE), max_size=3).map("".join)) if draw(st.integers(0, 3)) == 0 \
            else ""
        cut = draw(st.integers(0, len(base)))
        out.append(base[:cut] + noise + base[cut:])
    return "".join(out).replace("\n", "").encode("utf-8")


@pytest.mark.parametrize("spec", list(VENDOR_CASES))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_scanners_agree_with_the_generated_regex_on_near_lines(spec, data):
    fmt = formats.compile_format(spec)
    raw = data.draw(near_vendor_lines(fmt))
    want = by_regex(fmt, raw)
    assert reference(fmt, raw) == want
    if kernel.NATIVE:
        assert kernel_fields(fmt, raw, True) == want


# --- through flows and the programs, both engines ----------------------------------------------------------------

def run_flow(flow, log, engine: str, where):
    """(output tap -> bytes, the FlowRun) of ``flow`` on ``engine`` reading ``log``."""
    from logetl.engines import get_engine
    from logetl.job import bind
    from logetl.listener import FlowListener

    runner = get_engine(engine)()
    outs = {s.tap: str(where / s.tap) for s in flow.sinks}
    try:
        taps = bind(flow, str(log), outs, engine=engine, fs=runner.filesystem())
        run = runner.run(flow, taps, FlowListener())
    finally:
        runner.shutdown()
    return {tap: parts(path) for tap, path in outs.items()}, run


def test_header_lines_are_counted_apart(engine, tmp_path):
    """CloudFront's #Version and #Fields lines (also in the middle of a file, as concatenated logs have them)
    are header lines, counted apart: neither malformed nor dropped; the records are the data lines' fields."""
    import logetl.api as L

    log = tmp_path / "cf.log"
    log.write_bytes(b"#Version: 1.0\n" + CLOUDFRONT_FIELDS + b"\n" + CLOUDFRONT_LINE + b"\n#Version: 1.0\n"
                    + CLOUDFRONT_LINE.replace(b"192.0.2.100", b"192.0.2.7") + b"\nnot a record\n")
    sink = L.read("cloudfront", fields=("ip", "date", "path", "size")).write("out")
    got, run = run_flow(L.Flow("cf", [sink]), log, engine, tmp_path)
    assert got["out"] == b"192.0.2.100\t2019-12-04\t/index.html\t392\n192.0.2.7\t2019-12-04\t/index.html\t392\n"
    assert (run.lines_read, run.malformed, run.dropped_size_dash, run.header_lines) == (6, {"no_match": 1}, 0, 3)


@pytest.mark.parametrize("parse", ["jvm", "python", "builtin"])
def test_every_preset_on_every_spark_parse_path_gives_the_local_engines_bytes(spark_session, tmp_path, parse):
    """Each preset's hand-worked lines as one log (the last line ending in CRLF) through a flow that keeps
    every field, the last first: on each Spark parse path (the kernel in the JVM, in Python workers, and
    Spark's regular expressions) the records, the trap and the counters are the local engine's."""
    import logetl.api as L
    from logetl.job import run_flow

    for spec, cases in VENDOR_CASES.items():
        fmt = formats.compile_format(spec)
        keep = fmt.fields[-1:] + fmt.fields[:-1]
        log = tmp_path / f"{spec}.log"
        log.write_bytes(b"\n".join(raw for _, raw, _ in cases) + b"\r\n")
        flow = L.Flow(f"vendor_{spec}", [L.read(fmt, fields=keep).write("output")])
        got = run_flow(flow, str(log), {"output": str(tmp_path / f"{spec}-s")}, engine="spark",
                       trap=str(tmp_path / f"{spec}-st"), engine_options={"conf": {"logetl.parse": parse}})
        want = run_flow(flow, str(log), {"output": str(tmp_path / f"{spec}-l")}, engine="local",
                        trap=str(tmp_path / f"{spec}-lt"))
        records = parts(tmp_path / f"{spec}-l")
        assert records.count(b"\n") == sum(isinstance(e, dict) for _, _, e in cases), spec
        assert parts(tmp_path / f"{spec}-s") == records, spec
        assert parts(tmp_path / f"{spec}-st") == parts(tmp_path / f"{spec}-lt"), spec
        reasons = Counter(e for _, _, e in cases if isinstance(e, str) and e not in ("header", "non_http"))
        assert (got.lines_read, got.malformed, got.dropped_size_dash, got.header_lines, got.non_http_lines) == \
            (want.lines_read, want.malformed, want.dropped_size_dash, want.header_lines, want.non_http_lines) == \
            (len(cases), dict(reasons), 0, sum(e == "header" for _, _, e in cases),
             sum(e == "non_http" for _, _, e in cases)), spec
