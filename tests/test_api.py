"""The public flow API and ``logetl run`` as a user meets them: flows checked when defined (one exact line
per mistake), flow files (errors with file and line), the run command's options, restart after a user's
checkpoint, and the blocking operators that are new (group_by, top) within a tiny memory budget."""
from __future__ import annotations

import os
import textwrap

import pytest

import logetl.api as L
from conftest import CORPUS, logetl, parts
from logetl.assembly import AssemblyError
from logetl.expressions import ExpressionError
from logetl.job import run_flow

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
LOG = os.path.join(CORPUS, "corpus.log")


def _error(define) -> str:
    with pytest.raises((AssemblyError, ExpressionError)) as caught:
        define()
    return str(caught.value)


# --- checked when defined -----------------------------------------------------------------------------------

def test_mistakes_fail_when_the_flow_is_defined_with_one_exact_line():
    logs = L.read()
    assert _error(lambda: logs.filter(L.col("status") == "200")) == \
        "filter (unnamed): no field 'status' (fields: ip, time, request, response, size)"
    assert _error(lambda: logs.filter(L.col("response") >= 400, name="errors")) == \
        "filter 'errors': cannot compare response (string) with 400 (integer): use to_int() or a string literal"
    assert _error(lambda: logs.filter(L.col("size").to_int())) == \
        "filter (unnamed): to_int(size) is integer, not boolean"
    assert _error(lambda: logs.derive(ip=L.lit("x"))) == \
        "derive (unnamed): field 'ip' exists (rename or select first)"
    assert _error(lambda: logs.derive(n="size")) == \
        "derive: n must be an expression (col(...), lit(...), ...), not 'size'"
    assert _error(lambda: logs.filter(L.col("request").matches(r"^GET \d+"))) == \
        r"regex '^GET \\d+': escape \d is not portable at offset 5 (see the portable subset in the README)"
    assert _error(lambda: logs.group_by("ip").agg()) == \
        "groupby (unnamed): no aggregates (use unique() for distinct keys)"
    assert _error(lambda: logs.group_by("ip").agg(n=L.sum("request"))) == \
        "groupby (unnamed): sum: request is string, not integer"
    assert _error(lambda: logs.join(logs.select("ip", "time"), on="ip")) == \
        "hashjoin (unnamed): fields on both sides: time (rename one side first)"
    assert _error(lambda: logs.sort("day")) == \
        "sort (unnamed): no field 'day' in ip, time, request, response, size"
    assert _error(lambda: logs.limit(-1)) == "limit: n is a count >= 0, not -1"
    assert _error(lambda: L.read(fields=("ip", "time", "ip"))) == "parse 'parse': field 'ip' is named twice"
    assert _error(lambda: L.Flow("two", [logs.write("a"), L.read().write("b")])) == \
        "flow 'two': the input is read more than once (read it once and branch)"
    assert _error(lambda: L.Flow("dup", [logs.write("a"), logs.write("a")])) == \
        "flow 'dup': two sinks write the same output tap"
    with pytest.raises(ExpressionError, match="not a Python truth value"):
        bool(L.col("ip") == "x")


def test_unnamed_operators_are_named_after_their_kind_in_flow_order():
    logs = L.read()
    a = logs.filter(L.col("ip") == "1").select("ip")
    b = logs.filter(L.col("ip") == "2", name="filter_2").select("ip")
    flow = L.Flow("names", [a.write("a"), b.write("b")])
    assert [n.name for n in flow.nodes] == ["input", "parse", "filter", "select", "sink", "filter_2",
                                            "select_2", "sink_2"]


# --- flow files --------------------------------------------------------------------------------------------

def _flow_file(tmp_path, body: str) -> str:
    path = tmp_path / "my_flow.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def _one_line_error(p) -> str:
    assert p.returncode == 2, p.stderr
    err = p.stderr.decode()
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


