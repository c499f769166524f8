"""``logetl report --incremental`` killed with SIGKILL at each of its file-system mutations
(``tests/support/crashpoint.py``), as ``tests/safety/test_crash_points.py`` kills the programs: after every
kill report.json is the previous run's or the new one, whole; the same command run again writes the bytes
of a report over every line, and leaves nothing behind but the report and its state."""
from __future__ import annotations

import os
import shutil
import signal

import forkserver
import pytest

from conftest import logetl
from test_report_incremental import sample_parts

pytestmark = pytest.mark.slow

def _run(root, crash_at: int = 0, count_file=None):
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "LOGETL_CRASH_AT": str(crash_at),
           "LOGETL_MONITOR": "off", **({"LOGETL_CRASH_COUNT": str(count_file)} if count_file else {})}
    cmd = ["report", "-q", "--input", "logs/access.log*", "--output", "report", "--incremental"]
    return forkserver.run(cmd, cwd=root, env=env, timeout=300)   # crashpoint.py in a fork of a warm process


def _tree(root) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, ds, fs in os.walk(root) for n in ds + fs)


def test_a_run_killed_at_every_file_system_mutation_is_made_whole_by_the_next(tmp_path, sample):
    one, two = sample_parts(2, lines=400)
    base = tmp_path / "base"
    (base / "logs").mkdir(parents=True)
    (base / "logs" / "access.log").write_bytes(one)
    assert _run(base).returncode == 0
    before = (base / "report" / "report.json").read_bytes()
    with open(base / "logs" / "access.log", "ab") as f:
        f.write(two)
    want = logetl("report", "-q", "--input", str(base / "logs" / "access.log"), "--output",
                  str(tmp_path / "full"), env={"LOGETL_MONITOR": "off"})
    assert want.returncode == 0, want.stderr.decode()
    expected = (tmp_path / "full" / "report.json").read_bytes()
    assert expected != before

    # the run over the new lines, counted once, then killed at each of its mutations in a copy of ``base``
    # at one same place (the state's paths are absolute)
    root = tmp_path / "run"
    shutil.copytree(base, root)
    assert _run(root, count_file=tmp_path / "count").returncode == 0
    mutations = int((tmp_path / "count").read_text())
    assert (root / "report" / "report.json").read_bytes() == expected
    clean = _tree(root)
    assert mutations > 10
    violations = []
    for n in range(1, mutations + 1):
        shutil.rmtree(root)
        shutil.copytree(base, root)
        killed = _run(root, crash_at=n)
        assert killed.returncode == -signal.SIGKILL, (n, killed.returncode, killed.stderr)
        if (root / "report" / "report.json").read_bytes() not in (before, expected):
            violations.append(f"kill at mutation {n}: report.json is partial")
        again = _run(root)
        if again.returncode != 0:
            violations.append(f"kill at mutation {n}: the rerun exited {again.returncode}: "
                              f"{again.stderr.decode()[-300:]}")
            continue
        if (root / "report" / "report.json").read_bytes() != expected:
            violations.append(f"kill at mutation {n}: after the rerun report.json differs from the full run's")
        if _tree(root) != clean:
            violations.append(f"kill at mutation {n}: the rerun left {sorted(set(_tree(root)) ^ set(clean))}")
        if (root / "logs" / "access.log").read_bytes() != one + two:
            violations.append(f"kill at mutation {n}: the log changed")
    assert not violations, "\n".join(violations)
