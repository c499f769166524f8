"""Running a program: bind its taps to paths, pick the engine, run. Used by the CLI, tests and benchmarks."""
from __future__ import annotations

import os

from logetl import assembly, formats, programs, settings
from logetl.engines import get_engine
from logetl.engines.base import Taps
from logetl.io import inputs, outputs
from logetl.listener import SUCCESSFUL, FlowListener, FlowRun, Listeners
from logetl.errors import UsageError, stop_reason
from logetl.workdir import OutputLocks, WorkDir, checkpoint_dir_problem, default_path, flow_identity


class JobError(UsageError):
    """A problem with what the user asked for; ``option`` names the option at fault, when there is one."""

    def __init__(self, message: str, option: str | None = None):
        super().__init__(message)
        self.option = option


#: ``run_flow``'s ``engine_options``, per engine: the command line's ``--memory-limit`` (``memory_limit``: a
#: size such as ``"512M"``, or bytes), ``--master`` and ``--conf`` (``conf``: {KEY: VALUE}); ``spill_buffers``
#: (bytes the blocking operators may buffer) is for tests
ENGINE_OPTIONS = {"local": ("memory_limit", "spill_buffers"), "spark": ("master", "conf")}
SPARK_SETTINGS = "--master and --conf are Spark settings: use them with --hdfs"
LOCAL_SETTING = "--memory-limit is a setting of the local engine: on Spark use --conf spark.executor.memory=SIZE"


def engine_options_for(engine: str, given: dict | None) -> dict:
    """The options for ``engine`` (``local`` or ``spark``), checked as the command line checks its own
    (``UsageError`` naming the bad one, before anything runs); an option given as None is not given. The
    command line's ``--memory-limit``, ``--master`` and ``--conf`` come through here too."""
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise UsageError(f"engine_options must be a dict of option: value, not {given!r}")
    takes = ENGINE_OPTIONS[engine]
    options = {k: v for k, v in given.items() if v is not None}
    for key in given:
        if not any(key in names for names in ENGINE_OPTIONS.values()):
            raise UsageError(f"engine_options: unknown option {key!r} (the {engine} engine takes "
                             f"{', '.join(takes)})")
    if engine == "local" and ("master" in options or "conf" in options):
        raise UsageError(SPARK_SETTINGS)
    if engine == "spark" and "memory_limit" in options:
        raise UsageError(LOCAL_SETTING)
    for key in options:
        if key not in takes:
            raise UsageError(f"engine_options: {key} is an option of the "
                             f"{'spark' if engine == 'local' else 'local'} engine (the {engine} engine takes "
                             f"{', '.join(takes)})")
    if engine == "local":
        from logetl.engines.local.spill import parse_size

        if "memory_limit" in options:
            options["memory_limit"] = parse_size(options["memory_limit"])
        buffers = options.get("spill_buffers")
        if buffers is not None and not (isinstance(buffers, int) and not isinstance(buffers, bool) and buffers > 0):
            raise UsageError(f"engine_options: spill_buffers is a number of bytes > 0, not {buffers!r}")
        return options
    from logetl.engines.spark.session import check_master_url

    if "master" in options:
        check_master_url(options["master"])
    conf = options.get("conf", {})
    if not isinstance(conf, dict):
        raise UsageError(f"engine_options: conf is a dict of Spark settings {{KEY: VALUE}}, not {conf!r}")
    for key, value in conf.items():
        if not isinstance(key, str) or not key or not isinstance(value, str):
            raise UsageError(f"engine_options: conf {key!r}: {value!r}: a Spark setting is a name and a string "
                             "value (as --conf KEY=VALUE gives them)")
    # as the command line gives them (what the monitor records)
    return {"master": options.get("master"), "conf": dict(conf)}


def _path(path):
    """A path given as a ``pathlib.Path`` (any ``os.PathLike``) as its string; anything else as it is."""
    return os.fspath(path) if isinstance(path, os.PathLike) else path


