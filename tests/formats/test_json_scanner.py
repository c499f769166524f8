"""The native JSON scanner's fast paths (see docs/design/json-scanner.md) against the reference reader, many
lines in one chunk as a log is read: strings ending on either side of each 64-byte word of a line's quote
bitmap and far past it, lines whose length is near a multiple of 64, lines longer than the bitmap holds,
lines that leave the bitmap for the byte-by-byte scan (a backslash, a control byte, a TAB or CR between
tokens), and keys remembered by their place in an object (keys reordered from line to line, a key alike in
length and ends to a wanted one, keys longer than the remembered length, the same key names in two objects).
Every chunk's records and malformed lines are the reference's, byte for byte, and its records the ones
worked out here by hand."""
from __future__ import annotations

import json
import random

import pytest

from logetl import contract, formats
from logetl.engines import kernel

pytestmark = pytest.mark.skipif(not kernel.NATIVE, reason="the native kernel is not built")


def both(fmt, lines: list[bytes]):
    """The chunk of ``lines`` parsed by the native kernel and by the reference reader: (TSV, malformed)."""
    data = b"".join(ln + b"\n" for ln in lines)
    out = []
    for native in (True, False):
        p = kernel.Parser(fmt, fmt.fields, native=native, drop_dash=False).parse(data, True, kernel.NONE)
        out.append((bytes(p.tsv), [(i, s, e, kernel.REASON_NAMES[c]) for i, s, e, c in p.malformed]))
    assert out[0] == out[1]
    return out[0]


def records(tsv: bytes) -> list[list[str]]:
    return [r.split("\t") for r in tsv.decode("utf-8").split("\n")[:-1]]


