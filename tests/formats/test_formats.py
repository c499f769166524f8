"""Log formats: compiling Apache/nginx format strings, the token semantics on hand-worked lines
(reference matcher, pure-Python kernel, native kernel), a property test against the regular expression
generated from each format, the programs on real-format fixtures on every engine, and the command line."""
from __future__ import annotations

import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import HERE, ROOT, logetl, parts, read
from format_cases import APACHE_ISSUE, CASES, NGINX_FIELDS, NGINX_ISSUE
from test_contract import parse_one
from logetl import contract, formatfiles, formats
from logetl.engines import kernel
from logetl.job import run_program
from logetl.listener import SUCCESSFUL

FIXTURES = os.path.join(HERE, "data", "formats")
FORMAT_IDS = {APACHE_ISSUE: "apache-issue", NGINX_ISSUE: "nginx-issue"}


def fixture(name: str) -> str:
    return os.path.join(FIXTURES, name)


# --- compiling ------------------------------------------------------------------------------------------

def test_presets_and_field_names():
    assert formats.compile_format(None) is formats.LEGACY
    assert formats.compile_format("combined").fields == contract.FIELDS + ("referer", "user_agent")
    assert formats.compile_format("common").fields == ("ip", "ident", "user", "time", "request", "response", "size")
    assert formats.compile_format("vhost_combined").fields[:2] == ("vhost", "port")
    assert formats.compile_format("nginx").fields == NGINX_FIELDS
    assert formats.compile_format(APACHE_ISSUE).fields == (
        "vhost", "port", "ip", "ident", "user", "time", "request", "response", "size", "referer", "user_agent",
        "duration_us")
    assert formats.compile_format(NGINX_ISSUE).fields == (
        "ip", "user", "time", "request", "response", "size", "referer", "user_agent", "request_time",
        "x_forwarded_for")


def test_directive_names_and_duplicates():
    f = formats.compile_format('%a %{c}a %>s %s %{X-Forwarded-For}i %{Set-Cookie}o %{HOME}e %{ms}T %h %h')
    assert f.fields == ("client_ip", "peer_ip", "response", "original_status", "x_forwarded_for",
                        "resp_set_cookie", "env_home", "duration_ms", "ip", "ip_2")
    assert formats.compile_format("%h %s").fields == ("ip", "response")       # %s alone is the status
    g = formats.compile_format("$remote_addr ${upstream_response_time}ms $http_x_real_ip $msec")
    assert g.fields == ("ip", "upstream_response_time", "x_real_ip", "msec")


def test_token_kinds_follow_from_the_literals_around_a_field():
    f = formats.compile_format('%h [%{X}i] "%r" %>s %b')
    kinds = [(t.name, t.kind, t.stop, t.escaped) for t in f.tokens if isinstance(t, formats.Field)]
    assert kinds == [("ip", "token", " ", False), ("x", "bracketed", "]", False),
                     ("request", "quoted", '"', True), ("response", "token", " ", False), ("size", "rest", " ", False)]
    # a last field that may hold spaces takes the rest of the line; a count, status or port is one word
    assert [(t.name, t.stop) for t in formats.compile_format('%b "%{User-Agent}i" %u').tokens
            if isinstance(t, formats.Field)][-1] == ("user", None)
    assert [(t.name, t.stop) for t in formats.compile_format('$remote_addr $status').tokens
            if isinstance(t, formats.Field)][-1] == ("response", " ")
    n = formats.compile_format('$remote_addr "$request"')
    assert [t.escaped for t in n.tokens if isinstance(t, formats.Field)] == [False, False]


@pytest.mark.parametrize("spec,needles", [
    ("%h %Z", ["'%Z'", "position 4"]),
    ("%h%l", ["%l", "position 3", "follows %h"]),
    ("$remote_addr$status", ["$status", "position 13"]),
    ("%h %{Referer", ["position 4"]),
    ("%h %i", ["'%i'", "needs a {NAME}"]),
    ("%h é", ["position 4", "ASCII"]),
    ("%h\\n", ["newline"]),
    ("just text", ["neither a preset"]),
    ("$remote_addr $", ["'$'", "position 14"]),
])
def test_bad_formats_name_the_directive_and_position(spec, needles):
    with pytest.raises(formats.FormatError) as exc:
        formats.compile_format(spec)
    for n in needles:
        assert n in str(exc.value)


