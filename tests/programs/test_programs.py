"""The engine-agnostic program suite: every engine, the same inputs, the same expected bytes."""
from __future__ import annotations

import bz2
import gzip
import hashlib
import json
import os
import subprocess
import sys

import pytest

import make_corpus
from conftest import BASELINES, CORPUS, HERE, corpus, parts, read
from logetl.job import run_program
from logetl.listener import SUCCESSFUL, FlowListener

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")


def run(program, input_path, tmp_path, engine, **kw):
    outs = {"output1": str(tmp_path / "out1"), "output2": str(tmp_path / "out2")} if program == "branch" \
        else {"output": str(tmp_path / "out")}
    result = run_program(program, input_path, outs, engine=engine, **kw)
    assert result.status == SUCCESSFUL
    return result, outs


def part(path) -> bytes:
    return parts(path)


def test_checked_in_corpus_files_are_what_make_corpus_writes():
    for name, data in make_corpus.build().items():
        assert corpus(name) == data, f"tests/data/corpus/{name} is stale: run python tests/make_corpus.py"


# --- the conformance corpus ---------------------------------------------------------------------------------

def test_branch_corpus(engine, tmp_path):
    result, outs = run("branch", CORPUS_LOG, tmp_path, engine, trap=str(tmp_path / "trap"))
    assert part(outs["output1"]) == corpus("branch.tsv")
    assert part(outs["output2"]) == corpus("branch.tsv")
    assert part(tmp_path / "trap") == corpus("trap.log")
    counts = json.loads(corpus("counts.json"))
    assert result.lines_read == counts["lines"]
    assert result.malformed == counts["malformed"]
    assert result.dropped_size_dash == counts["dropped_size_dash"]
    assert result.written == {"output1": counts["records"], "output2": counts["records"]}
    # the summary's samples: the first five malformed lines, in input order, on every engine
    from corpus_cases import CASES
    from logetl.contract import display

    first = [(expected, display(raw)) for _, raw, expected in CASES if isinstance(expected, str)][:5]
    assert [(reason, text) for _, reason, text in result.malformed_samples] == first
    assert all(where.endswith("corpus.log") or ".log:" in where for where, _, _ in result.malformed_samples)


def test_filter_corpus(engine, tmp_path):
    _, outs = run("filter", CORPUS_LOG, tmp_path, engine)
    assert part(outs["output"]) == corpus("filter.tsv")


def test_join_corpus(engine, tmp_path):
    result, outs = run("join", CORPUS_LOG, tmp_path, engine, trap=str(tmp_path / "trap"))
    if engine == "local":
        assert sorted(os.listdir(outs["output"])) == ["_SUCCESS", "part-00000"], "Join writes a single part"
    assert part(outs["output"]) == corpus("join.tsv")
    assert part(tmp_path / "trap") == corpus("trap.log")
    assert [s.name for s in result.steps] == ["parse", "join"]
    assert not os.path.exists(tmp_path / ".out.logetl-work"), "the anonymous checkpoint outlived the run"


# --- the real sample (../shared) ------------------------------------------------------------------------------

EXPECTED = json.loads(read(os.path.join(HERE, "data", "sample_expected.json")))


@pytest.mark.parametrize("program", ["branch", "filter", "join"])
def test_sample_matches_the_baselines_and_recorded_digests(engine, sample, tmp_path, program):
    result, outs = run(program, sample, tmp_path, engine)
    got = part(outs["output1" if program == "branch" else "output"])
    if program == "branch":
        assert part(outs["output2"]) == got
    assert hashlib.sha256(got).hexdigest() == EXPECTED[program]["sha256"]
    assert got.count(b"\n") == EXPECTED[program]["lines"]
    # the plain-Python baselines are exact on this well-formed sample: an independent second opinion
    script = os.path.join(BASELINES, f"python_{program}.py")
    base_out = [str(tmp_path / "b1"), str(tmp_path / "b2")] if program == "branch" else [str(tmp_path / "b1")]
    subprocess.run([sys.executable, script, sample, *base_out], check=True)
    assert read(base_out[0]) == got
    facts = EXPECTED["facts"]
    assert result.lines_read == facts["lines"]
    assert result.dropped_size_dash == facts["dropped_size_dash"]
    assert sum(result.malformed.values()) == facts["malformed"]
    if program == "filter":
        assert got.count(b"\n") == facts["distinct_images_clients"]


