"""Running a program: bind its taps to paths, pick the engine, run. Used by the CLI, tests and benchmarks."""
from __future__ import annotations

import os

from logetl import assembly, programs
from logetl.engines import get_engine
from logetl.engines.base import Taps
from logetl.io import inputs, outputs
from logetl.io.fs import LOCAL
from logetl.listener import FlowListener, FlowRun, Listeners
from logetl.workdir import WorkDir, flow_identity, is_checkpoint_dir


class JobError(ValueError):
    """A problem with what the user asked for; ``option`` names the option at fault, when there is one."""

    def __init__(self, message: str, option: str | None = None):
        super().__init__(message)
        self.option = option


def default_work_dir(output: str, fs=LOCAL) -> str:
    """Checkpoints live beside the (first) output, in a hidden directory of their own."""
    return fs.join(fs.parent(output), f".{fs.basename(output)}.logetl-work")


def bind(program: str, input_path: str, output_paths: dict[str, str], trap: str | None = None,
         overwrite: bool = False, work_dir: str | None = None, checkpoint_dir: str | None = None,
         engine: str = "local", fs=LOCAL, flow: assembly.Flow | None = None) -> Taps:
    flow = flow or programs.get(program)
    wanted = sorted(s.tap for s in flow.sinks)
    if sorted(output_paths) != wanted:
        raise JobError(f"program {program} writes outputs {', '.join(wanted)}")
    try:
        files = inputs.resolve(input_path, fs)
    except inputs.InputError as exc:
        raise JobError(str(exc), "input") from None
    checkpoints = [n.name for n in flow.nodes if isinstance(n, assembly.Checkpoint)]
    bound: dict[str, str] = {}
    if checkpoint_dir:
        if len(checkpoints) != 1:
            raise JobError(f"program {program} has no checkpoint to keep", "checkpoint-dir")
        if not is_checkpoint_dir(checkpoint_dir, fs):
            raise JobError(f"checkpoint directory {checkpoint_dir!r} holds files that are not a logetl "
                           "checkpoint", "checkpoint-dir")
        bound[checkpoints[0]] = checkpoint_dir
    first = output_paths[wanted[0]]
    identity = flow_identity(program, flow.explain(), engine, files, output_paths,
                             {"trap": fs.abspath(trap) if trap else None,
                              "checkpoint_dir": fs.abspath(checkpoint_dir) if checkpoint_dir else None}, fs)
    work = WorkDir(work_dir or default_work_dir(first, fs), identity, bound, fs)
    # an earlier run of this very flow that died while publishing its outputs may have published some
    replaceable = work.was_committing()
    seen: dict[str, str] = {}
    for tap, path in list(output_paths.items()) + ([("trap", trap)] if trap else []):
        real = os.path.realpath(path) if fs is LOCAL else fs.abspath(path)
        if real in seen:
            raise JobError(f"{tap} and {seen[real]} are the same path {path!r}", tap)
        seen[real] = tap
        try:
            outputs.check_output(path, overwrite or replaceable, tap, fs)
        except outputs.OutputError as exc:
            raise JobError(str(exc), tap) from None
        for f in files:
            if (os.path.realpath(f) if fs is LOCAL else f).startswith(real + "/"):
                raise JobError(f"{tap} {path!r} contains input file {f!r}", tap)
    return Taps(inputs=files, outputs=dict(output_paths), trap=trap, work=work,
                overwrite=overwrite or replaceable, input_bytes=inputs.total_size(files, fs))


def run_program(program: str, input_path: str, output_paths: dict[str, str], *, engine: str = "local",
                trap: str | None = None, overwrite: bool = False, work_dir: str | None = None,
                checkpoint_dir: str | None = None, listener: FlowListener | None = None,
                engine_options: dict | None = None, application: str | None = None,
                tags: dict | None = None, monitor: bool | None = None, quiet: bool = False) -> FlowRun:
    """Runs a program. Unless ``monitor`` is false (or LOGETL_MONITOR=off), the run's documents go to the
    monitor (``logetl.monitor.reporter``)."""
    runner = get_engine(engine)(**(engine_options or {}))
    flow = programs.get(program)
    try:
        taps = bind(program, input_path, output_paths, trap, overwrite, work_dir, checkpoint_dir, engine,
                    runner.filesystem(), flow)
        listeners = [listener or FlowListener()]
        if monitor is None:
            monitor = os.environ.get("LOGETL_MONITOR", "on").lower() not in ("off", "0", "false", "no")
        if monitor:
            from logetl.monitor.reporter import MonitorListener

            listeners.append(MonitorListener(flow, application=application, tags=tags, quiet=quiet))
        return runner.run(flow, taps, Listeners(listeners))
    finally:
        runner.shutdown()
