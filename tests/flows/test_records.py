"""Every record is kept, every field of the layout is there: a flow's ``read`` drops nothing but malformed
lines (a size of ``-`` is a record like any other; only the three programs drop it, in their step
``drop_size_dash``), and ``combined`` gives ``referer`` and ``user_agent`` (null on a line without a
well-formed tail) -- on both engines, on hand-worked lines and on the real sample against independent
plain-Python parses written here (regular expressions of their own, no logetl code)."""
from __future__ import annotations

import json
import os
import re
from collections import Counter

import pytest

import independent
from conftest import ROOT, logetl, parts, read
from logetl import assembly, flowfile, formats
from logetl.job import run_flow
import logetl.api as L

EXAMPLES = os.path.join(ROOT, "examples")
HEAD = '10.0.0.1 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" '

# --- the independent parses ---------------------------------------------------------------------------------

#: the original expression, ASCII classes as the contract says; the tail as a separate match after the size:
#: two Apache-quoted values (a backslash escapes the next character) holding no TAB or CR, then the end of
#: the line or a space
COMBINED = re.compile(r'([^ ]*) \S+ \S+ \[([\w:/]+\s[+\-]\d{4})\] "(.+?)" (\d{3}) ([^ ]*).*', re.ASCII | re.DOTALL)
VALUE = r'((?:[^"\\\t\r]|\\[^\t\r])*)'
TAIL = re.compile(f' "{VALUE}" "{VALUE}"(?: .*)?', re.DOTALL)
#: Apache's common layout, %h %l %u %t "%r" %>s %b, on lines without TAB, CR or escapes in the request
COMMON = re.compile(r'([^ ]*) ([^ ]*) ([^ ]*) \[([^\]]*)\] "([^"]*)" ([^ ]*) ([^ ]*)')


def combined_records(data: bytes) -> list[tuple]:
    """(ip, time, request, response, size, referer, user_agent) of each record, None for a missing tail."""
    out = []
    for raw in data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n"):
        text = raw.removesuffix(b"\r").decode("utf-8")
        m = COMBINED.fullmatch(text)
        assert m is not None and not any(c in f for f in m.groups() for c in "\t\r"), raw
        t = TAIL.fullmatch(text, m.end(5))
        out.append(m.groups() + ((t.group(1), t.group(2)) if t else (None, None)))
    return out


def as_common(data: bytes) -> bytes:
    """The sample's combined lines cut after their size: a log in Apache's common layout."""
    return b"".join(re.match(rb'.*?" \d{3} [^ ]*', line).group(0) + b"\n" for line in data.splitlines())


def common_records(data: bytes) -> list[tuple]:
    """(ip, time, request, response, size) of each line of a common log (every line must match)."""
    out = []
    for line in data.decode("utf-8").splitlines():
        m = COMMON.fullmatch(line)
        assert m is not None, line
        ip, _ident, _user, time, request, response, size = m.groups()
        out.append((ip, time, request, response, size))
    return out


def status_by_hour(records) -> bytes:
    counts = Counter()
    for _ip, time, _request, response, _size in records:
        when = independent.day_hour(time)
        if when is not None:
            counts[(f"{when[0]}T{when[1]}", response)] += 1
    return b"".join(f"{h}\t{r}\t{n}\n".encode() for (h, r), n in sorted(counts.items()))


def error_clients(records) -> bytes:
    requests, errors, sizes = Counter(), Counter(), Counter()
    for ip, _time, _request, response, size in records:
        requests[ip] += 1
        errors[ip] += response[0] in "45"
        sizes[ip] += int(size) if re.fullmatch(r"-?[0-9]{1,18}", size) else 0
    ips = sorted((ip for ip in requests if errors[ip]), key=lambda ip: (-errors[ip], -requests[ip], ip.encode()))
    return b"".join(f"{ip}\t{requests[ip]}\t{errors[ip]}\t{sizes[ip]}\n".encode() for ip in ips)


def run_example(engine, tmp_path, example: str, tap: str, log: str, fmt: str | None):
    flow = flowfile.load(os.path.join(EXAMPLES, f"{example}.py"), formats.compile_format(fmt), format_given=True)
    out = tmp_path / f"{example}-{fmt}"
    result = run_flow(flow, log, {tap: str(out)}, engine=engine, monitor=False)
    return result, parts(out)


# --- every record is kept -------------------------------------------------------------------------------------

@pytest.mark.shared
def test_the_sample_has_records_of_size_dash(sample):
    records = combined_records(read(sample))
    assert len(records) == 5000 and sum(r[4] == "-" for r in records) == 432
    assert sum(r[4] == "-" and r[3][0] in "45" for r in records) == 2     # two 500s among them


@pytest.mark.shared
@pytest.mark.parametrize("example, tap, compute", [("status_by_hour", "counts", status_by_hour),
                                                   ("error_clients", "clients", error_clients)])
