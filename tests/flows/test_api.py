"""The public flow API and ``logetl run`` as a user meets them: flows checked when defined (one exact line
per mistake), flow files (errors with file and line), the run command's options, restart after a user's
checkpoint, and the blocking operators that are new (group_by, top) within a tiny memory budget."""
from __future__ import annotations

import os
import textwrap

import pytest

import logetl.api as L
from conftest import CORPUS, ROOT, logetl, parts
from logetl.assembly import AssemblyError
from logetl.expressions import ExpressionError
from logetl.job import run_flow

EXAMPLES = os.path.join(ROOT, "examples")
LOG = os.path.join(CORPUS, "corpus.log")


def _error(define) -> str:
    with pytest.raises((AssemblyError, ExpressionError)) as caught:
        define()
    return str(caught.value)


# --- checked when defined -----------------------------------------------------------------------------------

def test_mistakes_fail_when_the_flow_is_defined_with_one_exact_line():
    logs = L.read()
    assert _error(lambda: logs.filter(L.col("status") == "200")) == \
        "filter (unnamed): no field 'status' (fields: ip, time, request, response, size, referer, user_agent)"
    assert _error(lambda: logs.filter(L.col("response") >= 400, name="errors")) == \
        "filter 'errors': cannot compare response (string) with 400 (integer): use to_int() or a string literal"
    assert _error(lambda: logs.filter(L.col("size").to_int())) == \
        "filter (unnamed): to_int(size) is integer, not boolean"
    assert _error(lambda: logs.derive(ip=L.lit("x"))) == \
        "derive (unnamed): field 'ip' exists (rename or select first)"
    assert _error(lambda: logs.derive(n="size")) == \
        "derive: n must be an expression (col(...), lit(...), ...), not 'size'"
    assert _error(lambda: logs.filter(L.col("request").matches(r"^GET \d+"))) == \
        r"regex '^GET \\d+': escape \d is not portable at offset 5 (see the portable regex subset in the flows guide)"
    assert _error(lambda: logs.group_by("ip").agg()) == \
        "groupby (unnamed): no aggregates (use unique() for distinct keys)"
    assert _error(lambda: logs.group_by("ip").agg(n=L.sum("request"))) == \
        "groupby (unnamed): sum: request is string, not integer"
    assert _error(lambda: logs.join(logs.select("ip", "time"), on="ip")) == \
        "hashjoin (unnamed): fields on both sides: time (rename one side first)"
    assert _error(lambda: logs.sort("day")) == \
        "sort (unnamed): no field 'day' in ip, time, request, response, size, referer, user_agent"
    assert _error(lambda: logs.limit(-1)) == "limit: n is a count from 0 to 2,147,483,647, not -1"
    assert _error(lambda: L.read(fields=("ip", "time", "ip"))) == "parse 'parse': field 'ip' is named twice"
    assert _error(lambda: L.Flow("two", [logs.write("a"), L.read().write("b")])) == \
        "flow 'two': the input is read more than once (a run binds one input: read it once and branch)"
    assert _error(lambda: L.Flow("dup", [logs.write("a"), logs.write("a")])) == \
        "flow 'dup': two sinks write the same output tap 'a'"
    with pytest.raises(ExpressionError, match="not a Python truth value"):
        bool(L.col("ip") == "x")


def test_a_flow_reads_one_input_whatever_the_taps():
    """A second read with another tap name read the same --input again: lines, malformed lines and the
    trap doubled, a "join of two logs" joined the log with itself."""
    a = L.read(fields=("ip",)).unique(name="a_ips")
    b = L.read(fields=("ip", "size"), tap="second", name="parse_b")
    assert _error(lambda: L.Flow("tap2", [b.join(a, on="ip").write("out")])) == \
        "flow 'tap2': the input is read more than once, by taps input and second (a run binds one input: " \
        "read it once and branch)"
    logs = L.read(fields=("ip", "size"), tap="second")      # one read, under any tap name, is a flow
    flow = L.Flow("one", [logs.join(logs.select("ip").unique(), on="ip").write("out")])
    assert [n.tap for n in flow.sources] == ["second"]