def test_format_files():
    with pytest.raises(formats.FormatError, match="3 formats.*vhost_combined, combined, common"):
        formatfiles.read_format_file(fixture("apache2.conf"))
    f = formatfiles.read_format_file(fixture("apache2.conf") + "#vhost_combined")
    assert f.fields[:3] == ("vhost", "port", "ip") and "bytes_sent" in f.fields
    with pytest.raises(formats.FormatError, match="no format named 'nope'"):
        formatfiles.read_format_file(fixture("apache2.conf") + "#nope")
    n = formatfiles.read_format_file(fixture("nginx.conf"))       # a directive over three lines
    assert n.text == NGINX_ISSUE and n.fields == formats.compile_format(NGINX_ISSUE).fields
    j = formatfiles.read_format_file(fixture("nginx_json.conf"))  # escape=json: backslash escapes
    assert [t.escaped for t in j.tokens if isinstance(t, formats.Field) and t.kind == "quoted"] == [True, True]
    with pytest.raises(formats.FormatError, match="cannot go together"):
        formats.resolve("common", fixture("nginx.conf"))
    with pytest.raises(formats.FormatError, match="no LogFormat"):
        formatfiles.read_format_file(fixture("common.log"))


def refusal(spec: str) -> str:
    with pytest.raises(formats.FormatError) as exc:
        formats.compile_format(spec)
    return str(exc.value)


def test_an_unfinished_directive_is_quoted_whole():
    """The message once cut the directive at six characters ('%{User'): it quotes all of it."""
    assert refusal("%h %{User-Agent}") == \
        "unfinished directive '%{User-Agent}' at position 4 of the format: no directive letter after it"
    assert refusal('%h %{User-Agent} "%r"') == \
        "unfinished directive '%{User-Agent}' at position 4 of the format: no directive letter after it"
    assert refusal("%h %{X-Forwarded-For") == \
        "unfinished directive '%{X-Forwarded-For' at position 4 of the format: no closing '}'"
    assert refusal("%h %400") == "unfinished directive '%400' at position 4 of the format: no directive letter after it"
    assert refusal("%h %^tx") == "unknown directive '%^tx' at position 4 of the format"


def test_an_empty_or_unnamable_name_is_refused():
    """%{}i was a field named 'field' (and $http_ a field named ''): a field needs a name."""
    assert refusal("%h %{}i") == "directive '%{}i' at position 4 of the format has an empty {NAME}"
    assert refusal("%h %{}o") == "directive '%{}o' at position 4 of the format has an empty {NAME}"
    assert refusal("%h %{--}i") == \
        "directive '%{--}i' at position 4 of the format: its {NAME} '--' has no letter or digit to name the field by"
    assert refusal("$remote_addr $http_") == \
        "variable '$http_' at position 14 of the format names no header ($http_NAME)"
    # %{}t is not a name: Apache writes %{}t, %{begin}t and %{end}t as %t, the time in brackets
    for t in ("%{}t", "%{begin}t", "%{end}t"):
        f = formats.compile_format(f"%h {t} %r")
        assert f.fields == ("ip", "time", "request")
        assert f.parse_line(b"1.2.3.4 [10/Oct/2000:13:55:36 -0700] GET") == ("1.2.3.4", "10/Oct/2000:13:55:36 -0700", "GET")


def conf(tmp_path, text: str, name: str = "x.conf") -> str:
    path = tmp_path / name
    path.write_bytes(text.encode())
    return str(path)


