"""Apache ``%{format}t`` layouts with space-padded conversions (``%e`` day of month, ``%k`` hour 0-23, ``%l``
hour 1-12, glibc's ``%_X``), which write a SPACE before a one-digit value: on every scanner (the reference
matcher, the generated regular expression Spark's built-in path runs, the kernel in Python and native), the
layouts that cannot be read refused with one line, a property test against the generated regular expression,
and a flow on both engines (every Spark parse path)."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import logetl, parts
from test_vendor_formats import by_regex, kernel_fields, reference
from logetl import formats
from logetl.engines import kernel

BRACKETED = '%h %l %u [%{%b %e %H:%M:%S %Y}t] "%r" %>s %b'
BARE = '%h %l %u %{%b %e %H:%M:%S %Y}t "%r" %>s %b'
DAY_FIRST = '%h %{%e/%b/%Y}t "%r" %>s %b'
HOURS = '%h %{%Y-%m-%d %k:%M %l %p}t %>s %b'
REQUEST = b'"GET /a HTTP/1.1" 200 5'
CASES = [
    # bracketed: the time ends at ']', its spaces (one or two) are its own
    (BRACKETED, b'192.0.2.1 - - [Nov  5 10:00:00 2026] ' + REQUEST,
     ("192.0.2.1", "-", "-", "Nov  5 10:00:00 2026", "GET /a HTTP/1.1", "200", "5")),
    (BRACKETED, b'192.0.2.1 - - [Nov 15 10:00:00 2026] ' + REQUEST,
     ("192.0.2.1", "-", "-", "Nov 15 10:00:00 2026", "GET /a HTTP/1.1", "200", "5")),
    # bare, followed by a space: three runs of spaces inside, the padding part of a run
    (BARE, b'192.0.2.1 - - Nov  5 10:00:00 2026 ' + REQUEST,
     ("192.0.2.1", "-", "-", "Nov  5 10:00:00 2026", "GET /a HTTP/1.1", "200", "5")),
    (BARE, b'192.0.2.1 - - Nov 15 10:00:00 2026 ' + REQUEST,
     ("192.0.2.1", "-", "-", "Nov 15 10:00:00 2026", "GET /a HTTP/1.1", "200", "5")),
    (BARE, b'192.0.2.1 - - Nov  5 10:00:00 ' + REQUEST, "no_match"),        # the year is missing
    # the padding first: the time starts with it (the value as written, its leading space kept)
    (DAY_FIRST, b'192.0.2.1  5/Nov/2026 ' + REQUEST, ("192.0.2.1", " 5/Nov/2026", "GET /a HTTP/1.1", "200", "5")),
    (DAY_FIRST, b'192.0.2.1 15/Nov/2026 ' + REQUEST, ("192.0.2.1", "15/Nov/2026", "GET /a HTTP/1.1", "200", "5")),
    (DAY_FIRST, b'192.0.2.1  5/Nov/2026' + REQUEST, "no_match"),
    # %k and %l, each after a space
    (HOURS, b'10.0.0.1 2026-11-05  9:05  9 AM 200 5', ("10.0.0.1", "2026-11-05  9:05  9 AM", "200", "5")),
    (HOURS, b'10.0.0.1 2026-11-05 19:05  7 PM 200 5', ("10.0.0.1", "2026-11-05 19:05  7 PM", "200", "5")),
    (HOURS, b'10.0.0.1 2026-11-05 19:05 11 PM 200 5', ("10.0.0.1", "2026-11-05 19:05 11 PM", "200", "5")),
    (HOURS, b'10.0.0.1 2026-11-05 19:05 11 200 5', "no_match"),
    # %c is the C locale's "%a %b %e %H:%M:%S %Y"
    ('%h %{%c}t %>s', b'10.0.0.1 Thu Nov  5 10:00:00 2026 200', ("10.0.0.1", "Thu Nov  5 10:00:00 2026", "200")),
    # glibc's flags: '_' pads with a space, '-' not at all, '0' with a zero
    ('%h %{%_d/%m}t %>s', b'10.0.0.1  5/11 200', ("10.0.0.1", " 5/11", "200")),
    ('%h %{%-e/%m}t %>s', b'10.0.0.1 5/11 200', ("10.0.0.1", "5/11", "200")),
    ('%h %{%0e %m}t %>s', b'10.0.0.1 05 11 200', ("10.0.0.1", "05 11", "200")),
    # the literal after the time is not a space: the padding is inside whatever the field ends at
    ('%h %{%e/%b}t|%>s', b'10.0.0.1  5/Nov|200', ("10.0.0.1", " 5/Nov", "200")),
    ('%h %{%b %e}t|%>s', b'10.0.0.1 Nov  5|200', ("10.0.0.1", "Nov  5", "200")),
]


@pytest.mark.parametrize("spec,raw,expected", CASES)
def test_padded_times_on_every_scanner(spec, raw, expected):
    fmt = formats.compile_format(spec)
    assert reference(fmt, raw) == expected
    assert by_regex(fmt, raw) == expected
    for native in (False, True) if kernel.NATIVE else (False,):
        assert kernel_fields(fmt, raw, native) == expected
    if expected == "no_match":
        assert fmt.why(raw) is not None


def test_the_time_field_is_the_runs_token_only_where_a_space_follows_it():
    kinds = {spec: next(t for t in formats.compile_format(spec).tokens if getattr(t, "name", "") == "time")
             for spec in (BRACKETED, BARE, DAY_FIRST, '%h %{%b %e}t|%>s', '%h %{%d/%b/%Y %T}t %>s', '%h %{%e}t')}
    assert [(t.kind, t.count, t.padded) for t in kinds.values()] == [
        ("bracketed", 0, False), ("nth", 3, True), ("nth", 0, True), ("token", 0, False), ("nth", 1, False),
        ("rest", 0, False)]
    assert [t for t in formats.compile_format(BARE).native_program() if t[0] == 5] == [(5, b"\0   ", ord(" "))]


REFUSED = [
    ('%h %{%b/%e}t %>s', "Error: time layout %{%b/%e}t at position 4 of the format: %e writes a one-digit value "
                          "after a space, and that space cannot be told from the one after the time; write a space "
                          "before %e, or its zero-padded form; or bracket or quote the time"),
    ('%h %{%H:%_M}t %>s', "Error: time layout %{%H:%_M}t at position 4 of the format: %_M writes a one-digit value "
                           "after a space, and that space cannot be told from the one after the time; write a "
                           "space before %_M, or its zero-padded form; or bracket or quote the time"),
    ('%h %{%k:%M|%l}t %>s', "Error: time layout %{%k:%M|%l}t at position 4 of the format: %l writes a one-digit "
                            "value after a space, and that space cannot be told from the one after the time; write "
                            "a space before %l, or its zero-padded form; or bracket or quote the time"),
    ('%h %{%e }t %>s', "Error: time layout %{%e }t at position 4 of the format: it pads a value with a space and "
                       "ends with a space, so where it ends cannot be told; or bracket or quote the time"),
]


@pytest.mark.parametrize("spec,line", REFUSED)
def test_a_layout_that_cannot_be_read_is_refused_with_one_line(spec, line, tmp_path):
    with pytest.raises(formats.FormatError) as err:
        formats.compile_format(spec)
    assert "Error: " + str(err.value) == line
    log = tmp_path / "a.log"
    log.write_bytes(b"10.0.0.1 5 200\n")
    p = logetl("filter", "--input", str(log), "--output", str(tmp_path / "o"), "--format", spec)
    assert (p.returncode, p.stderr.decode()) == (2, line + "\n")


# --- property test: the padded token against the generated regular expression -------------------------------

LAYOUTS = ['%h %{%b %e %H:%M:%S %Y}t "%r" %>s %b', '%h %{%e/%b/%Y}t %>s %b', '%{%e %k}t %h %>s',
           HOURS, '%h %{%c}t %>s']


@st.composite
def padded_lines(draw, fmt):
    """Lines near the format's: each literal as written (now and then doubled, dropped or a space), each field
    a value with one or two digits after 0-2 spaces, or a word, with noise (spaces, quotes) cut in."""
    out = []
    for tok in fmt.tokens:
        if isinstance(tok, formats.Literal):
            out.append(tok.text if draw(st.integers(0, 19)) else draw(st.sampled_from(["", tok.text * 2, " "])))
            continue
        parts_ = draw(st.lists(st.tuples(st.sampled_from(["", " ", "  "]), st.integers(0, 31),
                                         st.sampled_from([" ", "/", ":", "", "Nov "])), min_size=1, max_size=6))
        value = "".join(f"{pad}{n}{sep}" for pad, n, sep in parts_)
        if draw(st.integers(0, 3)) == 0:
            cut = draw(st.integers(0, len(value)))
            value = value[:cut] + draw(st.sampled_from([" ", '"', "  ", "x", "\t"])) + value[cut:]
        out.append(value)
    return "".join(out).encode("ascii")


@pytest.mark.parametrize("spec", LAYOUTS)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_scanners_agree_with_the_generated_regex_on_padded_times(spec, data):
    fmt = formats.compile_format(spec)
    raw = data.draw(padded_lines(fmt))
    want = by_regex(fmt, raw)
    assert reference(fmt, raw) == want
    assert kernel_fields(fmt, raw, False) == want
    if kernel.NATIVE:
        assert kernel_fields(fmt, raw, True) == want


# --- both engines ------------------------------------------------------------------------------------------

LOG = (b'192.0.2.1 - - Nov  5 10:00:00 2026 "GET /a HTTP/1.1" 200 5\n'
       b'192.0.2.2 - - Nov 15 09:00:00 2026 "GET /b HTTP/1.1" 404 -\n'
       b'192.0.2.3 - - Nov  5 10:00:00 "GET /c HTTP/1.1" 200 7\n'
       b'192.0.2.4 - - Nov  6 08:00:00 2026 "GET /d HTTP/1.1" 500 12\r\n')
WANT = (b"192.0.2.1\tNov  5 10:00:00 2026\tGET /a HTTP/1.1\t200\t5\n"
        b"192.0.2.2\tNov 15 09:00:00 2026\tGET /b HTTP/1.1\t404\t-\n"
        b"192.0.2.4\tNov  6 08:00:00 2026\tGET /d HTTP/1.1\t500\t12\n")


def _flow(spec: str = BARE):
    import logetl.api as L

    return L.Flow("padded", [L.read(spec, fields=("ip", "time", "request", "response", "size")).write("output")])


def test_a_flow_reads_padded_times_on_the_local_engine(tmp_path):
    from logetl.job import run_flow

    log = tmp_path / "a.log"
    log.write_bytes(LOG)
    run = run_flow(_flow(), str(log), {"output": str(tmp_path / "o")}, engine="local", trap=str(tmp_path / "t"))
    assert parts(tmp_path / "o") == WANT
    assert parts(tmp_path / "t") == b'192.0.2.3 - - Nov  5 10:00:00 "GET /c HTTP/1.1" 200 7\n'
    assert (run.lines_read, run.malformed) == (4, {"no_match": 1})


@pytest.mark.parametrize("parse", ["jvm", "python", "builtin"])
def test_every_spark_parse_path_reads_padded_times_as_the_local_engine(spark_session, tmp_path, parse):
    from logetl.job import run_flow

    log = tmp_path / "a.log"
    log.write_bytes(LOG)
    run = run_flow(_flow(), str(log), {"output": str(tmp_path / "o")}, engine="spark", trap=str(tmp_path / "t"),
                   engine_options={"conf": {"logetl.parse": parse}})
    assert parts(tmp_path / "o") == WANT
    assert parts(tmp_path / "t") == b'192.0.2.3 - - Nov  5 10:00:00 "GET /c HTTP/1.1" 200 7\n'
    assert (run.lines_read, run.malformed) == (4, {"no_match": 1})