def test_a_string_where_a_list_is_expected_is_refused_naming_it():
    """A string was taken as the list of its characters: is_in("200") kept responses in ('2', '0', '0'),
    i.e. none; fields="ip" said the format had no field 'i'."""
    logs = L.read()
    assert _error(lambda: logs.filter(L.col("response").is_in("200"))) == \
        "is_in takes a list of values, not the string '200': is_in(['200'])"
    assert _error(lambda: logs.filter(L.col("response").is_in(200))) == \
        "is_in takes a list of values, not 200: is_in([200])"
    assert _error(lambda: L.read(fields="ip")) == \
        "read: fields takes a list of field names, not the string 'ip': fields=['ip']"
    assert _error(lambda: L.read(fields=("ip", L.col("time")))) == "read: a field is a name, not <expression time>"
    assert _error(lambda: logs.select(["ip", "time"])) == \
        "select (unnamed): a field is a name, not ['ip', 'time'] (select('ip', 'time'))"
    assert _error(lambda: logs.group_by(["ip", "time"]).agg(n=L.count())) == \
        "groupby (unnamed): a key is a field name, not ['ip', 'time'] (group_by('ip', 'time'))"
    assert _error(lambda: logs.top(1, by="size", per=L.col("ip"))) == \
        "top: per is a field name or a list of them, not <expression ip>"
    # a set of values: sorted, so that the definition (and a restart's check of it) is the same every run
    assert logs.filter(L.col("response").is_in({"404", "200", "304"})).describe() == \
        "response in ('200', '304', '404')"
    assert logs.filter(L.col("response").is_in(["404", "200"])).describe() == "response in ('404', '200')"


def test_errors_name_the_value_at_fault():
    logs = L.read()
    assert _error(lambda: logs.top(3, by=L.col("size"))) == \
        "a sort key is a field name, asc(name) or desc(name), not <expression size>"     # was TypeError
    assert _error(lambda: logs.sort(L.col("size"))) == \
        "a sort key is a field name, asc(name) or desc(name), not <expression size>"
    assert _error(lambda: logs.select("ip", "ip")) == "select (unnamed): field 'ip' is named twice"
    assert _error(lambda: logs.group_by("ip", "ip").agg(n=L.count())) == \
        "groupby (unnamed): key 'ip' is named twice"
    sized = logs.derive(n=L.col("size").to_int()).select("n", "time")
    assert _error(lambda: sized.join(logs.select("ip"), on=("n", "ip"), name="j")) == \
        "hashjoin 'j': key types differ: the streamed side's n is integer, the held side's ip is string " \
        "(convert one: to_int() or concat())"


def test_the_api_module_names_what_runs_a_flow():
    import logetl.job

    assert "logetl.api.run" not in L.__doc__ and "logetl.job.run_flow" in L.__doc__
    assert callable(logetl.job.run_flow)


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
        f"Error: {f}:5: filter (unnamed): no field 'status' (fields: ip, time, request, response, size, referer, user_agent)\n"
    f = _flow_file(tmp_path, "import logetl.api as L\n\ndef flow(fmt)\n    pass\n")
    assert _one_line_error(logetl("explain", f)) == f"Error: {f}:3: syntax error: expected ':'\n"
    f = _flow_file(tmp_path, "import logetl.api as L\nx = 1 / 0\n")
    assert _one_line_error(logetl("explain", f)) == f"Error: {f}:2: ZeroDivisionError: division by zero\n"
    f = _flow_file(tmp_path, "FLOW = None\n")
    assert _one_line_error(logetl("explain", f)) == \
        f"Error: {f}: defines no flow (a function flow(fmt) that returns logetl.api.Flow)\n"
    f = _flow_file(tmp_path, "def flow(fmt):\n    return 42\n")
    assert _one_line_error(logetl("explain", f)) == \
        f'Error: {f}:1: flow() returned int, not a logetl.api.Flow (return L.Flow("NAME", [pipe.write("TAP"), ...]))\n'
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