def test_a_duplicate_nginx_log_format_name_is_refused(tmp_path):
    """Two 'log_format main' were listed as 'main, main' and #main took the first: nginx refuses such a
    configuration, and so does logetl, with or without #NAME."""
    path = conf(tmp_path, "http {\n  log_format main '$remote_addr';\n  log_format other '$remote_addr $status';\n"
                          "  log_format main\n      '$remote_addr \"$request\"';\n}\n", "nginx.conf")
    want = f"{path}:4: duplicate log_format name 'main' (first defined at line 2); nginx refuses it too"
    for spec in (path, path + "#main", path + "#other"):
        with pytest.raises(formats.FormatError) as exc:
            formatfiles.read_format_file(spec)
        assert str(exc.value) == want


def test_an_apache_nickname_defined_again_takes_the_last_definition(tmp_path):
    """Apache reads the last LogFormat of a nickname (its table is overwritten, ignoring case); logetl took
    the first and counted the nickname twice."""
    path = conf(tmp_path, 'LogFormat "%h %l %u %t \\"%r\\" %>s %b" common\n'
                          'LogFormat "%h %t \\"%r\\" %>s %b" agent\n'
                          'LogFormat "%h %u %t \\"%r\\" %>s %b" Common\n')
    assert formatfiles.read_format_file(path + "#common").text == '%h %u %t "%r" %>s %b'
    assert formatfiles.read_format_file(path + "#COMMON").text == '%h %u %t "%r" %>s %b'
    with pytest.raises(formats.FormatError) as exc:
        formatfiles.read_format_file(path)
    assert str(exc.value) == f"format file {path!r} holds 2 formats (Common, agent): choose one with " \
                             f"--format-file '{path}#NAME'"
    once = conf(tmp_path, 'LogFormat "%h %r" common\nLogFormat "%h %u %r" common\n', "once.conf")
    assert formatfiles.read_format_file(once).text == "%h %u %r"      # one nickname: no #NAME needed


@pytest.mark.parametrize("text", [
    'LogFormat "%h %l %u %t \\"%r\\" %>s %b" \\\n    common\n',         # the nickname on the next line
    'LogFormat "%h %l %u %t \\\n\\"%r\\" %>s %b" common\n',             # inside the quoted format
    'LogFormat \\\n "%h %l %u %t \\"%r\\" \\\r\n%>s %b" \\\r\n common\r\n',   # CRLF, three lines
], ids=["after-the-format", "inside-the-format", "crlf"])
def test_an_apache_line_ending_in_a_backslash_continues(tmp_path, text):
    """Apache joins a line ending in a backslash with the next (the backslash and line break removed);
    logetl took the backslash for the nickname or met an unterminated quote."""
    path = conf(tmp_path, "# continued\n" + text + 'LogFormat "%h" other\n')
    f = formatfiles.read_format_file(path + "#common")
    assert f.text == '%h %l %u %t "%r" %>s %b'
    assert f.fields == ("ip", "ident", "user", "time", "request", "response", "size")


def test_a_backslash_ending_the_file_ends_the_line(tmp_path):
    path = conf(tmp_path, 'LogFormat "%h %r" common \\')
    assert formatfiles.read_format_file(path + "#common").text == "%h %r"


