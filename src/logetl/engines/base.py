"""The engine base class: the run protocol every engine shares, with few hooks for what differs.

``Engine.run`` owns the run's life cycle (run and step state, listener calls, injected failures, commit);
an engine implements ``execute_step`` (and may override ``check``, ``ready``, ``prepare`` and ``close``).
"""
from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass, field

from logetl import assembly, settings
from logetl.expressions import Expr
from logetl.io.fs import LOCAL, hadoop_local_path
from logetl.io.outputs import StagedOutput, discard_own_staging
from logetl.errors import EnvError, RunFailed, UsageError, out_of_space_reason, signals_held, stop_reason
from logetl.listener import (
    FAILED, RUNNING, SKIPPED, STOPPED, SUCCESSFUL, FlowListener, FlowRun, StepRun)
from logetl.workdir import Resume, WorkDir


class EngineUnavailable(UsageError):
    """The engine cannot be used here (not installed, not in this version)."""


class UnsupportedOperator(UsageError):
    """The engine cannot run an operator of the flow; raised by ``check`` before anything runs."""


class InjectedFailure(RunFailed, RuntimeError):
    """Raised at the start of the step named by LOGETL_FAIL_AT (a testing aid): the run fails (exit 1)."""


class TooManyMalformed(RunFailed):
    """The malformed share of the lines read is above ``--max-malformed``: nothing is published."""


@dataclass
class Taps:
    """Where a flow's taps are bound for one run."""

    inputs: list[str]                    # resolved input files, in order
    outputs: dict[str, str]              # sink tap name -> output directory
    trap: str | None = None              # directory for malformed lines
    work: WorkDir | None = None          # where checkpoints and other stored outputs live
    overwrite: bool = False
    #: outputs an earlier run of this flow published before it was killed (path -> files): replaced
    carry: dict = field(default_factory=dict)
    input_bytes: int = 0
    #: the bytes of each input, as bound (None: not known)
    input_sizes: list | None = None
    #: fail the run (nothing published) when malformed lines exceed this share of lines read
    max_malformed: float | None = None
    #: an incremental run's plan (``logetl.incremental.Plan``): what to read and how to commit
    incremental: object = None
    #: path -> (start, end) of the bytes to read (incremental runs; ``inputs.read_chunks``)
    ranges: dict | None = None
    #: what the binding has to say when the run starts (what --overwrite will remove beyond partitions)
    notices: list = field(default_factory=list)
    #: the locks the run holds on its outputs (``workdir.OutputLocks``), let go once they are published
    locks: object = None

    @property
    def replacing(self) -> bool:
        return bool(self.carry)

    def may_replace(self, path: str) -> bool:
        """Whether a non-empty output at ``path`` may be replaced: --overwrite, or it is this flow's."""
        return self.overwrite or path in self.carry


def partitioned_taps(flow: assembly.Flow) -> dict[str, tuple[tuple[str, ...], str]]:
    """The output taps whose sinks write partitions: tap -> (the partition fields, the format)."""
    return {s.tap: (s.partition_by, s.format) for s in flow.sinks if s.partition_by}


class RunState:
    """An engine's state of one run, owned by the run (``StepContext.state``), never by the engine (which
    may run several flows): the staged outputs and the trap, in the order they are published, and the
    working directory. Engines subclass it for what else a run holds (budgets, sessions' cached data)."""

    def __init__(self, taps: "Taps", fs, create: bool = True, partitioned: dict | None = None):
        """``partitioned``: the output taps whose sinks write partitions (``partitioned_taps``)."""
        self.fs = fs
        self.work = taps.work
        partitioned = partitioned or {}
        self.outputs, self.trap = {}, None
        for tap, path in taps.outputs.items():
            self.outputs[tap] = StagedOutput(path, taps.may_replace(path), fs, create, *partitioned.get(tap, ((), "tsv")))
        if taps.trap:
            self.trap = StagedOutput(taps.trap, taps.may_replace(taps.trap), fs, create)

    def staged(self) -> list[StagedOutput]:
        """The outputs, then the trap: the order they are published in."""
        return [*self.outputs.values(), *([self.trap] if self.trap else [])]

    def close(self, ok: bool) -> None:
        """Releases what the run holds; a failed run discards its staged outputs."""
        if not ok:
            for out in self.staged():
                out.discard()