def _check_options(input_path, output_paths, flags: dict, paths: dict, texts: dict, tags) -> None:
    """``run_flow``'s other arguments, checked before anything runs: a flag is True or False (``"no"`` is
    not false), a path a string, tags a dict of strings."""
    if not isinstance(input_path, str):
        raise UsageError(f"the input is a path (a string), not {input_path!r}")
    if not isinstance(output_paths, dict) or not all(isinstance(t, str) and isinstance(p, str)
                                                     for t, p in output_paths.items()):
        raise UsageError(f"the outputs are a dict {{tap: path}} of strings, not {output_paths!r}")
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise UsageError(f"{name} must be True or False, not {value!r}")
    for name, value in {**paths, **texts}.items():
        if value is not None and not isinstance(value, str):
            raise UsageError(f"{name} must be a {'path' if name in paths else 'name'} (a string), not {value!r}")
    if tags is not None and not (isinstance(tags, dict) and all(isinstance(k, str) and isinstance(v, str)
                                                                for k, v in tags.items())):
        raise UsageError(f"tags must be a dict of strings {{KEY: VALUE}}, not {tags!r}")
    if texts.get("application"):    # the monitor's limit, checked before the run (its store would refuse it)
        from logetl.monitor.documents import LENGTHS, name_problem

        why = name_problem("application", texts["application"], LENGTHS["application"])
        if why:
            raise UsageError(why)


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _ancestry(path: str, of_parent) -> tuple[tuple[int, int], dict[tuple[int, int], tuple[str, ...]]]:
    """Where a local path (absolute, symbolic links resolved) is, whatever its spelling: for each of its
    existing ancestors (and itself, when it exists), that directory's device and inode -> the rest of the
    path below it; and the key of the nearest of them. A bind mount shows one directory under two real
    paths, with one device and inode. ``of_parent``: this function for the parent (cached by the caller:
    the files of one directory share their ancestors, so each file costs one stat)."""
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if path == "/":
        return (st.st_dev, st.st_ino), {(st.st_dev, st.st_ino): ()}
    name = os.path.basename(path)
    nearest, above = of_parent(os.path.dirname(path))
    found = {key: (*rest, name) for key, rest in above.items()}
    if st is None:
        return nearest, found
    found[(st.st_dev, st.st_ino)] = ()   # (the nearest place is the one that counts)
    return (st.st_dev, st.st_ino), found


def _overlap(a: str, b: str, ancestry) -> tuple[str, bool] | None:
    """How two real paths meet: ("same", through) or ("inside", through) (one holds the other), None when
    apart. ``through``: seen only by where they are on a local file system (a bind mount), not by their
    spelling: the nearest existing directory of one is a directory the other passes through, by device and
    inode, and the rest of the first path leads into the other's or out of it. Only the nearest existing
    directories are looked at: below a farther directory both pass through, the same names may lead to
    different directories (a bind mount that does not carry the mounts under its source).
    ``ancestry``: ``_ancestry`` (cached by the caller), or None where paths are compared by their
    spelling only (not a local file system)."""
    if a == b:
        return "same", False
    if _inside(a, b) or _inside(b, a):
        return "inside", False
    if ancestry is None:
        return None
    (near_a, of_a), (near_b, of_b) = ancestry(a), ancestry(b)
    for mine, other in ((of_a[near_a], of_b.get(near_a)), (of_a.get(near_b), of_b[near_b])):
        if mine is not None and other is not None:
            n = min(len(mine), len(other))
            if mine[:n] == other[:n]:
                return ("same" if mine == other else "inside"), True
    return None