def test_a_port_after_a_separator_splits_at_its_last_occurrence():
    """%v:%p split [2001:db8::1]:443 at the first ':' (vhost '[2001', port 'db8::1]:443'): a field before a
    one-character separator and a port ends at the separator's last occurrence before the port's end."""
    f = formats.compile_format("vhost_combined")
    vhost, port = [t for t in f.tokens if isinstance(t, formats.Field)][:2]
    assert (vhost.kind, vhost.stop, vhost.end, port.kind, port.exclude) == ("split", ":", " ", "token", ":")
    assert f.regex().startswith(r"([^\ ]*)\:([^\ \:]*)\ ")
    assert f.native_program()[:3] == ((4, b" ", ord(":")), (0, b":", 0), (1, b"", ord(" ")))
    assert f.why(b'h80 10.0.0.1 - - [x] "GET /" 200 1 "-" "-"') == "field 'vhost' at byte 0: no ':' before the ' ' after it"
    n = formats.compile_format("$remote_addr:$remote_port $status")
    assert n.parse_line(b"2001:db8::1:51234 200") == ("2001:db8::1", "51234", "200")
    assert n.parse_line(b"[::1]:51234 200") == ("[::1]", "51234", "200")
    e = formats.compile_format("$remote_addr:$remote_port")           # the port ends the line
    assert [t.kind for t in e.tokens if isinstance(t, formats.Field)] == ["split", "rest"]
    assert e.parse_line(b"2001:db8::1:51234") == ("2001:db8::1", "51234")
    assert e.regex() == r"(.*)\:([^\ \:]*)"                # (a port is one word)
    # not a port after the separator, or a separator a port may hold: the first occurrence, as before
    assert formats.compile_format("%h:%u %r").parse_line(b"a:b:c GET") == ("a", "b:c", "GET")
    assert [t.kind for t in formats.compile_format("%v-%p %h").tokens if isinstance(t, formats.Field)] == \
        ["token", "token", "rest"]


# --- the token semantics on hand-worked lines ---------------------------------------------------------------

def _parsers():
    out = [pytest.param(False, id="python")]
    if kernel.NATIVE:
        out.append(pytest.param(True, id="native"))
    return out


def kernel_one(fmt, raw: bytes, native: bool):
    return parse_one(kernel.Parser(fmt, fmt.fields, native=native).parse, raw)


ALL_CASES = [pytest.param(spec, raw, expected, id=f"{FORMAT_IDS.get(spec, spec)}-{name}")
             for spec, cases in CASES.items() for name, raw, expected in cases]


@pytest.mark.parametrize("spec,raw,expected", ALL_CASES)
def test_reference_matcher_gives_the_hand_worked_result(spec, raw, expected):
    fmt = formats.compile_format(spec)
    try:
        got = fmt.parse_line(raw)
    except contract.Malformed as exc:
        got = exc.reason
    assert got == expected
    if expected == "no_match":
        assert fmt.why(raw) is not None


@pytest.mark.parametrize("native", _parsers())
@pytest.mark.parametrize("spec,raw,expected", ALL_CASES)
def test_kernels_give_the_hand_worked_result(native, spec, raw, expected):
    fmt = formats.compile_format(spec)
    want = "dash" if isinstance(expected, tuple) and fmt.size_index() >= 0 and expected[fmt.size_index()] == "-" \
        else expected
    assert kernel_one(fmt, raw, native) == want


@pytest.mark.parametrize("native", _parsers())
def test_kernel_emits_the_chosen_fields_in_the_chosen_order(native):
    fmt = formats.compile_format(NGINX_ISSUE)
    line = b'10.0.0.1 - - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 5 "-" "curl" 0.004 "9.9.9.9"\n'
    p = kernel.Parser(fmt, ("x_forwarded_for", "ip", "request_time"), native=native).parse(line * 3, True)
    assert p.tsv == b"9.9.9.9\t10.0.0.1\t0.004\n" * 3
    assert [c.to_pylist() for c in p.columns()] == [["9.9.9.9"] * 3, ["10.0.0.1"] * 3, ["0.004"] * 3]


@pytest.mark.parametrize("native", _parsers())
def test_the_kernels_split_an_ipv6_vhost_from_its_port(native):
    fmt = formats.compile_format("vhost_combined")
    line = b'[2001:db8::1]:443 2001:db8::7 - - [17/May/2015:10:05:04 +0000] "GET / HTTP/1.1" 200 5 "-" "curl"\n'
    p = kernel.Parser(fmt, ("vhost", "port", "ip"), native=native).parse(line + line.replace(b"[2001:db8::1]", b"::1"),
                                                                         True)
    assert p.tsv == b"[2001:db8::1]\t443\t2001:db8::7\n::1\t443\t2001:db8::7\n"


