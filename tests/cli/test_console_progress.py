"""The progress of a run: the listener's step_progress hook (the Join step reports the records it replays
from the checkpoint), the console bar (step, bar, amounts, rate, ETA) on a real terminal, and the run
documents that carry it to the monitor."""
from __future__ import annotations

import io
import os
import re

import pytest

from conftest import CORPUS, corpus, logetl_on_a_terminal
from logetl import listener as listener_mod
from logetl.console import ConsoleReporter, progress_line
from logetl.job import run_program
from logetl.listener import RUNNING, FlowListener, FlowRun, StepRun, progress_of

CORPUS_LOG = os.path.join(CORPUS, "corpus.log")


def test_progress_line_names_the_step_and_shows_amounts_rate_and_eta():
    assert progress_line({"step": "join", "done": 1000, "total": 3000, "unit": "records", "percent": 33.3,
                          "rate": 500.0, "eta": 4.0}) == (
        "join  [##########                    ]  33.3%  1,000 of 3,000 records  500 records/s  ETA 4 s")
    assert progress_line({"step": "parse", "done": 12_500_000, "total": 50_000_000, "unit": "bytes",
                          "percent": 25.0, "rate": 25_000_000.0, "eta": 150.0}) == (
        "parse  [#######                       ]  25.0%  12.5 MB of 50.0 MB  25.0 MB/s  ETA 2 min 30 s")
    # standard input: no total, so no bar and no ETA
    assert progress_line({"step": "parse", "done": 3_000_000, "total": None, "unit": "bytes", "percent": None,
                          "rate": 1_500_000.0, "eta": None}) == "parse  3.0 MB read  1.5 MB/s"
    assert progress_line({"step": "join", "done": 0, "total": None, "unit": "records", "percent": None,
                          "rate": None, "eta": None}) == "join  0 records"


def test_progress_of_measures_from_the_step_start(monkeypatch):
    monkeypatch.setattr(listener_mod.time, "time", lambda: 1010.0)
    run = FlowRun(program="join", engine="local", started_at=1000.0)
    step = StepRun("join", 1, ["join"], status=RUNNING, started_at=1008.0)
    assert progress_of(run, step, 600, 1800, "records") == {
        "step": "join", "done": 600, "total": 1800, "unit": "records", "percent": 100 * 600 / 1800,
        "rate": 300.0, "eta": 4.0}
    assert progress_of(run, step, 0, 0, "bytes") == {
        "step": "join", "done": 0, "total": None, "unit": "bytes", "percent": None, "rate": None, "eta": None}


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_console_bar_redraws_in_place_and_names_a_new_step_at_once(monkeypatch):
    monkeypatch.setenv("LOGETL_PROGRESS_AFTER", "0")
    monkeypatch.setattr(listener_mod.time, "time", lambda: 1010.0)
    out = Terminal()
    console = ConsoleReporter(stream=out)
    run = FlowRun(program="join", engine="local", started_at=1000.0)
    parse = StepRun("parse", 0, ["parse"], status=RUNNING, started_at=1000.0)
    join = StepRun("join", 1, ["join"], status="PENDING")
    run.steps = [parse, join]
    console.progress(run, 5_000_000, 10_000_000)          # the parse: bytes, its step found by status
    console.progress(run, 6_000_000, 10_000_000)          # within 0.2 s of the last draw: not drawn
    parse.status, join.status, join.started_at = "SUCCESSFUL", RUNNING, 1005.0
    console.step_progress(run, join, 250, 1000, "records")   # a new step: drawn at once
    first = "parse  [###############               ]  50.0%  5.0 MB of 10.0 MB  0.5 MB/s  ETA 10 s"
    second = "join  [#######                       ]  25.0%  250 of 1,000 records  50 records/s  ETA 15 s"
    assert out.getvalue() == "\r" + first + "\r" + second.ljust(len(first))
    console.notice(run, "something to know")                 # clears the line first
    assert out.getvalue().endswith("\r" + " " * len(second) + "\rlogetl: something to know\n")


class Recorder(FlowListener):
    def __init__(self):
        self.calls = []

    def step_progress(self, run, step, done, total, unit):
        self.calls.append((step.name, step.status, done, total, unit))


