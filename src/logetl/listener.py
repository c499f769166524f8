"""What a run reports while it goes: the run and step state, and the listener interface that receives it.

Every engine drives the same ``FlowRun``/``StepRun`` objects and calls the same listener hooks, so the
console summary, tests and the monitor see one model whatever the engine.
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

PENDING, RUNNING, SUCCESSFUL, FAILED, STOPPED, SKIPPED = (
    "PENDING", "RUNNING", "SUCCESSFUL", "FAILED", "STOPPED", "SKIPPED")

#: a run whose malformed share reaches this gets a warning (summary line, monitor marker). Real logs in
#: the expected layout have well under 1 %; a tenth means a layout mismatch or a damaged input.
WARN_MALFORMED = 0.10


SECRET_WORDS = ("secret", "password", "token", "credential", "access.key", "accesskey", "api.key", "apikey")


def _redacted(key: str, value):
    """An option as the monitor may show it: values of secret-looking keys (a Spark conf's
    ``fs.s3a.secret.key``) become ``"***"``, inside nested options too."""
    if isinstance(value, dict):
        return {k: _redacted(k, v) for k, v in sorted(value.items())}
    return "***" if any(w in key.lower() for w in SECRET_WORDS) else value


def new_run_id() -> str:
    """32 uppercase hex digits."""
    return uuid.uuid4().hex.upper()


@dataclass
class StepRun:
    name: str
    index: int
    operators: list[str]
    status: str = PENDING
    started_at: float | None = None
    finished_at: float | None = None
    #: per operator: {"in": records in, "out": records out}
    counters: dict[str, dict[str, int]] = field(default_factory=dict)
    #: line-contract counters of the parse in this step: lines, malformed by reason, dropped size '-'.
    #: ``lines_read`` None: not counted, the step parses but failed before its engine returned its counters
    #: (Spark delivers ``observe``'s only with a successful action): its lines, malformed lines and drops are
    #: unknown, not 0 (the local engine counts as it reads: a failed step has the counts it reached)
    lines_read: int | None = 0
    malformed: dict[str, int] = field(default_factory=dict)
    dropped_size_dash: int = 0
    #: the header lines of the log format (CloudFront's, W3C's directives): neither records nor malformed
    header_lines: int = 0
    #: the lines of the log format that are not requests (HAProxy's TCP-mode lines and notices): likewise
    non_http_lines: int = 0

    def count(self, operator: str, key: str, n: int) -> None:
        c = self.counters.setdefault(operator, {"in": 0, "out": 0})
        c[key] += n

    def restore(self, record: dict) -> None:
        """Takes the timings and counters a completed step recorded (a step skipped on restart)."""
        self.started_at, self.finished_at = record.get("started_at"), record.get("finished_at")
        self.counters = record.get("counters", {})
        self.lines_read = record.get("lines_read", 0)
        self.malformed = record.get("malformed", {})
        self.dropped_size_dash = record.get("dropped_size_dash", 0)
        self.header_lines = record.get("header_lines", 0)
        self.non_http_lines = record.get("non_http_lines", 0)

    def to_dict(self) -> dict:
        return {
            "name": self.name, "index": self.index, "operators": self.operators, "status": self.status,
            "started_at": self.started_at, "finished_at": self.finished_at, "counters": self.counters,
            "lines_read": self.lines_read, "malformed": None if self.lines_read is None else self.malformed,
            "dropped_size_dash": None if self.lines_read is None else self.dropped_size_dash,
            "header_lines": None if self.lines_read is None else self.header_lines,
            "non_http_lines": None if self.lines_read is None else self.non_http_lines,
        }


@dataclass
class FlowRun:
    program: str
    engine: str
    run_id: str = field(default_factory=new_run_id)
    status: str = PENDING
    started_at: float | None = None
    finished_at: float | None = None
    steps: list[StepRun] = field(default_factory=list)
    #: records written per output tap
    written: dict[str, int] = field(default_factory=dict)
    #: up to 5 (line number, reason, text) samples of malformed lines
    malformed_samples: list[tuple[int, str, str]] = field(default_factory=list)
    error: str | None = None
    #: the checkpoint this run restarted after, when it did
    restarted_after: str | None = None
    notices: list[str] = field(default_factory=list)
    #: blocking operators that spilled to disk: {operator: {"bytes", "files", "passes"}}
    spilled: dict[str, dict] = field(default_factory=dict)
    #: the flow's filter operators, whose dropped records the summary counts ("left out by ...")
    filters: list[str] = field(default_factory=list)
    #: the run had begun publishing its outputs (``Engine.run``): one stopped from then on may have published
    #: some, and the same command run again finishes (not in the monitor's documents)
    publishing: bool = False
    #: a run that failed for want of space: the places on a full file system, as the user named them, with
    #: what they have free (``engines.base.full_places``; None: not known, or not that failure)
    full: str | None = None

    def left_out(self) -> dict[str, int]:
        """Records each filter dropped (in minus out), for the filters that ran or were restored: a filter of
        a step that completed counts 0 when no record reached it (Spark observes every filter; the local
        engine counts the records it saw)."""
        out = {}
        for s in self.steps:
            for name in self.filters:
                c = s.counters.get(name)
                if c is None and name in s.operators and s.status in (SUCCESSFUL, SKIPPED):
                    c = {}
                if c is not None:
                    out[name] = out.get(name, 0) + c.get("in", 0) - c.get("out", 0)
        return out
    #: what the run was given, for comparing runs: input files [{"path", "size"}], options, and the SHA-256
    #: (16 hex digits) of the flow definition (the same hash a restart compares); empty when not known
    inputs: list[dict] = field(default_factory=list)
    options: dict = field(default_factory=dict)
    flow_hash: str | None = None

    def describe(self, identity: dict, options: dict | None = None) -> None:
        """Takes the inputs, options and flow-definition hash from a flow identity
        (``workdir.flow_identity``) and further options (engine options, overwrite, ...)."""
        self.flow_hash = identity.get("definition")
        self.inputs = [{"path": i["path"], "size": i.get("size")} for i in identity.get("inputs", [])]
        merged = {**identity.get("options", {}), "outputs": identity.get("outputs", {}), **(options or {})}
        self.options = {k: _redacted(k, merged[k]) for k in sorted(merged)}

    @property
    def elapsed(self) -> float:
        end = self.finished_at if self.finished_at is not None else time.time()
        return end - self.started_at if self.started_at is not None else 0.0

    @property
    def counted(self) -> bool:
        """False when a step's line counters are not known (``StepRun.lines_read`` None): the run's lines
        read, malformed lines, their share and drops are then unknown (None), not the other steps' sums."""
        return all(s.lines_read is not None for s in self.steps)

    @property
    def lines_read(self) -> int | None:
        return sum(s.lines_read for s in self.steps) if self.counted else None

    @property
    def malformed(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for s in self.steps:
            for k, v in s.malformed.items():
                total[k] = total.get(k, 0) + v
        return total

    @property
    def dropped_size_dash(self) -> int | None:
        return sum(s.dropped_size_dash for s in self.steps) if self.counted else None

    @property
    def header_lines(self) -> int | None:
        return sum(s.header_lines for s in self.steps) if self.counted else None

    @property
    def non_http_lines(self) -> int | None:
        return sum(s.non_http_lines for s in self.steps) if self.counted else None

    @property
    def malformed_share(self) -> float | None:
        """Malformed lines as a fraction of lines read (0.0 when nothing was read, None when not counted)."""
        read = self.lines_read
        if read is None:
            return None
        return sum(self.malformed.values()) / read if read else 0.0

    @property
    def warning(self) -> str | None:
        """Why this run's result deserves a look although it may have succeeded: a malformed share of at
        least ``WARN_MALFORMED`` (every line, typically, when the log is in another layout)."""
        read, bad = self.lines_read, sum(self.malformed.values())
        if not read or bad / read < WARN_MALFORMED:
            return None
        what = "every line is malformed" if bad == read else f"{bad / read:.1%} of the lines are malformed"
        return (f"{what} ({bad:,} of {read:,}): is the input an access log in the expected layout?")

    def to_dict(self) -> dict:
        return {
            "run_id": self.run_id, "program": self.program, "engine": self.engine, "status": self.status,
            "started_at": self.started_at, "finished_at": self.finished_at,
            "steps": [s.to_dict() for s in self.steps], "written": self.written,
            "malformed_samples": [list(s) for s in self.malformed_samples], "error": self.error,
            "restarted_after": self.restarted_after, "notices": self.notices,
            "malformed_share": self.malformed_share, "warning": self.warning, "spilled": self.spilled,
            "inputs": self.inputs, "options": self.options, "flow_hash": self.flow_hash,
        }


def progress_of(run: FlowRun, step: StepRun | None, done: int, total: int | None, unit: str) -> dict:
    """Where a step is: ``{"step", "done", "total", "unit", "percent", "rate", "eta"}``. The rate is
    ``done`` over the time since the step started (per second), the ETA what is left at that rate; both are
    None until there is something to go by (and the ETA when the total is unknown: standard input)."""
    now = time.time()
    since = (step.started_at if step is not None else None) or run.started_at or now
    elapsed = now - since
    rate = done / elapsed if elapsed > 0.05 and done > 0 else None
    total = total if total and total > 0 else None
    percent = min(100.0, 100.0 * done / total) if total else None
    eta = max(0.0, (total - done) / rate) if rate and total else None
    return {"step": step.name if step is not None else None, "done": done, "total": total, "unit": unit,
            "percent": percent, "rate": rate, "eta": eta}


def current_step(run: FlowRun) -> StepRun | None:
    """The step that is running (the last one started), or None."""
    running = [s for s in run.steps if s.status == RUNNING]
    return running[-1] if running else None


class FlowListener:
    """Receives a run's progress. Override what you need; every hook is optional. Hooks are called one at
    a time and must return quickly (hand slow work to a thread of your own): on the thread that drives
    the run, except ``step_progress`` on Spark, which comes from a thread of logetl's while the driving
    thread waits for Spark (``engines.spark_progress``). So a listener must not tie what it holds to one
    thread (an SQLite connection, say, needs ``check_same_thread=False``)."""

    def flow_started(self, run: FlowRun) -> None: ...

    def step_started(self, run: FlowRun, step: StepRun) -> None: ...

    def step_finished(self, run: FlowRun, step: StepRun) -> None:
        """Called once per step with its final status: SUCCESSFUL, FAILED, STOPPED or SKIPPED."""

    def progress(self, run: FlowRun, done_bytes: int, total_bytes: int) -> None:
        """Bytes of the input read so far by the step that parses (``total_bytes`` 0: not known)."""

    def step_progress(self, run: FlowRun, step: StepRun, done: int, total: int | None, unit: str) -> None:
        """How far a step that reads stored outputs of earlier steps is: ``done`` of ``total`` ``unit``
        (``"records"``; ``total`` None: not known)."""

    def notice(self, run: FlowRun, message: str) -> None:
        """Something the person running the flow should know now (a restart, and why or why not)."""

    def flow_finished(self, run: FlowRun) -> None: ...


class Listeners(FlowListener):
    """Fans every hook out to several listeners. A listener that fails does not fail the run (nor keep the
    others from hearing): a run whose outputs are committed stays committed when, say, the terminal that
    shows its summary has gone (``logetl ... 2>&1 | head -1``). The failure is said once on stderr
    (``LOGETL_DEBUG=1`` raises it instead)."""

    def __init__(self, listeners: list[FlowListener]):
        self.listeners = list(listeners)
        self.failed: set[int] = set()

    def _each(self, hook: str, *args) -> None:
        for listener in self.listeners:
            try:
                getattr(listener, hook)(*args)
            except Exception as exc:
                self._failed(listener, hook, exc)

    def _failed(self, listener, hook: str, exc: Exception) -> None:
        import sys

        from logetl.errors import debug

        if debug():
            raise exc
        if isinstance(exc, BrokenPipeError):   # nobody reads stderr any more: stop writing to it
            from logetl.console import silence_broken_pipe

            silence_broken_pipe()
            return
        if id(listener) in self.failed:
            return
        self.failed.add(id(listener))
        try:
            sys.stderr.write(f"logetl: listener {type(listener).__name__} failed in {hook}: {exc}\n")
        except OSError:
            pass

    def flow_started(self, run):
        self._each("flow_started", run)

    def step_started(self, run, step):
        self._each("step_started", run, step)

    def step_finished(self, run, step):
        self._each("step_finished", run, step)

    def progress(self, run, done_bytes, total_bytes):
        self._each("progress", run, done_bytes, total_bytes)

    def step_progress(self, run, step, done, total, unit):
        self._each("step_progress", run, step, done, total, unit)

    def notice(self, run, message):
        self._each("notice", run, message)

    def flow_finished(self, run):
        self._each("flow_finished", run)
