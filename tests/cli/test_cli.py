"""The command line as a user meets it: shapes, exit codes, one-line errors, help, explain, generate."""
from __future__ import annotations

import hashlib
import os

import pytest

from conftest import CORPUS, corpus, logetl, read
from logetl.errors import UsageError

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")


def one_line_error(proc, *needles):
    err = proc.stderr.decode()
    assert "Traceback" not in err
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], err
    return lines[0]


def test_join_positional_and_option_forms_give_the_same_bytes(tmp_path):
    a = logetl("join", CORPUS_LOG, str(tmp_path / "a"))
    b = logetl("join", "--input", CORPUS_LOG, "--output", str(tmp_path / "b"))
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert read(tmp_path / "a" / "part-00000") == corpus("join.tsv") == read(tmp_path / "b" / "part-00000")


def test_branch_and_filter_commands(tmp_path):
    p = logetl("branch", "--input", CORPUS_LOG, "--output1", str(tmp_path / "o1"), "--output2", str(tmp_path / "o2"))
    assert p.returncode == 0, p.stderr
    assert read(tmp_path / "o1" / "part-00000") == corpus("branch.tsv") == read(tmp_path / "o2" / "part-00000")
    p = logetl("filter", "--input", CORPUS_LOG, "--output", str(tmp_path / "f"))
    assert p.returncode == 0, p.stderr
    assert read(tmp_path / "f" / "part-00000") == corpus("filter.tsv")


def test_summary_reports_counts_samples_and_outputs(tmp_path):
    p = logetl("branch", "--input", CORPUS_LOG, "--output1", str(tmp_path / "o1"), "--output2", str(tmp_path / "o2"),
               "--trap", str(tmp_path / "trap"))
    err = p.stderr.decode()
    assert "logetl branch: SUCCESSFUL" in err
    assert "lines read                      47" in err
    assert "malformed lines                 19  (invalid_utf8 4, no_match 11, tab_or_cr_in_field 4)" in err
    assert "dropped (size '-')               1" in err
    assert "written output1                 27" in err
    assert err.count("corpus.log:") == 5              # at most five samples, with file and line number
    assert "corpus.log:4: no_match: 10.0.0.1 - - [17/May/2015:10:05:03 +0000] \"\" 400 0" in err
    assert read(tmp_path / "trap" / "part-00000") == corpus("trap.log")


def test_quiet_prints_nothing_but_a_warning(tmp_path):
    sample = tmp_path / "good.log"
    sample.write_bytes(b"".join(l for l in read(CORPUS_LOG).splitlines(keepends=True)[:3]))
    p = logetl("filter", "-q", "--input", str(sample), "--output", str(tmp_path / "f"))
    assert p.returncode == 0 and p.stderr == b""
    # the corpus is 40 % malformed lines: -q silences the summary, not the warning
    p = logetl("filter", "-q", "--input", CORPUS_LOG, "--output", str(tmp_path / "g"))
    assert p.returncode == 0
    assert p.stderr == (b"logetl: warning: 40.4% of the lines are malformed (19 of 47): is the input an access "
                        b"log in the expected layout?\n")