@pytest.mark.parametrize("fmt", [None, "common"])
def test_examples_count_the_records_of_size_dash(engine, sample, tmp_path, example, tap, compute, fmt):
    data = read(sample)
    if fmt == "common":
        log = tmp_path / "common.log"
        log.write_bytes(as_common(data))
        records = common_records(log.read_bytes())
        log = str(log)
    else:
        log, records = sample, [r[:5] for r in combined_records(data)]
    assert len(records) == 5000
    result, got = run_example(engine, tmp_path, example, tap, log, fmt)
    assert got == compute(records)
    assert got != compute([r for r in records if r[4] != "-"])      # what dropping them gave: other bytes
    assert (result.lines_read, result.malformed, result.dropped_size_dash) == (5000, {}, 0)
    if example == "status_by_hour":
        assert sum(int(row.split(b"\t")[2]) for row in got.splitlines()) == 5000   # every request counted


def test_read_keeps_size_dash_and_the_programs_drop_it(engine, tmp_path):
    log = tmp_path / "in.log"
    log.write_bytes(f'{HEAD}404 -\n{HEAD}200 10\nnot a log line\n'.encode())
    kept = L.Flow("kept", [L.read(fields=("response", "size")).write("out")])
    result = run_flow(kept, str(log), {"out": str(tmp_path / "kept")}, engine=engine, monitor=False)
    assert parts(tmp_path / "kept") == b"404\t-\n200\t10\n"
    assert (result.lines_read, result.malformed, result.dropped_size_dash) == (3, {"no_match": 1}, 0)
    dropped = L.Flow("dropped", [L.read(fields=("response", "size")).drop_size_dash().write("out")])
    result = run_flow(dropped, str(log), {"out": str(tmp_path / "dropped")}, engine=engine, monitor=False)
    assert parts(tmp_path / "dropped") == b"200\t10\n"
    assert (result.lines_read, result.malformed, result.dropped_size_dash) == (3, {"no_match": 1}, 1)


def test_the_drop_step_folds_into_the_read():
    parse = L.read(fields=("ip",))
    flow = L.Flow("f", [parse.drop_size_dash(name="drop").write("out")])
    assert [n.kind for n in flow.nodes] == ["source", "parse", "sink"]
    assert parse.drops_size_dash and parse.describe() == "line contract; drop size '-'"
    assert L.read(fields=("ip",)).describe() == "line contract"
    with pytest.raises(assembly.AssemblyError, match=r"^drop_size_dash 'd' must read a read\(\) directly "
                                                     r"\(L.read\(...\).drop_size_dash\(\)\), not filter 'f'$"):
        L.read().filter(L.col("ip") == "x", name="f").drop_size_dash(name="d")
    both = L.read()
    with pytest.raises(assembly.AssemblyError, match=r"^flow 'g': drop_size_dash 'd' must be the only reader of "
                                                     r"parse 'parse', which sink 'raw' reads too$"):
        L.Flow("g", [both.drop_size_dash(name="d").write("a"), both.write("b", name="raw")])


# --- every field of the layout ----------------------------------------------------------------------------------

TAIL_CASES = [   # (the text after the status, size, referer, user agent); None: null
    ('200 512 "http://a.example/x?q=1" "Mozilla/5.0 (X11)"', "512", "http://a.example/x?q=1", "Mozilla/5.0 (X11)"),
    ("304 -", "-", None, None),                                                  # no tail
    ('200 7 "-" "say \\"hi\\" \\\\"', "7", "-", 'say \\"hi\\" \\\\'),            # escapes kept as written
    ('200 7 "r" "u" "10.1.1.1" 0.004', "7", "r", "u"),                           # more fields after it
    ('200 7 "r" "u"x', "7", None, None),                                         # text glued to it
    ('200 7 "https://é.example/ü" "Agent/ß 日本"', "7", "https://é.example/ü", "Agent/ß 日本"),
    ('200 7 "r" "a\tb"', "7", None, None),                                       # a TAB in it: still a record
    ('200 7 "r"', "7", None, None),                                              # one value only
    ('200 7 "" ""', "7", "", ""),                                                # empty, not null
    ('200 7 "a"b" "u"', "7", None, None),                                        # a bare quote ends the referer
    ('404 - "r" "u"', "-", "r", "u"),
    ('200 7  "r" "u"', "7", None, None),                                         # two spaces before it
]


def test_tail_cases_agree_with_the_independent_parse():
    data = "".join(HEAD + text + "\n" for text, *_ in TAIL_CASES).encode()
    got = [(r[4], r[5], r[6]) for r in combined_records(data)]
    assert got == [tuple(expected) for _, *expected in TAIL_CASES]
    for text, *expected in TAIL_CASES:
        assert formats.LEGACY.parse_line((HEAD + text).encode())[4:] == tuple(expected)


#: the local engine, and Spark's three parse paths (the kernel in the executors' JVMs or Python workers, or
#: Spark's own regular expressions)
PATHS = [pytest.param("local", None, id="local"),
         *(pytest.param("spark", p, id=f"spark-{p}") for p in ("jvm", "python", "builtin"))]


def run_on(engine, parse, flow, log, outs, request):
    if engine == "spark":
        request.getfixturevalue("spark_session")
    options = {"conf": {"logetl.parse": parse}} if parse else None
    return run_flow(flow, log, outs, engine=engine, engine_options=options, monitor=False)


