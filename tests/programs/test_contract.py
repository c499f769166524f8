"""The line contract: hand-worked cases, the native kernel against the reference, and a property test."""
from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corpus_cases import CASES
from logetl import contract
from logetl.engines import kernel

PY_RE = re.compile(contract.PATTERN, re.ASCII | re.DOTALL)
CODES = {name: code for code, name in kernel.REASON_NAMES.items()}


def reference(raw: bytes):
    try:
        return contract.parse_line(raw)
    except contract.Malformed as exc:
        return exc.reason


def parse_one(parse, raw: bytes):
    """The fields or reason ``parse`` (a kernel entry point) gives for one line."""
    p = parse(raw + b"\n", True)
    assert p.n_lines == 1
    if p.malformed:
        (_, start, end, code), = p.malformed
        assert (start, end) == (0, len(raw))
        return kernel.REASON_NAMES[code]
    if p.n_dash:
        return "dash"
    assert p.n_records == 1
    fields = tuple(p.tsv[:-1].decode("utf-8").split("\t"))
    cols = tuple(c[0].as_py() for c in p.columns())
    assert cols == fields
    return fields


PARSERS = [pytest.param(kernel.parse_python, id="python")]
if kernel.NATIVE:
    PARSERS.append(pytest.param(kernel.parse, id="native"))


@pytest.mark.parametrize("name,raw,expected", CASES, ids=[c[0] for c in CASES])
def test_reference_parser_gives_the_hand_worked_result(name, raw, expected):
    assert reference(raw) == expected


@pytest.mark.parametrize("parse", PARSERS)
@pytest.mark.parametrize("name,raw,expected", CASES, ids=[c[0] for c in CASES])
def test_kernel_gives_the_hand_worked_result(parse, name, raw, expected):
    got = parse_one(parse, raw)
    if isinstance(expected, tuple) and expected[4] == "-":
        assert got == "dash"
    else:
        assert got == expected


def test_native_kernel_is_built():
    """The package's C extension is what makes the local engine fast; a build that lost it must fail."""
    assert kernel.NATIVE, "logetl._scan was not built (is a C compiler installed?)"


@pytest.mark.parametrize("parse", PARSERS)
def test_line_splitting_counts_every_line(parse):
    data = b"a\n\nb\r\nc"
    p = parse(data, True)
    assert p.n_lines == 4
    assert [(s, e) for _, s, e, _ in p.malformed] == [(0, 1), (2, 2), (3, 5), (6, 7)]
    p = parse(b"a\nb", False)  # not final: the piece after the last newline is not a line yet
    assert p.n_lines == 1


# --- property test: lines near the layout, against re.fullmatch ---------------------------------------------

ASCII_NOISE = st.sampled_from(list(' \t\r\x0b\x0c"[]-+:/0123456789aZ_.é\u00a0٣\x00'))
def chunk(alphabet=ASCII_NOISE, max_size=6):
    return st.lists(alphabet, max_size=max_size).map("".join)


@st.composite
def near_lines(draw):
    parts = [
        draw(st.sampled_from(["10.0.0.1", "", "::1", "h.example", "a b"])) + draw(chunk(max_size=2)),
        " ", draw(st.sampled_from(["-", "", "x y"])) + draw(chunk(max_size=2)),
        " ", draw(st.sampled_from(["-", "frank"])) + draw(chunk(max_size=1)),
        " [", draw(st.sampled_from(["17/May/2015:10:05:03", "", "1/2"])) + draw(chunk(max_size=2)),
        draw(st.sampled_from([" ", "\t", "\x0b", "", "  "])),
        draw(st.sampled_from(["+0000", "-0700", "+000", "+٠٠٠٠", "*0000"])),
        "] \"", draw(chunk(max_size=4)), draw(st.sampled_from(["GET /images/x", "", '"', '" 200 ', "a\"b"])),
        draw(chunk(max_size=3)), "\" ", draw(st.sampled_from(["200", "2000", "20", "٢٠٠"])),
        draw(st.sampled_from([" ", "", "  "])), draw(st.sampled_from(["-", "123", "", "1\r", "\t5"])),
        draw(chunk(max_size=8)),
    ]
    line = "".join(parts).encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(line)))
        line = line[:cut] + draw(st.sampled_from([b"", b"\xff", b"\xc3", b"\r", b"\xed\xa0\x80"])) + line[cut:]
    return line.replace(b"\n", b"")


@pytest.mark.parametrize("parse", PARSERS)
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=near_lines())
def test_kernel_agrees_with_re_fullmatch(parse, raw):
    text_raw = raw[:-1] if raw.endswith(b"\r") else raw
    try:
        text = text_raw.decode("utf-8")
    except UnicodeDecodeError:
        expected = contract.INVALID_UTF8
    else:
        m = PY_RE.fullmatch(text)
        if m is None:
            expected = contract.NO_MATCH
        elif any("\t" in g or "\r" in g for g in m.groups()):
            expected = contract.TAB_OR_CR
        else:
            expected = m.groups() if m.group(5) != "-" else "dash"
    assert parse_one(parse, raw) == expected