@dataclass
class StepContext:
    """What ``execute_step`` gets besides the step: the taps, the run and where to report."""

    flow: assembly.Flow
    taps: Taps
    run: FlowRun
    listener: FlowListener
    options: dict = field(default_factory=dict)
    #: the engine's state of this run (staged outputs, open files, budgets), made by ``prepare``: per-run
    #: state lives here, never on the engine, which may run several flows
    state: object = None
    #: the step that is running (None between steps): the one a failure or an interrupt ends
    current: StepRun | None = None


#: a file system with less than this free, when a write failed for want of space, is the one that is full
FULL_BELOW = 16 << 20


def full_places(taps: Taps) -> str | None:
    """Which of a run's places (outputs, trap, working directory, checkpoint directories; local paths) are on
    a file system that is full, as the user named them, with what it has free: a write that failed with "No
    space left on device" says where (the error of a write to an open file names no file)."""
    places = [(f"{tap} {path!r}", path) for tap, path in taps.outputs.items()]
    if taps.trap:
        places.append((f"trap {taps.trap!r}", taps.trap))
    if taps.work is not None:
        work = taps.work.path
        places.append((f"the working directory {hadoop_local_path(work)!r}", work))   # Spark's is file:/...
        places += [(f"--checkpoint-dir {hadoop_local_path(d)!r}", d) for d in taps.work.checkpoint_dirs.values()]
    full: dict[int, list] = {}      # device -> [names, what it has free]
    for name, path in places:
        path = hadoop_local_path(path)
        if "://" in path:
            continue            # another file system's (hdfs://): not probed from here
        probe = LOCAL.nearest_existing(path)
        try:
            device, st = os.stat(probe).st_dev, os.statvfs(probe)
        except OSError:
            continue
        free = st.f_bavail * st.f_frsize
        if free < FULL_BELOW or (st.f_files and st.f_favail == 0):
            left = f"{free / 1e6:.1f} MB free" + (", no inode" if st.f_files and st.f_favail == 0 else "")
            full.setdefault(device, [[], left])[0].append(name)
    return "; ".join(f"{' and '.join(names)} ({'its' if len(names) == 1 else 'their'} file system has {left})"
                     for names, left in full.values()) or None