@pytest.mark.parametrize("args,needles", [
    (["filter", "--input", "/no/such/file.log", "--output", "{tmp}/o"], ["/no/such/file.log", "does not exist"]),
    (["filter", "--input", "{tmp}/empty-dir", "--output", "{tmp}/o"], ["holds no visible files"]),
    (["filter", "--input", "{tmp}/*.nomatch", "--output", "{tmp}/o"], ["matches no files"]),
    (["filter", "--input", CORPUS_LOG, "--output", "{tmp}/full"], ["{tmp}/full", "not empty", "--overwrite"]),
    (["filter", "--input", CORPUS_LOG, "--output", "{tmp}/afile"], ["{tmp}/afile", "not a directory"]),
    (["branch", "--input", CORPUS_LOG, "--output1", "{tmp}/same", "--output2", "{tmp}/same"], ["same path"]),
    (["filter", "--master", "local[2]", "--input", CORPUS_LOG, "--output", "{tmp}/o"], ["--master", "--hdfs"]),
    (["filter", "--hdfs", "--engine", "local", "--input", CORPUS_LOG, "--output", "{tmp}/o"], ["--hdfs"]),
    (["branch", "--input", CORPUS_LOG, "--output1", "", "--output2", "{tmp}/o"], ["output1 is an empty path"]),
    (["filter", "--input", CORPUS_LOG, "--output", "{tmp}/o", "--trap", ""], ["trap is an empty path"]),
    # checked before the JVM starts (it printed a Java stack trace before the line, or ran on local[*])
    (["filter", "--hdfs", "--master", "local[abc]", "--input", CORPUS_LOG, "--output", "{tmp}/o"],
     ["--master 'local[abc]' is not a Spark master URL (local, local[N], local[*], spark://HOST:PORT, yarn, k8s://URL)"]),
    (["filter", "--hdfs", "--master", "", "--input", CORPUS_LOG, "--output", "{tmp}/o"], ["--master is empty"]),
    (["filter", "--hdfs", "--input", "-", "--output", "{tmp}/o"],
     ["--input - (standard input) works on the local engine only: on Spark give a path"]),
    (["filter", "--input", "{tmp}/dangling", "--output", "{tmp}/o"],
     ["input directory '{tmp}/dangling' holds '{tmp}/dangling/access.log.1', which is not a regular file"]),
])
def test_user_errors_are_one_line_and_exit_2(tmp_path, args, needles):
    (tmp_path / "empty-dir").mkdir()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_bytes(b"x")
    (tmp_path / "afile").write_bytes(b"x")
    (tmp_path / "dangling").mkdir()       # a log whose rotation was removed under its symbolic link
    (tmp_path / "dangling" / "access.log").write_bytes(read(CORPUS_LOG))
    (tmp_path / "dangling" / "access.log.1").symlink_to(tmp_path / "removed")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    p = logetl(*args)
    assert p.returncode == 2
    one_line_error(p, *[n.replace("{tmp}", str(tmp_path)) for n in needles])
    assert not os.path.exists(tmp_path / "o")


@pytest.mark.parametrize("args,env,line", [
    (["branch", "--input", CORPUS_LOG, "--input", CORPUS_LOG, "--output1", "{tmp}/o", "--output2", "{tmp}/o2"], {},
     "Error: --input is given more than once: give it once"),
    (["join", CORPUS_LOG, "{tmp}/o", "--format", "combined", "--format", "common"], {},
     "Error: --format is given more than once: give it once"),
    (["monitor", "--port", "1", "--port", "2"], {}, "Error: --port is given more than once: give it once"),
    (["filter", "--input", CORPUS_LOG, "--output", "{tmp}/o"], {"LOGETL_MONITOR": "bogus"},
     "Error: LOGETL_MONITOR='bogus' must be on or off"),
    (["filter", "--input", CORPUS_LOG, "--output", "{tmp}/o"], {"LOGETL_MONITOR_URL": "notaurl"},
     "Error: LOGETL_MONITOR_URL='notaurl' is not an http:// or https:// URL with a host"),
    (["filter", "--input", CORPUS_LOG, "--output", "{tmp}/o"], {"LOGETL_MONITOR_URL": "http://127.0.0.1:x"},
     "Error: LOGETL_MONITOR_URL='http://127.0.0.1:x' is not an http:// or https:// URL with a host"),
    (["join", CORPUS_LOG, "{tmp}/o"], {"LOGETL_FAIL_AT": "nosuch", "LOGETL_MONITOR": "off"},
     "Error: LOGETL_FAIL_AT='nosuch' names no step of flow join (its steps: parse, join)"),
])
def test_repeated_options_and_bad_monitor_settings_are_refused_before_running(tmp_path, args, env, line):
    # each was accepted: the last --input read alone, a bogus LOGETL_MONITOR taken as on, and a URL
    # without a scheme failed the sending thread with a traceback in the middle of the run
    p = logetl(*[a.replace("{tmp}", str(tmp_path)) for a in args], env={"LOGETL_MONITOR": "on", **env})
    assert p.returncode == 2
    assert p.stderr.decode().splitlines() == [line]
    assert os.listdir(tmp_path) == []


