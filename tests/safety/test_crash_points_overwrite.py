"""Crash safety of ``--overwrite`` over what the user already has, tested at every file-system mutation
(``tests/support/crashpoint.py``): ``generate`` over a user's file, a partitioned output over an earlier one.
Killed anywhere, what is there is the old or the whole new, never a mix, and the same command run again
gives the new. (The three programs killed, or stopped with SIGTERM, at every mutation: test_crash_points.py.)
"""
from __future__ import annotations

import os
import shutil
import signal

import pytest

from conftest import read
from test_crash_points import _run, _tree

#: a run per file-system mutation of each command: minutes
pytestmark = pytest.mark.slow


def test_generate_killed_at_every_mutation_leaves_the_old_file_or_the_whole_new_one(tmp_path):
    """``generate --overwrite`` over a user's file: killed anywhere, the file is the old bytes or the whole
    new log, and the same command again gives the new log and nothing else."""
    cmd = ["generate", "--lines", "3000", "--seed", "3", "--overwrite", "access.log"]
    ref = tmp_path / "reference"
    ref.mkdir()
    first = _run(cmd, ref, count_file=tmp_path / "count")
    assert first.returncode == 0, first.stderr
    new, old = read(ref / "access.log"), b"the user's old log\n"
    mutations = int(read(tmp_path / "count"))
    assert mutations >= 2
    for n in range(1, mutations + 1):
        root = tmp_path / f"n{n}"
        root.mkdir()
        (root / "access.log").write_bytes(old)
        killed = _run(cmd, root, crash_at=n)
        assert killed.returncode == -signal.SIGKILL, (n, killed.stderr)
        assert read(root / "access.log") in (old, new), n
        assert _run(cmd, root).returncode == 0
        assert read(root / "access.log") == new and _tree(root) == ["access.log"], (n, _tree(root))


PARTITIONED_FLOW = """import logetl.api as L


def flow(fmt):
    logs = L.read(fmt)
    dated = logs.derive(day=L.day(L.col("time")), kind=L.col("request").split_part(" ", 2), name="dated")
    return L.Flow("parts", [dated.select("day", "kind", "ip", "size").write("out", partition_by=["day", "kind"])])
"""


def _line(ip: str, day: str) -> bytes:
    return f'{ip} - - [{day}/May/2015:10:00:00 +0000] "GET / HTTP/1.1" 200 10 "-" "a"\n'.encode()


def _files(path) -> dict[str, bytes]:
    return {os.path.relpath(os.path.join(d, n), path): read(os.path.join(d, n))
            for d, _, names in os.walk(path) for n in names}


def _partitions(files: dict[str, bytes]) -> dict[str, dict[str, bytes]]:
    """The partitions (directories holding part files) of an output's files, with their files."""
    out: dict[str, dict[str, bytes]] = {}
    for rel, data in files.items():
        if os.path.basename(rel).startswith("part-") and "/" in rel:
            out.setdefault(os.path.dirname(rel), {})[os.path.basename(rel)] = data
    return out


@pytest.mark.parametrize("earlier", ["mixed", "flat"])
def test_a_partitioned_overwrite_killed_anywhere_leaves_every_partition_whole(tmp_path, earlier):
    """``--overwrite`` of a partitioned output over an earlier one that holds what is not of its shape: a
    kill at any mutation leaves each partition old or new (whole), the kept partition and the user's files
    untouched; the same command again gives this sink's partitions only and leaves nothing beside them."""
    from logetl.job import run_flow

    template = tmp_path / "template"
    template.mkdir()
    (template / "flow.py").write_text(PARTITIONED_FLOW)
    (template / "notes.txt").write_bytes(b"the user's")
    (template / "a.log").write_bytes(_line("1.1.1.1", "17") + _line("2.2.2.2", "18"))
    (template / "b.log").write_bytes(_line("3.3.3.3", "18") + _line("4.4.4.4", "19"))
    if earlier == "mixed":    # this sink's partitions and what an unpartitioned and a response= output left
        import importlib.util

        spec = importlib.util.spec_from_file_location("crash_parts_flow", template / "flow.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        run_flow(module.flow(None), str(template / "a.log"), {"out": str(template / "out")}, monitor=False)
        (template / "out" / "part-00000").write_bytes(b"old\n")
        (template / "out" / "response=200").mkdir()
        (template / "out" / "response=200" / "part-00000").write_bytes(b"old\n")
    else:                     # an unpartitioned output
        (template / "out").mkdir()
        (template / "out" / "part-00000").write_bytes(b"old\n")
        (template / "out" / "_SUCCESS").write_bytes(b"")
    old = _files(template / "out")
    cmd = ["run", "flow.py", "-q", "--overwrite", "--input", "b.log", "--output", "out=out"]
    env = {"LOGETL_MONITOR": "off"}

    ref = tmp_path / "reference"
    shutil.copytree(template, ref)
    first = _run(cmd, ref, count_file=tmp_path / "count", env=env)
    assert first.returncode == 0, first.stderr
    new = _files(ref / "out")
    kept = {"day=2015-05-17/kind=%2F/part-00000": b"1.1.1.1\t10\n"} if earlier == "mixed" else {}
    assert new == {"_SUCCESS": b"", **kept, "day=2015-05-18/kind=%2F/part-00000": b"3.3.3.3\t10\n",
                   "day=2015-05-19/kind=%2F/part-00000": b"4.4.4.4\t10\n"}
    clean_tree = _tree(ref)
    mutations = int(read(tmp_path / "count"))
    old_parts, new_parts = _partitions(old), _partitions(new)

    violations = []
    for n in range(1, mutations + 1):
        root = tmp_path / f"n{n}"
        shutil.copytree(template, root)
        killed = _run(cmd, root, crash_at=n, env=env)
        assert killed.returncode == -signal.SIGKILL, (n, killed.returncode, killed.stderr)
        now = _files(root / "out") if (root / "out").exists() else {}
        for leaf, held in _partitions(now).items():
            if held not in (old_parts.get(leaf), new_parts.get(leaf)):
                violations.append(f"kill at mutation {n}: partition {leaf} holds {sorted(held)}, neither old nor new")
        for rel, data in kept.items():
            if now.get(rel) != data:
                violations.append(f"kill at mutation {n}: the kept partition's {rel} is gone or changed")
        if read(root / "notes.txt") != b"the user's":
            violations.append(f"kill at mutation {n}: the user's notes.txt changed")
        again = _run(cmd, root, env=env)
        if again.returncode != 0:
            violations.append(f"kill at mutation {n}: the rerun exited {again.returncode}: "
                              f"{again.stderr.decode()[-300:]}")
        elif _files(root / "out") != new or _tree(root) != clean_tree:
            violations.append(f"kill at mutation {n}: after the rerun "
                              f"{sorted(set(_tree(root)) ^ set(clean_tree))} differ")
        shutil.rmtree(root)
    assert violations == [], "\n".join(violations)
