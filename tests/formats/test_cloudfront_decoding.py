"""The cloudfront preset percent-decodes the fields CloudFront writes URL-encoded (``formats.VENDOR_DECODE``:
path, referer, user_agent, query, cookie, host_header, forwarded_for, content_type) in the kernel: hand-worked
lines (AWS's documented encodings, its double-encoded example, a real Slackbot line, invalid escapes, control
characters, bytes that are not UTF-8) on every scanner, against an independent decoder, and through a flow on
both engines, every Spark parse path, byte for byte."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import read_preset
from test_contract import parse_one
from test_vendor_formats import by_regex, kernel_fields, reference
from vendor_lines import CLOUDFRONT_FIELDS, CLOUDFRONT_LINE
from logetl import contract, formats
from logetl.engines import kernel

FMT = formats.compile_format("cloudfront")


def line(**values: bytes) -> bytes:
    """CLOUDFRONT_LINE (33 fields) with the fields named given these raw values."""
    fields = CLOUDFRONT_LINE.split(b"\t")
    for name, raw in values.items():
        fields[FMT.fields.index(name)] = raw
    return b"\t".join(fields)


def independent(raw: bytes) -> bytes:
    """Percent-decoding written out byte by byte, apart from logetl's: an escape of a byte 20-7E or 80-FF is
    that byte; anything else (a '%' without two hex digits, an escape of a control character) stays."""
    out, i = bytearray(), 0
    while i < len(raw):
        pair = raw[i + 1:i + 3]
        if raw[i] == 0x25 and len(pair) == 2 and all(c in b"0123456789abcdefABCDEF" for c in pair) \
                and (0x20 <= int(pair, 16) < 0x7F or int(pair, 16) >= 0x80):
            out.append(int(pair, 16))
            i += 3
        else:
            out.append(raw[i])
            i += 1
    return bytes(out)


# (name, raw line, {field: value} or the malformed reason), worked by hand
CASES = [
    # a real CloudFront user agent (Slackbot's, in a CloudFront log published by its owner): %20 is a space,
    # '+' stays '+' (CloudFront does not write a space as '+')
    ("slackbot", line(user_agent=b"Slackbot%201.0%20(+https://api.slack.com/robots)"),
     {"user_agent": "Slackbot 1.0 (+https://api.slack.com/robots)", "size": "392"}),
    # AWS's table: < > " # % { } | \ ^ ~ [ ] ` ' and the space, each as its escape
    ("aws-table", line(query=b"a=%3C%3E%22%23%25%7B%7D%7C%5C%5E%7E%5B%5D%60%27%20z"),
     {"query": "a=<>\"#%{}|\\^~[]`' z"}),
    # AWS's example of the 2014 layout writes the user agent's spaces as %2520 (the '%' of %20 encoded):
    # decoded once, as every value is, it is %20 again, the text the client's own encoding would give
    ("aws-double-encoded", line(user_agent=b"Mozilla/5.0%2520(iPhone;%2520CPU%2520iPhone%2520OS%252010_2_1)"),
     {"user_agent": "Mozilla/5.0%20(iPhone;%20CPU%20iPhone%20OS%2010_2_1)"}),
    # a path whose escape the client wrote (%3D) is logged with its '%' encoded: the path as requested
    ("path-escape", line(path=b"/a%253Db/caf%C3%A9"), {"path": "/a%3Db/caf\u00e9"}),
    # bytes above 127: UTF-8 escapes (either case of hex), beside the line's own UTF-8 text
    ("non-ascii", line(referer=b"https://example.com/%c3%a9t%C3%A9", cookie=b"n=\xc3\xa9%E2%82%AC%F0%9F%98%80"),
     {"referer": "https://example.com/\u00e9t\u00e9", "cookie": "n=\u00e9\u20ac\U0001F600"}),
    # escapes that are not: kept as written
    ("invalid-escapes", line(query=b"a=%4&b=%ZZ&c=%&d=%%41&e=%G1"), {"query": "a=%4&b=%ZZ&c=%&d=%A&e=%G1"}),
    # escapes of control characters (TAB, LF, CR, NUL, DEL): kept, a field never holds them
    ("control-escapes", line(user_agent=b"a%09b%0Ac%0dd%00e%7Ff%1F"), {"user_agent": "a%09b%0Ac%0dd%00e%7Ff%1F"}),
    ("plus-stays", line(query=b"q=a+b%2Bc"), {"query": "q=a+b+c"}),
    # the other text fields CloudFront may encode
    ("content-type-host-forwarded", line(content_type=b"text/html;%20charset=UTF-8", host_header=b"ex%41mple.com",
                                         forwarded_for=b"192.0.2.1,%20198.51.100.2"),
     {"content_type": "text/html; charset=UTF-8", "host_header": "exAmple.com",
      "forwarded_for": "192.0.2.1, 198.51.100.2"}),
    # fields CloudFront never needs to encode are not decoded
    ("not-decoded", line(edge_location=b"LAX%31", ssl_cipher=b"A%20B"), {"edge_location": "LAX%31", "ssl_cipher": "A%20B"}),
    # decoded bytes that are not UTF-8: the line is malformed as a line that is not UTF-8 is
    ("latin-1", line(user_agent=b"caf%E9"), contract.INVALID_UTF8),
    ("lone-continuation", line(referer=b"%A9"), contract.INVALID_UTF8),
    ("cut-sequence", line(cookie=b"%E2%82"), contract.INVALID_UTF8),
    ("lead-then-raw-ascii", line(path=b"/%C3("), contract.INVALID_UTF8),
    ("overlong", line(query=b"%C0%AF"), contract.INVALID_UTF8),
    ("overlong-3", line(query=b"%E0%80%AF"), contract.INVALID_UTF8),
    ("surrogate", line(query=b"%ED%A0%80"), contract.INVALID_UTF8),
    ("above-unicode", line(query=b"%F4%90%80%80"), contract.INVALID_UTF8),
    ("ff", line(content_type=b"%FF"), contract.INVALID_UTF8),
    # an escape in a field that is not decoded never makes a line malformed
    ("not-decoded-ff", line(ssl_protocol=b"%FF"), {"ssl_protocol": "%FF"}),
    # the reasons checked before: a TAB or CR in a field, no match
    ("tab-before-decoding", line(user_agent=b"%FF\rx"), contract.TAB_OR_CR),
    ("header", CLOUDFRONT_FIELDS, "header"),
]


@pytest.mark.parametrize("name,raw,expected", CASES, ids=[c[0] for c in CASES])
def test_each_scanner_decodes_the_encoded_fields(name, raw, expected):
    got = reference(FMT, raw)
    if isinstance(expected, dict):
        assert isinstance(got, tuple), (got, FMT.why(raw))
        assert {k: dict(zip(FMT.fields, got))[k] for k in expected} == expected
    else:
        assert got == expected
    assert by_regex(FMT, raw) == got
    for native in (False, True) if kernel.NATIVE else (False,):
        assert kernel_fields(FMT, raw, native) == got


def test_a_line_is_malformed_whatever_fields_the_parse_keeps():
    """The decoded fields' UTF-8 decides whether the line is a record, not which fields a step reads."""
    raw = line(user_agent=b"caf%E9")
    for native in (False, True) if kernel.NATIVE else (False,):
        parser = kernel.Parser(FMT, ("ip", "size"), native=native, drop_dash=False)
        assert parse_one(parser.parse, raw) == contract.INVALID_UTF8
        assert parse_one(parser.parse, line(user_agent=b"caf%C3%A9")) == ("192.0.2.100", "392")