def _out_of_space(exc: BaseException) -> bool:
    """A write that failed for want of space: Python's OSError, or Polars' writers' errors, which carry
    the OS error in their text only ("No space left on device (os error 28)")."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return isinstance(exc, Exception) and f"(os error {errno.ENOSPC})" in str(exc)


class Engine:
    name = "base"
    #: the keys of the engine's registries: assembly node classes it runs, and the expression and
    #: aggregate classes (``logetl.expressions``) it compiles
    operators: tuple[type, ...] = ()
    expressions: tuple[type, ...] = ()

    def __init__(self, **options):
        self.options = options

    # --- hooks ---------------------------------------------------------------------------------------

    def filesystem(self):
        """The file system this engine's paths (inputs, outputs, working directory) live on."""
        return LOCAL

    def shutdown(self) -> None:
        """Called once when the engine is no longer needed (stop sessions it started)."""

    def check(self, flow: assembly.Flow) -> None:
        """Refuse, before running, a flow with an operator this engine cannot run, naming it."""
        for node in flow.nodes:
            if type(node) not in self.operators:
                raise UnsupportedOperator(
                    f"the {self.name} engine cannot run operator {node.name!r} ({node.kind})")
            node.check_engine(self.name)
            for top in node.expressions():
                for e in (top.walk() if isinstance(top, Expr) else [top]):
                    if type(e) not in self.expressions:
                        raise UnsupportedOperator(
                            f"the {self.name} engine cannot compile {type(e).__name__} ({e.describe()}) "
                            f"in operator {node.name!r}")

    def ready(self, flow: assembly.Flow, steps: list[assembly.Step]) -> list[str]:
        """Called before the run starts (before anything of it is shown), with the steps that will run (a
        restart skips some): start what they need, refuse what cannot run (an error, shown as one line).
        Returns the notices the run gives about it."""
        return []

    def prepare(self, ctx: StepContext) -> RunState:
        """Called once before the first step: the run's state (staged outputs, budgets, sessions)."""
        return RunState(ctx.taps, self.filesystem(), partitioned=partitioned_taps(ctx.flow))

    def execute_step(self, ctx: StepContext, step: assembly.Step, state: StepRun) -> None:
        raise NotImplementedError

    def finish_trap(self, ctx: StepContext) -> None:
        """Moves the trapped lines of the run's steps into the staged trap (before it is sealed)."""

    # --- publishing, the same for every engine -------------------------------------------------------

    def seal(self, ctx: StepContext) -> list:
        """Completes the staged outputs (and trap) and returns them: what they hold is recorded before any
        is published."""
        if ctx.state.trap is not None:
            self.finish_trap(ctx)
        return [out.seal() for out in ctx.state.staged()]

    def commit(self, ctx: StepContext) -> None:
        """Makes the sealed outputs visible, each with one rename; only after every step succeeded."""
        for out in ctx.state.staged():
            out.commit()

    def close(self, ctx: StepContext, ok: bool) -> None:
        """Releases the run's resources; on failure, discards its staged outputs. A run stopped while its
        state was being made (a signal in ``prepare``) has none to ask: the staging directories this process
        made beside its outputs are removed by their names."""
        if ctx.state is not None:
            ctx.state.close(ok)
        elif not ok:
            fs = self.filesystem()
            for path in [*ctx.taps.outputs.values(), *([ctx.taps.trap] if ctx.taps.trap else [])]:
                discard_own_staging(path, fs)
        if not ok and ctx.taps.work is not None:
            ctx.taps.work.discard_own()       # a copy of the working directory a stop left half-made or retired

    # --- the protocol ---------------------------------------------------------------------------------

    @staticmethod
    def restart_point(flow: assembly.Flow, resume: Resume, work: WorkDir) -> int:
        """Index of the last step that may be skipped: every step up to it completed in an earlier run of
        this flow, it stored a checkpoint, everything later steps read from those steps is complete, and
        none of them writes an output (outputs are only published by a successful run). -1: none."""
        best = -1
        for step in flow.steps:
            if step.name not in resume.completed or any(isinstance(n, assembly.Sink) for n in step.nodes):
                break
            if any(isinstance(n, assembly.Checkpoint) for n in step.writes):
                later_reads = [r for s in flow.steps[step.index + 1:] for r in s.reads
                               if flow.step_of(r).index <= step.index]
                if all(work.is_complete(r.name) for r in later_reads):
                    best = step.index
        return best

    @staticmethod
    def _notice(run: FlowRun, listener: FlowListener, message: str) -> None:
        run.notices.append(message)
        listener.notice(run, message)

    @staticmethod
    def check_malformed(run: FlowRun, taps: Taps) -> None:
        """Fails the run when the user set a malformed threshold and the lines read so far exceed it."""
        if taps.max_malformed is None or not run.lines_read:
            return
        bad = sum(run.malformed.values())
        if bad / run.lines_read > taps.max_malformed:
            raise TooManyMalformed(
                f"{bad / run.lines_read:.1%} of the lines are malformed ({bad:,} of {run.lines_read:,}), above "
                f"--max-malformed {taps.max_malformed:g}; nothing was published")

    def run(self, flow: assembly.Flow, taps: Taps, listener: FlowListener, run: FlowRun | None = None) -> FlowRun:
        """Runs the flow: its steps in order (those an earlier failed run completed skipped, from its last
        checkpoint), then publishes its outputs. What a failed or stopped run leaves (whether it had begun
        publishing its outputs, which file system is full) is on ``run`` (``FlowRun.publishing``,
        ``FlowRun.full``), for the caller that reports it; the exception is raised as it came."""
        self.check(flow)
        run = run or FlowRun(program=flow.name, engine=self.name)
        run.steps = [StepRun(s.name, s.index, [n.name for n in s.nodes]) for s in flow.steps]
        run.filters = [n.name for n in flow.nodes if isinstance(n, assembly.Filter)]
        ctx = StepContext(flow, taps, run, listener, self.options)
        fail_at = injected_failure_step(flow)
        # what a restart skips is known before the run starts (nothing is changed to know it): the engine
        # gets ready for the steps that will run, and what it refuses is one line, with no run shown
        resume = taps.work.inspect()
        skip_to = self.restart_point(flow, resume, taps.work)
        ready_notices = self.ready(flow, flow.steps[skip_to + 1:])
        run.status, run.started_at = RUNNING, time.time()
        listener.flow_started(run)
        ok = False
        try:
            self._begin(ctx, resume, skip_to, ready_notices)
            for step, state in zip(flow.steps, run.steps):
                if step.index <= skip_to:
                    self._restore_step(ctx, state, resume.completed[step.name])
                else:
                    self._run_step(ctx, step, state, fail_at)
            self._publish(ctx)
            ok = True
            run.status = SUCCESSFUL
        except BaseException as exc:
            self._failed(ctx, exc)
            raise
        finally:
            self._end(ctx, ok)
        self._let_go(taps)
        return run

    # --- the run's named steps ------------------------------------------------------------------------------

    def _begin(self, ctx: StepContext, resume: Resume, skip_to: int, ready_notices: list[str]) -> None:
        """What the run says before its first step (a replacement, the binding's and the engine's notices,
        a restart or why not), its claim on the working directory, and the engine's state of the run."""
        flow, run, listener, work = ctx.flow, ctx.run, ctx.listener, ctx.taps.work
        if ctx.taps.replacing:
            self._notice(run, listener, "an earlier run of this flow was killed while or after publishing "
                                        "its outputs; this run replaces them")
        for message in ctx.taps.notices:
            self._notice(run, listener, message)
        work.claim(run.run_id, fresh=skip_to < 0, carry=ctx.taps.carry)
        if resume.reason:
            self._notice(run, listener, f"not restarting the earlier failed run: {resume.reason}; starting from scratch")
        elif resume.completed and skip_to < 0:
            self._notice(run, listener, "the earlier failed run completed no checkpoint; starting from scratch")
        if skip_to >= 0:
            names = [s.name for s in flow.steps[: skip_to + 1]]
            cps = [n.name for s in flow.steps[: skip_to + 1] for n in s.writes if isinstance(n, assembly.Checkpoint)]
            run.restarted_after = cps[-1]
            self._notice(run, listener, f"restarting after checkpoint {cps[-1]!r}: skipping step(s) {', '.join(names)}, "
                                        f"completed by the failed run {resume.previous_run}")
        for step in flow.steps[skip_to + 1:]:
            work.forget_step(step.name)
        for message in ready_notices:
            self._notice(run, listener, message)
        state = self.prepare(ctx)
        if state is not None:
            ctx.state = state

    def _restore_step(self, ctx: StepContext, state: StepRun, record: dict) -> None:
        """A step an earlier failed run completed: its counters and malformed samples as it recorded them."""
        run = ctx.run
        state.restore(record)
        run.malformed_samples.extend(tuple(x) for x in record.get("malformed_samples", []))
        del run.malformed_samples[5:]
        state.status = SKIPPED
        ctx.listener.step_finished(run, state)
        self.check_malformed(run, ctx.taps)

    def _run_step(self, ctx: StepContext, step: assembly.Step, state: StepRun, fail_at: str) -> None:
        """One step, run by the engine, and recorded as completed (what a restart restores)."""
        run, listener = ctx.run, ctx.listener
        ctx.current = state
        state.status, state.started_at = RUNNING, time.time()
        listener.step_started(run, state)
        samples_before = len(run.malformed_samples)
        if step.name == fail_at:
            raise InjectedFailure(f"injected failure at step {step.name!r} (LOGETL_FAIL_AT)")
        self.execute_step(ctx, step, state)
        state.status, state.finished_at = SUCCESSFUL, time.time()
        if len(ctx.flow.steps) > 1:
            # what a restart after a checkpoint restores; a flow of one step (no checkpoint) never
            # restarts, and its record would cost a synced write for nothing
            ctx.taps.work.step_completed(step.name, {**state.to_dict(), "malformed_samples": [
                list(x) for x in run.malformed_samples[samples_before:]]})
        listener.step_finished(run, state)
        ctx.current = None
        self.check_malformed(run, ctx.taps)

    def _publish(self, ctx: StepContext) -> None:
        """Seals the outputs, records what they hold, and commits them: from the record on, the run is
        publishing (a run stopped then is finished by the next one)."""
        staged = self.seal(ctx)
        ctx.taps.work.committing({out.path: out.listing for out in staged})
        ctx.run.publishing = True
        self.commit(ctx)

    @staticmethod
    def _failed(ctx: StepContext, exc: BaseException) -> None:
        """Records how the run ended on ``exc``: stopped (an interrupt) or failed, why, where a file system
        is full (found before the staged outputs are discarded, which frees the space), and the step that
        was running."""
        run, current = ctx.run, ctx.current
        stopped = isinstance(exc, KeyboardInterrupt)
        if _out_of_space(exc):
            # the user's places, not the file the write failed on: an open file's error names none, and a
            # copy's names the run's own staging and working files
            run.full = full_places(ctx.taps)
        run.status = STOPPED if stopped else FAILED
        run.error = stop_reason(exc) if stopped else (str(exc) or type(exc).__name__)
        if run.full:
            run.error = f"{out_of_space_reason(exc)}: {run.full}"
        if not run.publishing:
            # the records the steps wrote were staged and are discarded with them: the run wrote nothing
            # (the monitor counted them as written, and its trend summed them)
            run.written = {}
        if current is not None:
            current.status, current.finished_at = (STOPPED if stopped else FAILED), time.time()
            ctx.listener.step_finished(run, current)

    def _end(self, ctx: StepContext, ok: bool) -> None:
        """Releases the run's resources (discarding what a failed run staged) and tells the listeners the
        run has finished. An interrupt once the outputs are committed changes nothing of the result: it
        becomes a notice."""
        run = ctx.run
        try:
            self.close(ctx, ok)
        except KeyboardInterrupt as exc:
            if not ok:
                raise
            run.notices.append(f"{stop_reason(exc)} after the outputs were committed")
        finally:
            run.finished_at = time.time()
            try:
                ctx.listener.flow_finished(run)
            except KeyboardInterrupt as exc:
                if not ok:
                    raise
                run.notices.append(f"{stop_reason(exc)} after the outputs were committed")

    @staticmethod
    def _let_go(taps: Taps) -> None:
        """Last, after the listeners: until the working directory is gone, a rerun recognises the outputs as
        this flow's (a kill from here on leaves the retired directory, named after the flow). The outputs
        are let go first: what is left to do, removing the retired directory, any run may do."""
        try:
            # a stop now changes nothing of the result: it waits the moments the removal takes, so that a
            # run that succeeds leaves its outputs alone, not half its working directory
            with signals_held():
                if taps.locks is not None:
                    taps.locks.release()
                taps.work.finish()
        except (OSError, KeyboardInterrupt):
            pass   # what is left is retired or recognisably logetl's: the next run removes it


def injected_failure_step(flow: assembly.Flow) -> str:
    """The step ``LOGETL_FAIL_AT`` names ("" when unset); a name that is no step of the flow is refused
    (a typo would test nothing)."""
    fail_at = settings.FAIL_AT.read()
    if fail_at and fail_at not in {s.name for s in flow.steps}:
        raise EnvError(f"LOGETL_FAIL_AT={fail_at!r} names no step of flow {flow.name} "
                       f"(its steps: {', '.join(s.name for s in flow.steps)})")
    return fail_at