def bind(flow: assembly.Flow, input_path: str, output_paths: dict[str, str], trap: str | None = None,
         overwrite: bool = False, work_dir: str | None = None, checkpoint_dir: str | None = None,
         engine: str = "local", *, fs, incremental: bool = False, locks: OutputLocks | None = None) -> Taps:
    """The run's taps: the flow's input and outputs bound to paths, every path checked (``JobError``).
    ``incremental``: read only what is new since the outputs' last run (``logetl.incremental``). ``locks``
    takes the outputs for this run (``OutputsHeld`` when another run has them); the caller releases it (a
    run does, ``run_flow``). Without ``locks`` the outputs are only checked: a caller that binds and does
    not run (``explain``, a test) holds nothing it would have to let go."""
    _check_given(flow, output_paths, {**output_paths, "trap": trap, "work-dir": work_dir,
                                      "checkpoint-dir": checkpoint_dir})
    try:
        files = inputs.resolve(input_path, fs)
    except inputs.InputError as exc:
        raise JobError(str(exc), "input") from None
    bound = _bind_checkpoint(flow, checkpoint_dir, fs)
    identity = flow_identity(flow.name, flow.explain(), engine, files, output_paths,
                             {"trap": fs.abspath(trap) if trap else None,
                              "checkpoint_dir": fs.abspath(checkpoint_dir) if checkpoint_dir else None}, fs)
    _check_work_dir(work_dir, fs)
    work = WorkDir(default_path(output_paths[min(output_paths)], work_dir, fs), identity, bound, fs)
    work.check()
    taps_out = list(output_paths.items()) + ([("trap", trap)] if trap else [])
    # held until the outputs are published (or the run has failed and cleaned up, ``run_flow``): a second
    # run on these outputs stops here, before it reads their state or touches the working directory
    if locks is not None:
        locks.acquire(taps_out, fs)
    # an earlier run of this very flow that died while (or after) publishing its outputs may have published
    # some: those still holding what it published are this flow's, and the rerun replaces them
    carry = work.replaceable([path for _, path in taps_out])
    plan = None
    if incremental:
        from logetl import incremental as inc

        # the outputs' own state says which runs they hold and how to roll one back: no carry is needed
        carry = {}
        plan = inc.plan(flow, files, taps_out, overwrite)
    places = _Places(fs)
    owned = [("--work-dir" if work_dir else "working directory", work_dir or work.path, places.real(work.path))] + [
        ("--checkpoint-dir", d, places.real(d)) for d in bound.values()]
    real_files = [(f, places.real(f)) for f in files if f != inputs.STDIN]
    places.check_owned_apart(owned)
    notices = _check_outputs(flow, taps_out, owned, real_files, places, overwrite, carry, plan, fs)
    places.check_inputs_outside(owned, real_files)
    if plan is not None:
        return Taps(inputs=files, outputs=dict(output_paths), trap=trap, work=work, overwrite=overwrite,
                    carry=carry, input_bytes=plan.bytes_to_read, incremental=plan, ranges=plan.ranges, locks=locks)
    # (the sizes the identity holds: a second status query a file cost a round trip each on Spark)
    sizes = None if inputs.STDIN in files else [i["size"] for i in identity["inputs"]]
    return Taps(inputs=files, outputs=dict(output_paths), trap=trap, work=work, overwrite=overwrite,
                carry=carry, input_bytes=sum(sizes or []), input_sizes=sizes, notices=notices, locks=locks)


def _check_given(flow: assembly.Flow, output_paths: dict[str, str], given: dict) -> None:
    """The outputs given are the flow's, and no path is empty (an unset shell variable: it would mean the
    current directory, or fail oddly)."""
    wanted = sorted(s.tap for s in flow.sinks)
    if sorted(output_paths) != wanted:
        raise JobError(f"flow {flow.name} writes output{'s' if len(wanted) > 1 else ''} {', '.join(wanted)}"
                       f" (given: {', '.join(sorted(output_paths)) or 'none'})", "output")
    for name, path in given.items():
        if path == "":
            raise JobError(f"{name} is an empty path", name)


def _bind_checkpoint(flow: assembly.Flow, checkpoint_dir: str | None, fs) -> dict[str, str]:
    """``--checkpoint-dir``: the flow's one checkpoint -> the directory, checked as the outputs and
    --work-dir are, before anything runs (a read-only one failed the run after its first step, exit 1)."""
    if not checkpoint_dir:
        return {}
    checkpoints = [n.name for n in flow.nodes if isinstance(n, assembly.Checkpoint)]
    if len(checkpoints) != 1:
        raise JobError(f"flow {flow.name} has {'no checkpoint' if not checkpoints else 'several checkpoints'}"
                       " to keep", "checkpoint-dir")
    problem = checkpoint_dir_problem(checkpoint_dir, fs)
    if problem:
        raise JobError(problem, "checkpoint-dir")
    for problem in (fs.non_directory_ancestor(fs.join(checkpoint_dir, "x")),
                    fs.writable_ancestor(fs.join(checkpoint_dir, "x"))):
        if problem:
            raise JobError(f"--checkpoint-dir {checkpoint_dir!r}: cannot make a directory in {problem!r}",
                           "checkpoint-dir")
    return {checkpoints[0]: checkpoint_dir}