@pytest.mark.parametrize("engine, parse", PATHS)
def test_referer_and_user_agent_by_hand(engine, parse, tmp_path, request):
    log = tmp_path / "in.log"
    log.write_bytes("".join(HEAD + text + "\n" for text, *_ in TAIL_CASES).encode() + b"garbage\n")
    parsed = L.read(fields=("size", "referer", "user_agent"))
    flow = L.Flow("tail", [parsed.write("j", format="jsonl"),
                           parsed.derive(missing=L.col("referer").is_null(), name="nulls").write("t")])
    result = run_on(engine, parse, flow, str(log), {"j": str(tmp_path / "j"), "t": str(tmp_path / "t")}, request)
    assert (result.lines_read, result.malformed, result.dropped_size_dash) == (len(TAIL_CASES) + 1, {"no_match": 1}, 0)
    rows = [json.loads(line) for line in parts(tmp_path / "j").decode().splitlines()]
    assert rows == [{"size": s, "referer": r, "user_agent": u} for _, s, r, u in TAIL_CASES]
    tsv = "".join(f"{s}\t{r or ''}\t{u or ''}\t{'true' if r is None else 'false'}\n" for _, s, r, u in TAIL_CASES)
    assert parts(tmp_path / "t") == tsv.encode()
    # the parse's records written as they are (Spark joins a sink's lines in its workers): null is empty
    plain = L.Flow("plain", [L.read(fields=("user_agent", "size", "referer")).write("p")])
    run_on(engine, parse, plain, str(log), {"p": str(tmp_path / "p")}, request)
    assert parts(tmp_path / "p") == "".join(f"{u or ''}\t{s}\t{r or ''}\n" for _, s, r, u in TAIL_CASES).encode()


def test_null_tail_fields_in_parquet(engine, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    log = tmp_path / "in.log"
    log.write_bytes("".join(HEAD + text + "\n" for text, *_ in TAIL_CASES).encode())
    flow = L.Flow("pq", [L.read(fields=("referer", "size")).write("out", format="parquet")])
    run_flow(flow, str(log), {"out": str(tmp_path / "out")}, engine=engine, monitor=False)
    files = sorted(f for f in os.listdir(tmp_path / "out") if f.endswith(".parquet"))
    got = [row for f in files for row in pq.read_table(tmp_path / "out" / f).to_pylist()]
    assert got == [{"referer": r, "size": s} for _, s, r, _ in TAIL_CASES]


@pytest.mark.shared
@pytest.mark.parametrize("engine, parse", PATHS)
def test_referer_and_user_agent_on_the_sample(engine, parse, sample, tmp_path, request):
    expected = combined_records(read(sample))
    assert all(r[5] is not None for r in expected) and len({r[6] for r in expected}) > 50
    flow = L.Flow("all", [L.read().write("out")])
    run_on(engine, parse, flow, sample, {"out": str(tmp_path / "out")}, request)
    assert parts(tmp_path / "out") == b"".join("\t".join(r).encode() + b"\n" for r in expected)


def test_default_read_has_seven_fields_and_the_programs_five():
    assert L.read().fields == ("ip", "time", "request", "response", "size", "referer", "user_agent")
    from logetl import programs
    assert programs.get("branch").node("parse").fields == ("ip", "time", "request", "response", "size")


def test_a_field_the_format_lacks_names_the_presets_that_have_it(tmp_path):
    with pytest.raises(assembly.MissingField) as exc:
        L.read("common", fields=("ip", "referer"))
    assert str(exc.value) == ("the log format common has no field 'referer' (its fields: ip, ident, user, time, "
                              "request, response, size); the presets combined, vhost_combined, nginx, s3, cloudfront, w3c, "
                              "caddy, traefik and nginx_json have it")
    with pytest.raises(assembly.MissingField, match=r"; the presets nginx and w3c have it$"):
        L.read(fields=("x_forwarded_for",))
    with pytest.raises(assembly.MissingField, match=r"^the log format combined has no field 'port' .*; the presets "
                                                    r"vhost_combined and w3c have it$"):
        L.read(fields=("port",))
    with pytest.raises(assembly.MissingField, match=r"^the log format '%h %b' has no field 'ident' \(its fields: "
                                                    r"ip, size\); the presets common and vhost_combined have it$"):
        L.read("%h %b", fields=("ident",))
    with pytest.raises(assembly.MissingField, match=r"; no preset has it \(a format string with it does: see "
                                                    r"--format\)$"):
        L.read(fields=("duration_us",))
    f = tmp_path / "agents.py"
    f.write_text("import logetl.api as L\n\n\ndef flow(fmt):\n"
                 "    return L.Flow('agents', [L.read(fmt, fields=('user_agent',)).write('out')])\n")
    p = logetl("explain", str(f), "--format", "common")
    err = p.stderr.decode()
    assert p.returncode == 2 and len(err.splitlines()) == 1, err
    assert "the log format common has no field 'user_agent'" in err
    assert ("the presets combined, vhost_combined, nginx, alb, elb, s3, cloudfront, w3c, caddy, traefik and "
            "nginx_json have it") in err
