"""The Spark engine's parse paths (logetl's kernel in the executors' JVMs, or in their Python workers over
Arrow batches, or Spark's regular expressions) and the choice between them: the kernel's Arrow entry point
against the line kernel, every Spark parse path against the checked-in expected bytes, the notices,
``--conf logetl.parse``, and the fallback when the executors' Python cannot import logetl. (The JVM's kernel
against the Python workers': tests/spark/test_spark_jvm.py; a standalone cluster: tests/spark/test_spark_cluster.py.)"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CORPUS, corpus, logetl, parts, read, require, spark_missing
from format_cases import CASES, NGINX_ISSUE
from logetl import contract, formats
from logetl.engines import kernel
from logetl.job import run_program
from logetl.listener import SUCCESSFUL
from test_formats import FORMAT_IDS, near_lines

pa = pytest.importorskip("pyarrow")
scan = pytest.importorskip("logetl._scan", reason="the native kernel is not built (no C compiler)")

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")
JVM = "Spark parses with logetl's native kernel in the executors' JVMs"
PYTHON = "Spark parses with logetl's native kernel in the executors' Python workers"
BUILTIN = "Spark parses with its built-in regular expressions"
NOTICES = {"jvm": JVM, "python": PYTHON, "builtin": BUILTIN}


# --- the kernel's Arrow entry point -------------------------------------------------------------------------

def arrow_parse(fmt, keep, lines: list[bytes], large: bool = False, cut: tuple[int, int] | None = None):
    """What ``parse_arrow`` makes of ``lines`` as one Arrow binary array (optionally a slice of a larger
    one): the kept records' TSV, the malformed (line index, reason code) and the dash count, i.e. what
    ``kernel.Parser`` reports for the same lines."""
    from logetl.engines.spark.native import parse_batches

    spec = (None, tuple(range(5)), 4) if fmt.legacy else \
        (fmt.native_program(), tuple(fmt.fields.index(f) for f in keep), fmt.size_index())
    array = pa.array(lines, pa.large_binary() if large else pa.binary())
    if cut:
        array = array.slice(*cut)
    inputs = pa.array(range(len(array)), pa.int32())   # each line's input index, as the engine gives it
    batch = pa.RecordBatch.from_arrays([array, inputs], names=["value", "_input"])
    out, = list(parse_batches(spec, iter([batch])))
    columns = [c.to_pylist() for c in out.columns[:len(keep)]]
    status = out.column("_status").to_pylist()
    tsv = b"".join("\t".join(c[i] for c in columns).encode() + b"\n" for i, s in enumerate(status) if s == 0)
    bad = [(i, s) for i, s in enumerate(status) if 1 <= s <= 3]
    # one row per line, in order; the raw line comes back for malformed lines only (the order key is added
    # in the JVM, after the parse), the input's index as it came; the first five malformed lines are marked
    # as samples
    assert out.num_rows == len(array)
    assert out.schema.names == [f"__logetl_f{i}" for i in range(len(keep))] + ["_status", "value", "_sample", "_input"]
    assert out.column("_input").to_pylist() == inputs.to_pylist()
    assert out.column("value").to_pylist() == [array[i].as_py() if 1 <= s <= 3 else None for i, s in enumerate(status)]
    malformed = [i for i, s in enumerate(status) if 1 <= s <= 3]
    assert [i for i, x in enumerate(out.column("_sample").to_pylist()) if x] == malformed[:5]
    assert out.schema.field(0).type == (pa.large_string() if large else pa.string())
    return tsv, bad, status.count(4)


def line_parse(fmt, keep, lines: list[bytes]):
    p = kernel.Parser(fmt, keep).parse(b"".join(line + b"\n" for line in lines), True)
    return p.tsv, [(i, code) for i, _, _, code in p.malformed], p.n_dash


def corpus_lines() -> list[bytes]:
    return contract.split_lines(corpus("corpus.log"))


@pytest.mark.parametrize("large", [False, True], ids=["binary", "large_binary"])
def test_arrow_kernel_equals_the_line_kernel_on_the_corpus(large):
    fmt = formats.compile_format(None)
    lines = corpus_lines()
    assert arrow_parse(fmt, contract.FIELDS, lines, large) == line_parse(fmt, contract.FIELDS, lines)
    # a slice of a larger array (Arrow's offset): the lines of the slice only
    got = arrow_parse(fmt, contract.FIELDS, [b"x"] * 3 + lines + [b"y"], large, cut=(3, len(lines)))
    assert got == line_parse(fmt, contract.FIELDS, lines)


def test_arrow_kernel_equals_the_line_kernel_on_the_real_sample(sample):
    fmt = formats.compile_format(None)
    lines = contract.split_lines(read(sample))
    assert arrow_parse(fmt, contract.FIELDS, lines) == line_parse(fmt, contract.FIELDS, lines)


@pytest.mark.parametrize("spec", list(CASES), ids=[FORMAT_IDS.get(s, s) for s in CASES])
def test_arrow_kernel_equals_the_line_kernel_on_the_format_cases(spec):
    fmt = formats.compile_format(spec)
    lines = [raw for _, raw, _ in CASES[spec]]
    for keep in (fmt.fields, tuple(reversed(fmt.fields[:3]))):   # all fields; some, in another order
        assert arrow_parse(fmt, keep, lines) == line_parse(fmt, keep, lines)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_arrow_kernel_equals_the_line_kernel_on_generated_lines(data):
    fmt = formats.compile_format(NGINX_ISSUE)
    lines = [line.replace(b"\n", b"") for line in data.draw(st.lists(near_lines(fmt), max_size=8))]
    assert arrow_parse(fmt, fmt.fields, lines) == line_parse(fmt, fmt.fields, lines)


def joined_parse(fmt, keep, lines: list[bytes], sinks: tuple, large: bool = False, per_batch: int = 4):
    """What ``join_batches`` makes of ``lines`` in batches of ``per_batch``: each sink's bytes as the text
    writer writes its rows (each row's value and a newline), the trap's the same way, the samples (status,
    line) and the summed counters."""
    from logetl.engines.spark.native import COUNTERS, join_batches

    spec = (None, tuple(range(5)), 4) if fmt.legacy else \
        (fmt.native_program(), tuple(fmt.fields.index(f) for f in keep), fmt.size_index())
    array = pa.array(lines, pa.large_binary() if large else pa.binary())
    # each batch from an input of its own (its index: the batch's number), as a batch is a part of one file
    batches = [pa.RecordBatch.from_arrays([array.slice(i, per_batch), pa.array([i // per_batch] * len(array.slice(i, per_batch)),
                                                                               pa.int32())], names=["value", "_input"])
               for i in range(0, len(lines), per_batch)]
    written = {t: b"" for t in range(len(sinks) + 1)}
    samples, counters = [], dict.fromkeys(COUNTERS, 0)
    for k, out in enumerate(join_batches(spec, sinks, True, iter(batches))):   # an out batch per batch
        assert out.schema.field("value").type == (pa.large_binary() if large else pa.binary())
        for row in out.to_pylist():
            if row["__logetl_output"] == -1:   # the batch's counters, its last row
                counters = {c: counters[c] + row[c] for c in COUNTERS}
            elif row["__logetl_output"] == len(sinks) + 1:
                samples.append((row["_status"], row["value"]))
                assert row["_input"] == k   # its batch's input
            else:
                assert row["value"] is not None and row["_status"] is None and row["_input"] is None
                written[row["__logetl_output"]] += row["value"] + b"\n"
        assert out.column("__logetl_output").to_pylist()[-1] == -1
    return [written[t] for t in range(len(sinks))], written[len(sinks)], samples, counters


@pytest.mark.parametrize("large", [False, True], ids=["binary", "large_binary"])
def test_joined_lines_are_the_line_kernels_on_the_corpus(large):
    """``join_batches`` (the workers write the sinks' TSV lines, joined): each sink's bytes are the line
    kernel's TSV of its fields, the trap its malformed lines, the counters its counts, the samples the
    first five malformed lines, whatever the batches."""
    fmt = formats.compile_format(None)
    lines = corpus_lines()
    reference = kernel.Parser(fmt, contract.FIELDS).parse(b"".join(line + b"\n" for line in lines), True)
    chosen = kernel.Parser(fmt, ("size", "ip")).parse(b"".join(line + b"\n" for line in lines), True)
    malformed = [(code, lines[i]) for i, _, _, code in reference.malformed]
    for per_batch in (1, 4, len(lines)):
        sinks, trap, samples, counters = joined_parse(fmt, contract.FIELDS, lines, ((0, 1, 2, 3, 4), (4, 0)),
                                                      large, per_batch)
        assert sinks == [reference.tsv, chosen.tsv]
        assert trap == b"".join(line + b"\n" for _, line in malformed)
        assert samples == malformed[:5]
        assert counters == {"lines": len(lines), "kept": reference.tsv.count(b"\n"), "dash": reference.n_dash,
                            "header": reference.n_header, "other": reference.n_other,
                            **{f"reason{c}": sum(code == c for code, _ in malformed) for c in (1, 2, 3)}}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_joined_lines_are_the_line_kernels_on_generated_lines(data):
    fmt = formats.compile_format(NGINX_ISSUE)
    lines = [line.replace(b"\n", b"") for line in data.draw(st.lists(near_lines(fmt), max_size=12))]
    keep = fmt.fields
    chosen = tuple(reversed(range(min(3, len(keep)))))
    reference = kernel.Parser(fmt, keep).parse(b"".join(line + b"\n" for line in lines), True)
    subset = kernel.Parser(fmt, [keep[i] for i in chosen]).parse(b"".join(line + b"\n" for line in lines), True)
    sinks, trap, _, counters = joined_parse(fmt, keep, lines, (tuple(range(len(keep))), chosen), per_batch=3)
    assert sinks == [reference.tsv, subset.tsv]
    assert trap == b"".join(lines[i] + b"\n" for i, _, _, _ in reference.malformed)
    assert (counters["lines"], counters["dash"]) == (len(lines), reference.n_dash)


def test_arrow_kernel_refuses_offsets_that_do_not_fit_its_buffers():
    array = pa.array([b"abc", b"de"], pa.binary())
    _, offsets, data = array.buffers()
    with pytest.raises(ValueError, match="offsets buffer shorter than the slice"):
        scan.parse_arrow(offsets, data, 1, 2, False, None)
    with pytest.raises(ValueError, match="offsets outside the data buffer"):
        scan.parse_arrow(offsets, data.slice(0, 2), 0, 2, False, None)


# --- both Spark parse paths, the same bytes -----------------------------------------------------------------

PARSES = ["jvm", "python", "builtin"]


def spark_run(program, input_path, outs, parse, **kw):
    return run_program(program, input_path, outs, engine="spark",
                       engine_options={"conf": {"logetl.parse": parse}}, **kw)


@pytest.mark.parametrize("parse", PARSES)
def test_branch_and_join_on_the_corpus(spark_session, tmp_path, parse):
    outs = {"output1": str(tmp_path / "b1"), "output2": str(tmp_path / "b2")}
    result = spark_run("branch", CORPUS_LOG, outs, parse, trap=str(tmp_path / "trap"))
    assert result.status == SUCCESSFUL
    assert result.notices == [f"{NOTICES[parse]} (--conf logetl.parse={parse})"]
    assert parts(outs["output1"]) == corpus("branch.tsv") == parts(outs["output2"])
    assert parts(tmp_path / "trap") == corpus("trap.log")
    counts = json.loads(corpus("counts.json"))
    assert (result.lines_read, result.malformed, result.dropped_size_dash) == \
        (counts["lines"], counts["malformed"], counts["dropped_size_dash"])
    from corpus_cases import CASES as CORPUS_CASES

    first = [(expected, contract.display(raw)) for _, raw, expected in CORPUS_CASES if isinstance(expected, str)][:5]
    assert [(reason, text) for _, reason, text in result.malformed_samples] == first
    result = spark_run("join", CORPUS_LOG, {"output": str(tmp_path / "j")}, parse, trap=str(tmp_path / "jt"))
    assert parts(tmp_path / "j") == corpus("join.tsv")
    assert parts(tmp_path / "jt") == corpus("trap.log")


@pytest.mark.parametrize("parse", PARSES)
def test_the_real_sample_gives_the_local_engines_bytes(spark_session, tmp_path, sample, parse):
    for program in ("branch", "join"):
        outs = {"output1": str(tmp_path / f"{program}1"), "output2": str(tmp_path / f"{program}2")} \
            if program == "branch" else {"output": str(tmp_path / program)}
        local = {k: str(tmp_path / f"local-{k}-{program}") for k in outs}
        run_program(program, sample, local, engine="local", trap=str(tmp_path / f"local-trap-{program}"))
        spark_run(program, sample, outs, parse, trap=str(tmp_path / f"trap-{program}"))
        for k in outs:
            assert parts(outs[k]) == parts(local[k])
        assert parts(tmp_path / f"trap-{program}") == parts(tmp_path / f"local-trap-{program}")


@pytest.mark.parametrize("parse", PARSES)
@pytest.mark.parametrize("spec", list(CASES), ids=[FORMAT_IDS.get(s, s) for s in CASES])
def test_format_cases_on_both_paths(spark_session, tmp_path, spec, parse):
    """Each format's hand-worked lines as one log through a flow that keeps some fields in another order
    (the token program's output indexes), on both paths: the local engine's bytes and counters."""
    import logetl.api as L

    fmt = formats.compile_format(spec)
    keep = tuple(reversed(fmt.fields[:3]))
    log = tmp_path / "cases.log"
    log.write_bytes(b"\n".join(raw for _, raw, _ in CASES[spec]) + b"\r\n")
    flow = L.Flow("cases", [L.read(fmt, fields=keep).write("output")])
    from logetl.job import run_flow

    got = run_flow(flow, str(log), {"output": str(tmp_path / "s")}, engine="spark", trap=str(tmp_path / "st"),
                   engine_options={"conf": {"logetl.parse": parse}})
    want = run_flow(flow, str(log), {"output": str(tmp_path / "l")}, engine="local", trap=str(tmp_path / "lt"))
    assert parts(tmp_path / "s") == parts(tmp_path / "l")
    assert parts(tmp_path / "st") == parts(tmp_path / "lt")
    assert (got.lines_read, got.malformed, got.dropped_size_dash) == \
        (want.lines_read, want.malformed, want.dropped_size_dash)


def test_auto_takes_the_jvm_path_when_the_executors_can(spark_session, tmp_path, monkeypatch):
    """The test session's JVM was launched by logetl, with its jar: the default (auto) takes the JVM path
    and says so; the check runs once a session, in the driver's JVM (a local master's executors are that
    JVM), and the executors' Python is not asked."""
    from logetl.engines.spark import parse as spark_parse
    from logetl.engines.spark import jvm as spark_jvm
    from logetl.engines.spark import native as spark_native

    sc = spark_session.sparkContext
    for path in ("jvm", "python"):
        monkeypatch.delitem(spark_parse._NATIVE_CHECKS, (sc.applicationId, path), raising=False)
    checks = []
    check = spark_jvm.check
    monkeypatch.setattr(spark_jvm, "check", lambda *a: checks.append(a[1:]) or check(*a))
    asked = []  # a local master's Python check: a process of the interpreter its workers run
    probe_in = spark_native.probe_in
    monkeypatch.setattr(spark_native, "probe_in", lambda python: asked.append(python) or probe_in(python))
    for out in ("f", "g"):
        result = run_program("filter", CORPUS_LOG, {"output": str(tmp_path / out)}, engine="spark")
        assert result.notices == [JVM]
        assert parts(tmp_path / out) == corpus("filter.tsv")
    assert (checks, asked) == ([(False, sc.defaultParallelism)], [])
    assert spark_parse._NATIVE_CHECKS[(sc.applicationId, "jvm")] == (True, "")


def test_the_python_path_checks_the_workers_interpreter_once(spark_session, tmp_path, monkeypatch):
    """Forced to the Python workers (the path where the JVM's cannot run), the check asks a process of the
    interpreter they run (a local master: the engine sets PYSPARK_PYTHON to this one), once a session."""
    from logetl.engines.spark import parse as spark_parse
    from logetl.engines.spark import native as spark_native

    sc = spark_session.sparkContext
    monkeypatch.delitem(spark_parse._NATIVE_CHECKS, (sc.applicationId, "python"), raising=False)
    jobs = []   # on a cluster the check is a job; on a local master, none
    parallelize = sc.parallelize
    monkeypatch.setattr(sc, "parallelize", lambda *a, **k: jobs.append(a) or parallelize(*a, **k))
    asked = []
    probe_in = spark_native.probe_in
    monkeypatch.setattr(spark_native, "probe_in", lambda python: asked.append(python) or probe_in(python))
    for out in ("f", "g"):
        result = spark_run("filter", CORPUS_LOG, {"output": str(tmp_path / out)}, "python")
        assert result.notices == [f"{PYTHON} (--conf logetl.parse=python)"]
        assert parts(tmp_path / out) == corpus("filter.tsv")
    assert (jobs, asked) == ([], [sc.pythonExec])
    assert sc.pythonExec == sys.executable
    assert spark_parse._NATIVE_CHECKS[(sc.applicationId, "python")] == (True, "")


def test_the_local_check_runs_the_workers_interpreter(tmp_path):
    """``probe_in`` answers as a worker would: this interpreter has logetl (in the driver's version); a
    missing interpreter is named in one line."""
    from logetl import __version__
    from logetl.engines.spark.native import probe_in

    assert probe_in(sys.executable) == ("ok", __version__)
    missing = str(tmp_path / "no-such-python")
    assert probe_in(missing) == ("missing", f"cannot run {missing!r}: No such file or directory")


# --- the command line: the setting, the notices, the fallback -----------------------------------------------

@pytest.mark.parametrize("conf,message", [
    ("logetl.parse=fast", "Error: --conf logetl.parse=fast: choose from auto, native, jvm, python, builtin"),
    ("logetl.jvm.cds=on", "Error: --conf logetl.jvm.cds=on: choose from auto, off"),
    ("logetl.jvm.jit=c1", "Error: --conf logetl.jvm.jit=c1: choose from auto, tiered"),
    ("logetl.prase=native",
     "Error: unknown setting --conf logetl.prase=native (logetl's are logetl.jvm.cds, logetl.jvm.jit, logetl.parse)"),
])
def test_bad_logetl_setting_is_one_line_exit_2(tmp_path, conf, message):
    p = logetl("filter", "--hdfs", "--conf", conf, "--input", CORPUS_LOG, "--output", str(tmp_path / "o"))
    assert p.returncode == 2
    assert p.stderr.decode().splitlines() == [message]
    assert not os.path.exists(tmp_path / "o")


@pytest.mark.parametrize("key,given,line", [
    ("spark.archives", "no-such.tar.gz#environment", "no such file 'no-such.tar.gz'"),
    ("spark.archives", "file:DIR/no%20such.tar.gz", "no such file 'DIR/no such.tar.gz'"),
    ("spark.archives", "DIR/env#environment",
     "'DIR/env' is a directory, not a file (an archive: .tar.gz, .tgz, .tar or .zip)"),
    ("spark.files", "DIR/env/a.txt,DIR/no-such.txt", "no such file 'DIR/no-such.txt'"),
    ("spark.files", "DIR/env", "'DIR/env' is a directory, not a file"),
])
def test_a_shipped_file_that_is_missing_or_a_directory_is_one_line_before_spark_starts(tmp_path, key, given, line):
    """Spark failed its SparkContext with a stack trace for a missing file; for a directory in
    spark.archives, its executors died fetching it and were started again, and the run waited forever (on a
    standalone cluster). Refused before a JVM starts, on any master, the file named as the user gave it (a
    file: URI as its path)."""
    missing = spark_missing()
    require(missing is None, missing or "")
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "a.txt").write_text("a\n")
    given, line = given.replace("DIR", str(tmp_path)), line.replace("DIR", str(tmp_path))
    p = logetl("filter", "--hdfs", "--master", "spark://127.0.0.1:1", "--conf", f"{key}={given}", "--input",
               CORPUS_LOG, "--output", str(tmp_path / "o"), cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.decode().splitlines() == [f"Error: --conf {key}={given}: {line}"]
    assert not os.path.exists(tmp_path / "o")


def python_without_logetl(tmp_path) -> str:
    """An interpreter for the executors that cannot import logetl: a bare virtual environment (no logetl,
    no pyarrow), behind a wrapper that drops this source tree from the PYTHONPATH Spark hands its workers
    (which must keep PySpark's own entries)."""
    import logetl as pkg

    missing = spark_missing()
    require(missing is None, missing or "")
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    src = os.path.dirname(os.path.dirname(os.path.abspath(pkg.__file__)))
    wrapper = tmp_path / "python-without-logetl"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"PYTHONPATH=$(printf %s \"$PYTHONPATH\" | tr : '\\n' | grep -vxF '{src}' | paste -sd: -)\n"
        f"export PYTHONPATH\nexec {venv}/bin/python \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


def notices(stderr: bytes) -> list[str]:
    return [l for l in stderr.decode().splitlines() if l.startswith("logetl: Spark parses")]


def test_fallback_when_the_executors_can_run_no_kernel(tmp_path):
    """No JDK to build the JVM's kernel with (test_spark_jvm.jre_only), and executors' Python workers that
    cannot import logetl: Spark's regular expressions parse, and the notice says why, for both."""
    from test_spark_jvm import jre_only

    env = {"PYSPARK_PYTHON": python_without_logetl(tmp_path), **jre_only(tmp_path)}
    cds = ["--conf", "logetl.jvm.cds=off"]
    jvm_why = f"no javac beside {tmp_path}/jre/bin/java (building the kernel for the JVM needs a JDK, not only a JRE)"
    p = logetl("branch", "--hdfs", "--master", "local[1]", *cds, "--input", CORPUS_LOG, "--output1",
               str(tmp_path / "b1"), "--output2", str(tmp_path / "b2"), "--trap", str(tmp_path / "t"), env=env)
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert notices(p.stderr) == [f"logetl: {BUILTIN}: the executors cannot run logetl's kernel (in their JVMs: "
                                 f"{jvm_why}; in their Python workers: ModuleNotFoundError: No module named 'logetl')"]
    assert "Traceback" not in p.stderr.decode()
    assert parts(tmp_path / "b1") == corpus("branch.tsv")
    assert parts(tmp_path / "t") == corpus("trap.log")
    # forced, a native path refuses to run without it: one line, exit 2 (the engine cannot be used here),
    # before the run starts: no FAILED summary before the line
    for parse, line in (("native", f"the executors cannot run logetl's kernel: in their JVMs: {jvm_why}; in "
                                   "their Python workers: ModuleNotFoundError: No module named 'logetl'"),
                        ("python", "the executors' Python workers cannot run logetl's kernel: ModuleNotFoundError: "
                                   "No module named 'logetl'")):
        p = logetl("filter", "--hdfs", "--master", "local[1]", *cds, "--conf", f"logetl.parse={parse}", "--input",
                   CORPUS_LOG, "--output", str(tmp_path / "f"), env=env)
        assert p.returncode == 2
        assert p.stderr.decode().splitlines() == [f"Error: --conf logetl.parse={parse}, but {line}"]
        assert not os.path.exists(tmp_path / "f")


def test_notice_on_the_command_line(tmp_path):
    missing = spark_missing()
    require(missing is None, missing or "")
    p = logetl("filter", "--hdfs", "--master", "local[1]", "--input", CORPUS_LOG, "--output", str(tmp_path / "f"))
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert notices(p.stderr) == [f"logetl: {JVM}"]
    # the notice comes first: nothing of the JVM's start before it (an incubator-module warning, Spark's
    # "Setting default log level")
    assert p.stderr.decode().splitlines()[0] == f"logetl: {JVM}"
    assert parts(tmp_path / "f") == corpus("filter.tsv")


def test_a_quiet_spark_run_prints_nothing(tmp_path):
    missing = spark_missing()
    require(missing is None, missing or "")
    good = tmp_path / "good.log"
    good.write_bytes(b"".join(read(CORPUS_LOG).splitlines(keepends=True)[:3]))
    p = logetl("filter", "-q", "--hdfs", "--master", "local[1]", "--input", str(good), "--output", str(tmp_path / "f"))
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert p.stderr == b""
    assert parts(tmp_path / "f") != b""


def test_a_jvm_that_exits_with_status_0_before_it_answers_is_one_line(tmp_path):
    """``java -version`` prints its version and exits with status 0: PySpark's launch waited for such a
    JVM forever (it waits while ``not proc.poll()``). Now one line, exit 2, with what the JVM said."""
    missing = spark_missing()
    require(missing is None, missing or "")
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
    said = subprocess.run([java, "-version"], capture_output=True).stderr.decode().splitlines()[0].strip()
    conf = "spark.driver.extraJavaOptions=-version"
    p = logetl("filter", "--hdfs", "--master", "local[1]", "--conf", conf, "--input", CORPUS_LOG,
               "--output", str(tmp_path / "o"))
    assert p.returncode == 2
    assert p.stderr.decode().splitlines() == [
        f"Error: cannot start Spark (local[1]) with --conf {conf}: the JVM exited before it answered, saying: {said}"]
    assert not os.path.exists(tmp_path / "o")


def test_a_ctrl_c_while_the_jvm_has_not_answered_stops_the_jvm_too(tmp_path):
    """A JVM that never answers (a debugger's suspend=y) is waited for; Ctrl-C stops logetl, and the JVM
    with it. PySpark starts the JVM with SIGINT ignored: it outlived logetl, suspended, holding its port and
    the terminal's output (so a caller reading that output to its end waited for ever)."""
    import signal
    import socket

    from conftest import DEFAULT_SIGNALS, free_port

    missing = spark_missing()
    require(missing is None, missing or "")
    port = free_port()
    conf = f"spark.driver.extraJavaOptions=-agentlib:jdwp=transport=dt_socket,server=y,suspend=y,address=127.0.0.1:{port}"
    p = subprocess.Popen([*DEFAULT_SIGNALS, sys.executable, "-m", "logetl", "filter", "--hdfs", "--master", "local[1]", "--conf", conf,
                          "--input", CORPUS_LOG, "--output", str(tmp_path / "o")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # the JVM says so on its stdout once it waits for the debugger
        assert p.stdout.readline() == f"Listening for transport dt_socket at address: {port}\n".encode()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        for task in os.listdir(f"/proc/{p.pid}/task") if p.poll() is None else ():   # (failed: nothing left)
            with open(f"/proc/{p.pid}/task/{task}/children") as f:
                for child in f.read().split():
                    os.kill(int(child), signal.SIGKILL)
        p.kill()
    assert (p.returncode, out, err.decode().splitlines()) == (130, b"", ["logetl: interrupted; no output was committed"])
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):   # the JVM's port is free
        s.connect(("127.0.0.1", port))
    assert not os.path.exists(tmp_path / "o")


@pytest.mark.parametrize("conf,line", [
    ("spark.executor.memory=lots", "Error: cannot start Spark (local[1]) with --conf spark.executor.memory=lots: "
                                   "Executor memory must be a positive number"),
    ("spark.driver.memory=lots", "Error: cannot start Spark (local[1]) with --conf spark.driver.memory=lots: "
                                 "Invalid maximum heap size: -Xmxlots"),
])
def test_a_setting_that_stops_spark_from_starting_is_one_line(tmp_path, conf, line):
    # spark-submit's refusal printed a Java stack trace, then PySpark's "Java gateway process exited"
    missing = spark_missing()
    require(missing is None, missing or "")
    p = logetl("filter", "--hdfs", "--master", "local[1]", "--conf", conf, "--input", CORPUS_LOG,
               "--output", str(tmp_path / "o"))
    assert p.returncode == 2
    assert p.stderr.decode().splitlines() == [line]
    assert not os.path.exists(tmp_path / "o")