def test_mismatch_names_the_field_and_byte_offset():
    fmt = formats.compile_format("nginx")
    raw = b'10.0.0.1 x - [17/May/2015:10:05:03 +0000] "GET / HTTP/1.1" 200 1 "-" "-" "-"'
    assert fmt.why(raw) == "field 'ip' at byte 8: expected ' - '"
    common = formats.compile_format("common")
    assert common.why(b'10.0.0.1 - - [x] "GET /" 200') == "field 'response' at byte 25: no ' ' after it"
    assert common.why(b'1 - f\tx [x] "GET /" 200 1') == "field 'user' at byte 5: '\\t'"


# --- property test: the scanners against the format's regular expression --------------------------------------

NOISE = list(' \t\r"\\[]:-x0é\u00a0')


@st.composite
def near_lines(draw, fmt):
    out = []
    for tok in fmt.tokens:
        if isinstance(tok, formats.Literal):
            out.append(tok.text if draw(st.integers(0, 39)) else draw(st.sampled_from(["", tok.text * 2, " "])))
        else:
            base = draw(st.sampled_from(["10.0.0.1", "-", "GET / HTTP/1.1", "", "a b", "17/May/2015:10:05:03 +0000",
                                         'a\\"b', "x\\\\", "é\u00a0ü", "[2001:db8::1]", "::1", "443"]))
            noisy = draw(st.integers(0, 3)) == 0
            # mostly values the field can hold (a split field holds its separator, not the port's end)
            stop = tok.end if tok.kind == formats.SPLIT else tok.stop
            if not noisy and stop and not tok.escaped:
                base = base.replace(stop, "_")
            if not noisy and tok.exclude:
                base = base.replace(tok.exclude, "_")
            noise = draw(st.lists(st.sampled_from(NOISE), max_size=4).map("".join)) if noisy else ""
            cut = draw(st.integers(0, len(base)))
            out.append(base[:cut] + noise + base[cut:])
    line = "".join(out).encode("utf-8")
    if draw(st.integers(0, 19)) == 0:
        cut = draw(st.integers(0, len(line)))
        line = line[:cut] + draw(st.sampled_from([b"\xff", b"\xc3", b"\r"])) + line[cut:]
    return line


def expected_by_regex(fmt, raw: bytes):
    text_raw = raw[:-1] if raw.endswith(b"\r") else raw
    try:
        text = text_raw.decode("utf-8")
    except UnicodeDecodeError:
        return contract.INVALID_UTF8
    m = fmt.python_regex().fullmatch(text)
    if m is None:
        return contract.NO_MATCH
    if any("\t" in g or "\r" in g for g in m.groups()):
        return contract.TAB_OR_CR
    i = fmt.size_index()
    return "dash" if i >= 0 and m.group(i + 1) == "-" else m.groups()


@pytest.mark.parametrize("spec", ["common", "vhost_combined", "nginx", APACHE_ISSUE, NGINX_ISSUE,
                                  "$a:$b [$c] '$d'", '%h "%{X}i"x"%r"', "%h\\t%u\\t%r",
                                  "$remote_addr:$remote_port", "%v:%p/%{remote}p %h"],
                         ids=["common", "vhost_combined", "nginx", "apache-issue", "nginx-issue", "odd1", "odd2",
                              "tab-separated", "split-ends-the-line", "split-then-split"])
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_scanners_agree_with_the_generated_regex(spec, data):
    # every kernel on each drawn line: drawing the lines is most of the cost, parsing one is little
    fmt = formats.compile_format(spec)
    raw = data.draw(near_lines(fmt)).replace(b"\n", b"")
    want = expected_by_regex(fmt, raw)
    for native in _parsers():
        assert kernel_one(fmt, raw, native.values[0]) == want, native.id


# --- the programs on real-format fixtures, every engine (Spark parity) ---------------------------------------

FIXTURE_RUNS = [("vhost_combined", "vhost_combined"), ("common", "common"), ("nginx", "nginx"),
                ("nginx_timing", NGINX_ISSUE)]
