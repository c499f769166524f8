"""Crash safety, tested at every file-system mutation.

A run is killed with SIGKILL at its 1st, 2nd, ... N-th file-system mutation (``tests/support/crashpoint.py``, an
audit hook), for every N until a run completes. After each kill no output (nor the trap) holds a partial
result, nothing of the user's is gone, and the same command run again exits 0 with byte-identical outputs
and trap, leaving nothing of logetl's behind but the outputs. (``--overwrite`` over what the user already
has, killed at every mutation: test_crash_points_overwrite.py.) Each run is a fork of a process that has
imported logetl once (``tests/support/forkserver.py``): the command's start, not Python's.
"""
from __future__ import annotations

import os
import shutil
import signal

import forkserver
import pytest

from conftest import CORPUS, parts, read

#: a run per file-system mutation of each program: minutes
pytestmark = pytest.mark.slow

LOG = read(os.path.join(CORPUS, "corpus.log"))


def _layout(program: str, root):
    """The command (relative paths, run in ``root``), its output directories, and the user's files that
    must survive whatever happens. Join keeps its input and a file of the user's inside --work-dir."""
    scratch = root / "scratch"
    scratch.mkdir()
    (root / "notes.txt").write_bytes(b"the user's")
    (scratch / "keep.txt").write_bytes(b"also the user's")
    if program.startswith("branch"):
        (root / "in.log").write_bytes(LOG)
        cmd = ["branch", "-q", "--input", "in.log", "--output1", "o1", "--output2", "o2", "--trap", "trap"]
        if program == "branch-parquet":     # written by the background encoder: the rerun's bytes too
            cmd += ["--output-format", "parquet"]
        outs = ["o1", "o2", "trap"]
        user = {"notes.txt": b"the user's", "scratch/keep.txt": b"also the user's", "in.log": LOG}
    else:
        (scratch / "in.log").write_bytes(LOG)
        cmd = ["join", "-q", "--trap", "trap", "--work-dir", "scratch", "scratch/in.log", "o1"]
        outs = ["o1", "trap"]
        user = {"notes.txt": b"the user's", "scratch/keep.txt": b"also the user's", "scratch/in.log": LOG}
    return cmd, outs, user


def _run(cmd, root, crash_at: int = 0, count_file=None, env: dict | None = None):
    # each layout has its own monitor store, made by its first run as a user's would be: the counting run
    # and every killed run then make the same mutations
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "LOGETL_CRASH_AT": str(crash_at),
           "LOGETL_HOME": str(root.parent / f"{root.name}-home"), **(env or {})}
    if count_file:
        env["LOGETL_CRASH_COUNT"] = str(count_file)
    return forkserver.run(cmd, cwd=root, env=env, timeout=300)   # crashpoint.py in a fork of a warm process


def _tree(root) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, ds, fs in os.walk(root) for n in ds + fs)


@pytest.mark.parametrize("program", ["branch", "branch-parquet", "join"])
def test_a_kill_at_every_file_system_mutation_loses_nothing_and_the_rerun_gives_the_same_bytes(
        tmp_path, program):
    ref = tmp_path / "reference"
    ref.mkdir()
    cmd, outs, user = _layout(program, ref)
    first = _run(cmd, ref, count_file=tmp_path / "count")
    assert first.returncode == 0, first.stderr
    mutations = int(read(tmp_path / "count"))
    expected = {o: parts(ref / o) for o in outs}
    assert expected["trap"] and all(expected.values())
    clean_tree = _tree(ref)
    assert mutations > 20

    violations = []
    for n in range(1, mutations + 1):
        root = tmp_path / f"n{n}"
        root.mkdir()
        _layout(program, root)
        killed = _run(cmd, root, crash_at=n)
        assert killed.returncode == -signal.SIGKILL, (n, killed.returncode, killed.stderr)
        for o in outs:       # whole or absent
            if (root / o).exists() and parts(root / o) != expected[o]:
                violations.append(f"kill at mutation {n}: {o} holds a partial or wrong result")
        for name, data in user.items():
            if not (root / name).is_file() or read(root / name) != data:
                violations.append(f"kill at mutation {n}: the user's {name} is gone or changed")
        again = _run(cmd, root)
        if again.returncode != 0:
            violations.append(f"kill at mutation {n}: the rerun exited {again.returncode}: "
                              f"{again.stderr.decode()[-300:]}")
        else:
            for o in outs:
                if parts(root / o) != expected[o]:
                    violations.append(f"kill at mutation {n}: after the rerun {o} differs")
            if _tree(root) != clean_tree:
                violations.append(f"kill at mutation {n}: the rerun left {sorted(set(_tree(root)) ^ set(clean_tree))}")
        shutil.rmtree(root)
    assert violations == [], "\n".join(violations)


def _working_directory(program: str, root) -> str:
    """Where the run's working directory is (relative to ``root``): beside its first output, or under
    ``--work-dir`` (Join: ``scratch/logetl-work-DIGEST``)."""
    from logetl.io.fs import LOCAL
    from logetl.workdir import default_path

    work_dir = None if program.startswith("branch") else str(root / "scratch")
    return os.path.relpath(default_path(str(root / "o1"), work_dir, LOCAL), root)


