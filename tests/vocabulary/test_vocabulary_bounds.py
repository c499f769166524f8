"""The bounds both engines share: what one engine would refuse at run time (a regex its library will not
compile, a count Spark's ``limit`` cannot take, an integer literal beyond 64 bits) is refused when the flow
is defined, in one line naming the value; integer arithmetic beyond 64 bits is null on every engine.

The flows read ``tests/data/numbers.log`` (fifteen records; ``to_int(size)`` is 7, 9007199254740993 and 0
for three of them, null for the others)."""
from __future__ import annotations

import os

import pytest
from conftest import HERE, logetl, parts

import logetl.api as L
from logetl import expressions as E
from logetl.assembly import MAX_COUNT, AssemblyError
from logetl.engines import get_engine
from logetl.job import bind
from logetl.listener import FlowListener

LOG = os.path.join(HERE, "data", "numbers.log")
c = L.col
MAX, MIN = (1 << 63) - 1, -(1 << 63)

#: name -> (the expression over n = to_int(size), the same in Python's integers)
OVERFLOWS = {
    "max_plus_1": (lambda n: L.lit(MAX) + 1, lambda n: MAX + 1),
    "max_plus_n": (lambda n: L.lit(MAX) + n, lambda n: None if n is None else MAX + n),
    "min_minus_1": (lambda n: L.lit(MIN) - 1, lambda n: MIN - 1),
    "min_minus_n": (lambda n: L.lit(MIN) - n, lambda n: None if n is None else MIN - n),
    "n_times_2p62": (lambda n: n * (1 << 62), lambda n: None if n is None else n * (1 << 62)),
    "edge_product": (lambda n: L.lit(1 << 62) * -2, lambda n: (1 << 62) * -2),      # MIN itself: fits
    "min_div_m1": (lambda n: L.lit(MIN) // -1, lambda n: MIN // -1),
    "min_mod_m1": (lambda n: L.lit(MIN) % -1, lambda n: MIN % -1),
    "min_div_2": (lambda n: L.lit(MIN) // 2, lambda n: MIN // 2),
    "max_minus_n": (lambda n: L.lit(MAX) - n, lambda n: None if n is None else MAX - n),
}


def _sizes() -> list[int | None]:
    """to_int(size) of each record, worked out by hand from numbers.log's size field."""
    sizes = [(line.split('"')[2].split() + [""])[1] for line in open(LOG, encoding="utf-8")]
    return [int(s) if s.isascii() and s.lstrip("-").isdigit() and len(s.lstrip("-")) <= 18 else None
            for s in sizes]


def _in_64_bits(v):
    return v if v is None or MIN <= v <= MAX else None


def test_integer_arithmetic_beyond_64_bits_is_null_on_every_engine(engine, tmp_path):
    n = c("size").to_int()
    logs = L.read()
    flow = L.Flow("bounds", [
        logs.derive(n=n, **{name: make(n) for name, (make, _) in OVERFLOWS.items()})
            .select("ip", "n", *OVERFLOWS).write("out"),
        logs.limit(MAX_COUNT).select("ip").write("all")])
    runner = get_engine(engine)()
    outs = {tap: str(tmp_path / tap) for tap in ("out", "all")}
    try:
        runner.run(flow, bind(flow, LOG, outs, engine=engine, fs=runner.filesystem()), FlowListener())
    finally:
        runner.shutdown()
    ips = [line.split()[0] for line in open(LOG, encoding="utf-8")]
    sizes = _sizes()
    assert [s for s in sizes if s is not None] == [7, 9007199254740993, 0]
    expected = "".join("\t".join([ip, "" if size is None else str(size)] + [
        "" if (v := _in_64_bits(python(size))) is None else str(v) for _, python in OVERFLOWS.values()]) + "\n"
        for ip, size in zip(ips, sizes))
    assert parts(tmp_path / "out").decode() == expected
    assert "\t9223372036854775807\t" in expected and "\t-9223372036854775808\t" in expected
    assert parts(tmp_path / "all").decode() == "".join(ip + "\n" for ip in ips)


REFUSED = [
    (lambda: c("path").matches("((a{1000}){1000}){1000}"),
     "regex '((a{1000}){1000}){1000}': compiles to more than the 10,485,760 bytes the local engine's regex "
     "library takes (repeat fewer times, or nest fewer counted repetitions)"),
    (lambda: c("path").extract("^/(a{1000}){1000}", 1),
     "regex '^/(a{1000}){1000}': compiles to more than the 10,485,760 bytes the local engine's regex "
     "library takes (repeat fewer times, or nest fewer counted repetitions)"),
    (lambda: c("path").matches("(" * 101 + "a" + ")" * 101),
     f"regex {'(' * 101 + 'a' + ')' * 101!r}: groups nested more than 100 deep are not portable at offset 100 "
     "(see the portable regex subset in the flows guide)"),
    (lambda: L.read().limit(10**30), "limit: n is a count from 0 to 2,147,483,647, not "
                                     "1000000000000000000000000000000"),
    (lambda: L.read().limit(1 << 31), "limit: n is a count from 0 to 2,147,483,647, not 2147483648"),
    (lambda: L.read().top(1 << 31, by="size"), "top: n is a count from 1 to 2,147,483,647, not 2147483648"),
    (lambda: L.lit(MAX + 1), "integer literal 9223372036854775808 does not fit in 64 bits"),
]


@pytest.mark.parametrize("make, message", REFUSED, ids=[m[:40] for _, m in REFUSED])
def test_what_an_engine_would_refuse_is_refused_when_the_flow_is_defined(make, message):
    with pytest.raises((E.ExpressionError, AssemblyError)) as caught:
        make()
    assert str(caught.value) == message


def test_repetition_that_compiles_is_accepted():
    """Counted repetition within the library's size: accepted (and a nesting of 100 groups)."""
    c("path").matches("(a{100}){100}")
    c("path").matches("(" * 100 + "a" + ")" * 100)


def test_a_refused_bound_is_one_line_and_exit_2_on_the_command_line(tmp_path):
    (tmp_path / "flow.py").write_text(
        "import logetl.api as L\n\n"
        "def flow(fmt):\n"
        "    return L.Flow('f', [L.read(fmt).limit(10**30).write('out')])\n")
    for extra in ([], ["--hdfs"]):     # refused before any engine starts
        p = logetl("run", str(tmp_path / "flow.py"), "--input", LOG, "--output", f"out={tmp_path / 'o'}", *extra)
        assert (p.returncode, p.stdout) == (2, b"")
        assert p.stderr.decode() == (f"Error: {tmp_path / 'flow.py'}:4: limit: n is a count from 0 to 2,147,483,647, not "
                                     "1000000000000000000000000000000\n")
    assert not (tmp_path / "o").exists()