COUNTS = {"vhost_combined": (6, 1, 1, 4), "common": (5, 1, 1, 3), "nginx": (5, 1, 0, 4), "nginx_timing": (4, 1, 0, 3)}


@pytest.mark.parametrize("name,spec", FIXTURE_RUNS, ids=[n for n, _ in FIXTURE_RUNS])
def test_branch_and_filter_on_real_format_fixtures(engine, tmp_path, name, spec):
    log = fixture(f"{name}.log")
    outs = {"output1": str(tmp_path / "b1"), "output2": str(tmp_path / "b2")}
    result = run_program("branch", log, outs, engine=engine, trap=str(tmp_path / "trap"), log_format=spec)
    assert result.status == SUCCESSFUL
    expected = read(fixture(f"{name}.branch.tsv"))
    assert parts(outs["output1"]) == expected and parts(outs["output2"]) == expected
    assert parts(tmp_path / "trap") == read(fixture(f"{name}.trap.log"))
    lines, no_match, dash, records = COUNTS[name]
    assert (result.lines_read, result.malformed, result.dropped_size_dash, result.written["output1"]) == \
        (lines, {"no_match": no_match}, dash, records)
    (where, reason, text), = result.malformed_samples
    assert reason == "no_match" and re.match(r"field '\w+' at byte \d+: ", text), text
    result = run_program("filter", log, {"output": str(tmp_path / "f")}, engine=engine, log_format=spec)
    assert parts(tmp_path / "f") == read(fixture(f"{name}.filter.tsv"))


@pytest.mark.parametrize("spec", list(CASES), ids=[FORMAT_IDS.get(s, s) for s in CASES])
def test_hand_worked_corpus_through_branch(engine, tmp_path, spec):
    """Each format's hand-worked lines as one log, through Branch on every engine: the records, the trap and
    the counts are what the hand-worked results say."""
    fmt = formats.compile_format(spec)
    cases = CASES[spec]
    log = tmp_path / "corpus.log"
    log.write_bytes(b"\n".join(raw for _, raw, _ in cases) + b"\n")
    index = [fmt.fields.index(f) for f in contract.FIELDS]
    size = fmt.size_index()
    kept = [e for _, _, e in cases if isinstance(e, tuple) and e[size] != "-"]
    want = "".join("\t".join(e[i] for i in index) + "\n" for e in kept).encode()
    bad = [raw for _, raw, e in cases if isinstance(e, str)]
    outs = {"output1": str(tmp_path / "b1"), "output2": str(tmp_path / "b2")}
    result = run_program("branch", str(log), outs, engine=engine, trap=str(tmp_path / "trap"), log_format=spec)
    assert parts(outs["output1"]) == want
    assert parts(tmp_path / "trap") == b"".join(raw + b"\n" for raw in bad)
    reasons: dict = {}
    for _, _, e in cases:
        if isinstance(e, str):
            reasons[e] = reasons.get(e, 0) + 1
    assert result.malformed == reasons
    assert result.dropped_size_dash == sum(1 for _, _, e in cases if isinstance(e, tuple) and e[size] == "-")


def test_join_on_a_common_log_equals_join_on_the_same_records_in_combined(engine, tmp_path):
    """The programs run unchanged: the common fixture's records, rewritten as combined lines, join alike."""
    fmt = formats.compile_format("common")
    lines = []
    for raw in read(fixture("common.log")).splitlines():
        try:
            v = dict(zip(fmt.fields, fmt.parse_line(raw)))
        except contract.Malformed:
            continue
        lines.append(f'{v["ip"]} - - [{v["time"]}] "{v["request"]}" {v["response"]} {v["size"]} "-" "-"')
    combined = tmp_path / "combined.log"
    combined.write_text("\n".join(lines) + "\n")
    run_program("join", fixture("common.log"), {"output": str(tmp_path / "a")}, engine=engine, log_format="common")
    run_program("join", str(combined), {"output": str(tmp_path / "b")}, engine=engine)
    assert parts(tmp_path / "a") == parts(tmp_path / "b") != b""


