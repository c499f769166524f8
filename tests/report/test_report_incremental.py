"""``logetl report --incremental``: the real sample log, split in parts that arrive one after the other (and
through a logrotate rename and compression), gives after every run the very bytes of report.json that a
run over every line gives, for every side (``--who``) and with filters; a run with nothing new changes
nothing; options that change which lines count are refused in one line; Spark's full report equals the
local engine's incremental one."""
from __future__ import annotations

import gzip
import json
import os
import shutil

import pytest

from conftest import SAMPLE, logetl

from logetl import formats
from logetl.report.build import build

QUIET = {"monitor": False, "quiet": True}
FILTERS = ["--from", "2015-05-18", "--where", 'response != "304"']


def sample_parts(n: int, lines: int | None = None) -> list[bytes]:
    """The sample's lines (its first ``lines``), cut in ``n`` runs of whole lines."""
    with open(SAMPLE, "rb") as f:
        data = f.read().splitlines(keepends=True)[:lines]
    size = -(-len(data) // n)
    return [b"".join(data[i:i + size]) for i in range(0, len(data), size)]


def full(logs: str, out, *args: str) -> bytes:
    """report.json of a run over every line (not incremental)."""
    p = logetl("report", "--input", logs, "--output", str(out), "--quiet", "--overwrite", *args,
               env={"LOGETL_MONITOR": "off"})
    assert p.returncode == 0, p.stderr.decode()
    return (out / "report.json").read_bytes()


def incremental(logs: str, out, *args: str) -> bytes:
    p = logetl("report", "--input", logs, "--output", str(out), "--quiet", "--incremental", *args,
               env={"LOGETL_MONITOR": "off"})
    assert (p.returncode, p.stderr) == (0, b""), p.stderr.decode()
    assert not (out / ".report-panels").exists()
    return (out / "report.json").read_bytes()


def rotate(logs) -> None:
    """What logrotate does with ``compress`` and no ``delaycompress``: access.log.1.gz, then a new
    access.log (the older rotations shifted first)."""
    for i in range(8, 0, -1):
        if (logs / f"access.log.{i}.gz").exists():
            os.rename(logs / f"access.log.{i}.gz", logs / f"access.log.{i + 1}.gz")
    os.rename(logs / "access.log", logs / "access.log.1")
    with open(logs / "access.log.1", "rb") as f, gzip.open(logs / "access.log.1.gz", "wb") as g:
        shutil.copyfileobj(f, g)
    os.remove(logs / "access.log.1")
    (logs / "access.log").write_bytes(b"")


@pytest.mark.shared
@pytest.mark.parametrize("args", [
    pytest.param([], id="all"),
    pytest.param(["--who", "humans"], id="humans", marks=pytest.mark.slow),     # 8 runs of the report each
    pytest.param(["--who", "crawlers", *FILTERS], id="crawlers-filtered", marks=pytest.mark.slow)])
def test_each_run_over_new_lines_gives_the_bytes_of_a_run_over_every_line(tmp_path, sample, args):
    logs = tmp_path / "logs"
    logs.mkdir()
    glob = str(logs / "access.log*")
    out = tmp_path / "report"
    parts = sample_parts(4)
    steps = ["append", "append", "rotate", "append"]
    for i, (part, step) in enumerate(zip(parts, steps)):
        if step == "rotate":
            rotate(logs)
        with open(logs / "access.log", "ab") as f:
            f.write(part)
        got = incremental(glob, out, *args)
        assert got == full(glob, tmp_path / f"full-{i}", *args), (i, step)
        assert (out / "index.html").read_bytes() == (tmp_path / f"full-{i}" / "index.html").read_bytes()
        state = json.loads((out / ".report-state" / "visits" / "_INCREMENTAL").read_text())
        assert state["run"] == i + 1
        assert state["totals"]["lines_read"] == sum(p.count(b"\n") for p in parts[:i + 1])
    assert incremental(glob, out, *args) == got       # nothing new: the same bytes
    assert json.loads((out / ".report-state" / "visits" / "_INCREMENTAL").read_text())["run"] == len(parts)
    assert json.loads(got)["general"]["total_requests"] == 5000


@pytest.mark.shared
def test_who_may_change_between_runs_and_the_state_holds_the_distinct_keys(tmp_path, sample):
    """The state keeps every side: a run with another --who over the same state gives that side's full
    report. Its tables hold one row per visitor (and per key and visitor) of each run, not one per line."""
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "access.log"
    out = tmp_path / "report"
    first, second = sample_parts(2)
    log.write_bytes(first)
    incremental(str(log), out)
    with open(log, "ab") as f:
        f.write(second)
    for who in ("crawlers", "humans", "all"):
        assert incremental(str(log), out, "--who", who) == full(str(log), tmp_path / who, "--who", who), who
    visits = [json.loads(line) for name in sorted(os.listdir(out / ".report-state" / "visits"))
              if name.startswith("part-") for line in (out / ".report-state" / "visits" / name).open()]
    lines = [line for part in (first, second) for line in part.splitlines()]
    assert len(visits) < len(lines) / 2
    # an independent count: the visitors (client, day, agent) of each half, each one row of its run
    from test_report import parse

    (logs / "one").write_bytes(first)
    (logs / "two").write_bytes(second)
    per_run = [{(r["ip"], r["day"], r["agent"]) for r in parse(str(logs / name))} for name in ("one", "two")]
    assert len(visits) == sum(len(s) for s in per_run)


def test_a_hand_worked_log_in_two_runs_equals_the_report_of_every_line(tmp_path):
    """Malformed lines, an invalid time, a size of -, a visitor seen in both runs: the counters and the
    visitor sets merge exactly."""
    from test_report_cases import LOG, WANT

    lines = LOG.splitlines(keepends=True)
    log = tmp_path / "access.log"
    log.write_text("".join(lines[:3]) + lines[6], encoding="utf-8")
    fmt = formats.resolve(None, None)
    build(str(log), str(tmp_path / "r"), fmt, incremental=True, run_options=QUIET)
    with open(log, "a", encoding="utf-8") as f:
        f.write("".join(lines[3:6] + lines[7:]))
    got = build(str(log), str(tmp_path / "r"), fmt, incremental=True, run_options=QUIET)
    assert got == WANT      # the same lines in another order: the same report, log_size included


def test_a_404_visitor_counts_once_a_later_run_brings_its_2xx(tmp_path):
    a = 'Mozilla/5.0 (X11; Linux x86_64; rv:1.0) Gecko/20100101 Firefox/1.0'
    log = tmp_path / "access.log"
    log.write_text(f'5.5.5.5 - - [18/May/2015:10:00:00 +0000] "GET /x HTTP/1.1" 404 3 "-" "{a}"\n', encoding="utf-8")
    fmt = formats.resolve(None, None)
    one = build(str(log), str(tmp_path / "r"), fmt, incremental=True, run_options=QUIET)
    assert one["general"]["unique_visitors"] == 0 and one["requests"] == [
        {"path": "/x", "hits": 1, "visitors": 0, "bytes": 3}]
    with open(log, "a", encoding="utf-8") as f:
        f.write(f'5.5.5.5 - - [18/May/2015:11:00:00 +0000] "GET /x HTTP/1.1" 200 4 "-" "{a}"\n'
                f'5.5.5.5 - - [18/May/2015:12:00:00 +0000] "GET /y HTTP/1.1" 200 5 "-" "{a}"\n')
    two = build(str(log), str(tmp_path / "r"), fmt, incremental=True, run_options=QUIET)
    assert two["general"]["unique_visitors"] == 1
    assert two["requests"] == [{"path": "/x", "hits": 2, "visitors": 1, "bytes": 7},
                               {"path": "/y", "hits": 1, "visitors": 1, "bytes": 5}]
    assert two["visitors"] == [{"day": "2015-05-18", "hits": 3, "visitors": 1, "bytes": 12}]
    assert two == build(str(log), str(tmp_path / "f"), fmt, run_options=QUIET)


def test_options_that_change_which_lines_count_are_refused_in_one_line_or_rebuilt(tmp_path):
    log = tmp_path / "access.log"
    log.write_bytes(sample_parts(10)[0])
    out = tmp_path / "report"
    incremental(str(log), out, "--where", 'response == "200"')
    cases = [
        ([], "--where: the report's state in {state} was made with 'response == \"200\"', this run gives "
             "none: give the same, or --rebuild to read every line again"),
        (["--where", 'response == "200"', "--from", "2015-05-18"],
         "--from: the report's state in {state} was made with none, this run gives '2015-05-18': give the "
         "same, or --rebuild to read every line again"),
        (["--where", 'response == "200"', "--format", "common"],
         "--format: the report's state in {state} was made with 'combined', this run gives 'common': give "
         "the same, or --rebuild to read every line again"),
    ]
    before = (out / "report.json").read_bytes()
    for args, line in cases:
        p = logetl("report", "--input", str(log), "--output", str(out), "--incremental", *args,
                   env={"LOGETL_MONITOR": "off"})
        assert (p.returncode, p.stderr.decode()) == (
            2, "Error: " + line.format(state=out / ".report-state") + "\n"), args
    assert (out / "report.json").read_bytes() == before
    # --rebuild: the state afresh with the new options, the report of every line with them
    assert incremental(str(log), out, "--rebuild", "--from", "2015-05-18") == full(
        str(log), tmp_path / "full", "--from", "2015-05-18")
    assert incremental(str(log), out, "--from", "2015-05-18") == full(
        str(log), tmp_path / "full", "--from", "2015-05-18")


def test_bad_uses_are_one_line(tmp_path):
    log = tmp_path / "access.log"
    log.write_bytes(sample_parts(10)[0])
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    (tmp_path / "plain").mkdir()
    full(str(log), tmp_path / "plain")
    a_file = tmp_path / "a-file"
    a_file.write_bytes(b"")
    cases = [
        (["--input", str(log), "--output", str(tmp_path / "x"), "--incremental", "--hdfs"],
         "--incremental runs on the local engine: it cannot go with --hdfs"),
        (["--input", str(log), "--output", str(tmp_path / "x"), "--hdfs", "--engine", "local"],
         "--hdfs runs on spark: it cannot go with --engine local"),
        (["--input", "-", "--output", str(tmp_path / "x"), "--incremental"],
         "--incremental reads files: standard input cannot be read again"),
        (["--input", str(log), "--output", str(tmp_path / "x"), "--rebuild"],
         "--rebuild starts the state of --incremental afresh: give --incremental too"),
        (["--input", str(log), "--output", str(a_file), "--incremental"],
         f"--incremental: {str(a_file)!r} is not a directory"),
        (["--input", str(log), "--output", str(tmp_path / "plain"), "--incremental"],
         f"{tmp_path / 'plain' / 'report.json'} exists and was not made by --incremental: use --overwrite to "
         "replace it"),
    ]
    if os.geteuid() != 0:       # root writes anywhere
        cases.append((["--input", str(log), "--output", str(locked / "r"), "--incremental"],
                      f"--incremental: cannot make the report's state in {str(locked)!r}"))
    try:
        for args, line in cases:
            p = logetl("report", *args, env={"LOGETL_MONITOR": "off"})
            assert (p.returncode, p.stderr.decode()) == (2, f"Error: {line}\n"), args
    finally:
        locked.chmod(0o700)
    assert not (tmp_path / "x").exists() and not (tmp_path / "plain" / ".report-state").exists()


@pytest.mark.shared
def test_spark_full_report_equals_the_local_incremental_one(tmp_path, sample, spark_session):
    """Spark computes the report over every line; the local engine's incremental runs over the same lines,
    arrived in three parts through a rotation, give the same report."""
    logs = tmp_path / "logs"
    logs.mkdir()
    out = tmp_path / "report"
    for i, part in enumerate(sample_parts(3)):
        if i == 2:
            rotate(logs)
        with open(logs / "access.log", "ab") as f:
            f.write(part)
        build(str(logs / "access.log*"), str(out), formats.resolve(None, None), incremental=True, run_options=QUIET)
    got = build(str(logs / "access.log*"), str(tmp_path / "spark"), formats.resolve(None, None), who="humans",
                run_options={"engine": "spark", **QUIET})
    assert got == build(str(logs / "access.log*"), str(out), formats.resolve(None, None), who="humans",
                        incremental=True, run_options=QUIET)
    assert (out / "report.json").read_bytes() == (tmp_path / "spark" / "report.json").read_bytes()


def test_a_state_of_other_definitions_is_refused_in_one_line_and_rebuilt(tmp_path):
    """A state that another version of the report's flow made (its definition's hash differs) counts
    otherwise: refused, and --rebuild starts it afresh."""
    log = tmp_path / "access.log"
    log.write_bytes(sample_parts(10)[0])
    out = tmp_path / "report"
    incremental(str(log), out)
    marker = out / ".report-state" / "visits" / "_INCREMENTAL"
    state = json.loads(marker.read_text())
    state["flow"]["definition"] = "0123456789abcdef"
    marker.write_text(json.dumps(state))
    p = logetl("report", "--input", str(log), "--output", str(out), "--incremental", env={"LOGETL_MONITOR": "off"})
    assert (p.returncode, p.stderr.decode()) == (
        2, f"Error: the report's state in {out / '.report-state'} was made by another version of the report's "
           "definitions: --rebuild reads every line again\n")
    assert incremental(str(log), out, "--rebuild") == full(str(log), tmp_path / "full")


def test_geoip_may_be_added_to_a_state_made_without_it(tmp_path, sample):
    """The state keeps every host: a later run with --geoip gives the countries and networks of every line."""
    from reportpage_data import make_mmdb, require_writer

    require_writer()
    db = make_mmdb(tmp_path / "city.mmdb")
    log = tmp_path / "access.log"
    first, second = sample_parts(2, lines=600)
    log.write_bytes(first)
    out = tmp_path / "report"
    incremental(str(log), out)
    with open(log, "ab") as f:
        f.write(second)
    got = incremental(str(log), out, "--geoip", db)
    assert got == full(str(log), tmp_path / "full", "--geoip", db)
    assert json.loads(got)["countries"]