def test_a_flow_file_imports_the_modules_beside_it(tmp_path):
    """As `python FLOW.py` does: `logetl run` had its bin directory first on sys.path and `python -m logetl`
    the current directory, so a helper module beside the flow was found only from its directory."""
    flows = tmp_path / "flows"
    flows.mkdir()
    (flows / "helpers_of_mine.py").write_text("import logetl.api as L\n\ndef ok():\n"
                                              "    return L.col('response') == '200'\n")
    f = flows / "useh.py"
    f.write_text("import logetl.api as L\nfrom helpers_of_mine import ok\n\ndef flow(fmt):\n"
                 "    return L.Flow('useh', [L.read(fmt).filter(ok(), name='ok').write('o')])\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p = logetl("run", str(f), "--input", LOG, "--output", f"o={tmp_path / 'o'}", "-q", cwd=str(elsewhere))
    assert p.returncode == 0, p.stderr
    assert parts(tmp_path / "o") and all(r.split(b"\t")[3] == b"200" for r in parts(tmp_path / "o").splitlines())
    # the console script too (its sys.path[0] is its bin directory, not the current one)
    import shutil
    import subprocess
    import sys

    script = shutil.which("logetl", path=os.path.dirname(sys.executable))
    if script:
        p = subprocess.run([script, "explain", "useh.py"], capture_output=True, cwd=str(flows))
        assert p.returncode == 0 and b"operators:" in p.stdout, p.stderr
    # and only while the file loads: sys.path is as it was
    from logetl import flowfile

    before = list(sys.path)
    flowfile.load(str(f))
    assert sys.path == before


def test_a_flow_file_that_exits_or_ignores_the_format_is_one_line(tmp_path):
    f = _flow_file(tmp_path, """\
        import sys

        def flow(fmt):
            sys.exit(3)
        """)
    assert _one_line_error(logetl("explain", f)) == \
        f"Error: {f}:4: the flow file calls sys.exit(3) instead of defining its flow\n"     # was exit 3, no word
    f = _flow_file(tmp_path, "import sys\nsys.exit()\n")
    assert _one_line_error(logetl("explain", f)) == \
        f"Error: {f}:2: the flow file calls sys.exit() instead of defining its flow\n"
    # --format given to a flow that reads another format: the log was parsed with that one, without a word
    f = _flow_file(tmp_path, """\
        import logetl.api as L

        def flow(fmt):
            return L.Flow("ignores", [L.read(fields=("ip",)).write("out")])
        """)
    out = tmp_path / "out"
    assert _one_line_error(logetl("run", f, "--input", LOG, "--output", f"out={out}", "--format", "nginx")) == \
        f"Error: {f}: its flow reads the log format combined, not the one --format gave (nginx): pass flow()'s " \
        "format to read()\n"
    assert _one_line_error(logetl("explain", f, "--format", "%h %l %u %t \"%r\" %>s %b %D")) == \
        f"Error: {f}: its flow reads the log format combined, not the one --format gave " \
        "('%h %l %u %t \"%r\" %>s %b %D'): pass flow()'s format to read()\n"
    assert logetl("explain", f, "--format", "combined").returncode == 0      # the format it reads
    assert logetl("explain", f).returncode == 0
    assert not out.exists()


def test_run_flow_checks_its_arguments_as_the_command_line_does(tmp_path):
    """The command line's options are run_flow's keyword arguments: a bad one is refused, with the command
    line's message where it has one, before anything is made."""
    from logetl.errors import UsageError
    from logetl.job import engine_options_for

    def flow():
        return L.Flow("opts", [L.read(fields=("ip",)).sort("ip").write("o")])

    out = tmp_path / "o"
    for kw, message in [
        (dict(engine_options={"memory_limit": 0}), "--memory-limit 0 is too small: at least 384M"),
        (dict(engine_options={"memory_limit": "100M"}), "--memory-limit '100M' is too small: at least 384M"),
        (dict(engine_options={"memory_limit": "lots"}), "--memory-limit 'lots' is not a size (examples: 512M, 2G)"),
        (dict(engine_options={"memory_limit": 5e8}), "--memory-limit 500000000.0 is not a size (examples: 512M, 2G)"),
        (dict(engine_options={"memroy_limit": 1 << 30}),
         "engine_options: unknown option 'memroy_limit' (the local engine takes memory_limit, spill_buffers)"),
        (dict(engine_options={"master": "local[2]"}), "--master and --conf are Spark settings: use them with --hdfs"),
        (dict(engine_options={"conf": {"spark.executor.memory": "2g"}}),
         "--master and --conf are Spark settings: use them with --hdfs"),
        (dict(engine_options={"spill_buffers": -1}), "engine_options: spill_buffers is a number of bytes > 0, not -1"),
        (dict(engine_options=["memory_limit"]), "engine_options must be a dict of option: value, not ['memory_limit']"),
        (dict(engine="spark", engine_options={"memory_limit": "1G"}),
         "--memory-limit is a setting of the local engine: on Spark use --conf spark.executor.memory=SIZE"),
        (dict(engine="spark", engine_options={"spill_buffers": 1}),
         "engine_options: spill_buffers is an option of the local engine (the spark engine takes master, conf)"),
        (dict(engine="spark", engine_options={"master": "local[x]"}),
         "--master 'local[x]' is not a Spark master URL (local, local[N], local[*], spark://HOST:PORT, yarn, k8s://URL)"),
        (dict(engine="spark", engine_options={"conf": {"spark.sql.shuffle.partitions": 4}}),
         "engine_options: conf 'spark.sql.shuffle.partitions': 4: a Spark setting is a name and a string value "
         "(as --conf KEY=VALUE gives them)"),
        (dict(engine="hdfs"), "unknown engine 'hdfs' (choose from local, spark)"),
        (dict(overwrite="no"), "overwrite must be True or False, not 'no'"),
        (dict(quiet=1), "quiet must be True or False, not 1"),
        (dict(incremental="yes"), "incremental must be True or False, not 'yes'"),
        (dict(trap=5), "trap must be a path (a string), not 5"),
        (dict(work_dir=b"w"), "work_dir must be a path (a string), not b'w'"),
        (dict(application=7), "application must be a name (a string), not 7"),
        (dict(tags={"team": 1}), "tags must be a dict of strings {KEY: VALUE}, not {'team': 1}"),
    ]:
        with pytest.raises(UsageError) as caught:
            run_flow(flow(), LOG, {"o": str(out)}, **{"monitor": False, "quiet": True, **kw})
        assert str(caught.value) == message, kw
    assert os.listdir(tmp_path) == []          # no output, staging or working directory was made
    # overwrite="no" replaced an existing output; the size strings of --memory-limit are taken
    run = run_flow(flow(), LOG, {"o": out}, monitor=False, quiet=True, engine_options={"memory_limit": "512M"})
    assert run.status == "SUCCESSFUL" and run.options["memory_limit"] == 512 << 20
    with pytest.raises(UsageError):
        run_flow(flow(), LOG, {"o": str(out)}, monitor=False, quiet=True, overwrite="no")
    assert engine_options_for("spark", None) == {"master": None, "conf": {}}      # as the command line gives them
    assert engine_options_for("local", {"memory_limit": None}) == {}


def test_the_command_line_refuses_an_empty_memory_limit_or_master(tmp_path):
    """--memory-limit '' ran with the default; --master '' on the local engine was not refused."""
    out = str(tmp_path / "o")
    assert _one_line_error(logetl("filter", "--input", LOG, "--output", out, "--memory-limit", "")) == \
        "Error: --memory-limit '' is not a size (examples: 512M, 2G)\n"
    assert _one_line_error(logetl("filter", "--input", LOG, "--output", out, "--master", "")) == \
        "Error: --master and --conf are Spark settings: use them with --hdfs\n"
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

    small = _run(flow(), log, tmp_path / "small", memory_limit=400 << 20, spill_buffers=64 * 1024)
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
                         engine_options={"memory_limit": 400 << 20, "spill_buffers": 64 * 1024})
    assert isinstance(small_run, FlowRun) and "groupby" in small_run.spilled
    assert parts(tmp_path / "small") == _run(flow(), log, tmp_path / "large")
    # and both are the result, computed here in plain Python from the reference parser
    from reference import parse

    records, _, _, _ = parse(log.read_bytes(), drop_dash=False)     # a flow's read keeps size '-' records
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
    assert ok.fields == ("ip", "time", "request", "response", "size", "referer", "user_agent", "d-1", "2xx", "a_b")


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