# --- input forms ----------------------------------------------------------------------------------------------

def _split_corpus(tmp_path):
    """The corpus cut into three files (the cut falls mid-stream, each file ends with a newline but the
    last), so that a directory, a glob or compressed files must give the same bytes as the single file."""
    data = corpus("corpus.log")
    lines = data.split(b"\n")
    pieces = [b"\n".join(lines[:10]) + b"\n", b"\n".join(lines[10:30]) + b"\n", b"\n".join(lines[30:])]
    assert b"".join(pieces) == data
    return pieces


def test_directory_input_reads_visible_files_in_name_order(engine, tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    for i, piece in enumerate(_split_corpus(tmp_path)):
        (d / f"access-{i}.log").write_bytes(piece)
    (d / "_SUCCESS").write_bytes(b"not a log line\n")
    (d / ".hidden").write_bytes(b"not a log line\n")
    (d / "_logs").mkdir()
    result, outs = run("branch", str(d), tmp_path, engine)
    assert part(outs["output1"]) == corpus("branch.tsv")
    # the malformed-line samples: the first ones of the input, as on the local engine
    (tmp_path / "ref").mkdir()
    reference, _ = run("branch", str(d), tmp_path / "ref", "local")
    assert [s[1:] for s in result.malformed_samples] == [s[1:] for s in reference.malformed_samples]


def test_glob_and_compressed_inputs(engine, tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    a, b, c = _split_corpus(tmp_path)
    (d / "a.log.gz").write_bytes(gzip.compress(a))
    (d / "b.log.bz2").write_bytes(bz2.compress(b))
    (d / "c.log").write_bytes(c)
    (d / "zz.txt").write_bytes(b"junk\n")
    _, outs = run("join", str(d / "*.log*"), tmp_path, engine)
    assert part(outs["output"]) == corpus("join.tsv")


def test_last_line_without_newline_in_a_middle_file_still_ends_there(engine, tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    line = corpus("corpus.log").split(b"\n")[0]
    (d / "1.log").write_bytes(line)          # no newline: the next file must not continue this line
    (d / "2.log").write_bytes(line + b"\n")
    _, outs = run("branch", str(d), tmp_path, engine)
    record = b"10.0.0.3\t17/May/2015:10:05:03 +0000\tGET /images/a.png HTTP/1.1\t200\t123\n"
    assert part(outs["output1"]) == record * 2


def test_counters_and_samples_when_nothing_passes_the_filter(engine, tmp_path):
    """Filter over lines none of which requests /images/, one of them invalid UTF-8: on Spark, adaptive
    execution replaced the empty stage after the filter and lost the parse's observation (0 lines read,
    0 malformed), and the sample showed the bad bytes as U+FFFD; the same counts and text as the local
    engine."""
    log = tmp_path / "some.log"
    log.write_bytes(corpus("corpus.log").split(b"\n")[0].replace(b"/images/", b"/other/") + b"\nx\n"
                    + b"\xff\xfe bad\n")
    (tmp_path / "ref").mkdir()
    reference, _ = run("filter", str(log), tmp_path / "ref", "local")
    result, outs = run("filter", str(log), tmp_path, engine)
    assert part(outs["output"]) == b""
    assert (result.lines_read, result.malformed) == (reference.lines_read, reference.malformed) == \
        (3, {"no_match": 1, "invalid_utf8": 1})
    assert [s[1:] for s in result.malformed_samples] == [s[1:] for s in reference.malformed_samples] == \
        [("no_match", "x"), ("invalid_utf8", "\\xff\\xfe bad")]


def test_empty_input_gives_empty_outputs(engine, tmp_path):
    (tmp_path / "empty.log").write_bytes(b"")
    for program in ("branch", "filter", "join"):
        sub = tmp_path / program
        sub.mkdir()
        result, outs = run(program, str(tmp_path / "empty.log"), sub, engine)
        for path in outs.values():
            assert part(path) == b""
        # a filter no record reached left out 0, on both engines (the local engine left it out of the
        # summary, Spark said "left out by images 0")
        assert result.left_out() == {f: 0 for f in result.filters}
        assert result.filters or program == "branch"


# --- outputs --------------------------------------------------------------------------------------------------

def test_existing_empty_output_directory_is_used(engine, tmp_path):
    (tmp_path / "out").mkdir()
    _, outs = run("filter", CORPUS_LOG, tmp_path, engine)
    assert part(outs["output"]) == corpus("filter.tsv")


def test_overwrite_replaces_a_previous_result(engine, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "part-00000").write_bytes(b"old\n")
    (out / "part-00001").write_bytes(b"older\n")
    (out / "_SUCCESS").write_bytes(b"")
    _, outs = run("filter", CORPUS_LOG, tmp_path, engine, overwrite=True)
    assert part(outs["output"]) == corpus("filter.tsv")
    assert sorted(os.listdir(out)) == ["_SUCCESS", "part-00000"]


def test_overwrite_never_replaces_a_directory_holding_other_files(engine, tmp_path):
    """logetl deletes only what it created: --overwrite replaces an earlier output, not a user's folder."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "part-00000").write_bytes(b"old\n")
    (out / ".env").write_bytes(b"SECRET=1")
    from logetl.io.outputs import OutputError
    with pytest.raises(OutputError) as caught:
        run("filter", CORPUS_LOG, tmp_path, engine, overwrite=True)
    assert str(caught.value) == (
        f"output directory {str(out)!r} is not empty and holds '.env', which is not part of a logetl output: "
        "choose another directory (--overwrite replaces only earlier outputs)")
    assert read(out / ".env") == b"SECRET=1" and read(out / "part-00000") == b"old\n"


def test_a_failed_run_leaves_no_part_file(engine, tmp_path, monkeypatch):
    monkeypatch.setenv("LOGETL_FAIL_AT", "join")
    with pytest.raises(Exception, match="injected failure at step 'join'"):
        run_program("join", CORPUS_LOG, {"output": str(tmp_path / "out")}, engine=engine)
    assert not os.path.exists(tmp_path / "out")
    leftovers = [n for n in os.listdir(tmp_path) if n.startswith(".out.logetl-") and "work" not in n]
    assert leftovers == []


# --- the listener sees steps, timings and counters --------------------------------------------------------------

class Recorder(FlowListener):
    def __init__(self):
        self.events = []

    def flow_started(self, run):
        self.events.append(("flow_started", run.status))

    def step_started(self, run, step):
        self.events.append(("step_started", step.name))

    def step_finished(self, run, step):
        self.events.append(("step_finished", step.name, step.status))
        assert step.finished_at >= step.started_at

    def flow_finished(self, run):
        self.events.append(("flow_finished", run.status))


def test_listener_sees_steps_and_record_counters(engine, tmp_path):
    rec = Recorder()
    result, _ = run("join", CORPUS_LOG, tmp_path, engine, listener=rec)
    assert rec.events == [
        ("flow_started", "RUNNING"), ("step_started", "parse"), ("step_finished", "parse", "SUCCESSFUL"),
        ("step_started", "join"), ("step_finished", "join", "SUCCESSFUL"), ("flow_finished", "SUCCESSFUL")]
    counts = json.loads(corpus("counts.json"))
    parse_step, join_step = result.steps
    assert parse_step.counters["parse"] == {"in": counts["lines"], "out": counts["records"]}
    assert parse_step.counters["images"]["in"] == counts["records"]
    expected_rows = corpus("join.tsv").count(b"\n")
    assert join_step.counters["join"]["out"] == expected_rows
    assert join_step.counters["sink"] == {"in": expected_rows, "out": expected_rows}
    assert result.written == {"output": expected_rows}
