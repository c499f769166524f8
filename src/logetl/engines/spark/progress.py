"""Progress inside a Spark step: how many of its tasks are done.

The local engine reports bytes of input read; on Spark the driver does not see the bytes, but Spark's
status tracker knows every job's stages and their tasks. While a step's actions run, the driving thread
waits in Spark, so a thread of logetl's own asks the tracker every INTERVAL seconds about the jobs of
the step (tagged with a job group of their own, ``logetl-<run>-<step>``, which also names them in Spark's
UI) and reports ``done`` of ``total`` tasks to the run's listeners (the console bar, the monitor).

``total`` counts the tasks of the stages that have started running so far: a step whose later stages or
actions have not started yet has more to come, so the bar can move back when one starts (a second
output, the trap). Stages Spark skips (their output already computed) never start and count for nothing;
the tracker lists them with their tasks, none ever done.
"""
from __future__ import annotations

import threading

#: seconds between two questions to Spark's status tracker
INTERVAL = 0.5
GROUP = "spark.jobGroup.id"


class StepProgress:
    """A context manager around a step's Spark actions: reports ``report(done, total)`` while they run
    (only when the count changed), and once more at the end. The driving thread makes no listener calls
    while it waits in an action, so the reports never run beside its own; use it around actions only.
    The job group the caller had (a notebook's) is put back at the end."""

    def __init__(self, spark_context, group: str, report, interval: float = INTERVAL):
        self.sc, self.group, self.report, self.interval = spark_context, group, report, interval
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.previous: str | None = None
        self.last: tuple[int, int] | None = None

    def tasks(self) -> tuple[int, int]:
        """(done, total) tasks of the started stages of the group's jobs."""
        tracker = self.sc.statusTracker()
        done = total = 0
        stages = set()
        for job in tracker.getJobIdsForGroup(self.group):
            info = tracker.getJobInfo(job)
            stages.update(info.stageIds if info is not None else ())
        for stage in stages:
            info = tracker.getStageInfo(stage)
            if info is not None and info.numCompletedTasks + info.numActiveTasks + info.numFailedTasks > 0:
                done += info.numCompletedTasks
                total += info.numTasks
        return done, total

    def _tell(self) -> None:
        now = self.tasks()
        if now != self.last and now[1] > 0:
            self.last = now
            self.report(*now)

    def _poll(self) -> None:
        while not self.stop.wait(self.interval):
            try:
                self._tell()
            except Exception:       # progress is never worth failing a run (a session going down, say)
                return

    def __enter__(self) -> "StepProgress":
        self.previous = self.sc.getLocalProperty(GROUP)
        self.sc.setLocalProperty(GROUP, self.group)
        self.thread = threading.Thread(target=self._poll, name="logetl-spark-progress", daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()
        # a local property set to null is removed: the caller's "no group" comes back as it was
        self.sc.setLocalProperty(GROUP, self.previous)
        if exc[0] is None:
            try:
                self._tell()
            except Exception:
                pass