def test_a_nan_threshold_is_refused(tmp_path):
    p = logetl("filter", "--input", CORPUS_LOG, "--output", str(tmp_path / "o"), "--max-malformed", "nan")
    assert p.returncode == 2
    assert p.stderr.decode().splitlines()[-1] == \
        "Error: Invalid value for '--max-malformed': nan is not in the range 0.0<=x<=1.0."
    from logetl.job import program_flow, run_flow

    for bad in (float("nan"), 5, "0.1"):
        with pytest.raises(UsageError) as caught:
            run_flow(program_flow("filter"), CORPUS_LOG, {"output": str(tmp_path / "o")}, max_malformed=bad)
        assert str(caught.value) == f"max_malformed must be a fraction between 0 and 1, not {bad!r}"
    assert os.listdir(tmp_path) == []


def test_run_flow_takes_the_output_format_as_the_command_line_does(tmp_path):
    from logetl.job import program_flow, run_flow

    with pytest.raises(UsageError) as caught:
        run_flow(program_flow("filter"), CORPUS_LOG, {"output": str(tmp_path / "x")}, output_format="xml")
    assert str(caught.value) == "output format 'xml' is not one of tsv, csv, parquet, jsonl"
    run_flow(program_flow("filter"), CORPUS_LOG, {"output": str(tmp_path / "o")}, output_format="jsonl",
             monitor=False)
    p = logetl("filter", "--input", CORPUS_LOG, "--output", str(tmp_path / "c"), "--output-format", "jsonl")
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(tmp_path / "o")) == sorted(os.listdir(tmp_path / "c")) == ["_SUCCESS", "part-00000.jsonl"]
    assert read(tmp_path / "o" / "part-00000.jsonl") == read(tmp_path / "c" / "part-00000.jsonl")


def test_unreadable_input_is_a_user_error(tmp_path, monkeypatch):
    # root (CI) reads every file, so the permission check is driven in-process
    from logetl.io import fs
    from logetl import programs
    from logetl.job import JobError, bind

    f = tmp_path / "secret.log"
    f.write_bytes(b"x\n")
    monkeypatch.setattr(fs.os, "access", lambda path, mode: path != str(f) and mode != fs.os.R_OK)
    with pytest.raises(JobError, match="input file .*secret.log' is not readable"):
        bind(programs.get("filter"), str(f), {"output": str(tmp_path / "o")}, fs=fs.LOCAL)