def test_errors_in_a_flow_file_name_the_file_and_line(tmp_path):
    out = str(tmp_path / "out")
    f = _flow_file(tmp_path, """\
        import logetl.api as L

        def flow(fmt):
            logs = L.read(fmt)
            return L.Flow("x", [logs.filter(L.col("status") == "200").write("out")])
        """)
    assert _one_line_error(logetl("run", f, "--input", LOG, "--output", f"out={out}")) == \
        f"Error: {f}:5: filter (unnamed): no field 'status' (fields: ip, time, request, response, size)\n"
    f = _flow_file(tmp_path, "import logetl.api as L\n\ndef flow(fmt)\n    pass\n")
    assert _one_line_error(logetl("explain", f)) == f"Error: {f}:3: syntax error: expected ':'\n"
    f = _flow_file(tmp_path, "import logetl.api as L\nx = 1 / 0\n")
    assert _one_line_error(logetl("explain", f)) == f"Error: {f}:2: ZeroDivisionError: division by zero\n"
    f = _flow_file(tmp_path, "FLOW = None\n")
    assert _one_line_error(logetl("explain", f)) == \
        f"Error: {f}: defines no flow (a function flow(fmt) that returns logetl.api.Flow)\n"
    f = _flow_file(tmp_path, "def flow(fmt):\n    return 42\n")
    assert _one_line_error(logetl("explain", f)) == f"Error: {f}: flow() returned int, not a logetl.api.Flow\n"
    f = _flow_file(tmp_path, """\
        import logetl.api as L

        def flow():
            return L.Flow("fixed", [L.read("common").write("out")])
        """)
    assert _one_line_error(logetl("explain", f, "--format", "nginx")) == \
        f"Error: {f}: flow() takes no log format, so --format cannot change it (give it a parameter and pass it " \
        "to read())\n"
    assert "flow fixed" in logetl("explain", f).stdout.decode()
    missing = str(tmp_path / "nope.py")
    assert _one_line_error(logetl("run", missing, "--input", LOG, "--output", f"out={out}")) == \
        f"Error: flow file {missing!r} does not exist\n"
    assert _one_line_error(logetl("run", "", "--input", LOG, "--output", f"out={out}")) == \
        "Error: flow file '' does not exist\n"        # was an internal error (KeyError), exit 1
    assert not os.path.exists(out)


def test_run_checks_the_outputs_against_the_flows_sinks(tmp_path):
    flow = os.path.join(EXAMPLES, "status_by_hour.py")
    p = logetl("run", flow, "--input", LOG, "--output", f"count={tmp_path / 'o'}")
    assert _one_line_error(p) == "Error: flow status_by_hour writes output counts (given: count)\n"
    p = logetl("run", flow, "--input", LOG, "--output", "counts")
    assert p.returncode == 2 and "'counts' is not NAME=PATH" in p.stderr.decode()
    assert not (tmp_path / "o").exists()


def test_explain_a_flow_file():
    p = logetl("explain", os.path.join(EXAMPLES, "top_clients.py"))
    out = p.stdout.decode()
    assert p.returncode == 0
    assert "flow top_clients: per day, the 10 clients with the most bytes" in out
    assert "  top_10_per_day    top         <- bytes_per_client    first 10 per day by bytes descending, ip" in out
    assert "  bytes_per_client  groupby     <- valid_time          by day, ip: bytes = sum(bytes)" in out


def test_a_user_flow_restarts_after_its_checkpoint(tmp_path):
    """error_clients stores the parsed records in its checkpoint 'records': a run that fails later is
    restarted after it, and gives the same bytes as an uninterrupted run."""
    flow = os.path.join(EXAMPLES, "error_clients.py")
    whole = tmp_path / "whole"
    assert logetl("run", flow, "--input", LOG, "--output", f"clients={whole}", "-q").returncode == 0
    out = tmp_path / "out"
    failed = logetl("run", flow, "--input", LOG, "--output", f"clients={out}", env={"LOGETL_FAIL_AT": "errors"})
    assert failed.returncode == 1 and not out.exists()
    again = logetl("run", flow, "--input", LOG, "--output", f"clients={out}")
    assert again.returncode == 0
    assert "logetl: restarting after checkpoint 'records': skipping step(s) parse" in again.stderr.decode()
    assert parts(out) == parts(whole) and parts(whole)