def _sigterm_template(program: str, base):
    """The place each SIGTERM run starts from (copied), its command, outputs and the user's files. Branch
    "again" runs over an earlier Branch's outputs (of other lines) with --overwrite, and an earlier failed
    run's working directory: the windows that retire a working directory and replace outputs."""
    template = base / "template"
    template.mkdir()
    cmd, outs, user = _layout(program, template)
    earlier = {}
    if program == "branch-again":
        (template / "in.log").write_bytes(LOG[:LOG.index(b"\n", len(LOG) // 3) + 1])
        assert _run(cmd, template).returncode == 0
        earlier = {o: parts(template / o) for o in outs}
        (template / "in.log").write_bytes(LOG)
        cmd = [*cmd, "--overwrite"]
        failed = _run(cmd, template, env={"LOGETL_FAIL_AT": "parse"})
        assert failed.returncode == 1 and (template / ".o1.logetl-work").is_dir(), failed.stderr
        assert {o: parts(template / o) for o in outs} == earlier
    return template, cmd, outs, user, earlier


@pytest.mark.parametrize("program", ["join", "branch-again"])
def test_a_sigterm_at_every_file_system_mutation_stops_the_run_and_the_rerun_gives_the_same_bytes(
        tmp_path, program):
    """SIGTERM (``timeout``, a service manager) at each mutation: the run stops with one line and exit 143
    (or, once its outputs are committed, completes: exit 0), never a traceback. Each output is whole (the
    earlier one or the new one) or absent, and beside them and the user's files the stop leaves at most
    the working directory, marked as logetl's: what may be restarted (a Join after its checkpoint) and,
    stopped while publishing, what tells the rerun that the outputs published are its own. No half-made or
    retired copy of it, no staging directory, no earlier output set aside, no temporary record, no lock
    file: those are made and renamed in blocks a stop waits for, or removed by the stop's own cleanup.
    The rerun gives the same bytes and leaves nothing but the outputs."""
    template, cmd, outs, user, earlier = _sigterm_template(program, tmp_path)
    ref = tmp_path / "reference"
    shutil.copytree(template, ref)
    first = _run(cmd, ref, count_file=tmp_path / "count")
    assert first.returncode == 0, first.stderr
    mutations = int(read(tmp_path / "count"))
    expected = {o: parts(ref / o) for o in outs}
    clean_tree = _tree(ref)
    stopped = {"logetl: terminated by SIGTERM; no output was committed",
               "logetl: terminated by SIGTERM while publishing the outputs; run the same command again to finish"}
    violations, codes = [], set()
    for n in range(1, mutations + 1):
        root = tmp_path / f"n{n}"
        shutil.copytree(template, root)
        ended = _run(cmd, root, crash_at=n, env={"LOGETL_CRASH_SIGNAL": "TERM"})
        err = ended.stderr.decode()
        codes.add(ended.returncode)
        if "Traceback" in err or ended.returncode not in (0, 143) or \
                (ended.returncode == 143 and err.splitlines()[-1] not in stopped):
            violations.append(f"SIGTERM at mutation {n}: exit {ended.returncode}: {err[-300:]}")
        for o in outs:
            if (root / o).exists() and parts(root / o) not in (expected[o], earlier.get(o)):
                violations.append(f"SIGTERM at mutation {n}: {o} holds a partial or wrong result")
            if ended.returncode == 0 and not (root / o).exists():
                violations.append(f"SIGTERM at mutation {n}: exit 0 without {o}")
            if err.endswith("no output was committed\n") and (root / o).exists() and parts(root / o) != earlier.get(o):
                violations.append(f"SIGTERM at mutation {n}: says no output was committed, but {o} is new")
        for name, data in user.items():
            if not (root / name).is_file() or read(root / name) != data:
                violations.append(f"SIGTERM at mutation {n}: the user's {name} is gone or changed")
        work = _working_directory(program, root)
        left = [e for e in _tree(root) if e.split(os.sep)[0] not in outs and e not in user and e != "scratch"]
        extra = [e for e in left if e != work and not e.startswith(work + os.sep)]
        if extra:
            violations.append(f"SIGTERM at mutation {n} (exit {ended.returncode}) left {extra}")
        if left and ".logetl-workdir" not in os.listdir(root / work):
            violations.append(f"SIGTERM at mutation {n}: the working directory left holds no marker")
        if ended.returncode == 0 and _tree(root) != clean_tree:
            violations.append(f"SIGTERM at mutation {n}: exit 0, but {sorted(set(_tree(root)) ^ set(clean_tree))}")
        if ended.returncode == 143:
            again = _run(cmd, root)
            if again.returncode != 0:
                violations.append(f"SIGTERM at mutation {n}: the rerun exited {again.returncode}: "
                                  f"{again.stderr.decode()[-300:]}")
            elif any(parts(root / o) != expected[o] for o in outs) or _tree(root) != clean_tree:
                violations.append(f"SIGTERM at mutation {n}: after the rerun the outputs or the tree differ")
        shutil.rmtree(root)
    assert violations == [], "\n".join(violations)
    assert codes == {0, 143}      # stopped before the commit, completed after it
