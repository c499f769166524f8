"""The engine base class: the run protocol every engine shares, with few hooks for what differs.

``Engine.run`` owns the run's life cycle (run and step state, listener calls, injected failures, commit);
an engine implements ``execute_step`` (and may override ``check``, ``prepare`` and ``close``).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from logetl import assembly
from logetl.listener import (
    FAILED, RUNNING, STOPPED, SUCCESSFUL, FlowListener, FlowRun, StepRun)


class EngineUnavailable(Exception):
    """The engine cannot be used here (not installed, not in this version)."""


class UnsupportedOperator(Exception):
    """The engine cannot run an operator of the flow; raised by ``check`` before anything runs."""


class InjectedFailure(RuntimeError):
    """Raised at the start of the step named by LOGETL_FAIL_AT (a testing aid)."""


@dataclass
class Taps:
    """Where a flow's taps are bound for one run."""

    inputs: list[str]                    # resolved input files, in order
    outputs: dict[str, str]              # sink tap name -> output directory
    trap: str | None = None              # directory for malformed lines
    work_dir: str | None = None          # where checkpoints and intermediates are stored
    overwrite: bool = False
    input_bytes: int = 0


@dataclass
class StepContext:
    """What ``execute_step`` gets besides the step: the taps, the run and where to report."""

    flow: assembly.Flow
    taps: Taps
    run: FlowRun
    listener: FlowListener
    options: dict = field(default_factory=dict)


class Engine:
    name = "base"
    #: assembly node classes this engine can execute
    supports: tuple[type, ...] = ()

    def __init__(self, **options):
        self.options = options

    # --- hooks ---------------------------------------------------------------------------------------

    def check(self, flow: assembly.Flow) -> None:
        """Refuse, before running, a flow with an operator this engine cannot run, naming it."""
        for node in flow.nodes:
            if type(node) not in self.supports:
                raise UnsupportedOperator(
                    f"the {self.name} engine cannot run operator {node.name!r} ({node.kind})")

    def prepare(self, ctx: StepContext) -> None:
        """Called once before the first step (stage outputs, open sessions)."""

    def execute_step(self, ctx: StepContext, step: assembly.Step, state: StepRun) -> None:
        raise NotImplementedError

    def commit(self, ctx: StepContext) -> None:
        """Make the outputs visible, atomically; called only after every step succeeded."""

    def close(self, ctx: StepContext, ok: bool) -> None:
        """Release resources; on failure, discard staged outputs."""

    # --- the protocol ---------------------------------------------------------------------------------

    def run(self, flow: assembly.Flow, taps: Taps, listener: FlowListener, run: FlowRun | None = None) -> FlowRun:
        self.check(flow)
        run = run or FlowRun(program=flow.name, engine=self.name)
        run.steps = [StepRun(s.name, s.index, [n.name for n in s.nodes]) for s in flow.steps]
        ctx = StepContext(flow, taps, run, listener, self.options)
        fail_at = os.environ.get("LOGETL_FAIL_AT", "")
        run.status, run.started_at = RUNNING, time.time()
        listener.flow_started(run)
        ok = False
        current: StepRun | None = None
        try:
            self.prepare(ctx)
            for step, state in zip(flow.steps, run.steps):
                current = state
                state.status, state.started_at = RUNNING, time.time()
                listener.step_started(run, state)
                if step.name == fail_at:
                    raise InjectedFailure(f"injected failure at step {step.name!r} (LOGETL_FAIL_AT)")
                self.execute_step(ctx, step, state)
                state.status, state.finished_at = SUCCESSFUL, time.time()
                listener.step_finished(run, state)
                current = None
            self.commit(ctx)
            ok = True
            run.status = SUCCESSFUL
        except BaseException as exc:
            stopped = isinstance(exc, KeyboardInterrupt)
            run.status = STOPPED if stopped else FAILED
            run.error = "interrupted" if stopped else (str(exc) or type(exc).__name__)
            if current is not None:
                current.status, current.finished_at = (STOPPED if stopped else FAILED), time.time()
                listener.step_finished(run, current)
            raise
        finally:
            try:
                self.close(ctx, ok)
            finally:
                run.finished_at = time.time()
                listener.flow_finished(run)
        return run