# --- blocking operators within a tiny budget: the same bytes as in memory -------------------------------------

def _run(flow, log, out, **engine_options):
    run_flow(flow, str(log), {"out": str(out)}, engine_options=engine_options, monitor=False)
    return parts(out)


def test_group_by_and_top_spill_and_give_the_in_memory_bytes(tmp_path):
    from logetl import generate

    log = tmp_path / "in.log"
    generate.write(str(log), 30_000, 5)

    def flow():
        logs = L.read()
        per = logs.derive(bytes=L.coalesce(L.col("size").to_int(), 0), d=L.day(L.col("time"))).group_by(
            "d", "ip", "request").agg(n=L.count(), bytes=L.sum("bytes"), first=L.min("response"),
                                      last=L.max("response"), kinds=L.count_distinct("response"))
        top = per.top(3, by=[L.desc("n"), "request"], per=["d", "ip"])
        return L.Flow("spill", [top.write("out")])

    small = _run(flow(), log, tmp_path / "small", memory_limit=300 << 20, spill_buffers=64 * 1024)
    large = _run(flow(), log, tmp_path / "large")
    assert small == large and small.count(b"\n") > 3


def test_group_by_spills_in_partitions_with_the_in_memory_result(tmp_path):
    from logetl import generate

    log = tmp_path / "in.log"
    generate.write(str(log), 30_000, 6)

    def flow():
        groups = L.read().group_by("ip", "request").agg(n=L.count(), agents=L.count_distinct("time"))
        return L.Flow("groups", [groups.sort("ip", "request").write("out")])

    from logetl.listener import FlowRun

    small_run = run_flow(flow(), str(log), {"out": str(tmp_path / "small")}, monitor=False,
                         engine_options={"memory_limit": 300 << 20, "spill_buffers": 64 * 1024})
    assert isinstance(small_run, FlowRun) and "groupby" in small_run.spilled
    assert parts(tmp_path / "small") == _run(flow(), log, tmp_path / "large")
    # and both are the result, computed here in plain Python from the reference parser
    from reference import parse

    records, _, _, _ = parse(log.read_bytes())
    groups: dict = {}
    for ip, time, request, _, _ in records:
        n, times = groups.get((ip, request), (0, set()))
        groups[(ip, request)] = (n + 1, times | {time})
    keys = sorted(groups, key=lambda k: (k[0].encode(), k[1].encode()))
    assert parts(tmp_path / "small") == "".join(
        f"{ip}\t{request}\t{groups[(ip, request)][0]}\t{len(groups[(ip, request)][1])}\n" for ip, request in keys
    ).encode()


# --- field names ------------------------------------------------------------------------------------------

RULE = "(ASCII letters, digits, _ and -, starting with a letter or digit)"