def _check_work_dir(work_dir: str | None, fs) -> None:
    """``--work-dir``: a directory, or one that can be made."""
    if not work_dir:
        return
    if fs.exists(work_dir) and not fs.isdir(work_dir):
        raise JobError(f"--work-dir {work_dir!r} exists and is not a directory", "work-dir")
    for problem in (fs.non_directory_ancestor(fs.join(work_dir, "x")), fs.writable_ancestor(
            fs.join(work_dir, "x"))):
        if problem:
            raise JobError(f"--work-dir {work_dir!r}: cannot make a directory in {problem!r}", "work-dir")


class _Places:
    """Where a run's paths are, to tell whether two of them overlap: a local path, Spark's too (file:, what
    its Hadoop file system makes of a path without a scheme), by its real path (symbolic links resolved)
    and, through a bind mount, by device and inode (``_overlap``); a path of another file system as that
    file system spells it. Each real path's ``_ancestry`` is looked up once for all the checks."""

    def __init__(self, fs):
        self.fs = fs
        self.known: dict[str, tuple] = {}
        self.real_dirs: dict[str, str] = {}
        self.parent_meets: dict[tuple[str, str], tuple | None] = {}

    def real(self, p: str) -> str:
        # (Hadoop spells a local path unencoded: read as a URI, a name holding %41 was another file's)
        local = self.fs.local(p)
        if local is None:
            return self.fs.abspath(p)
        # the files of one directory resolve its path once: a name that is no symbolic link is itself
        # below its directory's real path (one lstat a file, not one per component of its path)
        head, tail = os.path.split(os.path.abspath(local))
        if head not in self.real_dirs:
            self.real_dirs[head] = os.path.realpath(head)
        real = os.path.join(self.real_dirs[head], tail)
        return real if tail and not os.path.islink(real) else os.path.realpath(local)

    def ancestry(self, p: str) -> tuple:
        if p not in self.known:
            self.known[p] = _ancestry(p, self.ancestry)
        return self.known[p]

    def meet(self, a: str, b: str) -> tuple[str, bool] | None:
        """``_overlap``, by where they are if both are local."""
        return _overlap(a, b, self.ancestry if a.startswith("/") and b.startswith("/") else None)

    def overlap(self, a: str, b: str) -> str | None:
        """"" or " (through a mount)" when they overlap, else None."""
        met = self.meet(a, b)
        return None if met is None else " (through a mount)" if met[1] else ""

    def file_overlap(self, real_f: str, d: str) -> str | None:
        """``overlap`` of an input file and a directory, first by the file's directory (once for all its
        files): what is apart from it is apart from each file in it."""
        key = (os.path.dirname(real_f), d)
        if key not in self.parent_meets:
            self.parent_meets[key] = self.meet(*key)
        return None if self.parent_meets[key] is None else self.overlap(real_f, d)

    def check_owned_apart(self, owned: list[tuple[str, str, str]]) -> None:
        """The working directory and the checkpoint directories (option, as given, real) are apart."""
        for i, (option, given, mine) in enumerate(owned):
            for other, other_given, theirs in owned[i + 1:]:
                through = self.overlap(mine, theirs)
                if through is not None:
                    raise JobError(f"{option} {given!r} and {other} {other_given!r} overlap{through}: keep them "
                                   "apart", option.lstrip("-"))

    def check_inputs_outside(self, owned: list[tuple[str, str, str]], real_files: list[tuple[str, str]]) -> None:
        """No input file is inside the working directory or a checkpoint directory."""
        for option, given, mine in owned:
            for f, real_f in real_files:
                through = self.file_overlap(real_f, mine)
                if through is not None:
                    raise JobError(f"{option} {given!r} contains input file {f!r}{through}", option.lstrip("-"))