def test_the_join_step_reports_the_records_it_replays(tmp_path):
    """step_progress comes from the loop over stored parts: unique_ip's and then the checkpoint's records,
    each of the count its storing step recorded."""
    rec = Recorder()
    run = run_program("join", CORPUS_LOG, {"output": str(tmp_path / "out")}, listener=rec, monitor=False)
    parse = run.steps[0]
    unique, checkpoint = parse.counters["unique_ip"]["out"], parse.counters["checkpoint"]["out"]
    assert rec.calls == [("join", RUNNING, unique, unique, "records"),
                         ("join", RUNNING, checkpoint, checkpoint, "records")]


def test_a_restarted_join_reports_progress_against_the_recorded_counts(tmp_path, monkeypatch):
    out = str(tmp_path / "out")
    monkeypatch.setenv("LOGETL_FAIL_AT", "join")
    with pytest.raises(Exception, match="injected failure"):
        run_program("join", CORPUS_LOG, {"output": out}, monitor=False)
    monkeypatch.delenv("LOGETL_FAIL_AT")
    rec = Recorder()
    run = run_program("join", CORPUS_LOG, {"output": out}, listener=rec, monitor=False)
    assert run.steps[0].status == "SKIPPED"
    checkpoint = run.steps[0].counters["checkpoint"]["out"]
    assert rec.calls[-1] == ("join", RUNNING, checkpoint, checkpoint, "records") and checkpoint > 0


def test_the_bar_moves_in_both_steps_of_join_on_a_terminal(tmp_path):
    big = tmp_path / "big.log"
    big.write_bytes((corpus("corpus.log") + b"\n") * 400)
    code, text = logetl_on_a_terminal("join", str(big), str(tmp_path / "out"),
                                      env={"LOGETL_PROGRESS_AFTER": "0", "LOGETL_MONITOR": "off"})
    assert code == 0, text
    # a step too short for a rate leaves it out (the parse's first moments, a small input's join)
    parse = re.findall(r"\rparse  \[#* *\] +(\d+\.\d)%  [\d.]+ MB of 41\.9 MB(?:  [\d.,]+ MB/s  ETA \d+ s)?", text)
    join = re.findall(r"\rjoin  \[#* *\] +(\d+\.\d)%  ([\d,]+) of ([\d,]+) records(?:  [\d,]+ records/s  ETA \d+ s)?", text)
    assert parse, text
    assert join, text
    assert join[-1][0] == "100.0" and join[-1][1] == join[-1][2]     # the checkpoint's records, all replayed
    assert "logetl join: SUCCESSFUL" in text


def test_a_running_run_sends_its_progress_to_the_monitor(tmp_path, monkeypatch):
    """The real embedded store, with the reporter's intervals at 0: the documents of the Join step carry
    its progress, and the final document none."""
    from logetl.monitor import reporter
    from logetl.monitor.store import Store

    sent = []

    class Keeping(reporter.EmbeddedSink):
        def send(self, doc):
            sent.append(doc)
            super().send(doc)

    monkeypatch.setattr(reporter, "EmbeddedSink", Keeping)
    monkeypatch.setattr(reporter, "LIVE_AFTER", 0.0)
    monkeypatch.setattr(reporter, "PROGRESS_EVERY", 0.0)
    monkeypatch.setenv("LOGETL_HOME", str(tmp_path / "home"))
    run = run_program("join", CORPUS_LOG, {"output": str(tmp_path / "out")}, quiet=True)
    checkpoint = run.steps[0].counters["checkpoint"]["out"]
    progress = [d["run"]["progress"] for d in sent if d["run"]["progress"]]
    assert {p["step"] for p in progress} == {"parse", "join"}
    assert [p["unit"] for p in progress if p["step"] == "parse" and p["done"]] and all(
        p["unit"] == "bytes" and p["total"] == os.path.getsize(CORPUS_LOG) for p in progress
        if p["step"] == "parse" and p["done"])
    last = [p for p in progress if p["step"] == "join"][-1]
    assert (last["done"], last["total"], last["unit"], last["percent"]) == (checkpoint, checkpoint, "records", 100.0)
    assert sent[-1]["run"]["status"] == "SUCCESSFUL" and sent[-1]["run"]["progress"] is None
    rows, _ = Store(f"sqlite:///{tmp_path}/home/monitor.db").list_runs()
    assert rows[0]["progress"] is None and rows[0]["run_id"] == run.run_id