def test_input_that_is_not_a_file_is_a_user_error(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    p = logetl("filter", "--input", str(fifo), "--output", str(tmp_path / "o"))
    assert p.returncode == 2
    one_line_error(p, str(fifo), "not a regular file")


@pytest.mark.parametrize("args", [
    ["join"], ["join", CORPUS_LOG], ["filter", "--input", CORPUS_LOG], ["branch", "--bogus"],
    ["join", CORPUS_LOG, "x", "--input", CORPUS_LOG], ["nonsense"], ["generate", "--lines", "-3", "x.log"],
    ["filter", "--hdfs", "--conf", "novalue", "--input", CORPUS_LOG, "--output", "o"],
    ["filter", "--engine", "flink", "--input", CORPUS_LOG, "--output", "o"],
])
def test_usage_errors_exit_2_without_traceback(tmp_path, args):
    p = logetl(*args, cwd=str(tmp_path))
    assert p.returncode == 2
    assert b"Traceback" not in p.stderr
    assert b"Error" in p.stderr


def test_a_failed_run_exits_1_with_one_line_after_the_summary(tmp_path):
    p = logetl("join", CORPUS_LOG, str(tmp_path / "o"), env={"LOGETL_FAIL_AT": "join"})
    assert p.returncode == 1
    err = p.stderr.decode()
    assert "Traceback" not in err
    assert "logetl join: FAILED" in err
    assert "step join           FAILED" in err
    assert err.splitlines()[-1] == "Error: join failed: injected failure at step 'join' (LOGETL_FAIL_AT)"
    assert not os.path.exists(tmp_path / "o")


@pytest.mark.parametrize("command", ["branch", "filter", "join", "explain", "generate"])
def test_help_has_an_example(command):
    p = logetl(command, "--help")
    assert p.returncode == 0
    assert b"Example" in p.stdout


def test_explain_lists_operators_and_steps():
    p = logetl("explain", "join")
    out = p.stdout.decode()
    assert p.returncode == 0
    for op in ("parse", "images", "retain_ip", "unique_ip", "rename_ip", "score", "min_score", "checkpoint",
               "join", "sort_score", "sink"):
        assert f"\n  {op} " in out
    assert "  1. parse: input -> parse" in out
    assert "  2. join: join -> fields -> sort_score -> sink" in out
    assert "reads the stored output of: unique_ip, checkpoint" in out


def test_explain_dot_is_a_graph_of_every_edge():
    out = logetl("explain", "join", "--dot").stdout.decode()
    assert out.startswith('digraph "join" {') and out.rstrip().endswith("}")
    assert '"checkpoint" -> "join"' in out and '"unique_ip" -> "join"' in out
    edges = [l for l in out.splitlines() if l.startswith('  "') and '" -> "' in l]
    assert len(edges) == 13
    assert 'label="step 2: join"' in out


def test_generate_is_seeded_and_parses_with_a_small_malformed_share(tmp_path):
    a, b, c = (tmp_path / n for n in ("a.log", "b.log", "c.log"))
    assert logetl("generate", "--lines", "20000", "--seed", "7", str(a)).returncode == 0
    assert logetl("generate", "--lines", "20000", "--seed", "7", str(b)).returncode == 0
    assert logetl("generate", "--lines", "20000", "--seed", "8", str(c)).returncode == 0
    assert read(a) == read(b) != read(c)
    assert read(a).count(b"\n") == 20000
    # fixed bytes for a fixed seed, on every machine
    assert hashlib.sha256(read(a)).hexdigest() == GENERATED_SHA256
    p = logetl("filter", "--input", str(a), "--output", str(tmp_path / "f"))
    err = p.stderr.decode()
    assert p.returncode == 0
    malformed = int(err.split("malformed lines")[1].split()[0].replace(",", ""))
    assert 10 <= malformed <= 100          # about 0.2 %
    dropped = int(err.split("dropped (size '-')")[1].split()[0].replace(",", ""))
    assert 1000 <= dropped <= 4000         # 304s and a few more
    clients = read(tmp_path / "f" / "part-00000").count(b"\n")
    assert 100 <= clients <= 500           # addresses repeat


GENERATED_SHA256 = "896360692e79b71e592a572b3bfcec57353b8ec869f9b9475128625f204f1fbd"   # generator version 2


def test_the_master_urls_spark_takes_pass_the_check_made_before_it_starts():
    from logetl.engines.spark.session import _MASTER

    taken = ["local", "local[*]", "local[4]", "local[4, 2]", "local[*,3]", "local-cluster[ 2, 1, 1024 ]",
             "spark://h:7077", "spark://a:7077,b:7077", "yarn", "k8s://https://h:6443"]
    assert [m for m in taken if not _MASTER.fullmatch(m)] == []
    assert [m for m in ["nonsense", "local[abc]", "local[0]", "", "spark:/h"] if _MASTER.fullmatch(m)] == []