def _check_outputs(flow: assembly.Flow, taps_out: list[tuple[str, str]], owned: list, real_files: list,
                   places: _Places, overwrite: bool, carry: dict, plan, fs) -> list[str]:
    """Each output (and the trap): apart from the others, from the working and checkpoint directories and
    from the input files, and usable (``outputs.check_output``: without --overwrite, only what an earlier
    run of the flow published, ``carry``, or the incremental ``plan``'s outputs may be non-empty). Returns
    the notices of what --overwrite removes from a partitioned output."""
    placed: list[tuple[str, str, str]] = []
    notices: list[str] = []
    layouts = {s.tap: (s.partition_by, s.format) for s in flow.sinks if s.partition_by}
    for tap, path in taps_out:
        where = places.real(path)
        for other, other_path, theirs in placed:
            met = places.meet(where, theirs)
            if met == ("same", False):
                raise JobError(f"{tap} and {other} are the same path {path!r}", tap)
            if met == ("same", True):
                raise JobError(f"{other} {other_path!r} and {tap} {path!r} are the same directory (through a "
                               "mount): keep them apart", tap)
            if met is not None:
                raise JobError(f"{other} {other_path!r} and {tap} {path!r} overlap"
                               f"{' (through a mount)' if met[1] else ''}: keep them apart", tap)
        placed.append((tap, path, where))
        outputs.check_output(path, overwrite or path in carry or (plan is not None and fs.abspath(path) in plan.owned),
                             tap, fs, *layouts.get(tap, ((), "tsv")))
        if overwrite and tap in layouts and path not in carry and plan is None and fs.isdir(path):
            # --overwrite of a partitioned output replaces the partitions the run writes and keeps the
            # others; what is of another shape (partitioned by other fields, unpartitioned, another format)
            # it removes, which the user is told before it happens
            notices.extend(_reshaped(tap, path, *layouts[tap], fs))
        for option, given, mine in owned:
            through = places.overlap(mine, where)
            if through is not None:
                raise JobError(f"{option} {given!r} and {tap} {path!r} overlap{through}: keep them apart", tap)
        for f, real_f in real_files:
            through = places.file_overlap(real_f, where)
            if through is not None:
                raise JobError(f"{tap} {path!r} contains input file {f!r}{through}", tap)
    return notices


def _reshaped(tap: str, path: str, partition_by: tuple[str, ...], format: str, fs) -> list[str]:
    """The notice of what --overwrite removes from the partitioned output at ``path``: the entries that are
    not part of a ``format`` output partitioned by ``partition_by`` (none: no notice)."""
    stale = sorted(outputs.layout_scan(path, partition_by, format, fs)[1])
    if not stale:
        return []
    shown = ", ".join(repr(e) for e in stale[:3]) + (f" and {len(stale) - 3} more" if len(stale) > 3 else "")
    return [f"--overwrite removes from {tap} {path!r} what is not part of {outputs.layout_name(partition_by, format)}: "
            f"{shown}"]


def program_flow(program: str, log_format=None) -> assembly.Flow:
    """The program's flow for a log format; a format without a field the program needs is refused
    (``JobError``, naming the field)."""
    fmt = log_format if isinstance(log_format, formats.LogFormat) or log_format is None \
        else formats.compile_format(log_format)
    try:
        return programs.get(program, fmt)
    except assembly.MissingField as exc:
        have = ", ".join(fmt.fields)
        raise JobError(f"program {program} needs field {exc.field!r}, and the log format has none "
                       f"(its fields: {have}; {program} needs {', '.join(programs.NEEDS[program])})",
                       "format") from None


def run_program(program: str, input_path: str, output_paths: dict[str, str], *, log_format=None,
                **options) -> FlowRun:
    """Runs one of the programs logetl ships (``run_flow``'s options). ``log_format``: a
    ``formats.LogFormat``, or a preset name or format string (default ``combined``)."""
    return run_flow(program_flow(program, log_format), input_path, output_paths, **options)


def monitor_enabled() -> bool:
    """LOGETL_MONITOR: on (the default) or off; anything else is refused rather than read as on."""
    return settings.MONITOR.read()