# --- the command line -----------------------------------------------------------------------------------------

def test_the_issue_format_strings_work_on_the_command_line(tmp_path):
    p = logetl("branch", "-q", "--format", APACHE_ISSUE, "--input", fixture("vhost_issue.log"),
               "--output1", str(tmp_path / "a1"), "--output2", str(tmp_path / "a2"))
    assert p.returncode == 0, p.stderr
    assert parts(tmp_path / "a1") == b"2001:db8::7\t17/May/2015:10:05:04 +0000\tGET / HTTP/1.1\t200\t734\n"
    p = logetl("filter", "-q", "--format", NGINX_ISSUE, "--input", fixture("nginx_timing.log"),
               "--output", str(tmp_path / "n"))
    assert p.returncode == 0, p.stderr
    assert parts(tmp_path / "n") == b"10.1.1.1\n"


def test_format_file_and_explain(tmp_path):
    p = logetl("branch", "-q", "--format-file", fixture("nginx.conf"), "--input", fixture("nginx_timing.log"),
               "--output1", str(tmp_path / "a1"), "--output2", str(tmp_path / "a2"))
    assert p.returncode == 0, p.stderr
    assert parts(tmp_path / "a1") == read(fixture("nginx_timing.branch.tsv"))
    out = logetl("explain", "branch", "--format", "nginx").stdout.decode()
    assert "nginx format '$remote_addr - $remote_user" in out
    assert logetl("explain", "branch").stdout.decode().count("line contract; drop size '-'") == 1


@pytest.mark.parametrize("args,needles", [
    (["--format", '$remote_addr [$time_local] "$request"'], ["needs field 'response'", "its fields: ip, time, request"]),
    (["--format", "%h %l %u %t %Q"], ["unknown directive '%Q'", "position 13"]),
    (["--format", "common", "--format-file", "x.conf"], ["--format and --format-file"]),
    (["--format-file", "/no/such.conf"], ["/no/such.conf", "does not exist"]),
])
def test_format_errors_are_one_line_and_exit_2(tmp_path, args, needles):
    p = logetl("branch", *args, "--input", fixture("nginx.log"), "--output1", str(tmp_path / "a"),
               "--output2", str(tmp_path / "b"))
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    for n in needles:
        assert n in err
    assert not os.path.exists(tmp_path / "a")


@pytest.mark.parametrize("args,line", [
    (["--format", "%h %{User-Agent}"],
     "unfinished directive '%{User-Agent}' at position 4 of the format: no directive letter after it"),
    (["--format", '%h %{}i "%r" %>s %b %t'], "directive '%{}i' at position 4 of the format has an empty {NAME}"),
    (["--format-file", "DUP#main"],
     "DUP:2: duplicate log_format name 'main' (first defined at line 1); nginx refuses it too"),
])
def test_format_refusals_are_these_lines_and_exit_2(tmp_path, args, line):
    dup = tmp_path / "dup.conf"
    dup.write_text("log_format main '$remote_addr';\nlog_format main '$remote_addr $status';\n")
    args = [a.replace("DUP", str(dup)) for a in args]
    p = logetl("branch", *args, "--input", fixture("nginx.log"), "--output1", str(tmp_path / "a"),
               "--output2", str(tmp_path / "b"))
    assert (p.returncode, p.stderr.decode()) == (2, "Error: " + line.replace("DUP", str(dup)) + "\n")


