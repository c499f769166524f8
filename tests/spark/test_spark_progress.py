"""Progress inside a Spark step: how many of the step's tasks are done, told to the run's listeners while
its actions run (the console bar and the monitor show it as for the local engine's bytes)."""
import pytest

from conftest import corpus
from logetl.engines.spark import progress as spark_progress
from logetl.job import program_flow, run_flow
from logetl.listener import FlowListener


class Recorder(FlowListener):
    def __init__(self):
        self.calls = []

    def step_progress(self, run, step, done, total, unit):
        self.calls.append((step.name, done, total, unit))


@pytest.fixture
def small_splits(spark_session):
    """Input split into partitions of 64 KB, so that a step has several tasks to count."""
    key = "spark.sql.files.maxPartitionBytes"
    before = spark_session.conf.get(key, None)
    spark_session.conf.set(key, str(64 * 1024))
    yield spark_session
    if before is None:
        spark_session.conf.unset(key)
    else:
        spark_session.conf.set(key, before)


def test_a_spark_step_reports_how_many_of_its_tasks_are_done(small_splits, tmp_path, monkeypatch):
    """Branch on Spark over a ~400 KB log: its one step reports tasks, never more done than there are,
    and ends with all of them done: one task per input split (the step writes its two outputs and the
    trap in one pass). The job group the caller had is back."""
    monkeypatch.setattr(spark_progress, "INTERVAL", 0.02)
    log = tmp_path / "access.log"
    log.write_bytes((corpus("corpus.log") + b"\n") * 120)
    splits = small_splits.read.text(str(log)).rdd.getNumPartitions()
    assert splits >= 4
    sc = small_splits.sparkContext
    sc.setLocalProperty(spark_progress.GROUP, "the caller's own")
    recorder = Recorder()
    run_flow(program_flow("branch"), str(log), {"output1": str(tmp_path / "o1"), "output2": str(tmp_path / "o2")},
             engine="spark", trap=str(tmp_path / "trap"), listener=recorder, monitor=False, quiet=True)
    assert sc.getLocalProperty(spark_progress.GROUP) == "the caller's own"
    sc.setLocalProperty(spark_progress.GROUP, None)
    assert recorder.calls, "no progress was reported"
    assert {c[0] for c in recorder.calls} == {"parse"} and {c[3] for c in recorder.calls} == {"tasks"}
    assert all(0 <= done <= total for _, done, total, _ in recorder.calls)
    assert recorder.calls[-1][1:3] == (splits, splits)


def test_a_spark_run_with_progress_is_recorded_in_the_monitor(small_splits, tmp_path, monkeypatch):
    """The progress comes from a thread of its own while the step's actions run; the embedded monitor
    stores those documents too (its SQLite connection was tied to the driving thread, so the monitor
    gave up and the run stayed RUNNING in the store), and the run ends recorded as SUCCESSFUL."""
    from logetl.monitor import reporter
    from logetl.monitor.store import Store

    monkeypatch.setattr(spark_progress, "INTERVAL", 0.02)
    monkeypatch.setattr(reporter, "LIVE_AFTER", 0.0)          # every progress report becomes a document
    monkeypatch.setattr(reporter, "PROGRESS_EVERY", 0.0)
    home = tmp_path / "home"
    monkeypatch.setenv("LOGETL_HOME", str(home))
    log = tmp_path / "access.log"
    log.write_bytes((corpus("corpus.log") + b"\n") * 120)
    sent = []
    real_send = reporter.EmbeddedSink.send
    monkeypatch.setattr(reporter.EmbeddedSink, "send", lambda self, doc: sent.append(doc["run"]["progress"]) or
                        real_send(self, doc))
    result = run_flow(program_flow("branch"), str(log), {"output1": str(tmp_path / "o1"),
                                                        "output2": str(tmp_path / "o2")},
                      engine="spark", monitor=True, quiet=True)
    stored = Store(f"sqlite:///{home}/monitor.db").get_run(result.run_id)
    assert stored["status"] == "SUCCESSFUL"
    assert any(p and p["unit"] == "tasks" for p in sent), sent


def test_progress_is_never_worth_a_failed_run(spark_session):
    """A report that raises stops the reports, not the step; the group is put back (here: none)."""
    attempts = []

    def report(done, total):
        attempts.append((done, total))
        raise RuntimeError("a listener that fails")

    sc = spark_session.sparkContext
    with spark_progress.StepProgress(sc, "logetl-test-failing", report, interval=0.01) as progress:
        assert progress.tasks() == (0, 0)
        assert sc.parallelize(range(4), 2).count() == 4
    assert attempts and attempts[-1] == (2, 2)
    assert sc.getLocalProperty(spark_progress.GROUP) is None