def test_every_field_name_a_flow_gives_is_checked_with_one_rule():
    # derive, rename and the aggregates made any string a field (JSON key "", partition directory "=200", a
    # partition_by "../x" wrote outside the output); names starting with _ were taken for the engines' own
    # columns (Spark's _order: a sort after derive(_order=...) wrote the row numbers instead of the values)
    logs = L.read()
    assert _error(lambda: logs.derive(**{"../x": L.col("response")}, name="d")) == \
        f"derive 'd': invalid field name '../x' {RULE}"
    assert _error(lambda: logs.derive(**{"": L.col("response")})) == f"derive (unnamed): invalid field name '' {RULE}"
    assert _error(lambda: logs.derive(**{"a\tb": L.lit(1)})) == f"derive (unnamed): invalid field name 'a\\tb' {RULE}"
    assert _error(lambda: logs.derive(_order=L.col("request"))) == \
        f"derive (unnamed): invalid field name '_order' {RULE}"
    assert _error(lambda: logs.derive(**{"-x": L.lit(1)})) == f"derive (unnamed): invalid field name '-x' {RULE}"
    assert _error(lambda: logs.derive(**{"größe": L.lit(1)})) == \
        f"derive (unnamed): invalid field name 'größe' {RULE}"
    assert _error(lambda: logs.rename(response="a/b")) == f"rename (unnamed): invalid field name 'a/b' {RULE}"
    assert _error(lambda: logs.rename({"ip": ""})) == f"rename (unnamed): invalid field name '' {RULE}"
    assert _error(lambda: logs.group_by("ip").agg(**{"n=1": L.count()})) == \
        f"groupby (unnamed): invalid field name 'n=1' {RULE}"
    # where a field is named, the same rule and message
    assert _error(lambda: logs.select("ip", "../x")) == f"select (unnamed): invalid field name '../x' {RULE}"
    assert _error(lambda: logs.group_by("a b").agg(n=L.count())) == f"groupby (unnamed): invalid field name 'a b' {RULE}"
    assert _error(lambda: logs.sort(L.desc("_x"))) == f"sort (unnamed): invalid field name '_x' {RULE}"
    assert _error(lambda: logs.top(1, by="size", per="../x")) == f"top (unnamed): invalid field name '../x' {RULE}"
    assert _error(lambda: logs.write("o", partition_by="../x")) == f"sink (unnamed): invalid field name '../x' {RULE}"
    assert _error(lambda: logs.join(logs.select("ip"), on=("ip", "i p"))) == \
        f"hashjoin (unnamed): invalid field name 'i p' {RULE}"
    assert _error(lambda: L.read(fields=("ip", "../x"))) == f"parse 'parse': invalid field name '../x' {RULE}"
    assert _error(lambda: L.col("../x")) == f"invalid field name '../x' {RULE}"
    assert _error(lambda: L.count("")) == f"invalid field name '' {RULE}"
    # the names that pass
    ok = logs.derive(**{"Day-1": L.lit(1), "2xx": L.lit(2), "a_b": L.lit(3)}).rename({"Day-1": "d-1"})
    assert ok.fields == ("ip", "time", "request", "response", "size", "d-1", "2xx", "a_b")


def test_two_fields_that_differ_only_in_case_are_refused():
    # on Spark (case-insensitive by default) derive(IP=...) replaced ip: both columns held the request
    logs = L.read()
    assert _error(lambda: logs.derive(IP=L.col("request"), name="d")) == \
        "derive 'd': fields 'ip' and 'IP' differ only in case (Spark, Hive and DuckDB take them for one field)"
    assert _error(lambda: logs.rename(time="Size")) == \
        "rename (unnamed): fields 'Size' and 'size' differ only in case (Spark, Hive and DuckDB take them for one field)"


def test_a_flow_file_whose_partition_field_would_leave_the_output_is_one_line_and_writes_nothing(tmp_path):
    # was exit 0 with x=200, x=206, ... written beside the output directory, outside its commit
    (tmp_path / "o3").mkdir()
    out = tmp_path / "o3" / "out"
    f = _flow_file(tmp_path, """\
        import logetl.api as L
        def flow(fmt):
            r = L.read(fmt, fields=("ip", "response")).derive(**{"../x": L.col("response")}, name="d")
            return L.Flow("esc", [r.write("o", partition_by="../x")])
        """)
    assert _one_line_error(logetl("run", f, "--input", LOG, "--output", f"o={out}", "-q")) == \
        f"Error: {f}:3: derive 'd': invalid field name '../x' {RULE}\n"
    assert os.listdir(tmp_path / "o3") == []


def test_a_log_format_whose_field_name_breaks_the_rule_is_refused_naming_the_variable():
    from logetl import formats

    with pytest.raises(formats.FormatError) as caught:
        formats.compile_format('$remote_addr "$_order"')
    assert str(caught.value) == ("$_order at position 15 of the format gives the field name '_order': a field "
                                 "name is ASCII letters, digits, _ and -, starting with a letter or digit")
    with pytest.raises(formats.FormatError) as caught:
        formats.compile_format("$remote_addr $Host $host")
    assert str(caught.value) == ("$host at position 20 of the format gives the field name 'host', which differs "
                                 "only in case from 'Host' (Spark, Hive and DuckDB take them for one)")
    assert formats.compile_format("$remote_addr $Host").fields == ("ip", "Host")