def test_the_readme_format_file_examples_run_on_debians_formats(tmp_path):
    """The README's (and the log formats guide's) --format-file example on Debian's apache2.conf (its LogFormat lines: %O, read as
    bytes_sent): Filter runs on it; Join refuses it as the README says; Join runs with the preset."""
    debian = fixture("apache2.conf") + "#vhost_combined"
    log = fixture("vhost_combined.log")
    p = logetl("filter", "-q", "--format-file", debian, "--input", log, "--output", str(tmp_path / "f"))
    assert p.returncode == 0, p.stderr
    # without a size field no record is dropped for a '-' size: 198.51.100.20's 304 (size '-') is kept
    assert parts(tmp_path / "f") == b"198.51.100.20\n203.0.113.9\n"
    p = logetl("join", "--format-file", debian, "--input", log, "--output", str(tmp_path / "j"))
    assert (p.returncode, p.stderr.decode()) == (2, (
        "Error: program join needs field 'size', and the log format has none (its fields: vhost, port, ip, ident, "
        "user, time, request, response, bytes_sent, referer, user_agent; join needs ip, time, request, response, "
        "size)\n"))
    p = logetl("join", "-q", "--format", "vhost_combined", "--input", log, "--output", str(tmp_path / "j"))
    assert p.returncode == 0, p.stderr
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    assert "logetl filter --format-file /etc/apache2/apache2.conf#vhost_combined" in readme
    assert "logetl join --format vhost_combined" in readme
    assert "logetl join --format-file" not in readme


def test_filter_needs_only_ip_and_request(tmp_path):
    p = logetl("filter", "-q", "--format", '$remote_addr "$request"', "--input", "-", "--output", str(tmp_path / "f"),
               input=b'1.2.3.4 "GET /images/x"\n5.6.7.8 "GET /"\n')
    assert p.returncode == 0, p.stderr
    assert parts(tmp_path / "f") == b"1.2.3.4\n"


def test_input_dash_reads_standard_input(tmp_path):
    data = read(fixture("nginx.log"))
    p = logetl("branch", "--format", "nginx", "--input", "-", "--output1", str(tmp_path / "a"),
               "--output2", str(tmp_path / "b"), input=data)
    assert p.returncode == 0, p.stderr
    assert parts(tmp_path / "a") == read(fixture("nginx.branch.tsv"))
    assert b"lines read                       5" in p.stderr
    # join, and the default format, from stdin too
    p = logetl("join", "-q", "--input", "-", "--output", str(tmp_path / "j"),
               input=read(os.path.join(HERE, "data", "corpus", "corpus.log")))
    assert p.returncode == 0, p.stderr
    assert parts(tmp_path / "j") == read(os.path.join(HERE, "data", "corpus", "join.tsv"))


def test_input_dash_never_restarts(tmp_path):
    corpus_log = read(os.path.join(HERE, "data", "corpus", "corpus.log"))
    out = str(tmp_path / "j")
    p = logetl("join", "--input", "-", "--output", out, input=corpus_log, env={"LOGETL_FAIL_AT": "join"})
    assert p.returncode == 1
    p = logetl("join", "--input", "-", "--output", out, input=corpus_log)
    assert p.returncode == 0, p.stderr
    assert b"standard input, which cannot be read again" in p.stderr
    assert parts(out) == read(os.path.join(HERE, "data", "corpus", "join.tsv"))


def test_the_format_is_part_of_the_flow_identity(tmp_path):
    out = str(tmp_path / "j")
    log = fixture("common.log")
    p = logetl("join", "--format", "common", "--input", log, "--output", out, env={"LOGETL_FAIL_AT": "join"})
    assert p.returncode == 1
    # the same records read with another format string: another flow, so no restart
    p = logetl("join", "--format", "%h %l %u %t \"%r\" %>s %b", "--input", log, "--output", out,
               env={"LOGETL_FAIL_AT": "join"})
    assert p.returncode == 1 and b"the program's flow definition changed" in p.stderr
    p = logetl("join", "--format", "%h %l %u %t \"%r\" %>s %b", "--input", log, "--output", out)
    assert p.returncode == 0 and b"restarting after checkpoint 'checkpoint'" in p.stderr, p.stderr


def test_standard_input_is_refused_on_spark(spark_session, tmp_path):
    from logetl.errors import UsageError

    with pytest.raises(UsageError, match="standard input.*local engine only"):
        run_program("filter", "-", {"output": str(tmp_path / "f")}, engine="spark")