def test_strings_end_on_either_side_of_every_word_of_the_bitmap():
    fmt = formats.compile_format("json:a=a,b=o.b,c=c")
    lines, want = [], []
    for pad in range(0, 70):
        for n in (0, 1, 15, 16, 55, 56, 57, 63, 64, 65, 120, 127, 128, 129, 200):
            a, b, c = "x" * pad, "é" * (n // 3) + "y" * (n - n // 3 * 2), str(n)
            lines.append(json.dumps({"a": a, "o": {"skip": "z" * n, "b": b}, "c": n}, ensure_ascii=False,
                                    separators=(",", ":")).encode())
            want.append([a, b, c])
    tsv, bad = both(fmt, lines)
    assert bad == []
    assert records(tsv) == want


def test_lines_near_a_multiple_of_64_bytes_and_past_the_bitmap():
    fmt = formats.compile_format("json:a=a,z=z")
    lines, want = [], []
    for size in [*range(60, 200), *range(16370, 16400)]:
        head = b'{"a":"' + b"q" * 3 + b'","z":"'
        fill = size - len(head) - 2
        lines.append(head + b"w" * fill + b'"}')
        assert len(lines[-1]) == size
        want.append(["qqq", "w" * fill])
    # an unterminated string at the end of a line of each length
    lines += [b'{"a":"' + b"r" * k for k in range(0, 130)]
    tsv, bad = both(fmt, lines)
    assert records(tsv) == want
    assert [r for *_, r in bad] == [contract.NO_MATCH] * 130
    big = b'{"a":"' + b"b" * 20000 + b'","z":1}'
    assert records(both(fmt, [big, b'{"z":"\\u00e9","a":2}'])[0]) == [["b" * 20000, "1"], ["2", "é"]]


@pytest.mark.parametrize("line,want", [
    (b'{"a":"x\\"y","z":"w"}', ["x\"y", "w"]),                  # a backslash: each string read byte by byte
    (b'{"u":"\\\\","a":"p","z":"q"}', ["p", "q"]),              # ... in a value no field wants
    (b'{"a":\t"p",\r"z":"q"}', ["p", "q"]),                     # a TAB and a CR between tokens
    (b'{"a" : "p" , "z" : 1 }', ["p", "1"]),                    # spaces between tokens
    (b' {"a":"p","z":[1,{"k":"v"},"\\u0041"]} ', ["p", "1"]),
    (b'{"a":"p\x01","z":"q"}', contract.NO_MATCH),               # a control byte in a string
    (b'{"a":"p","z":"q"\x01}', contract.NO_MATCH),
    (b'{"a":"p","z":"q"', contract.NO_MATCH),
    (b'{"a":"p","z":"q"}}', contract.NO_MATCH),
    (b'{"a":"p","z":"q",}', contract.NO_MATCH),
    (b'{"a":"p" "z":"q"}', contract.NO_MATCH),
    (b'{"a":"p","z":01}', contract.NO_MATCH),
    (b'{"a":"p","z":-}', contract.NO_MATCH),
    (b'{"a":"p","z":1.}', contract.NO_MATCH),
    (b'{"a":"p","z":tru}', contract.NO_MATCH),
    (b'{"a":"p","z":"\\u00e9\\n"}', contract.TAB_OR_CR),
])
def test_lines_that_leave_the_bitmap_read_as_the_reference(line, want):
    fmt = formats.compile_format("json:a=a,z=z")
    tsv, bad = both(fmt, [b'{"a":"0","z":"0"}', line, b'{"a":"1","z":"1"}'])
    if isinstance(want, str):
        assert [(i, r) for i, _, _, r in bad] == [(1, want)]
        assert records(tsv) == [["0", "0"], ["1", "1"]]
    else:
        assert bad == []
        assert records(tsv) == [["0", "0"], want, ["1", "1"]]


def test_keys_remembered_by_their_place_follow_every_line():
    fmt = formats.compile_format("traefik")
    base = {"ClientHost": "1.2.3.4", "RequestHost": "h", "RequestPath": "/p", "RequestPort": "80",
            "RequestMethod": "GET", "RequestProtocol": "HTTP/1.1", "DownstreamStatus": 200}
    names = list(base)
    rng = random.Random(7)
    lines, objs = [], []
    for i in range(400):
        obj = dict(base, RequestPath=f"/p{i}")
        keys = names[:]
        if i % 3:
            rng.shuffle(keys)
        if i % 5 == 0:   # a key alike in length and in its first, middle and last bytes to a wanted one
            obj["RequestPatH"] = "no"
            keys.insert(rng.randrange(len(keys)), "RequestPatH")
        if i % 7 == 0:   # a key longer than those remembered, at a place a wanted key held before
            obj["k" * 40] = "long"
            keys.insert(0, "k" * 40)
        if i % 11 == 0:  # a wanted key repeated: the last one counts
            keys.append("ClientHost")
            lines.append(("{" + ",".join(f'"{k}":{json.dumps(obj[k])}' for k in keys[:-1])
                          + ',"ClientHost":"9.9.9.9"}').encode())
            objs.append(dict(obj, ClientHost="9.9.9.9"))
            continue
        lines.append(("{" + ",".join(f'"{k}":{json.dumps(obj[k])}' for k in keys) + "}").encode())
        objs.append(obj)
    tsv, bad = both(fmt, lines)
    assert bad == []
    got = [dict(zip(fmt.fields, r)) for r in records(tsv)]
    assert [(g["ip"], g["uri"], g["host"], g["response"], g["request"]) for g in got] == [
        (o["ClientHost"], o["RequestPath"], "h", "200", f"GET {o['RequestPath']} HTTP/1.1") for o in objs]


def test_the_same_key_names_in_two_objects_are_told_apart():
    fmt = formats.compile_format("json:x=a.k,y=b.k,z=k")
    lines = [b'{"a":{"k":"1"},"b":{"k":"2"},"k":"3"}', b'{"b":{"k":"4"},"a":{"k":"5"},"k":"6"}',
             b'{"k":"7","a":{"j":"8","k":"9"},"b":{"k":{"k":"x"}}}', b'{"a":{"k":"1"},"b":{"k":"2"},"k":"3"}']
    tsv, bad = both(fmt, lines)
    assert bad == []
    assert records(tsv) == [["1", "2", "3"], ["5", "4", "6"], ["9", "", "7"], ["1", "2", "3"]]


def test_a_key_is_read_whole_where_an_earlier_line_held_a_key_it_starts_or_ends_like():
    fmt = formats.compile_format("json:h=RequestHost,x=RequestHostX,ab=ab")
    lines = [b'{"RequestHost":"1","ab":"2"}',
             b'{"RequestHostX":"3","ab":"4"}',         # longer than the key remembered at its place
             b'{"RequestHos":"5","ab":"6"}',           # shorter
             b'{"RequestHost":"7","a\\u0062":"8"}',    # escaped where "ab" was: decoded, then found
             b'{"RequestHost":"9","ab\\"c":"10"}',     # the remembered key, then an escaped quote
             b'{"RequestHost":"11","ab":"12","x":"\\t"}',  # an escaped TAB in a value no field wants
             b'{"RequestHost":"13","ab":"14"}']
    tsv, bad = both(fmt, lines)
    assert bad == []
    assert records(tsv) == [["1", "", "2"], ["", "3", "4"], ["", "", "6"], ["7", "", "8"], ["9", "", ""],
                            ["11", "", "12"], ["13", "", "14"]]