PIECES = [b"%", b"%2", b"%20", b"%25", b"%2525", b"%C3", b"%A9", b"%c3%a9", b"%E2%82%AC", b"%F0%9F%98%80", b"%FF",
          b"%09", b"%7f", b"%0D", b"%ZZ", b"a", b"+", b"/", b"=", b"\xc3\xa9", b"\xe2\x82\xac", b" "]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PIECES), max_size=12), st.sampled_from(formats.VENDOR_DECODE["cloudfront"]))
def test_the_kernel_decodes_as_an_independent_decoder(pieces, field):
    raw = line(**{field: b"".join(pieces)})
    want_bytes = independent(b"".join(pieces))
    try:
        want = want_bytes.decode("utf-8")
    except UnicodeDecodeError:
        want = contract.INVALID_UTF8
    keep = ("ip", field, "size")
    for native in (False, True) if kernel.NATIVE else (False,):
        got = parse_one(kernel.Parser(FMT, keep, native=native, drop_dash=False).parse, raw)
        assert got == (want if want == contract.INVALID_UTF8 else ("192.0.2.100", want, "392"))


# --- through a flow, on both engines --------------------------------------------------------------------------

READ = ("path", "query", "referer", "user_agent", "cookie", "content_type", "response")
LOG_LINES = [b"#Version: 1.0", CLOUDFRONT_FIELDS] + [raw for _, raw, _ in CASES if raw != CLOUDFRONT_FIELDS]


def _want() -> tuple[bytes, int]:
    rows, bad = [], 0
    for _, raw, expected in CASES:
        if isinstance(expected, dict):
            got = dict(zip(FMT.fields, reference(FMT, raw)))
            rows.append("\t".join(got[f] for f in READ) + "\n")
        elif expected != "header":
            bad += 1
    return "".join(rows).encode("utf-8"), bad


def test_the_expected_records_by_hand():
    want, bad = _want()
    assert want.splitlines()[0] == b"/index.html\t-\t-\tSlackbot 1.0 (+https://api.slack.com/robots)\t-\ttext/html\t200"
    assert b"a=<>\"#%{}|\\^~[]`' z" in want and "caf\u00e9".encode() in want
    assert bad == 10


def _run(tmp_path, engine: str, **options):
    return read_preset(tmp_path, engine, "cloudfront", READ, LOG_LINES, "E2ABCDEFGH.2019-12-04-21.log", **options)


def test_a_flow_decodes_on_the_local_engine(tmp_path):
    got, trap, run = _run(tmp_path, "local")
    want, bad = _want()
    assert got == want
    assert run.malformed == {contract.INVALID_UTF8: bad - 1, contract.TAB_OR_CR: 1}
    assert run.header_lines == 2
    assert trap == b"".join(raw + b"\n" for _, raw, e in CASES if e in (contract.INVALID_UTF8, contract.TAB_OR_CR))


@pytest.mark.parametrize("parse", ["jvm", "python", "builtin"])
def test_every_spark_parse_path_decodes_as_the_local_engine(spark_session, tmp_path, parse):
    (tmp_path / "l").mkdir()
    local = _run(tmp_path / "l", "local")
    got, trap, run = _run(tmp_path, "spark", engine_options={"conf": {"logetl.parse": parse}})
    assert (got, trap) == local[:2]
    assert (run.lines_read, run.malformed, run.header_lines) == (local[2].lines_read, local[2].malformed,
                                                                 local[2].header_lines)