def run_flow(flow: assembly.Flow, input_path: str, output_paths: dict[str, str], *, engine: str = "local",
             trap: str | None = None, overwrite: bool = False, work_dir: str | None = None,
             checkpoint_dir: str | None = None, listener: FlowListener | None = None,
             engine_options: dict | None = None, application: str | None = None,
             tags: dict | None = None, monitor: bool | None = None, quiet: bool = False,
             max_malformed: float | None = None, incremental: bool | str = False,
             output_format: str | None = None, header: bool | None = None) -> FlowRun:
    """Runs a flow. Unless ``monitor`` is false (or LOGETL_MONITOR=off), the run's documents go to the
    monitor (``logetl.monitor.reporter``). ``incremental``: read only the complete lines that are new since
    the outputs' last run and add their records as new parts (``logetl.incremental``; ``incremental.PER_RUN``:
    the same, and operators that need all of the data see each run's new lines, whose parts the caller
    merges). ``output_format``:
    every sink writes it (``tsv``, ``csv``, ``parquet``, ``jsonl``; as ``--output-format``). ``header``: every TSV
    and CSV sink starts its part files with the field names (True) or not (False; as ``--header`` /
    ``--no-header``; None: each sink's own choice, else its format's default). ``engine_options``: see
    ``ENGINE_OPTIONS``. Every argument is checked before anything runs or is made (``UsageError``)."""
    get_engine(engine)          # an unknown engine, named
    input_path, trap, work_dir, checkpoint_dir = (_path(p) for p in (input_path, trap, work_dir, checkpoint_dir))
    if isinstance(output_paths, dict):
        output_paths = {tap: _path(p) for tap, p in output_paths.items()}
    _check_options(input_path, output_paths,
                   {"overwrite": overwrite, "quiet": quiet,
                    "incremental": True if isinstance(incremental, str) and incremental == "per-run" else incremental,
                    **({"monitor": monitor} if monitor is not None else {})},
                   {"trap": trap, "work_dir": work_dir, "checkpoint_dir": checkpoint_dir},
                   {"application": application}, tags)
    engine_options = engine_options_for(engine, engine_options)
    if max_malformed is not None and not (isinstance(max_malformed, (int, float)) and not isinstance(max_malformed, bool)
                                          and 0 <= max_malformed <= 1):    # NaN too: it would never trigger
        raise UsageError(f"max_malformed must be a fraction between 0 and 1, not {max_malformed!r}")
    if output_format is not None:
        try:
            flow.set_output_format(output_format)
        except assembly.AssemblyError as exc:
            raise UsageError(str(exc)) from None
    if header is not None:
        if not isinstance(header, bool):
            raise UsageError(f"header must be True or False, not {header!r}")
        try:
            flow.set_header(header)
        except assembly.AssemblyError as exc:
            raise UsageError(f"--header: {exc}" if header else f"--no-header: {exc}") from None
    if engine == "local" and any(s.format == "parquet" for s in flow.sinks):
        from logetl.io.writers import parquet_needs_arrow, start_parquet_import

        if parquet_needs_arrow(flow):
            start_parquet_import()
    if engine == "spark" and input_path == inputs.STDIN:     # before Spark starts (seconds)
        raise UsageError(inputs.STDIN_LOCAL_ONLY)
    if monitor is None:
        monitor = monitor_enabled()
    if monitor:
        # where the run's documents are POSTed, checked before the run (else the sending thread failed
        # mid-run with a traceback)
        settings.MONITOR_URL.read()
    if incremental:
        from logetl.incremental import refuse

        refuse(flow, engine, input_path, per_run=incremental == "per-run")
    runner = get_engine(engine)(**engine_options)
    run = None
    locks = OutputLocks()
    try:
        taps = bind(flow, input_path, output_paths, trap, overwrite, work_dir, checkpoint_dir, engine,
                    fs=runner.filesystem(), incremental=incremental, locks=locks)
        taps.max_malformed = max_malformed
        listeners = [listener or FlowListener()]
        if monitor:
            from logetl.monitor.reporter import MonitorListener

            fs = runner.filesystem()   # lineage: the files read and the directories written, absolute
            listeners.append(MonitorListener(flow, application=application, tags=tags, quiet=quiet,
                                             inputs=[fs.abspath(f) for f in taps.inputs[:1000] if f != "-"],
                                             outputs={t: fs.abspath(p) for t, p in taps.outputs.items()}))
        # what the monitor's run comparison shows: inputs, options and the flow definition's hash
        run = FlowRun(program=flow.name, engine=runner.name)
        formats_read = [n.format.name for n in flow.nodes if isinstance(n, assembly.Parse)]
        run.describe(taps.work.identity, {"engine": engine, "overwrite": overwrite, "max_malformed": max_malformed,
                                          **({"incremental": True} if incremental else {}),
                                          "format": ", ".join(formats_read) or "combined",
                                          **engine_options})
        return runner.run(flow, taps, Listeners(listeners), run=run)
    finally:
        try:
            runner.shutdown()
        except KeyboardInterrupt as exc:
            if run is None or run.status != SUCCESSFUL:
                raise
            # the outputs are committed: an interrupt while the engine stops changes nothing of the result
            run.notices.append(f"{stop_reason(exc)} after the outputs were committed")
        finally:
            try:
                locks.release()
            except KeyboardInterrupt as exc:
                if run is None or run.status != SUCCESSFUL:
                    raise
                run.notices.append(f"{stop_reason(exc)} after the outputs were committed")
